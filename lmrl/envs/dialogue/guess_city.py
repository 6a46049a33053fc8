"""Guess My City: find the oracle's home city with at most 20 free-form questions.

Text and rewards follow LMRL-Gym: the history opens with `Questions:\\n`; each agent
utterance is one question and the oracle answers with one line; every question costs -1
except a correct guess, which gets 0 and ends the game; the game ends after 20 questions.

Fixed from the original: its success check never fired (it zipped the characters of
"city,country" against the question's words), its FLAN-T5 oracle collapsed every answer
to Yes./No., and its city list dropped Seoul.  Our oracle answers from the city knowledge
base (`data/guess_my_city.json`, `cities.py`) with a truthful sentence:

- **Guesses.**  A question that names exactly one city (name or alias; case, accents,
  punctuation and articles do not matter) and otherwise only frame words ("is it", "are
  you from", "my guess is", "the city of", its country's name) is a guess; the right one
  wins ("Yes! I'm from Tokyo."), a wrong one gets "No, I'm not from Osaka."  Naming two
  or more cities at once never wins.
- **Never names the city** (nor, in open answers, its country: "which country?" is answered
  with the region).  Every sentence passes through `City.redact`.  Yes/no questions about
  the country ("Is it in Japan?") are answered truthfully.
- **Open questions** ("What food is it famous for?") are mapped to one of 21 topics by
  nearest example phrasing (sentence embeddings, `encoder.py`); the reply is one of
  several templates for that topic, picked by a hash of the question so the same question
  always gets the same answer.
- **Yes/no questions** (starting with is/are/does/can/...) are answered "Yes" or "No" only
  when a stored fact decides them: a continent, country (or "a Japanese city"), state or
  province ("Is it in Texas?"), region, language, currency, religion, hemisphere or nearness
  to the equator, population threshold, coast, sea (and how near an inland city is to one),
  lake or river, snow, heat, desert, rain, elevation and mountains, Olympic Games, age,
  nickname, or a dish, sport, industry or landmark the city's lists name (those short lists
  can say yes, never no).  Anything else ("Is it in Ohio?", "Is it on an island?") gets "I
  can't answer that." with what the knowledge base does hold on the topic
  (`guess_city_questions.py` reads the wording, `guess_city_answers.py` decides).
- Anything else gets one fixed reply that says what can be asked (`UNKNOWN`).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lmrl.envs.dialogue.cities import City, CityKB, load_cities, normalize
from lmrl.envs.dialogue.guess_city_answers import (
    _DEFAULT_OPEN,
    CityParse,
    _bare,
    _title,
    fact,
    open_answer,
    yes_no_text,
    yes_no_value,
)
from lmrl.envs.dialogue.guess_city_questions import read_generic, read_yes_no
from lmrl.envs.dialogue.question_game import MAX_QUESTIONS, QuestionGameEnv, build_oracle
from lmrl.envs.dialogue.words import strip_chatter

PHRASINGS_PATH = Path(__file__).resolve().parents[1] / "data" / "dialogue_phrasings.json"
UNKNOWN = ("I can't answer that. Ask me about where my city is, its language, climate, food, landmarks, "
           "sports, economy or history, or guess it.")
REFUSE = "I can't tell you the name; that's for you to guess! Ask me about the city instead."
MANY_CITIES = "One guess at a time, please: name a single city."
DEFAULT_THRESHOLD = 0.40
TOPICS = ("location", "country", "continent", "language", "population", "climate", "snow", "heat", "water",
          "coast", "landmarks", "food", "sports", "economy", "currency", "religion", "history", "known_for",
          "capital", "hemisphere", "name")
_YES_NO_START = re.compile(r"^(?:so |ok |okay |and |well |then )*(?:is|are|does|do|did|can|could|would|will|was|"
                           r"were|has|have|had|should|isn't|aren't|doesn't|don't)\b")
_FRAME_WORDS = frozenset(
    "is it this that the a an your my city town place home hometown you are from do live in come of called named "
    "could can might would be perhaps maybe guess guessing i im i'm am think it's its must so then ok okay well "
    "right correct located born grew grow up final answer thinking about".split()
)
# Yes/no topics the matcher's topic alone decides (the question's words are the topic's own).
_DECIDED_BY_TOPIC = frozenset({"capital"})
_NUMBER = re.compile(r"(\d+(?:\.\d+)?)\s*(million|m\b|mil\b|billion|thousand|k\b)?")
_MORE = re.compile(r"\b(?:more|over|above|greater|bigger|larger|exceed|exceeds|at least|higher)\b")
_LESS = re.compile(r"\b(?:less|under|below|fewer|smaller|at most|lower)\b")
_HEMISPHERES = {"northern": ("north", "northern"), "southern": ("south", "southern"),
                "eastern": ("east", "eastern"), "western": ("west", "western")}
_CONTINENT_WORDS = {
    "africa": ["africa", "african"], "asia": ["asia", "asian"], "europe": ["europe", "european"],
    "north america": ["north america", "north american"], "south america": ["south america", "south american",
                                                                            "latin america"],
    "oceania": ["oceania", "australasia"],
}


@dataclass(frozen=True)
class CityReply:
    """The oracle's answer to one question: its text, whether it was a correct guess, and how the question was read."""

    text: str
    correct_guess: bool
    parse: CityParse


