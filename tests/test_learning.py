"""Slow learning tests: a trained policy must beat a baseline measured in the same test."""

import pytest

from lmrl.envs.maze import ACTIONS, MazeEnv
from lmrl.rollout.evaluate import protocol, run_episodes
from lmrl.rollout.policy import RandomPolicy
from lmrl.scoring import summarize
from tests.e2e import run_cli

MAZE = {"min": -101.0, "avg": -83.0, "max": -6.84}
EPISODES_PER_START = 8
# BC's budget here: ~1 epoch of the 1,240-episode dataset (the 600-step default sees ~0.4).
BC_STEPS = 1500


def random_baseline(fully_observed: bool) -> float:
    """Uniform over the four valid moves, on the same protocol as the trained policy."""
    make_env = lambda: MazeEnv(fully_observed=fully_observed)  # noqa: E731
    options, seeds = protocol(make_env, EPISODES_PER_START, seed=123)
    return summarize(run_episodes(RandomPolicy(ACTIONS, seed=123), make_env, options, seeds), MAZE)["normalized_score"]


@pytest.mark.slow
def test_bc_on_maze_fo_beats_random_by_20_points(tmp_path):
    baseline = random_baseline(fully_observed=True)
    overrides = ["task=maze_fo", "algo=bc", f"algo.steps={BC_STEPS}", f"task.eval.episodes_per_start={EPISODES_PER_START}"]
    metrics = run_cli("lmrl.train", overrides, tmp_path / "run", tmp_path / "cache", timeout=1800)
    print(f"BC normalized {metrics['normalized_score']:.1f} vs random {baseline:.1f}")
    assert metrics["normalized_score"] >= baseline + 20


@pytest.mark.slow
def test_filtered_bc_on_maze_fo_reaches_90(tmp_path):
    metrics = run_cli("lmrl.train", ["task=maze_fo", "algo=filtered_bc"], tmp_path / "run", tmp_path / "cache",
                      timeout=1800)
    assert metrics["normalized_score"] >= 90
