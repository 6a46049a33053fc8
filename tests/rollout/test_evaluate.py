"""The evaluation protocol: start states x episodes, distinct seeds, `max_starts` spreading."""

import pytest

from lmrl.envs.maze import MazeEnv, start_cells
from lmrl.rollout.evaluate import protocol, spread


def test_spread_keeps_everything_without_a_limit():
    assert spread(range(5), None) == [0, 1, 2, 3, 4]
    assert spread(range(5), 9) == [0, 1, 2, 3, 4]


def test_spread_picks_evenly_spaced_items():
    assert spread(range(645), 5) == [0, 129, 258, 387, 516]
    assert spread("abcdefgh", 4) == ["a", "c", "e", "g"]


def test_spread_rejects_non_positive_limits():
    with pytest.raises(ValueError, match="max_starts"):
        spread(range(3), 0)


def test_protocol_repeats_each_start_with_distinct_seeds():
    options, seeds = protocol(MazeEnv, episodes_per_start=3, seed=1, max_starts=4)
    cells = [tuple(o["init_position"]) for o in options]
    assert len(options) == 12 and len(set(seeds)) == 12
    assert cells[:3] == [cells[0]] * 3 and len(set(cells)) == 4
    assert set(cells) <= set(start_cells())
    full, _ = protocol(MazeEnv, episodes_per_start=1, seed=1)
    assert len(full) == 25
