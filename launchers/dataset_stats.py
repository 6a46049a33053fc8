"""The tasks' numbers the docs render: dataset statistics beside the paper's Table 1, and each task's facts.

    python -m launchers.dataset_stats                        # both files, every task (~15 min on one core)
    python -m launchers.dataset_stats --facts-only           # results/task_facts.csv only (seconds)
    python -m launchers.dataset_stats --tasks endgames --label table2_small --merge -- task.data.recipe.episodes=5000

`results/dataset_stats.csv`: each task's recipe (`conf/task/<task>.yaml` `data.recipe`, after the overrides) is
generated in memory and streamed through `lmrl.data.stats.dataset_stats`: the episodes training reads (a recipe is
deterministic), but nothing is written to the dataset cache.  The chess recipes run with one worker (their output
does not depend on the count).  One row per (task, dataset): `dataset` is the `--label` (`default`: the task's own
recipe) or `paper` (Table 1, from `results/paper_table1.csv`); `seconds` is the generation time.  `--merge` keeps
the rows of other (task, dataset) pairs already in the file.

`results/task_facts.csv`: per task, the normalization anchors (`lmrl.report.anchors`) and the worst return the
rules allow (`true_min`), the evaluation protocol (start states in `env.eval_reset_options()`, episodes per start
state), the history window the policy sees and the default dataset size.
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from lmrl.data.stats import STAT_KEYS, dataset_stats
from lmrl.report import TRUE_MINIMUM, anchors

ROOT = Path(__file__).resolve().parent.parent
STATS = ROOT / "results" / "dataset_stats.csv"
FACTS = ROOT / "results" / "task_facts.csv"
PAPER = ROOT / "results" / "paper_table1.csv"
TASKS = ["maze_fo", "maze_po", "text_nav_fo", "text_nav_po", "wordle", "chess", "endgames",
         "twenty_questions", "guess", "car_dealer"]
STAT_COLUMNS = ["task", "dataset", *STAT_KEYS, "seconds"]
FACT_COLUMNS = ["task", "anchor_min", "anchor_avg", "anchor_max", "true_min", "eval_starts", "episodes_per_start",
                "history_window", "dataset_episodes"]


def task_config(task: str, overrides: list[str] = ()):
    """The task's composed config (`task=<task>` plus the overrides)."""
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose("train", overrides=[f"task={task}", *overrides]).task


def measure(task: str, label: str, overrides: list[str]) -> dict:
    """One `dataset_stats.csv` row: the recipe's episodes generated in memory and summarized."""
    recipe = task_config(task, overrides).data.recipe
    if "workers" in recipe:
        recipe.workers = 1
    start = time.perf_counter()
    row = {"task": task, "dataset": label, **dataset_stats(instantiate(recipe))}
    row["seconds"] = round(time.perf_counter() - start, 1)
    print(row, flush=True)
    return row


def paper_rows(tasks: list[str]) -> list[dict]:
    """The paper's Table 1 rows of these tasks, in `dataset_stats.csv`'s columns."""
    lines = [line for line in PAPER.read_text().splitlines() if not line.startswith("#")]
    return [{"task": r["task"], "dataset": "paper", **{k: r[k] for k in STAT_KEYS}, "seconds": ""}
            for r in csv.DictReader(lines) if r["task"] in tasks]


def facts(task: str) -> dict:
    """One `task_facts.csv` row, from the task's config and its env's evaluation start states."""
    cfg, norm = task_config(task), anchors(task)
    env = instantiate(cfg.env)
    return {"task": task, "anchor_min": norm["min"], "anchor_avg": norm["avg"], "anchor_max": norm["max"],
            "true_min": TRUE_MINIMUM.get(task, (norm["min"],))[0], "eval_starts": len(env.eval_reset_options()),
            "episodes_per_start": cfg.eval.episodes_per_start,
            "history_window": "all" if cfg.history_window is None else cfg.history_window,
            "dataset_episodes": cfg.data.recipe.episodes}


def write(path: Path, columns: list[str], rows: list[dict]) -> None:
    """Rows to CSV, floats to 4 significant digits."""
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        for r in rows:
            writer.writerow({k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in r.items()})
    print(f"wrote {path} ({len(rows)} rows)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Dataset statistics beside the paper's Table 1, and task facts.")
    parser.add_argument("--tasks", nargs="+", default=TASKS, choices=TASKS)
    parser.add_argument("--label", default="default", help="the `dataset` column's name for this recipe")
    parser.add_argument("--merge", action="store_true", help="keep the file's rows of other (task, dataset) pairs")
    parser.add_argument("--facts-only", action="store_true", help="write results/task_facts.csv only")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides after `--` (e.g. task.data.recipe.episodes=5000)")
    args = parser.parse_args(argv)

    write(FACTS, FACT_COLUMNS, [facts(task) for task in TASKS])
    if args.facts_only:
        return
    new = [measure(task, args.label, args.overrides) for task in args.tasks] + paper_rows(args.tasks)
    old = list(csv.DictReader(STATS.open())) if args.merge and STATS.exists() else []
    keys = {(r["task"], r["dataset"]) for r in new}
    rows = [r for r in old if (r["task"], r["dataset"]) not in keys] + new
    rows.sort(key=lambda r: (TASKS.index(r["task"]), r["dataset"] == "paper", r["dataset"] != "default"))
    write(STATS, STAT_COLUMNS, rows)


if __name__ == "__main__":
    main()
