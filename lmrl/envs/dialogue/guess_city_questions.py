"""What a Guess My City yes/no question asks, read by rule before the topic matcher.

The nearest-phrasing matcher finds the topic ("Is it warm all year?" ~ heat), but the words that
decide the answer need reading: "warm all year" is not "hot summers", "a Japanese city" names a
country, "near the equator" is a latitude, "the Windy City" a nickname, "a famous tower" a kind
of landmark.  `read_yes_no` returns the topic and value a question asks, or None to let the
matcher's topic stand.
"""

from __future__ import annotations

import re

from lmrl.envs.dialogue.cities import SEAS, CityKB, normalize
from lmrl.envs.dialogue.guess_city_answers import CityParse

_SPORT_SYNONYMS = {"soccer": "football", "hockey": "ice hockey", "running": "athletics", "track": "athletics",
                   "marathon": "athletics", "marathons": "athletics", "american football": "american football",
                   "footy": "australian rules football", "aussie rules": "australian rules football",
                   "basket ball": "basketball", "f1": "motor racing", "formula one": "motor racing"}
_RELIGION_WORDS = {"muslim": "islam", "muslims": "islam", "islamic": "islam", "christian": "christianity",
                   "christians": "christianity", "catholic": "catholicism", "catholics": "catholicism",
                   "buddhist": "buddhism", "buddhists": "buddhism", "hindu": "hinduism", "hindus": "hinduism",
                   "jewish": "judaism", "jews": "judaism", "orthodox": "orthodox christianity",
                   "protestant": "protestantism", "protestants": "protestantism"}
_NUMBER_WORDS = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
                 "nine": 9, "ten": 10, "twenty": 20, "a hundred": 100, "hundred": 100, "a thousand": 1000}
_LANGUAGE_SYNONYMS = {"farsi": "persian", "castilian": "spanish", "tagalog": "filipino", "kiswahili": "swahili",
                      "brazilian portuguese": "portuguese", "putonghua": "mandarin", "bahasa": "indonesian",
                      "flemish": "dutch", "gaelic": "irish", "maori": "māori"}
_LANGUAGE_CUE = re.compile(r"\b(?:speak|speaks|spoken|language|languages|talk|say)\b")
# A landmark-like noun after "is there a (famous) ...", "does it have a ...", "famous ...".
_LANDMARK = re.compile(r"\b(?:is there|are there|was there|were there|does it have|has it got|do they have|can you see|"
                       r"can you visit|is it home to|is it near|is it close to|is it next to)\s+(?:a |an |the |any |lots of |many |some |a lot of )?(?:famous |big |huge |tall |"
                       r"old |well known |well-known |large |great |giant |ancient |historic |beautiful |lot of )*"
                       r"(?P<x>[a-z' -]+?)(?:\s+(?:there|in it|in the city|nearby|in town|near the city|next to the city))?$")
_FOOD = re.compile(r"^(?:\w+\s+)??(?:is|are|do they eat|do people eat|do they drink|is there)\s+(?P<x>[a-z' -]+?)\s+"
                   r"(?:a (?:local|common|famous|popular|big|typical|traditional) (?:food|dish|thing|drink)|popular|common|"
                   r"eaten|a big thing|a thing|famous)(?:\s+(?:there|in the city|here))?$")
_FOOD_FROM = re.compile(r"^(?:\w+\s+)??(?:is|are|does|do)\s+(?P<x>[a-z' -]+?)\s+(?:come|comes|originate|originally come)?\s*"
                        r"(?:from there|from the city|from your city|invented there|from it)$")
_KNOWN_FOR = re.compile(r"\b(?:known|famous|well known|renowned|popular)\s+for\s+(?P<x>[a-z0-9' -]+)$")
_CALLED = re.compile(r"\b(?:called|known as|nicknamed|referred to as)\s+(?P<x>(?:the\s+)?[a-z' -]+?)(?:\s+by\s+\w+)?$")
_OCEANS = tuple(sorted(SEAS, key=len, reverse=True))
# "Is it near the sea?" asks a distance; "Is it far from the ocean?" the opposite one.
_NEAR = re.compile(r"\b(?P<far>not far from|far from|far away from|a long way from)\b|\b(?:near|close to|nearby)\b")
_SEA_NOUNS = re.compile(r"\b(?:sea|seas|ocean|oceans|coast|coastline|beach|beaches|seaside)\b")


