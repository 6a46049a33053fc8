"""What a reviewer needs to trust the results table: each record's provenance (code, dirty tree, machine,
precision), table runs refused from a dirty tree, the measures beside each score (raw return, success, invalid
turns), the marks the report puts on a cell (dirty, mixed commits/precisions/machines, below the anchor minimum,
below its start), and the regression gate's comparison."""

from __future__ import annotations

import json
import math
import subprocess

import pandas as pd
import pytest
from omegaconf import OmegaConf

from launchers import reproduce_check
from lmrl import records as records_mod
from lmrl.envs.base import BatchedEnv, Episode, Text
from lmrl.records import DirtyTreeError, git_state, is_dirty, make_record, require_clean_tree, write_record
from lmrl.report import TRUE_MINIMUM, build, task_config
from lmrl.scoring import normalize, summarize
from lmrl.task import Task
from tests.e2e import ROOT

MAZE = {"min": -101.0, "avg": -83.0, "max": -6.84}
TEXT_NAV = {"min": 0.0, "avg": 0.26, "max": 1.0}
MACHINE_A = {"cpu_model": "CPU A", "cpu_bf16": True, "gpu": None, "torch": "2.13.0"}
MACHINE_B = {"cpu_model": "CPU B", "cpu_bf16": False, "gpu": None, "torch": "2.13.0"}


def git(repo, *args):
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


@pytest.fixture
def repo(tmp_path):
    git(tmp_path, "init", "-q")
    git(tmp_path, "config", "user.email", "t@t")
    git(tmp_path, "config", "user.name", "t")
    (tmp_path / "code.py").write_text("x = 1\n")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "table.md").write_text("old\n")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "init")
    return tmp_path


def test_git_state_says_dirty_with_a_hash_of_the_diff_and_ignores_the_tables_outputs(repo):
    clean = git_state(repo)
    assert clean["git_dirty"] is False and clean["git_diff"] is None and len(clean["git_commit"]) == 40
    (repo / "results" / "table.md").write_text("rebuilt\n")  # a sweep's plan, the report's outputs
    (repo / "results" / "new.json").write_text("{}\n")
    assert git_state(repo)["git_dirty"] is False
    (repo / "code.py").write_text("x = 2\n")
    first = git_state(repo)
    assert first["git_dirty"] is True and len(first["git_diff"]) == 12 and first["git_commit"] == clean["git_commit"]
    assert git_state(repo)["git_diff"] == first["git_diff"]  # the same change, the same hash
    (repo / "code.py").write_text("x = 3\n")
    assert git_state(repo)["git_diff"] != first["git_diff"]
    (repo / "code.py").write_text("x = 1\n")
    (repo / "new_module.py").write_text("y = 1\n")  # an untracked source file changes what runs too
    assert git_state(repo)["git_dirty"] is True


def test_a_table_run_refuses_a_dirty_tree_unless_allowed(repo):
    (repo / "code.py").write_text("x = 2\n")
    with pytest.raises(DirtyTreeError, match=r"records\.allow_dirty=true") as err:
        require_clean_tree(False, "launchers.sweep experiment=x", root=repo)
    assert "code.py" in str(err.value)  # names what is uncommitted
    assert require_clean_tree(True, "x", root=repo)["git_dirty"] is True


def test_the_sweep_exits_naming_records_allow_dirty_on_a_dirty_tree(monkeypatch, capsys):
    from launchers import sweep

    monkeypatch.delenv("LMRL_ALLOW_DIRTY", raising=False)
    monkeypatch.setattr(records_mod, "git_state",
                        lambda root=None: {"git_commit": "a" * 40, "git_dirty": True, "git_diff": "b" * 12})
    with pytest.raises(SystemExit, match=r"records\.allow_dirty=true"):
        sweep.main(["experiment=sweep_check"])
    # allowed on the command line, the plan says so (and the dry run never refuses: it runs nothing)
    assert sweep.plan("sweep_check", ["records.allow_dirty=true"], {}).allow_dirty is True
    assert sweep.plan("sweep_check", [], {}).allow_dirty is False
    assert sweep.main(["experiment=sweep_check", "--dry-run", "--no-costs"]) == 0


