"""The Text-Nav dataset generator: deterministic, replayable, FO/PO-aligned and near Table 1."""

import time

import pytest

from data_gen.text_nav import (
    DEFAULT_EPISODES,
    FAR_ROOMS,
    PAPER_TEXT_NAV_ROW,
    WalkthroughMix,
    expert_command,
    generate,
    main,
)
from lmrl.data.jsonl import read_episodes
from lmrl.data.stats import dataset_stats
from lmrl.envs.base import Episode, Text
from lmrl.envs.text_nav import ROOMS, HouseState, TextNavEnv, walkthrough

pytest.importorskip("textworld")  # the optional `textnav` extra

SMOKE_EPISODES = 200  # what `debug=smoke` generates


@pytest.fixture(scope="module")
def smoke_dataset() -> tuple[list[Episode], float]:
    TextNavEnv()  # build (or find) the game cache first: the budget is for generation only
    start = time.perf_counter()
    episodes = list(generate(SMOKE_EPISODES, seed=0))
    return episodes, time.perf_counter() - start


def actions(episode: Episode) -> list[str]:
    return [t.text for t in episode.turns if t.is_action]


def test_smoke_size_generates_within_budget(smoke_dataset):
    episodes, seconds = smoke_dataset
    assert len(episodes) == SMOKE_EPISODES and seconds < 30.0, seconds


def test_statistics_near_table_1(smoke_dataset):
    stats = dataset_stats(smoke_dataset[0])
    assert abs(stats["success_rate"] - PAPER_TEXT_NAV_ROW["success_rate"]) < 0.08
    assert abs(stats["avg_length"] - PAPER_TEXT_NAV_ROW["avg_length"]) < 1.0
    assert stats["avg_return"] == stats["success_rate"]  # the only reward is the win's 1


@pytest.mark.slow
def test_default_dataset_matches_table_1_and_normalization_avg():
    stats = dataset_stats(generate(DEFAULT_EPISODES, seed=0))
    assert stats["size"] == 2500 and abs(stats["avg_return"] - 0.26) < 0.005  # normalization avg in the configs
    assert abs(stats["avg_length"] - 12.2) < 0.5


def test_every_episode_replays_exactly(smoke_dataset):
    for episode in smoke_dataset[0][:40]:
        env = TextNavEnv(max_steps=WalkthroughMix().max_steps)
        history, _ = env.reset(options={"start_room": episode.info["start_room"]})
        turns, rewards = list(history), [0.0]
        for action in actions(episode):
            result = env.step(action)
            turns += [Text(action, True), result.history[-1]]
            rewards += [result.reward, 0.0]
        assert env.done and (turns, rewards) == (episode.turns, episode.rewards)


def test_episode_shape(smoke_dataset):
    episodes = smoke_dataset[0]
    for ep in episodes:
        assert ep.done and [t.is_action for t in ep.turns] == [i % 2 == 1 for i in range(len(ep.turns))]
        assert 1 <= ep.num_actions <= 15 and all(t.text.endswith("\n") for t in ep.turns)
        assert all(r == 0.0 for t, r in zip(ep.turns, ep.rewards) if not t.is_action)
        assert ep.total_return == float(ep.success) == ep.rewards[-2]
        assert ep.success == ("*** The End ***" in ep.turns[-1].text)
        assert ep.info["optimal_rooms"] in ("far", "near") and ep.info["start_room"] in ROOMS
    assert {ep.info["start_room"] for ep in episodes} == set(ROOMS)
    assert any(ep.info["failed"] for ep in episodes)  # some eat the stale food


def test_deterministic_and_prefix_stable(smoke_dataset):
    assert list(generate(20, seed=0)) == smoke_dataset[0][:20]
    assert [actions(e) for e in generate(20, seed=4)] != [actions(e) for e in smoke_dataset[0][:20]]


def test_fo_and_po_share_action_sequences(smoke_dataset):
    fo, po = smoke_dataset[0][:20], list(generate(20, seed=0, fully_observed=False))
    for a, b in zip(fo, po):
        assert actions(a) == actions(b) and a.rewards == b.rewards and a.info == b.info
    assert "You are carrying" in fo[0].turns[0].text and "You are carrying" not in po[0].turns[0].text


@pytest.mark.parametrize("room", ROOMS)
def test_expert_plays_the_walkthrough(room):
    env = TextNavEnv()
    env.reset(options={"start_room": room})
    commands = []
    while not env.done:
        commands.append(expert_command(env.state()))
        env.step(commands[-1] + "\n")
    assert commands == walkthrough(room) and env.state().food_holder == "fridge"


def test_expert_recovers_dropped_food():
    assert expert_command(HouseState("garden", "floor", "bathroom", frozenset())) == "go south"
    assert expert_command(HouseState("bathroom", "floor", "bathroom", frozenset())) == "take stale food"
    assert expert_command(HouseState("office", "chest", "office", frozenset())) == "open chest"
    assert expert_command(HouseState("office", "chest", "office", frozenset({"chest"}))) == "take stale food from chest"
    assert expert_command(HouseState("kitchen", "fridge", "kitchen", frozenset({"fridge"}))) == "close fridge"
    assert expert_command(HouseState("kitchen", "inventory", None, frozenset({"fridge"}))) == (
        "insert stale food into fridge")
    assert expert_command(HouseState("kitchen", "eaten", None, frozenset())) is None


def test_far_optimal_rooms_never_include_the_goal_rooms():
    assert not {"living room", "kitchen"} & set(FAR_ROOMS)


def test_bad_mix_is_rejected_before_iteration():
    with pytest.raises(TypeError, match="follow_prob"):
        generate(1, follow_probability=0.3)
    with pytest.raises(ValueError, match="follow_prob"):
        generate(1, follow_prob=1.5)
    with pytest.raises(ValueError, match="max_steps"):
        generate(1, max_steps=0)


def test_cli_writes_jsonl_and_prints_stats(tmp_path, capsys):
    out = tmp_path / "text_nav_po.jsonl"
    main(["--episodes", "8", "--seed", "5", "--po", "--out", str(out)])
    assert read_episodes(out) == list(generate(8, seed=5, fully_observed=False))
    printed = capsys.readouterr().out
    assert "ms/episode" in printed and "success_rate" in printed and "0.258" in printed
