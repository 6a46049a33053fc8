"""Twenty Questions: the game's rules, the oracle's understanding (guesses, categories, size
comparisons, negation, unanswerable questions) and the exploits that must never win."""

import pytest

from lmrl.envs.dialogue.knowledge import category_attribute, load_twenty_questions
from lmrl.envs.dialogue.twenty_questions import NO, UNKNOWN, YES, TwentyQuestionsEnv, default_oracle

KB = load_twenty_questions()
NAMES = [o.name for o in KB.objects]


@pytest.fixture(scope="module")
def oracle():
    return default_oracle()


def play(secret: str, questions: list[str]):
    env = TwentyQuestionsEnv()
    history, info = env.reset(options={"secret": secret})
    assert history[0].text == "Questions:\n" and info == {"secret": secret}
    results = [env.step(q) for q in questions]
    return env, results


def test_rewards_and_the_end_of_the_game():
    env, results = play("dog", ["Is it an animal?\n", "Does it have fur?\n", "Is it a dog?\n"])
    assert [r.reward for r in results] == [-1.0, -1.0, 0.0]
    assert [r.history[-1].text for r in results] == ["Yes.\n", "Yes.\n", "Yes.\n"]
    assert results[-1].terminated and results[-1].info["success"] and env.done
    assert [t.text for t in results[-1].history[1::2]] == ["Is it an animal?\n", "Does it have fur?\n", "Is it a dog?\n"]
    with pytest.raises(RuntimeError):
        env.step("Is it a cat?")


def test_twenty_questions_without_the_answer_end_the_game_at_minus_twenty():
    env, results = play("piano", ["Is it a cat?"] * 20)
    assert sum(r.reward for r in results) == -20.0 and results[-1].terminated
    assert not any(r.info["success"] for r in results) and not any(r.terminated for r in results[:-1])


def test_reset_takes_any_accepted_name_and_rejects_others_listing_them():
    env = TwentyQuestionsEnv()
    assert env.reset(options={"secret": "Puppy"})[1] == {"secret": "dog"}
    with pytest.raises(ValueError, match="unicorn.*not one of the 160 object names.*'soccer ball'"):
        env.reset(options={"secret": "unicorn"})
    drawn = [env.reset(seed=s)[1]["secret"] for s in range(50)]
    assert drawn == [env.reset(seed=s)[1]["secret"] for s in range(50)] and len(set(drawn)) > 30
    assert [o["secret"] for o in env.eval_reset_options()] == NAMES


@pytest.mark.parametrize("question", [
    "Is it a dog?", "is it a DOG", "Is it dogs?", "Are you thinking of a puppy?", "My guess is: the dog!",
    "Is the object a doggy?", "Could it be a dog?", "Is it maybe a dog then?", "I think it's a dog.",
    "Are they dogs?", "Is the thing you're thinking of a dog?",
])
def test_guesses_are_recognized_in_many_forms(oracle, question):
    assert oracle.answer("dog", question).correct_guess
    assert oracle.answer("cat", question).text == NO and not oracle.answer("cat", question).correct_guess


def test_names_match_without_spaces_and_outside_guesses_get_no(oracle):
    assert oracle.answer("lawn mower", "Is it a lawnmower?").correct_guess
    assert oracle.answer("paper clip", "Is it a paper clip?").correct_guess
    for question in ("Is it a wolf?", "Is it a ruby?", "Could it be a hamster?"):
        assert oracle.parse(question).kind == "other" and oracle.answer("dog", question).text == NO
    for question in ("Is it a pet?", "Is it wooden?", "hello"):  # known words, no article, no noun: not guesses
        assert oracle.parse(question).kind != "other", question


def test_every_name_and_synonym_wins_and_no_other_object_does(oracle):
    for obj in KB.objects:
        for variant in obj.variants:
            reply = oracle.answer(obj.name, f"Is it {variant}?")
            assert reply.correct_guess and reply.text == YES, (obj.name, variant)
        assert not oracle.answer(obj.name, f"Is it a {'cat' if obj.name != 'cat' else 'dog'}?").correct_guess


