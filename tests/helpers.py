"""Test helpers shared by the env, fuzz and dataset tests."""

from __future__ import annotations

import random
import string

from lmrl.envs.base import Episode, Text, TextEnv


def random_unicode(rng: random.Random, length: int) -> str:
    """Code points from the whole range, surrogates excluded (they cannot be encoded)."""
    chars = []
    while len(chars) < length:
        cp = rng.randrange(0x110000)
        if not 0xD800 <= cp <= 0xDFFF:
            chars.append(chr(cp))
    return "".join(chars)


def junk(rng: random.Random, max_length: int) -> str:
    """Half the time arbitrary code points, half printable ASCII, of random length below `max_length`."""
    if rng.random() < 0.5:
        return random_unicode(rng, rng.randrange(0, max_length))
    return "".join(rng.choice(string.printable) for _ in range(rng.randrange(0, max_length)))


def replay(env: TextEnv, options: dict, episode: Episode) -> tuple[list[Text], list[float]]:
    """Feed a recorded episode's actions to `env` reset with `options`; the turns and rewards it produces."""
    history, _ = env.reset(options=options)
    turns, rewards = list(history), [0.0] * len(history)
    for action in (t.text for t in episode.turns if t.is_action):
        result = env.step(action)
        turns += [Text(action, True), result.history[-1]]
        rewards += [result.reward, 0.0]
    assert env.done
    return turns, rewards
