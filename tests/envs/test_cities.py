"""The Guess My City knowledge base: the shipped file, schema errors, name matching, redaction, facts."""

from __future__ import annotations

import copy
import json
import random
from collections import Counter

import pytest

from lmrl.envs.dialogue.cities import (
    CLIMATES,
    CONTINENTS,
    DEFAULT_PATH,
    REGIONS,
    SEAS,
    City,
    CityKB,
    CityKBError,
    load_cities,
    normalize,
)
from tests.helpers import junk

# Rough boxes (lat min, lat max, lon min, lon max) around each continent's big cities: a
# GeoNames match in the wrong place (a small "Washington" in England) lands outside.
CONTINENT_BOXES = {
    "africa": (-35, 38, -18, 52), "asia": (-11, 56, 34, 150), "europe": (35, 70, -10, 45),
    "north america": (7, 72, -170, -52), "south america": (-56, 13, -82, -34), "oceania": (-48, 0, 110, 180),
}


@pytest.fixture(scope="module")
def kb() -> CityKB:
    return load_cities()


@pytest.fixture
def raw() -> dict:
    return json.loads(DEFAULT_PATH.read_text(encoding="utf-8"))


def index_of(data: dict, name: str) -> int:
    return next(i for i, c in enumerate(data["cities"]) if c["name"] == name)


def words(text: str) -> list[str]:
    """Normalized words, "st" read as "saint" (how the brief says names compare)."""
    return ["saint" if w == "st" else w for w in normalize(text).split()]


def says(text: str, name: str) -> bool:
    """Does `text` contain `name` as whole words?"""
    w, n = words(text), words(name)
    return any(w[i:i + len(n)] == n for i in range(len(w) - len(n) + 1))


def strings(city: City) -> list[str]:
    """Every string the knowledge base holds about a city, list items included."""
    out = []
    for value in vars(city).values():
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, tuple):
            out.extend(v for v in value if isinstance(v, str))
    return out


# ---- the shipped file ----------------------------------------------------------------


def test_shipped_file_loads(kb):
    assert len(kb) >= 95
    assert len(kb.countries()) >= 40
    assert {c.continent for c in kb.cities} == set(CONTINENTS)
    assert kb.resolve("seoul") is not None
    assert "geonames" in kb.source.lower()


def test_every_continent_and_vocabulary_is_used_sensibly(kb):
    per_continent = Counter(c.continent for c in kb.cities)
    assert min(per_continent.values()) >= 4, per_continent
    assert {c.region for c in kb.cities} <= set(REGIONS)
    assert {c.climate for c in kb.cities} == set(CLIMATES)


def test_load_is_cached_per_path(kb):
    assert load_cities(str(DEFAULT_PATH)) is kb


def test_coordinates_lie_on_the_right_continent(kb):
    for c in kb.cities:
        lat_lo, lat_hi, lon_lo, lon_hi = CONTINENT_BOXES[c.continent]
        assert lat_lo <= c.lat <= lat_hi and lon_lo <= c.lon <= lon_hi, (c.name, c.lat, c.lon)


def test_a_country_has_at_most_one_capital(kb):
    capitals = Counter(c.country for c in kb.cities if c.capital)
    assert max(capitals.values()) == 1, capitals


def test_coastal_cities_name_their_water(kb):
    assert all(c.water for c in kb.cities if c.coastal)


def test_free_text_names_no_other_city(kb):
    """The oracle reads these fields out; naming another city would mislead the asker."""
    for c in kb.cities:
        for text in (c.climate_note, c.founded, c.known_for, c.nickname or ""):
            assert [m.name for m in kb.mentioned(text)] == [], (c.name, text)


# ---- schema errors ---------------------------------------------------------------------

