"""Critic health: the maze probe scores a critic that knows the maze 1 and one that avoids the goal 0;
the held-out metrics come out of a real (tiny, smoke-sized) value run."""

from __future__ import annotations

import re

import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from lmrl.algos.critic import MIN_PROBE, critic_health, maze_probe
from lmrl.envs.maze import optimal_directions
from lmrl.models.value import ValueOutput
from lmrl.task import Task
from tests.e2e import ROOT

POSITION = re.compile(r"Your current position is at position ([\d ]+), ([\d ]+)\.")


class MazeOracleCritic(torch.nn.Module):
    """Q = +1 on every token of a row whose last move is BFS-optimal from the row's position, -1
    otherwise (`sign=-1` flips it); V = 0.  Reads the row's text back with the tokenizer."""

    def __init__(self, tokenizer, sign: float = 1.0):
        super().__init__()
        self.tokenizer, self.sign = tokenizer, sign
        self.anchor = torch.nn.Parameter(torch.zeros(1))  # gives the critic a device
        self.vocab = len(tokenizer)
        self.config = type("Config", (), {"n_positions": 512})()

    def forward(self, input_ids, attention_mask=None, position_ids=None, **_):
        q = torch.zeros(*input_ids.shape, self.vocab)
        for b, row in enumerate(input_ids.tolist()):
            text = self.tokenizer.decode(row, skip_special_tokens=True)
            found = POSITION.findall(text)
            move = re.findall(r"move (up|down|left|right)", text)
            if found and move:
                cell = tuple(int(x.replace(" ", "")) for x in found[-1])
                good = move[-1] in optimal_directions(cell)
                q[b] = self.sign * (1.0 if good else -1.0)
        return ValueOutput([q], torch.zeros(input_ids.shape), None)


@pytest.fixture(scope="module")
def maze(tmp_path_factory):
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        cfg = compose("train", overrides=["task=maze_fo", "debug=smoke", "task.data.recipe.episodes=40"])
    task = Task(cfg.task, tmp_path_factory.mktemp("cache"))
    _, tokenizer = instantiate(cfg.model, corpus=task.texts)
    return task, tokenizer


def test_maze_probe_tells_a_critic_that_knows_the_maze_from_one_that_does_not(maze):
    task, tokenizer = maze
    good = maze_probe(MazeOracleCritic(tokenizer), tokenizer, task)
    bad = maze_probe(MazeOracleCritic(tokenizer, sign=-1.0), tokenizer, task)
    assert good["critic/probe_agreement"] == 1.0 and good["critic/probe_agreement"] >= MIN_PROBE
    assert bad["critic/probe_agreement"] == 0.0
    assert good["critic/maze_v_next_to_goal"] == 0.0
    assert good["critic/probe_ceiling"] == 1.0  # every FO start cell looks different


def test_probe_ceiling_of_look_alike_start_cells():
    from lmrl.algos.critic import probe_ceiling
    from lmrl.envs.maze import optimal_directions, start_cells, wall_sentence

    moves = ["up", "down", "left", "right"]
    # two cells look alike and want different moves: one of them at best; a third looks different
    assert probe_ceiling(["a", "a", "b"], [["up"], ["down"], ["left"]], moves) == 2 / 3
    assert probe_ceiling(["a", "a", "b"], [["up"], ["up", "down"], ["left"]], moves) == 1.0
    # PO maze: the first observation is the walls sentence; 21 of the 25 start cells at best (of the 8 cells
    # with walls above and below, at most 4 share a best move)
    cells = start_cells()
    ceiling = probe_ceiling([wall_sentence(c) for c in cells], [optimal_directions(c) for c in cells], moves)
    assert len(cells) == 25 and ceiling == 21 / 25


def test_critic_health_on_held_out_episodes(maze):
    task, tokenizer = maze
    episodes = task.heldout_episodes(4)
    assert episodes and all(ep.turns for ep in episodes)
    assert [ep.turns for ep in task.heldout_episodes(4)] == [ep.turns for ep in episodes]  # cached, same
    first = list(task.episodes())[:4]
    assert [ep.turns for ep in episodes] != [ep.turns for ep in first]  # not the training data
    health = critic_health(MazeOracleCritic(tokenizer), tokenizer, task, episodes, gamma=0.99)
    assert health["critic/probe_agreement"] == 1.0 and health["critic/states"] > 0
    assert set(health) >= {"critic/q_rmse", "critic/spearman", "critic/value_bias", "critic/fitted"}
    assert health["critic/fitted"] == 0.0  # V = 0 everywhere ranks no state: Spearman is 0, not fitted


def test_summary_line_names_the_probe_ceiling_where_it_binds():
    from lmrl.utils import summary_line

    m = {"task": "maze_po", "algo": "ilql", "return_mean": -60.0, "return_stderr": 3.0, "normalized_score": 50.0,
         "success_rate": 0.4, "episodes": 50, "critic/fitted": 0.0, "critic/spearman_states": 0.5,
         "critic/probe_agreement": 0.56, "critic/probe_ceiling": 0.84}
    assert summary_line(m).endswith("critic=DID NOT FIT (spearman=0.50 probe=0.56 of 0.84)")
    fo = {**m, "critic/fitted": 1.0, "critic/probe_ceiling": 1.0}
    assert summary_line(fo).endswith("critic=fitted (spearman=0.50 probe=0.56)")
    # PPO's value head reports its explained variance instead (no Spearman, no verdict)
    ppo = {k: v for k, v in m.items() if not k.startswith("critic/")} | {"critic/explained_variance": 0.512}
    assert summary_line(ppo).endswith("episodes=50 value_head_explained_variance=0.51")