@pytest.mark.parametrize("question, category", [
    ("Is it an animal?", "Animals"), ("Is it a kind of fruit?", "Fruits"), ("Is it furniture?", "Furniture"),
    ("Is it a piece of clothing?", "Clothes"), ("Is it a type of vegetable?", "Vegetables"),
    ("Is it a musical instrument?", "Musical Instruments"), ("Is it a toy?", "Toys"), ("Is it jewellery?", "Jewelry"),
])
def test_category_questions_follow_the_category(oracle, question, category):
    # an object's own category is a yes; another category is a no unless the knowledge base says it also
    # belongs (yes) or that people would not agree (tomato: "a kind of fruit?")
    attribute = category_attribute(category)
    for obj in KB.objects:
        want = YES if obj.category == category else {True: YES, False: NO, None: UNKNOWN}[KB.value(obj.name, attribute)]
        assert oracle.answer(obj.name, question).text == want, (question, obj.name)


def test_size_comparisons_use_stored_judgements_then_size_ranges(oracle):
    cat_low, cat_high = KB.object("cat").size_m
    for obj in KB.objects:
        t = obj.true_attributes
        # the references the knowledge base stores a judgement for answer from it, in both directions
        assert oracle.answer(obj.name, "Is it bigger than a person?").text == (YES if "bigger_than_person" in t else NO)
        assert oracle.answer(obj.name, "Is it smaller than a person?").text == (NO if "bigger_than_person" in t else YES)
        assert oracle.answer(obj.name, "Is it larger than a breadbox?").text == (YES if "bigger_than_breadbox" in t else NO)
        assert oracle.answer(obj.name, "is it smaller than my hand").text == (YES if "smaller_than_hand" in t else NO)
        # anything else compares size ranges; overlapping ranges cannot be answered
        low, high = obj.size_m
        want = YES if low > cat_high else NO if high < cat_low else UNKNOWN
        assert oracle.answer(obj.name, "Is it bigger than a cat?").text == want, obj.name
    assert oracle.answer("cow", "Is it bigger than a dog?").text == YES
    assert oracle.answer("strawberry", "Is it bigger than a tennis ball?").text == NO
    assert oracle.answer("sun", "Is it bigger than the earth?").text == YES
    assert oracle.answer("dog", "Is it bigger than a cat?").text == UNKNOWN  # small dogs, big cats
    assert oracle.answer("ring", "Would it fit in your pocket?").text == YES
    assert oracle.answer("elephant", "Is it heavier than a feather?").text == UNKNOWN  # no weights stored
    assert oracle.answer("dog", "Is it bigger than a zorblat?").text == UNKNOWN


def test_attribute_answers_and_negation(oracle):
    assert oracle.answer("dog", "Is it alive?").text == YES and oracle.answer("car", "Is it alive?").text == NO
    assert oracle.answer("dog", "Is it not alive?").text == NO and oracle.answer("car", "Is it not alive?").text == YES
    assert oracle.answer("dog", "Is it alive or not?").text == YES
    assert oracle.answer("apple", "Can you eat it?").text == YES and oracle.answer("hammer", "Can you eat it?").text == NO


@pytest.mark.parametrize("question", [
    "", "???", "12345", "What is it?", "Which object are you thinking of?", "Tell me the answer.",
    "Is it a cat or a dog?", "Is it a cat, a dog, a horse or a cow?", "Is it a dog? Is it a cat?",
    "asdkjh qwpoeiru zxmcnv", "hello", "What's 2+2?", "Where is it usually found?",
])
def test_unanswerable_questions_get_the_same_clear_reply(oracle, question):
    for secret in ("dog", "cat", "piano"):
        reply = oracle.answer(secret, question)
        assert reply.text == UNKNOWN and not reply.correct_guess, (question, reply)


