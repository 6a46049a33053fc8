"""Car Dealer dataset: scripted sellers of graded quality talking to the rule buyer.

The original's conversations were written by gpt-3.5-turbo playing both sides (19k claimed,
4,399 public).  Ours are played against the env's buyer (`lmrl/envs/dialogue/car_dealer.py`), so every
buyer line and every reward comes from the simulator the policy is evaluated on.  Sellers:

- **expert**: greets and asks for preferences and budget in one line (asking again when the
  buyer is terse), picks the catalogue car with the best expected reward for what it was told
  (fit to brand, type and features; price near what the stated budget suggests), pitches it with
  the wanted features it really has and a price above the buyer's likely limit, adds a selling
  point to every line, concedes a third of the gap to each counter-offer and accepts the buyer's
  offer once its counters stall.  Its mean return over the 100 eval buyers is the normalization max.
- **noisy**: each line, with `p_slip` it does something unhelpful (a random car, an off-topic or
  rude line, an arbitrary price), otherwise what the expert would; it skips questions with
  `p_skip_questions`, prices randomly between 90% and 140% of the MSRP and accepts the buyer's
  counter with `p_accept_counter`.
- **random**: lines drawn from every kind (greetings, pitches of random cars at random prices,
  persuasion, rudeness, acceptances, small talk).

Wordings come from template banks whose every line `parse_seller` reads as meant (a test checks
each one); prices are written in varied forms ($31,500 / 31.5k / 31,500 dollars / words).

Per-episode RNG seeded by `(seed, index)`: deterministic, and a smaller dataset is a prefix of
a larger one.  CLI: `python -m data_gen.car_dealer --episodes 19000 --out PATH` writes JSONL and
prints the statistics next to Table 1's; `--best` prints the expert's mean return over the eval buyers.
"""

from __future__ import annotations

import functools
import math
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from data_gen import question_games
from data_gen.mix import with_overrides
from lmrl.envs.base import Episode, Text
from lmrl.envs.dialogue.car_catalogue import Car, Catalogue, _find, load_catalogue
from lmrl.envs.dialogue.car_dealer import CarDealerEnv
from lmrl.envs.dialogue.car_dealer_game import SELLER_FLOOR, VIEW_LINES, CarDealerGame

DEFAULT_EPISODES = 19_000
PAPER_ROW = {"size": 19_000, "avg_length": 16.5, "std_length": 3.61, "success_rate": 0.53,
             "avg_return": 0.562, "std_return": 0.422}

GREET = ("Hello! Welcome to our dealership.", "Hi there, thanks for stopping by!", "Good morning! Welcome in.",
         "Hey, welcome! Nice to meet you.", "Good afternoon, welcome to the showroom.")
OPENING = ("Hello! What kind of car are you looking for, and what budget do you have in mind?",
           "Welcome! What type of vehicle are you interested in, and how much are you looking to spend?",
           "Hi there! Which brand and features do you want, and what's your budget?",
           "Good morning! Tell me what you're looking for and roughly what you'd like to spend.")
ASK_PREFERENCES = ("What kind of car are you looking for?", "What type of vehicle are you interested in?",
                   "Do you have a brand in mind?", "Which features matter most to you?",
                   "What are you shopping for today?", "Is there a particular make you prefer?")
ASK_BUDGET = ("What's your budget?", "How much are you looking to spend?", "What price range are you considering?",
              "Roughly how much would you like to spend?", "What would you be willing to pay?")
PITCH = ("I think the {car} is perfect for you: it has {features}.", "Take a look at the {car}, it comes with "
         "{features}.", "The {car} has {features}, just what you asked for.", "You'd love the {car}. It's got "
         "{features}.")
PITCH_BARE = ("Take a look at the {car}.", "We have a {car} on the lot right now.", "Check out the {car}.",
              "The {car} is a nice option.")
PRICE = ("It's yours for {p}.", "The price is {p}.", "I can offer it to you for {p}.", "We're asking {p} for it.",
         "I could let it go for {p}.", "It's listed at {p}.")
CONCEDE = ("I can come down to {p}.", "The best I can do is {p}.", "How about we meet at {p}?",
           "I can't go lower than {p}.", "Let's say {p}.", "For you, {p}.")
ACCEPT = ("Deal!", "You've got a deal.", "{p} it is.", "Alright, it's a deal at {p}.", "That works for me, deal.",
          "Agreed.")
