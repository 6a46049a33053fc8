"""Run an experiment's sweep: every (task, algo, seed) cell of `conf/experiment/<name>.yaml`.

    python -m launchers.sweep experiment=table2_small            # locally, `sweep.workers` cells at a time
    python -m launchers.sweep experiment=table2                  # Slurm (submitit) when sbatch exists, else locally
    python -m launchers.sweep experiment=table2_small --dry-run  # the cells, what is done, what they cost
    python -m launchers.sweep experiment=table2_small --plan-only  # after a config change: plan.json says what re-runs
    python -m launchers.sweep experiment=table2_small --only task=maze_fo algo=bc,ilql   # a subset

Each cell is one `python -m lmrl.train +experiment=<name> task=.. algo=.. seed=.. <overrides>`;
its JSON record goes to `records.dir`.  A cell whose config already has a record there is
skipped, so a killed sweep resumes by running the same command (a cell killed after its first
checkpoint continues from it: `resume=<its run dir>`).  A cell that fails gets a
`failed` record with the end of its log (the report prints the reason in the table).
`sweep.skip: {<task>: {<algo>: <reason>}}` leaves cells out of the plan (the report prints the reason in
their cells); `sweep.skip=null` on the command line runs them.
Logs: `<records.dir>/logs/<task>__<algo>__s<seed>.log`; the plan: `<records.dir>/plan.json`.
A dry run also prints each cell's tokens, FLOPs, GPU-hours and peak memory per process (launchers/sizing.py).
"""

from __future__ import annotations

import argparse
import csv
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from tqdm import tqdm

from launchers import sizing
from launchers.sizing import BC_PUBLISHER, bc_stage_of
from lmrl.dist import LAUNCHED_HARDWARE, child_env, torchrun_prefix
from lmrl.records import config_hash, failed_record, find_record, require_clean_tree, skip_reason, write_record
from lmrl.threads import thread_env, worker_threads
from lmrl.train import resumable

ROOT = Path(__file__).resolve().parent.parent
CONF = ROOT / "conf"


@dataclass
class Cell:
    """One (task, algo, seed) cell of a sweep: its overrides, config hash, whether a record exists, its status and run
    time, and the BC stage it publishes or starts from."""

    task: str
    algo: str
    seed: int
    overrides: list[str]
    digest: str = ""
    done: bool = False
    status: str = "todo"
    seconds: float = 0.0
    note: str = ""
    stage: str = ""  # 12 hex digits of the BC stage it publishes or starts from (`bc_stage_of`), "" for none

    @property
    def name(self) -> str:
        """`{task}__{algo}__s{seed}`."""
        return f"{self.task}__{self.algo}__s{self.seed}"

    @property
    def run_name(self) -> str:
        """The run directory's name: a changed budget is a new run, never a resumption of the old one."""
        return f"{self.name}__{self.digest}"

    @property
    def label(self) -> str:
        """`{task}/{algo}/s{seed}`, as the plan prints it."""
        return f"{self.task}/{self.algo}/s{self.seed}"


@dataclass
class Sweep:
    """An experiment's plan: its `sweep` spec, the records directory, every cell and each cell's composed config."""

    experiment: str
    spec: dict
    records: Path
    cells: list[Cell] = field(default_factory=list)
    configs: dict = field(default_factory=dict)  # each cell's composed config, by cell name
    allow_dirty: bool = False  # records.allow_dirty: run from a tree with uncommitted changes


def experiments() -> list[str]:
    return sorted(p.stem for p in (CONF / "experiment").glob("*.yaml"))


def compose_cfg(overrides: list[str]):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("train", overrides=overrides)


def parse_only(items: list[str]) -> dict[str, set[str]]:
    """`task=a,b algo=c` -> {"task": {"a", "b"}, "algo": {"c"}}."""
    only = {}
    for item in items:
        key, _, values = item.partition("=")
        if key not in ("task", "algo", "seed") or not values:
            raise SystemExit(f"--only takes task=..., algo=..., seed=... (got {item!r})")
        only[key] = set(values.split(","))
    return only


