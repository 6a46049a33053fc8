"""The findings table: each paper claim's comparisons judged by hand-computed Welch t-tests."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from scipy import stats

from lmrl.findings import BEST_OFFLINE, Claim, claim_verdict, compare, findings, to_markdown, welch
from lmrl.report import read_paper


def cell(task, algo, mean, se, n=3, status="ok", stale=""):
    return {"task": task, "algo": algo, "normalized_mean": mean, "normalized_stderr": se, "seeds": n,
            "status": status, "stale": stale}


PAPER = read_paper()


def test_welch_by_hand():
    """Means 90 vs 60, standard errors 3 and 4 over 3 seeds each: t = 30 / 5 = 6; Welch-Satterthwaite
    df = 25^2 / (9^2/2 + 16^2/2) = 625 / 168.5."""
    t, df = welch({"mean": 90, "se": 3, "n": 3}, {"mean": 60, "se": 4, "n": 3})
    assert t == pytest.approx(6.0) and df == pytest.approx(625 / 168.5)
    # identical seeds on both sides: no spread, any gap is decisive, no gap is none
    assert welch({"mean": 5, "se": 0, "n": 3}, {"mean": 4, "se": 0, "n": 3})[0] == math.inf
    assert welch({"mean": 5, "se": 0, "n": 3}, {"mean": 5, "se": 0, "n": 3})[0] == 0.0


def test_a_comparison_agrees_disagrees_or_is_inconclusive():
    # the paper: FO maze ILQL 99.9 > MC 75.0
    agree = pd.DataFrame([cell("maze_fo", "ilql", 95, 1), cell("maze_fo", "mc", 80, 1)])
    row = compare(agree, PAPER, ("maze_fo", "ilql", "maze_fo", "mc"))
    p = 2 * stats.t.sf(15 / math.sqrt(2), 4.0)  # equal errors: df = 4
    assert row["verdict"] == "agree" and row["p"] == pytest.approx(p) and row["paper_diff"] == pytest.approx(24.9)
    flipped = pd.DataFrame([cell("maze_fo", "ilql", 60, 1), cell("maze_fo", "mc", 80, 1)])
    assert compare(flipped, PAPER, ("maze_fo", "ilql", "maze_fo", "mc"))["verdict"] == "disagree"
    # 2 points apart with errors of 5: within noise
    noisy = pd.DataFrame([cell("maze_fo", "ilql", 82, 5), cell("maze_fo", "mc", 80, 5)])
    row = compare(noisy, PAPER, ("maze_fo", "ilql", "maze_fo", "mc"))
    assert row["verdict"] == "inconclusive" and "within noise" in row["why"]
    # one seed, a stale cell, a failed cell, a missing cell: never a verdict
    for cells in ([cell("maze_fo", "ilql", 95, float("nan"), n=1), cell("maze_fo", "mc", 10, 1)],
                  [cell("maze_fo", "ilql", 95, 1, stale="old data"), cell("maze_fo", "mc", 10, 1)],
                  [cell("maze_fo", "ilql", float("nan"), float("nan"), n=0, status="failed"), cell("maze_fo", "mc", 10, 1)],
                  [cell("maze_fo", "mc", 10, 1)]):
        assert compare(pd.DataFrame(cells), PAPER, ("maze_fo", "ilql", "maze_fo", "mc"))["verdict"] == "inconclusive"


def test_best_offline_rl_is_the_better_of_mc_and_ilql_on_both_sides():
    cells = pd.DataFrame([cell("wordle", "mc", 40, 1), cell("wordle", "ilql", 70, 1), cell("wordle", "bc", 50, 1)])
    row = compare(cells, PAPER, ("wordle", BEST_OFFLINE, "wordle", "bc"))
    assert row["a"] == "best_offline_rl=ilql" and row["diff"] == pytest.approx(20)
    assert row["paper_diff"] == pytest.approx(97.7 - 79.9) and row["verdict"] == "agree"
    # only one of the two has a current score: it is the best
    only_mc = pd.DataFrame([cell("wordle", "mc", 40, 1), cell("wordle", "ilql", 90, 1, stale="x"), cell("wordle", "bc", 50, 1)])
    assert compare(only_mc, PAPER, ("wordle", BEST_OFFLINE, "wordle", "bc"))["verdict"] == "disagree"


def test_cells_of_different_models_compare_models_not_methods():
    """Guess My City's MC ran on the 4 x 256 model's BC stage while its ILQL still ran on the tiny one: their gap
    is the models', so the comparison is inconclusive; best offline RL against BC picks the cell of BC's model."""
    cells = pd.DataFrame([{**cell("guess", "mc", 25, 3), "model": "small"},
                          {**cell("guess", "ilql", 0, 0), "model": "tiny"},
                          {**cell("guess", "bc", 12, 2), "model": "small"}])
    row = compare(cells, PAPER, ("guess", "mc", "guess", "ilql"))
    assert row["verdict"] == "inconclusive" and row["why"] == "different models (small vs tiny)"
    assert row["diff"] == pytest.approx(25)
    tiny_best = cells.assign(normalized_mean=[25, 40, 12])  # the tiny ILQL cell now the higher one
    row = compare(tiny_best, PAPER, ("guess", BEST_OFFLINE, "guess", "bc"))
    assert row["a"] == "best_offline_rl=mc" and row["diff"] == pytest.approx(13) and row["verdict"] != "inconclusive"
    # without a model of BC's, the better cell as before, and the mismatch makes it inconclusive
    no_bc = tiny_best.assign(model=["small", "tiny", "other"])
    row = compare(no_bc, PAPER, ("guess", BEST_OFFLINE, "guess", "bc"))
    assert row["a"] == "best_offline_rl=ilql" and row["verdict"] == "inconclusive"


def test_claim_verdicts():
    assert claim_verdict(["agree", "agree", "inconclusive", "inconclusive"]) == "agree"
    assert claim_verdict(["agree", "inconclusive", "inconclusive"]) == "inconclusive"  # less than half agree
    assert claim_verdict(["agree", "agree", "disagree", "disagree"]) == "inconclusive"
    assert claim_verdict(["disagree", "inconclusive", "agree"]) == "inconclusive"
    assert claim_verdict(["disagree", "disagree", "agree"]) == "disagree"
    assert claim_verdict([]) == "inconclusive"


def test_findings_table_and_its_markdown():
    """PO harder than FO on both navigation tasks for BC, MC and ILQL: six comparisons of different tasks."""
    cells = []
    for env, fo, po in (("maze", 90, 50), ("text_nav", 80, 30)):
        for algo in ("bc", "mc", "ilql"):
            cells += [cell(f"{env}_fo", algo, fo, 2), cell(f"{env}_po", algo, po, 2)]
    claim = Claim("PO harder", tuple((f"{e}_fo", a, f"{e}_po", a) for e in ("maze", "text_nav") for a in ("bc", "mc", "ilql")))
    summary, details = findings(pd.DataFrame(cells), PAPER, claims=(claim,))
    # the paper: FO > PO in all six except Text-Nav MC (71.9 vs 71.6: still FO ahead) -- all agree
    assert summary.iloc[0].to_dict() == {"claim": "PO harder", "verdict": "agree", "agree": 6, "disagree": 0,
                                         "inconclusive": 0}
    assert len(details) == 6 and set(details["verdict"]) == {"agree"}
    md = to_markdown(summary, details, {"maze_fo": "FO Maze", "maze_po": "PO Maze"})
    assert "| PO harder | **agree** | 6 | 0 | 0 |" in md
    assert "| PO harder | FO Maze bc | PO Maze bc | +5.1 | +40.0 | agree: p = " in md


def test_every_claim_names_tasks_and_algorithms_of_the_paper_table():
    from lmrl.findings import CLAIMS
    from lmrl.report import ALGOS, TASKS

    for claim in CLAIMS:
        assert claim.comparisons
        for task_a, algo_a, task_b, algo_b in claim.comparisons:
            assert {task_a, task_b} <= set(TASKS) and {algo_a, algo_b} <= set(ALGOS) | {BEST_OFFLINE}
            assert task_a in PAPER.index and task_b in PAPER.index
