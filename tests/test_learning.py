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


def bc_then(algo: str, tmp_path) -> tuple[dict, dict]:
    """Metrics of a BC run on maze FO and of `algo` started from its checkpoint (same evaluation)."""
    cache = tmp_path / "cache"
    eps = f"task.eval.episodes_per_start={EPISODES_PER_START}"
    bc = run_cli("lmrl.train", ["task=maze_fo", "algo=bc", eps], tmp_path / "bc", cache, timeout=1800)
    start = f"algo.init_from={tmp_path / 'bc' / 'checkpoint'}"
    rl = run_cli("lmrl.train", ["task=maze_fo", f"algo={algo}", eps, start], tmp_path / algo, cache, timeout=3600)
    return bc, rl


# ILQL must beat the BC policy it starts from by this many normalized points (measured in the test).
ILQL_MARGIN = 5.0


@pytest.mark.slow
def test_ilql_on_maze_fo_beats_the_bc_policy_it_starts_from(tmp_path):
    bc, ilql = bc_then("ilql", tmp_path)
    print(f"ILQL {ilql['normalized_score']:.1f} vs its BC start {bc['normalized_score']:.1f}")
    assert ilql["normalized_score"] >= bc["normalized_score"] + ILQL_MARGIN


# MC (the `make train` default) must fit its critic and beat the BC policy it starts from by this much.
MC_MARGIN = 10.0


@pytest.mark.slow
def test_mc_on_maze_fo_fits_its_critic_and_beats_its_bc_start(tmp_path):
    bc, mc = bc_then("mc", tmp_path)
    print(f"MC {mc['normalized_score']:.1f} vs its BC start {bc['normalized_score']:.1f}; critic "
          f"rho {mc['critic/spearman_states']:.2f}, probe {mc['critic/probe_agreement']:.2f}")
    assert mc["critic/fitted"] == 1.0
    assert mc["normalized_score"] >= bc["normalized_score"] + MC_MARGIN


@pytest.fixture(scope="module")
def weak_bc(tmp_path_factory):
    """A deliberately weak BC start for the online algorithms (few steps), scored by its own run."""
    root = tmp_path_factory.mktemp("weak_bc")
    overrides = ["task=maze_fo", "algo=bc", f"algo.steps={WEAK_BC_STEPS}", f"task.eval.episodes_per_start={EPISODES_PER_START}"]
    metrics = run_cli("lmrl.train", overrides, root / "run", root / "cache", timeout=1800)
    return metrics["normalized_score"], root / "run" / "checkpoint", root / "cache"


# The weak start's BC budget, and the margins the online algorithms must add to its score.
WEAK_BC_STEPS = 100
PPO_MARGIN = 10.0
ONLINE_BC_MARGIN = 10.0


@pytest.mark.slow
@pytest.mark.parametrize("algo, margin", [("ppo", PPO_MARGIN), ("online_filtered_bc", ONLINE_BC_MARGIN)])
def test_online_rl_improves_a_weak_bc_start(algo, margin, weak_bc, tmp_path):
    start_score, checkpoint, cache = weak_bc
    overrides = ["task=maze_fo", f"algo={algo}", f"algo.init_from={checkpoint}",
                 f"task.eval.episodes_per_start={EPISODES_PER_START}"]
    metrics = run_cli("lmrl.train", overrides, tmp_path / "run", cache, timeout=3600)
    print(f"{algo} {metrics['normalized_score']:.1f} vs its weak BC start {start_score:.1f}")
    assert (tmp_path / "run" / "rounds.png").exists()
    assert metrics["normalized_score"] >= start_score + margin
