"""Shared fixtures (a character-level tokenizer for hand-computed token indices), and the sizing of
pytest-xdist's workers: `make test` runs `-n auto --dist loadfile`, one worker per usable core within memory,
each pinned to its own cores."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# The sweeps the tests start run from whatever tree the tests run in (a developer's has uncommitted changes):
# records.allow_dirty's default reads this.  The test of the refusal itself unsets it.
os.environ.setdefault("LMRL_ALLOW_DIRTY", "true")

# A worker's peak with the runs it starts: make test's largest process peaked at 2.1 GB (2026-12-01).
WORKER_GIB = 4


def available_gib() -> float:
    """Memory this machine (or its cgroup limit, when lower) has available, in GiB."""
    fields = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines() if ":" in line)
    gib = int(fields["MemAvailable"].split()[0]) / 2**20
    limit = Path("/sys/fs/cgroup/memory.max")
    if limit.exists() and limit.read_text().strip().isdigit():
        gib = min(gib, int(limit.read_text()) / 2**30)
    return gib


@pytest.hookimpl(optionalhook=True)  # pytest -p no:xdist still runs
def pytest_xdist_auto_num_workers(config):
    """`-n auto`: one worker per usable core (affinity, cgroup quota, Slurm's grant), at most one per
    WORKER_GIB of available memory; `PYTEST_XDIST_AUTO_NUM_WORKERS` still wins (None defers to xdist)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    from lmrl.threads import usable_cores

    return max(1, min(usable_cores(), int(available_gib() // WORKER_GIB)))


def pytest_configure(config):
    """In an xdist worker: pin it to its share of the cores, so its torch pool and the processes its tests start
    (which read the mask: lmrl/threads.py) never spin against the other workers."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not (worker and count) or not hasattr(os, "sched_setaffinity"):
        return
    from lmrl.threads import set_threads, worker_cores

    cores = worker_cores(int(worker.removeprefix("gw")), int(count))
    os.sched_setaffinity(0, cores)
    set_threads()  # the pinned share (or an explicit OMP_NUM_THREADS)


class CharTokenizer:
    """One token per character (id = code point): makes token indices computable by hand."""

    pad_token_id = 0
    eos_token_id = None

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict:
        return {"input_ids": [ord(c) for c in text]}


@pytest.fixture
def char_tokenizer() -> CharTokenizer:
    return CharTokenizer()


@pytest.fixture(autouse=True, scope="session")
def _records_outside_the_repo(tmp_path_factory):
    """Runs (in-process and CLI children, which inherit the variable) write their JSON records to a
    temporary directory, not results/records/."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LMRL_RECORDS", str(tmp_path_factory.mktemp("records")))
        yield


@pytest.fixture(scope="session")
def process_group():
    """In-process DeepSpeed runs join a one-process gloo group; DeepSpeed keeps the group it joined, so
    the group lives for the session and is left once at the end."""
    from lmrl.dist import shutdown

    yield
    shutdown()