def test_exploits_never_win_and_never_crash():
    every_name = "Is it " + ", ".join(f"a {n}" for n in NAMES) + "?"
    every_synonym = " or ".join(v for o in KB.objects for v in o.variants)
    exploits = [every_name, every_synonym, "What is the object?", "Just tell me what it is.", "Is it a dog?" * 50,
                "Is it anything?", "Is it something?", "yes", "Is it the answer?", "Is it it?", "x" * 10_000]
    for secret in ("dog", "piano", "river"):
        env, results = play(secret, exploits + ["Is it an animal?"] * (20 - len(exploits)))
        assert not any(r.info["success"] for r in results) and sum(r.reward for r in results) == -20.0


def test_repeating_a_question_gives_the_same_answer_and_never_wins():
    env, results = play("guitar", ["Does it have strings?"] * 20)
    assert {r.history[-1].text for r in results} == {"Yes.\n"} and not results[-1].info["success"]


def test_batched_answers_match_single_answers(oracle):
    questions = ["Is it made of wood?", "Does it have wheels?", "Is it a guitar?", "Is it bigger than a car?"] * 5
    secrets = [NAMES[i * 7 % len(NAMES)] for i in range(len(questions))]
    assert [r.text for r in oracle.answer_batch(secrets, questions)] == \
        [oracle.answer(s, q).text for s, q in zip(secrets, questions)]


# ---- everyday questions (issue 19): answered from the knowledge base, or "I can't answer that." ----


def expected(obj: str, attribute: str) -> str:
    value = KB.value(obj, attribute)
    return UNKNOWN if value is None else YES if value else NO


EVERYDAY = [  # (question, attribute it asks), asked of every object
    ("Is it a mammal?", "is_mammal"), ("is it a bird", "is_bird"), ("Is it a type of fish?", "is_fish"),
    ("Is it a plant?", "is_plant"), ("Does it have feathers?", "has_feathers"), ("Has it got teeth?", "has_teeth"),
    ("Does it have leaves?", "has_leaves"), ("Does it have wheels?", "has_wheels"), ("Does it have a handle?", "has_handle"),
    ("Is it made of wax?", "made_of_wax"), ("Is it wooden?", "made_of_wood"), ("Is it orange?", "orange_color"),
    ("Is it grey?", "grey"), ("Do you eat with it?", "eaten_with"), ("Can you eat it?", "edible"), ("Do you ride it?", "ridden"),
    ("Do people climb it?", "climbed"), ("Does it bark?", "barks"), ("Does it lay eggs?", "lays_eggs"),
    ("Would you find it in a garage?", "found_in_garage"), ("Is it found in the ocean?", "found_in_ocean"),
    ("Do you kick it?", "kicked"), ("Is it a tool?", "is_tool"), ("Is it a kind of vehicle?", "is_vehicles"),
]


@pytest.mark.parametrize("question, attribute", EVERYDAY)
def test_everyday_questions_follow_the_knowledge_base_for_every_object(oracle, question, attribute):
    assert oracle.parse(question).terms[0].attribute == attribute
    for obj in KB.objects:
        assert oracle.answer(obj.name, question).text == expected(obj.name, attribute), (question, obj.name)


@pytest.mark.parametrize("question", [
    "Does it have gills?", "Does it have tentacles?", "Is it made of cheese?", "Do bees like it?", "Do cows eat it?",
    "Does it hibernate in winter?", "Is it used to make perfume?", "Does it glow in the dark?", "Is it famous in Japan?",
    "Does it have a long history in Europe?", "Does it look like a spaceship?", "Is it bigger than a zorblat?",
])
def test_questions_about_what_the_knowledge_base_does_not_hold_are_not_answered_no(oracle, question):
    """The first oracle answered a confident "No." to anything it did not cover (issue 19); it must now say so
    (or "Yes." where the object's everyday facts hold it: a shark "has gills")."""
    replies = {obj.name: oracle.answer(obj.name, question).text for obj in KB.objects}
    assert NO not in replies.values(), question
    assert sum(text == UNKNOWN for text in replies.values()) >= len(KB.objects) - 2, replies


