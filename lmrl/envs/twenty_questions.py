"""Twenty Questions: find the secret object with at most 20 yes/no questions.

Text and rewards follow LMRL-Gym: the history opens with `Questions:\\n`; every agent
utterance is one question, answered `Yes.\\n` or `No.\\n`; each question costs -1 except
the one that correctly names the object, which gets 0 and ends the game; the game also
ends after 20 questions.  Returns therefore lie in [-20, 0].

The original answered with a fine-tuned FLAN-T5-XL we cannot download.  Our oracle is
grounded in the knowledge base (`data/twenty_questions.json`): it works out what a
question asks, secret-independently, and then reads the answer off the secret's entry.

How a question is understood (`TwentyQuestionsOracle.parse`), in order:

1. **Guess.**  Leading frame words ("is it", "are you thinking of", "my guess is", ...),
   articles and "kind of" are stripped; if what is left names one object (a name or a
   synonym; case, article, plural and punctuation do not matter), the question is a
   guess of that object.  If it names a category ("a kind of fruit", "furniture"), it
   asks that category's attribute.  If it is "a"/"an" and one to three words that no
   attribute, category or example phrasing uses ("a wolf", "a ruby"), it guesses something
   outside the knowledge base and gets `No.`.
2. **Not answerable.**  Open questions (what/which/where/how/...), several guesses at once
   ("is it a cat or a dog?", "a cat, a dog, a cow?"), and text without letters get
   `I can't answer that.`: the same reply every time, costing a question, never a win.
3. **Size comparisons** ("bigger than a person?", "smaller than a cat?") are answered by
   rule from an ordinal size scale built from the size attributes, in either direction:
   sentence embeddings cannot tell "bigger" from "smaller".
4. **Attributes.**  Otherwise the question is embedded (all-MiniLM-L6-v2, `encoder.py`) and
   given the attribute of its most similar example phrasing (`data/dialogue_phrasings.json`
   plus each attribute's own question); below `threshold` cosine similarity it is not
   answerable.  A standalone "not"/"never" flips the answer ("Is it not alive?" -> No for
   a dog); contractions ("isn't it alive?") are read as plain questions, as people mean them.

Only a correct guess wins, so repeating questions, asking "what is it?", listing objects
or typing gibberish never wins (tested in tests/envs/test_twenty_questions.py).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lmrl.envs.knowledge import (
    KnowledgeBase,
    category_attribute,
    load_twenty_questions,
    normalize,
)
from lmrl.envs.question_game import MAX_QUESTIONS, QuestionGameEnv, build_oracle

PHRASINGS_PATH = Path(__file__).resolve().parent / "data" / "dialogue_phrasings.json"
YES, NO, UNKNOWN = "Yes.", "No.", "I can't answer that."
# Cosine similarity below which a question is not mapped to any attribute (set on the example
# phrasings by leave-one-out, see tests/envs/test_twenty_questions.py; never on the held-out set).
DEFAULT_THRESHOLD = 0.45
# Weight of the keyword term of the matcher (encoder.IntentIndex), chosen by leave-one-out on the example phrasings.
DEFAULT_KEYWORD_WEIGHT = 0.1

# Words a guess may be wrapped in: "is it", "are you thinking of", "my final guess is", "could it be", ...
_FRAME_WORDS = frozenset(
    "is it this that the a an some object thing item your answer word are you thinking of about could can "
    "might would be perhaps maybe my final guess guessing i im am think its it's must so then ok okay well "
    "hmm right correct they these those thing you're youre we".split()
)
_KIND_OF = re.compile(r"^(?:(?:a|an|some)\s+)?(?:kind|type|sort|piece|item|form|variety|example)s?\s+of\s+")
_WH_START = re.compile(r"^(?:so |ok |okay |and |well |then )*(?:what|which|where|who|whom|whose|why|when|how)\b")
_NEGATION = re.compile(r"\b(?:not|never)\b")
_OR_NOT = re.compile(r"\bor not\b")
_BIGGER = re.compile(r"\b(?:bigger|larger|taller|longer|wider|greater in size)\s+than\s+(.+)$")
_SMALLER = re.compile(r"\b(?:smaller|tinier|littler|shorter|narrower)\s+than\s+(.+)$")
_LIST_SEPARATORS = re.compile(r"[,;/?!]|\bor\b|\band\b")
_EXAMPLES = re.compile(r"\b(?:like|such as|e\.g\.|for example|for instance|including)\b")
_LIGHTER = re.compile(r"\blighter\s+than\b|\bless heavy\b")

# Ordinal size levels (0 = smaller than a hand ... 4 = bigger than a car), and where common
# reference things sit between them: "bigger than a person" means level > 2.5.
_REFERENCE_LEVELS = {
    **dict.fromkeys(["hand", "palm", "fist", "your hand", "my hand", "a hand"], 0.5),
    **dict.fromkeys(["breadbox", "bread box", "shoebox", "shoe box", "microwave", "loaf of bread", "basketball"], 1.5),
    **dict.fromkeys(["person", "human", "man", "woman", "adult", "me", "you", "grown up", "human being",
                     "grown man", "people"], 2.5),
    **dict.fromkeys(["house", "building", "bus"], 3.5),
}
_CATEGORY_NOUNS = {
    "Sports": ["sports equipment", "sports gear", "sporting goods", "sport equipment", "sports item",
               "sporting equipment", "sports thing"],
    "Animals": ["animal", "creature", "beast", "living creature"],
    "Fruits": ["fruit"],
    "Vehicles": ["vehicle", "means of transport", "means of transportation", "mode of transport",
                 "mode of transportation"],
    "Clothes": ["clothing", "clothes", "piece of clothing", "item of clothing", "article of clothing", "garment",
                "apparel"],
    "Electronics": ["electronic device", "electronic", "electronics", "electronic gadget", "gadget",
                    "electronic item", "electronic appliance"],
    "Musical Instruments": ["musical instrument", "instrument", "music instrument"],
    "Furniture": ["furniture", "piece of furniture", "furnishing"],
    "Office Supplies": ["office supply", "office supplies", "stationery", "office item", "office tool"],
    "Vegetables": ["vegetable", "veggie", "veg"],
    "Art": ["art supply", "art supplies", "art material", "art materials", "art tool", "artwork", "work of art"],
    "Kitchen Tools": ["kitchen tool", "kitchen utensil", "utensil", "kitchenware", "kitchen item", "cookware",
                      "kitchen gadget"],
    "Nature": ["part of nature", "natural feature", "natural thing", "thing in nature", "natural object"],
    "Toys": ["toy", "plaything"],
    "Jewelry": ["jewelry", "jewellery", "piece of jewelry", "piece of jewellery", "jewel"],
    "Garden Supplies": ["garden tool", "garden supply", "garden supplies", "gardening tool", "garden equipment",
                        "gardening supply", "gardening supplies", "gardening equipment"],
    "Tools": ["tool", "hand tool", "power tool"],
}


@dataclass(frozen=True)
class Parse:
    """What a question asks, independent of the secret.

    kind: "guess" (target = object name), "other" (a guess of something outside the knowledge
    base: answered No.), "attribute" (target = attribute id), "size" (target = reference level as
    a string, `bigger` says the direction), "unknown".
    """

    kind: str
    target: str = ""
    negated: bool = False
    bigger: bool = True
    score: float = 1.0


@dataclass(frozen=True)
class Reply:
    text: str
    correct_guess: bool
    parse: Parse


def load_phrasings(path: str | Path = PHRASINGS_PATH) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def size_level(true_attributes: frozenset[str]) -> int:
    """0 smaller than a hand, 1 up to a breadbox, 2 up to a person, 3 up to a car, 4 bigger than a car."""
    if "bigger_than_car" in true_attributes:
        return 4
    if "bigger_than_person" in true_attributes:
        return 3
    if "bigger_than_breadbox" in true_attributes:
        return 2
    return 0 if "smaller_than_hand" in true_attributes else 1


class TwentyQuestionsOracle:
    """Answers questions about a secret object from the knowledge base (see the module docstring)."""

    def __init__(self, kb: KnowledgeBase | None = None, phrasings: dict | None = None, encoder=None,
                 threshold: float = DEFAULT_THRESHOLD, keyword_weight: float = DEFAULT_KEYWORD_WEIGHT):
        self.kb = kb or load_twenty_questions()
        self.keyword_weight = keyword_weight
        phrasings = phrasings if phrasings is not None else load_phrasings()
        self.threshold = threshold
        self._encoder = encoder
        self._categories = {normalize(noun): c for c, nouns in _CATEGORY_NOUNS.items() for noun in nouns}
        for category in self.kb.categories:
            self._categories.setdefault(normalize(category), category)
        self._examples = self._build_examples(phrasings)
        from lmrl.envs.encoder import content_words

        self._vocabulary = set().union(*self._keywords().values(),
                                       *(content_words(q) for texts in self._examples.values() for q in texts))
        self._index = None
        self._parses: dict[str, Parse] = {}

    def _keywords(self) -> dict[str, set[str]]:
        """Each attribute's own words: its id's and its question's content words, a category's nouns."""
        from lmrl.envs.encoder import content_words

        keywords = {a.id: content_words(a.id.replace("_", " ") + " " + a.question) for a in self.kb.attributes}
        for category, nouns in _CATEGORY_NOUNS.items():
            keywords[category_attribute(category)] |= content_words(" ".join(nouns))
        return keywords

    def _build_examples(self, phrasings: dict) -> dict[str, list[str]]:
        examples: dict[str, list[str]] = {}
        for attribute in self.kb.attributes:
            examples.setdefault(attribute.id, []).append(attribute.question)
        for attribute_id, texts in phrasings.get("twenty_questions", {}).items():
            if attribute_id in self.kb.attribute_ids:
                examples.setdefault(attribute_id, []).extend(texts)
        for category, texts in phrasings.get("twenty_questions_categories", {}).items():
            if category in self.kb.categories:
                examples.setdefault(category_attribute(category), []).extend(texts)
        return examples

    @property
    def index(self):
        """The phrasing index, built on first use (loading the encoder takes ~2 s)."""
        if self._index is None:
            from lmrl.envs.encoder import IntentIndex, default_encoder

            self._index = IntentIndex(self._examples, self._encoder or default_encoder(), self._keywords(),
                                      self.keyword_weight)
        return self._index

    # -- understanding -------------------------------------------------------------------

    def prefetch(self, questions: Sequence[str]) -> None:
        """Parse many questions with one batched embedding pass (results are cached)."""
        todo = [q for q in dict.fromkeys(questions) if q not in self._parses]
        rules = [(q, self._rule_parse(q)) for q in todo]
        need = [q for q, parse in rules if parse is None]
        matches = dict(zip(need, self.index.match([_clean(q) for q in need]))) if need else {}
        for q, parse in rules:
            if parse is None:
                intent, score = matches[q]
                if score < self.threshold:
                    parse = Parse("unknown", score=score)
                else:
                    negated = bool(_NEGATION.search(_clean(q))) and not _OR_NOT.search(_clean(q))
                    if intent == "heavy" and _LIGHTER.search(_clean(q)):
                        negated = not negated
                    parse = Parse("attribute", intent, negated=negated, score=score)
            if len(self._parses) > 500_000:
                self._parses.clear()
            self._parses[q] = parse

    def parse(self, question: str) -> Parse:
        if question not in self._parses:
            self.prefetch([question])
        return self._parses[question]

    def _rule_parse(self, question: str) -> Parse | None:
        """Guesses, categories, unanswerable forms and size comparisons; None = ask the embeddings."""
        text = _clean(question)
        if not re.search(r"[a-z]", text):
            return Parse("unknown")
        remainder = _strip_frame(text)
        obj = self.kb.resolve(remainder) if remainder else None
        if obj is not None:
            return Parse("guess", obj.name)
        category = self._category(remainder)
        if category is not None:
            return Parse("attribute", category_attribute(category))
        if _WH_START.search(text):
            return Parse("unknown")
        if remainder and self._names_something_else(text, remainder):
            return Parse("other")
        if self._lists_guesses(text):
            return Parse("unknown")
        for pattern, bigger in ((_BIGGER, True), (_SMALLER, False)):
            found = pattern.search(text)
            if found:
                level = self._reference_level(found.group(1))
                if level is not None:
                    return Parse("size", str(level), bigger=bigger)
        return None

    def _category(self, remainder: str) -> str | None:
        if not remainder:
            return None
        text = _KIND_OF.sub("", remainder)
        for key in (text, text[:-1] if text.endswith("s") else text, text[:-2] if text.endswith("es") else text):
            category = self._categories.get(normalize(key))
            if category is not None:
                return category
        return None

    def _reference_level(self, phrase: str) -> float | None:
        phrase = normalize(re.sub(r"[?.!,]+.*$", "", phrase))
        phrase = re.sub(r"^(?:a|an|the|your|my|some|average|normal|typical|regular)\s+", "", phrase)
        phrase = re.sub(r"^(?:average|normal|typical|regular)\s+", "", phrase)
        if phrase in _REFERENCE_LEVELS:
            return _REFERENCE_LEVELS[phrase]
        obj = self.kb.resolve(phrase)
        return None if obj is None else float(size_level(obj.true_attributes))

    def _names_something_else(self, text: str, remainder: str) -> bool:
        """A guess of a thing outside the knowledge base ("Is it a wolf?"): after the frame, "a"/"an"
        and one to three words, none of which any attribute, category or example phrasing uses."""
        from lmrl.envs.encoder import content_words

        words = remainder.split()
        if not 1 <= len(words) <= 3 or _NEGATION.search(remainder):
            return False
        if not re.search(r"\b(?:a|an)\s+" + re.escape(remainder) + r"\W*$", text):
            return False
        return not content_words(remainder) & self._vocabulary

    def _lists_guesses(self, text: str) -> bool:
        """Two or more objects offered at once ("a cat, a dog or a cow?", "is it a cat? is it a dog?")."""
        named = set()
        text = _EXAMPLES.split(text)[0]  # "part of nature, like a tree or a rock?" gives examples, not guesses
        for part in _LIST_SEPARATORS.split(text):
            remainder = _strip_frame(part)
            obj = self.kb.resolve(remainder) if remainder else None
            if obj is not None:
                named.add(obj.name)
        return len(named) >= 2

    # -- answering -----------------------------------------------------------------------

    def answer(self, secret: str, question: str) -> Reply:
        parse = self.parse(question)
        obj = self.kb.object(secret)
        if parse.kind == "guess":
            correct = parse.target == obj.name
            return Reply(YES if correct else NO, correct, parse)
        if parse.kind == "attribute":
            value = parse.target in obj.true_attributes
            return Reply(YES if value != parse.negated else NO, False, parse)
        if parse.kind == "size":
            level, reference = size_level(obj.true_attributes), float(parse.target)
            value = level > reference if parse.bigger else level < reference
            return Reply(YES if value else NO, False, parse)
        if parse.kind == "other":
            return Reply(NO, False, parse)
        return Reply(UNKNOWN, False, parse)

    def answer_batch(self, secrets: Sequence[str], questions: Sequence[str]) -> list[Reply]:
        self.prefetch(questions)
        return [self.answer(s, q) for s, q in zip(secrets, questions)]


def _clean(question: str) -> str:
    """Lowercase, one line, curly quotes straightened, whitespace collapsed."""
    text = question.replace("\u2019", "'").replace("\u2018", "'").lower()
    return " ".join(text.split())


def _strip_frame(text: str) -> str:
    """What a guess names once its frame words are gone: "so is it maybe a dog?" -> "dog"."""
    words = re.sub(r"[^a-z0-9' -]+", " ", text).split()
    while words and words[0].strip("'") in _FRAME_WORDS:
        words.pop(0)
    while words and words[-1].strip("'") in {"then", "right", "maybe", "perhaps", "correct", "yes", "no"}:
        words.pop()
    return " ".join(words)


@functools.lru_cache(maxsize=1)
def default_oracle() -> TwentyQuestionsOracle:
    """One oracle per process: its parse cache and phrasing index are shared by every env."""
    return TwentyQuestionsOracle()


class TwentyQuestionsEnv(QuestionGameEnv):
    """The game (module docstring).  `reset(options={"secret": "dog"})` fixes the object."""

    noun = "object"

    def __init__(self, max_questions: int = MAX_QUESTIONS, oracle=None):
        """`oracle`: None/"kb" (knowledge-grounded), {"kind": "lm", "model": ...} (`lm_oracle.py`),
        or an oracle object."""
        super().__init__(build_oracle(oracle, default_oracle, "twenty_questions"), max_questions)

    def secrets(self) -> list[str]:
        return [item.name for item in self.oracle.kb.objects]

    def resolve(self, name: str) -> str | None:
        found = self.oracle.kb.resolve(name)
        return None if found is None else found.name
