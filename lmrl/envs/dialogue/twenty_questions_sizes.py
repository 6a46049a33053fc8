"""Size questions of 20 Questions: "Is it bigger than a tennis ball?", "Would it fit in a backpack?", "Is it tiny?".

Comparisons with the four references the knowledge base stores a judgement for (a hand, a
breadbox, a person, a car) and with the containers it stores (a backpack, a pocket, a hand)
answer from those stored attributes.  Anything else is compared by size range: each object has a
typical [low, high] size in metres (`size_m`), and so do common reference things
(`data/everyday_references.json`); clearly bigger is yes, clearly smaller is no, and overlapping
ranges ("Is a dog bigger than a cat?") cannot be answered.  Weights are not stored, so "heavier
than" is never answered.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

from lmrl.envs.dialogue.knowledge import KnowledgeBase
from lmrl.envs.dialogue.twenty_questions_parse import UNKNOWN_PARSE, Parse, Term, attribute_parse
from lmrl.envs.dialogue.words import tokens

REFERENCES_PATH = Path(__file__).resolve().parents[1] / "data" / "everyday_references.json"

_SIZE = re.compile(r"\b(?P<cmp>bigger|larger|taller|longer|wider|greater|huger|heavier|smaller|tinier|littler|shorter|"
                   r"narrower|lighter)\s+(?:in size\s+)?than\s+(?P<ref>.+)$")
_TOO_BIG = re.compile(r"\btoo\s+(?:big|large|long|wide)\s+(?:to\s+(?:fit|put|go|carry|keep)\s+)?(?:it\s+)?"
                      r"(?:in|into|inside)\s+(?P<ref>.+)$")
_FITS_IN = re.compile(r"\bfit\s+(?:in|inside|into|within)\s+(?P<ref>.+)$")
_AS_BIG = re.compile(r"\bas\s+(?:big|large|tall|long|wide|huge)\s+as\s+(?P<ref>.+)$")
_BIGGER = frozenset("bigger larger taller longer wider greater huger".split())
_BIG_WORDS = frozenset("big large huge giant enormous massive tall gigantic".split())
_SMALL_WORDS = frozenset("small tiny little miniature mini teeny".split())
_FILLER = frozenset("very really quite pretty rather fairly usually typically object thing item one".split())


@functools.lru_cache(maxsize=1)
def load_references(path: str = str(REFERENCES_PATH)) -> dict:
    """The everyday references (sizes, stored comparisons and containers, material kinds, trades)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    data["reference_sizes"] = {k: tuple(v) for k, v in data["reference_sizes"].items()}
    return data


REFERENCES = load_references()


def size_parse(kb: KnowledgeBase, text: str) -> Parse | None:
    """"Is it bigger than a tennis ball?", "Would it fit in a backpack?", "too big for a rucksack?"; None: no size asked."""
    too_big = _TOO_BIG.search(text.rstrip("?!. "))
    if too_big:
        fits = _fits_in(kb, too_big.group("ref"))
        return attribute_parse([Term(t.attribute, negated=not t.negated) for t in fits.terms]) if fits.terms else (
            Parse("size", bigger=True, reference=fits.reference) if fits.kind == "size" else fits)
    fits = _FITS_IN.search(text.rstrip("?!. "))
    if fits:
        return _fits_in(kb, fits.group("ref"))
    found = _SIZE.search(text) or _AS_BIG.search(text)
    if not found:
        return None
    cmp = found.groupdict().get("cmp")
    if cmp in ("heavier", "lighter"):
        return UNKNOWN_PARSE  # the knowledge base stores no weights to compare
    bigger, as_big = cmp is None or cmp in _BIGGER, cmp is None
    ref = re.sub(r"\s+(?:would be|is|are|would|does|do)$", "", re.split(r"[?.!,]", found.group("ref"))[0].strip())
    words = [w for w in tokens(ref)
             if w not in ("a", "an", "the", "your", "my", "some", "average", "normal", "typical", "regular", "standard")]
    for start in range(len(words)):
        phrase = " ".join(words[start:]).replace("'s", "")
        stored = REFERENCES["stored_comparisons"].get(phrase)
        if stored and not as_big:
            smaller_attribute = stored == "smaller_than_hand"
            return attribute_parse([Term(stored, negated=(bigger == smaller_attribute))])
        size = REFERENCES["reference_sizes"].get(phrase)
        obj = kb.resolve(phrase) if size is None else None
        if size is None and obj is not None:
            size = obj.size_m
        if size is not None:
            return Parse("size", bigger=bigger, reference=tuple(size), as_big=as_big)
    return UNKNOWN_PARSE


def _fits_in(kb: KnowledgeBase, ref: str) -> Parse:
    """"Would it fit in a backpack / a closed fist / a shoebox?": stored judgements first, then sizes."""
    words = [w for w in tokens(re.split(r"[?.!,]", ref)[0]) if w not in ("a", "an", "the", "my", "closed", "normal",
                                                                          "average", "typical", "regular", "small")]
    for start in range(len(words)):
        phrase = " ".join(words[start:])
        if phrase in REFERENCES["stored_containers"]:
            return attribute_parse([Term(REFERENCES["stored_containers"][phrase])])
        size = REFERENCES["reference_sizes"].get(phrase) or (kb.resolve(phrase).size_m if kb.resolve(phrase) else None)
        if size is not None:
            return Parse("size", bigger=False, reference=tuple(size))
    return UNKNOWN_PARSE


def size_word(text: str) -> Parse | None:
    """"Is it big?" / "Is it tiny?": clearly bigger than a person / smaller than a hand, no when clearly not."""
    words = [w for w in tokens(text) if w not in _FILLER]
    if len(words) != 1:
        return None
    if words[0] in _BIG_WORDS:
        return Parse("size", bigger=True, reference=(0.45, 1.9))
    if words[0] in _SMALL_WORDS:
        return Parse("size", bigger=False, reference=(0.2, 0.5))
    return None

def compare_size(size: tuple[float, float], parse: Parse) -> bool | None:
    """Is an object of `size` bigger (smaller, as big) than the reference?  None when the ranges overlap."""
    low, high = size
    ref_low, ref_high = parse.reference
    if parse.as_big:
        return True if low >= ref_low else (False if high < ref_low else None)
    if parse.bigger:
        return True if low > ref_high else (False if high < ref_low else None)
    return True if high < ref_low else (False if low > ref_high else None)
