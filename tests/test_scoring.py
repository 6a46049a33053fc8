"""The paper's piecewise-linear normalization at its anchors, and episode summaries."""

import math

import pytest

from lmrl.envs.base import Episode, Text
from lmrl.scoring import normalize, summarize

MAZE = {"min": -101.0, "avg": -83.0, "max": -6.84}


@pytest.mark.parametrize("ret, expected", [(-101.0, 0.0), (-83.0, 50.0), (-6.84, 100.0), (-92.0, 25.0)])
def test_normalize_anchors(ret, expected):
    assert normalize(ret, **MAZE) == pytest.approx(expected)


def test_normalize_upper_branch_midpoint_and_no_clipping():
    assert normalize((-83.0 + -6.84) / 2, **MAZE) == pytest.approx(75.0)
    assert normalize(-401.0, **MAZE) < 0  # not clipped: invalid-action spam scores below 0


def test_summarize():
    eps = [Episode([Text("o", False), Text("a", True)], [0, r], True, {"success": r == 0}) for r in (0.0, -2.0)]
    s = summarize(eps, MAZE)
    assert s["return_mean"] == -1.0 and s["return_std"] == 1.0
    assert s["return_stderr"] == pytest.approx(1 / math.sqrt(2))
    assert s["success_rate"] == 0.5 and s["episodes"] == 2
    assert s["normalized_score"] == pytest.approx(normalize(-1.0, **MAZE))
