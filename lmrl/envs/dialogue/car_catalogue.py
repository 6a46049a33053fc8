"""Car Dealer's world: the catalogue (brands, types, features, cars with MSRPs, buyer budgets and
personalities) and `parse_seller`, which reads what a seller's free-form line says.

The catalogue is `lmrl/envs/data/car_dealer.json`; `load_catalogue()` checks its schema and names
the car and field of any problem.  The parser is rules over the catalogue's names and aliases plus
small lexicons (prices in every written form, intents, persuasion, rudeness): it reads ~1,700 new
lines a second on 2 cores (`make bench`), needs no model, and is scored on an independent held-out set
(`tests/envs/heldout/car_dealer.jsonl`).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

DATA_FILE = Path(__file__).resolve().parents[1] / "data" / "car_dealer.json"
MAX_LINE = 1000


@dataclass(frozen=True)
class Car:
    id: str
    aliases: tuple[str, ...]
    types: tuple[str, ...]
    msrp: int
    features: tuple[str, ...]

    @property
    def brand(self) -> str:
        return self.id.split(" ")[0]

    @property
    def display(self) -> str:
        """The car's name as a person writes it ("Toyota RAV4")."""
        return _display_name(self.id)


class Catalogue:
    """Every name the buyer and the parser know, with lookup patterns compiled once."""

    def __init__(self, data: dict, source: str = "<catalogue>"):
        _check(data, source)
        self.personalities: tuple[str, ...] = tuple(data["personalities"])
        self.budgets: tuple[int, ...] = tuple(int(b) for b in data["budgets"])
        self.brands: dict[str, dict] = data["brands"]
        self.types: dict[str, dict] = data["types"]
        self.features: dict[str, list[str]] = data["features"]
        self.cars: tuple[Car, ...] = tuple(
            Car(c["id"], tuple(c["aliases"]), tuple(c["types"]), int(c["msrp"]), tuple(c["features"]))
            for c in data["cars"])
        self._cars = {c.id: c for c in self.cars}
        self.car_pattern = _names_pattern([(alias, c.id) for c in self.cars for alias in (c.id, *c.aliases)])
        self.brand_pattern = _names_pattern([(name, b) for b, info in self.brands.items()
                                             for name in (b, *info["aliases"])])
        self.type_pattern = _names_pattern([(name, t) for t, info in self.types.items() for name in info["aliases"]])
        self.feature_pattern = _names_pattern([(name, f) for f, names in self.features.items() for name in names],
                                              multi=True)

    def car(self, car_id: str) -> Car:
        try:
            return self._cars[car_id]
        except KeyError:
            raise KeyError(f"unknown car {car_id!r}; the catalogue has {len(self.cars)}: "
                           f"{[c.id for c in self.cars]}") from None

    def brand_display(self, brand: str) -> str:
        return self.brands[brand]["display"]

    def brand_with_article(self, brand: str) -> str:
        return f"{self.brands[brand]['article']} {self.brands[brand]['display']}"


def _display_name(car_id: str) -> str:
    special = {"bmw": "BMW", "rav4": "RAV4", "cx-5": "CX-5", "cx-90": "CX-90", "mx-5": "MX-5", "f-150": "F-150",
               "id.4": "ID.4", "bz4x": "bZ4X", "glc": "GLC", "gle": "GLE", "eqs": "EQS", "x3": "X3", "x5": "X5",
               "i4": "i4", "z4": "Z4", "ix": "iX", "a4": "A4", "a5": "A5", "q5": "Q5", "q4": "Q4", "q7": "Q7",
               "e-tron": "e-tron", "gt": "GT", "hr-v": "HR-V", "cr-v": "CR-V", "es": "ES", "is": "IS", "rx": "RX",
               "gx": "GX", "lc": "LC", "mach-e": "Mach-E", "c-class": "C-Class", "e-class": "E-Class",
               "mercedes-benz": "Mercedes-Benz", "mazda3": "Mazda3", "ioniq": "Ioniq"}
    return " ".join(special.get(w, w.capitalize() if not w[0].isdigit() else w) for w in car_id.split(" "))


