"""Small shared helpers: seeding, file locks and atomic writes, the one-line run summary."""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import gc
import os
import random
from pathlib import Path

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


@contextlib.contextmanager
def file_lock(path: Path, wait: bool = True):
    """An exclusive advisory lock held by the main process for the block (other processes pass).  Yields whether
    the lock is held: `wait=False` does not wait for another holder and yields False instead."""
    from lmrl.dist import is_main

    if not is_main():
        yield True
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def release_memory() -> None:
    """Hand memory a finished stage freed back to the OS: collect its reference cycles, then (glibc) trim the
    heap, which otherwise keeps the freed pages and counts them in the process's RSS for the rest of the run."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to trim
        pass


def atomic_write_text(path: Path, text: str) -> None:
    """Write via a temporary file and a rename: readers see the old content or the new, never half a file."""
    path = Path(path)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def summary_line(m: dict) -> str:
    """The single line a run ends with (a value run's also says whether its critic fitted)."""
    line = (f"[lmrl] task={m['task']} algo={m['algo']} return={m['return_mean']:.2f}±{m['return_stderr']:.2f} "
            f"normalized={m['normalized_score']:.1f} success={m['success_rate']:.3f} episodes={m['episodes']}")
    if "invalid_rate" in m:
        line += f" invalid={m['invalid_rate']:.3f}"
    if "start_normalized" in m:  # an RL run: the policy it started from, evaluated the same way
        line += f" start={m['start_normalized']:.1f}"
    if "critic/fitted" in m:
        probe = f" probe={m['critic/probe_agreement']:.2f}" if "critic/probe_agreement" in m else ""
        if m.get("critic/probe_ceiling", 1.0) < 1.0:  # PO: look-alike starts cap what any critic can agree on
            probe += f" of {m['critic/probe_ceiling']:.2f}"
        verdict = "fitted" if m["critic/fitted"] else "DID NOT FIT"
        line += f" critic={verdict} (spearman={m['critic/spearman_states']:.2f}{probe})"
    elif "critic/explained_variance" in m:  # PPO's value head: its last rounds' explained variance
        line += f" value_head_explained_variance={m['critic/explained_variance']:.2f}"
    return line
