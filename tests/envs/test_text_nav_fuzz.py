"""Fuzz TextNavEnv with >= 10,000 strings: each one either runs an admissible command or is
rejected with reward 0 without touching the game; the env keeps working afterwards."""

import random

import pytest

from lmrl.envs.text_nav import INVALID_REPLY, ROOMS, TextNavEnv, walkthrough
from tests.helpers import random_unicode

pytest.importorskip("textworld")  # the optional `textnav` extra

META = ["quit", "restart", "restore", "undo", "save", "script", "script off", "unscript", "transcript",
        "verbose", "brief", "score", "again", "g", "z", "wait", "oops", "version", "notify off", "pronouns"]
ALPHABETS = [
    "abcdefghijklmnopqrstuvwxyz ",
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;:!?'\"-_()[]{}<>/\\|@#$%^&*+=~`",
    " \n\t\r\x00\x0b\x0c\x1b\x7f",
    "éß漢字🙂Ωж\u200b\u202e\ufeff\u3000\u00a0",
]


def canonical(action: str) -> str | None:
    """The documented normalization, spelled out independently of the env's code."""
    body = action.removesuffix("\n")
    if any(not (" " <= ch <= "~") for ch in body):
        return None
    return " ".join(word for word in body.split(" ") if word).lower()


def near_miss(rng: random.Random, command: str) -> str:
    """A typo, a case change, extra spaces, a doubled or foreign newline, a prefix or suffix."""
    i = rng.randrange(len(command) + 1)
    op = rng.randrange(8)
    if op == 0:
        return command[:i] + rng.choice("abcxyz.,'") + command[i:]
    if op == 1:
        return command[: max(i - 1, 0)] + command[i:]
    if op == 2:
        return command[:i] + command[i + 1 : i + 2] + command[i : i + 1] + command[i + 2 :]
    if op == 3:
        return rng.choice([command.upper(), command.title(), command.swapcase()]) + "\n"
    if op == 4:
        return "  " + command.replace(" ", " " * rng.randrange(1, 4)) + "   \n"
    if op == 5:
        return command + rng.choice(["\n\n", "\r\n", "\t\n", "\n ", "\x00\n"])
    if op == 6:
        return rng.choice(["please ", "> ", "\n", "i "]) + command + "\n"
    return command.replace(" ", rng.choice(["\t", "\n", "  ", "_"])) + "\n"


def fuzz_action(rng: random.Random, env: TextNavEnv) -> str:
    kind = rng.randrange(10)
    commands = env.admissible_commands()
    if kind == 0:
        return random_unicode(rng, rng.randrange(0, 40))
    if kind == 1:
        alphabet = rng.choice(ALPHABETS)
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 30)))
    if kind == 2:
        return rng.choice(["", "\n", "\n\n", " ", "x" * 10_000, ("go west " * 1500) + "\n",
                           "go west\ngo east\n", "take stale food from table\neat stale food\n"])
    if kind == 3:
        return rng.choice(META) + rng.choice(["", "\n", "\n\n"])
    if kind in (4, 5, 6, 7):
        return near_miss(rng, rng.choice(commands))
    return rng.choice(commands) + rng.choice(["\n", "\n", ""])  # exact commands keep the game moving


def test_canonical_matches_documented_examples():
    assert canonical("  Go   WEST \n") == "go west" and canonical("go\twest\n") is None
    assert canonical("go west\n\n") is None and canonical("é") is None and canonical("\n") == ""


@pytest.mark.parametrize("fully_observed", [True, False])
def test_fuzz_strings_run_admissible_commands_or_are_rejected_untouched(fully_observed, monkeypatch):
    calls = []
    execute = TextNavEnv._execute
    monkeypatch.setattr(TextNavEnv, "_execute", lambda self, command: calls.append(command) or execute(self, command))
    rng, env = random.Random(int(fully_observed)), TextNavEnv(fully_observed=fully_observed, max_steps=300)
    history, _ = env.reset(seed=0)
    counts = {"valid": 0, "invalid": 0, "episodes": 1}
    for _ in range(5_500):
        action = fuzz_action(rng, env)
        before = (env.state(), env.admissible_commands(), env.legal_actions(), len(calls))
        expected_command = canonical(action)
        expected_valid = expected_command in before[1]
        status_tail = history[-1].text.split("Admissible commands:")[0].splitlines(keepends=True)
        result = env.step(action)
        assert result.info["invalid"] == (not expected_valid), repr(action)
        if expected_valid:
            assert calls[-1] == expected_command and len(calls) == before[3] + 1
        else:
            assert result.reward == 0.0 and not result.terminated and len(calls) == before[3]
            assert (env.state(), env.admissible_commands()) == before[:2]
            assert env.legal_actions() == ([] if result.truncated else before[2])
            inventory = [line for line in status_tail if line.startswith("You are carrying")][-1:] * fully_observed
            assert result.history[-1].text == (INVALID_REPLY + "".join(inventory) + "\nAdmissible commands: "
                                               + ", ".join(a.rstrip("\n") for a in before[2]) + "\n")
        assert result.history[-2].text == action and result.history[-1].text.endswith("\n")
        counts["valid" if expected_valid else "invalid"] += 1
        history = result.history
        if result.terminated or result.truncated:
            history, _ = env.reset()
            counts["episodes"] += 1
    assert counts["valid"] > 500 and counts["invalid"] > 3000 and counts["episodes"] > 5, counts
    for room in ROOMS:  # still works
        env.reset(options={"start_room": room})
        assert [env.step(c + "\n").reward for c in walkthrough(room)][-1] == 1.0