# (what, city, field, change, words the message must contain)
CORRUPTIONS = [
    ("missing field", "tokyo", "known_for", lambda c: c.pop("known_for"), "missing"),
    ("bool as string", "tokyo", "capital", lambda c: c.update(capital="yes"), "true or false"),
    ("list as string", "tokyo", "landmarks", lambda c: c.update(landmarks="tokyo tower"), "list"),
    ("unknown continent", "tokyo", "continent", lambda c: c.update(continent="atlantis"), "atlantis"),
    ("region elsewhere", "tokyo", "region", lambda c: c.update(region="west africa"), "west africa"),
    ("unknown climate", "tokyo", "climate", lambda c: c.update(climate="balmy"), "balmy"),
    ("bad lat", "tokyo", "lat", lambda c: c.update(lat=123.0), "[-90, 90]"),
    ("lat as bool", "tokyo", "lat", lambda c: c.update(lat=True), "number"),
    ("bad lon", "tokyo", "lon", lambda c: c.update(lon=-200.5), "[-180, 180]"),
    ("no people", "tokyo", "population_millions", lambda c: c.update(population_millions=0), "> 0"),
    ("name in known_for", "tokyo", "known_for", lambda c: c.update(known_for="Tokyo is big."), "names the city"),
    ("possessive alias in founded", "tokyo", "founded", lambda c: c.update(founded="before Tokio's rise"),
     "names the city"),
    ("uppercase alias", "tokyo", "aliases", lambda c: c.update(aliases=["Tokio"]), "lowercase"),
    ("alias is a country", "tokyo", "aliases", lambda c: c.update(aliases=["japan"]), "country"),
    ("too many landmarks", "tokyo", "landmarks", lambda c: c.update(landmarks=list("abcdef")), "at most 5"),
    ("unknown field", "tokyo", "mayor", lambda c: c.update(mayor="someone"), "unknown field"),
    ("capitalised nickname", "tokyo", "nickname", lambda c: c.update(nickname="The Big Sushi"), "lowercase"),
    ("fake city-state", "tokyo", "city_state", lambda c: c.update(city_state=True), "country"),
    ("known_for not a sentence", "tokyo", "known_for", lambda c: c.update(known_for="big and busy"), "sentence"),
    ("country aliases differ", "osaka", "country_aliases", lambda c: c.update(country_aliases=[]), "differs"),
    ("country alias shared", "tokyo", "country_aliases", lambda c: c.update(country_aliases=["nippon", "korea"]),
     "south korea"),
]


@pytest.mark.parametrize("what, name, field, change, fragment", CORRUPTIONS, ids=[c[0] for c in CORRUPTIONS])
def test_corruption_names_city_and_field(raw, what, name, field, change, fragment):
    i = index_of(raw, name)
    change(raw["cities"][i])
    with pytest.raises(CityKBError) as err:
        CityKB.from_dict(raw)
    message = str(err.value)
    for part in (f"#{i}", repr(name), repr(field), fragment):
        assert part in message, (part, message)


def test_duplicate_alias_names_both_cities(raw):
    i, j = index_of(raw, "tokyo"), index_of(raw, "osaka")
    raw["cities"][j]["aliases"] = ["Tōkyō".lower()]  # same normalized form as tokyo
    with pytest.raises(CityKBError, match=rf"city #{j} \('osaka'\), field 'aliases'.*city #{i} \('tokyo'\)"):
        CityKB.from_dict(raw)


def test_file_level_errors(raw, tmp_path):
    bad = tmp_path / "kb.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(CityKBError, match="not valid JSON"):
        load_cities(bad)
    for key, value, fragment in [("version", 1, "version"), ("cities", [], "cities"), ("source", "", "source")]:
        data = copy.deepcopy(raw)
        data[key] = value
        with pytest.raises(CityKBError, match=fragment):
            CityKB.from_dict(data)


def test_city_state_may_share_its_country_name(raw):
    i = index_of(raw, "singapore")
    assert raw["cities"][i]["city_state"] is True
    raw["cities"][i]["city_state"] = False
    with pytest.raises(CityKBError, match=rf"#{i} \('singapore'\), field 'name'.*country"):
        CityKB.from_dict(raw)


# ---- names -------------------------------------------------------------------------------


@pytest.mark.parametrize("text, name", [
    ("Tokyo", "tokyo"), ("tokio", "tokyo"), ("BOMBAY", "mumbai"), ("Calcutta", "kolkata"),
    ("madras", "chennai"), ("Saigon", "ho chi minh city"), ("HCMC", "ho chi minh city"),
    ("New York City", "new york city"), ("new york", "new york city"), ("N.Y.C.", None),
    ("nyc", "new york city"), ("Peking", "beijing"), ("canton", "guangzhou"),
    ("St. Petersburg", "saint petersburg"), ("st petersburg", "saint petersburg"),
    ("Saint-Petersburg", "saint petersburg"), ("sao paulo", "são paulo"), ("SÃO PAULO", "são paulo"),
    ("Ciudad de México", "mexico city"), ("cdmx", "mexico city"), ("Bogota", "bogotá"),
    ("Xi'an", "xi'an"), ("Xi’an", "xi'an"), ("xian", "xi'an"), ("the Big Apple", None),
    ("Washington, D.C.", "washington"), ("LA", "los angeles"), ("  the tokyo?! ", "tokyo"), ("Kiev", "kyiv"),
    ("Mexico", None), ("Atlantis", None), ("", None),
])
def test_resolve(kb, text, name):
    city = kb.resolve(text)
    assert (city.name if city else None) == name


