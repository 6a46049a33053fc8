"""`python -m launchers.curves`: runs each algorithm with curve points and gathers them into one CSV and
one figure per task; a finished run is reused."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_a_tagged_variant_has_its_own_runs_and_merges_into_a_study(tmp_path, monkeypatch):
    """A variant's rows are `algo (tag)` from its own run directory; --merge keeps the study's other rows."""
    out = tmp_path / "curves"

    def fake_run(task, algo, seed, args, threads):  # a finished run: only the CSV matters here
        directory = curves.run_dir(args.runs, task, algo, seed, args.tag)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "curve.csv").write_text(f"step,epochs,train_loss,normalized_score,critic/value_bias\n"
                                             f"1,1,0.5,{10 if args.tag else 20},3.0\n")
        return directory

    monkeypatch.setattr(curves, "run_one", fake_run)
    curves.main(["--task", "maze_fo", "--algos", "ilql", "--out", str(out), "--name", "study", "--merge"])
    curves.main(["--task", "maze_fo", "--algos", "ilql", "--out", str(out), "--name", "study", "--merge",
                 "--tag", "long", "--", "algo.steps=8"])
    curves.main(["--task", "maze_fo", "--algos", "ilql", "--out", str(out), "--name", "study", "--merge",
                 "--tag", "long", "--", "algo.steps=8"])  # again: replaced, not duplicated
    with open(out / "study.csv") as f:
        rows = [(r["algo"], r["normalized_score"]) for r in csv.DictReader(f)]
    assert rows == [("ilql", "20"), ("ilql (long)", "10")]
    assert curves.run_dir(out / "runs", "maze_fo", "ilql", 0, "long").name == "ilql-long__s0"
    assert (out / "study.png").stat().st_size > 10_000 and not (out / "maze_fo.csv").exists()


def test_the_loss_axis_is_logarithmic_only_over_a_decade_or_more():
    from launchers.curves import loss_scale

    assert loss_scale([3.1, 0.9, 0.2]) == "log"
    assert loss_scale([1.23, 1.16, 1.12]) == "linear"  # a log axis would show no labelled tick here
    assert loss_scale([]) == "linear" and loss_scale([0.0, 1.0]) == "linear"



def test_online_runs_draw_rollouts_kl_and_the_value_heads_health(tmp_path, monkeypatch):
    """An online study gets a panel per rounds.csv series some run has: PPO's explained variance only with PPO,
    ArCHer's critic fit only with ArCHer."""
    drawn = []
    import matplotlib.axes

    original = matplotlib.axes.Axes.set_title
    monkeypatch.setattr(matplotlib.axes.Axes, "set_title", lambda ax, title, **kw: (drawn.append(title),
                                                                                       original(ax, title, **kw)))
    rows = [{"task": "maze_fo", "algo": algo, "seed": 0, "round": r, "normalized_score": 50 + r, "kl": 0.01 * r,
             **({"explained_variance": 0.1 * r} if algo == "ppo (r40)" else {}),
             **({"critic/spearman_states": 0.3 * r} if algo == "archer" else {})}
            for algo in ("ppo (r40)", "online_filtered_bc", "archer") for r in range(3)]
    curves.plot([{k: v for k, v in r.items() if k != "kl" or r["algo"] != "online_filtered_bc"} for r in rows],
                tmp_path / "online.png", "maze_fo")
    assert drawn == [title for _, title in curves.ONLINE_PANELS]
    drawn.clear()
    curves.plot([r for r in rows if r["algo"] == "online_filtered_bc"], tmp_path / "fbc.png", "maze_fo")
    assert drawn == ["online: rollout normalized score", "online: KL to the BC policy, per token"]
    assert (tmp_path / "online.png").stat().st_size > 10_000


