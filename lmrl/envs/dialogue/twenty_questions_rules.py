"""What a 20 Questions property question asks, read by rule from the knowledge base's words.

The sentence encoder is good at paraphrase but blind to the one word that matters ("feathers"
vs "fur", "eat it" vs "eat with it"), and it always finds *some* nearest attribute.  So the
question forms that people use most are read by rule, from the nouns and verbs the knowledge
base gives each attribute (`knowledge.py`):

- class nouns: "Is it a mammal?", "a kind of bird", "a fruit or a vegetable?", "an animal with hooves?";
- parts: "Does it have feathers / four legs / a handle?", "Are there strings on it?";
- materials: "Is it made of wax?", "Is it wooden?" ("made of steel" is answered from "metal":
  no when it is not metal, unknown when it is);
- colours: "Is it orange?", "Is it black and white?", "Can it be green?";
- verbs: "Do you ride it?", "Does it bark?", "Do you cut paper with it?", "Is it used to hit nails?";
- places: "Would you find it in a garage?";
- sizes: "Is it bigger than a tennis ball?" from the objects' size ranges.

A question these forms recognise but whose key word the knowledge base does not know ("Does
it have a bell?", "Is it made of cheese?", "Is it used to make wine?") is `unknown`: the
oracle says "I can't answer that." instead of guessing.  A modifier the knowledge base cannot
check ("a *long* handle") makes a yes unknown but keeps a no.
"""

from __future__ import annotations

import re
from dataclasses import replace

from lmrl.envs.dialogue.knowledge import COUNTED_PARTS, KnowledgeBase
from lmrl.envs.dialogue.twenty_questions_parse import FRAME_WORDS, UNKNOWN_PARSE, Parse, Term, attribute_parse
from lmrl.envs.dialogue.twenty_questions_sizes import REFERENCES, size_parse, size_word
from lmrl.envs.dialogue.words import number, stem, stems, tokens

_KIND_OF = re.compile(r"^(?:(?:a|an|some)\s+)?(?:kind|type|sort|piece|item|form|variety|example)s?\s+of\s+")
_DETERMINERS = frozenset("a an the any some its it's their his her one lots lot of many much several few real actual "
                         "proper little other kind type sort".split())
# Objects of a verb that name nothing in particular ("cut things", "talk to others").
_ANY_THING = frozenset("thing things stuff something anything everything objects it them others other people someone "
                       "anyone with to else".split())
# Trailing clauses that set a condition, not a property: "when it's cold", "without anyone pushing it".
_REST_CONDITION = re.compile(r"\s*(?:,|\b(?:when|whenever|if|while|because|before|after|once|like|at once)\b).*$")
_FILLER_REST = re.compile(r"\b(?:at all|ever|often|usually|normally|much|a lot|really)\b")
_CONDITION = re.compile(r"\s*(?:,|\b(?:when|whenever|if|while|because|without|before|after|once|like|at once)\b).*$")
# Uses done "on" a device as with a tool ("play music on it"); other "with" verbs "on"/"in" it mean a surface or a
# vessel ("chop vegetables on it"), unless the attribute's own wordings use them so ("fry food in it").
# Verbs whose subject is who does them, never a tool: "does it drink milk?" is not "do you drink milk from it?".
_DOER_VERBS = frozenset(stem(w) for w in "drink eat wear sleep breathe".split())
_ON_DEVICE = frozenset(stem(w) for w in "play listen watch call phone text type record hear".split())
# What "shaped like / looks like a <noun>" says when the noun is a plain shape.
_SHAPE_NOUNS = {**dict.fromkeys(("ball", "circle", "sphere", "globe", "orb", "disc", "disk", "ring", "wheel"), "round"),
                **dict.fromkeys(("tube", "cylinder", "pipe", "can", "log"), "cylindrical"),
                **dict.fromkeys(("rectangle", "brick", "door"), "rectangular"), "square": "square", "pancake": "flat"}
_ADVERBS = frozenset("usually mostly mainly mostly typically normally generally often always all entirely partly "
                     "completely really very quite pretty totally".split())
