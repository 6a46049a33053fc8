"""The maze dataset generator: deterministic, replayable, and tuned to the paper's numbers."""

import math

import pytest

from data_gen.maze import DEFAULT_EPISODES, NORMALIZATION_AVG_RETURN, generate, main
from lmrl.data.jsonl import read_episodes
from lmrl.data.stats import dataset_stats, format_stats_table
from lmrl.envs.base import Episode, Text
from lmrl.envs.maze import GOAL, MazeEnv, start_cells
from tests.helpers import replay


@pytest.fixture(scope="module")
def default_dataset() -> list[Episode]:
    return list(generate(DEFAULT_EPISODES, seed=0))


def test_deterministic_and_prefix_stable():
    first = list(generate(120, seed=3))
    assert first == list(generate(120, seed=3))
    assert first[:40] == list(generate(40, seed=3))
    assert first != list(generate(120, seed=4))


def test_fo_and_po_share_trajectories():
    fo, po = list(generate(60, seed=1)), list(generate(60, seed=1, fully_observed=False))
    for a, b in zip(fo, po):
        assert [t.text for t in a.turns if t.is_action] == [t.text for t in b.turns if t.is_action]
        assert a.rewards == b.rewards and a.info == b.info
    assert "goal" not in po[0].turns[0].text and "goal" in fo[0].turns[0].text


def test_every_episode_replays_exactly(default_dataset):
    for episode in default_dataset:
        assert replay(MazeEnv(fully_observed=True), {"init_position": episode.info["start"]}, episode) == (episode.turns, episode.rewards)


def test_po_episodes_replay_exactly():
    for episode in generate(150, seed=2, fully_observed=False):
        assert replay(MazeEnv(fully_observed=False), {"init_position": episode.info["start"]}, episode) == (episode.turns, episode.rewards)


def test_episode_shape(default_dataset):
    for ep in default_dataset:
        assert ep.done and not ep.turns[0].is_action and ep.turns[-1].text in ("Success\n", "Failure\n")
        assert ep.success == (ep.turns[-1].text == "Success\n")
        assert all(r == 0.0 for t, r in zip(ep.turns, ep.rewards) if not t.is_action)
        assert ep.info["goal"] == list(GOAL) and ep.info["behaviour"] in ("near_optimal", "noisy", "stuck")
    assert {tuple(ep.info["start"]) for ep in default_dataset} == set(start_cells())


def test_contains_invalid_text_and_wall_bumps(default_dataset):
    rewards = [r for ep in default_dataset for t, r in zip(ep.turns, ep.rewards) if t.is_action]
    assert rewards.count(-4.0) > 100
    assert any(not ep.success for ep in default_dataset if ep.info["behaviour"] == "noisy")


def test_average_return_near_normalization_constant(default_dataset):
    stats = dataset_stats(default_dataset)
    assert stats["size"] == DEFAULT_EPISODES
    assert abs(stats["avg_return"] - NORMALIZATION_AVG_RETURN) <= 4.0
    assert 0.1 <= stats["success_rate"] <= 0.3


def test_top_decile_is_near_optimal_and_covers_starts(default_dataset):
    top = sorted(default_dataset, key=lambda ep: ep.total_return, reverse=True)[: len(default_dataset) // 10]
    assert sum(ep.total_return for ep in top) / len(top) > -10.0
    assert len({tuple(ep.info["start"]) for ep in top}) >= 20


def test_bad_mix_is_rejected_before_iteration():
    with pytest.raises(TypeError, match="near_optimal_frac"):
        generate(1, noise_level=0.3)
    with pytest.raises(ValueError, match="near_optimal_frac"):
        generate(1, noisy_frac=0.99)
    with pytest.raises(ValueError):
        generate(1, noise_low=0.9, noise_high=0.5)


def test_cli_writes_jsonl_and_prints_stats(tmp_path, capsys):
    out = tmp_path / "maze_po.jsonl"
    main(["--episodes", "25", "--seed", "5", "--po", "--out", str(out)])
    episodes = read_episodes(out)
    assert episodes == list(generate(25, seed=5, fully_observed=False))
    printed = capsys.readouterr().out
    assert "avg_return" in printed and "paper" in printed and "-83" in printed


def test_dataset_stats_by_hand():
    win_turns = [Text("o\n", False), Text("a\n", True), Text("Success\n", False)]
    win = Episode(win_turns, [0.0, 0.0, 0.0], True, {"success": True})
    lose_turns = [Text("o\n", False)] + [Text("a\n", True), Text("o\n", False)] * 3
    lose = Episode(lose_turns, [0.0, -1.0, 0.0, -1.0, 0.0, -4.0, 0.0], True, {})
    stats = dataset_stats([win, lose])
    assert stats["size"] == 2 and stats["success_rate"] == 0.5
    assert stats["avg_length"] == 2.0 and stats["std_length"] == 1.0
    assert stats["avg_return"] == -3.0 and stats["std_return"] == 3.0
    assert math.isnan(dataset_stats([])["avg_return"])


def test_format_stats_table_aligns_ours_and_paper():
    table = format_stats_table({"size": 1240, "avg_return": -83.04}, {"size": 1240, "avg_return": -19.7})
    lines = table.splitlines()
    assert lines[0].split() == ["stat", "ours", "paper"] and len({len(line) for line in lines}) == 1
    assert "-83.04" in table and "-19.70" in table and set(lines[1]) == {"-", " "}
    assert next(line for line in lines if line.startswith("avg_length")).split()[1:] == ["-", "-"]
    assert "paper" not in format_stats_table({"size": 3})


def test_fo_bc_estimate_beats_random_moves(default_dataset):
    """The design property the slow BC test relies on: the data's per-cell action frequencies
    (what memoryless FO BC converges to) beat uniform random moves by a wide margin."""
    from data_gen.maze import marginal_policy_return
    from lmrl.envs.maze import ACTIONS
    from lmrl.scoring import normalize

    random_policy = {ACTIONS[k]: 1 for k in range(4)}
    uniform = [Episode([Text(obs, False), Text(a, True)], [0.0, 0.0], True, {})
               for obs in {t.text for ep in default_dataset for t in ep.turns if not t.is_action} for a in random_policy]
    constants = {"min": -101.0, "avg": NORMALIZATION_AVG_RETURN, "max": -6.84}
    bc = normalize(marginal_policy_return(default_dataset), **constants)
    rnd = normalize(marginal_policy_return(uniform), **constants)
    assert bc >= rnd + 20, (bc, rnd)


def test_ilql_solved_exactly_on_the_fo_data_picks_bfs_optimal_moves():
    """The data supports a fitted critic: ILQL's own fixed point, solved on the transitions of 2,000
    generated episodes, ranks cells by distance and picks a BFS-optimal move from (nearly) every start."""
    from data_gen.maze import generate, tabular_ilql
    from lmrl.envs.maze import distances_to_goal

    solved = tabular_ilql(list(generate(2000, seed=3)), tau=0.95, sweeps=200)
    assert solved["probe"] >= 0.9
    dist = distances_to_goal()
    near = [v for c, v in solved["v"].items() if dist[c] <= 2]
    far = [v for c, v in solved["v"].items() if dist[c] >= 10]
    assert max(far) < min(near) and all(v <= 1e-6 for v in solved["v"].values())  # no value above any return
