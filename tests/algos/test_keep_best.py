"""Early stopping on validation episodes (`algo.keep_best`, `algo.patience`): which curve point's weights a run
ends with, on hand-made score sequences; that the start (step 0) is a candidate; that a run resumed after its best
point finds the weights on disk; the configs that are refused; and one end-to-end run whose curve and metrics
agree on the point kept."""

from __future__ import annotations

import csv
import math
from types import SimpleNamespace

import pytest
import torch

from lmrl.algos.bc import BEST_WEIGHTS, VALIDATION_SEED_OFFSET, BCConfig, BCTrainer, stage_fields
from lmrl.algos.online import OnlineConfig
from lmrl.dist import OptimConfig, TorchEngine
from lmrl.records import config_hash
from lmrl.rollout.evaluate import protocol
from tests.e2e import run_cli


def trainer(tmp_path, keep_best: bool = True, patience: int = 0, margin: float = 0.0):
    """The parts of a BC trainer the early-stopping methods use: its config, an engine holding a small model, a
    run directory and the empty best-so-far."""
    engine = TorchEngine(device="cpu")
    engine.setup(torch.nn.Linear(3, 2), OptimConfig(lr=0.1, total_steps=10))
    cfg = SimpleNamespace(keep_best=keep_best, patience=patience, keep_best_margin=margin, name="bc")
    return SimpleNamespace(cfg=cfg, engine=engine, run_dir=tmp_path, seed=3,
                           best={"step": None, "score": -math.inf, "since": 0})


def visit(t, step: int, score: float, stderr: float = 0.0) -> torch.Tensor:
    """Give the weights a value that names the step, then note the point; returns those weights."""
    with torch.no_grad():
        t.engine.unwrap().weight.fill_(float(step))
    t.engine.global_step = step
    BCTrainer.note_point(t, step, score, stderr)
    return t.engine.unwrap().weight.detach().clone()


def test_the_best_points_weights_are_restored_and_reported(tmp_path):
    t = trainer(tmp_path)
    for step, score in [(0, 40.0), (10, 50.0), (20, 45.0), (30, 50.0)]:  # 30 ties 10: the earlier is kept
        visit(t, step, score)
    out = BCTrainer.restore_best(t)
    assert out == {"best_step": 10, "best_validation_score": 50.0, "stopped_at_step": 30}
    assert torch.equal(t.engine.unwrap().weight, torch.full((2, 3), 10.0))


def test_a_run_that_only_unlearns_ends_with_its_start(tmp_path):
    t = trainer(tmp_path)
    start = visit(t, 0, 42.0)
    for step, score in [(100, 24.0), (200, 12.0), (300, 0.0)]:
        visit(t, step, score)
    assert BCTrainer.restore_best(t)["best_step"] == 0
    assert torch.equal(t.engine.unwrap().weight, start)


def test_with_a_margin_only_a_gain_beyond_the_noise_replaces_the_kept_point(tmp_path):
    """Text-Nav PO seed 0's validation curve: start 12.0, step 100 42.1 (2 vs 7 successes in 32 episodes, standard
    errors ~8.6 and ~14.6): 30 points up, under two standard errors of the difference (~34), so the start stays; a
    later 80 +- 10 clears 2 x hypot(10, 8.6) ~ 26 above the start and is kept."""
    t = trainer(tmp_path, margin=2.0)
    start = visit(t, 0, 12.0, stderr=8.6)
    visit(t, 100, 42.1, stderr=14.6)
    assert t.best["step"] == 0 and t.best["since"] == 1
    assert BCTrainer.restore_best(t)["best_step"] == 0 and torch.equal(t.engine.unwrap().weight, start)
    visit(t, 200, 80.0, stderr=10.0)
    assert t.best == {"step": 200, "score": 80.0, "stderr": 10.0, "since": 0}
    no_margin = trainer(tmp_path / "m0")
    (tmp_path / "m0").mkdir()
    visit(no_margin, 0, 12.0, stderr=8.6)
    visit(no_margin, 100, 42.1, stderr=14.6)
    assert no_margin.best["step"] == 100


