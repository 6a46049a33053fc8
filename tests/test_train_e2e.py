"""`python -m lmrl.train debug=smoke` end to end for every (task, algo) pair, and `lmrl.evaluate`."""

import itertools
import json
import shutil
import subprocess
import sys

import pytest
import torch

from lmrl.dist import resolve_precision
from lmrl.evaluation import load_policies
from tests.e2e import ROOT, cli_command, cli_env, run_cli

TASKS = sorted(p.stem for p in (ROOT / "conf/task").glob("*.yaml"))
ALGOS = sorted(p.stem for p in (ROOT / "conf/algo").glob("*.yaml"))
ONLINE = {"ppo", "online_filtered_bc", "group_pg", "archer", "selfplay"}
# algo=selfplay plays the two-player games only (any other task fails at once: test_selfplay_needs_a_two_player_game).
TWO_PLAYER = {"tictactoe", "kuhn", "car_dealer_duel"}
# Algorithms that start from nothing trained by another stage (every other one records `start_normalized`).
NO_START = {"bc", "filtered_bc", "prompt"}
REQUIRED = {"task", "algo", "return_mean", "normalized_score", "success_rate", "episodes"}
# debug=smoke evaluates one episode on each of at most 8 start states; full chess games have one start.
SMOKE_EPISODES = {"chess": 1, "tictactoe": 2, "kuhn": 2, "car_dealer_duel": 2}
# The fast tier runs BC on every task, every algorithm on maze_fo (windowed histories) and the value-based and
# PPO paths on Wordle (whole-history sequences); `make test-slow` runs every other pair.
FAST_EXTRA = {("wordle", "ilql"), ("wordle", "ppo"), ("tictactoe", "selfplay")}
# SmolLM2 prompted through 100 maze turns takes ~2 min of the fast tier's ~18: the fast tier keeps the prompt
# algorithm end to end on the tiny model (tests/test_prompt_serve.py) and SmolLM2's offline loading.
# task=textarena's fast check is tests/envs/test_textarena.py's online smoke run on smaller budgets (its BC stage
# included): its BC pair here would add a process start of TextArena's NLTK import and 20 steps to the fast tier.
SLOW_EXTRA = {("maze_fo", "prompt"), ("textarena", "bc")}


def pair(task: str, algo: str):
    fast = (algo == "bc" or task == "maze_fo" or (task, algo) in FAST_EXTRA) and (task, algo) not in SLOW_EXTRA
    return pytest.param(task, algo, marks=() if fast else pytest.mark.slow, id=f"{task}-{algo}")


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


@pytest.mark.parametrize("task, algo", [pair(t, a) for t, a in itertools.product(TASKS, ALGOS)
                                       if a != "selfplay" or t in TWO_PLAYER])
def test_smoke_run_writes_metrics_config_and_checkpoint(task, algo, tmp_path, cache):
    run = tmp_path / "run"
    metrics = run_cli("lmrl.train", ["debug=smoke", f"task={task}", f"algo={algo}"], run, cache)
    assert REQUIRED <= metrics.keys()
    assert (metrics["task"], metrics["algo"]) == (task, algo)
    # algo=prompt evaluates 1 start state under debug=smoke (SmolLM2 on CPU)
    assert metrics["episodes"] == (1 if algo == "prompt" else SMOKE_EPISODES.get(task, 8))
    assert (run / "config.yaml").exists() and (run / ".hydra/config.yaml").exists()
    # every RL algorithm (any new one too) evaluates the policy it started from: the table marks a cell below it
    assert ("start_normalized" in metrics) == (algo not in NO_START), algo
    if algo == "prompt":  # nothing trained: the checkpoint is the prompt's parts
        assert json.loads((run / "checkpoint" / "prompt.json").read_text())["rules"]
        return
    # BC-family runs save one save_pretrained dir; value-based runs save the value trunk (+ heads) under value/
    ckpt = run / "checkpoint" / "value" if (run / "checkpoint" / "value").exists() else run / "checkpoint"
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        assert (ckpt / name).exists(), name
    if algo in ONLINE:  # transcripts of every round and the learning curve as CSV and PNG
        assert len(list((run / "rollouts").glob("round_*.jsonl"))) == 2
        assert (run / "rounds.csv").read_text().count("\n") == 3 and (run / "rounds.png").stat().st_size > 0
    # the dataset was cached: a second task run reuses it (same recipe -> same file); SWEET-RL's recipe with
    # several attempts per task (conf/task_algo/*_sweet.yaml) is a dataset of its own
    own_recipe = any(p.stem.startswith(f"{task}_") for p in (ROOT / "conf/task_algo").glob("*.yaml")
                     if "attempts_per_task" in p.read_text())
    assert 1 <= len(list((cache / "datasets" / task).glob("*.jsonl"))) <= 1 + own_recipe