def read_yes_no(kb: CityKB, text: str, topic: str) -> CityParse | None:
    """The topic and value a yes/no question asks by its wording (module docstring), before the values the
    knowledge base names are looked for; None: no wording rule applies."""
    text = text.rstrip("?!. ")
    norm = " " + normalize(text) + " "
    for reader in (_seat_of_government, _religion, _sport, _currency, _language, _economy, _country_adjective, _hemisphere, _called, _olympics,
                   _age, _elevation, _near_sea, _climate, _water, _kind_of_city):
        parse = reader(kb, text, norm, topic)
        if parse is not None:
            return parse
    return None


def read_generic(text: str, topic: str, landmark_owner: dict[str, str], waters: set[str]) -> CityParse | None:
    """After the named values: a named sea or river, a landmark by name or kind, a food, "known for X"."""
    text = text.rstrip("?!. ")
    norm = " " + normalize(text) + " "
    water = next((w for w in sorted(waters, key=len, reverse=True) if f" {w} " in norm), None)
    if water:  # "Is the Danube there?": a yes when it is this city's, else not known (rivers pass many cities)
        return _parse("named_water", water)
    return (_sea_name(norm) or _named_landmark(norm, landmark_owner) or _landmark(text, topic) or _food(text)
            or _known_for(text))


def _parse(topic: str, value: str = "") -> CityParse:
    return CityParse("yes_no", topic, value)


def _kind_of_city(kb: CityKB, text: str, norm: str, topic: str) -> CityParse | None:
    """"Is it a Japanese / coastal / capital / Californian city?": the word before "city" decides."""
    if re.fullmatch(r" (?:is|are) (?:it|your city|the city) (?:very |really |a )?(?:big|huge|large|enormous|massive) ", norm):
        return _parse("population", ">1")
    found = re.search(r"^(?:\w+\s+)??(?:is|are)\s+(?:it|your city|the city|this city|you)\s+(?:an?\s+|from an?\s+)?"
                      r"(?P<x>[a-z ]+?)\s+(?:city|town|place|metropolis)(?:\s+at all)?$", normalize(text))
    if not found:
        return None
    x = found.group("x")
    kinds = {"capital": ("capital", ""), "coastal": ("coast", ""), "seaside": ("coast", ""), "port": ("coast", ""),
             "beach": ("coast", ""), "harbour": ("coast", ""), "mountain": ("mountains", ""), "desert": ("desert", ""),
             "european": ("continent", "europe"), "asian": ("continent", "asia"), "african": ("continent", "africa"),
             "south american": ("continent", "south america"), "north american": ("continent", "north america"),
             "latin american": ("latin", ""), "middle eastern": ("region", "middle east"), "ancient": ("old", "1000"),
             "old": ("old", "1000"), "modern": ("new", ""), "new": ("new", ""), "olympic": ("olympics", ""),
             "north korean": ("country", "~other")}
    if x in kinds:
        return _parse(*kinds[x])
    adjective = kb.mentioned_adjectives(x)
    if adjective:
        return _parse("country", adjective[0])
    if x in ("big", "large", "huge", "major", "busy", "crowded", "populous", "massive", "enormous"):
        return _parse("population", ">1")
    if x in ("small", "little", "tiny"):
        return _parse("population", "<1")
    return _parse("vague:known_for")  # "a Californian city", "a tech city": not something the knowledge base holds


