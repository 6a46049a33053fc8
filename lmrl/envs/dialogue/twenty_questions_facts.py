"""Everyday facts of the 20 Questions objects, answered yes-only (issue 19).

Each object lists short statements true of it that no attribute holds ("wakes you up", "rabbits
eat it", "carved at halloween", "has sharp claws"; `knowledge.py`).  A yes/no question gets "Yes."
when one fact says the same thing in the same form (below), or holds every meaningful word of the
question in the same order ("Do rabbits eat it?" fits "rabbits eat it"; "Does it eat rabbits?" does
not), and stays "I can't answer that." otherwise: the lists are short, so a fact they lack is no
reason for a "No.".

Both sides are read into a `Reading`: what is said of the object (its words as stems, in order),
whether the object is what something is done to, and by whom.  The forms:

- what it is ("Is it a star?", fact "a star", "in the sky", "yellow"): the question's words must
  begin the fact, and anything the fact adds must start with a preposition or a condition ("a star
  in the sky"): "Is it bread?" is not "bread goes in the slots";
- what it does ("Does it fly?", fact "flies in the sky"): the fact starts with the question's verb
  and holds its words in order (more may come between and after: "climbs trees");
- what it has ("Does it have claws?", fact "has sharp claws");
- what is done to it ("Do you kick it?", "Is it kicked?", fact "kicked around a field", "players
  kick it into a goal"): only facts where it is done to the object, by the same doer ("Do rabbits
  eat it?" is "rabbits eat it", "eaten by rabbits"; "Does it eat rabbits?" is neither); a fact's
  doer that is a kind of person ("players", "farmers") also answers "you" and "people".

Not read: questions with a negation, a comparison, an alternative, a quantifier or a liking ("Is
it not sweet?", "... than a car?", "... or ...?", "only", "every", "do kids like it?"), which a
fact cannot decide; and a fact that lists alternatives ("red or green") only fits a question that
names all of its words.  Words that place a thing ("under", "next to") count.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lmrl.envs.dialogue.knowledge import KnowledgeBase
from lmrl.envs.dialogue.words import stem, tokens

_YES_NO = re.compile(r"^(?:is|are|does|do|did|can|could|would|will|has|have|was|were|should|might|may)\b")
_NOT_DECIDED = re.compile(r"\b(?:not|never|no|nor|neither|either|or|than|only|just|always|every|each|all|exactly|"
                          r"most|more|less|fewer|without|instead|except|too|enough)\b|n't\b|"
                          r"\b(?:like|likes|love|loves|enjoy|enjoys|hate|hates|prefer|prefers)\s+(?:it|them|this|that|to|"
                          r"\w+ing)\b|\bfavou?rite\b")
# Words that place a thing: generic for the word match, but "under the bed" is not "next to the bed".
_PLACING = frozenset(stem(w) for w in "under over above below behind beside near next inside outside around".split())
# Forms a stemmer does not map onto the base verb or noun ("worn" is "wear", "goes" is "go").
_IRREGULAR = {
    "ate": "eat", "eaten": "eat", "worn": "wear", "wore": "wear", "drunk": "drink", "drank": "drink", "flown": "fly",
    "flew": "fly", "hung": "hang", "caught": "catch", "thrown": "throw", "threw": "throw", "swum": "swim", "swam": "swim",
    "ridden": "ride", "rode": "ride", "made": "make", "built": "build", "dug": "dig", "blown": "blow", "blew": "blow",
    "grown": "grow", "grew": "grow", "held": "hold", "fed": "feed", "sold": "sell", "bought": "buy", "given": "give",
    "gave": "give", "written": "write", "wrote": "write", "drawn": "draw", "drew": "draw", "rang": "ring",
    "rung": "ring", "sent": "send", "stuck": "stick", "torn": "tear", "tore": "tear", "woken": "wake", "woke": "wake",
    "broken": "break", "broke": "break", "spun": "spin", "swung": "swing", "beaten": "beat", "bitten": "bite",
    "shaken": "shake", "shook": "shake", "sewn": "sew", "mown": "mow", "shown": "show", "sat": "sit", "slept": "sleep",
    "stood": "stand", "lit": "light", "kept": "keep", "found": "find", "put": "put", "hit": "hit", "cut": "cut",
    "set": "set", "shut": "shut", "spread": "spread", "read": "read", "laid": "lay", "led": "lead", "left": "leave",
    "taken": "take", "took": "take", "seen": "see", "saw": "see", "known": "know", "done": "do", "driven": "drive",
    "drove": "drive", "frozen": "freeze", "chosen": "choose", "hidden": "hide", "struck": "strike", "spent": "spend",
    "goes": "go", "went": "go", "gone": "go", "does": "do", "has": "have", "had": "have", "having": "have",
    "flying": "fly", "lying": "lie", "dying": "die", "tying": "tie", "kids": "child", "children": "child",
    "kid": "child", "people": "person", "u": "you", "colour": "color", "colours": "color", "grey": "gray",
}
# Past participles that are spelled like no "-ed" form: a fact or question starting with one says what is done to it.
_PARTICIPLES = frozenset(w for w, base in _IRREGULAR.items() if w not in (
    "ate", "wore", "drank", "flew", "threw", "swam", "rode", "blew", "grew", "gave", "wrote", "drew", "rang", "tore",
    "woke", "broke", "shook", "took", "saw", "drove", "went", "goes", "does", "has", "having", "flying", "lying",
    "dying", "tying", "kids", "children", "kid", "people", "u", "colour", "colours", "grey", "gone", "left", "read",
    "set", "put", "cut", "hit", "spread", "shut", "led", "had", "laid", "sat", "stood"))
_NOT_PARTICIPLES = frozenset("bed red shed sled seed need feed weed speed breed bleed hundred sacred naked wicked "
                             "ragged rugged jagged kindred".split())
_DROPPED = frozenset("a an the some any its their his her your my our this that these those and usually normally "
                     "typically often ever really very quite mostly mainly also generally commonly sometimes actually "
                     "still even probably maybe perhaps".split())
_IT = frozenset("it them one".split())
_SUBJECT_IT = frozenset("it this that they".split())
# Who "you" may stand for: a question asked of people in general.
_PEOPLE = frozenset("you people person we i someone somebody anyone one u humans everyone".split())
_AUX = frozenset("do does did can could would will should might may must".split())
_COPULA = frozenset("is are was were".split())
_PREPOSITIONS = frozenset("in on at into onto with from under over around through across along inside outside near "
                          "behind beside between by for to of off up down out about above below next against".split())
# How many do it ("Can several people sit on it?", "Do two people ride it?"): a fact's doer says no number.
_HOW_MANY = frozenset("several many few multiple lots numerous both two three four five six seven eight nine ten "
                      "dozens hundreds thousands millions".split())
_CLAUSE = re.compile(r"\s+\b(?:when|whenever|if|while|because|before|after|once|so that)\b.*$")
# A preposition right after a verb may make another verb of it: "play with", "make into", "come from".
_PHRASAL = frozenset((w,) for w in "with into to for of from at on out off".split())
# Doers that are kinds of people: a fact "farmers drive it" also answers "Do you drive it?".
_ROLES = frozenset(stem(w) for w in (
    "person people player kid child adult farmer pilot driver rider musician artist painter student teacher worker "
    "builder carpenter gardener chef cook baker doctor nurse photographer writer king queen baby toddler fan golfer "
    "surfer skater teen teenager athlete woman man girl boy family parent soldier police firefighter scientist astronaut sailor "
    "fisherman goalkeeper gamer shopper office reader singer dancer drummer guitarist pianist violinist mechanic "
    "plumber electrician hiker camper tourist").split())

_CHILDREN = frozenset(stem(w) for w in "kid child baby toddler girl boy".split())  # much done by anyone is not by them


@dataclass(frozen=True)
class Reading:
    """What a question asks or a fact says: `form` ("is", "does", "has" or "done": something is done to it),
    the stems said of it in order, and for "done" the doer's stem ("" for anyone)."""

    form: str
    words: tuple[str, ...]
    doer: str = ""
    alternatives: bool = False
    stranded: bool = False  # "done" ending on a preposition before "it": "sit on it", "eat with it"


