"""`python -m lmrl.bench oracles` (part of `make bench`): dialogue-oracle throughput, as JSON.

For 20 Questions and Guess My City it answers attribute/topic questions the oracle has never
seen (its caches start empty; guesses skip the encoder and are far cheaper), in batches of 1, 16 and 256, and then the same questions again
(cached, as in dataset generation).  For Car Dealer: the seller-line parser on distinct lines, and
whole scripted conversations against the rule buyer.
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

from tqdm.auto import tqdm

from lmrl.envs.dialogue.oracle_eval import load_heldout, score_guess_city, score_twenty_questions


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
    from lmrl.envs.dialogue.encoder import default_encoder

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
    from lmrl.envs.dialogue.guess_city import CityOracle
    from lmrl.envs.dialogue.twenty_questions import TwentyQuestionsOracle

    result = {}
    oracle = TwentyQuestionsOracle()
    result["twenty_questions"] = throughput(TwentyQuestionsOracle, questions_20q(n),
                                            [o.name for o in oracle.kb.objects])
    print("twenty_questions", json.dumps(result["twenty_questions"]), flush=True)
    city = CityOracle()
    result["guess"] = throughput(CityOracle, questions_city(n), [c.name for c in city.kb.cities])
    print("guess", json.dumps(result["guess"]), flush=True)
    result["car_dealer"] = bench_car_dealer(n)
    print("car_dealer", json.dumps(result["car_dealer"]), flush=True)
    return result


def bench_car_dealer(n: int) -> dict:
    """The seller-line parser on distinct lines (cache cleared) and whole conversations (parser, rule
    buyer and scripted seller) per second."""
    from data_gen.car_dealer import generate
    from lmrl.envs.dialogue.car_catalogue import parse_seller

    start = time.perf_counter()
    episodes = list(generate(300, seed=1))
    seconds = time.perf_counter() - start
    lines = list(dict.fromkeys(t.text.strip() for e in episodes for t in e.turns if t.is_action))[:n]
    parse_seller.cache_clear()
    parse_start = time.perf_counter()
    for line in lines:
        parse_seller(line)
    parse_seconds = time.perf_counter() - parse_start
    seller_lines = sum(e.num_actions for e in episodes)
    return {"new_lines_parsed_per_s": len(lines) / parse_seconds, "lines": len(lines),
            "conversations_per_s": len(episodes) / seconds, "seller_lines_per_s": seller_lines / seconds}


def compare_lm(model: str, limit: int | None, buyers: int = 10,
               tasks=("twenty_questions", "guess_city", "car_dealer")) -> dict:
    """Held-out accuracy of an LM oracle next to the knowledge-grounded one, same questions."""
    from lmrl.envs.dialogue.guess_city import CityOracle
    from lmrl.envs.dialogue.lm_oracle import LMQuestionOracle
    from lmrl.envs.dialogue.twenty_questions import TwentyQuestionsOracle
    from lmrl.models.resolve import LMSpec

    result = {"model": model}
    for task, rules, scorer in (("twenty_questions", TwentyQuestionsOracle(), score_twenty_questions),
                                ("guess_city", CityOracle(), score_guess_city)):
        if task not in tasks:
            continue
        items = load_heldout("twenty_questions" if task == "twenty_questions" else "guess_my_city")[:limit]
        kb_score = scorer(rules, items)
        lm = LMQuestionOracle(rules, task, LMSpec(model=model))
        start = time.perf_counter()
        lm_score = scorer(lm, items)
        seconds = time.perf_counter() - start
        result[task] = {"items": len(items), "kb_accuracy": kb_score.accuracy, "lm_accuracy": lm_score.accuracy,
                        "lm_seconds_per_answer": seconds / len(items), "lm_failures_sample": lm_score.failures[:15]}
        print(task, json.dumps({k: v for k, v in result[task].items() if k != "lm_failures_sample"}), flush=True)
    if "car_dealer" in tasks:
        result["car_dealer"] = compare_buyer(model, buyers)
        print("car_dealer", json.dumps({k: v for k, v in result["car_dealer"].items() if k != "sample"}), flush=True)
    return result


def compare_buyer(model: str, buyers: int) -> dict:
    """The expert scripted seller against the LM buyer and against the rule buyer, on the first
    `buyers` eval buyers: how often a decision is readable, sales, mean reward, time per reply."""
    from data_gen.car_dealer import SellerMix, play
    from lmrl.envs.dialogue.car_dealer import CarDealerEnv

    row = {"buyers": buyers}
    for name, oracle in (("rules", None), ("lm", {"kind": "lm", "model": model})):
        env = CarDealerEnv(oracle=oracle)
        options = env.eval_reset_options()[:buyers]
        start = time.perf_counter()
        episodes = [play(env, random.Random(f"lmrl-car-best:0:{i}"), "expert", SellerMix(), o, seed=i)
                    for i, o in enumerate(tqdm(options, desc=f"car dealer, {name} buyer", unit="conversation"))]
        seconds = time.perf_counter() - start
        replies = sum(e.num_actions for e in episodes)
        row[name] = {"sales": sum(e.success for e in episodes) / len(episodes),
                     "mean_return": sum(e.total_return for e in episodes) / len(episodes),
                     "mean_seller_lines": replies / len(episodes), "seconds_per_reply": seconds / replies,
                     "ended_before_the_cap": sum(e.num_actions < env.max_utterances // 2 for e in episodes)
                     / len(episodes)}
        if name == "lm":
            row["sample"] = [t.text for t in episodes[0].turns[:12]]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=None)
    parser.add_argument("--questions", type=int, default=2048)
    parser.add_argument("--lm", default=None, help="score this model as the oracle on the held-out sets")
    parser.add_argument("--limit", type=int, default=None, help="held-out items per task (--lm)")
    parser.add_argument("--buyers", type=int, default=10, help="eval buyers the LM plays against the expert (--lm)")
    parser.add_argument("--tasks", nargs="*", default=["twenty_questions", "guess_city", "car_dealer"],
                        help="which comparisons to run (--lm)")
    args = parser.parse_args()
    if args.lm:
        result = compare_lm(args.lm, args.limit, args.buyers, args.tasks)
        out = args.out or f"results/bench/oracle_lm_{Path(args.lm).name}.json"
    else:
        result = bench(args.questions)
        out = args.out or "results/bench/oracles.json"
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
