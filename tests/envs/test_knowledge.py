"""The Twenty Questions knowledge base: schema check, corruption errors, winnability, facts."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from lmrl.envs.dialogue.knowledge import (
    COUNTED_PARTS,
    DEFAULT_PATH,
    FAMILIES,
    KnowledgeBase,
    KnowledgeBaseError,
    category_attribute,
    load_twenty_questions,
)

# LMRL-Gym's word list: 158 objects in these 17 categories.
ORIGINAL_COUNTS = {
    "Sports": 10, "Animals": 10, "Fruits": 10, "Vehicles": 10, "Clothes": 11,
    "Electronics": 10, "Musical Instruments": 10, "Furniture": 10, "Office Supplies": 14,
    "Vegetables": 10, "Art": 7, "Kitchen Tools": 10, "Nature": 11, "Toys": 5, "Jewelry": 9,
    "Garden Supplies": 5, "Tools": 6,
}
MAX_QUESTIONS = 19  # the 20th question is the guess itself


@pytest.fixture(scope="module")
def kb() -> KnowledgeBase:
    return load_twenty_questions()


@pytest.fixture
def raw() -> dict:
    return json.loads(DEFAULT_PATH.read_text(encoding="utf-8"))


def load_corrupt(tmp_path, data: dict) -> KnowledgeBase:
    path = tmp_path / "kb.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return load_twenty_questions(path)


def find(data: dict, name: str) -> dict:
    return next(o for o in data["objects"] if o["name"] == name)


def greedy_depths(kb: KnowledgeBase) -> dict[str, int]:
    """Questions a greedy asker needs per object: each step asks the attribute that splits the
    remaining candidates most evenly (ties: first in file order)."""
    vectors = {o.name: kb.vector(o.name) for o in kb.objects}
    depths: dict[str, int] = {}
    stack = [(tuple(vectors), 0)]
    while stack:
        candidates, asked = stack.pop()
        if len(candidates) == 1:
            depths[candidates[0]] = asked
            continue
        best = min(range(len(kb.attribute_ids)),
                   key=lambda j: abs(2 * sum(vectors[c][j] for c in candidates) - len(candidates)))
        yes = tuple(c for c in candidates if vectors[c][best])
        no = tuple(c for c in candidates if not vectors[c][best])
        assert yes and no, f"no attribute splits {candidates}"
        stack += [(yes, asked + 1), (no, asked + 1)]
    return depths


# ---- the shipped file ----------------------------------------------------------------


def test_shipped_file_passes_schema(kb):
    assert kb.version == 3
    assert len(kb.categories) == 17
    assert 158 <= len(kb.objects) <= 165
    assert len(kb.attributes) >= 45
    assert len(set(kb.attribute_ids)) == len(kb.attribute_ids)
    assert all(a.question.endswith("?") for a in kb.attributes)
    assert len({a.question for a in kb.attributes}) == len(kb.attributes)
    for c in kb.categories:
        assert category_attribute(c) in kb.attribute_ids


def test_category_counts_near_original(kb):
    counts = Counter(o.category for o in kb.objects)
    assert set(counts) == set(ORIGINAL_COUNTS)
    for category, n in ORIGINAL_COUNTS.items():
        assert abs(counts[category] - n) <= 1, category


def test_every_object_answers_every_attribute(kb):
    for o in kb.objects:
        answers = [kb.answer(o.name, a) for a in kb.attribute_ids]
        assert all(isinstance(x, bool) for x in answers)
        assert kb.answer(o.name, category_attribute(o.category))


def test_explicit_form_loads_the_same(tmp_path, raw, kb):
    ids = [a["id"] for a in raw["attributes"]]
    for o in raw["objects"]:
        o["attributes"] = {a: a in o["attributes"] for a in ids}
    explicit = load_corrupt(tmp_path, raw)
    assert [explicit.vector(o.name) for o in explicit.objects] == [
        kb.vector(o.name) for o in kb.objects]


def test_ambiguous_pairs_are_known_and_unique(kb):
    assert kb.ambiguous
    pairs = [(a.object, a.attribute) for a in kb.ambiguous]
    assert len(set(pairs)) == len(pairs)
    assert kb.is_ambiguous("tomato", "is_fruits")
    assert not kb.is_ambiguous("dog", "alive")


# ---- winnability ------------------------------------------------------------------------


def test_objects_are_distinguishable(kb):
    seen: dict[tuple[bool, ...], str] = {}
    for o in kb.objects:
        v = kb.vector(o.name)
        assert v not in seen, f"{o.name} and {seen[v]} have identical answers"
        seen[v] = o.name


def test_greedy_asker_identifies_every_object_within_19_questions(kb):
    depths = greedy_depths(kb)
    assert set(depths) == {o.name for o in kb.objects}
    assert max(depths.values()) <= MAX_QUESTIONS


# ---- resolve ----------------------------------------------------------------------------


@pytest.mark.parametrize("guess, expected", [
    ("An Apple", "apple"), ("apples", "apple"), ("  the   DOG ", "dog"), ("Knives", "knife"),
    ("leaves", "leaf"), ("cherries", "cherry"), ("shoes", "shoe"), ("buses", "bus"),
    ("potatoes", "potato"), ("a sofa.", "couch"), ("Plane", "airplane"), ("T-Shirt", "shirt"),
    ("paper clips", "paper clip"), ("headphone", "headphones"), ("a pair of pants", "pants"),
])
def test_resolve(kb, guess, expected):
    assert kb.resolve(guess).name == expected


def test_resolve_unknown_is_none(kb):
    assert kb.resolve("spaceship") is None
    assert kb.resolve("") is None


def test_every_variant_and_plural_resolves_to_its_own_object(kb):
    for o in kb.objects:
        for v in o.variants:
            assert kb.resolve(v) is o, v
            assert kb.resolve(v.upper() + "s") is o, v + "s"


def test_answer_accepts_variants_and_rejects_unknowns(kb):
    assert kb.answer("Puppies", "alive")
    with pytest.raises(KeyError):
        kb.answer("spaceship", "alive")
    with pytest.raises(KeyError):
        kb.answer("dog", "is_purple")


# ---- corruptions --------------------------------------------------------------------------


def corrupt_unknown_category(d):
    find(d, "apple")["category"] = "Spaceships"


def corrupt_duplicate_synonym(d):
    find(d, "car")["synonyms"].append("bike")


def corrupt_missing_attribute(d):
    o = find(d, "apple")
    o["attributes"] = {a["id"]: a["id"] in o["attributes"] for a in d["attributes"]}
    del o["attributes"]["sweet"]


def corrupt_unknown_attribute(d):
    find(d, "apple")["attributes"].append("is_purple")


def corrupt_wrong_own_category_attribute(d):
    find(d, "apple")["attributes"].remove("is_fruits")


def corrupt_non_bool_value(d):
    o = find(d, "apple")
    o["attributes"] = {a["id"]: a["id"] in o["attributes"] for a in d["attributes"]}
    o["attributes"]["sweet"] = "yes"


def corrupt_uppercase_synonym(d):
    find(d, "car")["synonyms"].append("Auto")


def corrupt_ambiguous_attribute(d):
    d["ambiguous"].append({"object": "apple", "attribute": "is_purple", "reason": "r"})


@pytest.mark.parametrize("corrupt, culprits", [
    (corrupt_unknown_category, ["apple", "Spaceships"]),
    (corrupt_duplicate_synonym, ["car", "bike", "bicycle"]),
    (corrupt_missing_attribute, ["apple", "sweet", "missing"]),
    (corrupt_unknown_attribute, ["apple", "is_purple", "unknown"]),
    (corrupt_wrong_own_category_attribute, ["apple", "is_fruits"]),
    (corrupt_non_bool_value, ["apple", "sweet"]),
    (corrupt_uppercase_synonym, ["car", "Auto"]),
    (corrupt_ambiguous_attribute, ["apple", "is_purple"]),
])
def test_corruption_names_the_culprit(tmp_path, raw, corrupt, culprits):
    corrupt(raw)
    with pytest.raises(KnowledgeBaseError) as err:
        load_corrupt(tmp_path, raw)
    for word in culprits:
        assert word in str(err.value)


@pytest.mark.parametrize("corrupt, culprit", [
    (lambda d: d.update(version=1), "version"),
    (lambda d: d["attributes"].append(dict(d["attributes"][20])), "duplicate"),
    (lambda d: d.update(attributes=d["attributes"][:30]), "at least 40"),
    (lambda d: d["categories"].pop(), "17 categories"),
    (lambda d: d["categories"].__setitem__(0, "Sport"), "is_sport"),
])
def test_file_level_corruption(tmp_path, raw, corrupt, culprit):
    corrupt(raw)
    with pytest.raises(KnowledgeBaseError, match=culprit):
        load_corrupt(tmp_path, raw)


def test_invalid_json_is_a_knowledge_base_error(tmp_path):
    path = tmp_path / "kb.json"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(KnowledgeBaseError, match="JSON"):
        load_twenty_questions(path)


# ---- truthfulness -----------------------------------------------------------------------


@pytest.mark.parametrize("obj, attribute, expected", [
    ("dog", "alive", True), ("dog", "has_legs", True), ("apple", "edible", True),
    ("apple", "grows_on_trees", True), ("hammer", "made_of_metal", True),
    ("car", "has_wheels", True), ("piano", "makes_sound", True), ("piano", "made_of_metal", False),
    ("elephant", "bigger_than_person", True), ("ring", "smaller_than_hand", True),
    ("knife", "sharp", True), ("knife", "found_in_kitchen", True), ("shark", "swims", True),
    ("airplane", "flies", True), ("television", "electric", True), ("banana", "yellow", True),
    ("grass", "green", True), ("pencil", "made_of_wood", True), ("rock", "alive", False),
    ("sun", "gets_hot", True), ("sock", "wearable", True), ("lemon", "sweet", False),
    ("bicycle", "has_engine", False), ("teddy bear", "soft", True), ("cell phone", "has_screen", True),
    ("snake", "has_legs", False), ("ocean", "man_made", False), ("scissors", "used_for_cutting", True),
])
def test_obvious_facts(kb, obj, attribute, expected):
    assert kb.answer(obj, attribute) is expected


IMPLICATIONS = [  # if the first is true, the second must be too
    ("smaller_than_hand", "held_in_one_hand"), ("smaller_than_hand", "fits_in_backpack"),
    ("bigger_than_car", "bigger_than_person"), ("bigger_than_person", "bigger_than_breadbox"),
    ("edible_raw", "edible"), ("usually_cooked", "edible"), ("alive", "grows"),
    ("needs_batteries", "electric"), ("has_screen", "electric"), ("worn_on_head", "wearable"),
    ("worn_on_feet", "wearable"), ("worn_on_hands", "wearable"), ("worn_around_neck", "wearable"),
    ("is_animals", "alive"), ("is_pet", "is_animals"), ("has_engine", "makes_sound"),
]
EXCLUSIONS = [  # never both true
    ("fits_in_backpack", "bigger_than_person"), ("smaller_than_hand", "bigger_than_breadbox"),
    ("alive", "man_made"), ("edible", "man_made"),
]


def test_size_and_kind_answers_are_consistent(kb):
    for o in kb.objects:
        t = o.true_attributes
        for a, b in IMPLICATIONS:
            assert a not in t or b in t, f"{o.name}: {a} without {b}"
        for a, b in EXCLUSIONS:
            assert not (a in t and b in t), f"{o.name}: both {a} and {b}"


# ---- attribute families (issue 19): what people ask about, for every object -----------------


def known(o) -> frozenset[str]:
    return o.true_attributes | o.unsure


def test_every_family_is_stored_with_enough_attributes(kb):
    counts = Counter(a.family for a in kb.attributes)
    assert set(counts) == set(FAMILIES)
    for family in ("class", "part", "use", "place", "colour", "material", "food", "behaviour", "size", "shape", "sound"):
        assert counts[family] >= 6, (family, counts[family])
    assert counts["category"] == 17


def test_every_animal_has_one_class_and_every_plant_food_comes_from_a_plant(kb):
    classes = ("is_mammal", "is_bird", "is_fish", "is_reptile", "is_amphibian", "is_insect")
    for o in kb.objects:
        if o.category == "Animals":
            assert len([c for c in classes if c in o.true_attributes]) == 1, o.name
            assert "has_eyes" in o.true_attributes and ({"lays_eggs", "gives_birth"} & known(o)), o.name
        else:
            assert not any(c in o.true_attributes for c in classes), o.name
        if o.category in ("Fruits", "Vegetables"):
            assert "from_plant" in o.true_attributes and "is_food" in o.true_attributes, o.name


def test_every_object_has_a_colour_answer_a_size_and_a_place(kb):
    colours = {a.id for a in kb.attributes if a.family == "colour"} - {"changes_colour"}
    places = {a.id for a in kb.attributes if a.family == "place"}
    for o in kb.objects:
        assert known(o) & colours, f"{o.name}: no colour, not even unsure"
        assert known(o) & places, f"{o.name}: nowhere"
        low, high = o.size_m
        assert 0 < low <= high


def test_every_made_thing_has_a_material_and_a_use(kb):
    materials = {a.id for a in kb.attributes if a.family == "material"}
    uses = {a.id for a in kb.attributes if a.family == "use"}
    for o in kb.objects:
        if "man_made" in o.true_attributes and o.name != "paint":  # paint is itself the material
            assert known(o) & materials, f"{o.name}: made of nothing"
            assert known(o) & uses, f"{o.name}: used for nothing"


def test_many_coloured_things_have_no_single_colour_denied(kb):
    """A car can be any colour: "Is it red?" must be unsure for it, never a flat no."""
    colours = [a.id for a in kb.attributes if a.family == "colour" and a.id in (
        "red", "yellow", "green", "brown", "white", "black", "orange_color", "blue", "purple", "pink", "grey", "silver")]
    for o in kb.objects:
        if "many_colors" in o.true_attributes:
            for c in colours:
                assert c in known(o), (o.name, c)


def test_counts_and_sizes_agree_with_the_stored_answers(kb):
    for o in kb.objects:
        for part, n in o.counts:
            assert COUNTED_PARTS[part] in o.true_attributes and n > 0
        if "bigger_than_car" in o.true_attributes:
            assert o.size_m[1] > 3.5, o.name
        if "smaller_than_hand" in o.true_attributes:
            assert o.size_m[0] < 0.18, o.name
    assert kb.object("dog").count("legs") == 4 and kb.object("chicken").count("legs") == 2
    assert kb.object("bicycle").count("wheels") == 2 and kb.object("guitar").count("strings") == 6


@pytest.mark.parametrize("obj, attribute, expected", [
    # the reviewer's everyday questions that the first knowledge base answered "No." (issue 19)
    ("dog", "is_mammal", True), ("chicken", "is_bird", True), ("shark", "is_fish", True), ("snake", "is_reptile", True),
    ("chicken", "has_feathers", True), ("dog", "has_teeth", True), ("chicken", "has_teeth", False),
    ("tree", "is_plant", True), ("tree", "has_leaves", True), ("flower", "has_petals", True),
    ("basketball", "orange_color", True), ("soccer ball", "kicked", True), ("guitar", "played", True),
    ("fork", "eaten_with", True), ("ladder", "climbed", True), ("hammer", "used_to_hit", True), ("ladder", "has_rungs", True),
    ("dog", "has_feathers", False), ("dog", "lays_eggs", False), ("cow", "gives_milk", True), ("bicycle", "has_pedals", True),
    ("car", "has_steering_wheel", True), ("crayon", "made_of_wax", True), ("sun", "is_star", True), ("moon", "is_planet", False),
])
def test_everyday_facts(kb, obj, attribute, expected):
    assert kb.value(obj, attribute) is expected


def test_other_categories_may_hold_or_be_unsure(kb):
    # a calculator (Office Supplies) is also an electronic device; a tomato (Vegetables) may or may not be "a fruit"
    assert kb.object("calculator").category == "Office Supplies" and kb.value("calculator", "is_electronics") is True
    assert kb.value("tomato", "is_fruits") is None and kb.value("carrot", "is_fruits") is False
    assert kb.value("dog", "natural") is True and kb.value("car", "natural") is False
    for o in kb.objects:  # natural is the opposite of man-made for every object
        assert kb.value(o.name, "natural") is (None if kb.value(o.name, "man_made") is None
                                               else not kb.value(o.name, "man_made")), o.name


def test_every_object_has_everyday_facts(kb):
    for o in kb.objects:
        assert len(o.facts) >= 5, o.name
    assert "wakes you up" in kb.object("alarm clock").facts and "rabbits eat it" in kb.object("carrot").facts


def test_unsure_answers_are_neither_yes_nor_no(kb):
    assert kb.value("car", "red") is None and kb.answer("car", "red") is False  # vector() counts unsure as no
    assert kb.value("cow", "has_horns") is None and kb.value("lamp", "has_shade") is None
    assert kb.known_mask("car")[kb.attribute_ids.index("red")] is False


def _attribute(d, aid):
    return next(a for a in d["attributes"] if a["id"] == aid)


@pytest.mark.parametrize("corrupt, culprits", [
    (lambda d: _attribute(d, "alive").update(family="vibes"), ["alive", "family"]),
    (lambda d: _attribute(d, "alive").update(family="category"), ["alive", "category"]),
    (lambda d: _attribute(d, "is_bird").update(nouns=["mammal"]), ["is_bird", "mammal", "is_mammal"]),
    (lambda d: _attribute(d, "is_bird").update(nouns=["Bird"]), ["is_bird", "nouns"]),
    (lambda d: find(d, "dog").update(unsure=["alive"]), ["dog", "alive", "both true and unsure"]),
    (lambda d: find(d, "dog").update(facts=["never forgets"]), ["dog", "never forgets", "positive"]),
    (lambda d: find(d, "dog").update(facts=["sometimes bites"]), ["dog", "sometimes"]),
    (lambda d: find(d, "dog").update(facts=["Barks"]), ["dog", "Barks", "lowercase"]),
    (lambda d: find(d, "dog").update(facts=["barks", "barks"]), ["dog", "twice"]),
    (lambda d: find(d, "dog").update(unsure=["is_animals"]), ["dog", "is_animals", "both true and unsure"]),
    (lambda d: find(d, "dog").update(unsure=["is_purple"]), ["dog", "is_purple"]),
    (lambda d: find(d, "dog").update(size_m=[2.0, 1.0]), ["dog", "size_m"]),
    (lambda d: find(d, "elephant").update(size_m=[0.1, 0.2]), ["elephant", "size_m", "contradicts"]),
    (lambda d: find(d, "dog").update(size_m=None), ["dog", "size_m"]),
    (lambda d: find(d, "dog").update(counts={"tentacles": 8}), ["dog", "tentacles"]),
    (lambda d: find(d, "dog").update(counts={"legs": 0}), ["dog", "legs"]),
    (lambda d: find(d, "snake").update(counts={"legs": 4}), ["snake", "legs", "has_legs"]),
    (lambda d: _attribute(d, "barks").update(verbs={"sometimes": ["bark"]}), ["barks", "sometimes"]),
    (lambda d: _attribute(d, "meows").update(verbs={"it": ["bark"]}), ["meows", "bark", "barks"]),
    (lambda d: _attribute(d, "used_to_hit")["objects"].update(nail=["dog"]), ["used_to_hit", "nail", "dog"]),
    (lambda d: _attribute(d, "used_to_hit")["objects"].update(nail=["unicorn"]), ["used_to_hit", "unicorn"]),
])
def test_family_schema_corruption_names_the_culprit(tmp_path, raw, corrupt, culprits):
    corrupt(raw)
    with pytest.raises(KnowledgeBaseError) as err:
        load_corrupt(tmp_path, raw)
    for word in culprits:
        assert word in str(err.value), (word, str(err.value))
