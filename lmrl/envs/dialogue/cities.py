"""The Guess My City knowledge base: about 100 world cities with facts, and a strict loader.

LMRL-Gym's Guess My City oracle was a FLAN-T5 model that collapsed every answer to Yes/No,
so open questions ("What language do people speak there?") got "No.".  Our oracle answers
from this curated knowledge base instead (`data/guess_my_city.json`); this module loads it,
checks it, and gives the oracle the name matching it needs.

File layout (JSON)::

    {"version": 3, "source": "how the data was made",
     "cities": [{"name": "tokyo", "aliases": ["tokio"], "country": "japan", ...}, ...]}

Every city has every field of `City` except the optional `nickname` (null or omitted when
there is no well-known one), `city_state` (default false), `state`, and `nearest_sea` and
`sea_km` (present exactly for the cities that are not coastal).  Conventions:

- Names, aliases, countries and list items are lowercase; accented names also list their
  unaccented spelling.  No normalized name or alias belongs to two cities, and none equals
  a country's name or alias unless the city is that country (a city-state like Singapore).
- `country_aliases` and `country_adjectives` ("japanese": "Is it a Japanese city?") are identical
  for every city of a country, and so is `continent`; no adjective belongs to two countries.
- `region` comes from `REGIONS`, close to the UN geoscheme but in everyday words (Iran is
  in the "middle east"; Vienna, Prague, Warsaw and Budapest in "central europe"); it must
  belong to the city's continent (`REGION_CONTINENT`).  Istanbul counts as Europe: its
  historic core and most of its people are on the European shore.
- `population_millions`: see the file's `source` (GeoNames city figures, not metro areas).
- `snow`: snow settles in most winters; `hot_summers`: summer days are usually hot;
  `rainy_season`: most of the year's rain falls in one season (a monsoon, a tropical wet
  season, or a Mediterranean wet winter).  `coastal`: on a sea or ocean coast, a large bay
  or an estuary as wide as a sea; a shore on a lake does not count.
- `religion` lists the main religions in no particular order; `languages` puts the most
  spoken first.
- `elevation_m`: height of the city centre above sea level (metres, rounded); `mountains`: a
  mountain range or high hills in or beside the city; `olympics`: the years it hosted the
  Summer or Winter Games (empty if never).
- `state`: the first-level division the city lies in (US state, Canadian province, Chinese
  province, Indian state, Spanish community, ...), its name first, then other spellings and
  adjectives nobody uses for anything else ("californian"; not "catalan", a language).  Empty
  where the city is its own division (Beijing, Tokyo, Delhi, Washington), the division carries
  the city's name (Osaka Prefecture, the state of São Paulo), or is a country alias (England).
  A state's names belong to one state of one country and name no city or country.
- `nearest_sea` and `sea_km`, for a city that is not `coastal` only: the sea or seas whose coast
  is nearest (names from `SEAS`; a part first, then the sea it belongs to: "tyrrhenian sea",
  "mediterranean") and the straight-line distance from the centre to that coast in km, rounded.
- Free-text fields (`climate_note`, `founded`, `known_for`, `nickname`) never contain the
  city's own name or aliases, so the oracle can read them out.  Landmarks, foods and water
  keep real names ("tokyo tower"); `City.redact` hides the city in them.

Any problem raises `CityKBError` naming the city (index and name) and the field at fault.
"""

from __future__ import annotations

import functools
import json
import math
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_PATH = Path(__file__).resolve().parents[1] / "data" / "guess_my_city.json"
VERSION = 3
CONTINENTS: tuple[str, ...] = ("africa", "asia", "europe", "north america", "south america", "oceania")
REGION_CONTINENT: dict[str, str] = {
    "east asia": "asia", "southeast asia": "asia", "south asia": "asia", "central asia": "asia",
    "middle east": "asia",
    "northern europe": "europe", "western europe": "europe", "central europe": "europe",
    "southern europe": "europe", "eastern europe": "europe",
    "north africa": "africa", "west africa": "africa", "east africa": "africa",
    "central africa": "africa", "southern africa": "africa",
    "northern america": "north america", "mexico and central america": "north america",
    "caribbean": "north america",
    "northern south america": "south america", "western south america": "south america",
    "eastern south america": "south america", "southern cone": "south america",
    "australia and new zealand": "oceania",
}
REGIONS: tuple[str, ...] = tuple(REGION_CONTINENT)
# Seas and oceans by the names people use; a `nearest_sea` must be one of them.
SEAS: tuple[str, ...] = ("pacific", "atlantic", "indian ocean", "arctic ocean", "mediterranean", "caribbean",
                         "arabian sea", "red sea", "black sea", "baltic", "north sea", "persian gulf", "gulf of mexico",
                         "south china sea", "east china sea", "yellow sea", "bohai sea", "sea of japan", "tasman sea",
                         "bay of bengal", "caspian", "andaman sea", "gulf of thailand", "gulf of tonkin",
                         "strait of malacca", "gulf of aden", "english channel", "adriatic", "tyrrhenian sea",
                         "ligurian sea", "aegean", "irish sea", "java sea", "coral sea")
