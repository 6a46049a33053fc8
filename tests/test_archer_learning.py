"""Slow tier (issue 70): ArCHer, with its defaults, beats its BC start on FO maze, with a critic that fits.

One run from a fresh cache: the BC stage (600 steps), then 40 ArCHer rounds of 32 episodes (15 critic-only), then
the evaluation of the actor and of its BC start on the same 200 test episodes.  Measured with these settings (seed
0, bf16, one CPU core, ~15 min): start 70.8, final 82.1 and 82.4 (without the KL term), return stderr ~3 on each,
so a margin of 5 normalized points sits ~2 standard errors of the difference below the gain seen.  This is seed 0's
claim, not yet ArCHer's: on seed 1 the same settings ended at 66.3 from a start of 64.0 (+2.3, its rollouts ~80 in
rounds 20-35, then drifting back; docs/algorithms/turn-level.md), where this test would fail.
"""

from __future__ import annotations

import csv

import pytest

from tests.e2e import run_cli

MARGIN = 5.0
MIN_SPEARMAN = 0.5


@pytest.mark.slow
def test_archer_beats_its_bc_start_on_fo_maze(tmp_path):
    metrics = run_cli("lmrl.train", ["task=maze_fo", "algo=archer"], tmp_path / "run", tmp_path / "cache",
                      timeout=3600)
    assert metrics["normalized_score"] >= metrics["start_normalized"] + MARGIN, metrics
    rounds = list(csv.DictReader(open(tmp_path / "run" / "rounds.csv")))
    fit = [float(r["critic/spearman_states"]) for r in rounds[-5:]]
    assert sum(fit) / len(fit) >= MIN_SPEARMAN, fit  # the critic ranks the actor's states by their returns
