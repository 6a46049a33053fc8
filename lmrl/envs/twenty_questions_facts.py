"""Everyday facts of the 20 Questions objects, answered yes-only (issue 19).

Each object lists short statements true of it that no attribute holds ("wakes you up", "rabbits
eat it", "carved at halloween"; `knowledge.py`).  A yes/no question the attributes cannot answer
gets "Yes." when ONE fact holds every meaningful word of the question, in the same order ("Do
rabbits eat it?" fits "rabbits eat it"; "Does it eat rabbits?" does not), and stays "I can't answer
that." otherwise: the lists are short, so a fact they lack is no reason for a "No.".

Not read: questions with a negation, a comparison, an alternative, a quantifier or a liking ("Is
it not sweet?", "... than a car?", "... or ...?", "only", "every", "do kids like it?"), which a
fact cannot decide; and a fact that lists alternatives ("red or green") only fits a question that
names all of its words.  Words that place a thing ("under", "next to") count.
"""

from __future__ import annotations

import re

from lmrl.envs.knowledge import KnowledgeBase
from lmrl.envs.words import stem, tokens

_YES_NO = re.compile(r"^(?:is|are|does|do|did|can|could|would|will|has|have|was|were|should|might|may)\b")
_NOT_DECIDED = re.compile(r"\b(?:not|never|no|nor|neither|either|or|than|only|just|always|every|each|all|exactly|"
                          r"most|more|less|fewer|without|instead|except|too|enough)\b|n't\b|"
                          r"\b(?:like|likes|love|loves|enjoy|enjoys|hate|hates|prefer|prefers)\s+(?:it|them|this|that|to|"
                          r"\w+ing)\b|\bfavou?rite\b")
# Words that place a thing: generic for the matcher, but "under the bed" is not "next to the bed".
_PLACING = frozenset(stem(w) for w in "under over above below behind beside near next inside outside around".split())
# Past forms a stemmer does not map to the present ("worn" is "wear").
_IRREGULAR = {
    "ate": "eat", "eaten": "eat", "worn": "wear", "wore": "wear", "drunk": "drink", "drank": "drink", "flown": "fly",
    "flew": "fly", "hung": "hang", "caught": "catch", "thrown": "throw", "threw": "throw", "swum": "swim", "swam": "swim",
    "ridden": "ride", "rode": "ride", "made": "make", "built": "build", "dug": "dig", "blown": "blow", "blew": "blow",
    "grown": "grow", "grew": "grow", "held": "hold", "fed": "feed", "sold": "sell", "bought": "buy", "given": "give",
    "gave": "give", "written": "write", "wrote": "write", "drawn": "draw", "drew": "draw", "rang": "ring",
    "rung": "ring", "sent": "send", "stuck": "stick", "torn": "tear", "tore": "tear", "woken": "wake", "woke": "wake",
    "broken": "break", "broke": "break", "spun": "spin", "swung": "swing", "beaten": "beat", "bitten": "bite",
    "shaken": "shake", "shook": "shake", "sewn": "sew", "mown": "mow", "shown": "show", "sat": "sit", "slept": "sleep",
    "stood": "stand", "lit": "light", "carved": "carve", "kids": "child", "children": "child", "kid": "child",
}


class Facts:
    """The yes-only reading of the objects' `facts` (module docstring)."""

    def __init__(self, kb: KnowledgeBase, generic: frozenset[str]):
        self.generic = generic - _PLACING
        self.facts = {o.name: [(self.words(f), " or " in f) for f in o.facts] for o in kb.objects}

    def words(self, text: str) -> list[str]:
        """Stems of the meaningful words, in order ("flying" -> "fly", "worn" -> "wear")."""
        out = []
        for word in tokens(text):
            word = stem(_IRREGULAR.get(word, word))
            if word.endswith("ing") and len(word) > 5:
                word = stem(word[:-3])
            if word not in self.generic:
                out.append(word)
        return out

    def says_yes(self, name: str, question: str) -> bool:
        """Whether one of `name`'s facts holds the whole question (`question` cleaned, lowercase)."""
        text = question.strip()
        if not _YES_NO.match(text) or _NOT_DECIDED.search(text):
            return False
        asked = self.words(text)
        if not asked:
            return False
        return any(_in_order(asked, fact) and (not alternatives or set(fact) <= set(asked))
                   for fact, alternatives in self.facts.get(name, ()))


def _in_order(asked: list[str], fact: list[str]) -> bool:
    """Every asked word appears in `fact`, in the same order."""
    rest = iter(fact)
    return all(any(word == f for f in rest) for word in asked)
