"""One JSON record per evaluation: what the results table is built from.

A record names the cell it fills (task, algo, model, hardware, seed) and the precision it trained in
(`precision=auto` resolves by machine: bf16 where the CPU computes it natively, else fp32), the scores (raw return
mean/std/stderr, normalized score, success rate, invalid-turn rate, episodes; an RL run also its start's,
`start_*`), and where it came from (`provenance`: hash of the resolved config, git commit, whether the tree
was dirty and a hash of its diff, the machine's CPU or GPU, torch's version, the launcher, wall time).
Records live in a directory, one file each,
named `<task>__<algo>__s<seed>__<config hash>.json`; a run whose config hash already has a
record there is skipped when `records.reuse=true`, so an interrupted sweep resumes where it
stopped.  Sweeps also write `failed` records (with the error) so the table can say why a
cell is empty.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import socket
import subprocess
from datetime import datetime, timezone
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from lmrl.utils import atomic_write_text

# Keys that do not change what a run computes: where things are written, logging, resumption (`cache_dir`
# is dropped at any depth, see config_hash).
HASH_FREE = ("resume", "hydra", "logger", "checkpoint", "records", "sweep")
# Options added after records were made, at the value that reproduces the behaviour from before they existed:
# left out of the hash while they hold it, so adding an option does not orphan every record made without it.
# Add an entry together with the option (dotted path -> neutral value); never change a value once listed.
NEUTRAL_DEFAULTS = {"algo.rerank_temperature": 0.0, "task.moves_per_sequence": 1,
                    "algo.critic_stage.normalize": "none", "algo.unseen_pairs": 128,
                    "algo.critic_stage.halves": False, "algo.drop_worst": False, "algo.cap_ties": False,
                    "algo.value_lr": None, "algo.bc_coef": 0.0,
                    # debug=smoke's ArCHer warm-up (conf/debug/smoke.yaml)
                    "smoke.warmup_rounds": 1, "smoke.offline_episodes": 4,
                    # early stopping on validation episodes (conf/algo/bc.yaml), off, in a run and its BC stage
                    "algo.keep_best": False, "algo.patience": 0, "algo.bc.keep_best": False, "algo.bc.patience": 0,
                    "algo.keep_best_margin": 0.0, "algo.bc.keep_best_margin": 0.0,
                    # conf/model/*.yaml's LoRA adapters, off
                    "model.lora": {"r": 0, "alpha": 16, "dropout": 0.0, "target_modules": None},
                    # conf/task_info's entry for task=textarena, in every algorithm that reads task_info
                    "algo.task_info.textarena": {"keys": ["game_seed"], "reset": {"game_seed": "game_seed"},
                                                 "replay": None},
                    # ... and its entries for the two-player games (task=tictactoe, task=kuhn)
                    "algo.task_info.tictactoe": {"keys": ["seat"], "reset": {"seat": "seat"}, "replay": None},
                    "algo.task_info.kuhn": {"keys": ["seat"], "reset": {"seat": "seat"}, "replay": None},
                    "algo.task_info.car_dealer_duel": {"keys": ["seat"], "reset": {"seat": "seat"}, "replay": None},
                    # debug=smoke's self-play rating budget (conf/debug/smoke.yaml)
                    "smoke.rate_every": 1, "smoke.rating_games": 4,
                    # algo=prompt's prompt cache: how a prompt is read (from a cached prefix), not what is scored
                    "algo.cache_tokens": 16384}
# The record's score fields, copied from a run's metrics.
SCORE_KEYS = ("return_mean", "return_std", "return_stderr", "normalized_score", "success_rate", "invalid_rate",
              "episodes", "episode_length")
# What the dirty check and the diff hash look at: the code, configs and tests, not the table's own outputs (a
# sweep rewrites results/records/<experiment>/plan.json and the report results/*: neither changes what runs).
SOURCE_PATHSPEC = (".", ":(exclude)results")


def config_hash(cfg: DictConfig | dict) -> str:
    """12 hex digits of the resolved config without the keys in HASH_FREE (and `cache_dir` at any depth: a
    task's env may carry the run's cache path, which says where games are cached, not what runs), nor the
    NEUTRAL_DEFAULTS options that hold their neutral value."""
    data = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else dict(cfg)
    data = without_cache_dirs({k: v for k, v in data.items() if k not in HASH_FREE})  # a fresh copy: edited below
    for dotted, neutral in NEUTRAL_DEFAULTS.items():
        *parents, leaf = dotted.split(".")
        node = data
        for key in parents:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict) and leaf in node and node[leaf] == neutral:
            del node[leaf]
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:12]


def without_cache_dirs(value):
    """A config container with every `cache_dir` key removed, at any depth (where things are cached does not change a
    result)."""
    if isinstance(value, dict):
        return {k: without_cache_dirs(v) for k, v in value.items() if k != "cache_dir"}
    if isinstance(value, list):
        return [without_cache_dirs(v) for v in value]
    return value


def skip_reason(spec: dict, task: str, algo: str) -> str | None:
    """Why an experiment's `sweep.skip` leaves the (task, algo) cell out; None when it does not."""
    return ((spec.get("skip") or {}).get(task) or {}).get(algo)