def test_counts_alternatives_and_combinations(oracle):
    assert [oracle.answer(o, "Does it have four legs?").text for o in ("dog", "chicken", "snake")] == [YES, NO, NO]
    assert oracle.answer("bus", "Does it have more than two wheels?").text == YES
    assert oracle.answer("bicycle", "Does it have two wheels?").text == YES
    assert oracle.answer("carrot", "Is it a fruit or a vegetable?").text == YES
    assert oracle.answer("dog", "Is it a fruit or a vegetable?").text == NO
    assert oracle.answer("horse", "Is it an animal with hooves?").text == YES
    assert oracle.answer("dog", "Is it an animal with hooves?").text == NO
    assert oracle.answer("sun", "Is it a star in the sky?").text == YES and oracle.answer("moon", "Is it a star in the sky?").text == NO
    assert oracle.answer("bicycle", "Is the frame metal?").text == YES  # a metal object's frame
    assert oracle.answer("dog", "Is the frame metal?").text == NO  # no frame at all
    assert oracle.answer("car", "Are the wheels made of rubber?").text == UNKNOWN  # a metal car, rubber tyres


def test_what_you_do_with_it_and_what_it_does_are_told_apart(oracle):
    assert oracle.answer("fork", "Do you eat with it?").text == YES and oracle.answer("fork", "Can you eat it?").text == NO
    assert oracle.answer("apple", "Do you eat with it?").text == NO and oracle.answer("apple", "Can you eat it?").text == YES
    assert oracle.answer("hammer", "Do you use it to hit nails?").text == YES
    assert oracle.answer("baseball bat", "Do you use it to hit nails?").text == NO
    assert oracle.answer("scissors", "Do you cut paper with it?").text == YES
    assert oracle.answer("cat", "Does it eat mice?").text == UNKNOWN  # not "No" because forks don't eat
    assert oracle.answer("rabbit", "Does it eat carrots?").text == YES
    assert oracle.answer("river", "Can you swim in it?").text == YES and oracle.answer("river", "Can it swim?").text == NO
    assert oracle.answer("car", "Is it red?").text == UNKNOWN and oracle.answer("car", "Can it be red?").text == YES
    assert oracle.answer("tractor", "Would a farmer have one?").text == YES
    assert oracle.answer("violin", "Would a farmer have one?").text == UNKNOWN  # a farmer may own a violin


@pytest.mark.parametrize("name, question, want", [
    # "man-made" asks man_made, not "a man"; "natural" is its opposite
    *[(name, q, want) for q in ("Is it man-made?", "Is it man made?", "Is it manmade?", "Is it human-made?")
      for name, want in (("car", YES), ("dog", NO))],
    ("dog", "Is it found in nature?", YES), ("pearl", "Is it found in nature?", YES), ("car", "Is it found in nature?", NO),
    # where it comes from: only an attribute that says so ("come from a tree"), never "grows underground"
    # (a diamond or clay does not grow but is dug up)
    ("potato", "Does it come from the ground?", UNKNOWN), ("clay", "Does it come from the ground?", UNKNOWN),
    ("diamond", "Does it come from the ground?", UNKNOWN), ("apple", "Does it come from a tree?", YES),
    # who likes it is not stored
    ("video game console", "Do kids like it?", UNKNOWN), ("broccoli", "Do people enjoy eating it?", UNKNOWN),
    # ", not ..." restates the question
    ("river", "Is it something natural, not made in a factory?", YES), ("printer", "Is it alive, not a machine?", NO),
    # chatter before (the longest form first) and after the question
    ("dog", "Next one: is it a mammal?", YES), ("dog", "OK, quick question: does it have feathers?", NO),
    ("notebook", "Is it made of paper at all?", YES), ("wrench", "Is it made of metal then?", YES),
    ("grass", "Would you say it's alive?", YES), ("shoe", "Would you call it clothing?", YES),
    ("elephant", "Would you describe it as heavy?", YES),
    # "can it be" makes an unsure value a yes for every reading; lists keep their commas; parts said other ways
    ("bracelet", "Can it be made of gold?", YES), ("car", "Can it be made of wood?", NO),
    ("bell pepper", "Can it be red, green or yellow?", YES), ("tennis racket", "Does it have strings across it?", YES),
    ("stapler", "Does it hold staples?", YES), ("cup", "Does it hold staples?", NO),
])
def test_compound_words_origin_taste_chatter_and_restating_clauses(oracle, name, question, want):
    assert oracle.answer(name, question).text == want