def test_city_lookup_error_names_examples(kb):
    assert kb.city("Bombay").name == "mumbai"
    with pytest.raises(KeyError, match="Atlantis.*seoul"):
        kb.city("Atlantis")


@pytest.mark.parametrize("text, names", [
    ("Is it Lima, Paris or Tokyo?", ["lima", "paris", "tokyo"]),
    ("I love New York City; NYC and new york are great.", ["new york city"]),
    ("What is the climate like? A nice, limatic place, parisian romeo", []),
    ("Bogota, then São Paulo and Sao Paulo, then bombay", ["bogotá", "são paulo", "mumbai"]),
    ("Cafés in Little Havana, Miami", ["miami"]),
    ("Is it St. Petersburg or Moscow?", ["saint petersburg", "moscow"]),
    ("Is it Mexico City?", ["mexico city"]),
    ("Is it LA or L.A. or Los Angeles? La la land, kin la belle", ["los angeles"]),
    ("la rambla, la scala", []),
    ("", []),
])
def test_mentioned(kb, text, names):
    assert [c.name for c in kb.mentioned(text)] == names


@pytest.mark.parametrize("text, countries", [
    ("Is it in Japan or the USA?", ["japan", "united states"]),
    ("Is it in South America or North America?", []),
    ("Can you tell us more about it?", []),
    ("Is it in the US?", ["united states"]),
    ("Is it in the U.S.?", ["united states"]),
    ("North Korea or Korea?", ["south korea"]),
    ("Is it Mexico City, in Mexico?", ["mexico"]),
    ("Côte d'Ivoire, Holland and the U.K.", ["ivory coast", "netherlands", "united kingdom"]),
])
def test_mentioned_countries(kb, text, countries):
    assert kb.mentioned_countries(text) == countries


def test_lookups_accept_any_text(kb):
    rng = random.Random(0)
    tokyo = kb.city("tokyo")
    for _ in range(300):
        text = junk(rng, 60)
        kb.resolve(text), kb.resolve_country(text), kb.mentioned(text), kb.mentioned_countries(text)
        assert not says(tokyo.redact(text + " Tokyo's"), "tokyo")


def test_resolve_country(kb):
    assert kb.resolve_country("USA") == "united states"
    assert kb.resolve_country("us") == "united states"
    assert kb.resolve_country("the U.K.") == "united kingdom"
    assert kb.resolve_country("cote d'ivoire") == "ivory coast"
    assert kb.resolve_country("Türkiye") == "turkey"
    assert kb.resolve_country("Narnia") is None
    assert list(kb.countries()) == sorted(set(kb.countries()))


# ---- redaction ----------------------------------------------------------------------------


def test_redact_every_field_of_every_city(kb):
    for city in kb.cities:
        for text in strings(city):
            redacted = city.redact(text)
            for name in city.names:
                assert not says(redacted, name), (city.name, text, redacted)


def test_redact_every_name_in_sentences(kb):
    for city in kb.cities:
        for name in city.names:
            text = f"{name.title()} is great. I saw {name.upper()}'s sights and the {name} museum."
            redacted = city.redact(text)
            assert redacted == "The city is great. I saw the city's sights and the city museum.", (name, redacted)


def test_redact_keeps_other_words(kb):
    tokyo = kb.city("tokyo")
    assert tokyo.redact("Tokyoites live in Japan; Kyoto is not it.") == "Tokyoites live in Japan; Kyoto is not it."
    assert tokyo.redact("the sumida river, near Tokyo Tower") == "the sumida river, near the city Tower"


# ---- spot facts from common knowledge ---------------------------------------------------


