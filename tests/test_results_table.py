"""Records, the report and the sweep launcher: the results table's numbers checked by hand on
synthetic records; a real 2-cell sweep (local pool, then submitit's local executor — Slurm's
stand-in: a Slurm cluster cannot run here) that resumes from its records and logs to one W&B group."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from lmrl.records import config_hash, failed_record, find_record, load_records, make_record, write_record
from lmrl.report import build, read_paper
from lmrl.scoring import normalize
from tests.e2e import ROOT, cli_env

MAZE = {"min": -101.0, "avg": -83.0, "max": -6.84}


# One clean commit on one machine, in one precision: the planted cells carry no provenance marks (tests/
# test_table_trust.py plants those).
CLEAN = {"git_commit": "c" * 40, "git_dirty": False, "git_diff": None, "cpu_model": "CPU", "cpu_bf16": False,
         "gpu": None}


def record(task, algo, seed, ret, digest, norm=MAZE, **extra):
    metrics = {"task": task, "algo": algo, "model": "tiny", "hardware": "cpu", "seed": seed, "return_mean": ret,
               "return_std": 1.0, "return_stderr": 0.1, "normalized_score": normalize(ret, **norm),
               "success_rate": 0.5, "episodes": 10, "episode_length": 3.0, "precision": "fp32"}
    return make_record(metrics, digest, wall_seconds=60.0, **{**CLEAN, **extra})


def test_paper_tables_are_the_reference_numbers():
    paper = read_paper()
    assert paper.at["maze_fo", "ilql"] == 99.9 and paper.at["car_dealer", "bc"] == 44.5
    assert paper.at["wordle", "prompt"] == 15.4 and paper.at["endgames", "ppo"] == 77.5
    assert len(paper) == 10 and paper.notna().all().all()


def test_config_hash_ignores_where_things_go_but_not_what_runs():
    cfg = OmegaConf.create({"seed": 0, "algo": {"lr": 1e-3}, "records": {"dir": "a"}, "logger": {"name": "none"},
                            "cache_dir": "x", "sweep": {"workers": 2}})
    same = OmegaConf.merge(cfg, {"records": {"dir": "b"}, "logger": {"name": "wandb"}, "cache_dir": "y",
                                 "sweep": {"workers": 8}})
    assert config_hash(cfg) == config_hash(same)
    assert config_hash(cfg) != config_hash(OmegaConf.merge(cfg, {"seed": 1}))
    assert config_hash(cfg) != config_hash(OmegaConf.merge(cfg, {"algo": {"lr": 3e-4}}))
    # Text-Nav's env and data recipe carry the run's cache path: a nested cache_dir does not count either
    nested = OmegaConf.merge(cfg, {"task": {"env": {"cache_dir": "/tmp/a", "max_steps": 20}}})
    assert config_hash(nested) == config_hash(OmegaConf.merge(nested, {"task": {"env": {"cache_dir": "/b"}}}))
    assert config_hash(nested) != config_hash(OmegaConf.merge(nested, {"task": {"env": {"max_steps": 15}}}))


def test_an_option_added_at_its_neutral_value_keeps_old_hashes():
    """A record made before `algo.rerank_temperature` existed ran its argmax reranker: the same config with the
    option at 0 hashes alike (so it stays current), at any other value it does not."""
    old = OmegaConf.create({"seed": 0, "algo": {"lr": 1e-3}})
    assert config_hash(OmegaConf.merge(old, {"algo": {"rerank_temperature": 0.0}})) == config_hash(old)
    assert config_hash(OmegaConf.merge(old, {"algo": {"rerank_temperature": 1.0}})) != config_hash(old)
    assert config_hash({"seed": 0, "algo": "bc"}) == config_hash({"seed": 0, "algo": "bc"})  # no dict to look in


def test_find_record_skips_failed_ones(tmp_path):
    write_record(tmp_path, failed_record("maze_fo", "bc", 0, "abc", "boom", 1.0))
    assert find_record(tmp_path, "abc") is None and find_record(tmp_path, "abc", ok_only=False)["error"] == "boom"
    write_record(tmp_path, record("maze_fo", "bc", 0, -83.0, "abc"))  # the same cell's success replaces it
    assert find_record(tmp_path, "abc")["normalized_score"] == 50.0
    (tmp_path / "broken__x__s0__zzz.json").write_text("{not json")
    with pytest.raises(ValueError, match="broken__x__s0__zzz.json"):
        load_records(tmp_path)


def test_report_numbers_by_hand(tmp_path):
    """Maze constants min -101 / avg -83 / max -6.84: returns -83, -44.92, -92 normalize to 50, 75, 25 by hand
    (-44.92 = -83 + 38.08 = halfway from avg to max; -92 = halfway from min to avg)."""
    records = tmp_path / "records"
    cells = [("maze_fo", "bc", 0, -83.0), ("maze_fo", "bc", 1, -44.92), ("maze_fo", "bc", 2, -92.0),
             ("maze_fo", "ilql", 0, -6.84)]
    plan = []
    for i, (task, algo, seed, ret) in enumerate(cells):
        write_record(records, record(task, algo, seed, ret, f"h{i}", **({} if i == 3 else {"precision": None})))
        plan.append({"task": task, "algo": algo, "seed": seed, "digest": f"h{i}"})
    # an older budget's record of a planned cell: not in the plan, so ignored
    write_record(records, record("maze_fo", "ilql", 0, -101.0, "old"))
    # a failed cell, and a planned cell that has not run
    write_record(records, failed_record("maze_po", "bc", 0, "h9", "Traceback...\nConfigError: bc: lr must be > 0", 3.0))
    plan += [{"task": "maze_po", "algo": "bc", "seed": 0, "digest": "h9"},
             {"task": "maze_po", "algo": "ilql", "seed": 0, "digest": "h10"}]
    # a cell the experiment skips, with its reason
    spec = {"tasks": ["maze_fo", "maze_po", "chess"], "algos": ["bc", "ilql"], "seeds": [0, 1, 2],
            "skip": {"chess": {"ilql": "too slow here"}}}
    (records / "plan.json").write_text(json.dumps({"experiment": "synthetic", "spec": spec, "cells": plan}))

    paths = build(records, "synthetic", tmp_path / "out")
    cells = {(r["task"], r["algo"]): r for r in
             __import__("pandas").read_csv(paths["csv"]).to_dict("records")}
    bc = cells[("maze_fo", "bc")]
    assert bc["seeds"] == 3 and bc["normalized_mean"] == pytest.approx(50.0, abs=1e-3)
    # sample std of (50, 75, 25) is 25; stderr = 25 / sqrt(3)
    assert bc["normalized_stderr"] == pytest.approx(25 / math.sqrt(3), abs=1e-3)
    assert bc["return_mean"] == pytest.approx((-83.0 - 44.92 - 92.0) / 3, abs=1e-3)
    assert bc["paper"] == 58.2
    ilql = cells[("maze_fo", "ilql")]
    assert ilql["seeds"] == 1 and ilql["normalized_mean"] == pytest.approx(100.0) and math.isnan(ilql["normalized_stderr"])
    assert cells[("maze_po", "bc")]["status"] == "failed"
    assert "lr must be > 0" in cells[("maze_po", "bc")]["note"]
    assert cells[("maze_po", "ilql")]["status"] == "not run"
    assert cells[("chess", "ilql")]["note"] == "not run: too slow here"

    md = paths["md"].read_text()
    assert "failed: ConfigError: bc: lr must be > 0" in md and "not run yet" in md
    assert "4 runs" in md  # provenance counts the selected successful records only
    assert "precision (runs): fp32 1, not recorded 3;" in md  # records made before the field say so
    assert "| FO Maze | 50.0 ± 14.4 (58.2) [?] | 100.0 (99.9) |" in md  # ... and their cell is marked
    # the paper's findings tested on the table: ILQL vs MC has no MC score here, BC's 3 seeds meet ILQL's one
    assert "## Findings" in md and "| ILQL beats MC on the maze and Text-Nav | **inconclusive** | 0 | 0 | 4 |" in md
    assert "FO Maze best_offline_rl=ilql | FO Maze bc | +41.7 | +50.0 | inconclusive: one seed" in md
    assert len(__import__("pandas").read_csv(paths["findings"])) == sum(len(c.comparisons) for c in
                                                                         __import__("lmrl.findings").findings.CLAIMS)
    tex = paths["tex"].read_text()
    assert r"50.0 $\pm$ 14.4 (58.2)" in tex and r"\begin{tabular}" in tex
    png = paths["png"].read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_report_marks_stale_cells_and_keeps_their_values(tmp_path):
    """`sweep.stale` marks a whole task ({task: reason}) or single cells ({task: {algo: reason}}) in every output;
    a stale cell keeps its score, and cells without records get no mark."""
    records = tmp_path / "records"
    plan = []
    for i, (task, algo, ret) in enumerate([("maze_fo", "bc", -83.0), ("maze_fo", "ilql", -6.84),
                                           ("maze_po", "bc", -83.0), ("maze_po", "ilql", -83.0)]):
        write_record(records, record(task, algo, 0, ret, f"h{i}"))
        plan.append({"task": task, "algo": algo, "seed": 0, "digest": f"h{i}"})
    plan.append({"task": "chess", "algo": "bc", "seed": 0, "digest": "h9"})  # never ran
    spec = {"tasks": ["maze_fo", "maze_po", "chess"], "algos": ["bc", "ilql"], "seeds": [0],
            "stale": {"maze_fo": "old maze", "maze_po": {"ilql": "old critic"}, "chess": "old engine"}}
    (records / "plan.json").write_text(json.dumps({"experiment": "synthetic", "spec": spec, "cells": plan}))

    paths = build(records, "stale", tmp_path / "out")
    cells = {(r["task"], r["algo"]): r for r in
             __import__("pandas").read_csv(paths["csv"], keep_default_na=False).to_dict("records")}
    assert cells[("maze_fo", "ilql")]["stale"] == "old maze" and float(cells[("maze_fo", "ilql")]["normalized_mean"]) == 100
    assert cells[("maze_po", "ilql")]["stale"] == "old critic" and cells[("maze_po", "bc")]["stale"] == ""
    assert cells[("chess", "bc")]["stale"] == "" and cells[("chess", "bc")]["status"] == "not run"
    md = paths["md"].read_text()
    assert "| FO Maze | 50.0 (58.2) [stale: old maze] | 100.0 (99.9) [stale: old maze] |" in md
    assert "| PO Maze | 50.0 (53.1) | 50.0 (76.3) [stale: old critic] |" in md
    assert "2 tasks (1 stale)" in md and "2 tasks (2 stale)" in md and "`[stale: <reason>]`" in md
    # what re-running them costs: the 3 stale cells' records ran 60 s each
    assert "re-running the 3 stale cells (3 runs) costs about 0.1 h of run time" in md
    assert r"100.0 (99.9) [stale: old maze]" in paths["tex"].read_text()
    # the experiment's config, as it is now, wins over the plan's copy (marks come after the runs)
    from lmrl.report import read_plan, stale_marks

    experiments = tmp_path / "experiments"
    experiments.mkdir()
    (experiments / "synthetic.yaml").write_text("# @package _global_\nsweep:\n  stale:\n    maze_po: new reason\n")
    assert stale_marks(read_plan(records), experiments) == {"maze_po": "new reason"}
    (experiments / "synthetic.yaml").write_text("sweep:\n  workers: 2\n")
    assert stale_marks(read_plan(records), experiments) == {}
    assert stale_marks(None) == {}


def test_a_changed_plan_keeps_older_records_marked_until_the_cell_reruns(tmp_path):
    """A planned cell with no record of its planned config shows its older-config records, marked stale; a cell
    with a planned record never mixes in older ones (seed 1 of maze_fo bc below is older: left out)."""
    from lmrl.report import OLDER_CONFIG

    records = tmp_path / "records"
    write_record(records, record("maze_fo", "bc", 0, -83.0, "new0"))
    write_record(records, record("maze_fo", "bc", 1, -6.84, "old1"))
    write_record(records, record("maze_po", "bc", 0, -44.92, "old2"))
    write_record(records, record("maze_po", "bc", 1, -83.0, "old3"))
    write_record(records, record("chess", "bc", 0, -83.0, "old4"))  # not in the plan at all: never shown
    plan = [{"task": t, "algo": "bc", "seed": s, "digest": f"{t}{s}"} for t in ("maze_fo", "maze_po") for s in (0, 1)]
    plan[0]["digest"] = "new0"
    spec = {"tasks": ["maze_fo", "maze_po"], "algos": ["bc"], "seeds": [0, 1]}
    (records / "plan.json").write_text(json.dumps({"experiment": "synthetic", "spec": spec, "cells": plan}))
    paths = build(records, "older", tmp_path / "out")
    cells = {r["task"]: r for r in __import__("pandas").read_csv(paths["csv"], keep_default_na=False).to_dict("records")}
    assert cells["maze_fo"]["seeds"] == 1 and float(cells["maze_fo"]["normalized_mean"]) == 50 and not cells["maze_fo"]["stale"]
    assert cells["maze_po"]["seeds"] == 2 and float(cells["maze_po"]["normalized_mean"]) == 62.5
    assert cells["maze_po"]["stale"] == OLDER_CONFIG and "chess" not in cells
    assert f"[stale: {OLDER_CONFIG}]" in paths["md"].read_text()


def test_a_subset_run_keeps_the_whole_experiment_in_the_plan(tmp_path):
    """`--only` runs some cells; plan.json still lists every cell (the report's selection), with the subset's
    statuses."""
    from launchers.sweep import Cell, Sweep, write_plan

    whole = Sweep("x", {"tasks": ["a", "b"]}, tmp_path,
                  [Cell("a", "bc", 0, [], "d1"), Cell("b", "bc", 0, [], "d2", status="todo")])
    subset = Sweep("x", {"tasks": ["a", "b"]}, tmp_path, [Cell("b", "bc", 0, [], "d2", status="ok", seconds=3.0)])
    write_plan(subset, whole)
    cells = json.loads((tmp_path / "plan.json").read_text())["cells"]
    assert [(c["task"], c["digest"], c["status"]) for c in cells] == [("a", "d1", "todo"), ("b", "d2", "ok")]
    write_plan(subset)
    assert [c["task"] for c in json.loads((tmp_path / "plan.json").read_text())["cells"]] == ["b"]


def test_two_subset_sweeps_side_by_side_keep_each_others_cells(tmp_path):
    """Two `--only` sweeps started together (one cell each): the one finishing last must not write back the other's
    cell as it was when both started (found when two Car Dealer seeds ran on the two cores)."""
    from launchers.sweep import Cell, Sweep, write_plan

    def whole() -> Sweep:  # each sweep's view of the experiment when it started: both cells to run
        return Sweep("x", {}, tmp_path, [Cell("a", "bc", 1, [], "d1"), Cell("a", "bc", 2, [], "d2")])

    first, second = whole(), whole()
    one = Sweep("x", {}, tmp_path, [Cell("a", "bc", 1, [], "d1")])
    two = Sweep("x", {}, tmp_path, [Cell("a", "bc", 2, [], "d2")])
    write_plan(one, first)
    write_plan(two, second)
    one.cells[0].status, one.cells[0].seconds = "ok", 10.0
    write_plan(one, first)
    two.cells[0].status, two.cells[0].seconds = "ok", 20.0
    write_plan(two, second)
    cells = json.loads((tmp_path / "plan.json").read_text())["cells"]
    assert [(c["seed"], c["status"], c["seconds"]) for c in cells] == [(1, "ok", 10.0), (2, "ok", 20.0)]
    # a changed budget is another cell: an entry of the old digest is not carried over
    changed = Sweep("x", {}, tmp_path, [Cell("a", "bc", 1, [], "d9"), Cell("a", "bc", 2, [], "d2")])
    write_plan(two, changed)
    cells = json.loads((tmp_path / "plan.json").read_text())["cells"]
    assert [(c["digest"], c["status"]) for c in cells] == [("d9", "todo"), ("d2", "ok")]


def test_table2_small_rows_run_on_the_current_tasks():
    """No row keeps records from before a change its config hash cannot see: 20Q's and Guess My City's re-ran on the
    current oracles (issue 19; 20Q's RL columns from its one-epoch BC stage), Wordle's on the original's word list."""
    from lmrl.report import OLDER_CONFIG, stale_marks

    assert stale_marks({"experiment": "table2_small"}) == {}
    md = (ROOT / "results" / "table2_small.md").read_text()
    # The only stale marks allowed in the tables, each an older configuration's records (never a `sweep.stale`
    # reason) until the cell re-runs: Guess My City's RL columns (from the 8000-step BC stage), the Prompted LM column
    # where the fair prompt (legal-action choice, 2 shots, >= 32 episodes) has not re-run yet, and Text-Nav SWEET-RL
    # (its BC anchor, bc_coef 1)
    for line in md.splitlines():
        if line.startswith("| ") and "[stale: " in line:
            older = line.count(f"[stale: {OLDER_CONFIG}]")
            cells = [c.strip() for c in line.strip(" |").split("|")]
            allowed = {10} | (set(range(3, 9)) if cells[0] == "Guess My City" else set()) | (
                {7} if cells[0] in ("FO Text-Nav", "PO Text-Nav") else set())
            stale = {i for i, c in enumerate(cells) if "[stale: " in c}
            assert stale <= allowed and line.count("[stale: ") == older, line

    def row_of(task: str) -> str:
        # the first: the scores table comes before the Anchors table, whose rows start with the task too
        return next(line for line in md.splitlines() if line.startswith(f"| {task} |"))

    header = [c.strip() for c in next(ln for ln in md.splitlines() if ln.startswith("| task |")).strip(" |").split("|")]
    archer = header.index("ArCHer") - 1

    def archer_cell(task: str) -> str:
        return [c.strip() for c in row_of(task).strip(" |").split("|")][1:][archer]

    def cells_of(task: str) -> list[str]:  # the columns before ArCHer's (checked on its own below)
        cells = [c.strip() for c in row_of(task).strip(" |").split("|")][1:]
        return cells[:archer] + cells[archer + 1 :]

    def current(cell: str) -> bool:  # a score of the current config on every seed
        return not any(mark in cell for mark in ("[stale", "seeds]", "failed"))

    def rerunning(cell: str) -> bool:  # a re-planned cell (prompted, Text-Nav SWEET-RL) until it re-runs
        return current(cell) or cell.endswith(f"[stale: {OLDER_CONFIG}]")

    # ArCHer (issue 70): planned on FO maze, where its defaults were sized, and on the tasks whose cost fits a session
    # (a score once it ran); every other task left out with the reason and what is known of the cost
    skip = OmegaConf.load(ROOT / "conf/experiment/table2_small.yaml").sweep.skip
    planned = {"maze_fo", "text_nav_fo", "wordle", "chess", "endgames", "twenty_questions"}
    assert planned == {name for name in read_paper().index if "archer" not in skip.get(name, {})}
    # A measured task's reason gives the projection `python -m lmrl.bench archer` wrote, to the hundredth of an hour
    bench = {r["task"]: r for r in json.loads((ROOT / "results/bench/archer.json").read_text())["summary"]}
    for name, task in read_paper()["paper_task"].items():
        cell = archer_cell(task)
        if name in planned:
            assert cell == "not run yet" or current(cell) or re.search(r"^[-\d.]+ ± [\d.]+ \[[12]/3 seeds\]", cell), cell
        elif name in bench:
            hours = bench[name]["projected_40_rounds_h"]
            assert cell.startswith(f"not run: 40 rounds of ArCHer cost ~{hours} h of training a seed"), (task, cell)
        else:
            assert cell.startswith("not run: its cost is not measured yet"), task

    # Guess My City: BC (at the 8000 steps of its 4x curve), filtered BC and the prompted cell current on every seed;
    # the RL columns re-run from the 8000-step BC stage a few seeds a session, so each shows either the seeds of the
    # current config it has or, until its first one lands, its 4000-step records marked as an older configuration.
    # 20Q: every column (SWEET-RL and group PG from the one-epoch BC stage too)
    guess = cells_of("Guess My City")
    assert len(guess) == 9 and all(current(c) and "not run" not in c for c in guess[:2])
    assert rerunning(guess[8])
    for cell in guess[2:8]:
        assert (current(cell) or re.search(r"^[-\d.]+( ± [\d.]+)?( \([-\d.]+\))? \[[12]/3 seeds\]( \[[a-z?<>0-9 ]+\])?$", cell)
                or cell.endswith(f"[stale: {OLDER_CONFIG}]")), cell
    twenty = cells_of("20Qs")
    assert len(twenty) == 9 and all(current(c) and "not run" not in c for c in twenty[:8]) and rerunning(twenty[8])
    wordle = cells_of("Wordle")  # every trained column on the original's words (SWEET-RL and group PG included)
    assert len(wordle) == 9 and all(current(c) and "not run" not in c for c in wordle)
    # The mazes and Text-Nav: every column re-ran on the current config (the prompted one chooses among the maze's
    # four moves: decode=auto), on all its seeds
    for task in ("FO Maze", "PO Maze", "FO Text-Nav", "PO Text-Nav"):
        cells = cells_of(task)
        redone = (6, 8) if "Text-Nav" in task else (8,)
        assert len(cells) == 9 and all(current(c) and "not run" not in c for i, c in enumerate(cells)
                                       if i not in redone), task
        # Text-Nav SWEET-RL re-runs seed by seed (keep_best_margin): its cell may show the seeds it has
        assert all(rerunning(cells[i]) or (i == 6 and re.search(r"\[[12]/3 seeds\]", cells[i])) for i in redone), task
    # the fair prompt has re-run on both Text-Navs and Wordle
    assert all(current(cells_of(task)[8]) for task in ("FO Text-Nav", "PO Text-Nav", "Wordle"))
    # Endgames and chess: the six trained columns on their BC curves' budgets and group PG, all 3 seeds; SWEET-RL left
    # out with its reason (c, the start position, is on the board the agent sees), the prompted cell skipped
    for task in ("Endgames", "Chess"):
        cells = cells_of(task)
        assert all(current(c) and "not run" not in c for c in cells[:6] + cells[7:8]), task
        assert cells[6].startswith("not run: ") and "the board is the observation" in cells[6], task
        assert cells[8].startswith("not run: "), task
    # Car Dealer: every column current on every seed (group PG from the row's BC stage), SWEET-RL (on its own
    # 4-attempt data and BC stage) on the seeds it has
    cells = cells_of("Car Dealer")
    assert all(current(c) and "not run" not in c for c in cells[:6] + cells[7:8]) and rerunning(cells[8])
    assert "not run" not in cells[6] and "failed" not in cells[6]


def run_sweep(args, cache, timeout=900):
    cmd = [sys.executable, "-m", "launchers.sweep", "experiment=table2_small", *args, "--runs-dir", str(cache / "runs")]
    proc = subprocess.run(cmd, cwd=ROOT, env=cli_env(cache, WANDB_MODE="offline"), capture_output=True, text=True,
                          timeout=timeout)
    return proc


def test_sweep_runs_resumes_and_reports(tmp_path):
    cache, records = tmp_path / "cache", tmp_path / "records"
    # Without the table's per-cell budgets, which come after the smoke budget (maze FO BC: 600 x 64 steps), and with
    # an experiment of two tasks x two algorithms: an --only sweep also plans the whole experiment (plan.json), and
    # all 244 cells of table2_small take ~100 s to compose on a slow 2-core machine, each time.
    tiny = [f"records.dir={records}", "smoke.steps=4", "smoke.batch_size=8", "task.eval.max_starts=2",
            "task.eval.episodes_per_start=1", "task.data.recipe.episodes=60", "sweep.cell_overrides=null",
            "sweep.tasks=[maze_fo,maze_po]", "sweep.algos=[bc,filtered_bc]"]
    only = ["--only", "task=maze_fo", "algo=bc,filtered_bc", "seed=0"]
    proc = run_sweep([*tiny, *only, "--workers", "2", "--wandb"], cache)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "2 to run" in proc.stdout and "2 cells run, 0 failed" in proc.stdout
    recs = {r["algo"]: r for r in load_records(records)}
    assert set(recs) == {"bc", "filtered_bc"} and all(r["status"] == "ok" and r["episodes"] == 2 for r in recs.values())
    assert recs["bc"]["git_commit"] and recs["bc"]["config_hash"] in {c["digest"] for c in
                                                                       json.loads((records / "plan.json").read_text())["cells"]}
    # every run of the sweep logged to the one W&B group named after the sweep
    [run_file] = __import__("pathlib").Path(recs["bc"]["run_dir"]).glob("wandb/offline-run-*/run-*.wandb")
    assert b"table2_small" in run_file.read_bytes()

    # resume: with both records there, nothing runs; without one, only that cell runs (through submitit's local
    # executor, the Slurm code path)
    last_plan = (records / "plan.json").read_text()
    again = run_sweep([*tiny, *only, "--dry-run"], cache)
    assert "2 with a record" in again.stdout and "0 to run" in again.stdout
    assert (records / "plan.json").read_text() == last_plan  # the dry run keeps the last run's times
    for path in records.glob("maze_fo__filtered_bc__*.json"):
        path.unlink()
    proc = run_sweep([*tiny, *only, "--launcher", "submitit_local"], cache)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "1 to run" in proc.stdout and "1 cells run, 0 failed, 1 reused" in proc.stdout
    assert len(list((records / "submitit").glob("*_log.out"))) == 1

    # a cell whose run fails gets a failed record naming the error; the sweep exits non-zero
    proc = run_sweep([*tiny, "algo.lr=-1", "--only", "task=maze_fo", "algo=bc", "seed=0"], cache)
    assert proc.returncode == 1 and "FAILED maze_fo/bc/s0" in proc.stderr + proc.stdout
    [failed] = [r for r in load_records(records) if r["status"] == "failed"]
    assert "lr" in failed["error"]

    # the report over these records (its plan is the last sweep's: one failed cell)
    report = subprocess.run([sys.executable, "-m", "lmrl.report", str(records), "--out", str(tmp_path)], cwd=ROOT,
                            env=cli_env(cache), capture_output=True, text=True, timeout=300)
    assert report.returncode == 0, report.stderr[-2000:]
    assert "failed:" in (tmp_path / "records.md").read_text()


def test_train_reuses_a_record_of_the_same_config(tmp_path):
    cache, records = tmp_path / "cache", tmp_path / "records"
    args = ["task=maze_fo", "algo=bc", "debug=smoke", "smoke.steps=2", "task.eval.max_starts=1",
            f"records.dir={records}", "records.reuse=true"]
    outs = []
    for i in range(2):
        proc = subprocess.run([sys.executable, "-m", "lmrl.train", *args, f"hydra.run.dir={tmp_path / str(i)}"],
                              cwd=ROOT, env=cli_env(cache), capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        outs.append(proc.stdout)
    assert "[lmrl] task=maze_fo" in outs[0] and "reusing record maze_fo/bc/seed 0" in outs[1]
    assert len(load_records(records)) == 1 and not (tmp_path / "1" / "metrics.json").exists()


def test_report_logs_the_table_as_a_wandb_artifact(tmp_path, monkeypatch):
    from lmrl.report import log_to_wandb

    records = tmp_path / "records"
    for seed, ret in enumerate((-83.0, -60.0)):
        write_record(records, record("maze_fo", "bc", seed, ret, f"d{seed}"))
    paths = build(records, "wb", tmp_path / "out")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    log_to_wandb(paths, "wb", group="wb-sweep")
    assert "WANDB_SERVICE" not in __import__("os").environ  # later child processes start their own service
    [run_file] = tmp_path.glob("wandb/offline-run-*/run-*.wandb")
    blob = run_file.read_bytes()
    assert b"wb-table" in blob and b"wb-sweep" in blob  # the artifact and the sweep's group
    [table] = run_file.parent.glob("files/media/table/table_*.table.json")
    assert json.loads(table.read_text())["data"][0][:2] == ["maze_fo", "bc"]


@pytest.mark.parametrize("experiment, model", [("table2_small", "tiny"), ("table2", "gpt2")])
def test_experiments_plan_every_cell(experiment, model):
    """Each experiment composes for every algorithm of a task: its trained algorithms x 3 seeds + the prompted one
    once (ArCHer so far in the CPU table only)."""
    from launchers.sweep import compose_cfg, plan

    trained = ["mc", "bc", "filtered_bc", "ilql", "ppo", "online_filtered_bc", "sweet", "group_pg"]
    trained += ["archer"] if experiment == "table2_small" else []
    sweep = plan(experiment, [], {"task": {"maze_fo"}})
    assert len(sweep.cells) == len(trained) * 3 + 1 and len({c.digest for c in sweep.cells}) == len(sweep.cells)
    assert [c.algo for c in sweep.cells][: len(trained)] == trained
    assert sweep.cells[-1].algo == "prompt"
    cfg = compose_cfg(sweep.cells[1].overrides)
    assert cfg.model.name == model and cfg.records.reuse and cfg.records.dir == f"results/records/{experiment}"
    prompt = compose_cfg(sweep.cells[-1].overrides)
    assert prompt.model.name == ("smollm2" if experiment == "table2_small" else "none")


def test_the_committed_plan_is_the_current_configs_plan():
    """results/records/table2_small/plan.json holds each cell's config hash as conf/ composes it now: a config
    change that alters cells' hashes (a default, an experiment's shared node) must come with the plan that says so
    (`launchers.sweep experiment=table2_small --plan-only`), else the report would show records of configs that no
    longer exist as current."""
    from launchers.sweep import plan

    committed = json.loads((ROOT / "results/records/table2_small/plan.json").read_text())
    digests = {(c["task"], c["algo"], c["seed"]): c["digest"] for c in committed["cells"]}
    now = {(c.task, c.algo, c.seed): c.digest for c in plan("table2_small", [], {}, lenient=True).cells}
    changed = sorted(k for k in now if digests.get(k) != now[k])
    assert not changed and now.keys() == digests.keys(), f"plan.json is out of date for {changed[:8]}"


def test_plan_skips_cells_and_hashes_without_the_cache_path():
    """table2_small leaves the prompted chess games out (the reason goes to the table); a Text-Nav cell's hash
    does not change with the cache directory its env is given."""
    from launchers.sweep import plan

    sweep = plan("table2_small", [], {"task": {"chess", "text_nav_fo"}, "algo": {"prompt", "bc"}, "seed": {"0"}})
    assert [(c.task, c.algo) for c in sweep.cells] == [("text_nav_fo", "bc"), ("chess", "bc"), ("text_nav_fo", "prompt")]
    assert "400" in sweep.spec["skip"]["chess"]["prompt"]
    assert len(plan("table2_small", ["sweep.skip=null"], {"task": {"chess"}, "algo": {"prompt"}}).cells) == 1
    moved = plan("table2_small", ["cache_dir=/tmp/elsewhere"], {"task": {"text_nav_fo"}, "algo": {"bc"}, "seed": {"0"}})
    assert moved.cells[0].digest == sweep.cells[0].digest


def test_cell_overrides_set_one_cells_budget_after_its_task_and_algorithm():
    """table2_small's FO maze MC cell trains the budget its curves chose (300 x 256 after a 600 x 64 BC stage),
    while another task's MC keeps the table's."""
    from launchers.sweep import plan

    sweep = plan("table2_small", [], {"task": {"maze_fo", "maze_po"}, "algo": {"mc"}, "seed": {"0"}})
    fo, po = (sweep.configs[c.name].algo for c in sorted(sweep.cells, key=lambda c: c.task))
    assert (fo.steps, fo.batch_size, fo.bc.steps, fo.bc.batch_size) == (300, 256, 600, 64)
    assert (po.steps, po.batch_size, po.bc.steps, po.bc.batch_size) == (400, 32, 600, 16)
    # PO maze ILQL: ten moves a sequence, 32 a step, the sampled reranker; PO Text-Nav ILQL: FO's targets
    sweep = plan("table2_small", [], {"task": {"maze_po", "text_nav_po"}, "algo": {"ilql"}, "seed": {"0"}})
    maze_cfg, nav_cfg = (sweep.configs[c.name] for c in sorted(sweep.cells, key=lambda c: c.task))
    maze, nav = maze_cfg.algo, nav_cfg.algo
    assert (maze.steps, maze.batch_size, maze.bc.steps, maze.bc.batch_size) == (400, 32, 600, 16)
    assert (maze.headline, maze.rerank_temperature, maze.td_lambda) == ("rerank", 0.5, 0.9)
    assert (maze_cfg.task.moves_per_sequence, nav_cfg.task.moves_per_sequence) == (10, 1)
    assert (nav.steps, nav.batch_size, nav.td_lambda, nav.headline) == (800, 64, 0.9, "guided")
    # FO maze ILQL: lambda 0.5 (its probe 1.00 vs 0.92 at 0.9), PO keeps the 0.9 its curves ran; its reranker samples
    # at T 0.5 as PO's and FO maze MC's
    sweep = plan("table2_small", [], {"task": {"maze_fo"}, "algo": {"ilql"}, "seed": {"0"}})
    fo_ilql = sweep.configs[sweep.cells[0].name].algo
    assert (fo_ilql.td_lambda, fo_ilql.headline, fo_ilql.rerank_temperature) == (0.5, "rerank", 0.5)
    # 20Q and Guess My City filtered BC: the paper-size dataset, the epochs their curves chose; 20Q's BC one epoch of
    # it (its 4x curve plateaus); Guess My City's BC the 4 x 256 model with a 2,048-token BPE, ten questions a
    # sequence, 8000 length-bucketed batches of 8,192 tokens (1.9 epochs: its 4x curve's plateau), in DDP processes
    sweep = plan("table2_small", [], {"task": {"twenty_questions", "guess"}, "algo": {"filtered_bc", "bc"},
                                      "seed": {"0"}})
    got = {(c.task, c.algo): sweep.configs[c.name] for c in sweep.cells}
    for task, steps in (("twenty_questions", 3600), ("guess", 2500)):
        fbc = got[task, "filtered_bc"]
        assert (fbc.algo.steps, fbc.algo.batch_size, fbc.task.data.recipe.episodes) == (steps, 32, 100_000)
    bc = got["twenty_questions", "bc"]
    assert (bc.algo.steps, bc.algo.batch_size, bc.task.data.recipe.episodes) == (3000, 32, 100_000)
    bc = got["guess", "bc"]
    assert (bc.algo.steps, bc.algo.batch_tokens, bc.task.data.recipe.episodes) == (8000, 8192, 100_000)
    assert bc.hardware.name == "ddp"
    assert (bc.model.name, bc.model.vocab_size, bc.task.moves_per_sequence) == ("small", 2048, 10)
    assert got["guess", "filtered_bc"].model.name == "tiny"
    # 20Q's RL columns start from that one-epoch BC stage: MC and ILQL 600 x 16 (their curves; ILQL on lambda-1
    # targets), PPO and online %BC the table's rounds
    sweep = plan("table2_small", [], {"task": {"twenty_questions"}, "seed": {"0"},
                                      "algo": {"mc", "ilql", "ppo", "online_filtered_bc"}})
    got = {c.algo: sweep.configs[c.name] for c in sweep.cells}
    for algo, cfg in got.items():
        assert (cfg.algo.bc.steps, cfg.algo.bc.batch_size, cfg.task.data.recipe.episodes) == (3000, 32, 100_000), algo
    for algo in ("mc", "ilql"):
        assert (got[algo].algo.steps, got[algo].algo.batch_size) == (600, 16)
    assert (got["ilql"].algo.td_lambda, got["ppo"].algo.rounds) == (1.0, 3)
    # Wordle: BC and every BC stage 600 x 64 (its curve, flat to 4x); ILQL on TD(lambda 0.9) targets
    sweep = plan("table2_small", [], {"task": {"wordle"}, "algo": {"bc", "ilql", "sweet"}, "seed": {"0"}})
    got = {c.algo: sweep.configs[c.name].algo for c in sweep.cells}
    assert (got["bc"].steps, got["bc"].batch_size) == (600, 64)
    assert (got["ilql"].bc.steps, got["ilql"].bc.batch_size, got["ilql"].td_lambda) == (600, 64, 0.9)
    assert (got["sweet"].bc.steps, got["sweet"].steps, got["sweet"].critic_stage.steps) == (600, 900, 200)
    # Car Dealer BC: the whole 19k conversations for 4.5 epochs (its curve); MC 300 x 16 on that BC stage (its
    # curve); ILQL the same with lambda-1 targets (its curves: lower lambdas do not fit); PPO the table's rounds from
    # that stage; filtered BC 1600 x 32 (its curve: flat from 800 steps)
    sweep = plan("table2_small", [], {"task": {"car_dealer"}, "algo": {"bc", "filtered_bc", "mc", "ilql", "ppo"},
                                      "seed": {"0"}})
    got = {c.algo: sweep.configs[c.name] for c in sweep.cells}
    assert (got["bc"].algo.steps, got["bc"].algo.batch_size, got["bc"].task.data.recipe.episodes) == (2700, 32, 19000)
    fbc = got["filtered_bc"]
    assert (fbc.algo.steps, fbc.algo.batch_size, fbc.task.data.recipe.episodes) == (1600, 32, 19000)
    for algo in ("mc", "ilql"):
        value = got[algo]
        assert (value.algo.steps, value.algo.batch_size, value.algo.beta, value.task.data.recipe.episodes) == \
            (300, 16, 16, 19000)
        assert (value.algo.bc.steps, value.algo.bc.batch_size) == (2700, 32)
    assert got["ilql"].algo.td_lambda == 1.0
    ppo = got["ppo"]
    assert (ppo.algo.rounds, ppo.algo.bc.steps, ppo.algo.bc.batch_size, ppo.task.data.recipe.episodes) == \
        (3, 2700, 32, 19000)
    # Endgames: every cell on 5k endgames; BC 9600 x 32 (its curve: the loss breaks after 2.4 epochs), filtered BC
    # the same; MC 300 x 32 and ILQL 900 x 32 at beta 4 on that BC stage; PPO from it with the table's rounds
    sweep = plan("table2_small", [], {"task": {"endgames"}, "seed": {"0"},
                                      "algo": {"bc", "filtered_bc", "mc", "ilql", "ppo"}})
    got = {c.algo: sweep.configs[c.name] for c in sweep.cells}
    assert {cfg.task.data.recipe.episodes for cfg in got.values()} == {5000}
    assert (got["bc"].algo.steps, got["filtered_bc"].algo.steps) == (9600, 9600)
    for algo, steps in (("mc", 300), ("ilql", 900)):
        value = got[algo].algo
        assert (value.steps, value.batch_size, value.beta, value.bc.steps, value.bc.batch_size) == (steps, 32, 4, 9600, 32)
    assert got["ilql"].algo.td_lambda == 0.9
    assert (got["ppo"].algo.rounds, got["ppo"].algo.bc.steps) == (3, 9600)
    # Chess: BC 4800 x 32 on the default 500 games (its curve); MC and ILQL 900 x 32 at beta 1 on that BC stage
    # (MC's curve), PPO from it with the table's rounds; filtered BC 600 x 32 (its curve: flat from 2 epochs)
    sweep = plan("table2_small", [], {"task": {"chess"}, "algo": {"bc", "filtered_bc", "mc", "ilql", "ppo"},
                                      "seed": {"0"}})
    got = {c.algo: sweep.configs[c.name] for c in sweep.cells}
    assert (got["bc"].algo.steps, got["bc"].algo.batch_size, got["bc"].task.data.recipe.episodes) == (4800, 32, 500)
    assert (got["filtered_bc"].algo.steps, got["filtered_bc"].algo.batch_size) == (600, 32)
    for algo in ("mc", "ilql"):
        value = got[algo].algo
        assert (value.steps, value.batch_size, value.beta, value.bc.steps, value.bc.batch_size) == (900, 32, 1, 4800, 32)
    assert got["ilql"].algo.td_lambda == 0.9
    assert (got["ppo"].algo.rounds, got["ppo"].algo.bc.steps, got["ppo"].algo.bc.batch_size) == (3, 4800, 32)


# SWEET-RL's critic on equal-turn halves of its pairs (docs/algorithms/turn-level.md: the maze probe, 3 seeds)
SWEET_HALVES_ROWS = {"maze_fo"}


def test_turn_level_columns_start_from_their_rows_bc_stage():
    """Group PG runs the PO maze pilot's budget (20 rounds of 64 episodes, 16 steps of 32 a round) on every row but
    Guess My City (40 rounds: its curve), and SWEET-RL its budget (critic 200 x 4, actor 900 x 16; critic 600 steps on
    halved pairs at beta 1 where its probe chose that) where it runs,
    each from the same BC stage (budget and data) as the row's MC cell, so the columns compare methods, not stages."""
    from launchers.sweep import plan

    tasks = {"twenty_questions", "guess", "car_dealer", "maze_fo", "maze_po", "text_nav_fo", "text_nav_po", "wordle",
             "chess", "endgames"}
    sweep = plan("table2_small", [], {"task": tasks, "algo": {"mc", "ppo", "sweet", "group_pg"}, "seed": {"0"}})
    got = {(c.task, c.algo): sweep.configs[c.name] for c in sweep.cells}
    for task in tasks:
        stage = got[task, "mc"]
        for algo in ("sweet", "group_pg"):
            if (task, algo) not in got:  # skipped: the table prints why
                assert algo in sweep.spec["skip"][task], (task, algo)
                continue
            cfg = got[task, algo]
            assert (cfg.algo.bc.steps, cfg.algo.bc.batch_size) == (stage.algo.bc.steps, stage.algo.bc.batch_size), task
            assert cfg.task.data.recipe.episodes == stage.task.data.recipe.episodes, task
        pg = got[task, "group_pg"].algo
        # Guess My City's curve still climbs at 20 rounds (rollouts 17 -> 28) and on to 40 (-> 46): 40 rounds there
        rounds = 40 if task == "guess" else 20
        assert (pg.rounds, pg.episodes_per_round, pg.max_steps_per_round, pg.batch_size) == (rounds, 64, 16, 32), task
        if (task, "sweet") in got:
            sweet = got[task, "sweet"].algo
            assert (sweet.steps, sweet.batch_size) == (900, 16), task
            # where the whole-pair critic fits by a shortcut and its probe says so, it trains on equal-turn halves
            critic = (600, True, 1.0) if task in SWEET_HALVES_ROWS else (200, False, 0.1)
            assert (sweet.critic_stage.steps, sweet.critic_stage.halves, sweet.critic_stage.beta) == critic, task
    # SWEET-RL compares attempts at one buyer: its Car Dealer data plays each generated buyer 4 times
    assert got["car_dealer", "sweet"].task.data.recipe.attempts_per_task == 4


def test_online_columns_budgets_come_from_their_curves():
    """PPO and online %BC run the table's 3 rounds of 16 episodes except where a curve chose otherwise
    (results/curves/{maze_fo,text_nav_fo,text_nav_po,maze_po}_online.png): PPO 40 rounds of 64 with the value head at
    its own lr (at one rate it never fitted on FO maze, where the policy drifted into invalid text from round 25),
    online %BC 20 (flat from round ~10); on PO Text-Nav without the ties at the worst return (the original's
    filter kept every failure there and fell to 0), on PO maze without the failure ties above it (-101; a seed kept
    its failures for 20 rounds).  PO maze's PPO keeps 3 rounds (its value head did not fit in 40 rounds)."""
    from launchers.sweep import plan

    curved = {"ppo": {"maze_fo", "text_nav_fo", "text_nav_po"},
              "online_filtered_bc": {"maze_fo", "text_nav_fo", "text_nav_po", "maze_po"}}
    sweep = plan("table2_small", [], {"task": curved["online_filtered_bc"] | {"wordle"},
                                      "algo": {"ppo", "online_filtered_bc"}, "seed": {"0"}})
    got = {(c.task, c.algo): sweep.configs[c.name].algo for c in sweep.cells}
    for task in curved["ppo"]:
        ppo = got[task, "ppo"]
        assert (ppo.rounds, ppo.episodes_per_round, ppo.max_steps_per_round, ppo.batch_size) == (40, 64, 16, 32)
        assert ppo.value_lr == 1e-3, task
    for task in curved["online_filtered_bc"]:
        fbc = got[task, "online_filtered_bc"]
        assert (fbc.rounds, fbc.episodes_per_round, fbc.max_steps_per_round, fbc.batch_size) == (20, 64, 16, 32)
        assert fbc.drop_worst == (task == "text_nav_po"), task
        assert fbc.cap_ties == (task == "maze_po"), task
    assert (got["maze_fo", "ppo"].lr, got["maze_fo", "ppo"].kl_coef) == (3e-5, 0.05)  # the task's own settings
    for task, algo in [("maze_po", "ppo"), ("wordle", "ppo"), ("wordle", "online_filtered_bc")]:  # no curve yet
        assert (got[task, algo].rounds, got[task, algo].episodes_per_round) == (3, 16), (task, algo)
    assert got["maze_po", "ppo"].value_lr is None and got["wordle", "ppo"].value_lr is None
    assert not got["wordle", "online_filtered_bc"].drop_worst and not got["wordle", "online_filtered_bc"].cap_ties


def test_unknown_experiment_lists_the_valid_ones():
    from launchers.sweep import plan

    with pytest.raises(SystemExit, match="valid: reproduce_check, sweep_check, table2, table2_small"):
        plan("table3", [], {})


def test_a_killed_cell_resumes_from_its_checkpoint(tmp_path):
    from launchers.sweep import Cell, train_command

    cell = Cell("maze_fo", "bc", 0, ["+experiment=table2_small", "task=maze_fo", "algo=bc", "seed=0"])
    cell.digest = "abc"
    run_dir = tmp_path / cell.run_name
    assert run_dir.name == "maze_fo__bc__s0__abc"
    assert not any(a.startswith("resume=") for a in train_command(cell, run_dir, None))
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "checkpoints" / "latest").write_text("step_00000100")
    assert f"resume={run_dir}" in train_command(cell, run_dir, "g")
    assert "logger.group=g" in train_command(cell, run_dir, "g")


def test_a_launched_hardware_cell_runs_its_cores_as_processes(tmp_path):
    """A DDP cell (Guess My City's BC in table2_small) turns its thread share into one-thread processes under
    torchrun, on a GPU machine one per GPU (no more than its threads); a plain CPU cell stays one process."""
    from launchers.sweep import cell_processes, plan, train_command

    sweep = plan("table2_small", [], {"task": {"guess", "maze_fo"}, "algo": {"bc"}, "seed": {"0"}})
    cells = {c.task: c for c in sweep.cells}
    ddp, cpu = sweep.configs[cells["guess"].name], sweep.configs[cells["maze_fo"].name]
    assert ddp.hardware.name == "ddp" and cpu.hardware.name == "cpu"
    assert cell_processes(ddp, 2, gpus=0) == 2 and cell_processes(ddp, 1, gpus=0) == 1
    assert cell_processes(cpu, 2, gpus=0) == 1 and cell_processes(cpu, 8, gpus=4) == 1
    # one GPU, eight cores: one rank (8 on cuda:0 would be NCCL's duplicate GPU); 8 GPUs, a 4-core share: 4
    assert cell_processes(ddp, 8, gpus=1) == 1 and cell_processes(ddp, 4, gpus=8) == 4
    import torch

    assert cell_processes(ddp, 2) == cell_processes(ddp, 2, gpus=torch.cuda.device_count())  # default: torch
    cmd = train_command(cells["guess"], tmp_path / "run", None, nproc=2)
    assert cmd[1:5] == ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    assert cmd[5:7] == ["-m", "lmrl.train"] and "hardware=ddp" in cmd
    assert train_command(cells["maze_fo"], tmp_path / "run", None)[1:3] == ["-m", "lmrl.train"]


def test_a_timed_out_torchrun_cell_takes_its_workers_with_it(tmp_path):
    """The sweep's timeout stops torchrun with SIGTERM, which it passes on: a SIGKILL would leave its workers
    running on the cores the next cell is given."""
    from launchers.sweep import run_until
    from lmrl.dist import child_env, torchrun_prefix

    (tmp_path / "sleeper.py").write_text(
        "import os, pathlib, time\n"
        "pathlib.Path(os.environ['PIDS'], os.environ['RANK']).write_text(str(os.getpid()))\n"
        "time.sleep(120)\n")
    pids = tmp_path / "pids"
    pids.mkdir()
    with open(tmp_path / "log", "w") as log:
        started = time.perf_counter()
        code = run_until([*torchrun_prefix(2), str(tmp_path / "sleeper.py")],
                         child_env(PIDS=str(pids), OMP_NUM_THREADS="1"), log, timeout_s=20)
    assert code == "timeout" and time.perf_counter() - started < 60, (tmp_path / "log").read_text()
    workers = [int(p.read_text()) for p in pids.iterdir()]
    assert len(workers) == 2, (tmp_path / "log").read_text()
    time.sleep(1)
    alive = [pid for pid in workers if Path(f"/proc/{pid}").exists()
             and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]]
    assert alive == []


def test_a_cell_whose_config_changed_while_the_sweep_ran_fails_with_the_reason(tmp_path, monkeypatch):
    """The run exits 0 but its record carries the config it resolved (a conf/ file edited after planning): the
    sweep says so, and writes no failed record under the stale hash beside the run's real one."""
    import launchers.sweep as sweep_mod

    records = tmp_path / "records"
    records.mkdir()

    record = make_record({"task": "maze_fo", "algo": "bc", "seed": 0, "normalized_score": 1.0}, "new_hash", 1.0)

    def run_writes_another_hash(cmd, env, log, timeout_s):
        write_record(records, record)
        return 0

    monkeypatch.setattr(sweep_mod, "run_until", run_writes_another_hash)
    cell = sweep_mod.Cell("maze_fo", "bc", 0, ["task=maze_fo", "algo=bc"], digest="planned_hash")
    sweep = sweep_mod.Sweep("table2_small", {}, records, cells=[cell])
    sweep_mod.run_local(sweep, tmp_path / "runs", workers=1, timeout_min=1, wandb_group=None)
    assert cell.status == "failed" and "config changed" in cell.note and "planned_hash" in cell.note
    assert find_record(records, "planned_hash") is None
    assert [r["config_hash"] for r in load_records(records)] == ["new_hash"]


def test_rl_columns_start_from_their_rows_bc_cell():
    """A BC run publishes its weights as the BC stage of its config (docs/algorithms/index.md), so an RL cell whose
    stage (`bc_stage_of`: data, model, BC config but `log_every`, window) equals its row's BC cell's trains no stage
    of its own, and the local sweep starts it after that cell.  In table2_small that holds for every RL column but
    the ones named here, each with its reason."""
    from launchers.sweep import bc_stage_of, plan, stage_order

    own_stage = {("maze_po", "mc"), ("maze_po", "ilql"),  # ten moves a sequence (task_algo/maze_po_*.yaml)
                 ("car_dealer", "sweet")}  # 4 attempts a buyer: its own data
    sweep = plan("table2_small", [], {"seed": {"0"}})
    configs = {(c.task, c.algo): sweep.configs[c.name] for c in sweep.cells}
    _, waits_for = stage_order(sweep.cells, sweep.configs)
    shared = set()
    for cell in sweep.cells:
        task, algo = cell.task, cell.algo
        cfg = configs[task, algo]
        if algo == "bc" or "bc" not in cfg.algo:
            assert cell.name not in waits_for, cell.label
            continue
        same = bc_stage_of(cfg) == bc_stage_of(configs[task, "bc"])
        assert same != ((task, algo) in own_stage), (task, algo)
        assert (waits_for.get(cell.name) == f"{task}__bc__s0") == same, cell.label
        if same:
            shared.add(task)
    assert shared == set(sweep.spec["tasks"])  # Guess My City's too: its RL columns start from the 8000-step BC cell
    assert bc_stage_of(configs["maze_fo", "bc"]) != bc_stage_of(plan("table2_small", [], {"seed": {"1"}, "task": {
        "maze_fo"}, "algo": {"bc"}}).configs["maze_fo__bc__s1"])  # another seed, another stage


def test_the_readme_counts_table2_smalls_cells_as_its_plan_does():
    """The README's cell count of `make reproduce-small` is the committed plan's (`--plan-only` writes it)."""
    cells = len(json.loads((ROOT / "results/records/table2_small/plan.json").read_text())["cells"])
    readme = (ROOT / "README.md").read_text()
    counts = re.findall(r"table2_small: (\d+) cells", readme) + re.findall(r"(\d+) cells \(`--plan-only` counts", readme)
    assert counts and set(counts) == {str(cells)}, (counts, cells)
