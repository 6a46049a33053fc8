"""Guess My City dataset: scripted askers of graded quality, with open and yes/no questions.

The original's 100k conversations came from gpt-3.5-turbo playing both sides.  Ours are
played against the knowledge-grounded oracle (`lmrl/envs/dialogue/guess_city.py`) by:

- **expert**: keeps the cities consistent with every answer so far and asks about the topic
  whose answers split them most evenly (max entropy over the candidates' facts); topics
  that name things only one city has (landmarks, history, what it is known for) split
  them completely, so it asks one of those and then guesses.  Its mean return over all
  cities is the normalization max.
- **noisy**: each turn, with `p_random_question` it asks a random topic instead (open, or a
  yes/no question about a value), and with `p_early_guess` it guesses a random candidate;
  it recognizes a city from its landmarks, history or fame only with `p_recognize`.
- **random**: random topics, and with `p_random_guess` a turn a random city.

Askers read an answer the way the script knows it was produced: an open answer tells them
the topic's fact (`CityOracle.fact`), a yes/no answer whether the named value holds.
Questions are worded by sampling from the example phrasings the oracle maps back to the
topic asked; guesses from frames like "Is the city you are from {city}?" (the original's
final question) with aliases now and then.  Every answer comes from the env.

Per-episode RNG seeded by `(seed, index)`: deterministic, and a smaller dataset is a prefix
of a larger one.

CLI: `python -m data_gen.guess_city --episodes 100000 --out PATH` writes JSONL and prints its
statistics next to Table 1's; `--best` prints the expert's mean return over every city.
"""

from __future__ import annotations

import functools
import math
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from data_gen import question_games
from data_gen.mix import with_overrides
from lmrl.envs.base import Episode, Text
from lmrl.envs.dialogue.guess_city import GuessCityEnv, _title, default_oracle, load_phrasings

DEFAULT_EPISODES = 100_000
PAPER_ROW = {"size": 100_000, "avg_length": 18.8, "std_length": 4.57, "success_rate": 0.53,
             "avg_return": -18.8, "std_return": 4.12}
# Topics an asker can ask openly, and those it can also ask as "Is it in {value}?"-style yes/no questions.
OPEN_TOPICS = ("location", "continent", "language", "population", "climate", "snow", "heat", "coast",
               "landmarks", "food", "sports", "economy", "currency", "religion", "history", "known_for",
               "capital", "hemisphere")
# Topics whose answers name things only one city has; the expert always recognizes the city from them,
# the others with probability `p_recognize`.
IDENTIFYING = ("landmarks", "history", "known_for")
YES_NO_TEMPLATES = {
    "continent": ("Is it in {x}?", "Is your city in {x}?", "Is the city located in {x}?"),
    "language": ("Do people speak {x} there?", "Is {x} the main language?", "Do they speak {x}?"),
}
GUESS_FRAMES = ("Is the city you are from {c}?", "Is it {c}?", "Are you from {c}?", "Is your city {c}?",
                "My guess is {c}.", "Do you live in {c}?", "Is it {c}?", "Could it be {c}?", "is it {c}")


@dataclass(frozen=True)
class AskerMix:
    """Who plays each conversation, and how the noisy and random askers slip (see the docstring)."""

    # p_expert, p_noisy and p_recognize tuned to Table 1's success rate 0.53 (1.5k episodes: 0.553).
    p_expert: float = 0.1
    p_noisy: float = 0.45
    p_random_question: float = 0.8
    p_early_guess: float = 0.1
    p_random_guess: float = 0.1
    p_yes_no: float = 0.3
    p_recognize: float = 0.1

    def __post_init__(self):
        question_games.check_mix(self)


class Phrasebook:
    """The askers' wordings (only those the oracle reads as meant) and every city's facts."""

    def __init__(self):
        oracle = default_oracle()
        self.oracle = oracle
        self.cities = [c.name for c in oracle.kb.cities]
        self.facts = {t: [oracle.fact(c, t) for c in self.cities] for t in OPEN_TOPICS}
        self.countries = [oracle.kb.city(c).country for c in self.cities]
        self.languages = [oracle.kb.city(c).languages[0] for c in self.cities]
        self.continents = [oracle.kb.city(c).continent for c in self.cities]
        phrasings = load_phrasings()
        wanted = {t: list(dict.fromkeys(phrasings.get(t, {}).get("open", []))) for t in OPEN_TOPICS}
        oracle.prefetch([q for texts in wanted.values() for q in texts])
        self.open = {t: [q for q in texts if (p := oracle.parse(q)).kind == "open" and p.topic == t]
                     for t, texts in wanted.items()}
        self.open = {t: texts for t, texts in self.open.items() if texts}
        if not self.open:
            raise RuntimeError("no open phrasing is understood by the oracle")
        self.guesses = {c: [f.format(c=_title(n)) for n in oracle.kb.city(c).names for f in GUESS_FRAMES]
                        for c in self.cities}
        oracle.prefetch([q for texts in self.guesses.values() for q in texts])
        self.guesses = {c: [q for q in texts if oracle.parse(q).value == c] for c, texts in self.guesses.items()}

    def topics(self) -> list[str]:
        return sorted(self.open)


