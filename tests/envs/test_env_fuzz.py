"""Fuzz MazeEnv with arbitrary strings: never raise, -4 and no move, Failure at the horizon."""

import random

import pytest

from lmrl.envs.maze import MazeEnv, start_cells
from tests.helpers import random_unicode

DIRECTIONS = ("up", "down", "left", "right")
# The exact valid utterances, spelled out here rather than taken from the env's parser.
VALID = {f"move {d}\n" for d in DIRECTIONS}
NEAR_MISSES = [
    "move up", "move down", "move left", "move right",  # cut off before the newline: invalid in the original
    "move  up", "Move up", "move up\n\n", "MOVE DOWN\n", " move left\n", "move left \n", "move\tright\n",
    "move up\r\n", "moveup\n", "move upp\n", "mov up\n", "move forward\n", "go left\n", "left\n",
    "move up down\n", "move right.\n", "\nmove up", "move north\n", "move  \n", "move \n", "",
    "\n", "\n\n", " ", "move", "move up\nmove down\n", "move down!\n", "move ", "move l eft\n",
]
ALPHABETS = [
    "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ",
    " \n\t\r\x00\x0b\x0c",
    "moveuplftdwnrigh \n",
    "éß漢字🙂Ωж\u200b\u202e\ufeffالعربية",
]


def mutate(rng: random.Random, text: str) -> str:
    """Insert, delete, duplicate or re-case one character of a valid action."""
    i = rng.randrange(len(text) + 1)
    op = rng.randrange(4)
    if op == 0:
        return text[:i] + rng.choice(" \nxX.") + text[i:]
    if op == 1 and text:
        return text[: i - 1] + text[i:] if i else text[1:]
    if op == 2:
        return text[:i] + text[i - 1 : i] * 2 + text[i:]
    return text.swapcase() if rng.random() < 0.5 else text.upper()


def fuzz_corpus(near_misses, valid, alphabets, n: int, seed: int = 0) -> list[str]:
    """Near misses, then arbitrary unicode, letters from the alphabets and mutations of the valid actions, in
    equal parts up to `n`, with the valid ones dropped."""
    rng = random.Random(seed)
    valid = sorted(valid)
    out = list(near_misses)
    while len(out) < n:
        kind = rng.randrange(3)
        if kind == 0:
            out.append(random_unicode(rng, rng.randrange(0, 40)))
        elif kind == 1:
            out.append("".join(rng.choice(rng.choice(alphabets)) for _ in range(rng.randrange(0, 25))))
        else:
            out.append(mutate(rng, rng.choice(valid)))
    return [s for s in out if s not in valid]


def fuzz_strings(n: int = 10_200, seed: int = 0) -> list[str]:
    return fuzz_corpus(NEAR_MISSES, VALID, ALPHABETS, n, seed)


STRINGS = fuzz_strings()


def test_fuzz_corpus_is_large_and_invalid():
    assert len(STRINGS) >= 10_000 and not VALID & set(STRINGS)
    assert "" in STRINGS and any("\n" in s for s in STRINGS)


ENV_KWARGS = [
    {"fully_observed": True},
    {"fully_observed": False},
    {"fully_observed": False, "wipe_history_on_invalid": True},
]


@pytest.mark.parametrize("kwargs", ENV_KWARGS)
def test_invalid_strings_cost_four_never_move_and_end_in_failure(kwargs):
    env, starts, episodes = MazeEnv(**kwargs), start_cells(), 0
    for offset in range(0, len(STRINGS), 101):
        chunk = STRINGS[offset : offset + 101]
        if len(chunk) < 101:
            break
        start = starts[episodes % len(starts)]
        history, _ = env.reset(options={"init_position": start})
        obs = history[-1].text
        for action in chunk[:100]:
            result = env.step(action)
            assert result.reward == -4.0, repr(action)
            assert env.position == start and result.history[-1].text == obs, repr(action)
            assert not (result.terminated or result.truncated) and result.info["invalid"]
        last = env.step(chunk[100])
        assert last.history[-1].text == "Failure\n" and last.reward == -1.0 and last.truncated
        episodes += 1
    assert episodes >= 10
