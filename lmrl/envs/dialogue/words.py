"""Word-level helpers of the dialogue oracles: a light stemmer, content words and number words.

The oracles decide whether a question is about something their knowledge base holds by the
words it uses, so "feathers", "feathered" and "feather" must meet, and "teeth" must meet
"tooth".  No stemmer ships with our dependencies; this one is small and symmetric (questions
and vocabularies go through the same function), which is all the comparison needs.
"""

from __future__ import annotations

import re

_IRREGULAR = {
    "teeth": "tooth", "feet": "foot", "mice": "mouse", "geese": "goose", "children": "child", "kids": "child", "kid": "child", "men": "man",
    "women": "woman", "people": "person", "leaves": "leaf", "knives": "knife", "hooves": "hoof", "shelves": "shelf",
    "wolves": "wolf", "halves": "half", "calves": "calf", "lives": "live", "life": "live", "wives": "wife", "loaves": "loaf",
    "ridden": "ride", "rode": "ride", "worn": "wear", "wore": "wear", "ate": "eat", "eaten": "eat", "flew": "fly",
    "flown": "fly", "grew": "grow", "grown": "grow", "drove": "drive", "driven": "drive", "swam": "swim", "sat": "sit",
    "slept": "sleep", "bought": "buy", "sold": "sell", "kept": "keep", "found": "find", "made": "make", "built": "build",
    "thrown": "throw", "threw": "throw", "hung": "hang", "held": "hold", "bitten": "bite", "went": "go", "gone": "go",
    "colour": "color", "colours": "color", "coloured": "color", "colored": "color", "grey": "gray", "jewellery": "jewelry",
    "aeroplane": "airplane", "tyre": "tire", "tyres": "tire", "metallic": "metal", "wooden": "wood", "furry": "fur",
    "hairy": "hair", "feathered": "feather", "scaly": "scale", "leafy": "leaf", "watery": "water", "woollen": "wool",
    "woolen": "wool", "golden": "gold", "rubbery": "rubber", "stony": "stone", "rocky": "rock", "glassy": "glass",
    "edible": "eat", "drinkable": "drink", "wearable": "wear", "living": "live", "alive": "live", "is": "is", "this": "this",
    "was": "was", "has": "has", "does": "does", "its": "its", "bus": "bus", "glass": "glass", "grass": "grass",
    "dress": "dress", "class": "class", "gas": "gas", "always": "always", "news": "news", "series": "series",
}
_VOWELS = set("aeiou")


def stem(word: str) -> str:
    """A crude, deterministic stem: "feathers" -> "feather", "riding" -> "rid", "teeth" -> "tooth".
    A final "e" is dropped from every result, so "strike" and "striking" meet ("strik")."""
    out = _stem(word)
    return out[:-1] if len(out) > 3 and out.endswith("e") and not out.endswith("ee") else out


def _stem(word: str) -> str:
    word = word.lower().strip("'")
    if "'" in word:  # "you'd" -> "you", "it's" -> "it", "don't" -> "don't" (kept: it is a word of its own)
        base, _, tail = word.partition("'")
        if tail != "t":
            word = base
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    if len(word) <= 3:
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if re.search(r"(?:ss|sh|ch|x|z)es$", word):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        base = word[: -len(suffix)]
        if not word.endswith(suffix) or len(base) < 2 or not _VOWELS & set(base) or word.endswith("eed"):
            continue
        if len(base) > 2 and base[-1] == base[-2] and base[-1] not in "lsz":
            return base[:-1]  # running -> run, stopped -> stop
        if base.endswith("i"):
            return base[:-1] + "y"  # fried -> fry
        if _needs_e(base):
            return base + "e"  # riding -> ride, used -> use, bouncing -> bounce
        return base
    return word