def load_phrasings(path: str | Path = PHRASINGS_PATH) -> dict:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return data.get("guess_my_city", {})


class CityOracle:
    """Answers questions about a secret city from the knowledge base (see the module docstring)."""

    def __init__(self, kb: CityKB | None = None, phrasings: dict | None = None, encoder=None,
                 threshold: float = DEFAULT_THRESHOLD):
        self.kb = kb or load_cities()
        self.threshold = threshold
        self._encoder = encoder
        self._phrasings = phrasings if phrasings is not None else load_phrasings()
        self._open_index = self._yes_no_index = None
        self._parses: dict[str, CityParse] = {}
        self._vocab = self._value_vocabulary()
        self._landmarks = {normalize(x): c.name for c in self.kb.cities for x in c.landmarks if len(normalize(x)) > 4}
        self._nicknames = {normalize(c.nickname): c.name for c in self.kb.cities if c.nickname}
        self._waters = {_bare(w) for c in self.kb.cities for w in c.water if len(_bare(w)) > 3 and "city" not in w}

    # -- vocabularies --------------------------------------------------------------------

    def _value_vocabulary(self) -> dict[str, dict[str, str]]:
        """topic -> {normalized surface form -> canonical value} for the values yes/no questions name."""
        vocab: dict[str, dict[str, str]] = {t: {} for t in
                                            ("continent", "region", "language", "food", "sports", "religion",
                                             "currency", "economy", "hemisphere")}
        for continent, words in _CONTINENT_WORDS.items():
            for word in words:
                vocab["continent"][word] = continent
        for hemisphere, words in _HEMISPHERES.items():
            for word in words:
                vocab["hemisphere"][word] = hemisphere
        for city in self.kb.cities:
            vocab["region"][normalize(city.region)] = city.region
            for field, topic in (("languages", "language"), ("foods", "food"), ("sports", "sports"),
                                 ("religion", "religion"), ("industries", "economy")):
                for value in getattr(city, field):
                    vocab[topic][normalize(value)] = value
            vocab["currency"][normalize(city.currency)] = city.currency
        return vocab

    def _indexes(self):
        if self._open_index is None:
            from lmrl.envs.dialogue.encoder import IntentIndex, default_encoder

            encoder = self._encoder or default_encoder()
            fill = {"country": "France", "continent": "Europe", "language": "Spanish", "food": "pizza",
                    "sports": "football", "currency": "euro", "religion": "Islam", "landmarks": "a big tower",
                    "population": "10 million", "hemisphere": "the southern", "economy": "tourism",
                    "location": "Europe", "water": "a river", "history": "ancient"}
            opened = {t: list(p.get("open", [])) + [_DEFAULT_OPEN[t]] for t, p in self._phrasings.items()
                      if t in TOPICS}
            for topic in TOPICS:
                opened.setdefault(topic, [_DEFAULT_OPEN[topic]])
            yes_no = {t: [q.replace("{x}", fill.get(t, "that")) for q in p.get("yes_no", [])]
                      for t, p in self._phrasings.items() if t in TOPICS and p.get("yes_no")}
            self._open_index = IntentIndex(opened, encoder)
            self._yes_no_index = IntentIndex(yes_no or opened, encoder)
        return self._open_index, self._yes_no_index

    # -- understanding -------------------------------------------------------------------

    def prefetch(self, questions: Sequence[str]) -> None:
        """Parse every new question of the batch at once (rules first, then one embedding pass for the rest), so later
        `parse` calls are cache hits."""
        todo = [q for q in dict.fromkeys(questions) if q not in self._parses]
        rules = [(q, self._rule_parse(q)) for q in todo]
        need_open = [q for q, p in rules if p is None and not _YES_NO_START.search(_clean(q))]
        need_yes_no = [q for q, p in rules if p is None and _YES_NO_START.search(_clean(q))]
        if need_open or need_yes_no:
            open_index, yes_no_index = self._indexes()
            matches = dict(zip(need_open, open_index.match([_clean(q) for q in need_open])))
            matches.update(zip(need_yes_no, yes_no_index.match([_clean(q) for q in need_yes_no])))
        for q, parse in rules:
            if parse is None and q in need_yes_no:
                parse = self._yes_no_values(_clean(q), q)  # a value or wording the knowledge base decides, at any score
                if parse is not None:
                    parse = CityParse(parse.kind, parse.topic, parse.value, matches[q][1])
            if parse is None:
                topic, score = matches[q]
                yes_no = q in need_yes_no
                if score < self.threshold:
                    parse = CityParse("unknown", score=score)
                elif topic == "name":
                    parse = CityParse("refuse", "name", score=score)
                elif yes_no:
                    parse = self._yes_no_parse(_clean(q), topic, score)
                else:
                    parse = CityParse("open", topic, score=score)
            if len(self._parses) > 500_000:
                self._parses.clear()
            self._parses[q] = parse

    def parse(self, question: str) -> CityParse:
        """How the oracle reads a question (cached), as a `CityParse`: a guess, an open or a yes/no question about a
        topic, a guess at several cities, a question it refuses (the city's name), or one it does not understand."""
        if question not in self._parses:
            self.prefetch([question])
        return self._parses[question]

    def _rule_parse(self, question: str) -> CityParse | None:
        text = _clean(question)
        if not re.search(r"[a-z]", normalize(text)):
            return CityParse("unknown")
        named = self.kb.mentioned(question)  # original case: "LA" is a name, "la" a word
        if len({c.name for c in named}) >= 2:
            return CityParse("many")
        if len(named) == 1:
            city = named[0]
            if self._only_frame(text, city):
                return CityParse("guess", value=city.name)
            return CityParse("unknown")
        return None

    def _only_frame(self, text: str, city: City) -> bool:
        """Whether the question is nothing but a guess of `city` ("Are you from Tokyo, Japan?")."""
        rest = " " + normalize(text) + " "
        for name in sorted((*city.names, city.country, *city.country_aliases), key=len, reverse=True):
            rest = rest.replace(" " + normalize(name) + " ", " ")
        return all(word in _FRAME_WORDS for word in rest.split())

    def _yes_no_parse(self, text: str, topic: str, score: float) -> CityParse:
        """A yes/no question with no value the knowledge base decides (`_yes_no_values` found none): the topic
        the matcher guessed answers only when the question names that flag itself ("Is it a capital city?");
        otherwise it cannot be decided ("Does it have four seasons in a day?")."""
        return CityParse("yes_no", topic if topic in _DECIDED_BY_TOPIC else "vague:" + topic, "", score)

    def _yes_no_values(self, text: str, original: str = "") -> CityParse | None:
        """What a yes/no question asks by the value or wording it uses, or None (see guess_city_questions.py).
        `original`: the question as typed ("US" is the country only in capitals)."""
        norm = " " + normalize(text) + " "
        countries = self.kb.mentioned_countries(original or text)
        if re.search(r"\b(?:was it|used to be|former|formerly|once)\b.*\bcapital\b|\bcapital\b.*\b(?:in the past|before|"
                     r"long ago)\b", norm):
            return CityParse("yes_no", "vague:history")  # a past capital is history the knowledge base does not hold
        if " capital " in norm:  # "Is it the capital of Japan?": capital, and of that country
            return CityParse("yes_no", "capital", countries[0] if countries else "")
        if countries:
            return CityParse("yes_no", "country", countries[0])
        states = self.kb.mentioned_states(original or text)
        if states:  # "Is it in Texas?", "Is it a Californian city?"
            return CityParse("yes_no", "state", states[0])
        specific = read_yes_no(self.kb, text, "")
        if specific is not None:
            return specific
        if "hemisphere" in norm:
            for hemisphere, words in _HEMISPHERES.items():
                if any(f" {w} " in norm for w in words):
                    return CityParse("yes_no", "hemisphere", hemisphere)
        threshold = _population_threshold(text)
        if threshold is not None and re.search(r"\b(?:people|population|live|living|inhabitants|residents|million)\b", norm):
            more = not _LESS.search(text) or bool(_MORE.search(text))
            return CityParse("yes_no", "population", f"{'>' if more else '<'}{threshold}")
        for vocab_topic in ("region", "continent", "language", "food", "sports", "religion", "currency", "economy"):
            for surface in sorted(self._vocab[vocab_topic], key=len, reverse=True):
                if surface and f" {surface} " in norm:
                    return CityParse("yes_no", vocab_topic, self._vocab[vocab_topic][surface])
        return read_generic(text, "", self._landmarks, self._waters)

    # -- answering -----------------------------------------------------------------------

    def answer(self, secret: str, question: str) -> CityReply:
        """The reply to `question` about the city `secret`, with the city's name removed from it, and whether it was a
        correct guess."""
        parse = self.parse(question)
        city = self.kb.city(secret)
        if parse.kind == "guess":
            if parse.value == city.name:
                return CityReply(f"Yes! You got it: I'm from {_title(city.name)}.", True, parse)
            return CityReply(f"No, I'm not from {_title(parse.value)}.", False, parse)
        if parse.kind == "many":
            return CityReply(MANY_CITIES, False, parse)
        if parse.kind == "refuse":
            return CityReply(REFUSE, False, parse)
        if parse.kind == "open":
            return CityReply(city.redact(open_answer(city, parse.topic, question)), False, parse)
        if parse.kind == "yes_no":
            value, detail = yes_no_value(city, parse, question, self._nicknames)
            return CityReply(city.redact(yes_no_text(value, detail, parse)), False, parse)
        return CityReply(UNKNOWN, False, parse)

    def answer_batch(self, secrets: Sequence[str], questions: Sequence[str]) -> list[CityReply]:
        """`answer` for each (secret, question) pair, the questions parsed in one batch first."""
        self.prefetch(questions)
        return [self.answer(s, q) for s, q in zip(secrets, questions)]

    def fact(self, secret: str, topic: str) -> str:
        """A canonical value of a topic for a city (what a scripted guesser learns from an open answer)."""
        return fact(self.kb.city(secret), topic)