CLIMATES: tuple[str, ...] = ("tropical", "arid", "temperate", "continental", "subtropical", "mediterranean",
                             "highland")
# Phrases that contain a country's name or alias but do not name that country ("south
# america" is not the USA, "north korea" not South Korea); continents and regions are added.
SHADOW_PHRASES: tuple[str, ...] = ("north korea", "south sudan", "republic of the congo", "congo river",
                                   "latin america", "central america", "the americas", "new mexico",
                                   "new england", "east india company", "washington state", "rio grande",
                                   "gulf of mexico", "indian ocean", "south china sea", "east china sea", "sea of japan",
                                   "gulf of guinea", "gulf of thailand", "western australia", "north holland",
                                   "ile de france",
                                   "english channel", "irish sea", "persian gulf", "arabian sea", "bay of bengal",
                                   "mexican food", "chinese food", "indian food", "italian food", "japanese food")
# Aliases that are ordinary words: free text mentions them only in capitals ("the US", "U.S.",
# "LA"), since "tell us" names no country and "la" is also an article ("kin la belle").
# `resolve("la")` and `resolve_country("us")` still work.
COMMON_WORD_ALIASES = frozenset({"us", "la"})
_SENTENCE_FIELDS = ("climate_note", "known_for")
_FREE_TEXT = ("climate_note", "founded", "known_for", "nickname")
_SEPARATOR = r"[\s\-'’.]+"


class CityKBError(ValueError):
    """The knowledge-base file breaks the schema; the message names the city and field."""


def normalize(text: str) -> str:
    """Lowercase, accents stripped (NFKD), punctuation as spaces, spaces collapsed."""
    text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return " ".join(re.sub(r"[\W_]+", " ", text.lower()).split())


def _tokens(text: str) -> tuple[str, ...]:
    """Normalized words with "st" read as "saint", the form every name lookup compares."""
    return tuple("saint" if t == "st" else t for t in normalize(text).split())


def _key(text: str) -> tuple[str, ...]:
    """Lookup key of a name: `_tokens` without a leading "the" ("The Hague" == "hague")."""
    tokens = _tokens(text)
    return tokens[1:] if len(tokens) > 1 and tokens[0] == "the" else tokens


def _fold(text: str) -> tuple[str, list[int]]:
    """Lowercased, accent-free text and, per folded character, its index in `text`."""
    chars, index = [], []
    for i, ch in enumerate(text):
        for c in unicodedata.normalize("NFKD", ch):
            if not unicodedata.combining(c):
                chars.append(c.lower())
                index.extend([i] * len(c.lower()))
    return "".join(chars), index


@functools.lru_cache(maxsize=512)
def _name_regex(names: tuple[str, ...]) -> re.Pattern:
    """Matches any of `names` in folded text as whole words, with an optional leading "the"
    and possessive "'s"; "st"/"saint" and separators (space, hyphen, dot, apostrophe) are loose."""
    alternatives = set()
    for name in names:
        tokens = _tokens(name)
        parts = ["(?:saint|st)" if t == "saint" else re.escape(t) for t in tokens]
        tail = r"\.?" if len(tokens[-1]) == 1 else ""
        alternatives.add(_SEPARATOR.join(parts) + tail)
    body = "|".join(sorted(alternatives, key=len, reverse=True))
    return re.compile(rf"(?<!\w)(?P<the>the\s+)?(?:{body})(?P<pos>['’]s)?(?!\w)")


