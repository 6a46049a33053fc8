"""`python -m lmrl.bench_oracles` (part of `make bench`): dialogue-oracle throughput, as JSON.

For 20 Questions and Guess My City it answers attribute/topic questions the oracle has never
seen (its caches start empty; guesses skip the encoder and are far cheaper), in batches of 1, 16 and 256, and then the same questions again
(cached, as in dataset generation).
Writes `results/bench/oracles.json`.

`--lm MODEL` (a local model directory or `smollm2`) instead scores that model as the
oracle on the held-out question sets next to the knowledge-grounded oracle, with its time
per answer, and writes `results/bench/oracle_lm_<name>.json`.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import time
from pathlib import Path

from lmrl.envs.oracle_eval import load_heldout, score_guess_city, score_twenty_questions


def questions_20q(n: int, seed: int = 0) -> list[str]:
    """Distinct attribute questions: the generator's phrasings crossed with conversational lead-ins."""
    from data_gen.twenty_questions import phrasebook

    book = phrasebook()
    return _reworded([q for texts in book.questions.values() for q in texts], n, seed)


def _reworded(pool: list[str], n: int, seed: int) -> list[str]:
    """`n` distinct questions: the pool with conversational lead-ins, shuffled."""
    prefixes = ["", "So, ", "OK, ", "Hmm, ", "Tell me: ", "Quick one: ", "Next question: ", "Well, ", "And "]
    out = list(dict.fromkeys(p + q for q in pool for p in prefixes))
    random.Random(seed).shuffle(out)
    return out[:n]


def questions_city(n: int, seed: int = 0) -> list[str]:
    from data_gen.guess_city import phrasebook

    book = phrasebook()
    return _reworded([q for texts in book.open.values() for q in texts], n, seed)


def throughput(make_oracle, questions: list[str], secrets: list[str]) -> dict:
    from lmrl.envs.encoder import default_encoder

    row = {}
    for batch in (1, 16, 256):
        oracle = make_oracle()
        oracle.parse("warm up")  # loads the encoder and builds the phrasing index outside the timing
        default_encoder().clear_cache()
        qs = questions[: 256 if batch == 1 else len(questions)]
        start = time.perf_counter()
        for i in range(0, len(qs), batch):
            oracle.answer_batch([secrets[(i + k) % len(secrets)] for k in range(len(qs[i:i + batch]))], qs[i:i + batch])
        row[f"new_questions_per_s_batch_{batch}"] = len(qs) / (time.perf_counter() - start)
    start = time.perf_counter()
    for i in range(0, len(questions), 256):
        oracle.answer_batch([secrets[(i + k) % len(secrets)] for k in range(len(questions[i:i + 256]))],
                            questions[i:i + 256])
    row["cached_questions_per_s"] = len(questions) / (time.perf_counter() - start)
    row["questions"] = len(questions)
    return row


def bench(n: int) -> dict:
    from lmrl.envs.guess_city import CityOracle
    from lmrl.envs.twenty_questions import TwentyQuestionsOracle

    result = {}
    oracle = TwentyQuestionsOracle()
    result["twenty_questions"] = throughput(TwentyQuestionsOracle, questions_20q(n),
                                            [o.name for o in oracle.kb.objects])
    print("twenty_questions", json.dumps(result["twenty_questions"]), flush=True)
    city = CityOracle()
    result["guess"] = throughput(CityOracle, questions_city(n), [c.name for c in city.kb.cities])
    print("guess", json.dumps(result["guess"]), flush=True)
    return result


def compare_lm(model: str, limit: int | None) -> dict:
    """Held-out accuracy of an LM oracle next to the knowledge-grounded one, same questions."""
    from lmrl.envs.guess_city import CityOracle
    from lmrl.envs.lm_oracle import LMQuestionOracle, LMSpec
    from lmrl.envs.twenty_questions import TwentyQuestionsOracle

    result = {"model": model}
    for task, rules, scorer in (("twenty_questions", TwentyQuestionsOracle(), score_twenty_questions),
                                ("guess_city", CityOracle(), score_guess_city)):
        items = load_heldout("twenty_questions" if task == "twenty_questions" else "guess_my_city")[:limit]
        kb_score = scorer(rules, items)
        lm = LMQuestionOracle(rules, task, LMSpec(model=model))
        start = time.perf_counter()
        lm_score = scorer(lm, items)
        seconds = time.perf_counter() - start
        result[task] = {"items": len(items), "kb_accuracy": kb_score.accuracy, "lm_accuracy": lm_score.accuracy,
                        "lm_seconds_per_answer": seconds / len(items), "lm_failures_sample": lm_score.failures[:15]}
        print(task, json.dumps({k: v for k, v in result[task].items() if k != "lm_failures_sample"}), flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=None)
    parser.add_argument("--questions", type=int, default=2048)
    parser.add_argument("--lm", default=None, help="score this model as the oracle on the held-out sets")
    parser.add_argument("--limit", type=int, default=None, help="held-out items per task (--lm)")
    args = parser.parse_args()
    if args.lm:
        result = compare_lm(args.lm, args.limit)
        out = args.out or f"results/bench/oracle_lm_{Path(args.lm).name}.json"
    else:
        result = bench(args.questions)
        out = args.out or "results/bench/oracles.json"
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
