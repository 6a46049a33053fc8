"""The maze probe's agreement measures (lmrl/algos/turn_probe.py), on hand-placed states of the double-T maze."""

from __future__ import annotations

import pytest
import torch

from lmrl.algos.turn_probe import ProbeState, constant_move_agreement, move_agreement
from lmrl.envs.maze import ACTIONS, optimal_directions

# (1, 3): the only way to the goal is down; (5, 3): right; (1, 1): right.  Two states at (1, 3), one at each other.
CELLS = [(1, 3), (1, 3), (5, 3), (1, 1)]
STATES = [ProbeState([], "", cell) for cell in CELLS]


def one_hot(moves: list[str]) -> torch.Tensor:
    scores = torch.zeros(len(moves), len(ACTIONS))
    for i, move in enumerate(moves):
        scores[i, ACTIONS.index(f"move {move}\n")] = 1.0
    return scores


def test_the_cells_are_what_the_test_assumes():
    assert [optimal_directions(c) for c in CELLS] == [["down"], ["down"], ["right"], ["right"]]


def test_agreement_is_the_mean_over_cells_of_each_cells_share():
    # (1, 3): one of its two states right (1/2); (5, 3) right (1); (1, 1) wrong (0): (0.5 + 1 + 0) / 3
    assert move_agreement(one_hot(["down", "up", "right", "left"]), STATES, ACTIONS) == pytest.approx(0.5)
    assert move_agreement(one_hot(["down", "down", "right", "right"]), STATES, ACTIONS) == 1.0


def test_a_constant_move_agrees_where_that_move_is_optimal():
    floor = constant_move_agreement(STATES, ACTIONS)
    assert floor == pytest.approx({"move up": 0.0, "move down": 1 / 3, "move left": 0.0, "move right": 2 / 3})