def _word(raw: str) -> str:
    return stem(_IRREGULAR.get(raw, raw))


def _participle(raw: str) -> bool:
    return raw in _PARTICIPLES or (raw.endswith("ed") and (len(raw) > 4 or raw == "used") and raw not in _NOT_PARTICIPLES)


def _stems(words: list[str]) -> tuple[str, ...]:
    return tuple(_word(w) for w in words if w not in _DROPPED and w not in _IT)


def _done(words: list[str], doer: list[str]) -> Reading:
    """Something done to it: `words` start with the verb ("kick it into a goal"), `doer` who does it."""
    by = words.index("by") if "by" in words[1:] else 0
    # "driven by a farmer", "made by people": the doer comes last; "played by pressing keys" says how, not who
    # (a "by" that ends the words, "is it played by", names no one: read on as if it were not there)
    if by and by + 1 < len(words) and not words[by + 1].endswith("ing"):
        after = words[by + 1:]  # who, up to where or when ("played by children at school")
        end = next((i for i, w in enumerate(after) if w in _PREPOSITIONS and i > 0), len(after))
        return Reading("done", _stems(words[:by]), _doer(after[:end]))
    at = next((i for i, w in enumerate(words) if w in _IT), 0)
    return Reading("done", _stems(words), _doer(doer), stranded=at > 0 and words[at - 1] in _PREPOSITIONS)


