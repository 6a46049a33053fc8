"""Builds `twenty_questions.jsonl`, the held-out question set of the 20Q oracle (see README.md).

The questions below were written before the oracle's example phrasings and before any run of
the oracle on them; the expected answer of an attribute question is the knowledge base's value
of the attribute it paraphrases, for objects drawn with a fixed seed (ambiguous and unsure pairs skipped).
Re-running this script reproduces the file exactly: `python tests/envs/heldout/build_twenty_questions.py`.
"""

import json
import random
from pathlib import Path

from lmrl.envs.dialogue.knowledge import category_attribute, load_twenty_questions

# (attribute id, paraphrase a player might type) -- none is an attribute's canonical question.
ATTRIBUTE_QUESTIONS = [
    ("alive", "Is this a living thing?"), ("alive", "does it breathe"), ("alive", "Is it something that's alive?"),
    ("man_made", "Did people make it?"), ("man_made", "Is it manufactured?"), ("man_made", "is it artificial"),
    ("grows", "Does it get bigger over time by growing?"),
    ("held_in_one_hand", "Could I hold it in one hand?"), ("held_in_one_hand", "Is it handheld?"),
    ("fits_in_backpack", "Would it fit inside a school bag?"), ("fits_in_backpack", "Can you put it in a backpack?"),
    ("heavy", "Is it really heavy?"), ("heavy", "Would it be hard for one person to lift?"),
    ("made_of_metal", "Is it metal?"), ("made_of_metal", "Is it made out of metal?"),
    ("made_of_wood", "Is it wooden?"), ("made_of_wood", "is it made from wood"),
    ("made_of_plastic", "Is it plastic?"), ("made_of_plastic", "Is it mostly made of plastic?"),
    ("made_of_fabric", "Is it made of cloth?"), ("made_of_fabric", "Is it made of fabric or textile?"),
    ("made_of_glass", "Is it made of glass?"), ("made_of_paper", "Is it made out of paper?"),
    ("made_of_rubber", "Is it rubber?"), ("made_of_leather", "Is it made of leather?"),
    ("found_in_kitchen", "Would I find it in the kitchen?"), ("found_in_kitchen", "Is it kept in a kitchen?"),
    ("found_in_bedroom", "Would you find it in a bedroom?"), ("found_in_office", "Is it something you'd see in an office?"),
    ("found_in_garden", "Would you find it in a garden?"), ("found_outdoors", "Is it usually outside?"),
    ("found_in_water", "Does it live in water?"), ("found_on_farm", "Would you see it on a farm?"),
    ("found_in_school", "Would you find one in a school?"), ("found_in_sky", "Is it up in the sky?"),
    ("sold_in_stores", "Can I buy it at a store?"),
    ("edible", "Is it edible?"), ("edible", "Is it food?"), ("edible", "can I eat it"),
    ("used_for_drinking", "Do people drink out of it?"), ("wearable", "Is it something you wear?"),
    ("wearable", "Do you wear it?"), ("used_for_play", "Do people play with it?"),
    ("used_for_music", "Does it make music?"), ("used_for_music", "Is it used to play music?"),
    ("used_for_writing", "Do you write with it?"), ("used_for_cutting", "Can it cut things?"),
    ("used_for_cooking", "Is it used to cook?"), ("used_for_cleaning", "Do you clean with it?"),
    ("used_for_transport", "Is it a way to get around?"), ("used_for_transport", "Can it transport people?"),
    ("used_for_decoration", "Is it decorative?"), ("used_for_communication", "Do people use it to communicate?"),
    ("used_for_building", "Is it used for building things?"), ("used_for_digging", "Can you dig with it?"),
    ("used_for_sports", "Is it used in a sport?"), ("used_for_sitting", "Can you sit on it?"),
    ("electric", "Does it need electricity?"), ("electric", "Do you have to plug it in or charge it?"),
    ("needs_batteries", "Does it take batteries?"), ("has_screen", "Does it have a display screen?"),
    ("has_wheels", "Has it got wheels?"), ("has_wheels", "does it roll on wheels"),
    ("carries_many_people", "Can lots of people ride in it at once?"),
    ("has_engine", "Does it have a motor?"), ("has_engine", "Is it powered by an engine?"),
    ("has_legs", "Does it have legs?"), ("flies", "Does it fly?"), ("flies", "Can it go through the air?"),
    ("swims", "Is it able to swim?"), ("moves_by_itself", "Does it move on its own?"),
    ("sharp", "Does it have a sharp edge or point?"), ("soft", "Is it soft to the touch?"),
    ("round", "Is it round?"), ("round", "Is it shaped like a ball?"), ("long_and_thin", "Is it long and skinny?"),
    ("makes_sound", "Does it make noise?"), ("dangerous", "Is it dangerous?"),
    ("used_by_children", "Is it mostly for kids?"), ("found_in_most_homes", "Do most people have one at home?"),
    ("has_handle", "Has it got a handle?"), ("has_strings", "Does it have strings on it?"),
    ("blown_into", "Do you play it by blowing?"), ("struck_to_play", "Do you play it by hitting it?"),
    ("has_buttons", "Does it have buttons?"), ("gets_hot", "Can it get hot?"), ("gives_light", "Does it light up?"),
    ("gives_light", "Does it produce light?"), ("grows_on_trees", "Does it come from a tree?"),
    ("grows_underground", "Does it grow in the ground, under the soil?"), ("edible_raw", "Can it be eaten raw?"),
    ("sweet", "Is it sweet?"), ("usually_cooked", "Do you normally cook it first?"),
    ("has_fur", "Is it furry?"), ("has_fur", "does it have hair"), ("has_pockets", "Does it have pockets?"),
    ("comes_in_pairs", "Does it come as a pair?"), ("bounces", "Can it bounce?"), ("is_pet", "Is it a pet?"),
    ("is_pet", "Do people keep it as a pet?"), ("worn_on_head", "Do you wear it on your head?"),
    ("worn_on_feet", "Do you put it on your feet?"), ("worn_on_hands", "Do you wear it on your hands?"),
    ("worn_around_neck", "Do you wear it around your neck?"), ("keeps_you_warm", "Does it keep you warm?"),
    ("uses_ink", "Does it have ink in it?"), ("expensive", "Is it expensive?"),
    ("expensive", "Does it cost over a hundred dollars?"), ("red", "Is it red?"), ("yellow", "Is it yellow?"),
    ("green", "Is it green in color?"), ("white", "Is it white?"), ("brown", "Is it brown?"),
    ("is_liquid", "Is it a liquid?"),
    # Added after run 3 (see README.md) to reach 200 distinct questions.
    ("alive", "is it a living organism?"), ("made_of_metal", "Is it built from steel or iron?"),
    ("found_in_kitchen", "Is it a kitchen thing?"), ("edible", "Could you eat this?"),
    ("wearable", "Is it an item you put on your body?"), ("has_wheels", "Does it move on wheels?"),
    ("flies", "Is it able to fly?"), ("electric", "Does it run on electricity?"),
    ("has_screen", "Has it got a screen?"), ("sharp", "Is it sharp?"), ("soft", "Is it soft?"),
    ("makes_sound", "Does it make any sounds?"), ("has_legs", "Does it walk on legs?"),
    ("used_for_music", "Do musicians use it?"), ("sweet", "Does it taste sweet?"),
    ("found_outdoors", "Do you usually find it outdoors?"), ("heavy", "Does it weigh a lot?"),
    ("used_for_cooking", "Do you use it to prepare food?"), ("made_of_wood", "Is it carved or built from wood?"),
    ("colorful", "Is it very colorful?"), ("has_handle", "Does it have something to hold it by, like a handle?"),
    ("swims", "Can it swim in water?"), ("keeps_you_warm", "Would it keep me warm in winter?"),
]
# Size comparisons: (question, attribute, polarity): the answer is the attribute's value (polarity True) or its negation.
SIZE_QUESTIONS = [
    ("Is it bigger than a car?", "bigger_than_car", True), ("Is it smaller than a car?", "bigger_than_car", False),
    ("Is it larger than a person?", "bigger_than_person", True),
    ("Is it smaller than a human?", "bigger_than_person", False),
    ("is it bigger than a bread box", "bigger_than_breadbox", True),
    ("Is it smaller than a breadbox?", "bigger_than_breadbox", False),
    ("Is it smaller than my hand?", "smaller_than_hand", True),
    ("Is it bigger than your hand?", "smaller_than_hand", False),
]
CATEGORY_QUESTIONS = [
    ("Is it an animal?", "Animals"), ("Is it a type of animal?", "Animals"), ("Is it a fruit?", "Fruits"),
    ("Is it some kind of fruit?", "Fruits"), ("Is it a vegetable?", "Vegetables"), ("Is it a veggie?", "Vegetables"),
    ("Is it a vehicle?", "Vehicles"), ("Is it a piece of furniture?", "Furniture"), ("Is it furniture?", "Furniture"),
    ("Is it clothing?", "Clothes"), ("Is it an item of clothing?", "Clothes"),
    ("Is it a musical instrument?", "Musical Instruments"), ("Is it an instrument?", "Musical Instruments"),
    ("Is it an electronic device?", "Electronics"), ("Is it electronics?", "Electronics"),
    ("Is it jewelry?", "Jewelry"), ("Is it a piece of jewellery?", "Jewelry"), ("Is it a toy?", "Toys"),
    ("Is it an office supply?", "Office Supplies"), ("Is it stationery?", "Office Supplies"),
    ("Is it a kitchen utensil?", "Kitchen Tools"), ("Is it sports equipment?", "Sports"),
    ("Is it a garden tool?", "Garden Supplies"),
]
# (question, object it names): right when asked about that object, wrong for two others.
GUESSES = [
    ("Is it a dog?", "dog"), ("Is it a Cat?", "cat"), ("are you thinking of a horse", "horse"),
    ("Is it an apple?", "apple"), ("My guess is a banana.", "banana"), ("Is it bananas?", "banana"),
    ("Is it a bike?", "bicycle"), ("Is it an aeroplane?", "airplane"), ("Is it a plane?", "airplane"),
    ("Is the object a piano?", "piano"), ("Could it be a guitar?", "guitar"), ("Is it the television?", "television"),
    ("Is it a TV?", "television"), ("is it a smartphone", "cell phone"), ("Is it a laptop!", "laptop"),
    ("Is it a pair of scissors?", "scissors"), ("Is it a sofa?", "couch"), ("Is it a frying pan?", "frying pan"),
    ("I think it's a hammer.", "hammer"), ("Is it a teddy bear?", "teddy bear"), ("Is it a kite?", "kite"),
    ("Is it a necklace?", "necklace"), ("Is it a rake?", "rake"), ("Is it a tree?", "tree"),
    ("Is it the moon?", "moon"), ("Is it a carrot?", "carrot"), ("Is it a soccer ball?", "soccer ball"),
    ("Is it trousers?", "pants"), ("Is it a bunny?", "rabbit"), ("Is it a crayon?", "crayon"),
]
NON_KB_GUESSES = ["Is it a unicorn?", "Is it a dragon?", "Is it a spaceship?", "Is it a toothbrush?"]
UNMAPPABLE = [
    "asdf qwerty", "???", "What is it?", "Tell me the answer.", "Which object are you thinking of?",
    "Is it a cat, a dog, a car or a banana?", "Is it an apple or an orange?", "hello", "What's 2+2?",
    "What color is it?", "Where do you find it?", "How big is it?", "What is it made of?", "...", "Why?",
]


