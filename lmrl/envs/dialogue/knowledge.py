"""The Twenty Questions knowledge base: objects, yes/no attributes, and a strict loader.

LMRL-Gym's 20 Questions answers with a fine-tuned FLAN-T5 oracle over a list of 158
objects in 17 categories.  We ship our own list (`data/twenty_questions.json`, same 17
categories with about the same sizes) where every object has a true/false value for every
attribute, so a rule-based oracle can answer attribute questions and tests can check that
the game is winnable.

File layout (JSON)::

    {"version": 3,
     "source": "where the data comes from",
     "attributes": [{"id": "alive", "question": "Is it alive?", "family": "life"},
                    {"id": "is_mammal", "question": "Is it a mammal?", "family": "class", "nouns": ["mammal"]}, ...],
     "categories": ["Sports", "Animals", ...],               # exactly 17 names
     "objects": [{"name": "apple", "synonyms": [], "category": "Fruits", "size_m": [0.06, 0.09],
                  "attributes": ["is_fruits", "grows", ...],
                  "unsure": ["is_plant", ...],                 # optional
                  "counts": {"legs": 4},                        # optional
                  "facts": ["grows on a tree", "made into pies", ...]}, ...],  # optional
     "ambiguous": [{"object": "apple", "attribute": "red", "reason": "..."}, ...]}

Every attribute belongs to one `family` of `FAMILIES` (what kind of property it is: taxonomy
`class`, body and object `part`, `colour`, `material`, `use`, `place`, `size`, ...).  `nouns`
are the words that name the property in a question: a `class` noun in "Is it a mammal?", a
`part` noun in "Does it have feathers?", a `material` noun in "Is it made of wax?", a `place`
noun in "Is it found in a garage?"; a noun belongs to at most one attribute of a family.
`verbs` say how a question
names the property with a verb: `"it"` verbs are what the object does ("Does it bark?"),
`"object"` verbs what people do to it ("Do you ride it?"), `"with"` verbs what people do with
it ("Do you cut with it?", "Is it used to cut?"); `objects` narrows a "with" verb to its
object ("cut paper with it": `{"paper": ["scissors"]}` lists the objects for which that is
true; the attribute must be true for them).  `unsure` lists the attributes whose everyday answer for this object is genuinely unclear (is a
lamp shade part of every lamp? is a carrot "a plant"? what colour is a car?): the oracle says it
cannot answer them, and they count as false in `vector`.  `size_m` is the object's typical size
(largest dimension as usually met, in metres) as a [low, high] range; `counts` says how many of a
countable part it has (`COUNTED_PARTS`: legs, wheels, ...).  `facts` are short everyday
statements true of the object that no attribute holds ("wakes you up", "rabbits eat it"): the
oracle answers yes from them and never no (`twenty_questions_facts.py`), so they are positive
and plain, without negations or hedges (`FACT_FORBIDDEN`).

An object's `"attributes"` is either the compact form the shipped file uses, a list of the
attribute ids that are TRUE (every other attribute is false), or the explicit form, a
mapping of EVERY attribute id to a bool.  Each category has an attribute
`is_<category>` (lowercase, spaces as `_`: "Kitchen Tools" -> `is_kitchen_tools`) that
must be true for that category's objects; an object of another category may have it true too
(a calculator, an office supply, is also "an electronic device") or unsure (is a tomato "a
fruit"?), and `category` is the one the original dataset gives it.  Names and synonyms are lowercase and
no normalized form is shared by two objects.  `"ambiguous"` lists (object, attribute)
pairs whose answer is a judgement call for a typical instance; the value stored is the
answer most people would give.

Any problem raises `KnowledgeBaseError` naming the object and attribute at fault.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_PATH = Path(__file__).resolve().parents[1] / "data" / "twenty_questions.json"
VERSION = 3
# Words a fact may not use: a fact is answered "Yes." word for word, so it must be plainly true.
FACT_FORBIDDEN = re.compile(r"\b(?:not|no|never|without|some|sometimes|rarely|seldom|hardly|except|maybe|often|"
                            r"usually|can't|don't|doesn't|isn't|won't)\b")
NUM_CATEGORIES = 17
FAMILIES = ("category", "class", "life", "part", "colour", "material", "use", "place", "size", "shape", "behaviour",
            "sound", "food", "other")
# How a verb names an attribute: what the object does, what you do to it, what you do with it.
VERB_FORMS = ("it", "object", "with")
# Countable parts -> the attribute that says the object has them at all.
COUNTED_PARTS = {"legs": "has_legs", "wheels": "has_wheels", "wings": "has_wings", "strings": "has_strings",
                 "eyes": "has_eyes", "blades": "has_blade"}
# Reference sizes (metres) of the stored size attributes: an object's `size_m` may not contradict them.
SIZE_THRESHOLDS = {"smaller_than_hand": (0.12, 0.18), "bigger_than_breadbox": (0.3, 0.45),
                   "bigger_than_person": (1.5, 1.9), "bigger_than_car": (3.5, 5.0)}
MIN_ATTRIBUTES = 40
_ID = re.compile(r"^[a-z][a-z0-9_]*$")
_ARTICLES = ("a ", "an ", "the ", "some ")


class KnowledgeBaseError(ValueError):
    """The knowledge-base file breaks the schema; the message names the culprit."""


@dataclass(frozen=True)
class Attribute:
    id: str
    question: str
    family: str = "other"
    nouns: tuple[str, ...] = ()
    verbs: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (form, phrases) for forms of VERB_FORMS
    objects: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (noun, object names) for "with" verbs


@dataclass(frozen=True)
class KBObject:
    """One object: its canonical name, accepted variants, category, true and unsure attributes,
    typical size range (metres) and counts of countable parts."""

    name: str
    synonyms: tuple[str, ...]
    category: str
    true_attributes: frozenset[str]
    unsure: frozenset[str] = frozenset()
    size_m: tuple[float, float] = (0.0, 0.0)
    counts: tuple[tuple[str, int], ...] = ()
    facts: tuple[str, ...] = ()

    @property
    def variants(self) -> tuple[str, ...]:
        return (self.name, *self.synonyms)

    def count(self, part: str) -> int | None:
        """How many `part`s (a key of `COUNTED_PARTS`) it has, or None when the file does not say."""
        return dict(self.counts).get(part)


@dataclass(frozen=True)
class Ambiguity:
    object: str
    attribute: str
    reason: str


def category_attribute(category: str) -> str:
    """The `is_<category>` attribute id of a category name."""
    return "is_" + "_".join(category.lower().split())


def normalize(text: str) -> str:
    """Lowercase, hyphens and underscores as spaces, outer punctuation and articles dropped."""
    text = re.sub(r"[-_\s]+", " ", text.lower()).strip(" \t\n.,;:!?\"'")
    for article in _ARTICLES:
        if text.startswith(article):
            text = text[len(article):].strip()
    return text


def _number_variants(text: str) -> list[str]:
    """Singular guesses for a plural (and the plural of a singular), most specific first."""
    out = []
    if text.endswith("ies"):
        out.append(text[:-3] + "y")
    if text.endswith("ves"):
        out += [text[:-3] + "f", text[:-3] + "fe"]
    if text.endswith("es"):
        out.append(text[:-2])
    if text.endswith("s"):
        out.append(text[:-1])
    else:
        out.append(text + "s")
    return out


class KnowledgeBase:
    """A validated knowledge base; build it with `load_twenty_questions` or `from_dict`."""

    def __init__(self, version: int, source: str, attributes: tuple[Attribute, ...],
                 categories: tuple[str, ...], objects: tuple[KBObject, ...],
                 ambiguous: tuple[Ambiguity, ...]):
        self.version = version
        self.source = source
        self.attributes = attributes
        self.categories = categories
        self.objects = objects
        self.ambiguous = ambiguous
        self.attribute_ids = tuple(a.id for a in attributes)
        self._attributes = {a.id: a for a in attributes}
        self._by_name = {o.name: o for o in objects}
        self._index = {normalize(v): o for o in objects for v in o.variants}
        self._index.update({k.replace(" ", ""): o for k, o in list(self._index.items()) if " " in k})
        self._ambiguous = {(a.object, a.attribute): a for a in ambiguous}

    def __len__(self) -> int:
        return len(self.objects)

    def resolve(self, name: str) -> KBObject | None:
        """The object a guess names ("An Apple", "apples", "lawnmower" -> the lawn mower), or None."""
        key = normalize(name)
        key = key if key in self._index else key.replace(" ", "")
        if key in self._index:
            return self._index[key]
        for guess in _number_variants(key):
            if guess in self._index:
                return self._index[guess]
        return None

    def object(self, name: str) -> KBObject:
        """The object with this canonical name or variant; KeyError if there is none."""
        obj = self._by_name.get(name) or self.resolve(name)
        if obj is None:
            raise KeyError(f"unknown object {name!r}")
        return obj

    def answer(self, object_name: str, attribute_id: str) -> bool:
        """The yes/no answer to an attribute's question about an object (unsure counts as no)."""
        if attribute_id not in self.attribute_ids:
            raise KeyError(f"unknown attribute {attribute_id!r}")
        return attribute_id in self.object(object_name).true_attributes

    def value(self, object_name: str, attribute_id: str) -> bool | None:
        """True, False, or None when the everyday answer is unclear for this object (`unsure`)."""
        obj = self.object(object_name)
        if attribute_id not in self.attribute_ids:
            raise KeyError(f"unknown attribute {attribute_id!r}")
        return None if attribute_id in obj.unsure else attribute_id in obj.true_attributes

    def attribute(self, attribute_id: str) -> Attribute:
        return self._attributes[attribute_id]

    def known_mask(self, object_name: str) -> tuple[bool, ...]:
        """Per attribute (in `attribute_ids` order), whether the answer is known (not unsure)."""
        unsure = self.object(object_name).unsure
        return tuple(a not in unsure for a in self.attribute_ids)

    def vector(self, object_name: str) -> tuple[bool, ...]:
        """All answers about an object, in `attribute_ids` order."""
        true = self.object(object_name).true_attributes
        return tuple(a in true for a in self.attribute_ids)

    def is_ambiguous(self, object_name: str, attribute_id: str) -> bool:
        return (self.object(object_name).name, attribute_id) in self._ambiguous

    def in_category(self, category: str) -> tuple[KBObject, ...]:
        return tuple(o for o in self.objects if o.category == category)

    @classmethod
    def from_dict(cls, data: Any) -> KnowledgeBase:
        """Validate parsed JSON and build the knowledge base."""
        _require(isinstance(data, Mapping), "the file must hold a JSON object")
        _require(data.get("version") == VERSION,
                 f"version must be {VERSION}, got {data.get('version')!r}")
        source = data.get("source", "")
        _require(isinstance(source, str), "source must be a string")
        attributes = _parse_attributes(data.get("attributes"))
        ids = {a.id for a in attributes}
        categories = _parse_categories(data.get("categories"), ids, {a.id: a.family for a in attributes})
        objects = _parse_objects(data.get("objects"), ids, categories)
        _check_verb_objects(attributes, objects)
        ambiguous = _parse_ambiguous(data.get("ambiguous", []), ids, {o.name for o in objects})
        return cls(VERSION, source, attributes, categories, objects, ambiguous)