@dataclass(frozen=True)
class City:
    """One city and everything the oracle may say about it (field meanings: module docstring)."""

    name: str
    aliases: tuple[str, ...]
    country: str
    country_aliases: tuple[str, ...]
    country_adjectives: tuple[str, ...]
    continent: str
    region: str
    lat: float
    lon: float
    population_millions: float
    capital: bool
    languages: tuple[str, ...]
    climate: str
    climate_note: str
    snow: bool
    hot_summers: bool
    rainy_season: bool
    coastal: bool
    water: tuple[str, ...]
    elevation_m: float
    mountains: bool
    olympics: tuple[int, ...]
    landmarks: tuple[str, ...]
    foods: tuple[str, ...]
    sports: tuple[str, ...]
    industries: tuple[str, ...]
    currency: str
    religion: tuple[str, ...]
    founded: str
    known_for: str
    nickname: str | None = None
    city_state: bool = False
    nearest_sea: tuple[str, ...] = ()
    sea_km: float = 0.0
    state: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)

    @property
    def hemisphere(self) -> str:
        return "northern" if self.lat >= 0 else "southern"

    @property
    def east_west(self) -> str:
        return "eastern" if self.lon >= 0 else "western"

    def redact(self, text: str) -> str:
        """`text` with every name and alias of this city (any case or accents, possessive too)
        replaced by "the city" ("the city's"); "The city" at the start of a sentence.
        A leading "the" is absorbed: "the Washington Monument" -> "the city monument"."""
        folded, index = _fold(text)
        out, end = [], 0
        for m in _name_regex(self.names).finditer(folded):
            start, stop = index[m.start()], index[m.end() - 1] + 1
            before = text[:start].rstrip()
            sentence_start = not before or before[-1] in ".!?" or text[start:start + 3] == "The"
            words = ("The city" if sentence_start else "the city") + ("'s" if m.group("pos") else "")
            out += [text[end:start], words]
            end = stop
        return "".join(out) + text[end:]


class CityKB:
    """A validated list of cities with name lookups; build it with `load_cities` or `from_dict`."""

    def __init__(self, cities: Iterable[City], source: str = ""):
        self.cities = tuple(cities)
        self.source = source
        self._index = {_key(n): c for c in self.cities for n in c.names}
        self._city_names = {k: c.name for k, c in self._index.items()}
        self._countries: dict[tuple[str, ...], str] = {}
        for c in self.cities:
            for n in (c.country, *c.country_aliases):
                self._countries[_key(n)] = c.country
        shadows = [_key(p) for p in (*SHADOW_PHRASES, *CONTINENTS, *REGIONS)]
        self._city_shadows = set(shadows) | self._foreign_phrases()
        self._country_shadows = set(shadows) | {
            k for k in self._index if k not in self._countries and _contains_any(k, self._countries)}
        self._city_scan = _without_common_words(self._index)
        self._country_scan = _without_common_words(self._countries)
        self._adjectives = {_key(a): c.country for c in self.cities for a in c.country_adjectives}
        self._states = {_key(n): c.state[0] for c in self.cities for n in c.state}

    def mentioned_states(self, text: str) -> list[str]:
        """States and provinces named in free text ("Is it in Texas?", "a Californian city"), by their first name."""
        return _scan(_tokens(text), self._states, self._country_shadows)

    def mentioned_adjectives(self, text: str) -> list[str]:
        """Countries named by an adjective in free text ("a Japanese city" -> japan); "North Korean" and
        "South American" name none."""
        shadows = {_key(p) for p in ("north korean", "south american", "north american", "latin american", "central american")}
        return _scan(_tokens(text), self._adjectives, self._country_shadows | shadows)

    def _foreign_phrases(self) -> set[tuple[str, ...]]:
        """Landmarks, foods and water that contain ANOTHER city's name ("little havana" is in
        Miami, "fort santiago" in Manila): they do not mention that other city."""
        out = set()
        for c in self.cities:
            others = [k for k, owner in self._index.items() if owner is not c]
            out.update(k for k in map(_key, (*c.landmarks, *c.foods, *c.water)) if _contains_any(k, others))
        return out

    def __len__(self) -> int:
        return len(self.cities)

    def resolve(self, text: str) -> City | None:
        """The city a name or alias denotes ("New York City", "st. petersburg", "Sao Paulo"), or None."""
        return self._index.get(_key(text))

    def city(self, name: str) -> City:
        """The city with this name or alias; KeyError naming some valid names if there is none."""
        found = self.resolve(name)
        if found is None:
            examples = ", ".join(c.name for c in self.cities[:5])
            raise KeyError(f"unknown city {name!r}; known cities include {examples}, ...")
        return found

    def mentioned(self, text: str) -> list[City]:
        """Cities named in free text, in order of first appearance; longest names win, so
        "new york city" counts once and "little havana" (a Miami landmark) is not Havana."""
        text = _spell_out_capitals(text, self._city_names)
        return _scan(_tokens(text), self._city_scan, self._city_shadows)

    def countries(self) -> tuple[str, ...]:
        return tuple(sorted({c.country for c in self.cities}))

    def resolve_country(self, text: str) -> str | None:
        """The canonical country a country name or alias denotes ("USA" -> "united states")."""
        return self._countries.get(_key(text))

    def mentioned_countries(self, text: str) -> list[str]:
        """Countries named in free text, in order of appearance; "South America" names no
        country, and common-word aliases ("us") count only in capitals ("US", "U.S.")."""
        text = _spell_out_capitals(text, self._countries)
        return _scan(_tokens(text), self._country_scan, self._country_shadows)

    @classmethod
    def from_dict(cls, data: Any) -> CityKB:
        """Validate parsed JSON and build the knowledge base."""
        _require(isinstance(data, Mapping), "the file must hold a JSON object")
        _require(data.get("version") == VERSION, f"version must be {VERSION}, got {data.get('version')!r}")
        source = data.get("source")
        _require(isinstance(source, str) and source.strip() != "", "source must be a non-empty string")
        raw = data.get("cities")
        _require(isinstance(raw, list) and raw != [], "cities must be a non-empty list")
        cities = [_parse_city(i, item) for i, item in enumerate(raw)]
        _check_countries(cities)
        _check_names(cities)
        return cls(cities, source)