_PEOPLE = r"(?:you|people|we|i|they|someone|somebody|anyone|one person|one|kids|children|a person|humans|adults|players|musicians|most people|u)"
_MODAL = r"(?:do|does|did|can|could|would|will|should|might|may)"
_IT = r"(?:it|they|this|that|this thing|the thing|the object|your object|the item)"
_HAVE = [re.compile(p) for p in (
    rf"^(?:\w+\s+)??{_MODAL}\s+{_IT}\s+(?:usually\s+|normally\s+|typically\s+|often\s+|always\s+)?"
    r"(?:have|has|come with|contain|possess)\s+(?!to\b)(?P<np>.+)$",
    rf"^(?:\w+\s+)??(?:has|have)\s+{_IT}\s+got\s+(?P<np>.+)$",
    rf"^(?:\w+\s+)??(?:is|are)\s+there\s+(?P<np>.+?)\s+(?:on|in|inside|attached to|to)\s+(?:it|them)\b.*$",
    rf"^(?:\w+\s+)??(?:is|are)\s+(?:{_IT}|its body|its skin|its body all)\s+(?:covered in|covered with|full of|filled with)\s+"
    r"(?P<np>.+)$",
)]
_NP_END = re.compile(r"\s+(?:on|in|at|underneath|under|that|which|you|to|when|inside|over|around|for|so|like|as|across|along|through|"
                     r"at all|or not|then|sticking|stretched|coming|going)\b.*$")
_MADE_OF = re.compile(r"\b(?:made|built|carved|formed|constructed|created)\s+(?:mostly\s+|mainly\s+|entirely\s+)?"
                      r"(?:of|from|out of|with)\s+(?P<np>.+)$")
_ROLE = re.compile(r"^(?:\w+\s+)??(?:do|does|would|will|could|can|might)\s+(?:(?:a|an|the|most|many|some)\s+)?(?P<role>[a-z ]+?)s?\s+"
                   r"(?:use|have|need|own|carry|keep|buy|work with|play with|play|wear)\s+(?:it|one|them|this)\b")
_MADE_INTO = [re.compile(p) for p in (
    r"\b(?:used|use it)\s+(?:to|for)\s+(?:make|making|produce|producing)\s+(?P<x>[a-z ]+?)$",
    r"\b(?:make|makes|made|making|produce|get|gets)\s+(?P<x>[a-z ]+?)\s+(?:from|out of|of)\s+(?:it|them)$",
    r"^(?:\w+\s+)??(?:is|are|do|does|can)\s+(?P<x>[a-z ]+?)\s+(?:made|produced)\s+(?:from|with|out of|of)\s+(?:it|them)$",
    r"\b(?:made|turned|made|processed)\s+into\s+(?P<x>[a-z ]+?)$",
)]
_PLACE_PRE_WORDS = FRAME_WORDS | frozenset(
    "down up out one do does did will usually often mostly typically normally commonly ever always sometimes likely also mainly people "
    "someone you find found see seen kept keep stored store live lives located grow grows grown sold buy bought used use "
    "belong belongs exist exists go goes put spotted spot run runs drive drives sit sits stay stays hang hangs stand "
    "stands kept".split())
# Verbs too general to say what a question is about ("come", "make"): never a reason to refuse.
_FUNCTION = frozenset("for of to with from by in on at as like than mostly mainly usually very really real actual".split())
_PARTICLE_WORDS = frozenset("up down back around about away off along again easily well".split())
_LIGHT_VERBS = frozenset(stem(w) for w in "come make give get go have be do produce take put keep let seem look need use"
                         .split())
_CLASS_AS = re.compile(r"^(?:class|classify|call|consider|count|describe|categori[sz]e|label|say)\s+(?:it|this|that)?\s*"
                       r"(?:as\s+|is\s+|'s\s+)?(?P<x>.+)$")
_POSSIBLE = re.compile(r"^(?:\w+\s+)??(?:can|could|might|may)\s+(?:it|they|this)\s+be\b|\b(?:ever|sometimes)\b")
_COLOUR_TAIL = re.compile(r"\s+(?:in colou?r|colou?red|colou?r|when (?:it's|it is|they're|they are) ripe|when ripe|"
                          r"on the outside|outside)$")


def _key(phrase: str) -> tuple[str, ...]:
    return tuple(stems(phrase))


def _plural_keys(noun: str) -> set[tuple[str, ...]]:
    """A noun's key, and its plural's where the stems differ ("movie" is "movi", "movies" "movy")."""
    key = _key(noun)
    return {key, _key(re.sub(r"ie$", "ies", noun))}


# Place attributes that ask more than "in a <place>" does (most homes, not some house).
_WEAKER_PLACE = frozenset({"found_in_most_homes"})