def git_state(root: Path | None = None) -> dict:
    """`git_commit` (HEAD), `git_dirty` (uncommitted changes to tracked files or untracked files, outside
    results/) and `git_diff` (12 hex digits of those changes: two dirty runs with the same value ran the same
    code); all None outside a git checkout."""
    root = root or Path(__file__).resolve().parent.parent

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30)

    none = {"git_commit": None, "git_dirty": None, "git_diff": None}
    try:
        head = git("rev-parse", "HEAD")
        if head.returncode:
            return none
        diff = git("diff", "HEAD", "--binary", "--", *SOURCE_PATHSPEC).stdout
        untracked = git("ls-files", "--others", "--exclude-standard", "--", *SOURCE_PATHSPEC).stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        return none
    if not diff and not untracked:
        return {"git_commit": head.stdout.strip(), "git_dirty": False, "git_diff": None}
    digest = hashlib.sha256(diff.encode())
    for name in sorted(untracked):
        path = root / name
        digest.update(name.encode() + b"\0" + (path.read_bytes() if path.is_file() else b""))
    return {"git_commit": head.stdout.strip(), "git_dirty": True, "git_diff": digest.hexdigest()[:12]}


def is_dirty(rec: dict) -> bool | None:
    """Whether a record's run came from a dirty tree: its `git_dirty`, or (records from before the field) a
    `+dirty` commit; None when it names no commit."""
    flag = rec.get("git_dirty")
    if flag is not None and not (isinstance(flag, float) and math.isnan(flag)):  # NaN: a table's missing field
        return bool(flag)
    commit = rec.get("git_commit")
    return None if not isinstance(commit, str) else commit.endswith("+dirty")


def machine() -> dict:
    """The machine a run computed on: the CPU model and whether it computes bf16 natively, the GPU's name (None
    on a CPU run's machine without one), torch's version."""
    import torch

    from lmrl.dist import native_bf16

    cpu_model = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {"cpu_model": cpu_model, "cpu_bf16": native_bf16(torch.device("cpu")), "gpu": gpu,
            "torch": torch.__version__}


def launcher() -> str:
    """What started this run: the sweep's launcher (`LMRL_LAUNCHER`, set for each cell it starts), else torchrun,
    an srun step or a plain process."""
    if os.environ.get("LMRL_LAUNCHER"):
        return os.environ["LMRL_LAUNCHER"]
    if os.environ.get("TORCHELASTIC_RUN_ID") or os.environ.get("LOCAL_WORLD_SIZE"):
        return "torchrun"
    if os.environ.get("SLURM_STEP_ID") is not None and os.environ.get("SLURM_JOB_ID"):
        return "srun"
    return "python"


def provenance() -> dict:
    """Where a record comes from: code (`git_state`), machine (`machine`), launcher and host."""
    return {**git_state(), **machine(), "launcher": launcher(), "host": socket.gethostname(), "cpus": os.cpu_count()}