def _names_pattern(names: list[tuple[str, str]], multi: bool = False) -> tuple[re.Pattern, dict]:
    """A regex matching any name (longest first, on word boundaries, case-insensitive; hyphens and
    spaces interchangeable, or left out: "CX-5", "CX 5", "CX5") and the map from a match's
    `_name_key` to its canonical id (`multi`: the list of ids, for names that say several things,
    like "heated leather seats")."""
    spelled: dict[str, str] = {}
    lookup: dict[str, list[str]] = {}
    for name, canonical in names:
        spelled.setdefault(_norm_name(name), name)
        ids = lookup.setdefault(_name_key(name), [])
        if canonical not in ids:
            ids.append(canonical)
    alternatives = sorted(spelled, key=len, reverse=True)
    body = "|".join(r"[\s-]?".join(re.escape(part) for part in name.split(" ")) for name in alternatives)
    pattern = re.compile(rf"(?<![\w.-])(?:{body})(?![\w-])", re.IGNORECASE)
    return pattern, {k: (v if multi else v[0]) for k, v in lookup.items()}


def _norm_name(text: str) -> str:
    return re.sub(r"[\s-]+", " ", text.lower()).strip()


def _name_key(text: str) -> str:
    """What the pattern lets vary removed (case, spaces and hyphens): every spelling it matches of a
    name has the same key."""
    return re.sub(r"[\s-]+", "", text.lower())


def _find(patterns, text: str) -> tuple[str, ...]:
    """Canonical ids named in `text`, in order of first mention, without repeats."""
    pattern, lookup = patterns
    found: list[str] = []
    for match in pattern.finditer(text):
        ids = lookup[_name_key(match.group(0))]
        for canonical in ids if isinstance(ids, list) else [ids]:
            if canonical not in found:
                found.append(canonical)
    return tuple(found)


def _check(data: dict, source: str) -> None:
    def fail(message: str):
        raise ValueError(f"{source}: {message}")

    for key in ("personalities", "budgets", "brands", "types", "features", "cars"):
        if key not in data:
            fail(f"missing top-level key {key!r}")
    if not all(isinstance(b, int) and b > 0 for b in data["budgets"]):
        fail(f"budgets must be positive integers, got {data['budgets']}")
    seen: set[str] = set()
    for i, car in enumerate(data["cars"]):
        where = f"car #{i} ({car.get('id', '?')!r})"
        for key in ("id", "aliases", "types", "msrp", "features"):
            if key not in car:
                fail(f"{where}: missing field {key!r}")
        if car["id"] in seen:
            fail(f"{where}: duplicate id")
        seen.add(car["id"])
        if car["id"].split(" ")[0] not in data["brands"]:
            fail(f"{where}: id must start with a brand, one of {sorted(data['brands'])}")
        if not isinstance(car["msrp"], int) or not 5_000 <= car["msrp"] <= 500_000:
            fail(f"{where}: msrp must be an integer number of dollars in [5000, 500000], got {car['msrp']!r}")
        for t in car["types"]:
            if t not in data["types"]:
                fail(f"{where}: unknown type {t!r}; valid: {sorted(data['types'])}")
        for f in car["features"]:
            if f not in data["features"]:
                fail(f"{where}: unknown feature {f!r}; valid: {sorted(data['features'])}")
        if not car["types"]:
            fail(f"{where}: needs at least one type")
    for brand, info in data["brands"].items():
        for key in ("article", "display", "aliases"):
            if key not in info:
                fail(f"brand {brand!r}: missing field {key!r}")
        if not any(c["id"].split(" ")[0] == brand for c in data["cars"]):
            fail(f"brand {brand!r} has no car in the catalogue")
    for t in data["types"]:
        if not any(t in c["types"] for c in data["cars"]):
            fail(f"type {t!r} has no car in the catalogue")


@functools.lru_cache(maxsize=4)
def load_catalogue(path: str | Path = DATA_FILE) -> Catalogue:
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: line {err.lineno}: {err.msg}") from None
    return Catalogue(data, str(path))


# ---------------------------------------------------------------------------------------------
# Reading a seller's line.

@dataclass(frozen=True)
class SellerUtterance:
    """What a seller's line says, as the buyer reads it.  `price` is the last amount of money
    quoted as a price (discount amounts such as "$2,000 off" are `discount_amount`)."""

    cars: tuple[str, ...] = ()
    brands: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    features: tuple[str, ...] = ()
    price: int | None = None
    discount_amount: int | None = None
    asks_budget: bool = False
    asks_preferences: bool = False
    accepts_offer: bool = False
    persuasion: bool = False
    discount: bool = False
    rude: bool = False
    greeting: bool = False
    empty: bool = False