@functools.lru_cache(maxsize=8)
def _load_cached(path: str) -> CityKB:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise CityKBError(f"{path}: not valid JSON: {err}") from err
    return CityKB.from_dict(data)


def load_cities(path: str | Path = DEFAULT_PATH) -> CityKB:
    """Read and validate a knowledge-base file (the shipped one by default); cached per path."""
    return _load_cached(str(path))


def _spell_out_capitals(text: str, canonical: Mapping[tuple[str, ...], str]) -> str:
    """`text` with capitalised common-word aliases ("US", "U.S.", "L.A.") replaced by the
    canonical name they stand for, so the lowercase scan can find them."""
    for alias in COMMON_WORD_ALIASES:
        if (alias,) in canonical:
            capitals = r"\.?".join(re.escape(ch) for ch in alias.upper())
            text = re.sub(rf"(?<![A-Za-z]){capitals}\.?(?![A-Za-z])", f" {canonical[(alias,)]} ", text)
    return text


def _without_common_words(index: Mapping[tuple[str, ...], Any]) -> dict[tuple[str, ...], Any]:
    return {k: v for k, v in index.items() if " ".join(k) not in COMMON_WORD_ALIASES}


def _contains_any(key: tuple[str, ...], keys: Iterable[tuple[str, ...]]) -> bool:
    """Does `key` contain one of `keys` as a contiguous run of words (and differ from it)?"""
    return any(k != key and _find(key, k) for k in keys)


def _find(tokens: tuple[str, ...], sub: tuple[str, ...]) -> bool:
    n = len(sub)
    return any(tokens[i:i + n] == sub for i in range(len(tokens) - n + 1))


def _scan(tokens: tuple[str, ...], index: Mapping[tuple[str, ...], Any], shadows: set) -> list:
    """Values of `index` keys found in `tokens`: longest matches first, no overlaps, then in
    text order, each value once.  `shadows` match like keys but yield nothing."""
    longest = max((len(k) for k in (*index, *shadows)), default=0)
    spans = [(i, n) for n in range(longest, 0, -1) for i in range(len(tokens) - n + 1)
             if tokens[i:i + n] in index or tokens[i:i + n] in shadows]
    taken: set[int] = set()
    kept = []
    for i, n in spans:
        if taken.isdisjoint(range(i, i + n)):
            taken.update(range(i, i + n))
            kept.append((i, index.get(tokens[i:i + n])))
    found = []
    for _, value in sorted(kept, key=lambda s: s[0]):
        if value is not None and value not in found:
            found.append(value)
    return found


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise CityKBError(message)