def _country_adjective(kb: CityKB, text: str, norm: str, topic: str) -> CityParse | None:
    if re.search(r"\bnorth korean?\b|\bsouth sudan(?:ese)?\b", norm):  # countries outside the knowledge base
        return _parse("country", "~other")
    if re.search(r"\bcolon(?:y|ies|ial|ized|ised)\b|\bempire\b|\bruled by\b|\boccupied\b", norm):
        return _parse("vague:history")  # "a former British colony": history the knowledge base does not hold
    if _LANGUAGE_CUE.search(norm):
        return None
    found = kb.mentioned_adjectives(text)
    languages = {normalize(lang) for city in kb.cities for lang in city.languages}
    predicate = re.fullmatch(r" (?:is|are) (?:it|your city|the city|this city|you) (?:an? )?[a-z ]+ ", norm)
    if found and (predicate or not any(f" {lang} " in norm for lang in languages)):  # "English" is also a language,
        return _parse("country", found[0])  # but not in "Is your city Chinese?"
    return None


def _sea_name(norm: str) -> CityParse | None:
    for sea in _OCEANS:
        if f" {sea} " in norm or f" {sea} ocean " in norm or f" {sea} sea " in norm:
            return _parse("sea", sea)
    return None


def _hemisphere(kb: CityKB, text: str, norm: str, topic: str) -> CityParse | None:
    if re.search(r"\b(?:east|west|north|south|northern|southern|eastern|western)\s+(?:coast|side|part|end)\b", norm):
        return _parse("vague:location")  # which side of its country: not stored
    if re.search(r"\b(?:near|close to|on|by|around|next to)\s+(?:the\s+)?equator\b", norm):
        return _parse("equator")
    if re.search(r"\b(?:south of|below|under|beneath)\s+(?:the\s+)?equator|\b(?:bottom|southern|lower)\s+half\b", norm):
        return _parse("hemisphere", "southern")
    if re.search(r"\b(?:north of|above|over)\s+(?:the\s+)?equator|\b(?:top|northern|upper)\s+half\b", norm):
        return _parse("hemisphere", "northern")
    return None


def _called(kb: CityKB, text: str, norm: str, topic: str) -> CityParse | None:
    found = _CALLED.search(text)
    return _parse("nickname", found.group("x")) if found and len(found.group("x").split()) >= 2 else None


def _olympics(kb: CityKB, text: str, norm: str, topic: str) -> CityParse | None:
    if " olympic" not in norm:
        return None
    year = re.search(r"\b(1[89]\d\d|20[0-4]\d)\b", text)
    return _parse("olympics", year.group(1) if year else "")


def _age(kb: CityKB, text: str, norm: str, topic: str) -> CityParse | None:
    found = re.search(r"\b(?:over|more than|at least|older than)\s+(?P<n>[\d,]+|\w+(?: \w+)?)\s+(?P<unit>years?|centuries)\s*old",
                      norm) or re.search(r"\b(?P<n>[\d,]+|a thousand|two thousand|a hundred)\s+(?P<unit>years?|centuries)\s+old", norm)
    if found:
        raw = found.group("n").replace(",", "")
        n = float(raw) if raw.isdigit() else _number_phrase(raw)
        if n is None:
            return None
        return _parse("old", str(n * (100 if found.group("unit").startswith("centur") else 1)))
    if re.search(r"\b(?:very old|ancient|really old|an old city|old city|centuries old|historic city)\b", norm):
        return _parse("old", "1000")
    if re.search(r"\b(?:new city|young city|modern city|built recently|a new town)\b", norm):
        return _parse("new")
    return None


def _number_phrase(text: str) -> float | None:
    words = text.split()
    if len(words) == 2 and words[1] in ("thousand", "hundred"):
        base = _NUMBER_WORDS.get(words[0])
        return None if base is None else base * (1000 if words[1] == "thousand" else 100)
    return _NUMBER_WORDS.get(text)


