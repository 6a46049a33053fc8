"""Fuzz WordleEnv with >= 10,000 arbitrary strings: each costs `invalid_reward`, uses a try,
gets an empty feedback line, and the env never raises."""

import random
import string

import pytest

from lmrl.envs.wordle import WORDS_PATH, WordleEnv
from tests.helpers import junk, random_unicode

# The list and the valid utterances, read from the file here rather than from the env's parser.
LIST_WORDS = [line for line in WORDS_PATH.read_text(encoding="utf-8").splitlines() if line and line[0] != "#"]
VALID = {" ".join(w) + end for w in LIST_WORDS for end in ("", "\n")}
# Real words the list does not hold (the reference's `crane`, Wordle's favourite openers, plurals).
NON_LIST_WORDS = ["crane", "stale", "adieu", "arise", "train", "about", "cards", "moved", "xxxxx", "zzzzz"]


def near_miss(rng: random.Random, word: str) -> str:
    """A list word written almost right."""
    spaced = " ".join(word)
    kind = rng.randrange(10)
    if kind == 0:
        return word + rng.choice(["", "\n"])  # unspaced
    if kind == 1:
        return spaced.upper() + "\n" if rng.random() < 0.5 else spaced.capitalize() + "\n"
    if kind == 2:
        i = rng.randrange(1, 9, 2)
        return spaced[:i] + " " + spaced[i:] + "\n"  # a double space
    if kind == 3:
        return " ".join(word[:4]) + "\n"  # four letters
    if kind == 4:
        return spaced + " " + rng.choice(string.ascii_lowercase) + "\n"  # six letters
    if kind == 5:
        return rng.choice([" ", "\t", "\n", "\r"]) + spaced + rng.choice(["\n", " \n", "\n\n", "\r\n"])
    if kind == 6:
        return spaced.replace(" ", rng.choice([",", "-", "\t", "  ", "_"])) + "\n"
    if kind == 7:
        return " ".join(rng.choice(NON_LIST_WORDS)) + "\n"
    if kind == 8:
        return " ".join(rng.choice(string.ascii_lowercase) for _ in range(5)) + "\n"  # mostly not a word
    i = rng.randrange(5)
    return " ".join(word[:i] + rng.choice("éÅß1.?") + word[i + 1 :]) + "\n"


def fuzz_strings(n: int = 10_500, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out = ["", "\n", " ", "\n\n", "x" * 10_000, "s l a t e\n" * 1_000, random_unicode(rng, 10_000)]
    while len(out) < n:
        if rng.random() < 0.5:
            out.append(junk(rng, 30))
        else:
            out.append(near_miss(rng, rng.choice(LIST_WORDS)))
    return [s for s in out if s not in VALID]


STRINGS = fuzz_strings()


def test_fuzz_corpus_is_large_varied_and_invalid():
    assert len(STRINGS) >= 10_000 and not VALID & set(STRINGS)
    assert not set(NON_LIST_WORDS) & set(LIST_WORDS)
    assert "" in STRINGS and max(map(len, STRINGS)) >= 10_000
    assert any(s.rstrip("\n") in LIST_WORDS for s in STRINGS)  # unspaced list words
    assert any(s.replace(" ", "").rstrip("\n") in NON_LIST_WORDS for s in STRINGS)
    assert any(s.isupper() for s in STRINGS) and any("  " in s for s in STRINGS)
    assert any(any(ord(c) > 0xFFFF for c in s) for s in STRINGS)


@pytest.mark.parametrize("invalid_reward", [-1.0, -10.0])
def test_every_invalid_string_costs_a_try_and_gets_an_empty_line(invalid_reward):
    env, words = WordleEnv(invalid_reward=invalid_reward), LIST_WORDS
    episodes = 0
    for offset in range(0, len(STRINGS) - 5, 6):
        env.reset(options={"secret": words[episodes % len(words)]})
        for k, action in enumerate(STRINGS[offset : offset + 6], start=1):
            result = env.step(action)
            assert result.reward == invalid_reward, repr(action[:40])
            assert result.history[-1].text == "\n" and result.history[-2].text == action
            assert result.info["invalid"] and not result.info["success"] and result.info["guesses"] == k
            assert result.terminated == (k == 6) and not result.truncated
        episodes += 1
    assert episodes * 6 >= 10_000