def _names_people(word: str) -> bool:
    return word in _PEOPLE or _word(word) in _ROLES


def _doer(words: list[str]) -> str:
    """Who does it, as its head noun's stem: "" for people in general; with how many when said ("several person")."""
    who = [w for w in words if w not in _DROPPED]
    if not who:
        return ""
    many = [w for w in who if w in _HOW_MANY]
    if many:
        return f"{many[0]} {_word(who[-1])}"
    return "" if who[-1] in _PEOPLE else _word(who[-1])


def _as_tool(reading: Reading) -> list[Reading]:
    """"(do you) flip pancakes with it", "(is it) used to cut paper": what it does, as the tool ("flips pancakes")."""
    words = reading.words
    if reading.form != "done" or reading.doer:
        return []
    if reading.stranded and words[-1] == "with" and len(words) > 1:
        return [Reading("does", words[:-1])]
    if words[:1] == ("use",) and words[1:2] in (("to",), ("for",)) and len(words) > 2:
        return [Reading("does", words[2:])]
    return []


def _done_to_it(words: list[str]) -> list[Reading]:
    """A fact naming "it" after its verb: "rabbits eat it", "people watch tv from it", "notes are taken in it" (read
    as "take notes in it"); without a word naming people, both "fish live in it" and "chop vegetables on it" (no
    doer: the verb comes first) are tried, as no question reads both ways."""
    at = next(i for i, w in enumerate(words) if w in _IT and i > 0)
    passive = next((i for i in range(1, at - 1) if words[i] in _COPULA
                    and (_participle(words[i + 1]) or words[i + 1] in _IRREGULAR)), None)
    if passive is not None:
        return [_done([words[passive + 1], *words[:passive], *words[passive + 2:]], [])]
    # the doer ends at its first word naming people ("people watch tv from it"), else the verb is next to "it"
    person = next((i for i, w in enumerate(words[:at - 1]) if _names_people(w) or w in _HOW_MANY), None)
    while person is not None and person + 2 < at and (_names_people(words[person + 1]) or words[person + 1] == "and"):
        person += 1  # "one person sits on it", "kids and teens ride it", "several people sit on it"
    if person is not None:
        return [_done(words[person + 1:], words[:person + 1])]
    verb = at - 2 if at >= 2 and words[at - 1] in _PREPOSITIONS else at - 1
    return [_done(words[verb:], words[:verb]), _done(words, [])]


