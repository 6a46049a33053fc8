"""Learning curves: what a budget buys, per task and algorithm, in one command.

    python -m launchers.curves --task maze_fo --algos bc filtered_bc mc ilql --points 8
    python -m launchers.curves --task maze_fo --algos ilql --seeds 0 1 2 -- algo.epochs=4 algo.lr=3e-4
    python -m launchers.curves --task maze_fo --algos ilql --tag 4x --name maze_fo_ilql_budget --merge -- algo.steps=1600

Each (algorithm, seed) is one `python -m lmrl.train task=<task> algo=<algo> seed=<seed>
algo.curve_points=<points> <overrides>` run (offline algorithms write `<run>/curve.csv`: the
training loss, the headline policy's score on a few episodes per start state and, for value
algorithms, the critic's health on held-out episodes, at evenly spread steps; online algorithms
write `rounds.csv`, one row per round of rollouts).  The rows are gathered into
`results/curves/<task>.csv` and drawn in `results/curves/<task>.png`: score, loss and critic
health against epochs (rounds for online algorithms).  Runs live under
`results/curves/runs/<task>/` (git-ignored; `--runs` puts them elsewhere); a run whose curve is complete is
reused, so adding an algorithm re-runs only that one.  `--workers` runs go at once, each with its share of the cores.
A variant of an algorithm (other overrides) needs its own `--tag`: its runs and its rows are
`<algo> (<tag>)`, so a finished run of other settings is never reused for it.  `--name` writes
`<name>.{csv,png}` instead of `<task>.*`; `--merge` keeps the rows already there (of other algorithms,
tags or seeds) and replaces only this invocation's, so one study can gather several variants.
`--nproc N` trains each run in N processes (`torchrun --standalone`, `hardware=ddp`: the same global
batches, split).  A run killed after a checkpoint (the session ended, the machine went away) is continued
from it by the same command, its curve points before the checkpoint kept.  `--collect` trains nothing: it
gathers the points the runs have written so far, finished or not, so a curve that takes several sessions can be
looked at (and committed) between them.

    python -m launchers.curves --records results/records/table2_small/wordle__archer__s*.json --name wordle_archer

`--records` trains nothing either: it draws the curves of a sweep's cells from their JSON records (each names its
run directory), each row carrying the cell's start score (its BC stage, held out) and final score, drawn as a
dashed line and a star beside the rollouts.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from lmrl.dist import child_env, torchrun_prefix
from lmrl.threads import worker_threads
from lmrl.train import resumable

ROOT = Path(__file__).resolve().parent.parent
ONLINE = {"ppo", "online_filtered_bc", "group_pg", "archer"}
# Online runs' panels (rounds.csv columns), each drawn where some run has it.
ONLINE_PANELS = [("normalized_score", "online: rollout normalized score"),
                 ("kl", "online: KL to the BC policy, per token"),
                 ("explained_variance", "PPO value head: explained variance\n(round's targets, before its update)"),
                 ("critic/spearman_states", "ArCHer critic: per-state Spearman(V, return)\n(round's rollouts)")]


def curve_file(algo: str) -> str:
    """The file a run writes its curve to: one row per round (online) or per curve point (offline)."""
    return "rounds.csv" if algo in ONLINE else "curve.csv"


def run_dir(runs: Path, task: str, algo: str, seed: int, tag: str = "") -> Path:
    return runs / task / (f"{algo}-{tag}__s{seed}" if tag else f"{algo}__s{seed}")


def label(algo: str, tag: str = "") -> str:
    return f"{algo} ({tag})" if tag else algo


def train_command(task: str, algo: str, seed: int, args, directory: Path, resume: bool = False) -> list[str]:
    """The `lmrl.train` command of one curve: under `torchrun --standalone` with `hardware=ddp` when `--nproc` is
    above 1 (unless the overrides choose the hardware), continuing the run in `directory` with `resume`."""
    points = [] if algo in ONLINE else [f"++algo.curve_points={args.points}",
                                        f"++algo.curve_episodes_per_start={args.episodes_per_start}"]
    launcher, hardware = [sys.executable], []
    if args.nproc > 1:
        launcher = torchrun_prefix(args.nproc)
        hardware = [] if any(o.lstrip("+").startswith("hardware=") for o in args.overrides) else ["hardware=ddp"]
    return [*launcher, "-m", "lmrl.train", f"task={task}", f"algo={algo}", f"seed={seed}", *points, *hardware,
            *args.overrides, f"hydra.run.dir={directory}", "records.dir=null",
            *([f"resume={directory}"] if resume else [])]


def run_one(task: str, algo: str, seed: int, args, threads: int) -> Path:
    """Train one curve (skipped when its run finished before; resumed when it was killed after a checkpoint,
    instead of starting over); returns the run directory.  With `--nproc` processes each gets its share of
    `threads`."""
    directory = run_dir(args.runs, task, algo, seed, args.tag)
    if (directory / "metrics.json").exists():
        return directory
    resume = resumable(directory)
    cmd = train_command(task, algo, seed, args, directory, resume)
    directory.mkdir(parents=True, exist_ok=True)
    per_process = str(max(1, threads // args.nproc))
    env = child_env(OMP_NUM_THREADS=per_process, MKL_NUM_THREADS=per_process)
    with open(directory / "curve_run.log", "a" if resume else "w") as log:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed; see {directory / 'curve_run.log'}")
    return directory


def collected(runs: Path, task: str, algo: str, seed: int, tag: str = "") -> Path:
    """The run directory of a `--collect`: it must have written a point; an unfinished run is named on stdout."""
    directory = run_dir(runs, task, algo, seed, tag)
    curve = directory / curve_file(algo)
    if not curve.exists():
        raise SystemExit(f"--collect: {curve} does not exist (no point written yet); "
                         f"run the same command without --collect to train it")
    if not (directory / "metrics.json").exists():
        with open(curve) as f:
            points = sum(1 for _ in f) - 1
        print(f"{directory}: unfinished, {points} points so far")
    return directory


def rows_of(directory: Path, task: str, algo: str, seed: int, tag: str = "") -> list[dict]:
    """The run's curve rows with `task, algo, seed` and an x axis: `epochs` (offline) or `round`."""
    with open(directory / curve_file(algo)) as f:
        return [{"task": task, "algo": label(algo, tag), "seed": seed, **row} for row in csv.DictReader(f)]


