"""Fuzz the question games with >= 10,000 arbitrary strings each: the env never raises, every
reply is one line from the oracle's repertoire, each string costs exactly -1, and strings that
do not name the secret never win."""

import random


from lmrl.envs.base import BatchedEnv
from tests.helpers import junk, random_unicode

WORDS = ("is it a the or and bigger than made of metal alive what where city cat dog tokyo paris food language "
         "not never you from my guess ?!., 20 million").split()


def fuzz_strings(names: list[str], n: int = 10_200, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out = ["", "\n", " ", "?", "\n\n", "x" * 10_000, "Is it a cat?" * 500, random_unicode(rng, 10_000),
           "Is it " + ", ".join(names) + "?"]
    while len(out) < n:
        kind = rng.randrange(4)
        if kind == 0:
            out.append(junk(rng, 40))
        elif kind == 1:
            out.append(" ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 12))))
        elif kind == 2:  # two or more names at once
            out.append("Is it " + " or ".join(rng.sample(names, rng.randrange(2, 6))) + "?")
        else:  # a name garbled
            name = rng.choice(names)
            i = rng.randrange(len(name))
            out.append(f"Is it {name[:i]}{rng.choice('xq#é')}{name[i + 1:]}?")
    return out


def check(make_env, secret: str, strings: list[str], replies_ok) -> None:
    """Step 64 envs in lockstep (batched oracle calls), 20 strings per episode."""
    batch = BatchedEnv(make_env, 64)
    for start in range(0, len(strings), 64 * 20):
        chunk = strings[start:start + 64 * 20]
        batch.reset_all([{"secret": secret}] * 64, [None] * 64)
        for turn in range(20):
            active = list(batch.active)
            actions = [chunk[(i * 20 + turn) % len(chunk)] for i in active]
            batch.step(actions)
        for episode in batch.episodes:
            assert episode.done and not episode.success, episode.turns[-2:]
            assert episode.total_return == -20.0
            for turn in episode.turns[2::2]:
                assert turn.text.endswith("\n") and turn.text.count("\n") == 1 and replies_ok(turn.text[:-1]), turn


def test_twenty_questions_fuzz():
    from lmrl.envs.twenty_questions import NO, UNKNOWN, YES, TwentyQuestionsEnv, default_oracle

    names = [v for o in default_oracle().kb.objects for v in o.variants]
    strings = [s for s in fuzz_strings(names) if "piano" not in s.lower()]
    assert len(strings) >= 10_000
    check(TwentyQuestionsEnv, "piano", strings, lambda reply: reply in (YES, NO, UNKNOWN))
def test_guess_city_fuzz():
    from lmrl.envs.cities import load_cities
    from lmrl.envs.guess_city import GuessCityEnv

    kb = load_cities()
    names = [n for c in kb.cities for n in c.names]
    secret = kb.city("tokyo")
    strings = [s for s in fuzz_strings(names, n=10_800) if not any(n in s.lower() for n in secret.names)]
    assert len(strings) >= 10_000
    check(GuessCityEnv, "tokyo", strings, lambda reply: "tokyo" not in reply.lower() and reply.strip() != "")
