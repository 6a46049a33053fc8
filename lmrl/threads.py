"""Intra-op threads per process: the cores this process may use, shared among its siblings.

OpenMP threads that outnumber the free cores spin instead of sleeping: on the 2-core CPU a BC
step with 2 threads while another process keeps one core busy runs an order of magnitude
slower than with 1 thread (`make bench`, key `contention`).  So every process we start sizes
its pool from what it may use, not from `os.cpu_count()`:

- the CPU affinity mask (`taskset`, a launcher's binding) and a cgroup CPU quota (containers);
- `SLURM_CPUS_PER_TASK` in a Slurm task (what `--cpus-per-task` granted it);
- shared by the processes started beside it on the same machine: torchrun's
  `LOCAL_WORLD_SIZE`, the `deepspeed` launcher's `LOCAL_SIZE`, an srun step's tasks on this node.

An explicit `OMP_NUM_THREADS` (a parent launcher's per-worker share, or the user's) wins over
the computation, and the engine's `threads:` config key wins over both.  Launchers hand their
children a share with `thread_env(worker_threads(workers))`: the cores // workers, or that explicit value.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import torch


def cgroup_quota() -> int | None:
    """Whole CPUs allowed by a cgroup CPU quota (v2 `cpu.max`, else v1 CFS), None without one."""
    v2 = Path("/sys/fs/cgroup/cpu.max")
    try:
        if v2.exists():
            quota, period = v2.read_text().split()[:2]
            return None if quota == "max" else max(1, int(quota) // int(period))
        v1 = Path("/sys/fs/cgroup/cpu")
        quota = int((v1 / "cpu.cfs_quota_us").read_text())
        return None if quota <= 0 else max(1, quota // int((v1 / "cpu.cfs_period_us").read_text()))
    except (OSError, ValueError):
        return None


def usable_cores() -> int:
    """Cores this process may run on: affinity, a cgroup quota and `SLURM_CPUS_PER_TASK`, whichever is least."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    limits = [cgroup_quota(), positive_int(os.environ.get("SLURM_CPUS_PER_TASK"))]
    return max(1, min([cores, *(n for n in limits if n)]))


def tasks_on_node(tasks_per_node: str, node_index: int) -> int:
    """This node's count in Slurm's compressed per-node list, e.g. `2(x3),1` -> 2, 2, 2, 1."""
    counts = []
    for part in tasks_per_node.split(","):
        found = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if not found:
            return 1
        counts += [int(found.group(1))] * int(found.group(2) or 1)
    return counts[node_index] if 0 <= node_index < len(counts) else 1


def local_processes() -> int:
    """Processes of this run on this machine sharing its cores (1 when no launcher started us)."""
    env = os.environ
    for key in ("LOCAL_WORLD_SIZE", "LOCAL_SIZE"):  # torchrun; DeepSpeed's launcher
        if positive_int(env.get(key)):
            return int(env[key])
    if "SLURM_STEP_TASKS_PER_NODE" in env and "SLURM_CPUS_PER_TASK" not in env:
        # an srun step without --cpus-per-task: its tasks on this node share the node's cores
        return tasks_on_node(env["SLURM_STEP_TASKS_PER_NODE"], int(env.get("SLURM_NODEID", 0)))
    return 1


def default_threads() -> int:
    """`OMP_NUM_THREADS` when set, else this process's share of the cores it may use."""
    return worker_threads(local_processes())


def set_threads(threads: int | None = None) -> int:
    """torch's intra-op pool at `threads` (the engine's config), else `default_threads()`; returns it."""
    n = int(threads) if threads else default_threads()
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return n


def worker_threads(workers: int) -> int:
    """Threads for each of the `workers` processes a launcher runs side by side: an `OMP_NUM_THREADS` in the
    launcher's own environment is the user's per-process choice and passes through (`OMP_NUM_THREADS=1 taskset -c
    0,1 ... --workers 1` beside another run gets 1 thread, not the mask's 2: two spinning threads on a core shared
    with another process run a step ~15x slower); else the usable cores shared among the workers."""
    return positive_int(os.environ.get("OMP_NUM_THREADS")) or max(1, usable_cores() // max(1, workers))


def worker_cores(index: int, workers: int) -> list[int]:
    """The CPUs that worker `index` of `workers` run side by side (pytest-xdist's test workers) is pinned to:
    its own `usable_cores() // workers` of the affinity mask, so its threads and every process it starts size
    themselves to that share; one CPU each, round robin, when the workers outnumber the usable cores."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    per = usable_cores() // max(1, workers)
    if per == 0:
        return [cores[index % len(cores)]]
    return cores[index * per:(index + 1) * per]


def thread_env(threads: int) -> dict[str, str]:
    """Environment variables that size a child process's thread pools (OpenMP, MKL) at `threads`."""
    return {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}


def positive_int(value: str | None) -> int | None:
    """A setting's text (an environment variable's value) as a positive integer, or None (unset, not a number,
    or not positive)."""
    try:
        n = int(value) if value is not None else 0
    except ValueError:
        return None
    return n if n > 0 else None
