"""What the Guess My City oracle says: open answers from templates, yes/no answers decided from the
knowledge base (`cities.py`), and "I can't answer that." when the knowledge base cannot decide.

A yes/no answer starts with "Yes" or "No" only when a stored fact decides it; otherwise it starts
with "I can't answer that." and, where it helps, adds what the knowledge base does hold about the
topic.  Lists the knowledge base keeps short (foods, sports, industries, landmarks) can say yes but
never no: a dish it does not list may still be eaten there.  Every sentence goes through
`City.redact` in the oracle, so none names the city.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from lmrl.envs.dialogue.cities import City, normalize

CANT = "I can't answer that."
# Water bodies that are not rivers: a water item without these words is a river ("the seine").
_SEA_WORDS = ("ocean", "sea", "bay", "gulf", "harbour", "harbor", "strait", "channel", "sound", "coast", "estuary",
              "lagoon", "bosphorus", "golden horn", "lake", "canal", "canals", "inlet", "creek", "port")
_YEAR = re.compile(r"\b(?:(?P<century>\d{1,2})(?:st|nd|rd|th) century(?P<cbc> bc)?|(?:ad )?(?P<year>\d{3,4})(?P<ybc> bc)?)\b")
NOW = 2026
# An inland city this close to a coast is near the sea; this far, it is not; in between, who can say.
NEAR_SEA_KM, FAR_FROM_SEA_KM = 50, 150


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


def _population_bucket(millions: float) -> str:
    for limit, label in ((2, "under 2 million"), (5, "2-5 million"), (10, "5-10 million"), (20, "10-20 million")):
        if millions < limit:
            return label
    return "over 20 million"


def fact(city: City, topic: str) -> str:
    """A canonical value of a topic for a city (what a scripted asker learns from an open answer)."""
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


def open_answer(city: City, topic: str, question: str) -> str:
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


def _bare(water: str) -> str:
    """"the river thames" -> "thames", "the seine" -> "seine": a water body's name as people say it."""
    return re.sub(r"^(?:the\s+)?(?:river\s+)?", "", normalize(water)).removesuffix(" river")


def rivers(city: City) -> list[str]:
    return [w for w in city.water if not any(s in w for s in _SEA_WORDS)]


def founded_year(city: City) -> int | None:
    """The founding year the `founded` note gives (negative for BC), or None."""
    found = _YEAR.search(city.founded.lower())
    if not found:
        return None
    if found.group("century"):
        year = (int(found.group("century")) - 1) * 100 + 50
        return -year if found.group("cbc") else year
    year = int(found.group("year"))
    return -year if found.group("ybc") else year


def _contains(texts: Sequence[str], phrase: str) -> bool:
    """Whether `phrase`, or its head noun ("statue" of "a big statue of Jesus"), appears as words in any text."""
    words = normalize(re.split(r"\b(?:of|with|that|which|in|on|for)\b", phrase)[0]).split()
    words = [w for w in words if w not in ("the", "a", "an")]
    if not words:
        return False
    targets = {" ".join(words), words[-1], words[-1].rstrip("s")}
    hay = [f" {normalize(t)} " for t in texts]
    return any(f" {t} " in h or f" {t}s " in h for t in targets if len(t) > 2 for h in hay)


