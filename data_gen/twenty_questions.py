"""Twenty Questions dataset: scripted guessers of graded quality, asking in varied words.

LMRL-Gym does not publish how its 100k conversations were made.  Ours are played against
the knowledge-grounded oracle (`lmrl/envs/dialogue/twenty_questions.py`) by a population of guessers:

- **expert**: keeps the objects consistent with every answer so far and asks the attribute
  whose yes/no split of them has the most entropy (ties: knowledge-base order); it guesses
  once one candidate is left.  Its mean return over all objects is the normalization max.
- **noisy** (the expert with slips): each turn, with `p_random_question` it asks a random
  attribute instead, and with `p_early_guess` it guesses a random candidate too early.
- **random**: asks random attributes and, with `p_random_guess` a turn, guesses a random
  object from the whole list.

A conversation's guesser kind is drawn from `p_expert`, `p_noisy`, the rest random.
Questions are worded by sampling from example phrasings (`data/dialogue_phrasings.json`
and each attribute's own question) that the oracle maps back to the attribute asked, and
guesses from a dozen frames ("Is it a {x}?", "Are you thinking of {x}?", ...), with the
object's synonyms now and then.  Every answer comes from the env, so each episode
replays exactly.

Each episode draws from its own RNG seeded by `(seed, index)`: deterministic, and a smaller
dataset is a prefix of a larger one.  ~1.5k episodes/s (100k in ~70 s) once the ~1,500
distinct phrasings are embedded (a few seconds).

CLI: `python -m data_gen.twenty_questions --episodes 100000 --out PATH` writes JSONL and prints
its statistics next to Table 1's; `--best` prints the expert's mean return over every object.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from data_gen import question_games
from data_gen.mix import with_overrides
from lmrl.envs.base import Episode, Text
from lmrl.envs.dialogue.twenty_questions import (
    NO,
    UNKNOWN,
    YES,
    TwentyQuestionsEnv,
    default_oracle,
    load_phrasings,
)

DEFAULT_EPISODES = 100_000
PAPER_ROW = {"size": 100_000, "avg_length": 14.9, "std_length": 4.38, "success_rate": 0.31,
             "avg_return": -17.3, "std_return": 2.56}
GUESS_FRAMES = (
    "Is it {a}?", "Is it {a}?", "Is it {a}?", "Is the object {a}?", "Are you thinking of {a}?", "Could it be {a}?",
    "Is it {the}?", "My guess is {a}.", "Is it maybe {a}?", "I think it's {a}. Am I right?", "Is your object {a}?",
    "is it {a}", "Are you thinking of {the}?", "Is the answer {a}?",
)


@dataclass(frozen=True)
class GuesserMix:
    """Who plays each conversation, and how the noisy and random guessers slip (see the docstring)."""

    # Tuned to Table 1's success rate 0.31 and average return -17.3 (3k episodes: 0.323, -17.16).
    p_expert: float = 0.1
    p_noisy: float = 0.3
    p_random_question: float = 0.7
    p_early_guess: float = 0.15
    p_random_guess: float = 0.15

    def __post_init__(self):
        question_games.check_mix(self)


class Phrasebook:
    """The wordings the guessers use: per attribute, only those the oracle answers exactly as the
    attribute for every object (so "Is it smaller than your hand?", a size rule, counts too)."""

    def __init__(self):
        oracle = default_oracle()
        self.kb = oracle.kb
        self.attributes = list(self.kb.attribute_ids)
        self.matrix = np.array([self.kb.vector(o.name) for o in self.kb.objects], dtype=bool)
        # False where the knowledge base is unsure (the oracle then says "I can't answer that.")
        self.known = np.array([self.kb.known_mask(o.name) for o in self.kb.objects], dtype=bool)
        phrasings = load_phrasings()
        candidates: dict[str, list[str]] = {a.id: [a.question] for a in self.kb.attributes}
        for attribute_id, texts in phrasings.get("twenty_questions", {}).items():
            candidates.setdefault(attribute_id, []).extend(texts)
        for category, texts in phrasings.get("twenty_questions_categories", {}).items():
            candidates.setdefault("is_" + "_".join(category.lower().split()), []).extend(texts)
        oracle.prefetch([q for texts in candidates.values() for q in texts])
        names = [o.name for o in self.kb.objects]
        self.questions: dict[str, list[str]] = {}
        for column, attribute_id in enumerate(self.attributes):
            truth = [_reply(value) for value in (self.kb.value(name, attribute_id) for name in names)]
            kept = [q for q in candidates.get(attribute_id, [])
                    if [oracle.answer(name, q).text for name in names] == truth]
            if not kept:
                raise RuntimeError(f"no phrasing of attribute {attribute_id!r} is understood by the oracle")
            self.questions[attribute_id] = kept
        self.guesses = {o.name: [f.format(a=_with_article(v), the="the " + v) for v in o.variants for f in GUESS_FRAMES]
                        for o in self.kb.objects}
        oracle.prefetch([q for texts in self.guesses.values() for q in texts])
        for name, texts in self.guesses.items():
            self.guesses[name] = [q for q in texts if oracle.parse(q).target == name]

    def question(self, rng: random.Random, attribute: int) -> str:
        return rng.choice(self.questions[self.attributes[attribute]])

    def guess(self, rng: random.Random, obj: int) -> str:
        return rng.choice(self.guesses[self.kb.objects[obj].name])


def _reply(value: bool | None) -> str:
    return UNKNOWN if value is None else YES if value else NO


def _with_article(noun: str) -> str:
    return ("an " if noun[0] in "aeiou" else "a ") + noun


@functools.lru_cache(maxsize=1)
def phrasebook() -> Phrasebook:
    return Phrasebook()


def best_split(matrix: np.ndarray, candidates: np.ndarray, asked: set[int], known: np.ndarray | None = None) -> int:
    """The attribute whose answers split the candidates most evenly (max entropy), first on ties; with `known`,
    only attributes whose answer is known for every candidate (an unsure one would be a wasted question)."""
    share = matrix[candidates].mean(axis=0)
    balance = -np.abs(share - 0.5)
    if known is not None:
        balance[~known[candidates].all(axis=0)] = -np.inf
    if asked:
        balance[list(asked)] = -np.inf
    return int(np.argmax(balance))


def play(env: TwentyQuestionsEnv, book: Phrasebook, rng: random.Random, secret: int, kind: str,
         mix: GuesserMix) -> Episode:
    """One conversation by a guesser of `kind` ("expert", "noisy", "random") about object `secret`."""
    history, info = env.reset(options={"secret": book.kb.objects[secret].name})
    turns, rewards = list(history), [0.0]
    candidates, asked, result = np.arange(len(book.kb.objects)), set(), None
    n_attributes = len(book.attributes)
    while result is None or not (result.terminated or result.truncated):
        attribute = None
        if kind == "random":
            if rng.random() < mix.p_random_guess:
                action = book.guess(rng, rng.randrange(len(book.kb.objects)))
            else:
                attribute = rng.randrange(n_attributes)
        elif len(candidates) == 1 or (kind == "noisy" and rng.random() < mix.p_early_guess):
            action = book.guess(rng, int(candidates[rng.randrange(len(candidates))]))
        elif kind == "noisy" and rng.random() < mix.p_random_question:
            attribute = rng.randrange(n_attributes)
        else:
            attribute = best_split(book.matrix, candidates, asked, book.known)
        if attribute is not None:
            action = book.question(rng, attribute)
            asked.add(attribute)
        result = env.step(action + "\n")
        answer = result.history[-1].text
        if attribute is not None and answer in ("Yes.\n", "No.\n"):
            keep = book.matrix[candidates, attribute] == (answer == "Yes.\n")
            candidates = candidates[keep & book.known[candidates, attribute]]
        elif attribute is not None:  # "I can't answer that.": the secret is one of the unsure candidates
            candidates = candidates[~book.known[candidates, attribute]]
        elif not result.info["success"]:
            wrong = env.oracle.parse(action).target
            candidates = candidates[[book.kb.objects[c].name != wrong for c in candidates]]
        if len(candidates) == 0:  # only the random guesser's wrong turns can empty it
            candidates = np.arange(len(book.kb.objects))
        turns += [Text(action + "\n", True), result.history[-1]]
        rewards += [result.reward, 0.0]
    return Episode(turns, rewards, True, {"secret": info["secret"], "success": bool(result.info["success"]),
                                          "guesser": kind})


def generate(episodes: int = DEFAULT_EPISODES, seed: int = 0, **mix) -> Iterator[Episode]:
    """`episodes` conversations, deterministic in `seed`; `mix` overrides `GuesserMix` fields.
    Parameters are checked before the first episode is asked for."""
    return _episodes(question_games.check_episodes(episodes), seed, with_overrides(GuesserMix(), "guesser", **mix))


def _episodes(episodes: int, seed: int, mix: GuesserMix) -> Iterator[Episode]:
    book, env = phrasebook(), TwentyQuestionsEnv()
    for index in range(episodes):
        rng = random.Random(f"lmrl-20q:{seed}:{index}")
        kind = question_games.draw_player(rng, mix.p_expert, mix.p_noisy)
        yield play(env, book, rng, rng.randrange(len(book.kb.objects)), kind, mix)


def expert_returns(seed: int = 0) -> np.ndarray:
    """The expert's return on every object (one game each; only its wording is random)."""
    book, env = phrasebook(), TwentyQuestionsEnv()
    return np.array([play(env, book, random.Random(f"lmrl-20q-best:{seed}:{i}"), i, "expert", GuesserMix())
                     .total_return for i in range(len(book.kb.objects))])


def main(argv: list[str] | None = None) -> None:
    question_games.main(argv, "Twenty Questions", generate, expert_returns, PAPER_ROW, DEFAULT_EPISODES, "objects")


if __name__ == "__main__":
    main()