_UNITS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve thirteen "
                                      "fourteen fifteen sixteen seventeen eighteen nineteen".split())}
_TENS = {w: 10 * (i + 2) for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split())}
_SCALES = {"hundred": 100, "thousand": 1000, "grand": 1000, "million": 1_000_000}
_NUMBER_WORD = re.compile(r"\b(?:%s)(?:-(?:%s))?\b(?:[\s-]+(?:and[\s-]+)?(?:%s)(?:-(?:%s))?\b)*" % (
    "|".join([*_UNITS, *_TENS, *_SCALES, "a"]), "|".join(_UNITS), "|".join([*_UNITS, *_TENS, *_SCALES]),
    "|".join(_UNITS)), re.IGNORECASE)

_AMOUNT = re.compile(
    r"(?P<cur>\$|\busd\b)?\s*"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
    r"(?:\s*(?P<mult>k\b|grand\b|thousand\b|g\b))?"
    r"(?:\s*(?P<unit>dollars?\b|bucks\b|usd\b|cash\b))?", re.IGNORECASE)
# Words after a number that make it a measurement, not money.
_MEASURE = re.compile(r"^\s*(?:[-\s]?(?:miles?|mi\b|km|kilomet|mpg|mpge|hp\b|horse|lbs?\b|pounds|kg|cubic|cu\b|"
                      r"gallons?|liters?|litres?|inch|in\b|feet|ft\b|foot|seats?|seater|rows?|owners?|years?|yr|"
                      r"months?|weeks?|days?|hours?|minutes?|seconds?|mph|rpm|speed|cylinders?|doors?|people|"
                      r"passengers?|am\b|pm\b|o'clock|percent|%|st\b|nd\b|rd\b|th\b|models?|versions?|edition|"
                      r"times|of (?:them|these|those)|cars|vehicles|units|reviews|customers|star|volt|kw|kwh|watts?|"
                      r"degrees?|sq|square|-inch|-year|-month|-day|-mile))", re.IGNORECASE)
_DISCOUNT_AFTER = re.compile(r"^\s*(?:dollars?|bucks)?\s*(?:off\b|discount|rebate|cheaper|less\b|in savings|"
                             r"savings|below|under (?:msrp|sticker)|cash back|back\b)", re.IGNORECASE)
_DISCOUNT_BEFORE = re.compile(r"(?:knock(?:ed)?(?: off)?|shave(?: off)?|take off|save (?:you )?|discount of|"
                              r"rebate of|cut(?: off)?|lower(?: it)? by|drop(?: it| the price)? by|"
                              r"(?:price|it) by|off by|savings of|extra)\s*(?:another\s*|an extra\s*)?$",
                              re.IGNORECASE)
_MONTHS = re.compile(r"(?:january|february|march|april|may|june|july|august|september|october|november|"
                     r"december|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)\.?\s*$", re.IGNORECASE)


def _words_to_number(words: str) -> int | None:
    total, current, seen = 0, 0, False
    for token in re.split(r"[\s-]+", words.lower()):
        if token in ("and", ""):
            continue
        if token == "a":
            current, seen = current or 1, True
        elif token in _UNITS:
            current, seen = current + _UNITS[token], True
        elif token in _TENS:
            current, seen = current + _TENS[token], True
        elif token == "hundred":
            current, seen = (current or 1) * 100, True
        elif token in _SCALES:
            total, current, seen = total + (current or 1) * _SCALES[token], 0, True
    return total + current if seen else None


def _digits_for_words(text: str) -> str:
    """Number words ("twenty-five thousand", "one hundred and five thousand") as digits; a lone "a"
    stays a word, and a trailing "and" is not swallowed."""
    def replace(match: re.Match) -> str:
        words = match.group(0)
        trail = ""
        while re.search(r"[\s-]+and$", words, re.IGNORECASE):
            cut = re.search(r"[\s-]+and$", words, re.IGNORECASE)
            trail, words = words[cut.start():] + trail, words[:cut.start()]
        if words.split()[0].lower().split("-")[0] in _SCALES:
            return match.group(0)  # "40 grand": the digits before it are read by _AMOUNT
        if words.lower() == "a" or words.lower().startswith("a ") and not re.search(
                r"\b(hundred|thousand|grand|million)\b", words, re.IGNORECASE):
            return match.group(0)
        value = _words_to_number(words)
        if value is None:
            return match.group(0)
        if re.search(r"\bgrand$", words, re.IGNORECASE):
            return f"{value // 1000}k" + trail
        return str(value) + trail
    return _NUMBER_WORD.sub(replace, text)