def _clean(question: str) -> str:
    """Lowercase, one line, curly quotes straightened, chatter in front dropped ("OK, is it in Italy?")."""
    return strip_chatter(" ".join(question.replace("\u2019", "'").replace("\u2018", "'").lower().split()))


_NUMBER_WORDS = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "ten": 10, "twenty": 20}


def _population_threshold(text: str) -> float | None:
    """The number of people a question names, in millions ("2 million", "a million", "500k", "five million")."""
    for number, unit in _NUMBER.findall(text):
        value = float(number)
        if unit in ("thousand", "k"):
            value /= 1000
        elif unit == "billion":
            value *= 1000
        elif not unit and value >= 10_000:
            value /= 1_000_000
        return value
    worded = re.search(r"\b(a|one|two|three|four|five|ten|twenty)\s+million\b", text)
    return float(_NUMBER_WORDS[worded.group(1)]) if worded else None



@functools.lru_cache(maxsize=1)
def default_oracle() -> CityOracle:
    return CityOracle()


class GuessCityEnv(QuestionGameEnv):
    """The game (module docstring).  `reset(options={"secret": "tokyo"})` fixes the city."""

    noun = "city"

    def __init__(self, max_questions: int = MAX_QUESTIONS, oracle=None):
        """`oracle`: None/"kb" (knowledge-grounded), {"kind": "lm", "model": ...} (`lm_oracle.py`),
        or an oracle object."""
        super().__init__(build_oracle(oracle, default_oracle, "guess_city"), max_questions)

    def secrets(self) -> list[str]:
        """The knowledge base's cities."""
        return [item.name for item in self.oracle.kb.cities]

    def resolve(self, name: str) -> str | None:
        """The city a name (or accepted alternative name) refers to, or None."""
        found = self.oracle.kb.resolve(name)
        return None if found is None else found.name