def _elevation(kb: CityKB, text: str, norm: str, topic: str) -> CityParse | None:
    return _first(norm, (
        (r"\b(?:high altitude|high up|high above sea level|above sea level|in the mountains|up in the mountains|"
         r"mountain city|at altitude|at a high altitude|high elevation|way up high)\b", "high"),
        (r"\b(?:at sea level|low lying|below sea level|low altitude)\b", "low"),
        (r"\bmountains?\b|\bmountainous\b|\bhills\b|\bhilly\b|\bandes\b|\balps\b|\brockies\b", "mountains"),
    ))


def _climate(kb: CityKB, text: str, norm: str, topic: str) -> CityParse | None:
    if re.search(r"\b(?:on|by|along|at|off|to|across|beside|facing|overlooking|overlooks|of) the mediterranean\b", norm):
        return _parse("sea", "mediterranean")  # "on the Mediterranean" is the sea, "Mediterranean weather" the climate
    return _first(norm, (
        (r"\b(?:hot|warm)\s+(?:all|the whole|throughout the|most of the|much of the)\s+year|\byear[ -]?round\b|"
         r"\ball year(?: round)?\b", "hot_all_year"),
        (r"\bcold\s+(?:in\s+(?:the\s+)?)?winters?\b|\bwinters?\s+(?:are\s+|get\s+)?(?:cold|freezing|harsh)\b|\bcold winters?\b",
         "cold_winter"),
        (r"\bdesert\b", "desert"),
        (r"\b(?:rain|rains|raining)\s+(?:a lot|often|much|loads)\b|\brainy\b|\bget much rain\b|\blot of rain\b|\bwet\b",
         "rainy"),
        (r"\bdry\b", "dry"),
        (r"\bsunny\b|\bsunshine\b", "sunny"),
        (r"\bsnow\b|\bsnowy\b|\bsnows\b", "snow"),
        (r"\bhot\s+(?:in\s+(?:the\s+)?)?summers?\b|\bsummers?\s+(?:are\s+|get\s+)?(?:hot|warm|scorching)\b|\bhot summers?\b",
         "heat"),
        (r"\b(?:hot|warm)\s+in\s+(?:the\s+)?winter", "warm_winter"),
        (r"\bmonsoons?\b|\brainy season\b|\bwet season\b", "monsoon"),
        (r"\b(?:hot|warm|scorching)\b", "heat"),
        (r"\b(?:cold|chilly|freezing)\b", "cold_winter"),
        (r"\b(tropical|arid|temperate|continental|subtropical|mediterranean|highland)\b", "climate"),
        (r"\bhumid\b|\bmuggy\b|\bsticky\b", "humid"),
        (r"\b(foggy|windy|cloudy|stormy|grey|gray|misty|mild)\b", "weather_word"),
    ))


def _water(kb: CityKB, text: str, norm: str, topic: str) -> CityParse | None:
    return _first(norm, (
        (r"\bislands?\b|\bpeninsula\b", "vague:water"),  # islands are not stored
        (r"\b(bay|harbour|harbor|gulf|estuary|delta|strait|lagoon)\b", "sea"),
        (r"\blakes?\b", "lake"),
        (r"\brivers?\b|\bflows? through\b", "river"),
        (r"\b(?:sea|seaside|ocean|beach|beaches|coast|coastal|coastline|seaport|port city|on the water)\b", "coast"),
    ))


def _near_sea(kb: CityKB, text: str, norm: str, topic: str) -> CityParse | None:
    """"Is it near the sea?", "Is it close to the Gulf of Mexico?", "Is it far from the ocean?"."""
    sea = next((s for s in _OCEANS if f" {s} " in norm), "")
    found = _NEAR.search(norm)
    if not found or not (sea or _SEA_NOUNS.search(norm)):
        return None
    far = found.group("far") and not found.group("far").startswith("not")
    return _parse("sea_far" if far else "sea_near", sea)


def _first(norm: str, checks) -> CityParse | None:
    """The topic of the first (pattern, topic) that matches; a pattern's group, if any, is the value."""
    for pattern, name in checks:
        found = re.search(pattern, norm)
        if found:
            return _parse(name, found.group(1) if found.groups() else "")
    return None


