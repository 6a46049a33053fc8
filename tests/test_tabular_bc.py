"""The tabular BC ceiling: the data's own action distribution per observation, replayed through the protocol."""

from __future__ import annotations

from collections import Counter

from hydra import compose, initialize_config_dir

from lmrl.envs.base import Episode, Text
from lmrl.tabular_bc import TabularPolicy, ceiling, count_actions
from lmrl.task import Task
from tests.e2e import ROOT


def episode(*texts):
    return Episode(turns=[Text(t, i % 2 == 1) for i, t in enumerate(texts)], rewards=[0.0] * len(texts), done=True,
                   info={})


def test_counts_are_keyed_by_the_history_window():
    data = [episode("A\n", "up\n", "B\n", "left\n"), episode("A\n", "down\n"), episode("C\n", "up\n", "B\n", "up\n")]
    last = count_actions(data, 1)
    assert last == {("A\n",): Counter({"up\n": 1, "down\n": 1}), ("B\n",): Counter({"left\n": 1, "up\n": 1}),
                    ("C\n",): Counter({"up\n": 1})}
    # the whole history: the two B's differ by what came before
    whole = count_actions(data, None)
    assert whole[("A\n", "up\n", "B\n")] == Counter({"left\n": 1}) and len(whole) == 4


def test_policy_samples_in_proportion_greedy_takes_the_mode_and_unseen_falls_back():
    table = {("A\n",): Counter({"up\n": 3, "down\n": 1}), ("B\n",): Counter({"left\n": 1})}
    sampler = TabularPolicy(table, 1, seed=0)
    draws = Counter(sampler.act([(Text("A\n", False),)] * 4000))
    assert abs(draws["up\n"] / 4000 - 0.75) < 0.03 and set(draws) == {"up\n", "down\n"}
    greedy = TabularPolicy(table, 1, greedy=True)
    assert greedy.act([(Text("A\n", False),), (Text("Z\n", False),)]) == ["up\n", "up\n"]  # Z: the data's mode
    assert (greedy.unseen, greedy.turns) == (1, 2)


def test_ceiling_on_the_fo_maze_beats_random_moves_and_greedy_beats_sampling(tmp_path):
    """On the FO maze (observations repeat: every cell is one observation) the data's per-cell move distribution,
    replayed at T = 1, beats uniformly random moves from the same cells by a wide margin, and its mode (mostly the
    move towards the goal) beats sampling it."""
    from lmrl.evaluation import evaluate

    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        cfg = compose("train", overrides=["task=maze_fo", "task.data.recipe.episodes=600", "task.eval.episodes_per_start=8"])
    task = Task(cfg.task, tmp_path)
    out = ceiling(task, cfg.task.eval, seed=0)
    assert out["sample"]["unseen_share"] < 0.05 and out["sample"]["episodes"] == 200
    table = count_actions(task.episodes(), cfg.task.history_window)
    moves = Counter({m: 1 for m in cfg.task.actions})
    uniform = TabularPolicy({key: moves for key in table}, cfg.task.history_window, seed=0)
    random_moves, _ = evaluate(task, uniform, cfg.task.eval, 0)
    assert out["sample"]["normalized_score"] > random_moves["normalized_score"] + 20, (out, random_moves)
    assert out["greedy"]["normalized_score"] > out["sample"]["normalized_score"]