def _is_lower(value: Any) -> bool:
    return isinstance(value, str) and value != "" and value == value.strip() == value.lower()


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# Field -> (kind, min items, max items); kinds: "lower" string, "text" free text, "bool",
# "number", "list" of lowercase strings, "years" (a list of Olympic years).
_FIELDS: dict[str, tuple[str, int, int | None]] = {
    "name": ("lower", 0, None), "aliases": ("list", 0, None), "country": ("lower", 0, None),
    "country_aliases": ("list", 0, None), "country_adjectives": ("list", 1, None), "continent": ("lower", 0, None),
    "region": ("lower", 0, None),
    "lat": ("number", 0, None), "lon": ("number", 0, None), "population_millions": ("number", 0, None),
    "capital": ("bool", 0, None), "languages": ("list", 1, None), "climate": ("lower", 0, None),
    "climate_note": ("text", 0, None), "snow": ("bool", 0, None), "hot_summers": ("bool", 0, None),
    "rainy_season": ("bool", 0, None), "coastal": ("bool", 0, None), "water": ("list", 0, None),
    "elevation_m": ("number", 0, None), "mountains": ("bool", 0, None), "olympics": ("years", 0, None),
    "landmarks": ("list", 3, 5), "foods": ("list", 2, 4), "sports": ("list", 1, 3),
    "industries": ("list", 2, 4), "currency": ("lower", 0, None), "religion": ("list", 1, 2),
    "founded": ("text", 0, None), "known_for": ("text", 0, None),
    "nickname": ("lower", 0, None), "city_state": ("bool", 0, None),
    "nearest_sea": ("list", 1, 2), "sea_km": ("number", 0, None), "state": ("list", 1, 4),
}
_OPTIONAL = {"nickname": None, "city_state": False, "nearest_sea": (), "sea_km": 0.0, "state": ()}
_KINDS = {
    "lower": (_is_lower, "a lowercase, trimmed, non-empty string"),
    "text": (lambda v: isinstance(v, str) and v != "" and v == v.strip(), "a trimmed, non-empty string"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "number": (_is_number, "a finite number"),
}


def _parse_city(i: int, item: Any) -> City:
    name = item.get("name") if isinstance(item, Mapping) else None
    where = f"city #{i} ({name!r})"
    _require(isinstance(item, Mapping), f"{where}: must be a JSON object")
    for field in item:
        _require(field in _FIELDS, f"{where}, field {field!r}: unknown field")
    values: dict[str, Any] = {}
    for field, (kind, low, high) in _FIELDS.items():
        at = f"{where}, field {field!r}"
        if field not in item or (field == "nickname" and item[field] is None):
            _require(field in _OPTIONAL, f"{at}: missing")
            values[field] = _OPTIONAL[field]
            continue
        value = item[field]
        if kind == "years":
            _require(isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) and 1896 <= v <= 2040
                                                     for v in value) and value == sorted(set(value)),
                     f"{at}: must be a sorted list of distinct years between 1896 and 2040")
            values[field] = tuple(value)
            continue
        if kind == "list":
            _require(isinstance(value, list) and all(_is_lower(v) for v in value),
                     f"{at}: must be a list of lowercase, trimmed, non-empty strings")
            bounds = f"at least {low}" + (f" and at most {high}" if high else "")
            _require(low <= len(value) <= (high or len(value)), f"{at}: needs {bounds} items, got {len(value)}")
            _require(len(set(value)) == len(value), f"{at}: an item is listed twice")
            value = tuple(value)
        else:
            check, wanted = _KINDS[kind]
            _require(check(value), f"{at}: must be {wanted}, got {value!r}")
        values[field] = float(value) if kind == "number" else value
    city = City(**values)
    _check_city(city, where)
    return city