def _needs_e(base: str) -> bool:
    """Stems that lost an "e" before -ing/-ed: short consonant-vowel-consonant ones ("rid", "us",
    "writ") and those ending in c, v or z ("bounc", "liv", "squeez")."""
    if base[-1] in "cvz":
        return True
    if len(base) > 4 or base[-1] in _VOWELS or base[-1] in "wxy":
        return False
    return base[-2] in _VOWELS and (len(base) < 3 or base[-3] not in _VOWELS)


def tokens(text: str) -> list[str]:
    """Lowercase words (letters, digits, inner apostrophes); a hyphen splits words ("stick-shaped")."""
    return re.findall(r"[a-z0-9]+(?:'[a-z0-9]+)*", text.lower().replace("\u2019", "'"))


def stems(text: str) -> list[str]:
    return [stem(t) for t in tokens(text)]


# What people put in front of a question: "OK, is it...", "Quick question: does it...", "Tell me, ...".
_CHATTER_WORDS = ("ok", "okay", "so", "well", "right", "alright", "all right", "hmm+", "um+", "uh", "and", "also", "then",
                  "now", "next one", "next question", "quick question", "question", "one more", "another one",
                  "let me ask", "let me see", "tell me", "i wonder", "i want to know", "hey", "hi", "sure", "great",
                  "cool", "thanks", "thank you", "got it", "interesting", "oh", "ah")
# Longest first, so "next one:" is dropped whole rather than "next" alone.
CHATTER = re.compile(r"^(?:(?:" + "|".join(sorted(_CHATTER_WORDS, key=len, reverse=True)) + r")\s*[,:!.;-]*\s+)+")


# ... and after it: "Is it made of paper at all?", "Is it metal then?", "Is it red, do you think?".
_TAIL = re.compile(r"(?:[\s,]+(?:at all|then|though|by any chance|do you think|would you say|you think|or what|in general|"
                   r"exactly|perhaps|maybe|i guess|i wonder|if you know|as well|too))+(?=[?!.\s]*$)")


# A question asked as an opinion: "would you say it's alive?" is "is it alive?".
_OPINION = re.compile(r"^(?:(?P<calling>would you call|would you describe|would you consider|do you consider|would you class)|"
                      r"would you say|do you think|is it fair to say|would it be fair "
                      r"to say|can you tell me if|could you tell me if|tell me if|i wonder if|i want to know if|is it true "
                      r"that)\s+(?:that\s+)?(?P<subject>it|your object|the thing|this thing|your city|the city|this city|people|"
                      r"you|kids|they|most people)"
                      r"(?:'s|\s+is|\s+as|\s+(?P<verb>has|can|could|would|will|does))?\s+(?P<rest>.+)$")


def _plain_question(text: str) -> str:
    found = _OPINION.match(text)
    if found is None:
        return text
    subject, verb, rest = found.group("subject"), found.group("verb"), found.group("rest")
    if found.group("calling"):  # "would you call it clothing?", "would you describe it as heavy?"
        return f"is {subject} {rest}"
    if verb == "has":
        return f"does {subject} have {rest}"
    if verb:
        return f"{verb} {subject} {rest}"
    head = text[found.end("subject"):found.start("rest")].strip()
    if subject in ("people", "you", "kids", "they", "most people"):
        return f"do {subject} {rest}"
    return f"is {subject} {rest}" if head in ("'s", "is", "as") or rest.startswith(("a ", "an ")) \
        else f"does {subject} {rest}"


def strip_chatter(text: str) -> str:
    """A lowercase question without the words people put in front of it or after it, and asked plainly
    ("would you say it's alive?" -> "is it alive?")."""
    return _plain_question(_TAIL.sub("", CHATTER.sub("", text)))


NUMBER_WORDS = {"no": 0, "zero": 0, "one": 1, "a single": 1, "single": 1, "two": 2, "pair": 2, "three": 3, "four": 4,
                "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}


def number(word: str) -> int | None:
    """The whole number a word spells ("four", "4"), or None."""
    if word.isdigit():
        return int(word)
    return NUMBER_WORDS.get(word)
