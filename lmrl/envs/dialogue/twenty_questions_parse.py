"""What a 20 Questions question asks (`Parse`, made of `Term`s) and how it is answered about one object.

Shared by the oracle (`twenty_questions.py`) and its rules (`twenty_questions_rules.py`,
`twenty_questions_sizes.py`).  An answer is True, False or None: None means the knowledge base
does not know (the object's value is unsure, or the question asks what it does not hold), and the
oracle then says "I can't answer that."
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lmrl.envs.dialogue.knowledge import KnowledgeBase
from lmrl.envs.dialogue.words import strip_chatter

# Words a guess may be wrapped in: "is it", "are you thinking of", "my final guess is", "could it be", ...
FRAME_WORDS = frozenset(
    "is it this that the a an some object thing item your answer word are you thinking of about could can "
    "might would be perhaps maybe my final guess guessing i im am think its it's must so then ok okay well "
    "hmm right correct they these those thing you're youre we".split()
)


@dataclass(frozen=True)
class Term:
    """One property to check: an attribute (possibly negated), a count of a part, or a "with" verb's object.
    `restricted`: the question adds a modifier the knowledge base cannot check (a yes becomes unknown)."""

    attribute: str
    negated: bool = False
    part: str = ""
    count: int = 0
    noun: str = ""
    restricted: bool = False
    possible: bool = False  # "can it be green?": yes when it is, or may be
    yes_only: bool = False  # "would a farmer have one?": the attribute can say yes, but its no is not a no
    compare: str = "="  # how `count` is compared: "=", ">", "<", ">=", "<=" ("more than two wheels")


@dataclass(frozen=True)
class Parse:
    """What a question asks, independent of the secret.

    kind: "guess" (target = object name), "other" (a guess of something outside the knowledge base:
    answered No.), "attribute" (`terms`, all of them or, with `any_of`, any), "size" (the object's size
    range against `reference`, `bigger` or not; `as_big` for "as big as"), "match" (not read by rule:
    the embeddings choose among attributes of `families`), "unknown".
    `target` is the first term's attribute (for callers that read one attribute).
    """

    kind: str
    target: str = ""
    negated: bool = False
    bigger: bool = True
    score: float = 1.0
    terms: tuple[Term, ...] = ()
    any_of: bool = False
    reference: tuple[float, float] = (0.0, 0.0)
    as_big: bool = False
    families: tuple[str, ...] = ()  # kind "match": let the embeddings choose, among attributes of these families
    guess: str = ""  # an object the question also names ("Is it orange?"): asking about it wins


def attribute_parse(terms, any_of: bool = False, score: float = 1.0) -> Parse:
    terms = tuple(terms)
    return Parse("attribute", terms[0].attribute, terms[0].negated, score=score, terms=terms, any_of=any_of)


UNKNOWN_PARSE = Parse("unknown")


def clean(question: str) -> str:
    """Lowercase, one line, curly quotes straightened, whitespace collapsed, a leading condition dropped
    ("if you drop it, does it bounce?" -> "does it bounce?")."""
    text = strip_chatter(" ".join(question.replace("\u2019", "'").replace("\u2018", "'").lower().split()))
    return re.sub(r"^(?:if|when|whenever|once)\b[^,?]*,\s*(?=\w)", "", text)


def strip_frame(text: str, keep_commas: bool = False) -> str:
    """What a guess names once its frame words are gone: "so is it maybe a dog?" -> "dog".
    `keep_commas`: keep the commas of a list ("red, green or yellow")."""
    words = re.sub(r"[^a-z0-9', -]+", " ", text.replace(",", " , ")).split()
    if not keep_commas:
        words = [w for w in words if w != ","]
    while words and (words[0].strip("'") in FRAME_WORDS or words[0] == ","):
        words.pop(0)
    while words and (words[-1].strip("'") in {"then", "right", "maybe", "perhaps", "correct", "yes", "no"} or words[-1] == ","):
        words.pop()
    return " ".join(words).replace(" , ", ", ")


def evaluate(kb: KnowledgeBase, name: str, term: Term, objects: dict) -> bool | None:
    """True, False or None (unknown) for one term about object `name`."""
    obj = kb.object(name)
    value = kb.value(obj.name, term.attribute)
    if value is not None and term.part:
        count = obj.count(term.part)
        value = False if value is False else (None if count is None else _COMPARE[term.compare](count, term.count))
    elif value is True and term.noun:
        listed = objects.get(term.attribute, {}).get(tuple(term.noun.split()))
        value = None if listed is None else obj.name in listed  # a noun's list names every object it is true for
    if value is True and term.restricted:
        value = None
    if value is None and term.possible:
        value = True  # "can it be green?": it may be
    if value is False and term.possible and kb.attribute(term.attribute).family in _MADE_VARIOUSLY \
            and kb.value(obj.name, "man_made") and kb.value(obj.name, "liftable") is not False:
        value = None  # "can it be plastic / round?": a small made thing comes in more kinds than the one stored
    if value is False and term.yes_only:
        value = None
    return value if value is None else value != term.negated


_MADE_VARIOUSLY = frozenset({"material", "shape", "colour"})
_COMPARE = {"=": lambda a, b: a == b, ">": lambda a, b: a > b, "<": lambda a, b: a < b, ">=": lambda a, b: a >= b,
            "<=": lambda a, b: a <= b}


def combine(values: list[bool | None], any_of: bool) -> bool | None:
    if any_of:
        return True if True in values else (None if None in values else False)
    return False if False in values else (None if None in values else True)
