"""W&B offline logging and a 2-job sweep through Hydra's submitit_local launcher (Slurm's stand-in here:
real submitit, one process per job; a Slurm cluster itself cannot run on this machine)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.e2e import ROOT, cli_env, run_cli

SMALL = ["task=maze_fo", "algo=bc", "debug=smoke", "smoke.steps=3", "task.eval.max_starts=1"]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


def test_wandb_offline_run_directory_has_the_logged_keys(tmp_path, cache):
    run = tmp_path / "run"
    metrics = run_cli("lmrl.train", [*SMALL, "algo.log_every=1", "logger=wandb"], run, cache, WANDB_MODE="offline")
    [run_file] = (run / "wandb").glob("offline-run-*/run-*.wandb")
    # the .wandb file is W&B's own record log (protobuf); metric keys and the run name are stored as strings
    blob = run_file.read_bytes()
    for key in ("train/loss", "train/grad_norm", "eval/normalized_score", "eval/return_mean", "model/parameters",
                "maze_fo__bc__0__", "task"):
        assert key.encode() in blob, key
    [table] = run_file.parent.glob("files/media/table/eval/transcripts_*.table.json")
    rows = json.loads(table.read_text())
    assert rows["columns"] == ["policy", "episode", "return", "success", "transcript"]
    assert rows["data"][0][2] == pytest.approx(metrics["return_mean"])  # one episode: its return is the mean


def test_two_job_sweep_through_submitit_local(tmp_path, cache):
    sweep = tmp_path / "sweep"
    cmd = [sys.executable, "-m", "lmrl.train", "--multirun", "launcher=submitit_local", *SMALL, "seed=0,1",
           f"hydra.sweep.dir={sweep}"]
    proc = subprocess.run(cmd, cwd=ROOT, env=cli_env(cache), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = [json.loads(p.read_text()) for p in sorted(sweep.glob("*/metrics.json"))]
    assert [m["seed"] for m in metrics] == [0, 1]
    assert all(m["episodes"] == 1 and "normalized_score" in m for m in metrics)
    assert len(list(sweep.glob(".submitit/*/*_log.out"))) == 2  # each job ran in its own submitit process