@functools.lru_cache(maxsize=1)
def phrasebook() -> Phrasebook:
    return Phrasebook()


def entropy(values: list[str]) -> float:
    counts = Counter(values)
    n = len(values)
    return -sum(k / n * math.log(k / n) for k in counts.values())


def play(env: GuessCityEnv, book: Phrasebook, rng: random.Random, secret: int, kind: str, mix: AskerMix) -> Episode:
    """One conversation by an asker of `kind` ("expert", "noisy", "random") about city `secret`."""
    history, info = env.reset(options={"secret": book.cities[secret]})
    turns, rewards = list(history), [0.0]
    candidates, asked, result = list(range(len(book.cities))), set(), None
    topics = book.topics()
    while result is None or not (result.terminated or result.truncated):
        question, update = None, None
        if kind == "random" and rng.random() < mix.p_random_guess:
            guess = rng.randrange(len(book.cities))
        elif kind != "random" and (len(candidates) == 1 or (kind == "noisy" and rng.random() < mix.p_early_guess)):
            guess = candidates[rng.randrange(len(candidates))]
        else:
            guess = None
            if kind == "expert" or (kind == "noisy" and rng.random() >= mix.p_random_question):
                scores = {t: entropy([book.facts[t][c] for c in candidates]) for t in topics if t not in asked}
                topic = max(scores, key=scores.get) if scores else rng.choice(topics)
            else:
                topic = rng.choice(topics)
            asked.add(topic)
            question, update = _question(book, rng, topic, candidates, secret, mix)
            if topic in IDENTIFYING and kind != "expert" and rng.random() >= mix.p_recognize:
                update = None  # did not recognize the landmarks / history described
        if guess is not None:
            question = rng.choice(book.guesses[book.cities[guess]])
        result = env.step(question + "\n")
        answer = result.history[-1].text
        if guess is not None and not result.info["success"]:
            candidates = [c for c in candidates if c != guess] or list(range(len(book.cities)))
        elif update is not None:
            candidates = [c for c in candidates if update(c, answer)] or list(range(len(book.cities)))
        turns += [Text(question + "\n", True), result.history[-1]]
        rewards += [result.reward, 0.0]
    return Episode(turns, rewards, True, {"secret": info["secret"], "success": bool(result.info["success"]),
                                          "asker": kind})


def _question(book: Phrasebook, rng: random.Random, topic: str, candidates: list[int], secret: int,
              mix: AskerMix):
    """A question about `topic`, and how its answer filters candidate cities.  An open answer states
    the secret's fact for the topic (that is how the oracle words it), so the asker keeps the cities
    sharing it; a yes/no answer keeps those for which the named value holds as answered."""
    if topic in ("continent", "language") and rng.random() < mix.p_yes_no:
        values = book.continents if topic == "continent" else book.languages
        value = Counter(values[c] for c in candidates).most_common(1)[0][0]
        question = rng.choice(YES_NO_TEMPLATES[topic]).format(x=value.title())
        return question, lambda c, answer: (values[c] == value) == answer.startswith("Yes")
    facts = book.facts[topic]
    return rng.choice(book.open[topic]), lambda c, answer: facts[c] == facts[secret]


def generate(episodes: int = DEFAULT_EPISODES, seed: int = 0, **mix) -> Iterator[Episode]:
    """`episodes` conversations, deterministic in `seed`; `mix` overrides `AskerMix` fields.
    Parameters are checked before the first episode is asked for."""
    return _episodes(question_games.check_episodes(episodes), seed, with_overrides(AskerMix(), "asker", **mix))


def _episodes(episodes: int, seed: int, mix: AskerMix) -> Iterator[Episode]:
    book, env = phrasebook(), GuessCityEnv()
    for index in range(episodes):
        rng = random.Random(f"lmrl-city:{seed}:{index}")
        kind = question_games.draw_player(rng, mix.p_expert, mix.p_noisy)
        yield play(env, book, rng, rng.randrange(len(book.cities)), kind, mix)


def expert_returns(seed: int = 0) -> np.ndarray:
    book, env = phrasebook(), GuessCityEnv()
    return np.array([play(env, book, random.Random(f"lmrl-city-best:{seed}:{i}"), i, "expert", AskerMix())
                     .total_return for i in range(len(book.cities))])


def main(argv: list[str] | None = None) -> None:
    question_games.main(argv, "Guess My City", generate, expert_returns, PAPER_ROW, DEFAULT_EPISODES, "cities")


if __name__ == "__main__":
    main()
