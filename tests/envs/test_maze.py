"""MazeEnv against the original LMRL-Gym rules: rewards, horizon, text, starts, batching."""

from collections import Counter

import pytest

from lmrl.envs.base import BatchedEnv, history_to_str, history_window
from lmrl.envs.maze import MazeEnv, distances_to_goal, optimal_directions, start_cells

RESET_1_1 = (
    "The goal is at position 8, 6. Your current position is at position 1, 1. "
    "There are walls to your left, above you, below you.\n"
)
AFTER_RIGHT = (
    "The goal is at position 8, 6. Your current position is at position 1, 2. "
    "There are walls above you, below you.\n"
)
PO_TWO_STEPS = (
    "There are walls to your left, above you, below you.\nmove right\n"
    "There are walls above you, below you.\nmove up\nThere are walls above you, below you.\n"
)


def make(start=(1, 1), **kwargs):
    env = MazeEnv(**kwargs)
    history, _ = env.reset(options={"init_position": start})
    return env, history


def optimal_action(env: MazeEnv) -> str:
    return f"move {optimal_directions(env.position)[0]}\n"


def test_reset_text_fo_verbatim():
    _, history = make()
    assert history_to_str(history) == RESET_1_1


def test_move_right_text_and_reward():
    env, _ = make()
    result = env.step("move right\n")
    assert result.history[-1].text == AFTER_RIGHT
    assert result.reward == -1.0 and not result.terminated and not result.truncated


def test_po_two_step_history():
    env, _ = make(fully_observed=False)
    env.step("move right\n")
    result = env.step("move up\n")
    assert history_to_str(result.history) == PO_TWO_STEPS


def test_bumping_a_wall_leaves_position():
    env, history = make()
    result = env.step("move up\n")
    assert env.position == (1, 1) and result.reward == -1.0
    assert result.history[-1].text == history[0].text


def test_reaching_goal_succeeds_with_zero_reward():
    env, _ = make(start=(7, 6))
    result = env.step("move down\n")
    assert result.reward == 0.0 and result.terminated and not result.truncated
    assert result.history[-1].text == "Success\n" and result.info["success"]


def test_unparseable_action_costs_four_and_does_not_move():
    env, history = make()
    result = env.step("move forward\n")
    assert result.reward == -4.0 and env.position == (1, 1) and result.info["invalid"]
    assert result.history[-1].text == history[0].text


@pytest.mark.parametrize("fully_observed", [True, False], ids=["fo", "po"])
@pytest.mark.parametrize("reply, then", [("move left", (5, 5)), ("move right", (5, 7)), ("move down", (6, 6)),
                                         ("move up", (5, 6))])  # (5, 6) has a wall above only
def test_a_reply_without_its_newline_is_invalid(fully_observed, reply, then):
    """The original matches `move left\\n` exactly: a turn cut off before its newline costs -4, does not move
    and is answered with the same observation; the same words with the newline are a move."""
    env, history = make(start=(5, 6), fully_observed=fully_observed)
    result = env.step(reply)
    assert result.reward == -4.0 and env.position == (5, 6) and result.info["invalid"]
    assert result.history[-1] == history[0] and result.history[-2].text == reply
    result = env.step(reply + "\n")
    assert result.reward == -1.0 and env.position == then and not result.info["invalid"]


def run_until_done(env: MazeEnv, action: str) -> tuple[float, int, object]:
    total, steps, result = 0.0, 0, None
    while not env.done:
        result = env.step(action)
        total += result.reward
        steps += 1
    return total, steps, result


def test_horizon_then_failure_all_bump():
    env, _ = make()
    total, steps, last = run_until_done(env, "move left\n")
    assert steps == 101 and total == -101.0
    assert last.history[-1].text == "Failure\n" and last.reward == -1.0
    assert last.truncated and not last.terminated
    with pytest.raises(RuntimeError):
        env.step("move left\n")


def test_all_invalid_episode_returns_minus_401():
    env, _ = make()
    total, steps, _ = run_until_done(env, "go left\n")
    assert steps == 101 and total == -401.0


def test_digit_spaced_coordinates():
    _, history = make(start=(1, 10))
    assert "Your current position is at position 1, 1 0." in history[0].text


def test_po_window_keeps_last_40_segments():
    env, _ = make(fully_observed=False)
    for k in range(30):
        result = env.step(("move right\n", "move left\n")[k % 2])
    history = result.history
    assert len(history) == 61
    window = history_window(history, 40)
    assert len(window) == 40 and window == history[-40:] and window[-1] == history[-1]


@pytest.mark.parametrize("bad", [(0, 0), (8, 6), (2, 2), (42, 1)])
def test_init_position_rejects_walls_and_goal(bad):
    with pytest.raises(ValueError, match="init_position"):
        MazeEnv().reset(options={"init_position": bad})


def test_init_position_sets_start():
    env, _ = make(start=(5, 9))
    assert env.position == (5, 9)


def test_seeded_starts_are_uniform_over_25_cells():
    env = MazeEnv()
    starts = Counter(tuple(env.reset(seed=seed)[1]["start"]) for seed in range(2000))
    assert set(starts) == set(start_cells()) and len(starts) == 25
    assert all(50 <= n <= 110 for n in starts.values())  # expected 80 each
    assert env.reset(seed=7)[1]["start"] == MazeEnv().reset(seed=7)[1]["start"]


def test_optimal_policy_mean_return_is_normalization_max():
    returns = []
    for start in start_cells():
        env, _ = make(start=start)
        total = 0.0
        while not env.done:
            total += env.step(optimal_action(env)).reward
        returns.append(total)
        assert total == -(distances_to_goal()[start] - 1)
    assert sum(returns) / 25 == pytest.approx(-6.84)


def test_wipe_history_on_invalid():
    env, _ = make(fully_observed=False, wipe_history_on_invalid=True)
    env.step("move right\n")
    result = env.step("left\n")
    assert len(result.history) == 1 and not result.history[0].is_action
    kept, _ = make(fully_observed=False)
    kept.step("move right\n")
    assert len(kept.step("left\n").history) == 5


def test_batched_env_records_episodes():
    starts = [(1, 1), (7, 6), (5, 3), (1, 11)]
    batch = BatchedEnv(lambda: MazeEnv(fully_observed=False), len(starts))
    batch.reset_all([{"init_position": s} for s in starts], seeds=[0, 1, 2, 3])
    summed = [0.0] * len(starts)
    for step in range(200):
        if not batch.active:
            break
        actions = ["go left\n" if (i == 2 and step < 3) else optimal_action(batch.envs[i]) for i in batch.active]
        active = list(batch.active)
        batch.step(actions)
        for i in active:
            summed[i] += batch.episodes[i].rewards[-2]
    assert not batch.active
    for i, ep in enumerate(batch.episodes):
        assert ep.done and ep.success and ep.total_return == summed[i]
        assert ep.turns == list(batch.envs[i].history)
        assert ep.info["start"] == list(starts[i])
    assert batch.episodes[2].total_return == -(distances_to_goal()[(5, 3)] - 1) - 12