def test_patience_counts_points_since_the_best(tmp_path):
    t = trainer(tmp_path, patience=2)
    seen = []
    for step, score in [(0, 10.0), (1, 20.0), (2, 19.0), (3, 21.0), (4, 5.0), (5, 5.0), (6, 99.0)]:
        visit(t, step, score)
        seen.append(BCTrainer.out_of_patience(t))
        if seen[-1]:
            break
    assert seen == [False, False, False, False, False, True] and t.best["step"] == 3
    assert not BCTrainer.out_of_patience(trainer(tmp_path, patience=0))  # 0: never stops early


def test_a_run_resumed_after_its_best_point_reads_the_weights_from_disk(tmp_path):
    t = trainer(tmp_path)
    best = visit(t, 10, 50.0)
    visit(t, 20, 30.0)
    assert (tmp_path / BEST_WEIGHTS).exists()
    resumed = trainer(tmp_path)  # a fresh process: the checkpoint's trainer state, no weights in memory
    resumed.best = dict(t.best)
    resumed.engine.global_step = 40
    assert BCTrainer.restore_best(resumed)["best_step"] == 10
    assert torch.equal(resumed.engine.unwrap().weight, best)


def test_without_keep_best_nothing_is_kept_and_the_curve_uses_the_test_episodes(tmp_path):
    t = trainer(tmp_path, keep_best=False)
    assert BCTrainer.restore_best(t) == {} and not BCTrainer.out_of_patience(t)
    assert BCTrainer.curve_seed(t) == 3 and BCTrainer.curve_seed(trainer(tmp_path)) == 3 + VALIDATION_SEED_OFFSET


def test_validation_episodes_share_no_seed_with_any_runs_test_episodes():
    _, validation = protocol(lambda: FakeEnv(), 50, 0 + VALIDATION_SEED_OFFSET)
    tests = set()
    for seed in range(0, 100):
        tests.update(protocol(lambda: FakeEnv(), 50, seed)[1])
    assert not tests & set(validation)


class FakeEnv:
    def eval_reset_options(self):
        return [{"start": i} for i in range(400)]


@pytest.mark.parametrize("fields, message", [
    ({"keep_best": True}, "keep_best needs curve points"),
    ({"patience": 2}, "patience must be >= 0 and needs keep_best=true"),
    ({"keep_best": True, "curve_points": 4, "patience": -1}, "patience must be >= 0"),
    ({"keep_best_margin": 2.0}, "keep_best_margin must be >= 0 and needs keep_best=true"),
])
def test_bad_early_stopping_configs_are_refused(fields, message):
    assert any(message in p for p in BCConfig(**fields).validate())


def test_keep_best_off_leaves_stage_keys_and_record_hashes_as_they_were():
    assert "keep_best" not in stage_fields(BCConfig()) and "patience" not in stage_fields(BCConfig())
    assert stage_fields(BCConfig(keep_best=True, curve_points=3))["keep_best"] is True
    base = {"algo": {"name": "bc", "lr": 1e-3, "bc": {"steps": 5}}, "task": {"name": "maze_fo"}}
    off = {"algo": {**base["algo"], "keep_best": False, "patience": 0,
                    "bc": {"steps": 5, "keep_best": False, "patience": 0}}, "task": base["task"]}
    assert config_hash(off) == config_hash(base)
    assert config_hash({**off, "algo": {**off["algo"], "keep_best": True}}) != config_hash(base)


def test_an_online_algorithm_refuses_keep_best():
    assert any("keep_best is for offline trainers" in p for p in OnlineConfig(keep_best=True).validate())


def test_a_bc_run_ends_with_the_weights_of_its_best_validation_point(tmp_path):
    metrics = run_cli("lmrl.train", ["task=maze_fo", "algo=bc", "debug=smoke", "smoke.steps=30",
                                     "smoke.batch_size=8", "algo.eval_every=10", "algo.keep_best=true",
                                     "task.eval.max_starts=2", "algo.curve_episodes_per_start=4"],
                      tmp_path / "run", tmp_path / "cache")
    rows = list(csv.DictReader(open(tmp_path / "run" / "curve.csv")))
    assert [r["step"] for r in rows] == ["0", "10", "20", "30"] and {r["episodes"] for r in rows} == {"validation"}
    scores = [float(r["normalized_score"]) for r in rows]
    assert metrics["best_validation_score"] == pytest.approx(max(scores))
    assert metrics["best_step"] == int(rows[scores.index(max(scores))]["step"])
    assert metrics["stopped_at_step"] == 30