def test_a_record_carries_its_provenance():
    metrics = {"task": "maze_fo", "algo": "mc", "seed": 0, "precision": "fp32", "return_mean": -10.0,
               "normalized_score": 95.0, "start_normalized": 60.0, "start_return_mean": -50.0}
    rec = make_record(metrics, "abc", wall_seconds=3.0)
    for key in ("git_commit", "git_dirty", "git_diff", "cpu_model", "cpu_bf16", "gpu", "torch", "launcher", "host",
                "precision", "wall_seconds"):
        assert key in rec, key
    assert rec["precision"] == "fp32" and rec["launcher"] == "python" and rec["start_normalized"] == 60.0
    assert "+dirty" not in rec["git_commit"]  # a flag of its own now
    # records from before the flag said it in the commit
    assert is_dirty({"git_commit": "abc+dirty"}) is True and is_dirty({"git_commit": "abc"}) is False
    assert is_dirty({"git_commit": "abc", "git_dirty": False}) is False and is_dirty({}) is None
    assert is_dirty({"git_commit": "abc+dirty", "git_dirty": float("nan")}) is True


def test_summaries_count_the_turns_the_env_flagged_invalid():
    maze = Task(OmegaConf.load(ROOT / "conf/task/maze_fo.yaml"), ROOT / ".cache" / "lmrl")
    envs = BatchedEnv(maze.make_env, 2)
    envs.reset_all([{}, {}], [0, 1])
    envs.step(["move up\n", "fly away\n"])
    envs.step(["jump\n", "move left\n"])
    first, second = envs.episodes
    assert (first.invalid_turns, second.invalid_turns) == (1, 1)
    summary = summarize(envs.episodes, MAZE)
    assert summary["invalid_rate"] == pytest.approx(2 / 4)
    clean = Episode([Text("a\n", False), Text("b\n", True)], [0.0, -1.0], True, {"success": True})
    assert summarize([clean], MAZE)["invalid_rate"] == 0.0


@pytest.mark.parametrize("task", sorted(TRUE_MINIMUM))
def test_the_stated_true_minimum_is_what_an_all_invalid_policy_scores(task, tmp_path):
    """The header's true minimum is checked against the env: play an unparseable action until the episode ends."""
    cfg = task_config(task)
    env = Task(cfg, tmp_path).make_env()
    env.reset(seed=0, options=env.eval_reset_options()[0])
    total, done, steps = 0.0, False, 0
    while not done:
        result = env.step("xyzzy\n")
        total += result.reward
        done = result.terminated or result.truncated
        steps += 1
        assert steps < 1000
    assert total == TRUE_MINIMUM[task][0]
    assert total < float(cfg.normalization.min)  # else the table needs no true minimum for it


def rec(task, algo, seed, ret, digest, norm=MAZE, commit="c" * 40, dirty=False, precision="fp32", machine=None,
        **extra):
    metrics = {"task": task, "algo": algo, "model": "tiny", "hardware": "cpu", "seed": seed, "return_mean": ret,
               "return_std": 1.0, "return_stderr": 0.05, "normalized_score": normalize(ret, **norm),
               "success_rate": 0.5, "invalid_rate": 0.25, "episodes": 10, "episode_length": 3.0,
               "precision": precision}
    out = make_record(metrics, digest, wall_seconds=60.0)
    out.update({"git_commit": commit, "git_dirty": dirty, **(machine or MACHINE_A), **extra})
    return out


def cell(table: pd.DataFrame, task: str, algo: str) -> dict:
    return table[(table["task"] == task) & (table["algo"] == algo)].iloc[0].to_dict()