class PropertyRules:
    """Rule readings of property questions against one knowledge base (see the module docstring)."""

    def __init__(self, kb: KnowledgeBase, category_nouns: dict[str, str],
                 prepositions: dict[str, set[str]] | None = None):
        """`prepositions`: per attribute, "in"/"on" if its wordings use a "with" verb so ("fry food in it")."""
        self.kb = kb
        self.prepositions = prepositions or {}
        self._text = ""
        self.nouns: dict[str, dict[tuple[str, ...], str]] = {}
        for a in kb.attributes:
            for noun in a.nouns:
                self.nouns.setdefault(a.family, {})[_key(noun)] = a.id
                if a.family not in ("part", "material", "class", "place", "colour"):
                    # "does it have batteries / milk / a sharp edge?": nouns of the other families
                    self.nouns.setdefault("other-nouns", {})[_key(noun)] = a.id
        for noun, attribute in category_nouns.items():
            self.nouns.setdefault("class", {}).setdefault(_key(noun), attribute)
        self.verbs: dict[str, dict[tuple[str, ...], str]] = {}
        self.objects: dict[str, dict[tuple[str, ...], frozenset[str]]] = {}
        for a in kb.attributes:
            for form, phrases in a.verbs:
                for phrase in phrases:
                    self.verbs.setdefault(form, {})[_key(phrase)] = a.id
            self.objects[a.id] = {key: frozenset(names) for noun, names in a.objects for key in _plural_keys(noun)}
        self.materials = {_key(k): v for k, v in REFERENCES["material_kinds"].items()}
        self.it_heads = {key[0] for key in self.verbs.get("it", {})} - _LIGHT_VERBS
        self.words = {w for table in (*self.nouns.values(), *self.verbs.values()) for key in table for w in key}

    # -- entry point ---------------------------------------------------------------------

    def parse(self, text: str, remainder: str) -> Parse | None:
        """`text`: the cleaned question; `remainder`: it without frame words.  None: no rule applies."""
        self._text = text  # the whole question, for rules that read one clause of it
        looks = re.search(r"\b(?:looks?\s+like|resembles?|shaped\s+like|in\s+the\s+shape\s+of)\s+(?P<x>.+?)\W*$", text)
        nouns = looks and [re.sub(r"^(?:(?:a|an|the|little|small|big|large|tiny|giant|huge)\s+)*", "", x.strip())
                           for x in re.split(r"\bor\b|,", looks.group("x"))]
        shape = nouns and [_SHAPE_NOUNS.get(x) or self.lookup("shape", x) for x in nouns]
        if shape and all(shape) and len(set(shape)) == 1 and shape[0] in self.kb.attribute_ids:
            return attribute_parse([Term(shape[0])])  # "shaped like a ball or a circle": round
        if looks:  # what it looks like is not in the knowledge base, but for a person's shape
            person = re.fullmatch(r"(?:a |an |the )?(?:person|human|human being|man|woman|people|real person)", looks.group("x"))
            return attribute_parse([Term("looks_like_person")]) if person and "looks_like_person" in self.kb.attribute_ids \
                else UNKNOWN_PARSE
        parse = None
        for rule in (self._role, self._made_into, lambda t: size_parse(self.kb, t), self._part_property, self._have,
                     self._made_of, self._place, self._verb, lambda t: self._predicate(remainder)):
            parse = rule(text)
            if parse is not None:
                break
        if parse is not None and parse.kind == "attribute" and _POSSIBLE.search(text):  # "can it be made of gold?"
            parse = attribute_parse(tuple(replace(t, possible=True) for t in parse.terms), parse.any_of)
        return parse

    # -- "is it (a) X": class nouns, materials, colours -------------------------------------

    def _predicate(self, remainder: str) -> Parse | None:
        """"Is it a mammal?", "a fruit or a vegetable", "an animal with hooves", "wooden", "orange", "not a bird"."""
        text = re.sub(r"\s+or not$", "", remainder)
        found = _CLASS_AS.match(text)
        text = found.group("x") if found else text
        negated = text.startswith("not ")
        kind_of = bool(_KIND_OF.match(text.removeprefix("not ")))
        text = _KIND_OF.sub("", text.removeprefix("not ")).strip()
        if not kind_of and self.kb.resolve(text) is None and any(self.kb.resolve(p.strip()) for p in re.split(r"\bor\b|,", text)):
            return None  # "a cat or a dog": guesses, not the classes "a kind of cat" names
        with_part = re.match(r"^(?P<head>.+?)\s+(?:with|that has|that have|which has|having)\s+(?P<np>.+)$", text)
        if with_part and self.lookup("class", with_part.group("head")) and not self.lookup("class", text):
            parts = self._noun_phrase(with_part.group("np"), "part")
            if parts and not parts[1]:
                return attribute_parse((Term(self.lookup("class", with_part.group("head"))), *parts[0]))
            return UNKNOWN_PARSE
        purpose = re.match(r"^(?P<head>.+?)\s+(?:for|used for|meant for)\s+(?P<vp>.+)$", text)
        if purpose and self.lookup("class", purpose.group("head")) and not self.lookup("class", text):  # "a utensil for eating", "a tool for cutting"
            use = self._with_verb(purpose.group("vp"))
            if use is not None:
                return attribute_parse(dict.fromkeys((Term(self.lookup("class", purpose.group("head"))), *use.terms)))
        text, where = self._place_qualifier(text)
        colour = _COLOUR_TAIL.sub("", text)
        inside = re.match(r"^(?P<c>\w+)\s+(?:on the\s+)?(?:inside|underneath|in the middle)$", text)
        if inside and self.lookup("colour", inside.group("c")):
            return UNKNOWN_PARSE  # the knowledge base holds the colour you see, not the inside
        for family, phrase in (("class", text), ("colour", colour), ("material", text)):
            found = self._noun_phrase(phrase, family, strict=True)
            if found:
                terms, any_of = found
                if negated and len(terms) == 1:
                    terms = (Term(terms[0].attribute, negated=True),)
                if where and not any_of:  # "in a house" is weaker than "in most homes": that no says nothing
                    terms = (*terms, Term(where, yes_only=where in _WEAKER_PLACE))
                return attribute_parse(terms, any_of)
        if where:
            return None
        modified = re.fullmatch(r"(?:an?\s+)?(?P<mod>[a-z]+)\s+(?P<noun>[a-z]+(?:\s+[a-z]+)?)", text)
        if modified and modified.group("mod") not in _FUNCTION and self.lookup("class", modified.group("noun")):
            noun = self.lookup("class", modified.group("noun"))
            mod = self.lookup("class", modified.group("mod"))
            if mod and mod != noun:  # "a pet animal": yes when both hold ("a toy animal" may be neither's)
                return attribute_parse([Term(mod, yes_only=True), Term(noun, yes_only=True)])
            # "a percussion instrument": a no holds, a yes cannot be checked
            return attribute_parse([Term(noun, restricted=True)])
        return self._material(text) or size_word(text)

    def _place_qualifier(self, text: str) -> tuple[str, str]:
        """"a star in the sky" -> ("a star", found_in_sky): a class with where it is found (both must hold)."""
        found = re.match(r"^(?P<head>.+?)\s+(?:found\s+|that lives\s+|living\s+)?(?:in|on|at)\s+(?:the\s+|a\s+|an\s+)?"
                         r"(?P<place>[a-z ]+)$", text)
        if found and not re.match(r"(?:outside|inside)$", found.group("place")):
            attribute = self.lookup("place", found.group("place"))
            if attribute:
                return found.group("head"), attribute
        return text, ""

    def _material(self, phrase: str) -> Parse | None:
        words = [w for w in tokens(phrase) if w not in _ADVERBS]
        key = tuple(stem(w) for w in words)
        if key in self.materials:
            attribute = self.lookup("material", self.materials[key])
            return attribute_parse([Term(attribute, restricted=True)]) if attribute else None
        return None

    # -- rules on the whole question -------------------------------------------------------

    def _part_property(self, text: str) -> Parse | None:
        """"Is the frame metal?", "Are the blades made of steel?": no if it has no such part; yes if the whole
        object is made of that (or has that colour); otherwise unknown (a car is metal, its tyres are not)."""
        found = re.match(r"^(?:\w+\s+)??(?:is|are)\s+(?:the|its)\s+(?P<part>[a-z ]+?)\s+(?:made\s+(?:of|from|out of)\s+)?"
                         r"(?P<x>[a-z -]+?)\W*$", text)
        part = found and self.lookup("part", found.group("part"))
        if not part:
            return None
        x = found.group("x")
        kind = REFERENCES["material_kinds"].get(x, x)
        quality = self.lookup("material", kind) or self.lookup("colour", x) or (
            self._material(x).target if self._material(x) else None)
        if not quality:
            return None
        return attribute_parse([Term(part), Term(quality, yes_only=True)])

    def _have(self, text: str) -> Parse | None:
        for pattern in _HAVE:
            found = pattern.match(text.rstrip("?!. "))
            if found:
                np = _NP_END.sub("", found.group("np"))
                # "a spot for each finger", "holes for your legs": a part for a purpose the knowledge base does not
                # store; it holds a plain "has spots", whose no says nothing about a place for fingers
                purpose = bool(re.search(r"\s+for\b", found.group("np")[len(np):]))
                if re.match(r"^(?:something|anything|stuff|a thing|things)\b", np):
                    example = re.search(r"\blike\s+(?P<x>.+)$", found.group("np"))  # "something ..., like a handle?"
                    parsed = example and self._noun_phrase(example.group("x"), "part")
                    return attribute_parse(*parsed) if parsed else None
                for family in ("part", "material", "other-nouns"):
                    parsed = self._noun_phrase(np, family)
                    if parsed is not None:
                        terms, any_of = parsed
                        if purpose and family == "part":
                            terms = tuple(replace(t, yes_only=True) for t in terms)
                        return attribute_parse(terms, any_of)
                return UNKNOWN_PARSE
        return None

    def _made_of(self, text: str) -> Parse | None:
        found = _MADE_OF.search(text.rstrip("?!. "))
        if not found:
            return None
        np = re.split(r",|\blike\b|\bsuch as\b", found.group("np"))[0]
        parsed = self._noun_phrase(np, "material")
        if parsed is None:
            return self._material(np) or UNKNOWN_PARSE
        return attribute_parse(*parsed)

    def _place(self, text: str) -> Parse | None:
        """"Would you find it in a garage?": only locating words may come before the place."""
        matches = list(re.finditer(r"\b(?:in|on|at|inside|into|near|under|around|out of|from)\s+(?P<np>[a-z][a-z' -]*?)"
                                   r"(?=\s+(?:in|on|at|inside|near|under|around|from)\b|[?.!,]|$)", text))
        if not matches or any(w not in _PLACE_PRE_WORDS for w in tokens(text[:matches[0].start()])):
            return None
        for found in matches:
            if re.match(r"(?:the\s+)?(?:outside|inside)\b", found.group("np")) and found.group(0).startswith("on"):
                continue  # "green on the outside" is where on it, not where it is
            words = [w for w in tokens(found.group("np")) if w not in _DETERMINERS and w not in ("your", "my", "our",
                                                                                                 "most", "every", "the")]
            for end in range(len(words), 0, -1):
                attribute = self.lookup("place", " ".join(words[:end]))
                if attribute:
                    return attribute_parse([Term(attribute)])
        return None

    def _made_into(self, text: str) -> Parse | None:
        """"Is it used to make wine?", "Can you make fries from it?": foods made from it; unknown for others."""
        for pattern in _MADE_INTO:
            found = pattern.search(text.rstrip("?!. "))
            if found:
                products = [" ".join(w for w in tokens(x) if w not in _DETERMINERS) for x in re.split(r"\s+or\s+", found.group("x"))]
                if any(p in ("things", "stuff", "something", "music", "noise", "sound", "noises", "sounds") for p in products):
                    return None
                attributes = [self.lookup("other-nouns", p) for p in products]
                if all(a and self.kb.attribute(a).family in ("food", "life") for a in attributes):
                    return attribute_parse([Term(a) for a in dict.fromkeys(attributes)], any_of=True)
                return UNKNOWN_PARSE
        return None

    def _for_noun(self, phrase: str) -> Parse | None:
        """"Is it used for art / sports / music?": the class or category a noun names."""
        words = " ".join(w for w in tokens(phrase) if w not in _DETERMINERS)
        attribute = self.lookup("class", words)
        return attribute_parse([Term(attribute)]) if attribute else None

    def _role(self, text: str) -> Parse | None:
        """"Would a farmer have one?", "Do builders use it?": yes when the object belongs to that trade."""
        found = _ROLE.match(text)
        role = found and re.sub(r"\b(?:a|an|the)\b", "", found.group("role")).strip()
        attribute = role and (REFERENCES["roles"].get(role) or REFERENCES["roles"].get(role.rstrip("s")))
        return attribute_parse([Term(attribute, yes_only=True)]) if attribute else None

    def _verb(self, text: str) -> Parse | None:
        """"Is it used to cut?", "Do you ride it?", "Do you fry eggs in it?", "Does it bark?", "Can it cut?"."""
        text = text.rstrip("?!. ")
        played = re.search(r"\bplayed\s+by\s+(?P<how>\w+)", text)  # "is it played by striking it?"
        if played:
            attribute = self.verbs.get("object", {}).get(_key(played.group("how")))
            return attribute_parse([Term(attribute)]) if attribute else UNKNOWN_PARSE
        for pattern in (rf"\b(?:use|used|using)\s+{_IT}\s+(?:to|for)\s+(?P<vp>.+)$",
                        rf"\b(?:is|are)\s+{_IT}\s+(?:\w+\s+)?used\s+(?:to|for)\s+(?P<vp>.+)$",
                        rf"\b(?:is|are)\s+{_IT}\s+(?:for|meant for|made for|good for)\s+(?P<vp>.+)$"):
            found = re.search(pattern, text)
            if found:
                return self._with_verb(found.group("vp")) or self._for_noun(found.group("vp")) or Parse(
                    "match", families=("use", "category", "class"))
        found = re.match(rf"^(?:\w+\s+)??{_MODAL}\s+{_PEOPLE}\s+(?P<vp>.+?)\s+(?:it|them|one)(?P<rest>(?:\s+\S+)*)$", text)
        if found:
            return self._people_verb(found.group("vp"), found.group("rest").strip(), text.startswith(("can ", "could ")))
        found = (re.match(rf"^(?:\w+\s+)??{_MODAL}\s+{_IT}\s+(?:ever\s+|usually\s+|normally\s+|often\s+)?(?P<vp>.+)$", text)
                 or re.match(rf"^(?:\w+\s+)??(?:is|are)\s+{_IT}\s+able\s+to\s+(?P<vp>.+)$", text))
        return self._it_verb(found.group("vp")) if found and not found.group("vp").startswith("be ") else None

    def _it_verb(self, vp: str) -> Parse | None:
        """"Does it <vp>": what it does ("bark", "eat carrots"), or what it is for ("cut paper")."""
        vp = _CONDITION.sub("", vp).strip() or vp
        chunks = [c for c in re.split(r"\s+or\s+", vp) if c.strip()]
        if len(chunks) > 1:  # "does it shine or make light?"
            parses = [self._it_verb(c) for c in chunks]
            if all(p is not None and p.kind == "attribute" for p in parses):
                return attribute_parse([p.terms[0] for p in parses], any_of=True)
            return UNKNOWN_PARSE if any(p is not None and p.kind == "unknown" for p in parses) else None
        plain = " ".join(w for w in vp.split() if w not in _PARTICLE_WORDS)
        attribute = self.verbs.get("it", {}).get(_key(vp)) or self.verbs.get("it", {}).get(_key(plain))
        if attribute:
            # "grow in the ground": true of what grows underground, and of lettuce too
            weaker = attribute == "grows_underground" and not re.search(r"\bunder", self._text)
            return attribute_parse([Term(attribute, yes_only=weaker)])
        words = tokens(vp)  # none in "does it $$?"
        use = self._with_verb(vp) if words and stem(words[0]) not in _DOER_VERBS else None
        if use is not None and (not use.terms[0].noun or tuple(use.terms[0].noun.split()) in self.objects[use.target]):
            return use
        around = re.match(r"^(?P<verb>.+?)\s+(?:on|in|through|across|over|under)\s+(?:the\s+)?(?:land|ground|water|sea|air|sky|"
                          r"wind|earth|floor)$", plain)
        if around and self.verbs.get("it", {}).get(_key(around.group("verb"))):  # "can it walk on land?"
            return attribute_parse([Term(self.verbs["it"][_key(around.group("verb"))])])
        degree = re.match(r"^(?P<verb>.+?)\s+(?:very\s+|really\s+|so\s+)?(?:far|fast|quickly|high|well|long distances|"
                          r"a long way|for long)$", plain)
        if degree and self.verbs.get("it", {}).get(_key(degree.group("verb"))):  # "can it fly far?": a no holds
            return attribute_parse([Term(self.verbs["it"][_key(degree.group("verb"))], restricted=True)])
        vp = plain
        words = tokens(vp)
        if not words:  # punctuation only ("does it ?!"): nothing to read
            return None
        where = re.match(r"^(?P<verb>.+?)\s+(?:in|on|through|across|around|under)\s+(?:the\s+|a\s+|an\s+)?(?P<place>[a-z ]+)$", vp)
        if where and self.lookup("place", where.group("place")) and self.verbs.get("it", {}).get(_key(where.group("verb"))):
            return attribute_parse([Term(self.verbs["it"][_key(where.group("verb"))])])  # "can it swim in water?"
        on_part = re.match(r"^(?:walk|run|roll|move|stand|travel|ride|go around|get around)\s+on\s+(?P<np>.+)$", vp)  # "walk on legs"
        if on_part:
            parts = self._noun_phrase(on_part.group("np"), "part")
            if parts:
                return attribute_parse(*parts)
        if stem(words[0]) == "eat" and len(words) > 1:  # "does it eat carrots / chickens?"
            food = self.kb.resolve(" ".join(w for w in words[1:] if w not in _DETERMINERS))
            if food is not None and food.category in ("Fruits", "Vegetables", "Nature"):
                return attribute_parse([Term("eats_plants")])
            if food is not None and food.category == "Animals":
                return attribute_parse([Term("eats_meat")])
        if words[0] in ("hold", "holds", "contain", "contains") and len(words) > 1:  # "does it hold staples?": a part
            parts = self._noun_phrase(" ".join(words[1:]), "part")
            if parts:
                return attribute_parse(*parts)
        if stem(words[0]) in self.it_heads:
            return UNKNOWN_PARSE  # something it does, said in a way the knowledge base does not hold
        return use

    def _people_verb(self, vp: str, rest: str, possible: bool = False) -> Parse | None:
        """"Do you <vp> it <rest>": a verb people do to it ("ride", "sit on"), or with it ("fry eggs in").
        `possible` ("can you throw it?"): an unsure answer counts as yes."""
        table = self.verbs.get("object", {})
        rest = re.sub(r"\s+it$", "", _FILLER_REST.sub("", _REST_CONDITION.sub("", rest)).strip())  # "before eating", "at all"
        place = re.fullmatch(r"(?:on|in|at|around)\s+(?:a|an|the|your)?\s*(?P<place>[a-z ]+)", rest)
        if place and table.get(_key(vp)) and self.lookup("place", place.group("place")):  # "can you ride it on a road?"
            return attribute_parse([Term(table[_key(vp)], possible=possible), Term(self.lookup("place", place.group("place")))])
        for phrase in ((vp + " " + rest).strip(), vp if not rest else None):
            attribute = phrase and table.get(_key(phrase))
            if attribute:
                return attribute_parse([Term(attribute, possible=possible)])
        if re.match(r"^with\s+(?:your|my|our|their|his|her)\b", rest) and table.get(_key(vp)):
            return UNKNOWN_PARSE  # "can you play it with your fingers?": how, which the knowledge base does not hold
        with_part = re.match(r"^with\s+(?P<np>.+)$", rest)
        parts = with_part and table.get(_key(vp)) and self._noun_phrase(with_part.group("np"), "part")
        if parts and not parts[1]:  # "do you play it with a bow?": played and has a bow
            return attribute_parse([Term(table[_key(vp)]), *parts[0]])
        manner = re.match(r"^by\s+(?P<how>\w+)(?:\s+(?:it|into it|on it|in it))?$", rest)
        if manner:  # "do you play it by blowing (into it)?" asks how: blow into it
            for phrase in (manner.group("how") + " into", manner.group("how")):
                attribute = table.get(_key(phrase))
                if attribute:
                    return attribute_parse([Term(attribute)])
        if re.match(r"^to\s+(?:play|use|make|get)\b", rest) and table.get(_key(vp)):
            return attribute_parse([Term(table[_key(vp)])])  # "do you hit it to play it?": what you do is hit it
        if rest.startswith("with ") and table.get(_key(vp)):
            return UNKNOWN_PARSE  # "do you play it with a bow?": how, which the knowledge base does not hold
        where = re.match(r"^(?P<pre>(?:on|around|in)\s+(?:your|my|the)\s+)(?P<alts>.+\s+(?:or|and)\s+.+)$", rest)
        if where:  # "do you wear it on your hand or wrist?"
            found = [table.get(_key(f"{vp} {where.group('pre')}{alt}")) for alt in re.split(r"\s+(?:or|and)\s+", where.group("alts"))]
            if all(found):
                return attribute_parse([Term(a) for a in dict.fromkeys(found)], any_of=True)
        if re.match(r"^(?:on|around|in|over|under)\s+(?:your|my|our|their|the)\b", rest) and table.get(_key(vp)):
            return UNKNOWN_PARSE  # "do you wear it on your top half?": a place on the body the knowledge base does not hold
        if rest and table.get(_key(vp)):
            return UNKNOWN_PARSE  # "do people wear it outside?": a qualifier the knowledge base does not hold
        found = re.match(r"^(?P<verb>.+?)\s+(?P<prep>with|in|on|into|at|from|off|under|inside|onto|to)$", vp)
        if found and not rest:
            prep, parse = found.group("prep"), self._with_verb(found.group("verb"))
            if parse is not None and (prep in ("with", "into") or prep in self.prepositions.get(parse.target, ())
                                      or (prep == "on" and stem(found.group("verb").split()[0]) in _ON_DEVICE)):
                return parse  # "fry food in it", "play music on it": done with it
            if parse is not None or prep == "with":
                return UNKNOWN_PARSE  # "chop vegetables on it" (a surface, not a tool), "catch a ball with it"
            if stem(found.group("verb").split()[0]) in self.words:
                return UNKNOWN_PARSE  # a known verb used another way ("eat at it")
        return None

    def _with_verb(self, vp: str) -> Parse | None:
        """"cut paper", "cutting", "hit nails", "make music", "draw or write": "with" verbs and their objects."""
        vp = _CONDITION.sub("", vp)
        chunks = [c for c in re.split(r"\s+or\s+|\s+and\s+", vp) if c.strip()]
        if len(chunks) > 1:
            parses = [self._with_verb(c) for c in chunks]
            if all(parses):
                return attribute_parse([p.terms[0] for p in parses], any_of=" or " in vp)
            return None
        words = tokens(vp)
        table = self.verbs.get("with", {})
        for end in range(len(words), 0, -1):
            attribute = table.get(tuple(stem(w) for w in words[:end]))
            if attribute:
                rest = [w for w in words[end:] if w not in _DETERMINERS and w not in _ANY_THING and w != "on"]
                if not rest:
                    return attribute_parse([Term(attribute)])
                return attribute_parse([Term(attribute, noun=" ".join(stem(w) for w in rest))])
        return None

    # -- noun phrases -------------------------------------------------------------------------

    def lookup(self, family: str, phrase: str) -> str | None:
        """The attribute a noun phrase names in a family ("feathers" in "part" -> has_feathers), or None."""
        return self.nouns.get(family, {}).get(_key(phrase))

    def _noun_phrase(self, phrase: str, family: str, strict: bool = False):
        """(terms, any_of) for "feathers", "four legs", "a long handle", "fur or hair", "arms and legs";
        None when a noun is not one of the family's.  `strict`: every word must belong to a noun."""
        phrase = re.sub(r"\b(?:an?|the|some|any)\b", " ", phrase)
        any_of = bool(re.search(r"\bor\b", phrase))
        chunks = [c for c in re.split(r",|\bor\b|\band\b|&|/", phrase) if c.strip()]
        terms = []
        for chunk in chunks:
            words = [w for w in tokens(chunk) if w not in _DETERMINERS and w not in _ADVERBS]
            count, compare = None, "="
            bound = re.match(r"^(?:(more|over|fewer|less|under)\s+than|(at least)|(at most)|(over|under))\s+", chunk.strip())
            if bound:
                word = next(b for b in bound.groups() if b)
                compare = ">" if word in ("more", "over") else "<" if word in ("fewer", "less", "under") else \
                    ">=" if word == "at least" else "<="
                words = [w for w in tokens(chunk[bound.end():]) if w not in _DETERMINERS]
            if words and number(words[0]) is not None and (len(words) > 1):
                count = number(words.pop(0))
            found = None
            for start in range(len(words)):
                attribute = self.lookup(family, " ".join(words[start:]))
                if attribute:
                    found = (attribute, words[:start])
                    break
                kind = REFERENCES["material_kinds"].get(" ".join(words[start:])) if family == "material" else None
                if kind and self.lookup("material", kind):  # "steel": answered from "metal", a yes made unknown
                    found = (self.lookup("material", kind), words[:start] + ["(" + kind + ")"])
                    break
            if found is None:
                return None
            attribute, modifiers = found
            own = {w for noun in self.kb.attribute(attribute).nouns for w in tokens(noun)}
            modifiers = [m for m in modifiers if m not in own]
            if strict and modifiers:
                return None
            # "finger slots": a modifier that is itself a part names another thing (a glove's finger slots are
            # not what "slots" means to the knowledge base): neither its yes nor its no answers
            compound = family == "part" and any(self.lookup("part", m) not in (None, attribute) for m in modifiers)
            part = next((p for p, a in COUNTED_PARTS.items() if a == attribute), "") if count is not None else ""
            if count is not None and not part:
                modifiers = modifiers + [str(count)]
            terms.append(Term(attribute, part=part, count=count or 0, restricted=bool(modifiers), compare=compare,
                              yes_only=compound))
        return (tuple(terms), any_of) if terms else None