PERSUADE = ("It's incredibly reliable and holds its value.", "It comes with a 5 year warranty.",
            "It's one of our best sellers.", "The safety ratings are excellent.",
            "This price won't last, the sale ends this weekend.", "It comes with free maintenance for two years.",
            "Resale value on these is great.", "It's a great car for the money.")
RUDE = ("Take it or leave it.", "Stop wasting my time.", "Are you stupid or something?",
        "Quit whining and buy the car.", "You obviously know nothing about cars.", "Get lost if you can't afford it.")
SMALL_TALK = ("Nice weather today, isn't it?", "Let me check something in the back.", "Give me a second.",
              "Our coffee machine is broken again.", "I just started working here.", "Okay.")
_MONEY = re.compile(r"\$(\d[\d,]*)")


@dataclass(frozen=True)
class SellerMix:
    """Who sells in each conversation, and how the noisy seller slips (see the docstring)."""

    # Tuned to Table 1's success rate 0.53 and return 0.562.
    p_expert: float = 0.25
    p_noisy: float = 0.4
    p_slip: float = 0.2
    p_skip_questions: float = 0.4
    p_accept_counter: float = 0.35
    p_rude: float = 0.2  # share of slips that are rude

    def __post_init__(self):
        question_games.check_mix(self)


def write_price(rng: random.Random, price: int) -> str:
    """A price in one of the ways people write it."""
    style = rng.random()
    if style < 0.55 or price % 100:
        return f"${price:,}"
    if style < 0.75:
        return f"{price / 1000:g}k" if price % 500 == 0 else f"${price:,}"
    if style < 0.9:
        return f"{price:,} dollars"
    return f"${price}"