def record_rows(path: Path) -> list[dict]:
    """A sweep cell's curve rows from its JSON record: its run directory's rounds.csv (online) or curve.csv, each row
    with the record's start and final held-out scores and commit."""
    record = json.loads(Path(path).read_text())
    directory = Path(record.get("run_dir") or "")
    name = curve_file(record["algo"])
    if not (directory / name).exists():
        raise SystemExit(f"--records: {path} names run directory {directory or '(none)'}, which has no {name} "
                         f"(the run was elsewhere or is gone)")
    extra = {"start_normalized": record.get("start_normalized", ""), "final_normalized": record["normalized_score"],
             "git_commit": record.get("git_commit", "")}
    return [{**row, **extra} for row in rows_of(directory, record["task"], record["algo"], record["seed"])]


def merged(path: Path, rows: list[dict]) -> list[dict]:
    """The rows already in `path`, but those of the (algo, seed) pairs `rows` has, followed by `rows`."""
    if not path.exists():
        return rows
    new = {(r["algo"], str(r["seed"])) for r in rows}
    with open(path) as f:
        kept = [r for r in csv.DictReader(f) if (r["algo"], r["seed"]) not in new]
    return kept + rows


def write_csv(rows: list[dict], path: Path) -> None:
    keys = list(dict.fromkeys(k for row in rows for k in row))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)