@pytest.mark.parametrize("name, question, want", [
    # an object's everyday facts answer yes, word for word and in order; a fact it lacks is not a no
    ("alarm clock", "Does it wake you up?", YES), ("dog", "Does it wake you up?", UNKNOWN),
    ("carrot", "Do rabbits eat it?", YES), ("carrot", "Does it eat rabbits?", NO),  # carrots eat nothing (eats_plants)
    ("lion", "Does it eat rabbits?", YES),  # eats meat (a rule), not a fact
    ("alarm clock", "Is it kept under the bed?", UNKNOWN), ("spatula", "Do you flip pancakes with it?", YES),
    ("spoon", "Do you flip pancakes with it?", UNKNOWN), ("ocean", "Do sharks live in it?", YES),
    ("river", "Do sharks live in it?", UNKNOWN), ("sweater", "Would you wear it in winter?", YES),
    # negations, alternatives and quantifiers are never read from facts; alternatives in a fact need all their words
    ("dog", "Does it not fetch?", UNKNOWN), ("couch", "Can several people sit on it?", YES),
    ("chair", "Can several people sit on it?", UNKNOWN), ("elephant", "Does it forget?", UNKNOWN),
    # an opposite is never a match ("sink" is not "floats")
    ("rock", "Does it sink?", UNKNOWN), ("balloon", "Does it float?", YES),
    # a noun is not the class or the behaviour it names; a part is what it has, not where it goes
    ("baseball glove", "Do you catch a ball with it?", UNKNOWN), ("tape", "Does it come on a roll?", YES),
    ("bowling ball", "Does it roll?", YES), ("helicopter", "Can it land on a roof?", UNKNOWN),
    ("car", "Does it have a roof?", YES), ("dog", "Is it furry?", YES), ("wardrobe", "Can you open a door on it?", YES),
    ("dog", "Do people keep it as a pet?", YES), ("banana", "Does it come from a plant?", YES),
    # "on"/"in" it is a surface or a vessel, not a tool, except for what a device does
    ("cutting board", "Do you chop vegetables on it?", YES), ("cutting board", "Can you cook food in it?", UNKNOWN),
    ("notebook", "Do you write on it?", YES), ("lamp", "Can you play music on it?", NO),
    ("radio", "Can you listen to music on it?", YES),
    # shapes by a plain shape noun; history and the asker's experience are not stored
    ("orange", "Is it shaped like a ball or a circle?", YES), ("banana", "Is it shaped like a ball?", NO),
    ("apple", "Have you ever eaten one?", UNKNOWN), ("moon", "Have people walked on it?", YES),
    # facts read by form: who does it ("several people", a kind of person), what it is done with
    ("chair", "Can two people sit on it?", UNKNOWN), ("bus", "Can many people ride in it at once?", YES),
    ("tractor", "Do farmers drive it?", YES), ("soccer ball", "Do players kick it around?", YES),
    ("couch", "Do you watch TV from it?", YES), ("table", "Do you put things on it?", YES),
    ("river", "Do fish live in it?", YES), ("cup", "Can you pour coffee into it?", YES),
])
def test_everyday_facts_say_yes_and_never_no(oracle, name, question, want):
    assert oracle.answer(name, question).text == want