def load_twenty_questions(path: str | Path = DEFAULT_PATH) -> KnowledgeBase:
    """Read and validate a knowledge-base file (the shipped one by default)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise KnowledgeBaseError(f"{path}: not valid JSON: {err}") from err
    return KnowledgeBase.from_dict(data)


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise KnowledgeBaseError(message)


def _parse_attributes(raw: Any) -> tuple[Attribute, ...]:
    _require(isinstance(raw, list), "attributes must be a list")
    out, seen = [], set()
    owners: dict[tuple[str, str], str] = {}  # (family, noun) -> attribute id
    verb_owners: dict[tuple[str, str], str] = {}  # (form, phrase) -> attribute id
    for i, item in enumerate(raw):
        _require(isinstance(item, Mapping), f"attribute #{i} must be an object")
        aid, question = item.get("id"), item.get("question")
        _require(isinstance(aid, str) and bool(_ID.match(aid)),
                 f"attribute #{i}: bad id {aid!r} (want lowercase letters, digits, _)")
        _require(aid not in seen, f"attribute {aid!r}: duplicate id")
        _require(isinstance(question, str) and question.strip() != "",
                 f"attribute {aid!r}: missing question")
        family = item.get("family")
        _require(family in FAMILIES, f"attribute {aid!r}: family must be one of {FAMILIES}, got {family!r}")
        nouns = item.get("nouns", [])
        _require(isinstance(nouns, list) and all(isinstance(n, str) and n == n.strip().lower() and n for n in nouns),
                 f"attribute {aid!r}: nouns must be a list of lowercase, trimmed words")
        for noun in nouns:
            holder = owners.setdefault((family, noun), aid)
            _require(holder == aid, f"attribute {aid!r}: noun {noun!r} already names {holder!r} in family {family!r}")
        verbs = _parse_verbs(item.get("verbs", {}), aid, verb_owners)
        objects = item.get("objects", {})
        _require(isinstance(objects, Mapping) and all(isinstance(v, list) for v in objects.values()),
                 f"attribute {aid!r}: objects must map a noun to a list of object names")
        _require(not objects or any(form == "with" for form, _ in verbs),
                 f"attribute {aid!r}: objects need \"with\" verbs")
        seen.add(aid)
        out.append(Attribute(aid, question, family, tuple(nouns), verbs,
                             tuple((noun, tuple(names)) for noun, names in objects.items())))
    _require(len(out) >= MIN_ATTRIBUTES,
             f"need at least {MIN_ATTRIBUTES} attributes, got {len(out)}")
    return tuple(out)


def _parse_verbs(raw: Any, aid: str, owners: dict) -> tuple[tuple[str, tuple[str, ...]], ...]:
    _require(isinstance(raw, Mapping), f"attribute {aid!r}: verbs must map a form to a list of phrases")
    out = []
    for form, phrases in raw.items():
        _require(form in VERB_FORMS, f"attribute {aid!r}: verb form must be one of {VERB_FORMS}, got {form!r}")
        _require(isinstance(phrases, list) and all(isinstance(p, str) and p == p.strip().lower() and p for p in phrases),
                 f"attribute {aid!r}: verbs[{form!r}] must be a list of lowercase, trimmed phrases")
        for phrase in phrases:
            holder = owners.setdefault((form, phrase), aid)
            _require(holder == aid, f"attribute {aid!r}: verb {phrase!r} ({form}) already names {holder!r}")
        out.append((form, tuple(phrases)))
    return tuple(out)


def _check_verb_objects(attributes: tuple[Attribute, ...], objects: tuple[KBObject, ...]) -> None:
    """Every object a "with" verb's noun lists exists and has the attribute."""
    by_name = {o.name: o for o in objects}
    for attribute in attributes:
        for noun, names in attribute.objects:
            for name in names:
                _require(name in by_name, f"attribute {attribute.id!r}: objects[{noun!r}] names unknown object {name!r}")
                _require(attribute.id in by_name[name].true_attributes,
                         f"attribute {attribute.id!r}: objects[{noun!r}] lists {name!r}, for which it is not true")


