"""Training-time information: the per-task whitelist, what reaches the critic, replayed states, pinned starts."""

import dataclasses
import json

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from data_gen.maze import generate as maze_episodes
from data_gen.text_nav import generate as text_nav_episodes
from data_gen.wordle import generate as wordle_episodes
from lmrl.algos.base import ConfigError, typed_config
from lmrl.algos.privileged import FORBIDDEN, ReplayError, TaskInfo, maze_position, replay_states
from lmrl.algos.sweet import SweetConfig
from lmrl.algos.sweet_critic import trajectory_items
from lmrl.algos.sweet_data import LogRatio
from lmrl.data.jsonl import write_episodes
from lmrl.envs.base import Episode, Text
from lmrl.envs.maze import GOAL, MazeEnv, describe
from lmrl.envs.text_nav import TextNavEnv
from lmrl.models.factory import train_tokenizer
from lmrl.task import Task
from tests.e2e import ROOT

TASKS = sorted(p.stem for p in (ROOT / "conf" / "task").glob("*.yaml"))


def sweet_config(*overrides: str):
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        return compose("train", overrides=["algo=sweet", *overrides])


def test_every_task_names_task_defining_keys_and_no_outcome_label():
    infos = typed_config(SweetConfig, sweet_config().algo).task_info
    assert sorted(infos) == TASKS
    for name, info in infos.items():
        assert info.keys and not set(info.keys) & FORBIDDEN, name
        assert not info.validate(), name
    for label in ("success", "behaviour", "failed", "outcome", "price"):
        assert label in FORBIDDEN


def test_an_outcome_label_in_the_whitelist_fails_at_start_up():
    assert TaskInfo(keys=["start", "success"]).validate()
    with pytest.raises(ConfigError, match=r"task_info.maze_po.*outcome or behaviour labels"):
        typed_config(SweetConfig, sweet_config("algo.task_info.maze_po.keys=[start,behaviour]").algo)


LEAKS = {"success": "LEAKSUCCESS", "behaviour": "LEAKBEHAVIOUR", "failed": "LEAKFAILED", "outcome": "LEAKOUTCOME",
         "price": "LEAKPRICE", "noise": "LEAKNOISE"}


def leaky(episodes) -> list[Episode]:
    """Episodes whose info also carries outcome labels, each a string no task text contains."""
    return [dataclasses.replace(ep, info={**ep.info, **LEAKS}) for ep in episodes]


@pytest.mark.parametrize("task_name, episodes, marker", [
    ("maze_po", lambda: maze_episodes(40, seed=3, fully_observed=False), "position: "),
    ("wordle", lambda: wordle_episodes(60, seed=3), "secret: "),
])
def test_no_outcome_label_reaches_the_critic(task_name, episodes, marker, tmp_path):
    """The critic's training sequences, built from a dataset whose info carries outcome labels: each one
    starts with c, and no label's value appears anywhere in them."""
    data = tmp_path / "data.jsonl"
    write_episodes(data, leaky(episodes()))
    cfg = sweet_config(f"task={task_name}", f"task.data.path={data}")
    task = Task(cfg.task, tmp_path / "cache")
    tokenizer = train_tokenizer(task.texts(), 400)
    info = typed_config(SweetConfig, cfg.algo).task_info[task_name]
    items = trajectory_items(task, info, tokenizer, 512, True, LogRatio(0.1), 10_000, 8, False, 16, seed=0)
    texts = [tokenizer.decode(s.input_ids.tolist()) for s in items.seqs]
    assert texts and all(t.startswith(info.keys[0] + ": ") and marker in t.split("\n")[0] for t in texts)
    assert not [t for t in texts if any(v in t for v in LEAKS.values())]
    # the ablation's critic reads no c at all
    plain = trajectory_items(task, info, tokenizer, 512, False, LogRatio(0.1), 10_000, 8, False, 16, seed=0)
    assert not any(marker in tokenizer.decode(s.input_ids.tolist()) for s in plain.seqs)


@pytest.mark.parametrize("fully_observed", [True, False])
def test_replayed_maze_positions_equal_the_recorded_observations(fully_observed):
    """The replayed position before each move, described as the env describes it, is the observation the
    data recorded there (FO: goal, position and walls; PO: the walls)."""
    for ep in maze_episodes(30, seed=5, fully_observed=fully_observed):
        states = replay_states(ep, MazeEnv(fully_observed=fully_observed), {"init_position": ep.info["start"]},
                               maze_position)
        actions = [i for i, t in enumerate(ep.turns) if t.is_action]
        observed = [ep.turns[i - 1].text for i in actions]
        assert [describe(tuple(s["position"]), GOAL, fully_observed) for s in states] == observed
        assert states[0]["position"] == ep.info["start"]


def test_replay_refuses_an_episode_the_env_does_not_reproduce():
    ep = next(iter(maze_episodes(1, seed=5, fully_observed=False)))
    turns = list(ep.turns)
    turns[2] = Text("There are no walls near you.\n", False)  # a different observation after the first move
    tampered = dataclasses.replace(ep, turns=turns)
    if tampered.turns[2].text == ep.turns[2].text:
        pytest.skip("the first move already leads to an open cell")
    with pytest.raises(ReplayError, match="diverges after agent turn 1"):
        replay_states(tampered, MazeEnv(fully_observed=False), {"init_position": ep.info["start"]}, maze_position)


@pytest.mark.parametrize("fully_observed", [True, False])
def test_text_nav_replays_its_recorded_observations(fully_observed):
    info = typed_config(SweetConfig, sweet_config().algo).task_info["text_nav_po"]
    for ep in text_nav_episodes(4, seed=2, fully_observed=fully_observed):
        contexts = info.contexts(ep, lambda: TextNavEnv(fully_observed=fully_observed))  # ReplayError on a mismatch
        assert len(contexts) == ep.num_actions
        assert contexts[0].startswith(f"start_room: {ep.info['start_room']}; room: {ep.info['start_room']};")


@pytest.mark.parametrize("task_name", ["maze_po", "wordle", "text_nav_fo", "car_dealer"])
def test_reset_options_pin_the_task(task_name):
    """What group PG does: a random start's info, turned into reset options, starts the same task again."""
    cfg = sweet_config(f"task={task_name}")
    info = typed_config(SweetConfig, cfg.algo).task_info[task_name]
    env = instantiate(cfg.task.env)
    for seed in range(3):
        _, first = env.reset(seed=seed)
        _, again = env.reset(seed=seed + 100, options=info.options(first))
        assert json.dumps(info.allowed(again), sort_keys=True) == json.dumps(info.allowed(first), sort_keys=True)
