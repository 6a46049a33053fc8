"""The GPU tier (`make test-gpu`, marker `gpu`): the real CLI on one CUDA device.

Skipped, with the reason, where CUDA is absent (CI, the CPU machines).  Needs only what a GPU
machine without registry access has plus the carried wheels (../shared/gpu/README.md): maze and
Wordle (no TextWorld, Stockfish or sentence encoder), `logger=none`, DeepSpeed built from its wheel.
    bash .gpu-wheels/on-device.sh python3 -m pytest -q -m gpu tests/test_gpu.py

What runs: a smoke run of every algorithm (`conf/algo/`) on maze FO (self-play: on tic-tac-toe) on
`hardware=gpu` and on `hardware=zero2` under torchrun with one process; ILQL on Wordle; ZeRO-2 in fp16
(DeepSpeed refuses fp16 on its CPU accelerator, so this is the only place it runs); and one learning
check: BC at GPT-2 small's shape (12 x 768) beats its own untrained start on maze FO by a margin.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from tests.e2e import ROOT, cli_env, run_cli
from tests.one_step import TASKS

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="the GPU tier needs CUDA; this machine has none"),
]

ALGOS = sorted(p.stem for p in (ROOT / "conf/algo").glob("*.yaml"))
SMOKE = ["debug=smoke", "logger=none", "task.eval.max_starts=2", "checkpoint.every_steps=0"]
GPU = {"DS_ACCELERATOR": "cuda"}


def algo_overrides(algo: str) -> list[str]:
    # algo=prompt defaults to SmolLM2, which the GPU image does not carry: the tiny model answers instead.
    # algo=selfplay plays a two-player game (TASKS: tic-tac-toe, whose env and ladder need nothing the image lacks).
    return [f"task={TASKS.get(algo, 'maze_fo')}", f"algo={algo}", *(["model=tiny"] if algo == "prompt" else [])]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


def torchrun_one(overrides: list[str], run_dir, cache_dir, timeout: int = 600) -> dict:
    """`torchrun --standalone --nproc_per_node=1 -m lmrl.train ...`: DeepSpeed's launch path on one GPU."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1", "-m", "lmrl.train",
           *overrides, f"hydra.run.dir={run_dir}"]
    proc = subprocess.run(cmd, cwd=ROOT, env=cli_env(cache_dir, **GPU), capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stderr[-4000:]}"
    return json.loads((run_dir / "metrics.json").read_text())


@pytest.mark.parametrize("algo", ALGOS)
def test_smoke_on_one_gpu(algo, tmp_path, cache):
    metrics = run_cli("lmrl.train", [*SMOKE, *algo_overrides(algo), "hardware=gpu"], tmp_path, cache, **GPU)
    assert metrics["hardware"] == "gpu" and metrics["episodes"] == 2


@pytest.mark.parametrize("algo", ALGOS)
def test_smoke_zero2_under_torchrun(algo, tmp_path, cache):
    metrics = torchrun_one([*SMOKE, *algo_overrides(algo), "hardware=zero2", "hardware.engine.precision=bf16"],
                           tmp_path, cache)
    assert metrics["hardware"] == "zero2" and metrics["world_size"] == 1


@pytest.mark.parametrize("algo", ["bc", "ilql", "ppo"])
def test_zero2_fp16_with_loss_scaling(algo, tmp_path, cache):
    metrics = torchrun_one([*SMOKE, *algo_overrides(algo), "hardware=zero2", "hardware.engine.precision=fp16"],
                           tmp_path, cache)
    assert metrics["episodes"] == 2


def test_wordle_ilql_on_one_gpu(tmp_path, cache):
    metrics = run_cli("lmrl.train", ["task=wordle", "algo=ilql", "debug=smoke", "logger=none", "hardware=gpu",
                                     "task.eval.max_starts=8"], tmp_path, cache, **GPU)
    assert metrics["task"] == "wordle" and metrics["episodes"] == 8


def test_bc_at_gpt2_small_shape_learns_the_maze(tmp_path, cache):
    """BC at 12 x 768 (bf16): 400 steps of 64 sequences beat the same model after one step by >= 20
    normalized points on every maze FO start (2 episodes each).  On an H100 2,000 steps x 128 reached 74
    (../shared/gpu/README.md); this budget is a few minutes."""
    shape = ["model.n_layer=12", "model.n_embd=768", "model.n_head=12", "hardware=gpu", "algo=bc", "logger=none",
             "task=maze_fo", "task.eval.episodes_per_start=2", "algo.batch_size=64", "algo.lr=3e-4",
             "checkpoint.every_steps=0"]
    untrained = run_cli("lmrl.train", [*shape, "algo.steps=1"], tmp_path / "start", cache, **GPU)
    trained = run_cli("lmrl.train", [*shape, "algo.steps=400"], tmp_path / "trained", cache, **GPU)
    print(f"untrained {untrained['normalized_score']:.1f} -> trained {trained['normalized_score']:.1f}")
    assert trained["normalized_score"] >= untrained["normalized_score"] + 20
