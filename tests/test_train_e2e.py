"""`python -m lmrl.train debug=smoke` end to end for every (task, algo) pair, and `lmrl.evaluate`."""

import itertools

import pytest

from tests.e2e import ROOT, run_cli

TASKS = sorted(p.stem for p in (ROOT / "conf/task").glob("*.yaml"))
ALGOS = sorted(p.stem for p in (ROOT / "conf/algo").glob("*.yaml"))
REQUIRED = {"task", "algo", "return_mean", "normalized_score", "success_rate", "episodes"}


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


@pytest.mark.parametrize("task, algo", list(itertools.product(TASKS, ALGOS)))
def test_smoke_run_writes_metrics_config_and_checkpoint(task, algo, tmp_path, cache):
    run = tmp_path / "run"
    metrics = run_cli("lmrl.train", ["debug=smoke", f"task={task}", f"algo={algo}"], run, cache)
    assert REQUIRED <= metrics.keys()
    assert (metrics["task"], metrics["algo"]) == (task, algo)
    assert metrics["episodes"] == 25  # 25 start cells x 1 episode under debug=smoke
    assert (run / "config.yaml").exists() and (run / ".hydra/config.yaml").exists()
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        assert (run / "checkpoint" / name).exists(), name
    # the dataset was cached: a second task run reuses it (same recipe -> same file)
    assert len(list((cache / "datasets" / task).glob("*.jsonl"))) == 1


def test_evaluate_a_saved_checkpoint(tmp_path, cache):
    train_run = tmp_path / "train"
    run_cli("lmrl.train", ["debug=smoke", "task=maze_fo", "algo=bc"], train_run, cache)
    metrics = run_cli("lmrl.evaluate", [f"checkpoint={train_run / 'checkpoint'}", "task=maze_po", "debug=smoke"],
                      tmp_path / "eval", cache)
    assert REQUIRED <= metrics.keys() and metrics["task"] == "maze_po" and metrics["episodes"] == 25
