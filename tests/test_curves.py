"""`python -m launchers.curves`: runs each algorithm with curve points and gathers them into one CSV and
one figure per task; a finished run is reused."""

from __future__ import annotations

import csv

from launchers import curves


def test_curves_gather_policy_loss_and_critic_points(tmp_path, monkeypatch):
    monkeypatch.setenv("LMRL_CACHE", str(tmp_path / "cache"))
    argv = ["--task", "maze_fo", "--algos", "ilql", "--points", "2", "--episodes-per-start", "1",
            "--out", str(tmp_path / "curves"), "--", "debug=smoke", "smoke.steps=4", "task.eval.max_starts=2",
            "smoke.critic_episodes=2", "task.data.recipe.episodes=40"]
    curves.main(argv)
    with open(tmp_path / "curves" / "maze_fo.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(r["algo"], r["step"]) for r in rows] == [("ilql", "2"), ("ilql", "4")]
    assert all(float(r["train_loss"]) > 0 and r["normalized_score"] for r in rows)
    assert all(r["critic/spearman"] != "" for r in rows if r["algo"] == "ilql")
    assert (tmp_path / "curves" / "maze_fo.png").stat().st_size > 10_000
    log = tmp_path / "curves" / "runs" / "maze_fo" / "ilql__s0" / "curve_run.log"
    stamp = log.stat().st_mtime
    curves.main(argv)  # both runs finished: reused, not re-trained
    assert log.stat().st_mtime == stamp
