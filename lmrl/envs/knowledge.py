"""The Twenty Questions knowledge base: objects, yes/no attributes, and a strict loader.

LMRL-Gym's 20 Questions answers with a fine-tuned FLAN-T5 oracle over a list of 158
objects in 17 categories.  We ship our own list (`data/twenty_questions.json`, same 17
categories with about the same sizes) where every object has a true/false value for every
attribute, so a rule-based oracle can answer attribute questions and tests can check that
the game is winnable.

File layout (JSON)::

    {"version": 1,
     "source": "where the data comes from",
     "attributes": [{"id": "alive", "question": "Is it alive?"}, ...],
     "categories": ["Sports", "Animals", ...],               # exactly 17 names
     "objects": [{"name": "apple", "synonyms": [],
                  "category": "Fruits",
                  "attributes": ["is_fruits", "grows", ...]}, ...],
     "ambiguous": [{"object": "apple", "attribute": "red", "reason": "..."}, ...]}

An object's `"attributes"` is either the compact form the shipped file uses, a list of the
attribute ids that are TRUE (every other attribute is false), or the explicit form, a
mapping of EVERY attribute id to a bool.  Each category has an attribute
`is_<category>` (lowercase, spaces as `_`: "Kitchen Tools" -> `is_kitchen_tools`) that
must be true exactly for that category's objects.  Names and synonyms are lowercase and
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

DEFAULT_PATH = Path(__file__).resolve().parent / "data" / "twenty_questions.json"
VERSION = 1
NUM_CATEGORIES = 17
MIN_ATTRIBUTES = 40
_ID = re.compile(r"^[a-z][a-z0-9_]*$")
_ARTICLES = ("a ", "an ", "the ", "some ")


class KnowledgeBaseError(ValueError):
    """The knowledge-base file breaks the schema; the message names the culprit."""


@dataclass(frozen=True)
class Attribute:
    id: str
    question: str


@dataclass(frozen=True)
class KBObject:
    """One object: its canonical name, accepted variants, category and true attributes."""

    name: str
    synonyms: tuple[str, ...]
    category: str
    true_attributes: frozenset[str]

    @property
    def variants(self) -> tuple[str, ...]:
        return (self.name, *self.synonyms)


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
        """The yes/no answer to an attribute's question about an object."""
        if attribute_id not in self.attribute_ids:
            raise KeyError(f"unknown attribute {attribute_id!r}")
        return attribute_id in self.object(object_name).true_attributes

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
        categories = _parse_categories(data.get("categories"), ids)
        objects = _parse_objects(data.get("objects"), ids, categories)
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
    for i, item in enumerate(raw):
        _require(isinstance(item, Mapping), f"attribute #{i} must be an object")
        aid, question = item.get("id"), item.get("question")
        _require(isinstance(aid, str) and bool(_ID.match(aid)),
                 f"attribute #{i}: bad id {aid!r} (want lowercase letters, digits, _)")
        _require(aid not in seen, f"attribute {aid!r}: duplicate id")
        _require(isinstance(question, str) and question.strip() != "",
                 f"attribute {aid!r}: missing question")
        seen.add(aid)
        out.append(Attribute(aid, question))
    _require(len(out) >= MIN_ATTRIBUTES,
             f"need at least {MIN_ATTRIBUTES} attributes, got {len(out)}")
    return tuple(out)


def _parse_categories(raw: Any, attribute_ids: set[str]) -> tuple[str, ...]:
    _require(isinstance(raw, list) and all(isinstance(c, str) and c for c in raw),
             "categories must be a list of names")
    _require(len(set(raw)) == len(raw), "categories must be unique")
    _require(len(raw) == NUM_CATEGORIES,
             f"need exactly {NUM_CATEGORIES} categories, got {len(raw)}")
    for c in raw:
        _require(category_attribute(c) in attribute_ids,
                 f"category {c!r}: no attribute {category_attribute(c)!r}")
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
    for c in categories:
        attr = category_attribute(c)
        _require((attr in true) == (c == category),
                 f"{where}: attribute {attr!r} must be {c == category} "
                 f"for category {category!r}")
    return KBObject(name, tuple(synonyms), category, frozenset(true))


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
