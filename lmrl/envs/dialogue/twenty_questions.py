"""Twenty Questions: find the secret object with at most 20 yes/no questions.

Text and rewards follow LMRL-Gym: the history opens with `Questions:\\n`; every agent
utterance is one question, answered `Yes.\\n` or `No.\\n`; each question costs -1 except
the one that correctly names the object, which gets 0 and ends the game; the game also
ends after 20 questions.  Returns therefore lie in [-20, 0].

The original answered with a fine-tuned FLAN-T5-XL we cannot download.  Our oracle is
grounded in the knowledge base (`data/twenty_questions.json`): it works out what a
question asks, secret-independently, and then reads the answer off the secret's entry.

How a question is understood (`TwentyQuestionsOracle.parse`), in order:

1. **Guess.**  Leading frame words ("is it", "are you thinking of", "my guess is", ...),
   articles and "kind of" are stripped; if what is left names one object (a name or a
   synonym; case, article, plural and punctuation do not matter), the question is a
   guess of that object ("Is it orange?" without an article asks the colour).
2. **Not answerable.**  Open questions (what/which/where/how/...) and text without letters
   get `I can't answer that.`: the same reply every time, costing a question, never a win.
3. **Rules** (`twenty_questions_rules.py`) read the common forms from the knowledge base's
   nouns and verbs: class nouns ("Is it a mammal?", "a fruit or a vegetable?"), parts ("Does
   it have feathers / four legs?"), materials, colours, verbs ("Do you ride it?", "Do you eat
   with it?"), places, and size comparisons from the objects' size ranges.  A form they
   recognise with a word the knowledge base does not know ("Does it have a bell?") is not
   answerable.
4. **Other guesses.**  "a"/"an" and one to three words that nothing in the knowledge base
   uses ("a wolf", "a ruby") guess something outside it and get `No.`; several guesses at
   once ("is it a cat or a dog?") are not answerable.
5. **Attributes.**  Otherwise the question is embedded (all-MiniLM-L6-v2, `encoder.py`) and
   given the attribute of its most similar example phrasing (`data/dialogue_phrasings.json`
   plus each attribute's own question), but only if every meaningful word of the question is
   one the knowledge base knows and none belongs to another attribute than the one matched
   ("Do bees like it?", "Do cows eat it?" are not answerable); below `threshold` cosine
   similarity it is not answerable either.  A standalone "not"/"never" flips the answer.

Answers come from the knowledge base: `Yes.`/`No.` where it holds the fact, `I can't answer
that.` where the object's answer is marked unsure (what colour is a car?) or the question
asks what it does not hold.  Only a correct guess wins, so repeating questions, asking "what
is it?", listing objects or typing gibberish never wins (tested in tests/envs/test_twenty_questions.py).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from lmrl.envs.dialogue.knowledge import KnowledgeBase, category_attribute, load_twenty_questions, normalize
from lmrl.envs.dialogue.question_game import MAX_QUESTIONS, QuestionGameEnv, build_oracle
from lmrl.envs.dialogue.twenty_questions_parse import (
    UNKNOWN_PARSE,
    Parse,
    Term,
    attribute_parse,
    clean,
    combine,
    evaluate,
    strip_frame,
)
from lmrl.envs.dialogue.twenty_questions_facts import Facts
from lmrl.envs.dialogue.twenty_questions_rules import PropertyRules
from lmrl.envs.dialogue.twenty_questions_sizes import compare_size
from lmrl.envs.dialogue.words import stem, tokens

PHRASINGS_PATH = Path(__file__).resolve().parents[1] / "data" / "dialogue_phrasings.json"
YES, NO, UNKNOWN = "Yes.", "No.", "I can't answer that."
# Matching a question to an attribute needs cosine similarity (plus keyword term) >= DEFAULT_THRESHOLD and a
# shared word, or >= PARAPHRASE_THRESHOLD when it shares no word with the attribute or uses words the knowledge
# base does not know ("Is it manufactured?" ~ "Is it man-made?").  Chosen on the development set and the
# earlier held-out sets (tests/envs/dev/README.md); never on the everyday held-out sets.
DEFAULT_THRESHOLD = 0.45
PARAPHRASE_THRESHOLD = 0.7
# Weight of the keyword term of the matcher (encoder.IntentIndex), chosen by leave-one-out on the example phrasings.
DEFAULT_KEYWORD_WEIGHT = 0.1

_WH_START = re.compile(r"^(?:so |ok |okay |and |well |then )*(?:what|which|where|who|whom|whose|why|when|how)\b")
_NEGATION = re.compile(r"\b(?:not|never)\b")
_POSSIBLE = re.compile(r"^(?:\w+\s+)??(?:can|could|might|may)\s+(?:it|they|this)\s+be\b")
_OR_NOT = re.compile(r"\bor not\b")
_CONTRAST = re.compile(r",\s*(?:and\s+|but\s+)?not\b.*$")
_LIST_SEPARATORS = re.compile(r"[,;/?!]|\bor\b|\band\b")
# "Do you/people ... ?" asks what people do; it cannot be about a part, a behaviour, a sound or life.
_PEOPLE_SUBJECT = re.compile(r"^(?:\w+\s+)??(?:do|does|did|can|could|would|will|should|have|has|had)\s+(?:you|people|we|i|"
                             r"someone|"
                             r"somebody|anyone|kids|children|humans|adults|players)\b")
# How many people do it ("Can two people sit on it?"): only an attribute about many people may answer.
_COUNTED_PEOPLE = re.compile(r"^(?:\w+\s+)??(?:do|does|did|can|could|would|will|should)\s+(?:a few|a couple of|a group of|"
                             r"lots of|two|three|four|five|six|several|many|multiple)\s+(?:people|persons|kids|children|"
                             r"adults|players|riders|passengers|friends)\b")
_MANY_WORDS = frozenset(stem(w) for w in "many lots several group crowd".split())
_NOT_PEOPLE_FAMILIES = frozenset({"behaviour", "sound", "life"})
# A class is asked as what it is ("Is it a ball?", "a kind of fruit"), not as what you do ("Do you catch a ball with it?");
# a part as what it has ("Does it have a roof?"), not where it goes ("Can it land on a roof?").
_IS_FORM = re.compile(r"^(?:\w+\s+)??(?:is|are|was|were|could it be|would it be|can it be|might it be)\b|"
                      r"\b(?:kind|type|sort|form) of\b|\bcount as\b|\bconsider|\bas an?\b")
_HAVE_FORM = re.compile(r"\b(?:have|has|had|having|with|got|there|contain|contains|come with|comes with|its|their|"
                        r"covered|equipped|need|needs|powered by|on it|on them|in it|it use|they use)\b|"
                        r"\b(?:up|stand|stands|standing|walk|walks|run|runs|move|moves|rest|rests) on\b")
# A word after an article, ending the phrase, is a noun: "come on a roll" does not ask whether it rolls ("a living
# thing" has an adjective there).
_AFTER_ARTICLE = re.compile(r"\b(?:a|an|the|some|any|my|your|its)\s+(\w+)(?=\s*(?:$|[?.!,]|\s+(?:of|on|in|at|for|with|"
                            r"from|to|and|or)\b))")
_VERB_FAMILIES = frozenset({"behaviour", "sound", "life"})
# and so is a plural right after a preposition ("put on rings" does not ask whether it rings)
_AFTER_PREPOSITION = re.compile(r"\b(?:on|in|into|onto|with|from|of|for|at|by|under|over)\s+(\w+s)\b")
# A sense after a taste or feel word ("Is it sweet to eat?", "soft to the touch"): it asks the word alone.
# Only words of that sense: "hard to eat" says difficult, "nice to eat" is a liking.
_SENSE = re.compile(r"^(?P<be>(?:is|are) (?:it|they)) (?:(?P<adjective>sweet|sour|salty|bitter|spicy|juicy|crunchy|creamy) "
                    r"to (?:eat|taste|the taste)|(?P<feel>soft|smooth|rough|furry|fluffy|sticky|cold|warm|wet|dry) "
                    r"to (?:touch|the touch|feel))\W*$")
# How it is to eat ("Is it hard to eat?", "nice to eat"): a liking or an effort, not stored (not "healthy").
_HOW_IT_EATS = re.compile(r"^(?:is|are) (?:it|they) (?:very |really |too )?(?:nice|hard|easy|difficult|fun|tasty|pleasant|"
                          r"messy|tricky) to (?:eat|drink)\b")
# A part named where something is done ("ride on its back", "carry it in their mouth"): the question is not about it.
_ON_ITS = re.compile(r"\b(?:on|in|into|onto|under|from|at|by|over|across|behind|off|around|to)\s+(?:its|their)\s+(\w+)")
# "too heavy to lift": the negation of an ability, unless the attribute itself says "too"
_TOO_TO = re.compile(r"\btoo\s+\w+\s+(?:for\s+\w+(?:\s+\w+)?\s+)?to\b")
# "Is the top white?", "are its leaves green?": the subject is a part of it
_THE_SUBJECT = re.compile(r"^(?:\w+\s+)??(?:is|are|does|do|can|could|will|would)\s+(?:the|its|their)\s+(\w+)")
# verbs a part is had with ("powered by an engine", "covered in fur")
_HAVING = frozenset(stem(w) for w in "powered equipped covered contain contains built fitted attached".split())
_WHOLE_WORDS = frozenset(stem(w) for w in "surface outside outer exterior overall colour color shape size texture body".split())
# the noun a place question names ("in a closet", "at the beach") and the use it may qualify ("worn outdoors")
_PLACE_NOUN = re.compile(r"\b(?:in|at|on|inside|near)\s+(?:a|an|the|your|my|most|every|some)?\s*(\w+)\W*$")
_USE_VERBS = re.compile(r"\b(worn|wear|played|play|eaten|eat|ridden|ride)\b")
_WHAT_IT_IS = frozenset({"class", "category", "material"})  # families "its <noun>" cannot ask ("its meat" can ask food)
_ITS_NOUN = re.compile(r"\b(?:its|their)\s+(\w+)")
# "Can it be carved?", "is it sliced": something done to it ("be used" is the attribute's own form)
_PASSIVE = re.compile(r"\b(?:be|is|are|gets?|being)\s+(?!used\b)\w+(?:ed|en)\b")
_ARTICLE_NOUN = re.compile(r"(?<!from )(?<!of )\b(?:a|an|the|some|any)\s+(\w+)")  # "from a plant" is a class
# What people have done ("Have people walked on it?", "Have you ever eaten one?"): history or the asker's experience.
_EXPERIENCE = re.compile(r"^(?:\w+\s+)??(?:have|has)\s+(?:you|people|we|i|they|anyone|someone|somebody|humans|"
                         r"astronauts|scientists)\s+(?!got\b)")
# A match into these families must share a word with the question ("Is it wheat?" is not "Is it a grain?").
_NAMED_FAMILIES = frozenset({"class", "category"})
_SHARED_MARGIN = 0.1
# Read by rule only: their wording differs from another attribute's by polarity or an antonym alone ("Can one
# person lift it?" vs "Is it too heavy to lift?", day vs night), which sentence embeddings cannot tell apart.
_RULE_ONLY = frozenset({"liftable", "seen_in_daytime", "seen_at_night"})
# Parts are asked with "have": a question about what it makes or does is not about a part.
_ACTION_VERBS = frozenset(stem(w) for w in "make produce create give emit cause cut dig drill build do".split())
# Who likes it ("Do kids like it?", "Do people enjoy eating it?"): taste, which the knowledge base does not store.
_LIKING = re.compile(r"\b(?:like|likes|liked|love|loves|loved|enjoy|enjoys|hate|hates|prefer|prefers)\s+(?:it|them|this|"
                     r"that|to|\w+ing)\b|\bfavou?rite\b")
# Where it comes from ("Does it come from the ground?"): only an attribute that itself says where things come from.
_ORIGIN = re.compile(r"\b(?:come|comes|came|coming)\s+(?:from|out of)\b")
_ORIGIN_WORDS = _ORIGIN
# Opposites the embeddings place close together: a question with one never matches an attribute named by the other
# ("Does it wake you up?" is not "Does it sleep?").
_OPPOSITES = {stem(a): stem(b) for x, y in (("wake", "sleep"), ("awake", "asleep"), ("float", "sink"), ("hot", "cold"),
                                            ("wet", "dry"), ("soft", "hard"), ("heavy", "light"), ("open", "close"),
                                            ("push", "pull"), ("day", "night"), ("summer", "winter"), ("fast", "slow"),
                                            ("loud", "quiet"), ("full", "empty"), ("rough", "smooth"), ("sweet", "sour"),
                                            ("thick", "thin"), ("long", "short"), ("old", "young"), ("tall", "short"),
                                            ("cheap", "expensive"))
              for a, b in ((x, y), (y, x))}
_FUNCTION_WORDS = frozenset("through across along inside within without onto upon".split())
# "Do fish live in it?": the subject is another thing, not the object nor people using it.
_OTHER_SUBJECT = re.compile(r"^(?:\w+\s+)??(?:do|does|can|could|would|will|did)\s+(?!(?:it|you|people|we|i|they|one|"
                            r"someone|somebody|anyone|kids|children|humans|adults|players|musicians|u|this|that|most|a "
                            r"person|the object|your object|lots|many|several|a lot|a few|more|two|three|four|five|ten|"
                            r"\d+|passengers|riders)\b)(?:a\s+|an\s+|the\s+|some\s+|most\s+)?\w+\s+"
                            r"(?!it\b)\w+.*\b(?:it|them|one)\b")
_YOUR_BODY = re.compile(r"\b(?:your|my|our|their|his|her|someone's|a person's)\s+\w+")
# Words an attribute's question narrows its property with; a question without them asks more.
_NARROWING = {"too": {"too"}, "nice": {"nice", "good"}, **dict.fromkeys(("itself", "own", "alone"), {"itself", "own", "alone"})}
# A question about the object itself ("Does it ...?"), which its facts (said of it) can contradict.
_IT_SUBJECT = re.compile(r"^(?:\w+\s+)??(?:is|are|does|do|has|have|can|could|will|would)\s+(?:it|they|this)\b")
# ... or what you do to something with it ("Can you draw straight lines with it?" against "draws straight lines"; not
# "Do you eat with it?", which a horse's "eats hay" does not answer)
_YOU_WITH_IT = re.compile(r"^(?:\w+\s+)??(?:can|could|do|would)\s+you\b.*\bwith\s+(?:it|them)\W*$")
_WIDER = {"heavy": "weighs_a_lot"}  # too heavy for one person to lift -> heavy
# "Is it wet when you use it?": a state at a moment, where the knowledge base stores the usual one.
_CONDITION = re.compile(r"^(?:\w+\s+)??(?:is|are)\s+(?:it|they|this)\b.*\b(?:when|whenever|if|while)\b")
_WHERE_IN_IT = frozenset(stem(w) for w in ("inside", "outside"))
_CLAUSE = re.compile(r"(?:,|\b(?:when|whenever|if|while|because|before|after|once|like|such as|for example|e\.g\.))\b.*$")


def _meaningful_words(text: str) -> set[str]:
    """Stems of the words that say what is asked: no generic words, no conditions ("when it's cold"), no parts
    of the person asking ("your hands")."""
    text = _YOUR_BODY.sub(" ", _CLAUSE.sub(" ", text))
    return {stem(w) for w in tokens(text)} - GENERIC_WORDS - {"not", "never"}
_EXAMPLES = re.compile(r"\b(?:like|such as|e\.g\.|for example|for instance|including)\b")
# Words that carry no property: a question made only of them and known words is judged by its known words.
GENERIC_WORDS = frozenset(stem(w) for w in (
    "a an the is it its it's are was were be been being of in on to for with or and by at from as do does did done can "
    "could would will should shall may might must you your i my me we our they them their there this that these those "
    "what which how some any one all not no yes so then ok okay well hmm um just also too very really quite pretty "
    "usually typically normally generally often always sometimes mostly mainly ever still even "
    "thing things object objects item items stuff something anything kind sort type lot lots much many more most "
    "people person someone somebody anyone everyone use used using usual have has had get got "
    "would like need able there here about into out up down off over under around than like such example "
    "see seen look find found spot go goes going come comes put take keep let "
    "typical normal regular average common everyday guess question answer think know tell say time".split()))
_CATEGORY_NOUNS = {
    "Sports": ["sports equipment", "sports gear", "sporting goods", "sport equipment", "sports item",
               "sporting equipment", "sports thing"],
    "Animals": ["animal", "creature", "beast", "living creature"],
    "Fruits": ["fruit"],
    "Vehicles": ["vehicle", "means of transport", "means of transportation", "mode of transport",
                 "mode of transportation"],
    "Clothes": ["clothing", "clothes", "piece of clothing", "item of clothing", "article of clothing", "garment",
                "apparel"],
    "Electronics": ["electronic device", "electronic", "electronics", "electronic gadget", "gadget",
                    "electronic item", "electronic appliance"],
    "Musical Instruments": ["musical instrument", "instrument", "music instrument"],
    "Furniture": ["furniture", "piece of furniture", "furnishing"],
    "Office Supplies": ["office supply", "office supplies", "stationery", "office item", "office tool"],
    "Vegetables": ["vegetable", "veggie", "veg"],
    "Art": ["art supply", "art supplies", "art material", "art materials", "art tool", "artwork", "work of art"],
    "Kitchen Tools": ["kitchen tool", "kitchen utensil", "utensil", "kitchenware", "kitchen item", "cookware",
                      "kitchen gadget", "cooking utensil", "cooking tool"],
    "Nature": ["part of nature", "natural feature"],
    "Toys": ["toy", "plaything"],
    "Jewelry": ["jewelry", "jewellery", "piece of jewelry", "piece of jewellery", "jewel"],
    "Garden Supplies": ["garden tool", "garden supply", "garden supplies", "gardening tool", "garden equipment",
                        "gardening supply", "gardening supplies", "gardening equipment"],
    "Tools": ["building tool", "repair tool", "tool for building", "tool for repairs", "diy tool", "tool for building or repair"],
}


@dataclass(frozen=True)
class Reply:
    """The oracle's answer to one question: its text, whether it was a correct guess, and how the question was read."""

    text: str
    correct_guess: bool
    parse: Parse