def read_fact(text: str) -> list[Reading]:
    """The readings of a fact, a phrase about the object with the object left out ("has sharp claws"); a condition
    ("makes you cry when you cut it") is read after the rest, so a question may leave it out but for "is it ..."."""
    condition = _CLAUSE.search(" " + text)
    words = tokens(text[:condition.start() - 1] if condition else text)
    alternatives = "or" in tokens(text)
    if words[0] in ("has", "have") or words[:2] == ["comes", "with"] or words[0] == "contains":
        readings = [Reading("has", ("have", *_stems(words[2 if words[0] == "comes" else 1:])))]
    elif _participle(words[0]):
        readings = [_done(words, [])]
    elif {"it", "them"} & set(words[1:]) and words[0] not in _PREPOSITIONS:
        readings = _done_to_it(words)
    elif words[0] in _PREPOSITIONS or words[0] in ("a", "an", "the"):
        readings = [Reading("is", _stems(words))]
    else:
        readings = [Reading("plain", _stems(words))]
    extra = _stems(tokens(condition.group(0))) if condition else ()
    return [Reading(r.form, r.words + extra, r.doer, alternatives) for r in readings]


def read_question(text: str) -> list[Reading]:
    """The readings of a yes/no question about the object (cleaned, lowercase); several when the doer's words
    cannot be told from the verb's ("do rock bands use it?"); none when it cannot be read."""
    words = tokens(text)
    if len(words) < 2 or not _YES_NO.match(text) or _NOT_DECIDED.search(text):
        return []
    head, subject, rest = words[0], words[1], words[2:]
    if head in _COPULA and subject == "there":  # "is there a bell on it?"
        end = next((i for i, w in enumerate(rest) if w in _IT), len(rest))
        inside = rest[:end - 1] if end < len(rest) and rest[end - 1] in _PREPOSITIONS else rest[:end]
        return [Reading("has", ("have", *_stems(inside)))] if inside else []
    if head in ("has", "have") and subject in _SUBJECT_IT and rest[:1] == ["got"]:
        return [Reading("has", ("have", *_stems(rest[1:])))] if rest[1:] else []
    if head in ("has", "have") and rest and _participle(rest[0]):  # "have people walked on it?"
        return [_done(rest, [subject])]
    if head in _COPULA and subject in _SUBJECT_IT:
        rest = [w for w in rest if w not in _DROPPED]
        if rest[:2] == ["able", "to"]:
            return _does(rest[2:])
        if rest and _participle(rest[0]):
            return [_done(rest, [])] + _as_tool(_done(rest, []))
        return [Reading("is", _stems(rest))] if rest else []
    if head not in _AUX:
        return []
    if subject in _SUBJECT_IT and not (subject == "they" and _IT & set(rest)):
        return _does(rest)
    if subject in _PEOPLE or subject == "they":
        return [_done(rest, [])] + _as_tool(_done(rest, [])) if _IT & set(rest) and rest else []
    if not _IT & set(rest):
        return []
    words = words[1:]  # "do rabbits eat it", "does a king wear it", "do rock bands use it"
    start = next(i for i, w in enumerate(words) if w not in _DROPPED)
    return [_done(words[start + n:], words[start:start + n]) for n in (1, 2) if start + n < len(words)]


def _does(rest: list[str]) -> list[Reading]:
    """"(does it) have sharp claws", "(can it) be red", "(does it) fly in the sky"."""
    rest = [w for w in rest if w not in _DROPPED]
    if not rest:
        return []
    if rest[0] in ("have", "has", "contain") or rest[:2] == ["come", "with"]:
        return [Reading("has", ("have", *_stems(rest[2 if rest[0] == "come" else 1:])))]
    if rest[0] == "be":
        return [Reading("is", _stems(rest[1:]))] if rest[1:] else []
    return [Reading("does", _stems(rest))]


