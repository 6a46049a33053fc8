"""Score an oracle on a held-out question set (tests/envs/heldout/, see its README).

Shared by the acceptance tests (knowledge-grounded oracles, >= 95%) and by
`python -m lmrl.bench oracles --lm ...`, which scores an LM oracle on the same sets.
Each scorer returns `Score(correct, total, failures)`, failures as readable strings.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

HELDOUT_DIR = Path(__file__).resolve().parents[3] / "tests" / "envs" / "heldout"
DEV_DIR = HELDOUT_DIR.parent / "dev"  # development sets: iterate on these, never on the held-out ones


@dataclass
class Score:
    correct: int = 0
    total: int = 0
    failures: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)  # confidently wrong answers (`score_yes_no`)

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
        description = f"{item['object']}: {item['question']!r} -> {reply.text!r} (want {item['answer']!r})"
        score.add(ok, description)
        if reply_kind(reply.text) in ("yes", "no") and reply_kind(item["answer"]) in ("yes", "no") and not ok:
            score.wrong.append(description)
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
            ok = ok and not _names_city(oracle, item["city"], text)
        description = f"{item['city']}: {item['question']!r} -> {text!r} (want {expect})"
        score.add(ok, description)
        if kind in ("yes", "no") and reply_kind(text) in ("yes", "no") and reply_kind(text) != kind:
            score.wrong.append(description)
    return score


_REPLY_KIND = re.compile(r"^(?:(yes)|(no)|(i can'?t answer|i cannot answer))\b")


def reply_kind(text: str) -> str:
    """"yes", "no", "unknown" (the oracle says it cannot answer) or "other" (a sentence that
    is neither), read from the start of a reply."""
    found = _REPLY_KIND.match(_plain(text).replace("\u2019", "'"))
    if found is None:
        return "other"
    return ("yes", "no", "unknown")[[g is not None for g in found.groups()].index(True)]


def score_yes_no(oracle, items: list[dict], key: str) -> Score:
    """Everyday yes/no questions (`*_everyday.jsonl`): right when the reply starts with the
    person's answer, or says it cannot answer an item marked `unclear`; WRONG (listed in
    `score.wrong`) when it gives the other yes/no answer or counts as a winning guess.  A reply
    that names the secret (cities) or is neither yes, no nor "I can't answer" is not right."""
    score = Score()
    replies = oracle.answer_batch([i[key] for i in items], [i["question"] for i in items])
    for item, reply in zip(items, replies):
        want, kind = item["answer"].rstrip(".").lower(), reply_kind(reply.text)
        wrong = reply.correct_guess or (kind in ("yes", "no") and kind != want)
        ok = not wrong and (kind == want or (kind == "unknown" and item.get("unclear", False)))
        if ok and key == "city":
            ok = not _names_city(oracle, item["city"], reply.text)
        description = (f"{item[key]}: {item['question']!r} -> {reply.text!r} "
                       f"(want {item['answer']!r}{' or unknown' if item.get('unclear') else ''}, {item['family']})")
        score.add(ok, description)
        if wrong:
            score.wrong.append(description)
    return score


def _names_city(oracle, name: str, text: str) -> bool:
    words = f" {_words(text)} "
    return any(f" {_words(n)} " in words for n in oracle.kb.city(name).names)


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


# name -> (task, scorer): every held-out set in tests/envs/heldout/ but the car dealer's (a parser set).
HELDOUT_SETS = {
    "twenty_questions": ("twenty_questions", score_twenty_questions),
    "twenty_questions_independent": ("twenty_questions", score_twenty_questions),
    "twenty_questions_everyday": ("twenty_questions", lambda oracle, items: score_yes_no(oracle, items, "object")),
    "guess_my_city": ("guess_city", score_guess_city),
    "guess_my_city_everyday": ("guess_city", lambda oracle, items: score_yes_no(oracle, items, "city")),
    "twenty_questions_everyday_v2": ("twenty_questions", lambda oracle, items: score_yes_no(oracle, items, "object")),
    "guess_my_city_everyday_v2": ("guess_city", lambda oracle, items: score_yes_no(oracle, items, "city")),
    "twenty_questions_everyday_v3": ("twenty_questions", lambda oracle, items: score_yes_no(oracle, items, "object")),
    "guess_my_city_everyday_v3": ("guess_city", lambda oracle, items: score_yes_no(oracle, items, "city")),
    "twenty_questions_everyday_v4": ("twenty_questions", lambda oracle, items: score_yes_no(oracle, items, "object")),
    "twenty_questions_everyday_v5": ("twenty_questions", lambda oracle, items: score_yes_no(oracle, items, "object")),
    "twenty_questions_everyday_v6": ("twenty_questions", lambda oracle, items: score_yes_no(oracle, items, "object")),
}
DEV_SETS = {"twenty_questions_dev": HELDOUT_SETS["twenty_questions_everyday"],
            "twenty_questions_dev2": HELDOUT_SETS["twenty_questions_everyday"],
            "guess_my_city_dev": HELDOUT_SETS["guess_my_city_everyday"]}


def main(argv: list[str] | None = None) -> None:
    """`python -m lmrl.envs.dialogue.oracle_eval [SET ...] [--failures]`: the knowledge-grounded oracles'
    accuracy on the held-out sets (all by default), with confidently wrong answers counted."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("sets", nargs="*", help=f"any of {', '.join(HELDOUT_SETS)} (default: all)")
    parser.add_argument("--failures", action="store_true", help="list every item not answered right")
    parser.add_argument("--dev", action="store_true", help=f"the development sets instead ({', '.join(DEV_SETS)})")
    args = parser.parse_args(argv)
    sets, directory = (DEV_SETS, DEV_DIR) if args.dev else (HELDOUT_SETS, HELDOUT_DIR)
    unknown = sorted(set(args.sets) - set(sets))
    if unknown:
        parser.error(f"unknown set(s) {unknown}; choose from {list(sets)}")
    for name in args.sets or sets:
        task, scorer = sets[name]
        if task == "twenty_questions":
            from lmrl.envs.dialogue.twenty_questions import default_oracle
        else:
            from lmrl.envs.dialogue.guess_city import default_oracle
        score = scorer(default_oracle(), load_heldout(name, directory))
        print(f"{name}: {score.accuracy:.1%} right ({score.correct}/{score.total}), {len(score.wrong)} wrong")
        for line in score.failures if args.failures else ():
            print(("  WRONG " if line in score.wrong else "  ") + line)


if __name__ == "__main__":
    main()