def test_the_report_marks_provenance_anchor_and_start_problems(tmp_path):
    d = tmp_path / "records"
    planted = [
        # clean, one commit, one precision, one machine: no mark
        *(rec("maze_fo", "bc", s, -50.0 + s, f"bc{s}") for s in range(3)),
        # one seed from a dirty tree
        *(rec("maze_fo", "filtered_bc", s, -20.0, f"fb{s}", dirty=(s == 1)) for s in range(3)),
        # seeds on two commits, in two precisions, on two machines
        *(rec("maze_fo", "mc", s, -15.0 - s, f"mc{s}", commit=("c" if s else "d") * 40,
              precision="bf16" if s == 2 else "fp32", machine=MACHINE_B if s == 0 else MACHINE_A,
              start_normalized=normalize(-50.0 + s, **MAZE), start_return_mean=-50.0 + s, start_return_stderr=0.05)
          for s in range(3)),
        # below the anchor minimum (maze: -101), with its true minimum said
        *(rec("maze_fo", "ppo", s, -300.0 + s, f"ppo{s}", start_normalized=normalize(-50.0 + s, **MAZE))
          for s in range(3)),
        # ended far below the policy it started from (the start of records before the field: its BC cell)
        *(rec("text_nav_fo", "bc", s, 0.2 + 0.01 * s, f"tb{s}", norm=TEXT_NAV) for s in range(3)),
        *(rec("text_nav_fo", "sweet", s, 0.0 + 0.01 * s, f"ts{s}", norm=TEXT_NAV) for s in range(3)),
        # a record from before precision and machine were recorded
        {**rec("text_nav_fo", "mc", 0, 0.5, "tm0", norm=TEXT_NAV), "precision": None, "cpu_model": None,
         "gpu": None, "git_commit": "e" * 40 + "+dirty", "git_dirty": None},
    ]
    for r in planted:
        write_record(d, r)
    stage = {("maze_fo", s): f"maze{s}" for s in range(3)} | {("text_nav_fo", s): f"nav{s}" for s in range(3)}
    cells = [{"task": r["task"], "algo": r["algo"], "seed": r["seed"], "digest": r["config_hash"], "overrides": [],
              "status": "done", "stage": stage[(r["task"], r["seed"])] if r["algo"] != "ppo" else ""} for r in planted]
    spec = {"tasks": ["maze_fo", "text_nav_fo"], "algos": ["bc", "filtered_bc", "mc", "ppo", "sweet"], "seeds": [0]}
    (d / "plan.json").write_text(json.dumps({"experiment": "planted", "spec": spec, "cells": cells}))
    paths = build(d, "t", tmp_path / "out")
    table = pd.read_csv(paths["csv"]).fillna({"marks": ""})
    assert cell(table, "maze_fo", "bc")["marks"] == ""
    assert cell(table, "maze_fo", "filtered_bc")["marks"] == "d" and cell(table, "maze_fo", "filtered_bc")["dirty_seeds"] == 1
    mixed = cell(table, "maze_fo", "mc")
    assert mixed["marks"] == "c p m" and mixed["commits"] == f"{'c' * 40};{'d' * 40}"
    assert mixed["precisions"] == "bf16;fp32" and mixed["machines"] == "CPU A (bf16);CPU B (no bf16)"
    assert mixed["start_source"] == "record" and mixed["start_normalized"] == pytest.approx(
        sum(normalize(-50.0 + s, **MAZE) for s in range(3)) / 3)
    below = cell(table, "maze_fo", "ppo")
    assert below["marks"] == "<0 <start" and "true minimum is -401" in below["anchor_note"]
    collapsed = cell(table, "text_nav_fo", "sweet")
    assert collapsed["marks"] == "<start" and collapsed["start_source"] == "bc cell"
    assert collapsed["start_normalized"] == pytest.approx(cell(table, "text_nav_fo", "bc")["normalized_mean"])
    assert cell(table, "text_nav_fo", "mc")["marks"] == "d ?"
    assert cell(table, "maze_fo", "bc")["invalid_rate"] == 0.25
    md = paths["md"].read_text()
    assert "[<0 <start]" in md and "[c p m]" in md and "`<start` ended more than two standard errors" in md
    assert "| FO Maze | -101 | -83 | -6.84 | -401: an invalid action" in md  # the anchors, with the true minimum
    assert "git: " not in md  # no list of commits in the header: they are per cell, in the CSV
    measures = paths["measures"].read_text()
    assert "| FO Text-Nav | SWEET-RL | 3 |" in measures and "(bc cell)" in measures