def test_a_killed_curve_resumes_and_nproc_runs_it_under_torchrun(tmp_path, monkeypatch):
    """The same command continues a run that checkpointed and did not finish (its log appended), starts the others
    afresh, and `--nproc 2` launches torchrun with hardware=ddp and one thread a process."""
    out, calls = tmp_path / "curves", []

    def fake_subprocess_run(cmd, cwd, env, stdout, stderr):
        calls.append((cmd, env["OMP_NUM_THREADS"]))
        directory = Path(next(c for c in cmd if c.startswith("hydra.run.dir=")).split("=", 1)[1])
        (directory / "curve.csv").write_text("step,epochs,train_loss,normalized_score\n1,1,0.5,10\n")
        (directory / "metrics.json").write_text("{}")
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(curves.subprocess, "run", fake_subprocess_run)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # the launcher's cores: 1 a process under --nproc 2
    killed = curves.run_dir(tmp_path / "kept", "maze_fo", "bc", 0)  # --runs: outside the output folder
    (killed / "checkpoints").mkdir(parents=True)
    (killed / "checkpoints" / "latest").write_text("step_00000100")
    (killed / "curve_run.log").write_text("the first attempt's log\n")
    curves.main(["--task", "maze_fo", "--algos", "bc", "--seeds", "0", "1", "--out", str(out), "--runs",
                 str(tmp_path / "kept"), "--", "algo.steps=8"])
    (resumed, _), (fresh, _) = calls
    assert resumed[-1] == f"resume={killed}" and not any(c.startswith("resume=") for c in fresh)
    assert resumed[:3] == [sys.executable, "-m", "lmrl.train"] and "hardware=ddp" not in resumed
    assert (killed / "curve_run.log").read_text() == "the first attempt's log\n"  # appended to, not replaced

    calls.clear()
    curves.main(["--task", "maze_po", "--algos", "bc", "--nproc", "2", "--out", str(out), "--", "algo.steps=8"])
    (cmd, threads), = calls
    assert cmd[:5] == [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    assert "hardware=ddp" in cmd and cmd.index("hardware=ddp") < cmd.index("algo.steps=8") and threads == "1"
    calls.clear()
    curves.main(["--task", "maze_po", "--algos", "bc", "--nproc", "2", "--tag", "z2", "--out", str(out), "--",
                 "hardware=zero2"])
    assert "hardware=ddp" not in calls[0][0] and "hardware=zero2" in calls[0][0]


def test_collect_gathers_an_unfinished_run_without_training(tmp_path, monkeypatch, capsys):
    """`--collect` writes the points a run killed mid-curve has so far and starts no training; a run with no point
    yet is a clear error."""
    monkeypatch.setattr(curves, "run_one", lambda *a: (_ for _ in ()).throw(AssertionError("trained")))
    out = tmp_path / "curves"
    argv = ["--task", "guess", "--algos", "bc", "--out", str(out), "--tag", "16k", "--collect"]
    with pytest.raises(SystemExit, match="curve.csv does not exist"):
        curves.main(argv)
    directory = curves.run_dir(out / "runs", "guess", "bc", 0, "16k")
    directory.mkdir(parents=True)
    (directory / "curve.csv").write_text("step,epochs,train_loss,normalized_score\n2000,0.5,0.4,9\n4000,1,0.3,12\n")
    curves.main(argv)
    assert "unfinished, 2 points so far" in capsys.readouterr().out
    with open(out / "guess.csv") as f:
        assert [(r["algo"], r["step"]) for r in csv.DictReader(f)] == [("bc (16k)", "2000"), ("bc (16k)", "4000")]


def test_records_draw_a_sweep_cells_curves_with_their_start_and_final_scores(tmp_path, capsys):
    """`--records` trains nothing: each record's run directory gives its rounds, each row carries the record's start
    and final scores and commit; a record whose run is gone, or records of two tasks, are clear errors."""
    import json

    records = []
    for seed in (0, 1):
        run = tmp_path / "runs" / f"wordle__archer__s{seed}"
        run.mkdir(parents=True)
        (run / "rounds.csv").write_text("round,normalized_score,kl,critic/spearman_states\n"
                                        f"0,{seed},0.0,0.1\n1,{seed + 5},0.01,0.8\n")
        path = tmp_path / f"wordle__archer__s{seed}.json"
        path.write_text(json.dumps({"task": "wordle", "algo": "archer", "seed": seed, "run_dir": str(run),
                                    "normalized_score": 7.5 + seed, "start_normalized": 1.5, "git_commit": "abc"}))
        records.append(str(path))
    out = tmp_path / "curves"
    curves.main(["--records", *records, "--name", "wordle_archer", "--out", str(out)])
    with open(out / "wordle_archer.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(r["seed"], r["round"], r["normalized_score"]) for r in rows] == [("0", "0", "0"), ("0", "1", "5"),
                                                                              ("1", "0", "1"), ("1", "1", "6")]
    assert {(r["start_normalized"], r["final_normalized"], r["git_commit"]) for r in rows} == {("1.5", "7.5", "abc"),
                                                                                             ("1.5", "8.5", "abc")}
    assert (out / "wordle_archer.png").stat().st_size > 10_000
    gone = tmp_path / "gone.json"
    gone.write_text(json.dumps({"task": "wordle", "algo": "archer", "seed": 2, "run_dir": str(tmp_path / "nowhere"),
                                "normalized_score": 0.0}))
    with pytest.raises(SystemExit, match="gone.json names run directory .*nowhere, which has no rounds.csv"):
        curves.main(["--records", str(gone), "--name", "x", "--out", str(out)])
    other = json.loads(Path(records[0]).read_text()) | {"task": "maze_fo"}
    Path(records[1]).write_text(json.dumps(other))
    with pytest.raises(SystemExit):
        curves.main(["--records", *records, "--name", "x", "--out", str(out)])
    assert "these records are of maze_fo, wordle" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        curves.main(["--records", records[0], "--out", str(out)])
    assert "--records needs --name" in capsys.readouterr().err
