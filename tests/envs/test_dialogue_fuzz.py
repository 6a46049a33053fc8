"""Fuzz the question games with >= 10,000 arbitrary strings each: the env never raises, every
reply is one line from the oracle's repertoire, each string costs exactly -1, and strings that
do not name the secret never win."""

import random


from lmrl.envs.base import BatchedEnv
from tests.helpers import junk, random_unicode

WORDS = ("is it a the or and bigger than made of metal alive what where city cat dog tokyo paris food language "
         "not never you from my guess ?!., 20 million").split()
# Question frames the oracles parse further, each followed by junk: "does it $$?" once raised in the verb rules.
FRAMES = ("Does it", "Can it", "Could it", "Is it used to", "Is it used for", "Do people", "Is it able to",
          "Is it made for", "Does it ever", "Is it bigger than", "Is it made of", "Is it in")


def fuzz_strings(names: list[str], n: int = 10_200, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out = ["", "\n", " ", "?", "\n\n", "x" * 10_000, "Is it a cat?" * 500, random_unicode(rng, 10_000),
           "Is it " + ", ".join(names) + "?", "Does it $$?", "Could it -- or --?", "does it ,,"]
    while len(out) < n:
        kind = rng.randrange(5)
        if kind == 0:
            out.append(junk(rng, 40))
        elif kind == 1:
            out.append(" ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 12))))
        elif kind == 2:  # two or more names at once
            out.append("Is it " + " or ".join(rng.sample(names, rng.randrange(2, 6))) + "?")
        elif kind == 3:  # a question frame, then junk
            out.append(f"{rng.choice(FRAMES)} {junk(rng, rng.randrange(1, 8))}{rng.choice(('?', '', ' or ?'))}")
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
    from lmrl.envs.dialogue.twenty_questions import NO, UNKNOWN, YES, TwentyQuestionsEnv, default_oracle

    names = [v for o in default_oracle().kb.objects for v in o.variants]
    strings = [s for s in fuzz_strings(names) if "piano" not in s.lower()]
    assert len(strings) >= 10_000
    check(TwentyQuestionsEnv, "piano", strings, lambda reply: reply in (YES, NO, UNKNOWN))
def test_guess_city_fuzz():
    from lmrl.envs.dialogue.cities import load_cities
    from lmrl.envs.dialogue.guess_city import GuessCityEnv

    kb = load_cities()
    names = [n for c in kb.cities for n in c.names]
    secret = kb.city("tokyo")
    strings = [s for s in fuzz_strings(names, n=10_800) if not any(n in s.lower() for n in secret.names)]
    assert len(strings) >= 10_000
    check(GuessCityEnv, "tokyo", strings, lambda reply: "tokyo" not in reply.lower() and reply.strip() != "")


def test_car_dealer_fuzz():
    """10,000+ arbitrary seller lines through 64 batched envs: never raises, every buyer reply is one
    non-empty line, every conversation ends by 50 utterances with a decision, rewards are 0 without a
    sale and a sale never exceeds 105% of the car's MSRP."""
    from lmrl.envs.dialogue.car_catalogue import load_catalogue
    from lmrl.envs.dialogue.car_dealer import CarDealerEnv

    catalogue = load_catalogue()
    names = [c.display for c in catalogue.cars]
    rng = random.Random(1)
    strings = fuzz_strings(names, n=10_200)
    strings += [f"The {rng.choice(names)} is ${rng.randrange(1, 10**6):,}. {junk(rng, 20)}" for _ in range(400)]
    strings += ["Deal!", "Deal at $5", "$" * 1000, "9" * 5000, "k" * 300, "1e308 dollars", "NaN grand", "-5,000 dollars"]
    batch = BatchedEnv(CarDealerEnv, 64)
    sales, episodes = 0, 0
    for start in range(0, len(strings), 64 * 25):
        chunk = strings[start:start + 64 * 25]
        batch.reset_all([{}] * 64, list(range(start, start + 64)))
        for turn in range(25):
            if not batch.active:
                break
            batch.step([chunk[(i * 25 + turn) % len(chunk)] for i in batch.active])
        assert not batch.active
        for episode in batch.episodes:
            episodes += 1
            info = episode.info
            assert episode.done and info["utterances"] <= 50 and info["decision"] in ("accept", "reject")
            for turn in episode.turns[2::2]:
                assert turn.text.endswith("\n") and turn.text.count("\n") == 1 and turn.text.strip()
            if info["success"]:
                sales += 1
                assert 0 < info["price"] <= 1.05 * info["msrp"] and episode.total_return > 0
            else:
                assert episode.total_return == 0.0
    assert episodes >= 400


def near_misses(questions: list[str], n: int, seed: int = 0) -> list[str]:
    """What a half-trained asker writes: real questions cut short, with words dropped, doubled, swapped or
    replaced by another question's word, and halves of two questions spliced ("Is it played by?")."""
    rng = random.Random(seed)
    vocab = sorted({w for q in questions for w in q.split()})
    out = []
    while len(out) < n:
        words = rng.choice(questions).split()
        kind = rng.randrange(5)
        if kind == 0:
            words = words[:rng.randrange(1, len(words) + 1)]
        elif kind == 1 and len(words) > 1:
            del words[rng.randrange(len(words))]
        elif kind == 2:
            i = rng.randrange(len(words))
            words.insert(i, rng.choice(vocab) if rng.random() < 0.5 else words[i])
        elif kind == 3 and len(words) > 1:
            i = rng.randrange(len(words) - 1)
            words[i], words[i + 1] = words[i + 1], words[i]
        else:
            other = rng.choice(questions).split()
            words = words[:rng.randrange(len(words) + 1)] + other[rng.randrange(len(other)):]
        text = " ".join(words)
        out.append(text + rng.choice(("", "?", "?", " ?", "??")) if rng.random() < 0.3 else text)
    return out


def _strings(node) -> list[str]:
    """Every string in a nest of dicts and lists (the phrasings file), templates filled with one value."""
    if isinstance(node, str):
        return [node.replace("{x}", "Asia")]
    values = node.values() if isinstance(node, dict) else node
    return [text for value in values for text in _strings(value)]


def _phrasings(group: str) -> list[str]:
    from lmrl.envs.dialogue.twenty_questions import load_phrasings

    return _strings(load_phrasings()[group])


def test_twenty_questions_near_miss_fuzz():
    """Regression: "Is it played by?" (a question cut after "by", as a tiny BC model wrote it in a learning
    curve's evaluation) raised IndexError in the yes-only facts reader and killed the run."""
    from lmrl.envs.dialogue.twenty_questions import NO, UNKNOWN, YES, TwentyQuestionsEnv, default_oracle

    oracle = default_oracle()
    questions = _phrasings("twenty_questions") + _phrasings("twenty_questions_categories")
    questions += [a.question for a in oracle.kb.attributes]
    strings = [s for s in near_misses(questions, 10_240) if "piano" not in s.lower()]
    assert "Is it played by?" not in strings
    strings = ["Is it played by?", "is it made by", "Is it used by?"] + strings
    check(TwentyQuestionsEnv, "piano", strings, lambda reply: reply in (YES, NO, UNKNOWN))


def test_guess_city_near_miss_fuzz():
    from lmrl.envs.dialogue.guess_city import GuessCityEnv

    strings = [s for s in near_misses(_phrasings("guess_my_city"), 10_240, seed=1) if "tokyo" not in s.lower()]
    check(GuessCityEnv, "tokyo", strings, lambda reply: "tokyo" not in reply.lower() and reply.strip() != "")
