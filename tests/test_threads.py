"""Intra-op threads from the cores a process may use (lmrl/threads.py), and who applies them."""

from __future__ import annotations

import os

import pytest
import torch

from lmrl.threads import (default_threads, local_processes, set_threads, thread_env, usable_cores, worker_cores,
                          worker_threads)

VARS = ("OMP_NUM_THREADS", "LOCAL_WORLD_SIZE", "LOCAL_SIZE", "SLURM_CPUS_PER_TASK", "SLURM_STEP_TASKS_PER_NODE")


@pytest.fixture
def clean(monkeypatch):
    for key in VARS:
        monkeypatch.delenv(key, raising=False)
    before = torch.get_num_threads()
    yield monkeypatch
    torch.set_num_threads(before)


def test_the_cores_of_the_affinity_mask_are_shared_by_a_launchers_processes(clean):
    cores = len(os.sched_getaffinity(0))
    assert usable_cores() <= cores and local_processes() == 1 and default_threads() == usable_cores()
    clean.setenv("LOCAL_WORLD_SIZE", "2")  # torchrun --nproc_per_node=2
    assert default_threads() == max(1, usable_cores() // 2)
    clean.delenv("LOCAL_WORLD_SIZE")
    clean.setenv("LOCAL_SIZE", str(4 * cores))  # DeepSpeed's launcher, more ranks than cores: still one thread
    assert default_threads() == 1


def test_the_engine_applies_its_config_else_the_share(clean):
    from lmrl.dist import TorchEngine

    assert TorchEngine(device="cpu", threads=1).threads == torch.get_num_threads() == 1
    clean.setenv("OMP_NUM_THREADS", "1")
    torch.set_num_threads(max(2, usable_cores()))
    assert TorchEngine(device="cpu").threads == torch.get_num_threads() == 1  # the launcher's share
    assert set_threads(2) == torch.get_num_threads() == 2


def test_sweep_workers_get_a_share_each(clean):
    from launchers.sweep import cell_env, cell_vars

    assert cell_env(1)["OMP_NUM_THREADS"] == "1" and cell_env(1)["MKL_NUM_THREADS"] == "1"
    assert "OMP_NUM_THREADS" not in cell_vars(None)  # a Slurm cell sizes its own pool from --cpus-per-task
    assert thread_env(3) == {"OMP_NUM_THREADS": "3", "MKL_NUM_THREADS": "3"}


def test_a_launchers_explicit_thread_count_reaches_its_workers(clean):
    """`OMP_NUM_THREADS=1 taskset -c 0,1 python -m launchers.sweep ... --workers 1` beside another run: its cell gets
    the 1 thread asked for, not the mask's 2 (which spin against the other run)."""
    from launchers.sweep import cell_env

    assert worker_threads(1) == usable_cores() and worker_threads(4 * usable_cores()) == 1
    clean.setenv("OMP_NUM_THREADS", "1")
    assert worker_threads(1) == 1 and cell_env(worker_threads(1))["OMP_NUM_THREADS"] == "1"
    clean.setenv("OMP_NUM_THREADS", "3")
    assert worker_threads(2) == 3  # the user's per-process choice, as default_threads() honours it


def test_test_workers_get_disjoint_shares_of_the_mask(clean):
    """pytest-xdist's workers (tests/conftest.py pins each): on 4 usable CPUs 2 workers get 2 each, 4 get 1 each,
    and 3 workers on 2 CPUs share them round robin; a cgroup quota below the mask sizes the shares."""
    clean.setattr(os, "sched_getaffinity", lambda pid: {4, 5, 6, 7})
    clean.setattr("lmrl.threads.cgroup_quota", lambda: None)
    assert [worker_cores(i, 2) for i in range(2)] == [[4, 5], [6, 7]]
    assert [worker_cores(i, 4) for i in range(4)] == [[4], [5], [6], [7]]
    assert worker_cores(0, 1) == [4, 5, 6, 7]
    clean.setattr("lmrl.threads.cgroup_quota", lambda: 2)  # 4 CPUs visible, 2 CPUs of quota
    assert [worker_cores(i, 2) for i in range(2)] == [[4], [5]]
    clean.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    clean.setattr("lmrl.threads.cgroup_quota", lambda: None)
    assert [worker_cores(i, 3) for i in range(3)] == [[0], [1], [0]]


@pytest.mark.skipif("PYTEST_XDIST_WORKER" not in os.environ, reason="only an xdist worker is pinned")
def test_an_xdist_worker_runs_on_its_own_cores():
    assert len(os.sched_getaffinity(0)) == usable_cores() >= 1
    assert torch.get_num_threads() == (int(os.environ.get("OMP_NUM_THREADS") or 0) or usable_cores())