def plan(experiment: str, extra: list[str], only: dict[str, set[str]], lenient: bool = False) -> Sweep:
    """Every cell of the experiment, its full override list, config hash, and whether a record exists.
    `lenient`: cells whose config does not compose with `extra` are left out instead of failing (the whole
    experiment's plan written beside an `--only` subset: an override may only make sense for the subset)."""
    if experiment not in experiments():
        raise SystemExit(f"unknown experiment {experiment!r}; valid: {', '.join(experiments())}")
    base = compose_cfg([f"+experiment={experiment}", *extra])
    spec = OmegaConf.to_container(base.sweep, resolve=True)
    records = Path(base.records.dir)
    sweep = Sweep(experiment, spec, records, allow_dirty=bool(OmegaConf.select(base, "records.allow_dirty")))
    algo_seeds = spec.get("algo_seeds") or {}
    for seed_index in range(max(len(spec["seeds"]), *(len(v) for v in algo_seeds.values()), 1)):
        for task in spec["tasks"]:
            for algo in spec["algos"]:
                seeds = algo_seeds.get(algo, spec["seeds"])
                if seed_index >= len(seeds):
                    continue
                seed = seeds[seed_index]
                if any(str(v) not in only.get(k, {str(v)}) for k, v in (("task", task), ("algo", algo),
                                                                           ("seed", seed))):
                    continue
                if skip_reason(spec, task, algo) is not None:
                    continue
                # An algorithm's budget (the prompted column's episodes) wins over its task's, and one cell's
                # (a budget chosen from that task's learning curves) over both.
                overrides = [f"+experiment={experiment}", f"task={task}", f"algo={algo}", f"seed={seed}",
                             *(spec.get("task_overrides") or {}).get(task, []),
                             *(spec.get("algo_overrides") or {}).get(algo, []),
                             *((spec.get("cell_overrides") or {}).get(task) or {}).get(algo, []), *extra]
                sweep.cells.append(Cell(task, algo, seed, overrides))
    # Cells of a seed beyond the first wait for every task's first seed: a short sweep still covers the table.
    sweep.cells.sort(key=lambda c: (c.algo in ("prompt",), order_of(spec["seeds"], c.seed)))
    kept = []
    for cell in sweep.cells:
        try:
            cfg = sweep.configs[cell.name] = compose_cfg(cell.overrides)
        except Exception:  # noqa: BLE001 - Hydra raises several kinds for an override a config lacks
            if not lenient:
                raise
            continue
        cell.digest = config_hash(cfg)
        cell.stage = stage_id(bc_stage_of(cfg))
        cell.done = find_record(records, cell.digest) is not None
        cell.status = "done" if cell.done else "todo"
        kept.append(cell)
    sweep.cells = kept
    return sweep


def stage_id(stage: str | None) -> str:
    """A short name for a `bc_stage_of` value in plan.json: the report takes an RL cell's start from the BC cell
    with the same one when its records predate `start_normalized`."""
    return hashlib.sha256(stage.encode()).hexdigest()[:12] if stage else ""


def order_of(seeds: list, seed) -> int:
    return seeds.index(seed) if seed in seeds else len(seeds)


def write_plan(sweep: Sweep, whole: Sweep | None = None) -> None:
    """`<records>/plan.json`: every cell of the experiment (the report's selection of current records).  When
    `--only` ran a subset, `whole` is the experiment's full plan: the subset's cells replace theirs in it, and a
    cell of the same config that the file already has keeps its entry there, since another `--only` sweep beside
    this one may have run it since `whole` was made (the file is read and written under a lock)."""
    sweep.records.mkdir(parents=True, exist_ok=True)
    path = sweep.records / "plan.json"
    with open(sweep.records / ".plan.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if whole is None:
            cells = [plan_entry(c) for c in sweep.cells]
        else:
            ran = {c.name: c for c in sweep.cells}
            on_disk = {(c.get("task"), c.get("algo"), c.get("seed"), c.get("digest")): c for c in plan_cells(path)}
            cells = [plan_entry(ran[c.name]) if c.name in ran
                     else kept_entry(c, on_disk.get((c.task, c.algo, c.seed, c.digest))) for c in whole.cells]
        doc = {"experiment": sweep.experiment, "spec": sweep.spec, "cells": cells}
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(doc, indent=2) + "\n")
        tmp.replace(path)


def plan_entry(cell: Cell) -> dict:
    return {k: v for k, v in asdict(cell).items() if k != "done"}


def kept_entry(cell: Cell, on_disk: dict | None) -> dict:
    """A cell this sweep does not run: the file's entry (its last run's status and time, maybe by a sweep beside
    this one), unless the file has none or still says todo where a record now exists."""
    if on_disk is None or (on_disk.get("status") == "todo" and cell.done):
        return plan_entry(cell)
    return on_disk