def yes_no_value(city: City, parse: CityParse, question: str, nicknames: dict[str, str]) -> tuple[bool | None, str]:
    """(True / False / None, an explanation) for a yes/no question; None: the knowledge base cannot decide."""
    topic, value = parse.topic, parse.value
    deciders = {
        "capital": lambda: (city.capital and (not value or value == city.country), ""),
        "country": lambda: (value == city.country, ""),
        "state": lambda: (bool(city.state) and value == city.state[0], ""),  # a city without one is its own
        "continent": lambda: (value == city.continent, f"It's in {_cap(city.continent)}."),
        "region": lambda: (value == city.region, ""),
        "hemisphere": lambda: (value in (city.hemisphere, city.east_west), ""),
        "equator": lambda: (True if abs(city.lat) < 12 else False if abs(city.lat) > 25 else None, ""),
        "population": lambda: (_population(city, value), f"About {city.population_millions:.1f} million people "
                                                         f"live in the city itself."),
        "language": lambda: (_speaks(city, value), ""),
        "religion": lambda: (value in city.religion, ""),
        "currency": lambda: (set(normalize(value).split()) <= set(normalize(city.currency).split()),
                             f"The currency is the {city.currency}."),
        "food": lambda: (True if _contains((*city.foods, city.known_for), value) else None,
                         f"It's famous for {_join(city.foods)}."),
        "sports": lambda: (True if value in city.sports or _contains(city.sports, value) else None,
                           f"People there love {_join(city.sports)}."),
        "economy": lambda: (True if _contains((*city.industries, city.known_for), value) else None,
                            f"Big industries there include {_join(city.industries)}."),
        "landmark": lambda: (True if _contains((*city.landmarks, city.known_for), value) else None,
                             f"Famous sights include {_join(city.landmarks[:3])}."),
        "landmark_named": lambda: (value in {normalize(x) for x in city.landmarks}, ""),
        "known_for": lambda: (True if _contains((*city.landmarks, *city.foods, *city.industries, city.known_for,
                                                 city.nickname or ""), value) else None, city.known_for),
        "nickname": lambda: (True if city.nickname and normalize(value) in normalize(city.nickname)
                             else False if normalize(value) in nicknames else None, ""),
        "coast": lambda: (city.coastal, _water_sentence(city)),
        "sea": lambda: (True if _contains(city.water, value) else False if not city.coastal else None,
                        _water_sentence(city)),
        "sea_near": lambda: (_near_sea(city, value), _sea_sentence(city)),
        "sea_far": lambda: (_opposite(_near_sea(city, value)), _sea_sentence(city)),
        "lake": lambda: (any("lake" in w for w in city.water), _water_sentence(city)),
        "named_water": lambda: (True if value in {_bare(w) for w in city.water} else None, _water_sentence(city)),
        "river": lambda: (bool(rivers(city)), _water_sentence(city)),
        "water": lambda: (bool(city.water), _water_sentence(city)),
        "snow": lambda: (city.snow, ""),
        "heat": lambda: (city.hot_summers, city.climate_note),
        "cold_winter": lambda: (True if city.snow or city.climate == "continental" else
                                False if city.climate in ("tropical", "arid") else None, city.climate_note),
        "hot_all_year": lambda: (True if city.climate == "tropical" else
                                 False if city.climate in ("temperate", "continental", "highland") or city.snow else None,
                                 city.climate_note),
        "rainy": lambda: (False if city.climate == "arid" else True if city.climate == "tropical"  # a desert's short
                          or re.search(r"\b(?:rainy|wet)\b", city.climate_note.lower()) else None,  # rainy season is no
                          city.climate_note),
        "dry": lambda: (True if city.climate == "arid" else False if city.climate == "tropical" else None,
                        city.climate_note),
        "desert": lambda: (city.climate == "arid", city.climate_note),
        "climate": lambda: (value == city.climate or (value == "tropical" and city.climate == "tropical"), city.climate_note),
        "humid": lambda: (True if "humid" in city.climate_note.lower() or city.climate == "tropical" else
                          False if city.climate == "arid" else None, city.climate_note),
        "weather_word": lambda: (True if value in city.climate_note.lower() else None, city.climate_note),
        "monsoon": lambda: (True if city.rainy_season and city.climate == "tropical" or "monsoon" in city.climate_note.lower()
                            else False if city.climate in ("arid", "temperate", "continental") else None, city.climate_note),
        "warm_winter": lambda: (True if city.climate == "tropical" else False if city.snow or city.climate == "continental"
                                else None, city.climate_note),
        "latin": lambda: (city.continent == "south america" or city.region in ("mexico and central america", "caribbean"),
                          ""),
        "sunny": lambda: (True if city.climate in ("arid", "mediterranean") else None, city.climate_note),
        "high": lambda: (True if city.elevation_m >= 1500 else False if city.elevation_m < 600 else None, ""),
        "low": lambda: (True if city.elevation_m < 50 else False if city.elevation_m > 300 else None, ""),
        "mountains": lambda: (city.mountains, ""),
        "olympics": lambda: (bool(city.olympics) if not value else int(value) in city.olympics, ""),
        "old": lambda: _older_than(city, float(value or 1000)),
        "new": lambda: _newer(city),
    }
    if topic in deciders:
        return deciders[topic]()
    if topic.startswith("vague:"):  # the wording names something the knowledge base does not hold
        base = topic.removeprefix("vague:")
        detail = open_answer(city, base, question) if base in _DEFAULT_OPEN and base != "name" else ""
        return None, re.sub(r"^(?:Yes|No)[,.][^.]*\.\s*", "", detail)  # what is known, without a yes or a no
    return None, open_answer(city, topic, question) if topic in _DEFAULT_OPEN and topic != "name" else ""


# "Chinese" is any of the Chinese languages the knowledge base names, and each of them is Chinese.
_CHINESE = frozenset({"chinese", "mandarin", "cantonese", "shanghainese"})


def _speaks(city: City, language: str) -> bool:
    spoken = set(city.languages)
    return language in spoken or (language in _CHINESE and bool(spoken & _CHINESE)
                                  and (language == "chinese" or "chinese" in spoken))


def _near_sea(city: City, sea: str) -> bool | None:
    """Whether the city is near the sea (or the named sea); None where the distance leaves it open."""
    if city.coastal:
        return True if not sea or _contains(city.water, sea) else None  # a coast, but maybe not on that sea
    if sea and sea not in city.nearest_sea:
        return False if city.sea_km > FAR_FROM_SEA_KM else None
    return True if city.sea_km <= NEAR_SEA_KM else False if city.sea_km > FAR_FROM_SEA_KM else None


def _opposite(value: bool | None) -> bool | None:
    return None if value is None else not value


def _sea_sentence(city: City) -> str:
    if city.coastal:
        return _water_sentence(city)
    return f"It isn't on the coast; the nearest sea is the {city.nearest_sea[0]}, about {city.sea_km:.0f} km away."


def _population(city: City, value: str) -> bool:
    limit = float(value[1:])
    return city.population_millions > limit if value[0] == ">" else city.population_millions < limit


def _older_than(city: City, years: float) -> tuple[bool | None, str]:
    founded = founded_year(city)
    if founded is None:
        return None, f"It was founded {city.founded}."
    age = NOW - founded
    return (True if age > years * 1.2 else False if age < years * 0.8 else None), f"It was founded {city.founded}."


def _newer(city: City) -> tuple[bool | None, str]:
    founded = founded_year(city)
    return (None if founded is None else founded > 1850), f"It was founded {city.founded}."


def yes_no_text(value: bool | None, detail: str, parse: CityParse) -> str:
    """The reply: "Yes."/"No." with the detail, or "I can't answer that." with what is known."""
    if value is None:
        return f"{CANT} {detail}".strip()
    head = "Yes" if value else "No"
    if parse.topic in ("country", "state", "capital", "region", "hemisphere", "equator") or not detail:
        return {("country", True): "Yes, it is.", ("country", False): "No, it's not in that country.",
                ("capital", True): "Yes, it's the capital.", ("capital", False): "No, it's not the capital.",
                }.get((parse.topic, value), f"{head}.")
    return f"{head}. {_cap(detail)}"