class Seller:
    """One scripted seller for one conversation; `line(buyer_text)` is its next line.  `floor`: the share of the
    car's MSRP below which the expert never sells (None: no floor, as in the single-agent dataset, where it accepts a
    stalled offer at any price)."""

    def __init__(self, kind: str, catalogue: Catalogue, rng: random.Random, mix: SellerMix,
                 floor: float | None = None):
        self.kind, self.cat, self.rng, self.mix, self.floor = kind, catalogue, rng, mix, floor
        self.brand = self.type = None
        self.features: tuple[str, ...] = ()
        self.budget: int | None = None
        self.car: Car | None = None
        self.ask: int | None = None
        self.offers: list[int] = []
        self.asked_budget = self.asked_prefs = 0
        self.turn = 0
        self.skip_questions = kind == "noisy" and rng.random() < mix.p_skip_questions

    # -- reading the buyer -------------------------------------------------------------------
    def hear(self, text: str, last_line: str) -> None:
        if not text:
            return
        brands = _find(self.cat.brand_pattern, text)
        types = _find(self.cat.type_pattern, text)
        features = _find(self.cat.feature_pattern, text)
        self.brand = brands[0] if brands else self.brand
        self.type = types[-1] if types else self.type
        self.features = tuple(dict.fromkeys(self.features + features))
        amounts = [int(a.replace(",", "")) for a in _MONEY.findall(text)]
        if amounts and self.car is None and ("budget" in last_line or "spend" in last_line or "pay" in last_line):
            self.budget = amounts[-1]
        elif amounts and self.car is not None and self.ask is not None:
            self.offers.append(amounts[-1])

    # -- speaking ----------------------------------------------------------------------------
    def line(self) -> str:
        self.turn += 1
        if self.kind == "random":
            return self._random_line()
        if self.kind == "noisy" and self.rng.random() < self.mix.p_slip:
            return self._slip()
        return self._good_line()

    def _good_line(self) -> str:
        rng = self.rng
        if self.turn == 1 and not self.skip_questions:
            self.asked_prefs = self.asked_budget = 1
            return rng.choice(OPENING)
        if not self.skip_questions and (self.brand is None or self.type is None) and self.asked_prefs < 3:
            self.asked_prefs += 1
            return rng.choice(ASK_PREFERENCES)
        if not self.skip_questions and self.budget is None and self.asked_budget < 2:
            self.asked_budget += 1
            return rng.choice(ASK_BUDGET)
        if self.car is None:
            self.car = self._choose_car()
            self.ask = self._first_price()
            return self._pitch(self.car, self.ask)
        if self.offers:
            return self._negotiate()
        return f"{rng.choice(PERSUADE)} {rng.choice(PRICE).format(p=write_price(rng, self.ask))}"

    def _expected_limit(self, car: Car) -> float:
        budget = self.budget / 0.9 if self.budget else 50_000
        fit = 0.8 + 0.1 * (car.brand == self.brand) + 0.1 * (self.type in car.types)
        if self.features:
            fit += 0.05 * len(set(self.features) & set(car.features)) / len(self.features)
        return min(budget * 1.1 * fit, car.msrp * 1.05)

    def _choose_car(self) -> Car:
        if self.kind == "noisy" and self.skip_questions:
            return self.rng.choice(self.cat.cars)
        budget = self.budget / 0.9 if self.budget else 50_000
        liked = [c for c in self.cat.cars if c.brand == self.brand or self.type in c.types] or self.cat.cars
        return max(liked, key=lambda c: self._expected_limit(c) / ((budget + c.msrp) / 2))

    def _first_price(self) -> int:
        if self.kind == "noisy":
            return int(round(self.car.msrp * self.rng.uniform(0.9, 1.4), -2))
        return int(round(self._expected_limit(self.car) * 1.12, -2))

    def _pitch(self, car: Car, price: int) -> str:
        rng = self.rng
        shown = [f for f in self.features if f in car.features]
        text = (rng.choice(PITCH).format(car=car.display, features=_join(shown)) if shown
                else rng.choice(PITCH_BARE).format(car=car.display))
        return f"{text} {rng.choice(PRICE).format(p=write_price(rng, price))}"

    def _negotiate(self) -> str:
        rng, offer = self.rng, self.offers[-1]
        if self.kind == "noisy":
            if rng.random() < self.mix.p_accept_counter:
                return rng.choice(ACCEPT).format(p=write_price(rng, offer))
            self.ask = max(offer, int(round(self.ask * rng.uniform(0.9, 1.0), -2)))
            return rng.choice(CONCEDE).format(p=write_price(rng, self.ask))
        floor = None if self.floor is None else math.ceil(int(self.floor * self.car.msrp) / 100) * 100
        if floor is not None and offer < floor:
            # Below its floor it concedes a third of the gap, never past the floor, and holds there.
            self.ask = max(floor, int(round(self.ask - (self.ask - offer) / 3, -2)))
            return f"{rng.choice(PERSUADE)} {rng.choice(CONCEDE).format(p=write_price(rng, self.ask))}"
        stalled = len(self.offers) >= 2 and self.offers[-1] - self.offers[-2] < 0.02 * offer
        if stalled or len(self.offers) >= 5 or self.ask - offer <= 500:
            return rng.choice(ACCEPT).format(p=write_price(rng, offer))
        self.ask = int(round(self.ask - (self.ask - offer) / 3, -2))
        return f"{rng.choice(PERSUADE)} {rng.choice(CONCEDE).format(p=write_price(rng, self.ask))}"

    def _slip(self) -> str:
        rng = self.rng
        draw = rng.random()
        if draw < self.mix.p_rude:
            return rng.choice(RUDE)
        if draw < 0.6:
            return rng.choice(SMALL_TALK)
        car = rng.choice(self.cat.cars)
        if draw < 0.8:
            return rng.choice(PITCH_BARE).format(car=car.display)
        if self.car is not None:
            self.ask = int(round(self.car.msrp * rng.uniform(0.8, 1.5), -2))
            return rng.choice(PRICE).format(p=write_price(rng, self.ask))
        return rng.choice(GREET)

    def _random_line(self) -> str:
        rng = self.rng
        kind = rng.choice(("greet", "ask", "pitch", "price", "persuade", "rude", "accept", "talk"))
        car = rng.choice(self.cat.cars)
        price = write_price(rng, int(round(rng.uniform(10_000, 120_000), -2)))
        return {"greet": lambda: rng.choice(GREET), "ask": lambda: rng.choice(ASK_PREFERENCES + ASK_BUDGET),
                "pitch": lambda: rng.choice(PITCH_BARE).format(car=car.display),
                "price": lambda: f"The {car.display} is {price}.", "persuade": lambda: rng.choice(PERSUADE),
                "rude": lambda: rng.choice(RUDE), "accept": lambda: rng.choice(ACCEPT).format(p=price),
                "talk": lambda: rng.choice(SMALL_TALK)}[kind]()


