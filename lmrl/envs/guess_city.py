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
- **Yes/no questions** (starting with is/are/does/can/...) look for a value the knowledge
  base knows (a continent, country, region, language, dish, sport, religion, currency, a
  population threshold, a hemisphere); without one, the topic's boolean fact (coast,
  snow, heat, capital) answers.
- Anything else gets one fixed reply that says what can be asked (`UNKNOWN`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lmrl.envs.cities import City, CityKB, load_cities, normalize
from lmrl.envs.question_game import MAX_QUESTIONS, QuestionGameEnv, build_oracle

PHRASINGS_PATH = Path(__file__).resolve().parent / "data" / "dialogue_phrasings.json"
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
_NUMBER = re.compile(r"(\d+(?:\.\d+)?)\s*(million|m\b|mil\b|billion|thousand|k\b)?")
_MORE = re.compile(r"\b(?:more|over|above|greater|bigger|larger|exceed|exceeds|at least|higher)\b")
_LESS = re.compile(r"\b(?:less|under|below|fewer|smaller|at most|lower)\b")
_COLD = re.compile(r"\b(?:cold|cool|chilly|freezing|mild)\b")
_HEMISPHERES = {"northern": ("north", "northern"), "southern": ("south", "southern"),
                "eastern": ("east", "eastern"), "western": ("west", "western")}
_CONTINENT_WORDS = {
    "africa": ["africa", "african"], "asia": ["asia", "asian"], "europe": ["europe", "european"],
    "north america": ["north america", "north american"], "south america": ["south america", "south american",
                                                                            "latin america"],
    "oceania": ["oceania", "australasia"],
}


@dataclass(frozen=True)
class CityParse:
    """What a question asks, independent of the secret city.

    kind: "guess" (value = city name), "many" (several cities named), "refuse" (the name asked),
    "open" (topic), "yes_no" (topic, value), "unknown".
    """

    kind: str
    topic: str = ""
    value: str = ""
    score: float = 1.0


@dataclass(frozen=True)
class CityReply:
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
            from lmrl.envs.encoder import IntentIndex, default_encoder

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
        todo = [q for q in dict.fromkeys(questions) if q not in self._parses]
        rules = [(q, self._rule_parse(q)) for q in todo]
        need_open = [q for q, p in rules if p is None and not _YES_NO_START.search(_clean(q))]
        need_yes_no = [q for q, p in rules if p is None and _YES_NO_START.search(_clean(q))]
        if need_open or need_yes_no:
            open_index, yes_no_index = self._indexes()
            matches = dict(zip(need_open, open_index.match([_clean(q) for q in need_open])))
            matches.update(zip(need_yes_no, yes_no_index.match([_clean(q) for q in need_yes_no])))
        for q, parse in rules:
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
        """A yes/no question: the value it names decides the topic when there is one."""
        norm = " " + normalize(text) + " "
        countries = self.kb.mentioned_countries(text)
        if " capital " in norm:  # "Is it the capital of Japan?": capital, and of that country
            return CityParse("yes_no", "capital", countries[0] if countries else "", score)
        if countries:
            return CityParse("yes_no", "country", countries[0], score)
        if "hemisphere" in norm or topic == "hemisphere":
            for hemisphere, words in _HEMISPHERES.items():
                if any(f" {w} " in norm for w in words):
                    return CityParse("yes_no", "hemisphere", hemisphere, score)
        if topic == "population":
            threshold = _population_threshold(text)
            if threshold is not None:
                more = not _LESS.search(text) or bool(_MORE.search(text))
                return CityParse("yes_no", "population", f"{'>' if more else '<'}{threshold}", score)
        for vocab_topic in ("region", "continent", "language", "food", "sports", "religion", "currency", "economy"):
            for surface in sorted(self._vocab[vocab_topic], key=len, reverse=True):
                if surface and f" {surface} " in norm:
                    return CityParse("yes_no", vocab_topic, self._vocab[vocab_topic][surface], score)
        return CityParse("yes_no", topic, "", score)

    # -- answering -----------------------------------------------------------------------

    def answer(self, secret: str, question: str) -> CityReply:
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
            return CityReply(city.redact(_open_answer(city, parse.topic, question)), False, parse)
        if parse.kind == "yes_no":
            return CityReply(city.redact(_yes_no_answer(city, parse, question)), False, parse)
        return CityReply(UNKNOWN, False, parse)

    def answer_batch(self, secrets: Sequence[str], questions: Sequence[str]) -> list[CityReply]:
        self.prefetch(questions)
        return [self.answer(s, q) for s, q in zip(secrets, questions)]

    def fact(self, secret: str, topic: str) -> str:
        """A canonical value of a topic for a city (what a scripted guesser learns from an open answer)."""
        return _fact(self.kb.city(secret), topic)


_DEFAULT_OPEN = {
    "location": "Where is your city?", "country": "Which country is it in?", "continent": "Which continent is it on?",
    "language": "What language do people speak there?", "population": "How many people live there?",
    "climate": "What is the weather like?", "snow": "Does it snow there in winter?", "heat": "How hot does it get?",
    "water": "Is it near a river, lake or sea?", "coast": "Is it on the coast?",
    "landmarks": "What famous landmarks does it have?", "food": "What food is it famous for?",
    "sports": "What sports are popular there?", "economy": "What are the main industries?",
    "currency": "What currency do they use?", "religion": "What is the main religion?",
    "history": "How old is the city?", "known_for": "What is the city known for?",
    "capital": "Is it a capital city?", "hemisphere": "Which hemisphere is it in?",
    "name": "What is the name of your city?",
}


def _clean(question: str) -> str:
    text = question.replace("\u2019", "'").replace("\u2018", "'").lower()
    return " ".join(text.split())


def _title(name: str) -> str:
    return " ".join(w if w in {"de", "of", "la", "el"} else w[:1].upper() + w[1:] for w in name.split())


def _pick(options: Sequence[str], question: str, city: City) -> str:
    """A template chosen by a hash of the question and city: varied, but the same question gets the same answer."""
    digest = hashlib.sha256(f"{city.name}\x00{question}".encode()).digest()
    return options[digest[0] % len(options)]


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def _join(items: Sequence[str]) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _population_threshold(text: str) -> float | None:
    for number, unit in _NUMBER.findall(text):
        value = float(number)
        if unit in ("thousand", "k"):
            value /= 1000
        elif unit == "billion":
            value *= 1000
        elif not unit and value >= 10_000:
            value /= 1_000_000
        return value
    return None


def _population_bucket(millions: float) -> str:
    for limit, label in ((2, "under 2 million"), (5, "2-5 million"), (10, "5-10 million"), (20, "10-20 million")):
        if millions < limit:
            return label
    return "over 20 million"


def _fact(city: City, topic: str) -> str:
    return {
        "location": _region(city), "country": _region(city), "continent": city.continent,
        "language": city.languages[0], "population": _population_bucket(city.population_millions),
        "climate": city.climate, "snow": str(city.snow), "heat": str(city.hot_summers), "water": str(city.coastal),
        "coast": str(city.coastal), "landmarks": city.name, "food": city.foods[0], "sports": city.sports[0],
        "economy": city.industries[0], "currency": city.currency, "religion": city.religion[0],
        "history": city.name, "known_for": city.name, "capital": str(city.capital),
        "hemisphere": city.hemisphere, "name": "",
    }[topic]


def _region(city: City) -> str:
    """The region, unless its name gives the country away ("mexico and central america")."""
    return _cap(city.continent) if city.country in city.region else city.region


def _open_answer(city: City, topic: str, question: str) -> str:
    region = _region(city)
    lang = _join([_cap(x) for x in city.languages])
    millions = city.population_millions
    options: dict[str, list[str]] = {
        "location": [f"It's in {region}, in {_cap(city.continent)}.",
                     f"My city is in {_cap(city.continent)}, in the part of the world called {region}.",
                     f"You'll find it in {region}, in the {city.hemisphere} hemisphere."],
        "country": [f"I won't name the country, but it's in {region}, in {_cap(city.continent)}.",
                    f"That would give it away! It's somewhere in {region}."],
        "continent": [f"It's in {_cap(city.continent)}.", f"My city is on the continent of {_cap(city.continent)}."],
        "language": [f"Most people there speak {lang}.", f"The main language is {_cap(city.languages[0])}.",
                     f"You'd hear {lang} spoken on the streets."],
        "population": [f"About {millions:.1f} million people live in the city itself.",
                       f"It's a big place: roughly {millions:.1f} million people within the city limits."],
        "climate": [f"{city.climate_note} The climate is {city.climate}.",
                    f"It has {_article(city.climate)} {city.climate} climate. {city.climate_note}"],
        "snow": ["Yes, it usually snows there in winter." if city.snow else "No, it hardly ever snows there."],
        "heat": [f"{'Summers there are hot.' if city.hot_summers else 'Summers are not especially hot.'} "
                 f"{city.climate_note}"],
        "water": [_water_sentence(city)],
        "coast": [("Yes, it's on the coast. " if city.coastal else "No, it's not on the coast. ")
                  + _water_sentence(city)],
        "landmarks": [f"Famous sights include {_join(city.landmarks[:3])}.",
                      f"Visitors come to see {_join(city.landmarks[:3])}."],
        "food": [f"It's famous for {_join(city.foods)}.", f"You should try {_join(city.foods)} there."],
        "sports": [f"{_cap(city.sports[0])} is hugely popular there.",
                   f"People there love {_join(city.sports)}."],
        "economy": [f"Its economy is built on {_join(city.industries)}.",
                    f"Big industries there include {_join(city.industries)}."],
        "currency": [f"People pay with the {city.currency}.", f"The currency is the {city.currency}."],
        "religion": [f"The main religion is {_join([_cap(r) for r in city.religion])}."],
        "history": [f"It was founded {city.founded}.", f"Its story goes back a long way: it began {city.founded}."],
        "known_for": [city.known_for],
        "capital": ["Yes, it's the capital of its country." if city.capital else "No, it isn't the national capital."],
        "hemisphere": [f"It's in the {city.hemisphere} and {city.east_west} hemispheres."],
    }
    return _pick(options[topic], question, city)


def _water_sentence(city: City) -> str:
    if not city.water:
        return "There's no big river, lake or sea right there."
    return f"It lies on {_join(city.water)}."


def _yes_no_answer(city: City, parse: CityParse, question: str) -> str:
    topic, value = parse.topic, parse.value
    if topic == "capital" and value:
        truth = city.capital and value == city.country
        return "Yes, it's the capital." if truth else "No, it's not the capital of that country."
    if topic == "country":
        truth = value == city.country
        return "Yes, it is." if truth else "No, it's not in that country."
    if value and (topic == "continent" or (topic == "location" and value in _CONTINENT_WORDS)):
        return f"Yes, it's in {_cap(value)}." if value == city.continent else f"No, it's not in {_cap(value)}."
    if topic == "region" and value:
        return f"Yes, it's in {value}." if value == city.region else f"No, it's not in {value}."
    if topic == "hemisphere" and value:
        truth = value in (city.hemisphere, city.east_west)
        return f"Yes, it's in the {value} hemisphere." if truth else f"No, it's not in the {value} hemisphere."
    if topic == "population" and value:
        limit = float(value[1:])
        truth = city.population_millions > limit if value[0] == ">" else city.population_millions < limit
        about = f"about {city.population_millions:.0f} million people live there"
        return f"Yes, {about}." if truth else f"No, {about}."
    lists = {"language": city.languages, "food": city.foods, "sports": city.sports, "religion": city.religion,
             "economy": city.industries, "currency": (city.currency,)}
    if topic in lists and value:
        truth = value in lists[topic]
        return f"Yes, {value} is part of life there." if truth else f"No, {value} isn't a big thing there."
    flags = {"coast": city.coastal, "water": bool(city.water), "snow": city.snow, "heat": city.hot_summers,
             "capital": city.capital}
    if topic == "heat" and _COLD.search(question.lower()):  # "Is it cold there?" asks the opposite
        flags["heat"] = not city.hot_summers
    if topic in flags:
        return ("Yes. " if flags[topic] else "No. ") + _open_answer(city, topic, question).removeprefix(
            "Yes, ").removeprefix("No, ").removeprefix("Yes. ").removeprefix("No. ")
    return _open_answer(city, topic, question)


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
        return [item.name for item in self.oracle.kb.cities]

    def resolve(self, name: str) -> str | None:
        found = self.oracle.kb.resolve(name)
        return None if found is None else found.name
