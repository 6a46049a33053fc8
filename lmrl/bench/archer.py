"""`python -m lmrl.bench archer` (in `make bench`): what an ArCHer cell of `table2_small` costs on each task, measured.

ArCHer runs in the table on FO maze only, where its defaults were sized; this says what the other cells would cost.
For each task, one `python -m lmrl.train task=T algo=archer` process (one thread) plays `--rounds` rounds at the
table's per-round settings (32 episodes, then 32 updates of 32 transitions; the first round trains the critic only,
the others the actor too) from a `--bc-steps` BC stage and a 500-episode offline buffer (the dialogue tasks and
Wordle on a 2,000-episode dataset), and reports each round's rollout and update seconds and the mean episode length.
The projection is the table's 40 rounds, 15 critic-only and 25 with the actor: 15 x the critic round + 25 x the mean
actor round.  The BC stage, the offline buffer and the evaluations come on top, as for the row's other cells.  A weak
BC stage plays longer episodes where skill ends them early (the mazes, Text-Nav), so there the projection is an
upper bound.

Each task's result is written to `results/bench/archer.json` as soon as it is measured; `--tasks` picks tasks, and
a task already in the file is kept unless `--redo`.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lmrl.records import git_state, machine
from lmrl.threads import thread_env

TASKS = ("maze_fo", "maze_po", "text_nav_fo", "text_nav_po", "wordle", "twenty_questions", "guess", "car_dealer",
         "chess", "endgames")
# table2_small's ArCHer budget (conf/experiment/table2_small.yaml): rounds, of which critic-only.
TABLE_ROUNDS, TABLE_WARMUP = 40, 15
# Tasks whose default dataset is far larger than the 500 episodes the buffer takes: generated at this size here (the
# BC stage's quality, not the dataset's size, is what changes a round's cost).
SMALL_DATA = {"wordle": 2000, "twenty_questions": 2000, "guess": 2000, "car_dealer": 2000}


def measure(task: str, rounds: int, bc_steps: int, cache: Path) -> dict:
    """One short ArCHer run on `task` in a fresh one-thread process; its rounds' timings and the projection."""
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        overrides = [f"task={task}", "algo=archer", f"algo.rounds={rounds}", "algo.warmup_rounds=1",
                     "algo.episodes_per_round=32", "algo.updates_per_round=32", "algo.offline_episodes=500",
                     f"algo.bc.steps={bc_steps}", "algo.bc.batch_size=64", "task.eval.max_starts=1",
                     "task.eval.episodes_per_start=1", "logger=none",
                     f"records.dir={tmp}/records", f"hydra.run.dir={run}"]
        if task in SMALL_DATA:
            overrides.append(f"task.data.recipe.episodes={SMALL_DATA[task]}")
        env = {**os.environ, **thread_env(1), "LMRL_CACHE": str(cache)}
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "lmrl.train", *overrides], env=env, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if proc.returncode:
            raise RuntimeError(f"ArCHer on {task} failed:\n{proc.stderr[-3000:]}")
        with open(run / "rounds.csv") as f:
            rows = list(csv.DictReader(f))
    return {**summarize_rounds(rows), "bc_steps": bc_steps, "process_wall_seconds": round(wall, 1)}


def summarize_rounds(rows: list[dict]) -> dict:
    """A short run's `rounds.csv` rows: each round's seconds and episode length, the critic-only first round's
    seconds, the mean actor round's, and the table's 40 rounds projected from them (module docstring)."""
    if len(rows) < 2:
        raise ValueError(f"{len(rows)} round(s): the projection needs a critic-only round and an actor round")
    seconds = [float(r["rollout_seconds"]) + float(r["update_seconds"]) for r in rows]
    critic, actor = seconds[0], seconds[1:]
    mean_actor = sum(actor) / len(actor)
    return {"rounds": [{"round": int(r["round"]), "rollout_seconds": round(float(r["rollout_seconds"]), 1),
                        "update_seconds": round(float(r["update_seconds"]), 1),
                        "episode_length": round(float(r["episode_length"]), 2)} for r in rows],
            "critic_round_seconds": round(critic, 1), "actor_round_seconds": round(mean_actor, 1),
            "projected_train_hours": round((TABLE_WARMUP * critic + (TABLE_ROUNDS - TABLE_WARMUP) * mean_actor)
                                           / 3600, 2)}


def summary(tasks: dict) -> list[dict]:
    """One row a measured task: its rounds' seconds, episode length, the projection, and the commit it ran."""
    return [{"task": task, "critic_round_s": t["critic_round_seconds"], "actor_round_s": t["actor_round_seconds"],
             "episode_length": round(sum(r["episode_length"] for r in t["rounds"]) / len(t["rounds"]), 1),
             "projected_40_rounds_h": t["projected_train_hours"],
             "commit": (t.get("git_commit") or "?")[:7] + ("+dirty" if t.get("git_dirty") else "")}
            for task, t in tasks.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="results/bench/archer.json")
    parser.add_argument("--tasks", nargs="*", default=list(TASKS))
    parser.add_argument("--rounds", type=int, default=3, help="rounds measured (the first critic-only; at least 2)")
    parser.add_argument("--bc-steps", type=int, default=100)
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("LMRL_CACHE", ".cache/lmrl")))
    parser.add_argument("--redo", action="store_true", help="measure tasks already in --out again")
    args = parser.parse_args()
    if args.rounds < 2:
        parser.error("--rounds must be at least 2 (a critic-only round and an actor round)")
    unknown = sorted(set(args.tasks) - set(TASKS))
    if unknown:
        parser.error(f"unknown task(s) {unknown}; valid: {', '.join(TASKS)}")
    out = Path(args.out)
    result = json.loads(out.read_text()) if out.is_file() else {}
    result.update({"benchmark": "archer", "torch_threads": 1, "table_rounds": TABLE_ROUNDS,
                   "table_critic_only_rounds": TABLE_WARMUP})
    tasks = result.setdefault("tasks", {})
    # Each task keeps the code and machine it was measured with: a later call may measure others elsewhere.
    state = {**machine(), **git_state()}
    for task in args.tasks:
        if task in tasks and not args.redo:
            print(f"{task}: kept from {out}")
            continue
        tasks[task] = {**measure(task, args.rounds, args.bc_steps, args.cache), **state}
        result["summary"] = summary(tasks)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n")
        t = tasks[task]
        print(f"{task}: critic round {t['critic_round_seconds']} s, actor round {t['actor_round_seconds']} s, "
              f"40 rounds ~{t['projected_train_hours']} h", flush=True)


if __name__ == "__main__":
    main()