def _amounts(text: str) -> tuple[list[int], list[int]]:
    """(prices, discount amounts) quoted in `text`, in order."""
    prices, discounts = [], []
    for match in _AMOUNT.finditer(text):
        raw = match.group("num")
        value = float(raw.replace(",", ""))
        money = bool(match.group("cur") or match.group("unit"))
        if match.group("mult"):
            value *= 1000
            money = True
        after = text[match.end():match.end() + 24]
        before = text[max(0, match.start("num") - 30):match.start("num")]
        if not money:
            if _MEASURE.match(after) or _MONTHS.search(before) or re.search(r"[A-Za-z_.-]$", before):
                continue
            if value < 1000 and "," not in raw:
                continue
            if "," not in raw and raw.isdigit() and 1900 <= value <= 2100:
                continue  # a year
        elif _MEASURE.match(after) and not match.group("cur"):
            continue
        if not 0 < value < 1e12:  # zero, or digits no one quotes as money (also inf from 5,000 nines)
            continue
        if _DISCOUNT_AFTER.match(after) or _DISCOUNT_BEFORE.search(before):
            discounts.append(int(round(value)))
        else:
            prices.append(int(round(value)))
    return prices, discounts


def _any(pattern: str, text: str) -> bool:
    return re.search(pattern, text, re.IGNORECASE) is not None


_QUESTION_START = r"^\W*(?:so,?\s*|and\s*|ok(?:ay)?,?\s*|now,?\s*|first,?\s*|(?:please )?tell me,?\s*|let me know\s*)?(?:what|which|how|do|does|did|are|is|would|could|can|have|had|any|anything|were|will|may|might|who|got)\b"
_GREETING = (r"^\W*(?:hi|hello|hey|howdy|hiya|greetings|good (?:morning|afternoon|evening|day)|yo|welcome)\b|"
             r"\bwelcome (?:to|in|back)\b|\bnice to (?:meet|see) you\b|\bthanks? (?:you )?for (?:stopping|coming|"
             r"dropping|visiting|coming in)|\bpleasure to meet\b|\bhow (?:are|is) (?:you|your day|it going)\b|"
             r"\bhow can i help\b|\bwhat can i do for you\b")
_BUDGET = (r"\bbudget\b|\bspend\b|\bafford\b|\bprice (?:range|point|bracket)\b|\b(?:willing|want|wanting|hoping|"
           r"looking|planning|able|prepared|trying|expecting|ready) to (?:pay|spend|put)\b|\bhow much (?:are|do|can|"
           r"would|could|were|did|is|will|money)\b|\bwhat (?:can|could|would|will|do) you (?:pay|spend|afford)\b|"
           r"\bmonthly payment|\bpay (?:per|a|each) month|\bhow much (?:you|ya)\b|\bfinancial (?:limit|range)|"
           r"\bprice (?:limit|cap|ceiling)|\bmost you(?:'d| would| could| can)\b|\bmax(?:imum)? (?:you|price)\b")
_PREFERENCES = (r"\bwhat (?:kind|type|sort|make|model|brand|style|features?|color|size|are you (?:looking|"
                r"after|interested|shopping|hoping)|do you (?:need|want|like|prefer|have in mind)|would you like|"
                r"brings you|can i (?:show|help))\b|\bwhich (?:features?|brand|make|model|type|one|car|vehicle|"
                r"kind|options?)\b|\blooking for\b|\bin the market\b|\bshopping for\b|\bprefer(?:red|ence|ences)?\b|"
                r"\binterested in\b|\bin mind\b|\bwhat you (?:need|want|like|prefer|are (?:looking|after))\b|\bideal (?:car|vehicle|ride)\b|"
                r"\bkind of (?:person|guy|gal|buyer|driver|customer)\b|\bset on\b|\bhave in mind\b|\b(?:need|want|like|after)\b.*\?|\bmust[- ]haves?\b|"
                r"\bin particular\b|\bmatters? (?:most|to you)\b|\bimportant to you\b|\bwhat brings you\b|"
                r"\bany (?:particular|specific)\b|\bdream car\b|\bwhat are you after\b|\bthought about\b|"
                r"\bconsider(?:ed|ing)?\b.*\?|\bhow about (?:an?|the)\b.*\?")