def plot(rows: list[dict], path: Path, task: str) -> None:
    """Normalized score, training loss and critic health (per-state Spearman, probe) against epochs; online
    algorithms' rollout scores, KL to their BC policy and PPO's value-head health against rounds in panels of
    their own."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    panels = [("normalized_score", "normalized score (curve episodes)"), ("train_loss", "training loss"),
              ("critic/spearman_states", "critic: per-state Spearman(V, mean return), held out"),
              ("critic/probe_agreement", "critic: task probe agreement")]
    panels.append(("critic/value_bias", "critic: mean V - return, held out"))
    online = [r for r in rows if r["algo"].split(" (")[0] in ONLINE]
    offline = [r for r in rows if r not in online]
    # A panel no run has a point in (the probe on a task without one) is left out.
    panels = [(key, title) for key, title in panels if any(r.get(key) not in (None, "") for r in offline)]
    # Filtered BC's epochs are of its small filtered set (100s where the others run 1-10): a log axis keeps both
    # legible.  A 4x-budget variant (a ~25x span) stays linear.
    spans = [float(r["epochs"]) for r in offline if float(r["epochs"] or 0) > 0]
    log_x = bool(spans) and max(spans) > 50 * min(spans)
    online_panels = [(key, title) for key, title in ONLINE_PANELS if any(r.get(key) not in (None, "") for r in online)]
    width = len(panels) + len(online_panels)
    fig, axes = plt.subplots(1, width, figsize=(4.2 * width, 3.6), squeeze=False)
    axes = list(axes[0])
    # One colour per run in every panel (a panel shows only the runs with a point in it).
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colour = {run: cycle[i % len(cycle)] for i, run in enumerate(groups(rows))}
    for ax, (key, title) in zip(axes, panels):
        for (algo, seed), series in groups([r for r in offline if r.get(key) not in (None, "")]).items():
            ax.plot([float(r["epochs"]) for r in series], [float(r[key]) for r in series], marker="o", ms=3,
                    label=f"{algo} s{seed}", color=colour[(algo, seed)])
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("epochs (log)" if log_x else "epochs")
        if log_x:
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())
        losses = [float(r[key]) for r in offline if r.get(key) not in (None, "")] if key == "train_loss" else []
        if loss_scale(losses) == "log":
            ax.set_yscale("log")
            ax.yaxis.set_minor_formatter(NullFormatter())
    for ax, (key, title) in zip(axes[len(panels):], online_panels):
        for (algo, seed), series in groups([r for r in online if r.get(key) not in (None, "")]).items():
            ax.plot([int(r["round"]) for r in series], [float(r[key]) for r in series], marker="o",
                    ms=3, label=f"{algo} s{seed}", color=colour[(algo, seed)])
            if key == "normalized_score" and series[0].get("start_normalized") not in (None, ""):
                # A record's cell: its start (the BC stage, held out) and its final held-out score
                ax.axhline(float(series[0]["start_normalized"]), ls="--", lw=1, color=colour[(algo, seed)])
                ax.plot([int(series[-1]["round"]) + 1], [float(series[-1]["final_normalized"])], marker="*", ms=10,
                        color=colour[(algo, seed)])
        if any(line.get_marker() == "*" for line in ax.lines):  # a record's start and final marks are drawn
            title += "\n(dashed: start, star: final; both held out)"
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("round")
    for ax in axes:
        if ax.lines:
            ax.legend(fontsize=7)
    fig.suptitle(f"{task}: learning curves (python -m launchers.curves)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def loss_scale(losses: list[float]) -> str:
    """A log axis for a loss that falls by a decade or more; within one decade a log axis has no labelled tick
    in range (the endgames' losses, 1.12-1.23, showed none), so it stays linear."""
    return "log" if losses and min(losses) > 0 and max(losses) >= 10 * min(losses) else "linear"


def groups(rows: list[dict]) -> dict[tuple[str, int], list[dict]]:
    out: dict[tuple[str, int], list[dict]] = {}
    for r in rows:
        out.setdefault((r["algo"], r["seed"]), []).append(r)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", help="the task (required unless --records)")
    parser.add_argument("--algos", nargs="+", default=["bc", "filtered_bc", "mc", "ilql"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--points", type=int, default=8, help="curve points per offline run")
    parser.add_argument("--episodes-per-start", type=int, default=2, help="episodes per start state at a point")
    parser.add_argument("--nproc", type=int, default=1,
                        help="processes per run (torchrun, hardware=ddp): a run's cores, its batches split among them")
    parser.add_argument("--workers", type=int, default=1,
                        help="runs at once (each gets cores / workers threads, or $OMP_NUM_THREADS)")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "curves")
    parser.add_argument("--runs", type=Path, default=None,
                        help="where the run directories live (default <out>/runs; one outside the checkout outlasts it)")
    parser.add_argument("--tag", default="", help="names a variant (other overrides): its own runs and rows")
    parser.add_argument("--name", default=None, help="output <name>.{csv,png} (default: the task)")
    parser.add_argument("--merge", action="store_true", help="keep the output's other rows, replace only these runs'")
    parser.add_argument("--collect", action="store_true",
                        help="train nothing: gather the points the runs have written so far, finished or not")
    parser.add_argument("--records", nargs="+", type=Path, default=None,
                        help="train nothing: draw these sweep records' runs (their run_dir), --name required")
    parser.add_argument("overrides", nargs="*", help="lmrl.train overrides for every run (after --)")
    args = parser.parse_args(argv)
    if args.records:
        if not args.name:
            parser.error("--records needs --name (the output's <name>.{csv,png})")
        rows = [row for path in args.records for row in record_rows(path)]
        tasks = sorted({r["task"] for r in rows})
        if len(tasks) != 1:
            parser.error(f"--records draws one task's cells a figure; these records are of {', '.join(tasks)}")
        out = args.out / args.name
        write_csv(rows, out.with_suffix(".csv"))
        plot(rows, out.with_suffix(".png"), tasks[0])
        print(f"{len(rows)} curve rows -> {out.with_suffix('.csv')}, {out.with_suffix('.png')}")
        return
    if not args.task:
        parser.error("--task is required (or --records)")
    args.runs = args.runs or args.out / "runs"
    threads = worker_threads(args.workers)
    jobs = [(a, s) for a in args.algos for s in args.seeds]
    if args.collect:
        dirs = [collected(args.runs, args.task, algo, seed, args.tag) for algo, seed in jobs]
    else:
        with ThreadPoolExecutor(args.workers) as pool:
            dirs = list(pool.map(lambda job: run_one(args.task, *job, args, threads), jobs))
    rows = [row for (algo, seed), d in zip(jobs, dirs) for row in rows_of(d, args.task, algo, seed, args.tag)]
    out = args.out / (args.name or args.task)
    if args.merge:
        rows = merged(out.with_suffix(".csv"), rows)
    write_csv(rows, out.with_suffix(".csv"))
    plot(rows, out.with_suffix(".png"), args.task)
    print(f"{len(rows)} curve rows -> {out.with_suffix('.csv')}, {out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