def _parse_categories(raw: Any, attribute_ids: set[str], families: dict[str, str]) -> tuple[str, ...]:
    _require(isinstance(raw, list) and all(isinstance(c, str) and c for c in raw),
             "categories must be a list of names")
    _require(len(set(raw)) == len(raw), "categories must be unique")
    _require(len(raw) == NUM_CATEGORIES,
             f"need exactly {NUM_CATEGORIES} categories, got {len(raw)}")
    for c in raw:
        _require(category_attribute(c) in attribute_ids,
                 f"category {c!r}: no attribute {category_attribute(c)!r}")
    category_ids = {category_attribute(c) for c in raw}
    for aid, family in families.items():
        _require((family == "category") == (aid in category_ids),
                 f"attribute {aid!r}: family 'category' is exactly for the is_<category> attributes, got {family!r}")
    return tuple(raw)


def _parse_objects(raw: Any, attribute_ids: set[str],
                   categories: tuple[str, ...]) -> tuple[KBObject, ...]:
    _require(isinstance(raw, list) and raw, "objects must be a non-empty list")
    owner: dict[str, str] = {}  # normalized variant -> object name
    out = []
    for i, item in enumerate(raw):
        _require(isinstance(item, Mapping), f"object #{i} must be a JSON object")
        obj = _parse_object(item, i, attribute_ids, categories)
        for variant in obj.variants:
            key = normalize(variant)
            _require(key not in owner,
                     f"object {obj.name!r}: name or synonym {variant!r} "
                     f"is already used by object {owner.get(key)!r}")
            owner[key] = obj.name
        out.append(obj)
    return tuple(out)