_ACCEPT = (r"\byou(?:'ve| have)? got (?:yourself )?a deal\b|\bit'?s a deal\b|\bwe(?:'ve| have)? (?:got )?a deal\b|"
           r"(?:^|[.!?;,]\s*)\W*deal\b(?! (?:with|on|for))|\bdone deal\b|\bthat works\b|\bdeal at\b|^\W*sold\b|\bsold[!.]|\bagreed\b|\byou win\b|"
           r"\b(?:that|this|your offer|your price|it) works for (?:me|us)\b|\bworks for me\b|"
           r"\b(?:i|we)(?:'ll| will| can)? accept\b|\baccept (?:your|that|the) (?:offer|price)\b|"
           r"\b(?:your|that) (?:offer|price) (?:works|is fine|is acceptable|is ok)\b|"
           r"\b(?:\$?\d[\d,.]*k?|that|your price|your offer)\s+it is\b|\bi(?:'ll| will| can) (?:do|take|meet) "
           r"(?:that|it|your (?:price|offer|number))\b|\bfine,? (?:let'?s|we'?ll) do (?:it|that)\b|"
           r"\bshake on it\b|\bwhat you offered\b|\byour number\b.*\b(?:works|fine|ok)\b|\blet'?s do it\b")
_DISCOUNT = (r"\bdiscount|\brebate|\bknock|\bshave\b|\b(?:bring|brought|drop|dropped|lower|lowered|reduce|reduced|"
             r"cut|slash|mark) (?:it |the price |that |this )?(?:down|off)?\b.*\b(?:price|to|by|down|\d)|"
             r"\b(?:drop|lower|reduce|cut|slash|trim) (?:the|my|our) (?:price|number|sticker)|\boff the (?:price|"
             r"sticker|msrp|top)\b|\b\d[\d,.]*k? off\b|\bprice (?:cut|drop|reduction)|\bmarked down|\bmarkdown|"
             r"\bcome down\b|\bgo (?:down|lower)\b|\bbetter price\b|\bspecial (?:price|offer|deal)|\bon sale\b|"
             r"\bsale price\b|\bclearance\b|\bcash back\b|\bincentive|\btake (?:\$?\d[\d,.]*k?|a (?:bit|little|few)"
             r"[\w ]*) off\b|\bdeal on\b|\bdiscounted\b|\bcheaper\b|\blower price\b|\bsweeten\b|\bmeet you\b")
_PERSUASION = (r"\breliab|\bwarrant|\bmileage\b|\bmiles on it\b|\bbarely driven|\blow miles|\bresale|\bvalue\b|"
               r"\bsafe(?:ty|st)?\b|\bcrash\b|\baward|\bbest[- ]sell|\bpopular|\bin demand|\bfuel[- ]efficien|"
               r"\bmpg\b|\bgas\b|\bsave (?:you |on )|\bsavings\b|\btax credit|\bfree\b|\bonly good until|"
               r"\bwon'?t last|\bsale ends|\blimited[- ]time|\btoday only|\bends (?:today|tomorrow|friday|sunday|"
               r"soon|this)|\bact (?:fast|now)|\bdon'?t wait|\bgoing fast|\bhurry|\blast one|\bonly (?:one|\d+) "
               r"left|\bgreat (?:deal|price|choice|car|value|pick|condition)|\bsteal\b|\bbargain\b|"
               r"\bbest (?:deal|price|in class|car|choice|you'?ll)|\bwon'?t find (?:a )?better|\brun forever|"
               r"\blast(?:s)? forever|\bhold (?:their|its) value|\bcomfort|\bspacious|\broomy|\bquiet\b|\bsmooth|"
               r"\bpowerful\b|\bperformance\b|\bfast\b|\bquick\b|\bsporty|\bluxurious|\bbeautiful|\bstunning|"
               r"\bgorgeous|\bloaded\b|\bfully loaded|\bperfect for\b|\bideal\b|\bfamily\b|\bfits (?:your|the)|"
               r"\bcertified\b|\bmaintenance\b|\broadside\b|\bfinancing\b|\b0% |\bzero percent|\blow (?:apr|"
               r"interest|payments?)|\bworth (?:it|every)|\byou'?ll love|\byou deserve|\bpeace of mind|"
               r"\blow(?:er)? (?:cost|running)|\bcheap to (?:run|own|maintain)|\brange\b|\btrust\b|\bproven\b|"
               r"\bdurable|\bbuilt (?:tough|to last)|\bhaul\b|\btow|\bamazing|\bexcellent|\bfantastic|\bgreat\b|"
               r"\bhigh(?:ly)? rated|\b5[- ]star|\bfive[- ]star|\breviews?\b|\bconsumer reports|"
               r"\bclean (?:title|history|carfax)|\bone owner|\b1 owner|\bno accidents|\bdrive it home|\bnew car smell")