def _religion(kb: CityKB, text: str, norm: str, topic: str) -> CityParse | None:
    return _from_table(norm, _RELIGION_WORDS, "religion")


def _sport(kb: CityKB, text: str, norm: str, topic: str) -> CityParse | None:
    return _from_table(norm, _SPORT_SYNONYMS, "sports")


def _from_table(norm: str, table: dict[str, str], topic: str) -> CityParse | None:
    """The value a word of `table` stands for ("muslim" -> islam, "soccer" -> football)."""
    word = next((w for w in table if f" {w} " in norm), None)
    return _parse(topic, table[word]) if word else None


def _currency(kb: CityKB, text: str, norm: str, topic: str) -> CityParse | None:
    found = re.search(r"\b(euro|euros|dollar|dollars|pound|pounds|yen|rupee|rupees|peso|pesos|won|yuan|real|reais|ruble|"
                      r"rubles|rouble|lira|rand|dirham|dirhams|baht|dong|naira|shilling|riyal|franc|francs)\b", norm)
    if not found or not re.search(r"\b(?:use|pay|spend|currency|money|accept|take)\b", norm):
        return None
    word = found.group(1)
    word = {"euros": "euro", "dollars": "dollar", "pounds": "pound", "rupees": "rupee", "pesos": "peso", "reais": "real",
            "rubles": "ruble", "rouble": "ruble", "dirhams": "dirham", "francs": "franc"}.get(word, word)
    adjective = re.search(rf"\b(\w+)\s+{found.group(1)}\b", norm)
    return _parse("currency", f"{adjective.group(1)} {word}" if adjective and adjective.group(1) not in
                  ("the", "use", "using", "with", "in", "pay", "spend", "a", "accept", "take") else word)


def _economy(kb: CityKB, text: str, norm: str, topic: str) -> CityParse | None:
    for word, industry in (("tech", "technology"), ("banking", "finance"), ("movies", "film"), ("movie", "film"),
                           ("cars", "automobiles"), ("car making", "automobiles"), ("oil", "oil")):
        if f" {word} " in norm and re.search(r"\b(?:hub|industry|industries|centre|center|economy|capital|known|big|"
                                               r"major|famous)\b", norm):
            return _parse("economy", industry)
    return None


def _language(kb: CityKB, text: str, norm: str, topic: str) -> CityParse | None:
    """Other names of the knowledge base's languages ("Farsi" is Persian)."""
    return _from_table(norm, _LANGUAGE_SYNONYMS, "language")


def _named_landmark(norm: str, owner: dict[str, str]) -> CityParse | None:
    """A landmark the knowledge base names: yours, or another city's (then the answer is no)."""
    for name in sorted(owner, key=len, reverse=True):
        if f" {name} " in norm:
            return CityParse("yes_no", "landmark_named", name)
    return None


def _landmark(text: str, topic: str) -> CityParse | None:
    found = _LANDMARK.search(text) or re.search(r"^(?:\w+\s+)??(?:is|are)\s+(?P<x>(?:the\s+)?[a-z' -]+?)\s+(?:there|in the city)$",
                                                text)
    return _parse("landmark", found.group("x")) if found else None


def _seat_of_government(kb: CityKB, text: str, norm: str, topic: str) -> CityParse | None:
    if re.search(r"\b(?:was it|used to be|former|formerly|once|in the past|ancient|old)\b.*\bcapital\b|\bcapital\b.*\b(?:in "
                 r"the past|once|before|long ago|formerly)\b", norm):
        return _parse("vague:history")  # a past capital: history the knowledge base does not hold
    if re.search(r"\b(?:seat of (?:the )?(?:national )?government|where the government (?:sits|is)|parliament)\b", norm):
        return _parse("capital")
    return None


def _food(text: str) -> CityParse | None:
    found = _FOOD.search(text) or _FOOD_FROM.search(text)
    return _parse("food", found.group("x")) if found else None


def _known_for(text: str) -> CityParse | None:
    found = _KNOWN_FOR.search(text)
    return _parse("known_for", found.group("x")) if found else None