def fits(question: Reading, fact: Reading) -> bool:
    """Whether the fact says what the question asks (module docstring)."""
    asked, said = question.words, fact.words
    if not asked or not said or asked[0] != said[0] or not _in_order(asked, said):
        return False
    if fact.alternatives and not set(said) - {"or"} <= set(asked):
        return False
    if question.stranded and said[-1] != asked[-1]:
        return False  # "do you eat with it?": the fact too must end on "with" ("eaten on the cob with butter" does not)
    if len(asked) == 1 and said[1:2] in _PHRASAL:
        return False  # "do people play it?" is not "played with by children", "made by people" not "made into popcorn"
    if question.form == "is":
        tail = said[len(asked):]
        return fact.form in ("is", "plain") and said[:len(asked)] == asked and (not tail or tail[0] in _PREPOSITIONS)
    if question.form == "does":
        return fact.form == "plain"
    if question.form == "has":  # the thing had is the fact's, not a word of what it is for ("holes for fingers")
        asked_np, asked_pp = _split(asked)
        said_np, said_pp = _split(said)
        return fact.form == "has" and asked_np[-1] == said_np[-1] and _in_order(asked_np, said_np) \
            and (not asked_pp or (asked_pp[0] == said_pp[:1][0] if said_pp else False) and _in_order(asked_pp, said_pp))
    # a kind of person answers for people, and a grown-up kind for a fact done by anyone ("kicked around a field")
    return fact.form == "done" and (question.doer == fact.doer or (question.doer in ("", "person") and fact.doer in _ROLES)
                                    or (not fact.doer and question.doer in _ROLES - _CHILDREN))


class Facts:
    """The yes-only reading of the objects' `facts` (module docstring)."""

    def __init__(self, kb: KnowledgeBase, generic: frozenset[str]):
        self.generic = generic - _PLACING
        self.facts = {o.name: [r for f in o.facts for r in read_fact(f)] for o in kb.objects}
        self.words_of = {o.name: [(self.words(f), " or " in f) for f in o.facts] for o in kb.objects}

    def says_yes(self, name: str, question: str, by_words: bool = True) -> bool:
        """Whether one of `name`'s facts says what `question` (cleaned, lowercase) asks: in the same form, or
        (`by_words`) with every meaningful word of the question in one fact, in order (module docstring)."""
        text = question.strip()
        readings = read_question(text.rstrip("?!. "))
        return any(fits(q, f) for q in readings for f in self.facts.get(name, ())) \
            or (by_words and self._holds_words(name, text))

    def words(self, text: str) -> list[str]:
        """Stems of the meaningful words, in order ("flying" -> "fly", "worn" -> "wear")."""
        out = []
        for word in tokens(text):
            word = _word(word)
            if word.endswith("ing") and len(word) > 5:
                word = stem(word[:-3])
            if word not in self.generic:
                out.append(word)
        return out

    def _holds_words(self, name: str, text: str) -> bool:
        """"Do rabbits eat it?" fits "rabbits eat it"; "Does it eat rabbits?" does not."""
        if not _YES_NO.match(text) or _NOT_DECIDED.search(text):
            return False
        asked = tuple(self.words(text))
        return bool(asked) and any(_in_order(asked, tuple(fact)) and (not alternatives or set(fact) <= set(asked))
                                   for fact, alternatives in self.words_of.get(name, ()))


def _split(words: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A noun phrase and what follows from its first preposition on: ("have", "hole"), ("for", "finger")."""
    at = next((i for i, w in enumerate(words) if w in _PREPOSITIONS), len(words))
    return words[:at], words[at:]


def _in_order(asked: tuple[str, ...], said: tuple[str, ...]) -> bool:
    """Every asked word appears in `said`, in the same order."""
    rest = iter(said)
    return all(any(word == s for s in rest) for word in asked)
