"""Score an oracle on a held-out question set (tests/envs/heldout/, see its README).

Shared by the acceptance tests (knowledge-grounded oracles, >= 95%) and by
`python -m lmrl.bench_oracles --lm ...`, which scores an LM oracle on the same sets.
Each scorer returns `Score(correct, total, failures)`, failures as readable strings.
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

HELDOUT_DIR = Path(__file__).resolve().parents[2] / "tests" / "envs" / "heldout"


@dataclass
class Score:
    correct: int = 0
    total: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def accuracy(self) -> float:
        return self.correct / max(self.total, 1)

    def add(self, ok: bool, description: str) -> None:
        self.total += 1
        self.correct += ok
        if not ok:
            self.failures.append(description)


def load_heldout(name: str, directory: Path = HELDOUT_DIR) -> list[dict]:
    """The items of `<name>.jsonl`; a malformed line raises naming the file and line."""
    path = directory / f"{name}.jsonl"
    items = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            items.append(json.loads(line))
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{number}: not JSON ({err})") from None
    return items


def _plain(text: str) -> str:
    text = unicodedata.normalize("NFKD", text.lower())
    return " ".join("".join(c for c in text if not unicodedata.combining(c)).split())


def score_twenty_questions(oracle, items: list[dict]) -> Score:
    """An item is right when the reply text is the expected one, and a guess wins exactly when it should."""
    score = Score()
    replies = oracle.answer_batch([i["object"] for i in items], [i["question"] for i in items])
    for item, reply in zip(items, replies):
        should_win = item["answer"] == "Yes." and item.get("about") == "guess"
        ok = reply.text == item["answer"] and reply.correct_guess == should_win
        score.add(ok, f"{item['object']}: {item['question']!r} -> {reply.text!r} (want {item['answer']!r})")
    return score


def score_guess_city(oracle, items: list[dict]) -> Score:
    """Per the item's `expect`: yes/no prefix, a mentioned fact, a (non-)winning guess, or a refusal;
    and no reply but a correct guess may name the secret city."""
    score = Score()
    replies = oracle.answer_batch([i["city"] for i in items], [i["question"] for i in items])
    for item, reply in zip(items, replies):
        expect, text = item["expect"], reply.text
        kind = expect["kind"]
        if kind in ("yes", "no"):
            ok = _plain(text).startswith(kind) and not reply.correct_guess
        elif kind == "mentions":
            ok = any(_plain(s) in _plain(text) for s in expect["any"]) and not reply.correct_guess
        elif kind == "guess":
            ok = reply.correct_guess == bool(expect["correct"])
        elif kind == "refuse":
            ok = not reply.correct_guess
        else:
            raise ValueError(f"unknown expectation kind {kind!r} in {item}")
        if not reply.correct_guess:
            city = oracle.kb.city(item["city"])
            words = f" {_words(text)} "
            ok = ok and not any(f" {_words(name)} " in words for name in city.names)
        score.add(ok, f"{item['city']}: {item['question']!r} -> {text!r} (want {expect})")
    return score


def _words(text: str) -> str:
    return " ".join("".join(c if c.isalnum() else " " for c in _plain(text)).split())


def score_car_dealer(parse, catalogue, items: list[dict]) -> Score:
    """Every field an item lists must equal the parse's (tuples compared as sets of names)."""
    score = Score()
    for item in items:
        parsed = parse(item["utterance"], catalogue)
        wrong = []
        for name, want in item["expect"].items():
            got = getattr(parsed, name)
            if isinstance(got, (tuple, list)):
                same = set(got) == set(want or [])
            else:
                same = got == want
            if not same:
                wrong.append(f"{name}={got!r} (want {want!r})")
        score.add(not wrong, f"{item['utterance']!r}: " + ", ".join(wrong))
    return score