def _parse_object(item: Mapping, i: int, attribute_ids: set[str],
                  categories: tuple[str, ...]) -> KBObject:
    name = item.get("name")
    _require(isinstance(name, str) and name != "", f"object #{i}: missing name")
    where = f"object {name!r}"
    synonyms = item.get("synonyms", [])
    _require(isinstance(synonyms, list), f"{where}: synonyms must be a list")
    for text in (name, *synonyms):
        _require(isinstance(text, str) and text == text.strip().lower() and text != "",
                 f"{where}: name or synonym {text!r} must be lowercase, trimmed, non-empty")
    category = item.get("category")
    _require(category in categories, f"{where}: unknown category {category!r}")
    true = _parse_values(item.get("attributes"), where, attribute_ids)
    _require(category_attribute(category) in true,
             f"{where}: attribute {category_attribute(category)!r} must be true for category {category!r}")
    unsure = _parse_unsure(item.get("unsure", []), where, attribute_ids, true)
    size = _parse_size(item.get("size_m"), where, true)
    counts = _parse_counts(item.get("counts", {}), where, true)
    facts = _parse_facts(item.get("facts", []), where)
    return KBObject(name, tuple(synonyms), category, frozenset(true), frozenset(unsure), size, counts, facts)


def _parse_facts(raw: Any, where: str) -> tuple[str, ...]:
    _require(isinstance(raw, list) and len(raw) <= 20, f"{where}: facts must be a list of at most 20 phrases")
    for fact in raw:
        _require(isinstance(fact, str) and fact == fact.strip().lower() and 0 < len(fact.split()) <= 10,
                 f"{where}: fact {fact!r} must be a lowercase, trimmed phrase of 1 to 10 words")
        bad = FACT_FORBIDDEN.search(fact)
        _require(bad is None, f"{where}: fact {fact!r} uses {bad and bad.group(0)!r} (facts are plain and positive)")
    _require(len(set(raw)) == len(raw), f"{where}: a fact is listed twice")
    return tuple(raw)