def load_phrasings(path: str | Path = PHRASINGS_PATH) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


class TwentyQuestionsOracle:
    """Answers questions about a secret object from the knowledge base (see the module docstring)."""

    def __init__(self, kb: KnowledgeBase | None = None, phrasings: dict | None = None, encoder=None,
                 threshold: float = DEFAULT_THRESHOLD, keyword_weight: float = DEFAULT_KEYWORD_WEIGHT,
                 paraphrase_threshold: float = PARAPHRASE_THRESHOLD):
        self.kb = kb or load_twenty_questions()
        self.paraphrase_threshold = paraphrase_threshold
        self.keyword_weight = keyword_weight
        phrasings = phrasings if phrasings is not None else load_phrasings()
        self.threshold = threshold
        self._encoder = encoder
        category_nouns = {noun: category_attribute(c) for c, nouns in _CATEGORY_NOUNS.items() for noun in nouns}
        category_nouns.update({normalize(c): category_attribute(c) for c in self.kb.categories})
        self._examples = self._build_examples(phrasings)
        # the prepositions an attribute's own wordings use it with ("Do you fry food in it?")
        prepositions = {a.id: set(re.findall(r"\b(in|on)\s+(?:it|them)\b", " ".join([a.question, *self._examples.get(a.id, [])])
                                             .lower())) for a in self.kb.attributes}
        self.rules = PropertyRules(self.kb, category_nouns, prepositions)
        self.facts = Facts(self.kb, GENERIC_WORDS)
        self._intent_words = self._build_intent_words()
        self._property_words = self._build_property_words()
        self._vocabulary = set().union(*self._intent_words.values(), self._property_words, GENERIC_WORDS)
        # the words that qualify an object's name and no attribute uses ("soccer" of soccer ball): a question with
        # one asks about that thing
        self._object_words = {stem(w) for o in self.kb.objects for v in o.variants for w in tokens(v)[:-1]} \
            - set().union(*self._intent_words.values()) - GENERIC_WORDS
        # what a living thing does ("bark", "eat plants"): never asked as "do you ...?"
        self._it_only = {a.id for a in self.kb.attributes if a.verbs and {f for f, _ in a.verbs} == {"it"}
                         and a.family in ("life", "behaviour", "sound", "food")}
        self._about_many = {a.id for a in self.kb.attributes if _MANY_WORDS & {stem(w) for w in tokens(" ".join(
            [a.question, *(p for _, ps in a.verbs for p in ps), *self._examples.get(a.id, [])]))}}
        self._index = None
        self._parses: dict[str, Parse] = {}

    def _keywords(self) -> dict[str, set[str]]:
        """Each attribute's own words: its id's and its question's content words, a category's nouns."""
        from lmrl.envs.dialogue.encoder import content_words

        keywords = {a.id: content_words(a.id.replace("_", " ") + " " + a.question) for a in self.kb.attributes}
        for category, nouns in _CATEGORY_NOUNS.items():
            keywords[category_attribute(category)] |= content_words(" ".join(nouns))
        return keywords

    def _own_words(self, attribute) -> set[str]:
        """Stems that name an attribute itself: id, question, nouns and verbs (not its example phrasings)."""
        text = " ".join([attribute.id.replace("_", " "), attribute.question, *attribute.nouns,
                         *(p for _, phrases in attribute.verbs for p in phrases)])
        return {stem(w) for w in tokens(text)} - GENERIC_WORDS

    def _build_intent_words(self) -> dict[str, set[str]]:
        words = {a.id: self._own_words(a) for a in self.kb.attributes}
        for category, nouns in _CATEGORY_NOUNS.items():
            words[category_attribute(category)] |= {stem(w) for w in tokens(" ".join(nouns))}
        for intent, texts in self._examples.items():
            words[intent] |= {stem(w) for t in texts for w in tokens(t)} - GENERIC_WORDS
        return words

    def _build_property_words(self) -> set[str]:
        """Nouns that name a property (feathers, mammal, wax, garage, orange) or an object: one of them in a
        question must belong to the matched attribute, or the question asks about something else."""
        phrases = [noun for a in self.kb.attributes if a.id != "is_person" for noun in a.nouns]
        phrases += [noun for ns in _CATEGORY_NOUNS.values() for noun in ns]
        phrases += [v for o in self.kb.objects for v in o.variants]
        heads = {stem(tokens(p)[-1]) for p in phrases if tokens(p)}  # "steering wheel" -> wheel
        return heads - GENERIC_WORDS - _FUNCTION_WORDS - _WHERE_IN_IT  # "juicy inside" asks juicy

    def _build_examples(self, phrasings: dict) -> dict[str, list[str]]:
        examples: dict[str, list[str]] = {}
        for attribute in self.kb.attributes:
            examples.setdefault(attribute.id, []).append(attribute.question)
        for attribute_id, texts in phrasings.get("twenty_questions", {}).items():
            if attribute_id in self.kb.attribute_ids:
                examples.setdefault(attribute_id, []).extend(texts)
        for category, texts in phrasings.get("twenty_questions_categories", {}).items():
            if category in self.kb.categories:
                examples.setdefault(category_attribute(category), []).extend(texts)
        return examples

    @property
    def index(self):
        """The phrasing index, built on first use (loading the encoder takes ~2 s)."""
        if self._index is None:
            from lmrl.envs.dialogue.encoder import IntentIndex, default_encoder

            self._index = IntentIndex(self._examples, self._encoder or default_encoder(), self._keywords(),
                                      self.keyword_weight)
        return self._index

    # -- understanding -------------------------------------------------------------------

    def prefetch(self, questions: Sequence[str]) -> None:
        """Parse many questions with one batched embedding pass (results are cached)."""
        todo = [q for q in dict.fromkeys(questions) if q not in self._parses]
        senses = {q: _SENSE.match(clean(q)) for q in todo}
        plain = {q: f"{m.group('be')} {m.group('adjective') or m.group('feel')}?" for q, m in senses.items() if m}
        if plain:  # "Is it sweet to eat?" asks "Is it sweet?"
            self.prefetch(list(plain.values()))
            self._parses.update({q: self._parses[p] for q, p in plain.items()})
            todo = [q for q in todo if q not in plain]
        rules = [(q, self._rule_parse(q)) for q in todo]
        need = [q for q, parse in rules if parse is None or parse.kind == "match"]
        ranked = dict(zip(need, self.index.ranked_batch([clean(q) for q in need], k=8))) if need else {}
        for q, parse in rules:
            if parse is None or parse.kind == "match":
                parse = self._match(clean(q), ranked[q], parse.families if parse else ())
                if parse.kind == "attribute" and _POSSIBLE.search(clean(q)):  # "can it be venomous?": unsure is a yes
                    parse = attribute_parse([replace(t, possible=True) for t in parse.terms], parse.any_of, parse.score)
            if parse.kind == "attribute" and any(self._narrower(t.attribute, clean(q)) for t in parse.terms):
                parse = replace(parse, terms=tuple(self._widen(t, clean(q)) for t in parse.terms))
            if len(self._parses) > 500_000:
                self._parses.clear()
            self._parses[q] = parse

    def _match(self, text: str, ranked: list[tuple[str, float]], families: tuple[str, ...] = ()) -> Parse:
        """The attribute the embeddings rank best among those whose words fit the question (module docstring, 5):
        first one that shares a meaningful word with it, else a close paraphrase; among `families` if given."""
        if _OTHER_SUBJECT.search(text):
            return UNKNOWN_PARSE  # "Do fish live in it?", "Do cows eat it?": about something else
        text = _CONTRAST.sub("", text)  # "natural, not made in a factory": what follows ", not" restates the question
        words = _meaningful_words(text)
        if not words or _LIKING.search(text):
            return UNKNOWN_PARSE  # nothing to look up, or who likes it ("Do kids like it?"): not stored
        if _ORIGIN.search(text):
            ranked = [(intent, score) for intent, score in ranked if self._says_origin(intent)]
        unknown_words = words - self._vocabulary
        negated = bool(_NEGATION.search(text)) and not _OR_NOT.search(text)
        people = _PEOPLE_SUBJECT.search(text)
        pair = self._either(text, ranked, families, people) if " or " in text else None
        if pair is not None:
            return pair
        fitting = [(intent, score) for intent, score in ranked
                   if score >= self.threshold and self._fits(intent, words, families, people, text)]
        shared = [(i, s) for i, s in fitting if words & self._intent_words[i] and not unknown_words]
        close = [(i, s) for i, s in fitting if s >= self.paraphrase_threshold
                 and (words & self._intent_words[i] or self.kb.attribute(i).family not in _NAMED_FAMILIES)]
        # a word-sharing match wins unless a paraphrase ranks clearly higher ("Could it kill you?" is dangerous, not bites)
        best = shared[0] if shared and (not close or shared[0][1] >= close[0][1] - _SHARED_MARGIN) else (close or [None])[0]
        if best is not None:
            return self._matched(best, words, text, negated)
        return Parse("unknown", score=ranked[0][1] if ranked else 0.0)

    def _matched(self, best: tuple[str, float], words: set[str], text: str, negated: bool) -> Parse:
        """The parse of a question the embeddings matched to attribute `best`, where the question's words say
        whether that attribute answers it all, only its yes, or nothing."""
        intent, score = best
        family, extra = self.kb.attribute(intent).family, words - self._intent_words[intent]
        if extra & self._object_words:
            return UNKNOWN_PARSE  # "Is it used in soccer?": narrower than sports, about another thing
        if family == "place" and ({stem(w) for w in _PLACE_NOUN.findall(text)} - GENERIC_WORDS) - self._intent_words[intent]:
            return UNKNOWN_PARSE  # "in a closet" is not "in the living room", "at the beach" not "in a zoo"
        # its yes holds, its no says nothing: "worn outdoors" (where it is used, not where it is); a part asked with
        # a word it does not have or for a purpose ("finger slots", "a spot for each finger") is another part
        yes_only = (family == "place" and bool({stem(w) for w in _USE_VERBS.findall(text)} - self._intent_words[intent])) \
            or (family == "part" and (bool(extra - _HAVING) or bool(re.search(r"\bfor\s+(?!it\b)\w+", text))))
        return attribute_parse([Term(intent, negated=negated, yes_only=yes_only)], score=score)

    def _narrower(self, intent: str, text: str) -> bool:
        """Whether the attribute asks less than the question, so that its no is no answer: its question
        narrows the word ("too heavy to lift", "smell nice", "move by itself") and the question does not, or
        the question asks about a moment ("wet when you use it"), and the stored value is the usual state."""
        asked = set(tokens(text))
        narrowed = set(tokens(self.kb.attribute(intent).question)) & _NARROWING.keys()
        return bool(_CONDITION.search(text)) or any(not _NARROWING[w] & asked for w in narrowed)

    def _widen(self, term: Term, text: str) -> Term:
        """The wider attribute where the knowledge base has one ("heavy?" is not "too heavy to lift?"), else a
        yes-only reading of the narrower one."""
        wider = _WIDER.get(term.attribute)
        if wider and not _CONDITION.search(text):
            return replace(term, attribute=wider)
        return replace(term, yes_only=True)

    def _either(self, text: str, ranked, families, people) -> Parse | None:
        """"Is it electronic or electric?": one attribute for each side of the "or", either one true."""
        terms = []
        for side in text.partition(" or ")[::2]:
            words = _meaningful_words(side)
            for intent, score in ranked:
                if score >= self.threshold and words and self._fits(intent, words, families, people, text) \
                        and words <= self._intent_words[intent]:
                    terms.append(Term(intent))
                    break
        return attribute_parse(terms, any_of=True) if len(terms) == 2 else None

    def _says_origin(self, intent: str) -> bool:
        attribute = self.kb.attribute(intent)
        return any(_ORIGIN_WORDS.search(t) for t in (attribute.question, *(p for _, ps in attribute.verbs for p in ps)))

    def _fits(self, intent: str, words: set[str], families: tuple[str, ...], people, text: str = "") -> bool:
        """Whether an attribute may answer a question (`text`, cleaned) with these meaningful words."""
        attribute = self.kb.attribute(intent)
        own = self._intent_words[intent]
        if intent in _RULE_ONLY or (families and attribute.family not in families):
            return False
        if text and _COUNTED_PEOPLE.search(text) and intent not in self._about_many:
            return False
        if people and (attribute.family in _NOT_PEOPLE_FAMILIES or intent in self._it_only):
            return False  # "Do you ...?" asks what people do with it, not what it does
        if (words - own) & self._property_words:
            return False  # it names another property or object ("feathers" is not fur)
        if text and attribute.family != "part" and {stem(w) for w in _ON_ITS.findall(text)} - own:
            return False  # "Can you sit on its back?" is not whether you sit on it
        if text and attribute.family in _WHAT_IT_IS and {stem(w) for w in _ITS_NOUN.findall(text)} & own & self._property_words:
            return False  # "Can you change its clothes?" asks about its clothes, not whether it is (made of) clothes
        if text and _TOO_TO.search(text) and "too" not in tokens(attribute.question):
            return False  # "too heavy to lift with one hand" asks the opposite of "held in one hand"
        subject = {stem(w) for w in _THE_SUBJECT.findall(text)} - GENERIC_WORDS - _WHOLE_WORDS if text else set()
        if subject and attribute.family != "part" and not subject & own:
            return False  # "Is the top white with snow?" asks about its top, not its colour
        if text and intent.startswith("used_for_") and _PASSIVE.search(text):
            return False  # "Can it be carved?": done to it, where the attribute says what it does
        if any(_OPPOSITES.get(w) in own for w in words - own):
            return False  # it names the opposite ("wake" is not "sleep")
        shared = words & own
        if text and attribute.family in _NAMED_FAMILIES and shared and not _IS_FORM.search(text) \
                and shared <= {stem(w) for w in _ARTICLE_NOUN.findall(text)}:
            return False  # "Do you catch a ball with it?" is not "Is it a ball?"
        if text and shared and attribute.family in _VERB_FAMILIES \
                and shared <= {stem(w) for w in _AFTER_ARTICLE.findall(text) + _AFTER_PREPOSITION.findall(text)}:
            return False  # "Does it come on a roll?", "Is it put on rings?": the shared word is a noun there
        if text and shared and attribute.verbs and shared <= {stem(w) for w in _AFTER_ARTICLE.findall(text)}:
            return False  # "Does it live in a hole?" is not "Does it make holes?": the question's verb is another
        if attribute.family == "part":  # a part is asked by its noun, as something it has, not with a verb of doing
            nouns = {stem(w) for n in attribute.nouns for w in tokens(n)}
            said = words & nouns or {w for w in words if any(w.startswith(n) for n in nouns)}  # "furry": fur
            as_noun = said and said <= {stem(w) for w in _ARTICLE_NOUN.findall(text)}
            if said and said <= {stem(w) for w in _ON_ITS.findall(text)}:
                return False
            return bool(said) and not words & _ACTION_VERBS \
                and (not text or bool(_HAVE_FORM.search(text)) or (bool(_IS_FORM.search(text)) and not as_noun))
        return True

    def parse(self, question: str) -> Parse:
        """How the oracle reads a question (cached): an attribute question, a guess, or unknown."""
        if question not in self._parses:
            self.prefetch([question])
        return self._parses[question]

    def _rule_parse(self, question: str) -> Parse | None:
        """Guesses, unanswerable forms and the rule-read property forms; None = ask the embeddings."""
        text = clean(question)
        if not re.search(r"[a-z]", text):
            return UNKNOWN_PARSE
        remainder = strip_frame(text)
        obj = (self.kb.resolve(remainder) or self._resolve_all(remainder)) if remainder else None
        if obj is not None and not self._bare_colour(text, remainder):
            return Parse("guess", obj.name)
        if obj is not None:  # "Is it orange?": the colour, and a win if the orange is the secret
            colour = self.rules.parse(text, remainder)
            return Parse("attribute", colour.target, terms=colour.terms, guess=obj.name)
        if _WH_START.search(text) or _EXPERIENCE.search(text) or _HOW_IT_EATS.search(text):
            return UNKNOWN_PARSE
        parse = self.rules.parse(text, strip_frame(text, keep_commas=True))
        if parse is not None:
            return parse
        if remainder and self._names_something_else(text, remainder):
            return Parse("other")
        if remainder and re.search(r"\b(?:a|an)\s+" + re.escape(remainder) + r"\W*$", text) and self._qualified_guess(remainder):
            return UNKNOWN_PARSE
        if self._lists_guesses(text):
            return UNKNOWN_PARSE
        return None

    def _qualified_guess(self, remainder: str) -> bool:
        """"a hot dog", "a sea lion": words before an object's name that make it something else (or not)."""
        words = remainder.split()
        return len(words) >= 2 and any(self.kb.resolve(" ".join(words[i:])) for i in range(1, len(words)))

    def _resolve_all(self, remainder: str):
        """"bunny rabbit": every word names the same object."""
        found = {self.kb.resolve(w) for w in remainder.split()}
        return found.pop() if len(found) == 1 and None not in found else None

    def _bare_colour(self, text: str, remainder: str) -> bool:
        """"Is it orange?" asks a colour, "Is it an orange?" guesses the fruit."""
        return (self.rules.lookup("colour", remainder) is not None
                and not re.search(r"\b(?:a|an|the)\s+" + re.escape(remainder) + r"\b", text))

    def _names_something_else(self, text: str, remainder: str) -> bool:
        """A guess of a thing outside the knowledge base ("Is it a wolf?"): after the frame, "a"/"an"
        and one to three words, none of which the knowledge base or the example phrasings use."""
        words = remainder.split()
        if not 1 <= len(words) <= 3 or _NEGATION.search(remainder):
            return False
        if not re.search(r"\b(?:a|an)\s+" + re.escape(remainder) + r"\W*$", text):
            return False
        return not {stem(w) for w in tokens(remainder)} & self._vocabulary

    def _lists_guesses(self, text: str) -> bool:
        """Two or more objects offered at once ("a cat, a dog or a cow?", "is it a cat? is it a dog?")."""
        named = set()
        text = _EXAMPLES.split(text)[0]  # "part of nature, like a tree or a rock?" gives examples, not guesses
        for part in _LIST_SEPARATORS.split(text):
            remainder = strip_frame(part)
            obj = self.kb.resolve(remainder) if remainder else None
            if obj is not None:
                named.add(obj.name)
        return len(named) >= 2

    # -- answering -----------------------------------------------------------------------

    def value(self, secret: str, parse: Parse) -> bool | None:
        """The truth of what `parse` asks about object `secret`: True, False or None (not known)."""
        obj = self.kb.object(secret)
        if parse.kind == "guess":
            return parse.target == obj.name
        if parse.kind == "other":
            return False
        if parse.kind == "size":
            return compare_size(obj.size_m, parse)
        if parse.kind == "attribute":
            return combine([evaluate(self.kb, obj.name, t, self.rules.objects) for t in parse.terms], parse.any_of)
        return None

    def answer(self, secret: str, question: str) -> Reply:
        """The reply to `question` about the object `secret`: Yes, No, or the oracle's don't-know reply, and whether it
        was a correct guess."""
        parse = self.parse(question)
        if parse.guess and parse.guess == self.kb.object(secret).name:
            return Reply(YES, True, parse)
        value = self.value(secret, parse)
        # the attributes cannot tell, but one of the object's everyday facts does (yes-only); where an attribute is
        # unsure, only a fact in the same form ("Is it a plant?" is not "grows on low plants")
        if value is None and parse.kind != "guess" \
                and self.facts.says_yes(self.kb.object(secret).name, clean(question), parse.kind == "unknown"):
            value = True
        elif value is False and parse.kind == "attribute" and (_IT_SUBJECT.search(clean(question)) or (
                _YOU_WITH_IT.search(clean(question)) and parse.terms[0].noun)) \
                and self.facts.says_yes(self.kb.object(secret).name, clean(question), by_words=False):
            value = None  # the attribute says no, one of the object's own facts yes ("decorative"): not a no
        correct = parse.kind == "guess" and value is True
        return Reply(UNKNOWN if value is None else YES if value else NO, correct, parse)

    def answer_batch(self, secrets: Sequence[str], questions: Sequence[str]) -> list[Reply]:
        """`answer` for each (secret, question) pair, the questions parsed in one batch first."""
        self.prefetch(questions)
        return [self.answer(s, q) for s, q in zip(secrets, questions)]


@functools.lru_cache(maxsize=1)
def default_oracle() -> TwentyQuestionsOracle:
    """One oracle per process: its parse cache and phrasing index are shared by every env."""
    return TwentyQuestionsOracle()


class TwentyQuestionsEnv(QuestionGameEnv):
    """The game (module docstring).  `reset(options={"secret": "dog"})` fixes the object."""

    noun = "object"

    def __init__(self, max_questions: int = MAX_QUESTIONS, oracle=None):
        """`oracle`: None/"kb" (knowledge-grounded), {"kind": "lm", "model": ...} (`lm_oracle.py`),
        or an oracle object."""
        super().__init__(build_oracle(oracle, default_oracle, "twenty_questions"), max_questions)

    def secrets(self) -> list[str]:
        """The knowledge base's objects."""
        return [item.name for item in self.oracle.kb.objects]

    def resolve(self, name: str) -> str | None:
        """The object a name (or accepted variant) refers to, or None."""
        found = self.oracle.kb.resolve(name)
        return None if found is None else found.name
