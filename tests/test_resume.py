"""Checkpoint and resume: a run killed with SIGKILL mid-training and resumed ends where an uninterrupted run
ends, with the same per-step losses (CPU is deterministic: exact up to 1e-6 relative) and the same
evaluation; and checkpoints' parts on their own (pointer, pruning, RNG, NaN stop)."""

from __future__ import annotations

import csv
import json
import random
import signal
import subprocess
import time

import pytest
import torch
from omegaconf import OmegaConf

from lmrl.algos.base import ConfigError
from lmrl.algos.bc import append_csv, check_finite
from lmrl.checkpoint import Checkpointer
from lmrl.dist import OptimConfig, TorchEngine, topology
from lmrl.tracking import read_log
from lmrl.train import check_same_config
from tests.e2e import ROOT, cli_command, cli_env, run_cli

STEPS, EVERY = 40, 10


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


def overrides(algo: str) -> list[str]:
    return ["task=maze_fo", f"algo={algo}", "debug=smoke", f"smoke.steps={STEPS}", "smoke.batch_size=8",
            "algo.log_every=1", "task.eval.max_starts=2", f"checkpoint.every_steps={EVERY}"]


def kill_after_first_checkpoint(algo: str, run, cache, extra: tuple = (), **env) -> None:
    """Start a run and SIGKILL it as soon as its first checkpoint is complete."""
    proc = subprocess.Popen(cli_command("lmrl.train", [*overrides(algo), *extra], run), cwd=ROOT,
                            env=cli_env(cache, **env),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    latest = run / "checkpoints" / "latest"
    deadline = time.time() + 300
    while not latest.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert latest.exists(), "the run ended or timed out before its first checkpoint"
    assert not (run / "metrics.json").exists(), "the run finished before it could be killed"


@pytest.mark.parametrize("algo", ["bc", "ilql"])  # ILQL: the Polyak target is part of the checkpoint
def test_killed_and_resumed_run_matches_an_uninterrupted_one(algo, tmp_path, cache):
    # BC also writes curve points, between checkpoints (every 15 steps; checkpoints every 10)
    extra = ("logger=wandb", "algo.eval_every=15") if algo == "bc" else ()  # W&B: the resumed run continues it
    straight = run_cli("lmrl.train", [*overrides(algo), *extra], tmp_path / "straight", cache)
    run = tmp_path / "killed"
    kill_after_first_checkpoint(algo, run, cache, extra, WANDB_MODE="offline")
    resumed_at = json.loads((run / "checkpoints" / (run / "checkpoints/latest").read_text() /
                             "trainer_state.json").read_text())["step"]
    assert EVERY <= resumed_at < STEPS
    curve, straight_curve = run / "curve.csv", tmp_path / "straight" / "curve.csv"
    if extra:  # as if the killed run had written a point past its checkpoint: the resumed run computes it again
        keys = straight_curve.read_text().splitlines()[0].split(",")
        append_csv(curve, {**dict.fromkeys(keys, ""), "step": resumed_at + 5, "return_mean": -999})
    resumed = run_cli("lmrl.train", [*overrides(algo), *extra, f"resume={run}"], tmp_path / "resumer", cache,
                      metrics_dir=run, WANDB_MODE="offline")
    if extra:  # each point once, as the uninterrupted run wrote them
        column = lambda path, key: [r[key] for r in csv.DictReader(open(path))]  # noqa: E731
        assert column(curve, "step") == column(straight_curve, "step") == ["15", "30"]
        returns = lambda path: [float(v) for v in column(path, "return_mean")]  # noqa: E731
        assert returns(curve) == pytest.approx(returns(straight_curve))
    assert resumed["resumed_from_step"] == resumed_at and resumed["run_dir"] == str(run)
    a, b = read_log(tmp_path / "straight" / "log.jsonl"), read_log(run / "log.jsonl")
    losses = lambda log: [log[s]["train/loss"] for s in range(STEPS)]  # noqa: E731
    assert losses(b) == pytest.approx(losses(a), rel=1e-6)
    assert resumed["return_mean"] == pytest.approx(straight["return_mean"])
    if extra:
        runs = sorted(p.name for p in (run / "wandb").glob("offline-run-*"))
        assert len(runs) == 2 and len({name.rsplit("-", 1)[1] for name in runs}) == 1, runs


def test_resume_true_finds_the_unfinished_run_and_refuses_other_configs(tmp_path, cache):
    parent = tmp_path / "outputs"
    kill_after_first_checkpoint("bc", parent / "a", cache)
    with pytest.raises(AssertionError, match="config differs"):
        run_cli("lmrl.train", [*overrides("bc"), "resume=true", "algo.lr=0.5"], parent / "b", cache)
    resumed = run_cli("lmrl.train", [*overrides("bc"), "resume=true"], parent / "c", cache, metrics_dir=parent / "a")
    assert resumed["run_dir"] == str(parent / "a") and resumed["resumed_from_step"] >= EVERY
    with pytest.raises(AssertionError, match="no unfinished run"):  # a finished run is not resumed again
        run_cli("lmrl.train", [*overrides("bc"), "resume=true"], parent / "d", cache)


def test_resume_ignores_keys_that_do_not_change_the_run(tmp_path):
    """A sweep re-launched with a longer `sweep.timeout_min` (or another cache, logger, records dir) resumes its
    killed cells; a change to what the run computes is refused, naming the key."""
    saved = OmegaConf.create({"seed": 0, "algo": {"lr": 1e-3}, "task": {"cache_dir": "/a"},
                              "sweep": {"timeout_min": 60}, "records": {"dir": "r1"}, "logger": {"_target_": "x"}})
    OmegaConf.save(saved, tmp_path / "config.yaml")
    later = OmegaConf.merge(saved, {"task": {"cache_dir": "/b"}, "sweep": {"timeout_min": 120},
                                    "records": {"dir": "r2"}, "logger": {"_target_": "y"}})
    check_same_config(tmp_path, later)
    with pytest.raises(ConfigError, match=r"differs in \['algo'\]"):
        check_same_config(tmp_path, OmegaConf.merge(later, {"algo": {"lr": 0.5}}))


def tiny_engine() -> TorchEngine:
    engine = TorchEngine(device="cpu")
    engine.setup(torch.nn.Linear(3, 2), OptimConfig(lr=0.1, total_steps=10))
    return engine


def train_step(engine: TorchEngine) -> None:
    engine.backward(engine.forward(input=torch.arange(12.0).view(4, 3) / 10).pow(2).mean())
    engine.step()


def test_checkpointer_round_trip_pointer_pruning_and_rng(tmp_path):
    engine, ckpt = tiny_engine(), Checkpointer(tmp_path, every=2, keep=2)
    assert ckpt.latest() is None and ckpt.restore(engine) is None
    assert [s for s in range(7) if ckpt.due(s)] == [2, 4, 6]
    for step in range(1, 7):
        train_step(engine)
        if ckpt.due(step):
            ckpt.save(step, engine, {"note": step})
    assert sorted(p.name for p in tmp_path.glob("step_*")) == ["step_00000004", "step_00000006"]
    weights = [p.detach().clone() for p in engine.model.parameters()]
    expected = (torch.rand(3), random.random())  # the RNG streams right after the checkpoint
    fresh = tiny_engine()
    state = Checkpointer(tmp_path, every=2).restore(fresh)
    assert state == {"note": 6, "step": 6} and fresh.global_step == 6
    assert all(torch.equal(a, b) for a, b in zip(weights, fresh.model.parameters()))
    assert torch.equal(torch.rand(3), expected[0]) and random.random() == expected[1]
    train_step(engine)
    train_step(fresh)  # same optimizer moments and schedule: the same next step
    assert all(torch.allclose(a, b) for a, b in zip(engine.model.parameters(), fresh.model.parameters()))


def test_a_resumed_run_counts_the_wall_time_of_its_earlier_attempts(tmp_path):
    """The record of a run killed and resumed reports its whole wall time (up to the last checkpoint of the
    killed attempt, plus the resumed one), not only the last attempt's: the sweep's hours add up."""
    engine = tiny_engine()
    first = Checkpointer(tmp_path, every=1, started=time.perf_counter() - 100.0)  # an attempt 100 s along
    first.save(1, engine, {"note": 1})
    again = Checkpointer(tmp_path, every=1)
    assert again.elapsed() < 100.0
    assert again.restore(tiny_engine()) == {"note": 1, "step": 1}  # the time is the checkpointer's, not the trainer's
    assert 100.0 <= again.elapsed() < 200.0
    again.save(2, engine, {})
    assert Checkpointer(tmp_path, every=1).restore(tiny_engine()) == {"step": 2}
    assert json.loads((tmp_path / "step_00000002" / "trainer_state.json").read_text())["wall_seconds"] >= 100.0


def test_a_checkpoint_is_valid_only_once_complete(tmp_path):
    engine, ckpt = tiny_engine(), Checkpointer(tmp_path, every=1)
    ckpt.save(1, engine, {})
    (tmp_path / "step_00000002").mkdir()  # a save killed half-way: no trainer_state.json, pointer not moved
    assert ckpt.latest().name == "step_00000001"
    (tmp_path / "latest").write_text("step_00000002")
    assert ckpt.latest() is None  # a pointer to an incomplete directory is not trusted


def test_non_finite_loss_stops_and_names_the_last_good_checkpoint(tmp_path):
    engine, ckpt = tiny_engine(), Checkpointer(tmp_path / "checkpoints", every=1)
    check_finite(torch.tensor(1.0), "loss", {}, ckpt)  # finite: nothing happens
    with pytest.raises(FloatingPointError, match="no checkpoint was written yet"):
        check_finite(torch.tensor(float("nan")), "bc loss at step 0", {}, ckpt)
    ckpt.save(3, engine, {})
    with pytest.raises(FloatingPointError, match=r"step_00000003.*resume="):
        check_finite(torch.tensor(float("inf")), "bc loss at step 3", {"x": 1}, ckpt)


def test_topology_from_torchrun_or_slurm(monkeypatch):
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
                "SLURM_STEP_ID", "SLURM_STEP_NUM_TASKS"):
        monkeypatch.delenv(key, raising=False)
    assert topology() == (0, 1, 0)
    monkeypatch.setenv("SLURM_PROCID", "5")
    monkeypatch.setenv("SLURM_NTASKS", "8")
    monkeypatch.setenv("SLURM_LOCALID", "1")
    assert topology() == (0, 1, 0)  # an sbatch script sees these too, but it is one process: no step id
    monkeypatch.setenv("SLURM_STEP_ID", "0")
    assert topology() == (5, 8, 1)
    monkeypatch.setenv("WORLD_SIZE", "2")  # a launcher's variables win over Slurm's
    monkeypatch.setenv("RANK", "1")
    assert topology() == (1, 2, 0)