def _parse_unsure(raw: Any, where: str, attribute_ids: set[str], true: set[str]) -> set[str]:
    _require(isinstance(raw, list), f"{where}: unsure must be a list of attribute ids")
    for aid in raw:
        _require(aid in attribute_ids, f"{where}: unsure lists unknown attribute {aid!r}")
        _require(aid not in true, f"{where}: attribute {aid!r} is both true and unsure")
    _require(len(set(raw)) == len(raw), f"{where}: an attribute is listed twice in unsure")
    return set(raw)


def _parse_size(raw: Any, where: str, true: set[str]) -> tuple[float, float]:
    ok = (isinstance(raw, list) and len(raw) == 2
          and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in raw) and 0 < raw[0] <= raw[1])
    _require(ok, f"{where}: size_m must be [low, high] in metres with 0 < low <= high, got {raw!r}")
    low, high = float(raw[0]), float(raw[1])
    for aid, (ref_low, ref_high) in SIZE_THRESHOLDS.items():
        smaller = aid == "smaller_than_hand"
        value = aid in true
        # a stored size answer may not contradict a size range clearly on the other side of its reference
        clearly_bigger, clearly_smaller = low > ref_high, high < ref_low
        contradiction = (clearly_bigger and value == smaller) or (clearly_smaller and value != smaller)
        _require(not contradiction, f"{where}: size_m {raw!r} contradicts attribute {aid!r} = {value}")
    return low, high


def _parse_counts(raw: Any, where: str, true: set[str]) -> tuple[tuple[str, int], ...]:
    _require(isinstance(raw, Mapping), f"{where}: counts must be a mapping of part -> number")
    for part, n in raw.items():
        _require(part in COUNTED_PARTS, f"{where}: counts: unknown part {part!r} (known: {sorted(COUNTED_PARTS)})")
        _require(isinstance(n, int) and not isinstance(n, bool) and n > 0,
                 f"{where}: counts: {part!r} must be a positive whole number")
        _require(COUNTED_PARTS[part] in true,
                 f"{where}: counts {part!r} given but attribute {COUNTED_PARTS[part]!r} is not true")
    return tuple(sorted(raw.items()))


def _parse_values(raw: Any, where: str, attribute_ids: set[str]) -> set[str]:
    """The true attribute ids, from the compact list or the explicit mapping."""
    if isinstance(raw, list):
        for aid in raw:
            _require(aid in attribute_ids, f"{where}: unknown attribute {aid!r}")
        _require(len(set(raw)) == len(raw), f"{where}: an attribute is listed twice")
        return set(raw)
    _require(isinstance(raw, Mapping), f"{where}: attributes must be a list or a mapping")
    for aid, value in raw.items():
        _require(aid in attribute_ids, f"{where}: unknown attribute {aid!r}")
        _require(isinstance(value, bool), f"{where}: attribute {aid!r} must be true or false")
    missing = sorted(attribute_ids - set(raw))
    _require(not missing, f"{where}: missing attribute {missing[0]!r}" if missing else "")
    return {aid for aid, value in raw.items() if value}


def _parse_ambiguous(raw: Any, attribute_ids: set[str],
                     names: set[str]) -> tuple[Ambiguity, ...]:
    _require(isinstance(raw, list), "ambiguous must be a list")
    out = []
    for i, item in enumerate(raw):
        _require(isinstance(item, Mapping), f"ambiguous #{i} must be a JSON object")
        obj, aid, reason = item.get("object"), item.get("attribute"), item.get("reason")
        _require(obj in names, f"ambiguous #{i}: unknown object {obj!r}")
        _require(aid in attribute_ids,
                 f"ambiguous #{i}: object {obj!r}: unknown attribute {aid!r}")
        _require(isinstance(reason, str) and reason.strip() != "",
                 f"ambiguous #{i}: object {obj!r}, attribute {aid!r}: missing reason")
        out.append(Ambiguity(obj, aid, reason))
    return tuple(out)