def test_one_seed_below_its_start_by_more_than_two_episode_standard_errors_is_marked(tmp_path):
    d = tmp_path / "records"
    # a single seed: the start's and the run's episode-level standard errors (0.05 return -> 2.6 points each)
    write_record(d, rec("maze_fo", "mc", 0, -50.0, "m0", start_normalized=normalize(-40.0, **MAZE),
                        start_return_mean=-40.0, start_return_stderr=0.05))
    write_record(d, rec("maze_fo", "ilql", 0, -50.0, "i0", start_normalized=normalize(-49.9, **MAZE),
                        start_return_mean=-49.9, start_return_stderr=0.05))
    table = pd.read_csv(build(d, "t", tmp_path / "out")["csv"]).fillna({"marks": ""})
    assert cell(table, "maze_fo", "mc")["marks"] == "<start"
    assert cell(table, "maze_fo", "ilql")["marks"] == ""  # 0.1 return below: within noise


def test_findings_on_cells_below_the_anchor_say_so():
    from lmrl.findings import compare
    from lmrl.report import read_paper

    rows = [{"task": "endgames", "algo": a, "status": "ok", "stale": "", "normalized_mean": m,
             "normalized_stderr": 1.0, "seeds": 3, "model": "tiny", "mark_<0": m < 0} for a, m in
            (("mc", -300.0), ("bc", -400.0), ("ilql", 10.0))]
    cells = pd.DataFrame(rows)
    out = compare(cells, read_paper(), ("endgames", "mc", "endgames", "bc"))
    assert "below the anchor minimum (endgames/mc, endgames/bc)" in out["caveat"]
    assert compare(cells, read_paper(), ("endgames", "ilql", "endgames", "ilql"))["caveat"] == ""


def observed(score=50.0, hash_="h1", stderr=1.0):
    return {"maze_fo/bc/s0": {"config_hash": hash_, "normalized_score": score, "return_mean": -90.0,
                              "return_stderr": stderr, "success_rate": 0.5, "invalid_rate": 0.0, "episodes": 50}}


def test_the_gate_is_bit_exact_on_its_machine_kind_and_within_tolerance_elsewhere():
    kind = {"device": "CPU A (AVX512)", "torch": "2.13.0", "threads": 2, "precision": "fp32"}
    key = reproduce_check.kind_key(kind)
    expected = reproduce_check.update({}, observed(), kind, "f" * 40)
    assert reproduce_check.compare(expected, observed(), key)[0] is True
    # a planted change of a score, however small, fails on the same kind and names the measure
    ok, lines = reproduce_check.compare(expected, observed(score=50.0000001), key)
    assert not ok and any("normalized_score: expected 50.0, got 50.0000001" in line for line in lines)
    # so does a changed config (a default moved)
    assert reproduce_check.compare(expected, observed(hash_="h2"), key)[0] is False
    # another kind: within 3 standard errors of the difference (1.0 return stderr = 2.78 points -> +-11.8)
    other = reproduce_check.kind_key({**kind, "device": "CPU B (AVX2)"})
    allowed = reproduce_check.tolerance(observed()["maze_fo/bc/s0"], "maze_fo")
    assert allowed == pytest.approx(3 * math.sqrt(2) * 1.0 * 50 / 18)
    assert reproduce_check.compare(expected, observed(score=50.0 + allowed - 0.1), other)[0] is True
    assert reproduce_check.compare(expected, observed(score=50.0 + allowed + 0.1), other)[0] is False
    # updating one kind keeps the others
    both = reproduce_check.update(expected, observed(score=49.0), {**kind, "device": "CPU B (AVX2)"}, "e" * 40)
    assert set(both["kinds"]) == {key, other} and both["kinds"][key]["cells"] == observed()
    assert reproduce_check.compare({}, observed(), key)[0] is False  # no expectations: not a pass


def test_the_committed_expectations_cover_the_experiments_cells():
    from launchers.sweep import plan

    expected = json.loads(reproduce_check.EXPECTATIONS.read_text())
    cells = {f"{c.task}/{c.algo}/s{c.seed}": c.digest for c in plan(reproduce_check.EXPERIMENT, [], {}).cells}
    assert expected["kinds"], "make reproduce-check UPDATE=1 writes them"
    for entry in expected["kinds"].values():
        assert {k: v["config_hash"] for k, v in entry["cells"].items()} == cells
        assert len(entry["commit"]) == 40 and entry["machine"]["precision"] == "fp32"