def test_selfplay_needs_a_two_player_game(tmp_path):
    result = subprocess.run(cli_command("lmrl.train", ["debug=smoke", "task=maze_fo", "algo=selfplay"], tmp_path),
                            cwd=ROOT, env=cli_env(tmp_path / "cache"), capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert "algo=selfplay plays a two-player game: task=tictactoe, task=kuhn or task=car_dealer_duel, not task=maze_fo" in result.stderr
    assert not (tmp_path / "cache" / "bc").exists()  # it failed before training a BC stage


def test_evaluate_a_saved_checkpoint(tmp_path, cache):
    train_run = tmp_path / "train"
    run_cli("lmrl.train", ["debug=smoke", "task=maze_fo", "algo=bc"], train_run, cache)
    metrics = run_cli("lmrl.evaluate", [f"checkpoint={train_run / 'checkpoint'}", "task=maze_po", "debug=smoke"],
                      tmp_path / "eval", cache)
    assert REQUIRED <= metrics.keys() and metrics["task"] == "maze_po" and metrics["episodes"] == 8


def test_rl_reuses_the_cached_bc_stage(tmp_path):
    cache = tmp_path / "cache"
    run_cli("lmrl.train", ["debug=smoke", "task=maze_fo", "algo=mc"], tmp_path / "a", cache)
    assert len(list((cache / "bc" / "maze_fo").iterdir())) == 1
    metrics = run_cli("lmrl.train", ["debug=smoke", "task=maze_fo", "algo=ilql"], tmp_path / "b", cache)
    assert len(list((cache / "bc" / "maze_fo").iterdir())) == 1  # the same BC stage, not a second one
    # debug=smoke evaluates no extra betas: the headline (maze FO: the reranker, sampled at T 0.5) and the guided
    # policy at beta
    assert list(metrics["policies"]) == ["rerank T=0.5", "beta=8"]
    # the precision it trained in, as `precision=auto` resolved it on this machine (bf16 only with native bf16)
    assert metrics["precision"] == resolve_precision("auto", torch.device("cpu"))
    assert (tmp_path / "b" / "checkpoint" / "value" / "value_heads.pt").exists()
    # the value checkpoint evaluates on its own at betas chosen now, after its saved headline (the reranker)
    evaluated = run_cli("lmrl.evaluate", [f"checkpoint={tmp_path / 'b' / 'checkpoint'}", "debug=smoke",
                                          "betas=[0,2]"], tmp_path / "eval", cache)
    # headline first
    assert evaluated["algo"] == "ilql" and list(evaluated["policies"]) == ["rerank T=0.5", "beta=0", "beta=2"]
    assert all(REQUIRED - {"task", "algo"} <= p.keys() for p in evaluated["policies"].values())
    # ... and its reranker at another temperature than the run's (greedy here: the argmax), without retraining
    greedy = run_cli("lmrl.evaluate", [f"checkpoint={tmp_path / 'b' / 'checkpoint'}", "debug=smoke", "betas=[2]",
                                       "rerank_temperature=0"], tmp_path / "eval_t", cache)
    assert list(greedy["policies"]) == ["rerank", "beta=2"]
    with pytest.raises(ValueError, match="rerank_temperature=-1.0: rerank_temperature must be >= 0"):
        load_policies(tmp_path / "b" / "checkpoint", None, None, 0, rerank_temperature=-1.0)


def test_a_bc_run_is_the_bc_stage_of_its_config(tmp_path):
    """A BC run publishes its export as the cached BC stage of its config: an RL run with the same model, seed and
    BC budget starts from it instead of training it again, and it holds the weights that training the stage
    would have given (same trainer, initial weights and batches)."""
    from safetensors.torch import load_file

    shared, fresh = tmp_path / "shared", tmp_path / "fresh"
    bc = run_cli("lmrl.train", ["debug=smoke", "task=maze_fo", "algo=bc"], tmp_path / "bc", shared)
    (published,) = (shared / "bc" / "maze_fo").iterdir()
    assert (published / "config.json").exists() and not published.name.endswith((".partial", ".tmp"))
    # the BC run's evaluation is its stage's: kept beside the weights for the RL runs that start there
    assert "start_normalized" not in bc and len(list((published / "evals").glob("*.json"))) == 1
    mc = run_cli("lmrl.train", ["debug=smoke", "task=maze_fo", "algo=mc"], tmp_path / "mc", shared)
    assert list((shared / "bc" / "maze_fo").iterdir()) == [published]  # reused, not trained again
    assert "reusing the cached BC stage" in (tmp_path / "mc" / "train.log").read_text()
    assert mc["start_normalized"] == bc["normalized_score"] and mc["start_episodes"] == bc["episodes"]
    mc_fresh = run_cli("lmrl.train", ["debug=smoke", "task=maze_fo", "algo=mc"], tmp_path / "mc_fresh", fresh)
    (trained,) = (fresh / "bc" / "maze_fo").iterdir()
    assert trained.name == published.name  # the same key
    # an RL run whose stage no BC run evaluated evaluates it itself (loaded from disk): the BC run's score again
    assert mc_fresh["start_normalized"] == bc["normalized_score"] and (trained / "evals").is_dir()
    ours, theirs = load_file(published / "model.safetensors"), load_file(trained / "model.safetensors")
    assert ours.keys() == theirs.keys() and all(ours[k].equal(theirs[k]) for k in ours)
    # a filtered-BC run is not a BC stage (other data): it publishes nothing
    run_cli("lmrl.train", ["debug=smoke", "task=maze_fo", "algo=filtered_bc"], tmp_path / "fbc", fresh)
    assert list((fresh / "bc" / "maze_fo").iterdir()) == [trained]
    # a finished BC run whose stage was not cached (an older run, a cleared cache) is published afterwards
    shutil.rmtree(published)
    cli = [sys.executable, "-m", "lmrl.publish_stage"]
    proc = subprocess.run([*cli, str(tmp_path / "bc")], cwd=ROOT, env=cli_env(shared), capture_output=True, text=True)
    assert proc.returncode == 0 and f"cached as {published}" in proc.stdout, proc.stderr[-2000:]
    assert load_file(published / "model.safetensors").keys() == ours.keys()
    proc = subprocess.run([*cli, str(tmp_path / "fbc")], cwd=ROOT, env=cli_env(shared), capture_output=True, text=True)
    assert proc.returncode == 2 and "only plain BC runs" in proc.stderr