def _check_city(c: City, where: str) -> None:
    """Vocabularies, ranges and the no-self-naming rule of free text."""
    _require(c.continent in CONTINENTS, f"{where}, field 'continent': unknown continent {c.continent!r}")
    _require(c.region in REGION_CONTINENT, f"{where}, field 'region': unknown region {c.region!r}")
    _require(REGION_CONTINENT[c.region] == c.continent,
             f"{where}, field 'region': {c.region!r} is not in {c.continent!r}")
    _require(c.climate in CLIMATES, f"{where}, field 'climate': unknown climate {c.climate!r}")
    _require(-90 <= c.lat <= 90, f"{where}, field 'lat': {c.lat} is outside [-90, 90]")
    _require(-180 <= c.lon <= 180, f"{where}, field 'lon': {c.lon} is outside [-180, 180]")
    _require(c.population_millions > 0, f"{where}, field 'population_millions': must be > 0")
    _require(-450 <= c.elevation_m <= 5000, f"{where}, field 'elevation_m': {c.elevation_m} is outside [-450, 5000]")
    if c.coastal:
        _require(not c.nearest_sea and not c.sea_km,
                 f"{where}, fields 'nearest_sea', 'sea_km': only for a city that is not coastal")
    else:
        _require(bool(c.nearest_sea) and 0 < c.sea_km <= 5000,
                 f"{where}, fields 'nearest_sea', 'sea_km': an inland city needs both (0 < sea_km <= 5000)")
    for sea in c.nearest_sea:
        _require(sea in SEAS, f"{where}, field 'nearest_sea': unknown sea {sea!r} (see SEAS)")
    for field in _SENTENCE_FIELDS:
        text = getattr(c, field)
        _require(text[0].isupper() and text.endswith("."),
                 f"{where}, field {field!r}: must be a sentence (capital letter ... full stop)")
    own = _name_regex(c.names)
    for field in (*_FREE_TEXT, "state"):
        text = " / ".join(getattr(c, field)) if field == "state" else getattr(c, field)
        hit = own.search(_fold(text)[0]) if text else None
        _require(hit is None, f"{where}, field {field!r}: names the city ({hit and hit.group(0)!r})")
    if c.city_state:
        _require(_key(c.name) == _key(c.country),
                 f"{where}, field 'city_state': a city-state's name must equal its country")


def _check_countries(cities: list[City]) -> None:
    """A country's aliases and continent agree across its cities; aliases are not shared."""
    first: dict[str, tuple[int, City]] = {}
    owner: dict[tuple[str, ...], str] = {}
    adjective_owner: dict[tuple[str, ...], str] = {}
    for i, c in enumerate(cities):
        where = f"city #{i} ({c.name!r})"
        j, ref = first.setdefault(c.country, (i, c))
        for field in ("country_aliases", "country_adjectives", "continent"):
            _require(getattr(c, field) == getattr(ref, field),
                     f"{where}, field {field!r}: differs from city #{j} ({ref.name!r}) of {c.country!r}")
        for n in (c.country, *c.country_aliases):
            holder = owner.setdefault(_key(n), c.country)
            _require(holder == c.country,
                     f"{where}, field 'country_aliases': {n!r} also names {holder!r}")
        for n in c.country_adjectives:
            holder = adjective_owner.setdefault(_key(n), c.country)
            _require(holder == c.country, f"{where}, field 'country_adjectives': {n!r} also describes {holder!r}")


def _check_names(cities: list[City]) -> None:
    """No name or alias belongs to two cities or names a country (city-states excepted); a state's names
    belong to one state of one country and name no city or country."""
    countries = {_key(n): c.country for c in cities for n in (c.country, *c.country_aliases)}
    city_names = {_key(n) for c in cities for n in c.names}
    owner: dict[tuple[str, ...], int] = {}
    states: dict[tuple[str, ...], tuple[str, str]] = {}
    for i, c in enumerate(cities):
        where = f"city #{i} ({c.name!r})"
        for n in c.state:
            holder = states.setdefault(_key(n), (c.state[0], c.country))
            _require(holder == (c.state[0], c.country), f"{where}, field 'state': {n!r} also names {holder[0]!r} "
                                                        f"in {holder[1]!r}")
            _require(_key(n) not in countries and _key(n) not in city_names,
                     f"{where}, field 'state': {n!r} names a country or a city")
        for n in c.names:
            field = "name" if n == c.name else "aliases"
            key = _key(n)
            _require(key != (), f"{where}, field {field!r}: {n!r} has no letters or digits")
            j = owner.setdefault(key, i)
            _require(j == i, f"{where}, field {field!r}: {n!r} is already used by city #{j} ({cities[j].name!r})")
            country = countries.get(key)
            _require(country is None or (c.city_state and country == c.country),
                     f"{where}, field {field!r}: {n!r} is the name of the country {country!r}")