def _join(items) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def play(env: CarDealerEnv, rng: random.Random, kind: str, mix: SellerMix, options: dict | None = None,
         seed: int | None = None) -> Episode:
    """One conversation by a seller of `kind` ("expert", "noisy", "random")."""
    seed = seed if seed is not None else rng.randrange(2**31)
    history, info = env.reset(seed=seed, options=options)
    seller = Seller(kind, env.catalogue, rng, mix)
    turns, rewards, result, last_line = list(history), [0.0], None, ""
    while result is None or not result.terminated:
        last_line = seller.line()
        result = env.step(last_line + "\n")
        buyer = result.history[-1]
        turns += [Text(last_line + "\n", True), buyer]
        rewards += [result.reward, 0.0]
        seller.hear(buyer.text, last_line.lower())
    return Episode(turns, rewards, True, {"buyer": info["buyer"], "env_seed": seed,
                                          "success": bool(result.info["success"]), "seller": kind, "car": result.info["car"], "price": result.info["price"],
                                          "msrp": result.info["msrp"]})


def generate(episodes: int = DEFAULT_EPISODES, seed: int = 0, attempts_per_task: int = 1, **mix) -> Iterator[Episode]:
    """`episodes` conversations, deterministic in `seed`; `mix` overrides `SellerMix` fields.  With
    `attempts_per_task` k > 1, each run of k consecutive episodes meets one buyer (the same env seed: profile
    and behaviour), so sellers' attempts at one task can be compared (SWEET-RL).  Parameters are checked
    before the first episode is asked for."""
    if int(attempts_per_task) != attempts_per_task or attempts_per_task < 1:
        raise ValueError(f"attempts_per_task must be a positive integer, got {attempts_per_task}")
    return _episodes(question_games.check_episodes(episodes), seed, with_overrides(SellerMix(), "seller", **mix),
                     int(attempts_per_task))


def _episodes(episodes: int, seed: int, mix: SellerMix, attempts_per_task: int = 1) -> Iterator[Episode]:
    env = CarDealerEnv(catalogue=load_catalogue())
    for index in range(episodes):
        rng = random.Random(f"lmrl-car:{seed}:{index}")
        kind = question_games.draw_player(rng, mix.p_expert, mix.p_noisy)
        task = index // attempts_per_task
        buyer_seed = random.Random(f"lmrl-car-task:{seed}:{task}").randrange(2**31) if attempts_per_task > 1 else None
        yield play(env, rng, kind, mix, seed=buyer_seed)


DUEL_EPISODES = 4000


def generate_duel(episodes: int = DUEL_EPISODES, seed: int = 0, opponent: str = "mix",
                  view_lines: int | None = VIEW_LINES, seller_floor: float | None = SELLER_FLOOR
                  ) -> Iterator[Episode]:
    """`episodes` episodes of Car Dealer's duel (`lmrl.envs.dialogue.car_dealer_game`), both sides of each
    conversation (the seller's episode first), played by its scripted players `opponent` (`mix`: the dataset's
    sellers against the rule buyer): the BC data of `task=car_dealer_duel`, each side seeing `view_lines` lines (None:
    all), the expert seller never selling below `seller_floor` x MSRP.  Deterministic in `seed`; a smaller set is a
    prefix of a larger one."""
    from lmrl.envs.two_player import scripted_player
    from lmrl.rollout.two_player import play_games

    episodes = question_games.check_episodes(episodes)
    scripted_player("car_dealer", opponent, random.Random(0))  # names the valid players on a bad one

    def play_all() -> Iterator[Episode]:
        for index in range((episodes + 1) // 2):
            rng = random.Random(f"lmrl-car-duel:{seed}:{index}")
            player = scripted_player("car_dealer", opponent, rng)
            make_game = functools.partial(CarDealerGame, view_lines=view_lines, seller_floor=seller_floor)
            record = play_games(make_game, [(player, player)], [rng.randrange(2**31)])[0]
            yield from record.episodes[: episodes - 2 * index]

    return play_all()


def expert_returns(seed: int = 0) -> np.ndarray:
    """The expert's return against each eval buyer (env seed = buyer index, as the evaluation)."""
    env = CarDealerEnv()
    return np.array([play(env, random.Random(f"lmrl-car-best:{seed}:{i}"), "expert", SellerMix(), options,
                          seed=i).total_return for i, options in enumerate(env.eval_reset_options())])


def main(argv: list[str] | None = None) -> None:
    question_games.main(argv, "Car Dealer", generate, expert_returns, PAPER_ROW, DEFAULT_EPISODES, "eval buyers")


if __name__ == "__main__":
    main()