@pytest.mark.parametrize("name, question, want", [
    # a part named where something is done is not asked about ("on its back" is no backrest)
    ("horse", "Can people ride on its back?", UNKNOWN), ("horse", "Can you sit on its back?", UNKNOWN),
    ("horse", "Does it have a mane on its neck?", YES),
    # a class modifying a class: yes when both hold, else unknown ("a toy animal" may be a teddy bear)
    ("cat", "Is it a pet animal?", YES), ("teddy bear", "Is it a toy animal?", UNKNOWN),
    # how far or fast: a no holds, a yes cannot be checked
    ("chicken", "Can it fly far?", NO), ("airplane", "Can it fly far?", UNKNOWN),
    # a taste or feel word "to eat" / "to the touch" asks the word; "hard to eat" and "nice to eat" do not
    ("lemon", "Is it sweet to eat?", NO), ("teddy bear", "Is it soft to the touch?", YES),
    ("banana", "Is it nice to eat?", UNKNOWN), ("banana", "Is it hard to eat?", UNKNOWN),
    # "does it use" a part is having it; plural nouns of uses ("movies") meet their singular ("movie")
    ("lamp", "Does it use a light bulb?", YES), ("television", "Can you watch movies on it?", YES),
])
def test_locations_compound_classes_degrees_senses_and_uses(oracle, name, question, want):
    assert oracle.answer(name, question).text == want


@pytest.mark.parametrize("secret, question, not_said", [
    ("elephant", "Is it pretty heavy?", "No."),  # "heavy" reads weighs_a_lot, not "too heavy to lift"
    ("golf club", "Is it heavy?", "Yes."),
    ("car", "Does it move?", "No."),  # moves_by_itself narrows "move": its no is no answer
    ("rock", "Does it smell?", "No."),  # fragrant is "smells nice"
    ("sponge", "Is it wet when you use it?", "No."),  # a moment, where the stored value is the usual state
    ("cup", "Can it be made of glass?", "No."),  # a small made thing comes in more materials than the one stored
    ("necklace", "Is it a decoration?", "No."),
    ("rabbit", "Does it live in a hole?", "No."),  # not "makes holes"
    # a part for a purpose, or named with another part ("leg holes"), is not the stored part
    ("pants", "Does it have an opening for each leg?", "No."), ("pants", "Does it have leg holes?", "No."),
    ("sock", "Is there a pocket for your toes?", "No."),
    ("baseball bat", "Is it used in golf?", "Yes."),  # a sport narrower than sports, named by another object
    ("doll", "Can you wash its clothes?", "No."),  # its clothes, not whether it is clothes
    ("bookshelf", "Is it a kind of furniture in a house?", "No."),  # "in a house" asks less than "in most homes"
    ("sock", "Would you find it in a drawer?", "No."),  # a place the knowledge base does not name is not another one
    ("jacket", "Is it mostly worn outside?", "No."),  # where it is worn, not where it is kept
    ("lettuce", "Does it grow in the dirt?", "No."),  # in the soil, not underground
    ("envelope", "Can it hold liquid?", "Yes."),  # a container need not hold water
    ("tree", "Is it too tall to climb?", "Yes."),  # "too tall to" asks the opposite of what an ability attribute says
    ("pencil", "Is it cheap?", "No."), ("car", "Is it cheap to buy?", "Yes."),  # cheap is not expensive
    ("mountain", "Is the peak covered in ice?", "No."),  # its peak, not its colour or cover
    ("ruler", "Can you draw lines with it?", "No."),  # its own fact says it draws straight lines
])
def test_a_narrower_or_contradicted_no_is_not_given(secret, question, not_said):
    assert default_oracle().answer(secret, question).text != not_said


@pytest.mark.parametrize("question", ["Can it be sliced?", "Is it chopped before cooking?", "can it be carved"])
def test_something_done_to_it_is_not_what_it_does(question):
    assert default_oracle().parse(question).target != "used_for_cutting"


def test_an_object_too_big_to_lift_keeps_its_stored_material():
    assert default_oracle().answer("car", "Can it be made of wood?").text == "No."