class DirtyTreeError(SystemExit):
    """Raised (exiting with its message) when a table run finds uncommitted changes and `records.allow_dirty` is
    off."""


def require_clean_tree(allow_dirty: bool, what: str, root: Path | None = None) -> dict:
    """A table run's check: refuse uncommitted changes (a record must name the code that produced it) unless
    `records.allow_dirty=true`, whose records the report then marks; returns `git_state()`."""
    root = root or Path(__file__).resolve().parent.parent
    state = git_state(root)
    if state["git_dirty"] and not allow_dirty:
        changed = subprocess.run(["git", "status", "--porcelain", "--", *SOURCE_PATHSPEC], cwd=root,
                                 capture_output=True, text=True).stdout.splitlines()
        shown = "\n  ".join(changed[:10]) + (f"\n  ... and {len(changed) - 10} more" if len(changed) > 10 else "")
        raise DirtyTreeError(
            f"{what}: the source tree has uncommitted changes, so its records could not say which code produced "
            f"them:\n  {shown}\nCommit them (or stash them) first, or pass records.allow_dirty=true to run anyway "
            f"(the report marks such cells [d]).")
    return state


def record_name(task: str, algo: str, seed, digest: str) -> str:
    """A record's file name: `{task}__{algo}__s{seed}__{config hash}.json`."""
    return f"{task}__{algo}__s{seed}__{digest}.json"


def make_record(metrics: dict, digest: str, wall_seconds: float, **extra) -> dict:
    """A record from a run's metrics (train.run / lmrl.evaluate)."""
    rec = {"status": "ok", "task": metrics["task"], "algo": metrics["algo"], "model": metrics.get("model"),
           "hardware": metrics.get("hardware"), "precision": metrics.get("precision"), "seed": metrics.get("seed"),
           **{k: metrics.get(k) for k in SCORE_KEYS}, "policy": metrics.get("policy"),
           "config_hash": digest, **provenance(), "wall_seconds": round(wall_seconds, 2),
           "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"), "run_dir": metrics.get("run_dir")}
    # a value run's critic health; an RL run's start (the policy it trained from, evaluated the same way)
    rec.update({k: v for k, v in metrics.items() if k.startswith(("critic/", "start_"))})
    rec.update(extra)
    return rec


def failed_record(task: str, algo: str, seed, digest: str, error: str, wall_seconds: float, **extra) -> dict:
    """A record saying a cell was attempted and why it has no score."""
    return {"status": "failed", "task": task, "algo": algo, "seed": seed, "error": error.strip()[-500:],
            "config_hash": digest, **git_state(), "launcher": launcher(), "wall_seconds": round(wall_seconds, 2),
            "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"), **extra}


def write_record(directory: str | Path, rec: dict) -> Path:
    """Atomically write `rec` (replacing an earlier record of the same cell and config)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / record_name(rec["task"], rec["algo"], rec["seed"], rec["config_hash"])
    atomic_write_text(path, json.dumps(rec, indent=2, default=str) + "\n")
    return path


def find_record(directory: str | Path, digest: str, ok_only: bool = True) -> dict | None:
    """The record of the run with this config hash in `directory`, if any (only successful ones by default)."""
    directory = Path(directory)
    if not directory.is_dir():
        return None
    for path in directory.glob(f"*__{digest}.json"):
        rec = read_record(path)
        if rec.get("status") == "ok" or not ok_only:
            return rec
    return None


def read_record(path: Path) -> dict:
    """One record file, checked to be JSON with `status`, `task`, `algo` and `seed`; `ValueError` naming the file
    otherwise."""
    try:
        rec = json.loads(Path(path).read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not a JSON record ({err.msg} at line {err.lineno})") from err
    for key in ("status", "task", "algo", "seed"):
        if key not in rec:
            raise ValueError(f"{path}: record has no {key!r}")
    return rec


def load_records(directory: str | Path) -> list[dict]:
    """Every record in `directory` (sorted by file name), each with its `path`."""
    paths = sorted(Path(directory).glob("*.json"))
    return [{**read_record(p), "path": str(p)} for p in paths if p.name != "plan.json"]