def build() -> list[dict]:
    kb = load_twenty_questions()
    rng = random.Random("lmrl-heldout-20q")
    items = []

    def add_attribute_items(question, attribute, polarity, per_value=2):
        for value in (True, False):
            pool = [o.name for o in kb.objects  # ambiguous and unsure (knowledge base v2) pairs are skipped
                    if kb.value(o.name, attribute) is value and not kb.is_ambiguous(o.name, attribute)]
            for name in rng.sample(pool, min(per_value if value else 1, len(pool))):
                answer = value if polarity else not value
                items.append({"object": name, "question": question, "answer": "Yes." if answer else "No.",
                              "about": attribute})

    for attribute, question in ATTRIBUTE_QUESTIONS:
        add_attribute_items(question, attribute, True, per_value=1)
    for question, attribute, polarity in SIZE_QUESTIONS:
        add_attribute_items(question, attribute, polarity)
    for question, category in CATEGORY_QUESTIONS:
        inside = [o.name for o in kb.in_category(category)]
        outside = [o.name for o in kb.objects if o.category != category]
        for name, answer in ((rng.choice(inside), "Yes."), (rng.choice(outside), "No.")):
            if answer == "No." and kb.value(name, category_attribute(category)) is not False:
                continue  # also in that category, or unsure (a tomato, "a fruit?"): no clear no
            items.append({"object": name, "question": question, "answer": answer, "about": f"category:{category}"})
    names = [o.name for o in kb.objects]
    for question, target in GUESSES:
        items.append({"object": target, "question": question, "answer": "Yes.", "about": "guess"})
        for name in rng.sample([n for n in names if n != target], 1):
            items.append({"object": name, "question": question, "answer": "No.", "about": "guess"})
    for question in NON_KB_GUESSES:
        items.append({"object": rng.choice(names), "question": question, "answer": "No.", "about": "guess"})
    for question in UNMAPPABLE:
        items.append({"object": rng.choice(names), "question": question, "answer": "I can't answer that.",
                      "about": "unmappable"})
    return items


if __name__ == "__main__":
    out = Path(__file__).with_name("twenty_questions.jsonl")
    items = build()
    out.write_text("".join(json.dumps(item) + "\n" for item in items), encoding="utf-8")
    print(f"wrote {len(items)} items to {out}")
