"""Car Dealer: the agent is the seller; a simulated buyer with a hidden budget and preferences
reacts to what it says, negotiates, and ends with an explicit accept or reject.

The seller speaks first.  The history opens with `Start\\n`; then seller and buyer lines
alternate, one per line, without speaker labels (reference §8).  The conversation ends with the
buyer's decision, which the buyer always states in its last line ("Deal. I'll take the Toyota
RAV4 for $29,500." or a refusal); after 50 utterances (25 seller lines and 25 buyer lines) the
buyer's 25th line is a decision in any case.

**Reward** (terminal only): on a sale, LMRL-Gym's "fancy" reward `price / ((budget + msrp) / 2)`
(about 1 for selling a car priced like the buyer's budget at its sticker price); **0 when
nothing is sold**.  The original gave `-(budget - msrp) / msrp` for no sale, which is positive
whenever the car costs more than the budget, so a seller could be paid for driving a buyer away
(reference §11.8); a no-sale is worth nothing here.  `reward="revenue"` gives `price / 1000`
instead (the original PPO script's mode).

**The buyer** (`RuleBuyer`) has a profile as in the original (personality, preferred brand,
type, 1–4 features, budget in {10k, 30k, 50k, 70k, 90k}) and hidden per-conversation values
drawn at reset: how far above its budget it would stretch (0–20%), its patience (seller lines
before it decides, by personality), how low it opens and how fast it concedes, how much rudeness
it takes.  What it would pay for a car depends on the fit (brand, type, and the wanted features
the seller has pointed out that the car really has), on persuasion (up to +5%) and on rudeness
(−3% each), and is capped at 105% of the MSRP.  It answers questions about its budget (shaded
down by personality) and preferences, asks for prices, counters offers below what it would pay
and concedes towards it, accepts a price at or below its current counter or the seller's
acceptance of its own offer, and walks away when insulted too often or when its patience ends
without an acceptable price.  The seller's lines are read by `parse_seller`
(`lmrl/envs/dialogue/car_catalogue.py`); any string is a legal action, and lines it cannot read cost a
turn of patience.

`oracle=lm` replaces the rule buyer with any HF model prompted in the original buyer format
(`LMBuyer`), whose decision is read from the original `Output: Decision=...` line.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from lmrl.envs.base import History, StepResult, Text, TextEnv
from lmrl.envs.dialogue.car_catalogue import Car, Catalogue, SellerUtterance, load_catalogue, parse_seller

PROMPT = "Start\n"
MAX_UTTERANCES = 50
EVAL_BUYERS = 100
REWARD_MODES = ("fancy", "revenue")


@dataclass(frozen=True)
class Traits:
    """How a personality negotiates.  Ranges are drawn uniformly at reset."""

    patience: tuple[int, int]  # seller lines the buyer listens to before deciding
    tolerance: int  # rude seller lines taken before walking out
    anchor: float  # first counter-offer as a fraction of what it would pay
    rounds: int  # counter-offers until it offers all it would pay
    honesty: float  # stated budget as a fraction of the true one
    hostile: bool  # answers with insults
    chatty: bool  # volunteers preferences on a greeting, adds small talk


TRAITS = {
    "abusive": Traits((6, 12), 4, 0.74, 5, 0.80, True, False),
    "angry": Traits((5, 10), 3, 0.78, 4, 0.85, True, False),
    "insulting": Traits((6, 12), 4, 0.75, 5, 0.80, True, False),
    "polite": Traits((10, 18), 1, 0.86, 4, 0.95, False, True),
    "respectful": Traits((10, 18), 1, 0.86, 4, 0.95, False, True),
    "rude": Traits((6, 12), 3, 0.78, 4, 0.85, True, False),
    "sarcastic": Traits((8, 14), 2, 0.80, 4, 0.90, False, False),
    "talkative": Traits((14, 22), 2, 0.85, 3, 1.00, False, True),
    "toxic": Traits((5, 10), 4, 0.72, 6, 0.80, True, False),
    "uncommunicative": Traits((5, 9), 2, 0.82, 4, 0.90, False, False),
}


@dataclass(frozen=True)
class BuyerProfile:
    """What the original's buyer prompt states: `Personality: rude. Prefers a BMW SUV with backup
    camera, sunroof. Budget: $50,000`."""

    personality: str
    brand: str
    type: str
    features: tuple[str, ...]
    budget: int

    def describe(self, catalogue: Catalogue) -> str:
        """The profile as the original's buyer prompt states it (personality, preferred brand, type and features,
        budget)."""
        kind = catalogue.types[self.type]["display"]
        return (f"Personality: {self.personality}. Prefers {catalogue.brand_with_article(self.brand)} {kind} "
                f"with {', '.join(self.features)}. Budget: ${self.budget:,}")

    def to_dict(self) -> dict:
        """The profile as plain JSON values (what `reset(options={"buyer": ...})` accepts back)."""
        return {**asdict(self), "features": list(self.features)}

    @classmethod
    def from_dict(cls, data: dict, catalogue: Catalogue) -> BuyerProfile:
        """A profile from `reset(options={"buyer": {...}})`; every bad field is named with the valid values."""
        if not hasattr(data, "get"):
            raise ValueError(f"buyer must be a mapping with keys personality, brand, type, features, budget; got "
                             f"{data!r}")
        unknown = set(data) - {"personality", "brand", "type", "features", "budget"}
        if unknown:
            raise ValueError(f"unknown buyer field(s) {sorted(unknown)}; valid: personality, brand, type, features, "
                             "budget")
        missing = {"personality", "brand", "type", "features", "budget"} - set(data)
        if missing:
            raise ValueError(f"buyer profile is missing {sorted(missing)}")

        def check(name, value, valid):
            if value not in valid:
                raise ValueError(f"buyer {name} {value!r} is not valid; valid: {sorted(valid)}")
            return value

        features = data["features"]
        if isinstance(features, str) or not 1 <= len(features) <= len(catalogue.features):
            raise ValueError(f"buyer features must be a list of 1-{len(catalogue.features)} features, got {features!r}")
        budget = data["budget"]
        if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not 1_000 <= budget <= 1_000_000:
            raise ValueError(f"buyer budget must be a number of dollars in [1000, 1000000], got {budget!r}")
        return cls(check("personality", data["personality"], catalogue.personalities),
                   check("brand", data["brand"], catalogue.brands), check("type", data["type"], catalogue.types),
                   tuple(dict.fromkeys(check("feature", f, catalogue.features) for f in features)), int(budget))

    @classmethod
    def sample(cls, rng: random.Random, catalogue: Catalogue) -> BuyerProfile:
        """A uniformly drawn profile: personality, brand, type, one to four features and a budget of the catalogue."""
        features = rng.sample(sorted(catalogue.features), rng.randint(1, 4))
        return cls(rng.choice(catalogue.personalities), rng.choice(sorted(catalogue.brands)),
                   rng.choice(sorted(catalogue.types)), tuple(features), rng.choice(catalogue.budgets))


@dataclass
class BuyerTurn:
    """The buyer's line and, when it decides, the decision."""

    text: str
    decision: str | None = None  # "accept" | "reject"
    car: str | None = None
    price: int | None = None
    msrp: int | None = None


def round_to(value: float, step: int = 500) -> int:
    return int(step * round(value / step))


def money(value: int) -> str:
    return f"${value:,}"


@dataclass
class _Negotiation:
    """The state of the talk about one car."""

    car: Car
    ask: int | None = None  # the seller's latest price for it
    offer: int | None = None  # the buyer's latest counter-offer
    counters: int = 0
    told_features: set = field(default_factory=set)


class RuleBuyer:
    """The simulated buyer (module docstring).  `respond(line)` reads one seller line."""

    def __init__(self, profile: BuyerProfile, catalogue: Catalogue, rng: random.Random):
        self.profile, self.catalogue, self.rng = profile, catalogue, rng
        self.traits = TRAITS[profile.personality]
        self.stretch = rng.uniform(1.0, 1.2)
        self.patience = rng.randint(*self.traits.patience)
        self.anchor = min(0.95, max(0.6, self.traits.anchor + rng.uniform(-0.03, 0.03)))
        self.stated_budget = round_to(profile.budget * self.traits.honesty * rng.uniform(0.95, 1.0), 1000)
        self.rude_count = self.persuasion_count = self.turns = 0
        self.revealed: list[str] = []  # preference items told so far ("type", "brand", "features")
        self.talk: _Negotiation | None = None
        self.decided: BuyerTurn | None = None

    # -- valuation -------------------------------------------------------------------------------
    def fit(self, talk: _Negotiation) -> float:
        """How well the car under discussion suits the buyer, a factor of what the buyer will pay for it: 0.8,
        plus 0.1 for the preferred brand, 0.1 for the preferred type, and up to 0.05 for wanted features the seller
        has named."""
        car, p = talk.car, self.profile
        wanted = set(p.features)
        shown = len(wanted & talk.told_features & set(car.features)) / len(wanted)
        return 0.8 + 0.1 * (car.brand == p.brand) + 0.1 * (p.type in car.types) + 0.05 * shown

    def considers(self, car: Car) -> bool:
        """A buyer only buys a car of its brand or of its type."""
        return car.brand == self.profile.brand or self.profile.type in car.types

    def willing_to_pay(self, talk: _Negotiation) -> int:
        """The most this buyer would pay for the car under discussion, now."""
        mood = max(0.7, 1.0 - 0.03 * self.rude_count)
        persuaded = 1.0 + min(0.05, 0.01 * self.persuasion_count)
        value = self.profile.budget * self.stretch * self.fit(talk) * persuaded * mood
        return int(min(value, talk.car.msrp * 1.05))

    def counter_offer(self, talk: _Negotiation) -> int:
        """The buyer's next counter: from `anchor` x what it would pay up to all of it in `rounds` steps."""
        limit = self.willing_to_pay(talk)
        share = self.anchor + (1 - self.anchor) * min(1.0, talk.counters / self.traits.rounds)
        offer = min(limit, round_to(limit * share))
        return max(offer, talk.offer or 0) if (talk.offer or 0) <= limit else offer

    # -- one turn --------------------------------------------------------------------------------
    def respond(self, line: str, last_chance: bool = False) -> BuyerTurn:
        """The reply to one seller line; `last_chance` forces a decision (the utterance cap)."""
        if self.decided is not None:
            return self.decided
        self.turns += 1
        u = parse_seller(line, self.catalogue)
        parts: list[str] = []
        if u.rude:
            self.rude_count += 1
            if self.rude_count > self.traits.tolerance:
                return self._reject(self._pick("insulted"))
            parts.append(self._pick("retort"))
        if u.persuasion:
            self.persuasion_count += 1
        self._follow_car(u)
        if u.greeting and not u.rude:
            parts.append(self._pick("greet"))
            if self.traits.chatty and not (u.asks_preferences or u.cars):
                parts.append(self._preferences(all_at_once=True))
        done = self._negotiate(u, parts)
        if done is not None:
            return done
        if u.asks_budget:
            parts.append(self._pick("budget").format(b=money(self.stated_budget)))
        if u.asks_preferences:
            parts.append(self._preferences(all_at_once=self.profile.personality != "uncommunicative"))
        if not parts:
            parts.append(self._pick("confused" if u.empty or not _understood(u) else "go_on"))
        if last_chance or self.turns >= self.patience:
            return self._final()
        return BuyerTurn(" ".join(p[0].upper() + p[1:] for p in parts))

    def _follow_car(self, u: SellerUtterance) -> None:
        if u.cars:
            car = self.catalogue.car(u.cars[-1])
            if self.talk is None or self.talk.car.id != car.id:
                self.talk = _Negotiation(car)
        if self.talk is not None and u.features:
            self.talk.told_features.update(u.features)

    def _negotiate(self, u: SellerUtterance, parts: list[str]) -> BuyerTurn | None:
        """Prices, discounts and acceptances; returns the final turn when a deal is made."""
        talk = self.talk
        if talk is None:
            if u.price is not None or u.accepts_offer or u.discount_amount is not None:
                parts.append(self._pick("which_car"))
            return None
        if u.accepts_offer and talk.offer is not None and self.considers(talk.car) and (u.price is None or u.price <= talk.offer):
            return self._accept(talk, u.price if u.price is not None else talk.offer)
        ask = u.price
        if ask is None and u.discount_amount is not None and talk.ask is not None:
            ask = talk.ask - u.discount_amount
        if ask is None:
            if u.cars:
                parts.append(self._car_comment(talk))
            elif u.accepts_offer:
                parts.append(self._pick("no_offer_yet"))
            elif u.discount and talk.ask is not None:
                parts.append(self._pick("how_much_lower"))
            return None
        talk.ask = ask
        if not self.considers(talk.car):
            parts.append(self._pick("not_my_taste").format(car=talk.car.display, want=self._want()))
            return None
        limit = self.willing_to_pay(talk)
        threshold = self.counter_offer(talk)
        if ask <= max(threshold, talk.offer or 0):
            return self._accept(talk, ask)
        if ask <= limit and self.turns >= self.patience:
            return self._accept(talk, ask)
        talk.counters += 1
        offer = min(self.counter_offer(talk), ask - 500)
        talk.offer = max(offer, talk.offer or 0)
        key = "too_expensive" if ask > 1.3 * limit else "counter"
        parts.append(self._pick(key).format(car=talk.car.display, offer=money(talk.offer), ask=money(ask)))
        return None

    def _car_comment(self, talk: _Negotiation) -> str:
        car, p = talk.car, self.profile
        if car.msrp > 1.4 * p.budget * self.stretch:
            return self._pick("over_budget").format(car=car.display)
        if not self.considers(car):
            return self._pick("not_my_taste").format(car=car.display, want=self._want())
        return self._pick("how_much").format(car=car.display)

    def _want(self) -> str:
        p = self.profile
        return f"{self.catalogue.brand_with_article(p.brand)} {self.catalogue.types[p.type]['display']}"

    def _preferences(self, all_at_once: bool) -> str:
        p = self.profile
        items = ["type", "brand", "features"]
        if not all_at_once:
            todo = [i for i in items if i not in self.revealed] or items
            item = todo[0]
            self.revealed.append(item)
            return {"type": f"{self.catalogue.types[p.type]['display'].capitalize()}.",
                    "brand": f"{self.catalogue.brand_display(p.brand)}.",
                    "features": f"{_join(map(feature_name, p.features))}."}[item]
        self.revealed = items
        return self._pick("preferences").format(want=self._want(), features=_join(map(feature_name, p.features)))

    def _final(self) -> BuyerTurn:
        """Out of patience (or at the utterance cap): buy at the standing price if it is acceptable."""
        talk = self.talk
        if talk is not None and talk.ask is not None and self.considers(talk.car) and talk.ask <= self.willing_to_pay(talk):
            return self._accept(talk, talk.ask)
        return self._reject(self._pick("leave"))

    def _accept(self, talk: _Negotiation, price: int) -> BuyerTurn:
        text = self._pick("accept").format(car=talk.car.display, price=money(price))
        self.decided = BuyerTurn(text, "accept", talk.car.id, price, talk.car.msrp)
        return self.decided

    def _reject(self, text: str) -> BuyerTurn:
        self.decided = BuyerTurn(text, "reject", self.talk.car.id if self.talk else None, None,
                                 self.talk.car.msrp if self.talk else None)
        return self.decided

    def _pick(self, key: str) -> str:
        style = "hostile" if self.traits.hostile else self.profile.personality
        options = LINES.get((key, style)) or LINES[(key, "any")]
        return self.rng.choice(options)


def feature_name(feature: str) -> str:
    """A feature as written in a sentence ("Apple CarPlay")."""
    return "Apple CarPlay" if feature == "apple carplay" else feature


def _understood(u: SellerUtterance) -> bool:
    return any((u.cars, u.brands, u.types, u.features, u.price is not None, u.discount_amount is not None,
                u.asks_budget, u.asks_preferences, u.accepts_offer, u.persuasion, u.discount, u.rude, u.greeting))


def _join(items: Sequence[str]) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


# The buyer's lines: (situation, style) -> variants; style "any" is the fallback.
LINES: dict[tuple[str, str], tuple[str, ...]] = {
    ("greet", "any"): ("Hi.", "Hello.", "Hi there."),
    ("greet", "hostile"): ("Yeah, hi.", "Let's skip the small talk.", "Hi. Make it quick."),
    ("greet", "polite"): ("Hello, thank you for having me.", "Good to meet you.", "Hi, thanks for your time."),
    ("greet", "respectful"): ("Hello, nice to meet you.", "Good day to you.", "Hello, thanks for seeing me."),
    ("greet", "talkative"): ("Hi! What a day, the traffic on the way here was unreal.",
                             "Hello! I've been reading car reviews all week, so I'm excited to be here.",
                             "Hey there! My old car finally gave up, so here I am."),
    ("greet", "uncommunicative"): ("Hi.", "Hey.", "Hello."),
    ("greet", "sarcastic"): ("Oh, a warm welcome. How original.", "Hi. Let the sales pitch begin."),
    ("preferences", "any"): ("I'm looking for {want} with {features}.", "I want {want}, ideally with {features}.",
                             "I'd like {want} that has {features}."),
    ("preferences", "hostile"): ("I want {want} with {features}. Don't waste my time.",
                                 "{want} with {features}. Got it?"),
    ("preferences", "talkative"): ("I've always wanted {want}, and it has to have {features}, my neighbor has "
                                   "those and won't stop talking about them.",
                                   "Well, I'm after {want} with {features}. Can't live without those."),
    ("budget", "any"): ("I can spend about {b}.", "My budget is around {b}.", "I'd like to stay near {b}."),
    ("budget", "hostile"): ("{b}, and not a cent more.", "{b}. Don't try to squeeze me."),
    ("budget", "uncommunicative"): ("About {b}.", "{b}."),
    ("budget", "talkative"): ("I've saved up about {b}, though my partner would rather I spent less.",
                              "Around {b}, I've been putting money aside for two years."),
    ("how_much", "any"): ("How much is the {car}?", "What's the price on the {car}?", "And what does the {car} cost?"),
    ("how_much", "hostile"): ("Just tell me the price of the {car}.", "How much for the {car}? Quickly."),
    ("how_much", "uncommunicative"): ("Price?", "How much?"),
    ("over_budget", "any"): ("The {car} is way over my budget.", "I can't afford the {car}.",
                             "The {car}? That's far more than I want to spend."),
    ("not_my_taste", "any"): ("The {car} isn't really what I'm after. I want {want}.",
                              "Hmm, a {car}? I was hoping for {want}."),
    ("counter", "any"): ("{ask} is too much for the {car}. I could do {offer}.", "How about {offer}?",
                         "I'd pay {offer} for the {car}.", "Can you do {offer}?"),
    ("counter", "hostile"): ("{ask}? Ridiculous. {offer}.", "{offer}, take it or I walk.",
                             "No way. {offer} is what it's worth."),
    ("counter", "polite"): ("Thank you, but {ask} is a bit high for me. Would {offer} be possible?",
                            "I appreciate it, but could you do {offer}?"),
    ("counter", "sarcastic"): ("{ask}? Sure, and I'll throw in my house. {offer}.",
                               "Oh, only {ask}? How generous. I'll give you {offer}."),
    ("counter", "uncommunicative"): ("{offer}.", "{offer}?"),
    ("too_expensive", "any"): ("{ask} is way out of my range. The most I'd think about is {offer}.",
                               "That's much more than I can pay. {offer}, maybe."),
    ("too_expensive", "hostile"): ("{ask}?! Are you out of your mind? {offer}.",),
    ("which_car", "any"): ("Which car are you talking about?", "Wait, for which car?"),
    ("no_offer_yet", "any"): ("A deal on what? We haven't agreed on a price.", "I haven't made an offer yet."),
    ("how_much_lower", "any"): ("How much lower can you go?", "What would the price be then?"),
    ("go_on", "any"): ("Okay.", "I see.", "Go on.", "Alright, what else?"),
    ("go_on", "hostile"): ("Get to the point.", "So what?", "And?"),
    ("go_on", "uncommunicative"): ("Okay.", "Hm.", "Sure."),
    ("go_on", "talkative"): ("Oh, interesting! Tell me more.", "I see, I see. What else should I know?"),
    ("confused", "any"): ("Sorry, what do you mean?", "I don't follow.", "What?"),
    ("confused", "hostile"): ("What are you even saying?", "Make sense or I'm leaving."),
    ("retort", "any"): ("Excuse me? There's no need to talk to me like that.", "That's rude."),
    ("retort", "hostile"): ("Watch your mouth.", "Talk to me like that again and I'm gone.",
                            "You're not so great yourself."),
    ("insulted", "any"): ("I'm not buying from someone who talks to me like that. Goodbye.",
                          "That's it, I'm leaving. No deal."),
    ("accept", "any"): ("Deal. I'll take the {car} for {price}.", "Alright, {price} for the {car}. I'll take it.",
                        "Okay, it's a deal: the {car} for {price}."),
    ("accept", "hostile"): ("Fine. {price} for the {car}. Deal.", "Whatever, I'll take the {car} for {price}."),
    ("leave", "any"): ("I don't think this is going to work. No deal, thanks.",
                       "I'll keep looking elsewhere. No sale.", "Sorry, I'm going to pass."),
    ("leave", "hostile"): ("Forget it. I'm out.", "Waste of my time. No deal."),
}


class CarDealerEnv(TextEnv):
    """Sell a car to a simulated buyer.  `reset(options={"buyer": profile})` fixes the buyer;
    `info["buyer"]` reports it.  `oracle`: None / "kb" / "rules" = `RuleBuyer`, or an `oracle=lm`
    mapping (module docstring)."""

    def __init__(self, oracle=None, max_utterances: int = MAX_UTTERANCES, reward: str = "fancy",
                 eval_buyers: int = EVAL_BUYERS, catalogue: Catalogue | None = None):
        if reward not in REWARD_MODES:
            raise ValueError(f"reward must be one of {REWARD_MODES}, got {reward!r}")
        if int(max_utterances) < 2 or int(max_utterances) % 2:
            raise ValueError(f"max_utterances must be an even number >= 2 (seller and buyer alternate), "
                             f"got {max_utterances}")
        self.catalogue = catalogue or load_catalogue()
        self.max_utterances, self.reward_mode, self.eval_buyers = int(max_utterances), reward, int(eval_buyers)
        self.lm = _build_lm_buyer(oracle)
        self._rng = random.Random()
        self.done, self.history, self.buyer, self.profile = True, (), None, None
        self.utterances = 0

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[History, dict]:
        """Start a conversation with the buyer `options["buyer"]` (a profile dict, as `info["buyer"]` reports it), else
        a buyer drawn from the env's RNG."""
        if seed is not None:
            self._rng.seed(seed)
        options = dict(options or {})
        unknown = set(options) - {"buyer"}
        if unknown:
            raise ValueError(f"unknown reset option(s) {sorted(unknown)}; valid: 'buyer'")
        buyer_rng = random.Random(self._rng.random())  # drawn first: the same seed, the same buyer behaviour
        if options.get("buyer") is None:
            self.profile = BuyerProfile.sample(self._rng, self.catalogue)
        else:
            self.profile = BuyerProfile.from_dict(options["buyer"], self.catalogue)
        self.buyer = (self.lm.start(self.profile, self.catalogue) if self.lm is not None
                      else RuleBuyer(self.profile, self.catalogue, buyer_rng))
        self.done, self.utterances = False, 0
        self.history = (Text(PROMPT, False),)
        return self.history, {"buyer": self.profile.to_dict()}

    @staticmethod
    def prefetch_batch(envs: Sequence[CarDealerEnv], actions: Sequence[str]) -> None:
        """LM buyers answer a batched rollout turn in one generate call; rule buyers need nothing."""
        lm_envs = [(e, a) for e, a in zip(envs, actions) if e.lm is not None and not e.done]
        if lm_envs:
            lm_envs[0][0].lm.prefetch([(e.buyer, e.history, a, e.utterances + 2 >= e.max_utterances)
                                       for e, a in lm_envs])

    def step(self, action: str) -> StepResult:
        """One seller line, answered by the buyer.  The episode ends when the buyer decides, at the latest at the
        `max_utterances`-th utterance.  A sale is rewarded by its price over the mean of the buyer's budget and the
        car's MSRP (`reward="revenue"`: the price in thousands); no sale gets 0."""
        if self.done:
            raise RuntimeError("step() called on a finished episode; call reset() first")
        line = _one_line(action)
        self.utterances += 2
        last_chance = self.utterances >= self.max_utterances
        turn = (self.lm.respond(self.buyer, self.history, action, last_chance) if self.lm is not None
                else self.buyer.respond(line, last_chance))
        self.history = self.history + (Text(action, True), Text(_one_line(turn.text) + "\n", False))
        self.done = turn.decision is not None
        sold = turn.decision == "accept" and turn.price is not None
        reward = self._reward(turn) if sold else 0.0
        info = {"buyer": self.profile.to_dict(), "utterances": self.utterances, "decision": turn.decision,
                "success": sold, "car": turn.car, "price": turn.price if sold else None,
                "msrp": turn.msrp, "invalid": not line}
        return StepResult(self.history, reward, self.done, False, info)

    def _reward(self, turn: BuyerTurn) -> float:
        if self.reward_mode == "revenue":
            return turn.price / 1000.0
        msrp = turn.msrp if turn.msrp else turn.price
        return turn.price / ((self.profile.budget + msrp) / 2.0)

    def eval_reset_options(self) -> list[dict]:
        """`eval_buyers` fixed buyers (the original's eval used 100 conversations)."""
        rng = random.Random("lmrl-car-dealer-eval")
        return [{"buyer": BuyerProfile.sample(rng, self.catalogue).to_dict()} for _ in range(self.eval_buyers)]


def _one_line(text: str) -> str:
    """A seller/buyer line as it goes into the history: one line, surrounding space trimmed."""
    return " ".join(text.split("\n")).strip()


# ---------------------------------------------------------------------------------------------
# oracle=lm: an HF model as the buyer, in the original's prompt format.

OUTPUT_PATTERN = re.compile(r"Output:\s*Decision\s*=\s*(?P<d>Accept|Reject)\w*(?:\s*MSRP\s*=\s*\$?(?P<msrp>[\d,.]+))?"
                            r"(?:\s*Buy\s*Price\s*=\s*\$?(?P<price>[\d,.]+))?", re.IGNORECASE)


def _build_lm_buyer(spec):
    """None (the rule buyer) for "kb"/"rules"/None, an `LMBuyer` as is, or one built from `{kind: lm, ...}`."""
    if isinstance(spec, LMBuyer):
        return spec
    from lmrl.envs.dialogue.lm_oracle import lm_spec_from_config

    lm_spec = lm_spec_from_config(spec)
    return None if lm_spec is None else LMBuyer(lm_spec)


@dataclass
class _LMBuyerState:
    profile: BuyerProfile
    catalogue: Catalogue
    pending: dict = field(default_factory=dict)  # (history length, action) -> generated line


class LMBuyer:
    """A language model plays the buyer.  Its input is the original's: `Start\\n`, the profile line,
    then the utterances one per line; its next line is the reply.  A line containing
    `Output: Decision=Accept MSRP=$X Buy Price=$Y` (or `=Reject`) ends the talk, and that string is
    removed from the visible line.  At the utterance cap the model is re-prompted with
    `Output: Decision=`; an unreadable decision there counts as no sale (reward 0), as in the original."""

    def __init__(self, spec, generator=None):
        from lmrl.envs.dialogue.lm_oracle import load_generator

        self.spec = spec
        self.generator = generator or load_generator(spec)
        self.max_new_tokens = spec.max_new_tokens or 48

    def start(self, profile: BuyerProfile, catalogue: Catalogue) -> _LMBuyerState:
        """A new conversation's state for the buyer `profile`."""
        return _LMBuyerState(profile, catalogue)

    @staticmethod
    def _prompt(state: _LMBuyerState, history: History, action: str, force: bool) -> str:
        lines = [t.text.rstrip("\n") for t in history[1:]] + [_one_line(action)]
        body = PROMPT + state.profile.describe(state.catalogue) + "\n" + "".join(f"{x}\n" for x in lines)
        return body + ("Output: Decision=" if force else "")

    def prefetch(self, requests) -> None:
        """Generate the buyer's replies to a batch of (state, history, seller line, last chance) requests in one pass;
        each is kept for the `respond` call that asks for it."""
        todo = [(state, self._prompt(state, history, action, force), (len(history), action, force))
                for state, history, action, force in requests]
        outputs = self.generator.generate([p for _, p, _ in todo], self.max_new_tokens)
        for (state, _, key), text in zip(todo, outputs):
            state.pending[key] = text

    def respond(self, state: _LMBuyerState, history: History, action: str, last_chance: bool) -> BuyerTurn:
        """The buyer's turn after the seller's `action`: its visible line and, when the reply carries the original's
        `Output: Decision=...` line, the decision and price. On the last chance a reply without a decision is a
        reject."""
        key = (len(history), action, last_chance)
        if key not in state.pending:
            self.prefetch([(state, history, action, last_chance)])
        text = state.pending.pop(key)
        if last_chance:
            text = "Output: Decision=" + text
        found = OUTPUT_PATTERN.search(text)
        visible = OUTPUT_PATTERN.sub("", text).strip() if found else text
        if found is None:
            if last_chance:
                return BuyerTurn(visible or "...", "reject")
            return BuyerTurn(visible or "...")
        msrp = _amount(found.group("msrp"))
        price = _amount(found.group("price"))
        if found.group("d").lower() == "accept" and price is not None:
            return BuyerTurn(visible or "Deal.", "accept", None, price, msrp)
        return BuyerTurn(visible or "No deal.", "reject", None, None, msrp)


def _amount(text: str | None) -> int | None:
    if not text:
        return None
    try:
        value = float(text.replace(",", "").rstrip("."))
    except ValueError:
        return None
    return int(value) if math.isfinite(value) and value > 0 else None