_RUDE = (r"\bidiot|\bstupid|\bdumb|\bmoron|\bdummy|\bloser|\bpathetic|\bjerk\b|\bshut up|\bget lost|\bget out\b|"
         r"\btake it or leave it|^\W*whatever\b|\bquit (?:whining|complaining|crying)|\bstop (?:whining|"
         r"complaining|crying|haggling|wasting)|\bwhining|\btightwad|\bcheapskate|\bcheap ass|\bhell\b|\bdamn|"
         r"\bcrap\b|\bshit|\bfuck|\bknow nothing\b|\bclueless|\bwaste (?:of )?my time|\bwasting my time|"
         r"\bcan'?t afford\b.*\b(?:get|leave|go|then|why)|\bget lost|\bbroke\b|\bclown|\bfool\b|\bignorant|"
         r"\bmoron|\bmorons|\bbuzz off|\bpiss|\bscrew you|\bgo away|\bhurry up\b|\bugh\b|\bdeal with it\b|"
         r"\bnot my problem|\bwho cares|\bdon'?t care\b|\blowball(?:er|ing)?\b.*\b(?:pathetic|joke|insult|"
         r"typical|ridiculous)|\b(?:pathetic|joke|insulting|ridiculous|laughable)\b.*\blowball|\bare you "
         r"(?:kidding|serious|deaf|blind|crazy)|\bwhat'?s wrong with you|\bnobody asked|\bpal\b|\bbuddy\b.*!|"
         r"\bcheap(?:o|skate)|\bpeasant|\bpoor\b|\bbeggar|\bidiotic|\bdimwit|\bnitwit|\bimbecile|\bbrain|"
         r"\bsucker|\bdo you even\b|\bbabysit|\byou (?:clearly |obviously |probably |really |just )?can'?t "
         r"afford\b|\bscram\b|\bbeat it\b|\bmoney'?s? (?:talks|where your mouth)|\bor get out\b|\bor leave\b")


@functools.lru_cache(maxsize=65536)
def parse_seller(text: str, catalogue: Catalogue | None = None) -> SellerUtterance:
    """Read one seller line (see `SellerUtterance`).  Pure and cached: the same line, the same parse.
    Only the first `MAX_LINE` characters are read (a spoken line; some patterns are quadratic in length)."""
    catalogue = catalogue or load_catalogue()
    text = text.strip()[:MAX_LINE]
    if not re.search(r"[A-Za-z0-9]", text):
        return SellerUtterance(empty=True)
    cars = _find(catalogue.car_pattern, text)
    # Car names ("F-150", "Model 3", "CX-90", "911") are not amounts; blank them before reading numbers.
    no_names = catalogue.car_pattern[0].sub(" ", text)
    prices, discounts = _amounts(_digits_for_words(no_names))
    lower = text.lower()
    question = "?" in text or any(_any(_QUESTION_START, s) for s in re.split(r"[.!;]+\s*", lower))
    greeting = _any(_GREETING, lower)
    asks_budget = question and _any(_BUDGET, lower)
    asks_preferences = question and _any(_PREFERENCES, lower)
    accepts = _any(_ACCEPT, lower)
    discount = bool(discounts) or _any(_DISCOUNT, lower)
    return SellerUtterance(
        cars=cars,
        brands=_find(catalogue.brand_pattern, no_names),
        types=_find(catalogue.type_pattern, text),
        features=_find(catalogue.feature_pattern, text),
        price=prices[-1] if prices else None,
        discount_amount=discounts[-1] if discounts else None,
        asks_budget=asks_budget,
        asks_preferences=asks_preferences,
        accepts_offer=accepts,
        persuasion=_any(_PERSUASION, lower),
        discount=discount,
        rude=_any(_RUDE, lower),
        greeting=greeting,
        empty=False,
    )