def test_spot_facts(kb):
    tokyo = kb.city("tokyo")
    assert (tokyo.country, tokyo.continent, tokyo.languages[0], tokyo.currency) == ("japan", "asia", "japanese", "yen")
    cairo = kb.city("cairo")
    assert cairo.continent == "africa" and "arabic" in cairo.languages and cairo.capital
    sao_paulo = kb.city("são paulo")
    assert sao_paulo.hemisphere == "southern" and sao_paulo.east_west == "western"
    assert sao_paulo.languages[0] == "portuguese" and not sao_paulo.capital
    assert kb.city("sydney").coastal and not kb.city("sydney").capital
    assert kb.city("sydney").hemisphere == "southern" and kb.city("sydney").east_west == "eastern"
    assert kb.city("moscow").snow and not kb.city("singapore").snow
    assert kb.city("london").capital and kb.city("london").east_west == "western"
    assert kb.city("new delhi").name == "delhi" and kb.city("delhi").capital
    assert kb.city("montreal").languages[0] == "french"
    assert kb.city("singapore").city_state and not kb.city("hong kong").city_state
    assert kb.city("paris").currency == "euro" and kb.city("rio").currency == "brazilian real"
    assert not kb.city("rio de janeiro").capital and kb.city("brasilia").capital
    assert kb.city("quito").hemisphere == "southern"  # just south of the Equator
    assert kb.city("cairo").hot_summers and not kb.city("cairo").rainy_season
    assert not kb.city("chicago").coastal  # a lake shore is not a coast


# ---- issue 19: elevation, mountains, Olympic Games, country adjectives ------------------------


def test_new_facts_are_stored_for_every_city(kb):
    for city in kb.cities:
        assert -450 <= city.elevation_m <= 5000 and isinstance(city.mountains, bool)
        assert list(city.olympics) == sorted(set(city.olympics)) and city.country_adjectives
    assert kb.city("mexico city").elevation_m > 2000 and kb.city("bogotá").mountains
    assert 1964 in kb.city("tokyo").olympics and kb.city("cairo").olympics == ()
    assert kb.mentioned_adjectives("Is it a Japanese city?") == ["japan"]
    assert kb.mentioned_adjectives("Is it a North Korean city?") == []


def test_states_are_found_in_text_and_validated(raw, kb):
    assert kb.city("houston").state[0] == "texas" and kb.city("beijing").state == ()
    assert kb.mentioned_states("Is it a Californian city?") == ["california"]
    assert kb.mentioned_states("Is it in Western Australia?") == ["western australia"]
    assert kb.mentioned_countries("Is it in Western Australia?") == []  # the state, not the country
    for city, state, fragment in [("chicago", ["ontario"], "also names"), ("london", ["france"], "names a country"),
                                  ("toronto", ["montreal"], "names a country or a city"),
                                  ("tokyo", ["tokyo metropolis"], "names the city")]:
        data = copy.deepcopy(raw)
        data["cities"][index_of(data, city)]["state"] = state
        with pytest.raises(CityKBError, match=fragment):
            CityKB.from_dict(data)


def test_inland_cities_store_their_nearest_sea(kb):
    for city in kb.cities:
        assert bool(city.nearest_sea) is (not city.coastal) and (city.sea_km > 0) is (not city.coastal), city.name
        assert set(city.nearest_sea) <= set(SEAS)
    assert kb.city("houston").nearest_sea == ("gulf of mexico",) and kb.city("houston").sea_km < 100
    assert kb.city("madrid").sea_km > 200 and kb.city("tokyo").sea_km == 0


@pytest.mark.parametrize("city, field, value, fragment", [
    ("london", "sea_km", 0, "sea_km"), ("london", "nearest_sea", ["the wide sea"], "unknown sea"),
    ("tokyo", "sea_km", 30, "only for a city that is not coastal"), ("london", "nearest_sea", [], "nearest_sea"),
])
def test_sea_fields_are_validated(raw, city, field, value, fragment):
    raw["cities"][index_of(raw, city)][field] = value
    with pytest.raises(CityKBError, match=fragment):
        CityKB.from_dict(raw)


@pytest.mark.parametrize("field, value, fragment", [
    ("olympics", [2012, 1948], "sorted list"), ("olympics", [1800], "between 1896"), ("elevation_m", 9000, "elevation_m"),
    ("mountains", "yes", "mountains"), ("country_adjectives", [], "country_adjectives"),
])
def test_new_fields_are_validated(raw, field, value, fragment):
    raw["cities"][index_of(raw, "london")][field] = value
    with pytest.raises(CityKBError, match=fragment):
        CityKB.from_dict(raw)


def test_country_adjectives_agree_within_a_country_and_are_not_shared(raw):
    data = copy.deepcopy(raw)
    data["cities"][index_of(data, "osaka")]["country_adjectives"] = ["nipponese"]
    with pytest.raises(CityKBError, match="country_adjectives"):
        CityKB.from_dict(data)
    data = copy.deepcopy(raw)
    data["cities"][index_of(data, "paris")]["country_adjectives"] = ["german"]
    with pytest.raises(CityKBError, match="german"):
        CityKB.from_dict(data)