def plan_cells(path: Path) -> list[dict]:
    """The cells of an existing plan.json ([] without one, or with one that does not parse)."""
    try:
        return list(json.loads(path.read_text()).get("cells") or [])
    except (OSError, ValueError, AttributeError):
        return []


def cell_vars(threads: int | None, launcher: str = "local") -> dict:
    """What a cell's process gets in its environment: its thread share (None: it sizes its own pool), and the
    launcher's name for its record (`LMRL_LAUNCHER`: sweep-local, sweep-slurm, sweep-submitit_local)."""
    return {**(thread_env(threads) if threads else {}), "TOKENIZERS_PARALLELISM": "false",
            "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1"), "LMRL_LAUNCHER": f"sweep-{launcher}"}


def cell_env(threads: int) -> dict:
    return child_env(**cell_vars(threads, "local"))


def cell_processes(cfg, threads: int, gpus: int | None = None) -> int:
    """How many processes a local cell runs in: a cell whose hardware is started by a launcher (DDP, ZeRO) turns
    its `threads` cores into that many one-thread processes (the cell's global batch, split among them), and on a
    machine with GPUs into one process per GPU it sees, at most `threads` (two ranks on one GPU would stop NCCL:
    "Duplicate GPU detected"); any other cell is one process of `threads` threads.  `gpus`: the visible GPUs
    (None: torch's count)."""
    if cfg is None or cfg.hardware.name not in LAUNCHED_HARDWARE:
        return 1
    gpus = torch.cuda.device_count() if gpus is None else gpus
    return max(1, min(threads, gpus) if gpus else threads)


def train_command(cell: Cell, run_dir: Path, wandb_group: str | None, nproc: int = 1) -> list[str]:
    """The cell's training command (under torchrun when `nproc` > 1); a killed attempt that checkpointed
    continues from its checkpoint."""
    logger = ["logger=wandb", f"logger.group={wandb_group}"] if wandb_group else []
    resume = [f"resume={run_dir}"] if resumable(run_dir) else []
    launcher = torchrun_prefix(nproc) if nproc > 1 else [sys.executable]
    return [*launcher, "-m", "lmrl.train", *cell.overrides, *logger, *resume, f"hydra.run.dir={run_dir}"]


def run_until(cmd: list[str], env: dict, log, timeout_s: float) -> int | str:
    """Run `cmd` (output to `log`) and return its exit code, or "timeout" once it ran `timeout_s`: then it is
    asked to stop (SIGTERM, which torchrun passes on to its workers: a SIGKILL would leave them running) and
    killed if it has not within 30 s."""
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        return "timeout"


def stage_order(todo: list[Cell], configs: dict) -> tuple[dict[str, str | None], dict[str, str]]:
    """Each cell's BC stage (`bc_stage_of`), and the cells that wait for another: an RL cell whose stage a BC
    cell of the same sweep will publish starts after that cell has finished (ok or not), instead of training
    the same stage beside it (a BC run does not hold the stage's lock while it trains, only when it publishes)."""
    stage = {c.name: bc_stage_of(configs[c.name]) if c.name in configs else None for c in todo}
    publisher = {}
    for c in todo:
        if stage[c.name] is not None and configs[c.name].algo.get("_target_") == BC_PUBLISHER:
            publisher.setdefault(stage[c.name], c.name)
    waits_for = {c.name: publisher[stage[c.name]] for c in todo
                 if stage[c.name] in publisher and publisher[stage[c.name]] != c.name}
    return stage, waits_for


def next_cell(pending: list[Cell], stage: dict, waits_for: dict, finished: set, busy: set) -> Cell | None:
    """The first pending cell that waits for nobody unfinished, preferring one whose BC stage no running cell
    has (`busy`): a second cell of a stage another is training would only wait on its lock, holding a worker
    that other cells could use.  None: every pending cell waits."""
    ready = [c for c in pending if waits_for.get(c.name) in (None, *finished)]
    free = [c for c in ready if stage.get(c.name) is None or stage[c.name] not in busy]
    return (free or ready or [None])[0]


def run_cells(todo: list[Cell], stage: dict, waits_for: dict, workers: int, one, done) -> None:
    """`one(cell)` for every cell, `workers` at a time, in `next_cell`'s order; `done(cell)` as each ends."""
    pending, running, finished = list(todo), {}, set()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        while pending or running:
            while pending and len(running) < workers:
                cell = next_cell(pending, stage, waits_for, finished, {stage.get(c.name) for c in running.values()})
                if cell is None:
                    break
                pending.remove(cell)
                running[pool.submit(one, cell)] = cell
            if not running:  # cannot happen: a cell waits only for a publisher, which waits for nobody
                raise RuntimeError(f"cells wait for cells that will not run: {[c.label for c in pending]}")
            ended, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in ended:
                cell = running.pop(future)
                future.result()
                finished.add(cell.name)
                done(cell)


def run_local(sweep: Sweep, runs: Path, workers: int, timeout_min: float, wandb_group: str | None) -> None:
    """The cells to do, `workers` at a time, each a subprocess with its share of the cores; RL cells start
    after the BC cell that publishes their stage (`stage_order`)."""
    todo = [c for c in sweep.cells if not c.done]
    threads = worker_threads(workers)
    logs = sweep.records / "logs"
    logs.mkdir(parents=True, exist_ok=True)

    def one(cell: Cell) -> Cell:
        start = time.perf_counter()
        if find_record(sweep.records, cell.digest):  # done meanwhile (by another launcher on these records)
            cell.status, cell.done = "reused", True
            return cell
        run_dir = runs / cell.run_name
        if run_dir.exists() and not resumable(run_dir):  # a killed attempt with nothing to resume: start over
            shutil.rmtree(run_dir)
        log_path = logs / f"{cell.name}.log"
        nproc = cell_processes(sweep.configs.get(cell.name), threads)
        with open(log_path, "w") as log:
            code = run_until(train_command(cell, run_dir, wandb_group, nproc), cell_env(max(1, threads // nproc)),
                             log, timeout_min * 60)
        cell.seconds = time.perf_counter() - start
        if code == 0 and find_record(sweep.records, cell.digest):
            cell.status = "ok"
        elif code == 0:
            # The run's record carries the config it resolved; a conf/ file edited after planning changes that
            # hash.  No failed record here: it would stand, under the stale hash, beside the run's real one.
            cell.status = "failed"
            cell.note = (f"finished, but wrote no record of the planned config hash {cell.digest}: the config changed "
                         f"after the sweep planned its cells (a conf/ file edited while it ran?); run the sweep again")
        else:
            reason = f"timed out after {timeout_min} min" if code == "timeout" else error_summary(log_path)
            write_record(sweep.records, failed_record(cell.task, cell.algo, cell.seed, cell.digest, reason,
                                                      cell.seconds, log=str(log_path)))
            cell.status, cell.note = "failed", reason
        return cell

    stage, waits_for = stage_order(todo, sweep.configs)
    with tqdm(total=len(todo), desc=sweep.experiment, unit="cell") as bar:
        def done(cell: Cell) -> None:
            bar.set_postfix_str(f"{cell.label} {cell.status} {cell.seconds:.0f}s")
            bar.update()
            if cell.status == "failed":
                tqdm.write(f"FAILED {cell.label}: {cell.note.splitlines()[-1] if cell.note else ''}")

        run_cells(todo, stage, waits_for, workers, one, done)


def error_summary(log_path: Path) -> str:
    """The most telling line of a failed run's log: its last exception line, else its last line."""
    lines = [ln.strip() for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
    for line in reversed(lines):
        if "Error" in line or "Exception" in line or line.startswith("error"):
            return line[-400:]
    return (lines[-1] if lines else "no output")[-400:]


def run_submitit(sweep: Sweep, runs: Path, cluster: str, timeout_min: float, wandb_group: str | None) -> None:
    """One submitit job per cell: Slurm (one task per GPU, rank from SLURM_PROCID) or submitit's local executor;
    RL cells after the BC cell that publishes their stage."""
    import submitit

    todo = [c for c in sweep.cells if not c.done]
    folder = sweep.records / "submitit"
    executor = submitit.AutoExecutor(folder=str(folder), cluster=cluster)
    slurm = sweep.spec.get("slurm") or {}
    gpus = int(slurm.get("gpus_per_node") or 0)
    params = {"timeout_min": int(timeout_min), "name": f"lmrl-{sweep.experiment}"}
    if cluster == "slurm":
        params.update({f"slurm_{k}": v for k, v in (("partition", slurm.get("partition")),
                                                     ("account", slurm.get("account")),
                                                     ("qos", slurm.get("qos"))) if v})
        params.update(nodes=1, gpus_per_node=gpus, tasks_per_node=int(slurm.get("tasks_per_node") or max(1, gpus)),
                      cpus_per_task=int(slurm.get("cpus_per_task") or 8), mem_gb=int(slurm.get("mem_gb") or 64),
                      slurm_array_parallelism=int(sweep.spec.get("workers") or 32))
    executor.update_parameters(**params)
    # The job keeps its own environment (Slurm's task variables included); `env` adds ours.  A Slurm task
    # sizes its threads from its --cpus-per-task; the local executor runs every job at once.
    share = None if cluster == "slurm" else worker_threads(len(todo))
    variables = cell_vars(share, "slurm" if cluster == "slurm" else "submitit_local")
    env = ["env", *(f"{k}={v}" for k, v in variables.items())]

    def command(cell: Cell):
        return submitit.helpers.CommandFunction([*env, *train_command(cell, runs / cell.run_name, wandb_group)],
                                                cwd=str(ROOT))

    # As locally (`stage_order`): an RL cell whose stage a BC cell of the sweep publishes starts after that cell's
    # job has ended -- on Slurm a dependency (afterany: it runs when the BC job failed too, training the stage
    # itself); submitit's local executor has none, so the cell is submitted once that job has ended.
    _, waits_for = stage_order(todo, sweep.configs)
    jobs = {}
    with executor.batch():
        for cell in todo:
            if cell.name not in waits_for:
                jobs[cell.name] = executor.submit(command(cell))
    for cell in todo:
        if cell.name in waits_for:
            producer = jobs[waits_for[cell.name]]
            if cluster == "slurm":
                executor.update_parameters(slurm_additional_parameters={"dependency": f"afterany:{producer.job_id}"})
            else:
                producer.wait()
            jobs[cell.name] = executor.submit(command(cell))
    for cell, job in tqdm([(c, jobs[c.name]) for c in todo], desc=f"{sweep.experiment} ({cluster})", unit="cell"):
        start = time.perf_counter()
        try:
            job.result()
            cell.status = "ok" if find_record(sweep.records, cell.digest) else "failed"
            cell.note = "" if cell.status == "ok" else "the run ended without writing its record"
        except Exception as err:  # noqa: BLE001 - any job failure becomes the cell's reason
            cell.status, cell.note = "failed", str(err).strip().splitlines()[-1][-400:] if str(err).strip() else repr(err)
        if cell.status == "failed":
            write_record(sweep.records, failed_record(cell.task, cell.algo, cell.seed, cell.digest, cell.note,
                                                      time.perf_counter() - start, job_id=job.job_id))


def choose_launcher(requested: str) -> str:
    if requested == "slurm" and shutil.which("sbatch") is None:
        print("sweep.launcher=slurm but there is no sbatch here: running the cells locally instead")
        return "local"
    return requested


def check_critics(sweep: Sweep) -> int:
    """The trained critics of the sweep's finished SWEET-RL cells on pairs their stage never drew
    (`lmrl.algos.sweet_check.check_stages`; measured once per critic, kept beside it), and on the maze, from the
    same loaded stages, the probe's best move against BFS at held-out states (`probe_stages`:
    `probe_bfs_agreement` beside `probe_floor`, always the best single move)."""
    from lmrl.algos.sweet_check import cached_stages, check_stages, has_probe, probe_stages

    rows = []
    for cell in sweep.cells:
        if cell.algo == "sweet" and cell.done:
            cfg = sweep.configs[cell.name]
            try:
                stages = cached_stages(cfg)
                rows.append({"cell": cell.label, "digest": cell.digest, **check_stages(stages)})
                if has_probe(cfg.task.name):
                    probe = probe_stages(stages)
                    rows[-1].update(probe_bfs_agreement=probe["bfs_agreement"], probe_floor=max(probe["floor"].values()))
            except FileNotFoundError as err:  # its stages were trained in another cache: nothing to check here
                print(f"{cell.label}: {err}", flush=True)
                continue
            print(json.dumps(rows[-1]), flush=True)
    if not rows:
        print("no finished SWEET-RL cells in the plan")
        return 1
    out = ROOT / "results" / "critic_checks" / f"{sweep.experiment}.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.exists():  # an --only subset replaces its own cells' rows and keeps the others
        with out.open() as f:
            rows = [r for r in csv.DictReader(f) if r["cell"] not in {row["cell"] for row in rows}] + rows
    keys = list(dict.fromkeys(k for row in rows for k in row))
    with out.open("w", newline="") as f:
        writer = csv.DictWriter(f, keys)
        writer.writeheader()
        writer.writerows(sorted(rows, key=lambda r: r["cell"]))
    print(f"wrote {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m launchers.sweep experiment=<name> [overrides] [--only ...]`: plan the cells, then print the plan and
    its cost (`--dry-run`), write `plan.json` only (`--plan-only`), check critics (`--check-critics`), or run the cells
    that have no record (locally, or through submitit on Slurm). Returns 1 when a cell failed, else 0."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("experiment", help="experiment=<name> (a file in conf/experiment/)")
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides for every cell")
    parser.add_argument("--only", nargs="+", default=[], help="a subset: task=a,b algo=c seed=0")
    parser.add_argument("--workers", type=int, help="cells at a time (default: sweep.workers)")
    parser.add_argument("--launcher", choices=["local", "slurm", "submitit_local"], help="default: sweep.launcher")
    parser.add_argument("--wandb", action=argparse.BooleanOptionalAction, default=None,
                        help="log every run to one W&B group (default: sweep.wandb)")
    parser.add_argument("--runs-dir", type=Path, help="run directories (default: outputs/sweeps/<experiment>)")
    parser.add_argument("--dry-run", action="store_true", help="print the plan and its cost, and stop")
    parser.add_argument("--plan-only", action="store_true",
                        help="write plan.json (cells whose config changed become todo: the report marks their older "
                             "records stale) and stop")
    parser.add_argument("--check-critics", action="store_true",
                        help="SWEET-RL cells with a record: their critics on held-out pairs, written to "
                             "results/critic_checks/<experiment>.csv, and stop")
    sizing.add_arguments(parser)
    args = parser.parse_args(argv)
    experiment = args.experiment.removeprefix("experiment=").removeprefix("+experiment=")
    sweep = plan(experiment, args.overrides, parse_only(args.only))
    use_wandb = bool(sweep.spec.get("wandb", False) if args.wandb is None else args.wandb)
    sweep.spec["wandb"] = use_wandb  # the report logs its table to the same W&B group when the runs did
    done = sum(c.done for c in sweep.cells)
    print(f"{sweep.experiment}: {len(sweep.cells)} cells, {done} with a record in {sweep.records}, "
          f"{len(sweep.cells) - done} to run")
    if args.dry_run:
        todo = [c for c in sweep.cells if not c.done]
        labels = {c.name: c.label for c in todo}
        waits_for = stage_order(todo, sweep.configs)[1]
        for c in sweep.cells:
            after = f"  (after {labels[waits_for[c.name]]}: its BC stage)" if c.name in waits_for else ""
            print(f"  [{'x' if c.done else ' '}] {c.label:42s} {c.digest}  {' '.join(c.overrides[4:])}{after}")
        if not args.no_costs:
            print(sizing.report(sweep, args, args.launcher or sweep.spec.get("launcher", "local")))
        return 0  # a dry run leaves plan.json (the last run's per-cell status and times) as it is
    if args.check_critics:
        return check_critics(sweep)
    if args.plan_only:  # a config changed on purpose: the plan says so before the cells re-run
        write_plan(sweep, plan(experiment, args.overrides, {}, lenient=True) if args.only else None)
        print(f"wrote {sweep.records / 'plan.json'}")
        return 0
    require_clean_tree(sweep.allow_dirty, f"launchers.sweep experiment={experiment}")
    whole = plan(experiment, args.overrides, {}, lenient=True) if args.only else None
    write_plan(sweep, whole)
    group = f"{sweep.experiment}" if use_wandb else None
    launcher = choose_launcher(args.launcher or sweep.spec.get("launcher", "local"))
    timeout = float(sweep.spec.get("timeout_min") or 60)
    runs = (args.runs_dir or ROOT / "outputs" / "sweeps" / sweep.experiment).resolve()
    start = time.perf_counter()
    if launcher == "local":
        run_local(sweep, runs, args.workers or int(sweep.spec.get("workers") or 1), timeout, group)
    else:
        run_submitit(sweep, runs, "slurm" if launcher == "slurm" else "local", timeout, group)
    write_plan(sweep, whole)
    failed = [c for c in sweep.cells if c.status == "failed"]
    ran = sum(c.status == "ok" for c in sweep.cells)
    print(f"{sweep.experiment}: {ran} cells run, {len(failed)} failed, {len(sweep.cells) - ran - len(failed)} reused, "
          f"{time.perf_counter() - start:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
