"""Mixed precision for every trainer on CPU: one step in bf16 and in fp16 (with loss scaling) on plain
torch, and in bf16 under DeepSpeed ZeRO-2, trains (finite loss, weights moved) and its policies act.

`algo=prompt` is left out: it trains nothing.  Value and PPO losses are computed in fp32 from the
low-precision forward (their unit tests check the dtype)."""

from __future__ import annotations

import math

import pytest
import torch

from lmrl.dist import TorchEngine
from tests.one_step import ALGOS, built, one_step_and_turn, weights  # noqa: F401 (fixture)

TRAINED = [a for a in ALGOS if a != "prompt"]


def check_one_step(trainer, metrics: dict, before: list) -> None:
    loss = metrics.get("train_loss", metrics.get("rollout_normalized_last"))
    assert loss is not None and math.isfinite(loss), metrics
    after = weights(trainer)
    assert all(torch.isfinite(p).all() for p in after)
    assert any(not torch.equal(a, b) for a, b in zip(after, before)), "one optimizer step left the weights unchanged"


@pytest.mark.parametrize("algo", TRAINED)
def test_torch_engine_bf16(algo, built, tmp_path):
    check_one_step(*one_step_and_turn(algo, TorchEngine(device="cpu", precision="bf16"), built, tmp_path))


@pytest.mark.parametrize("algo", TRAINED)
def test_torch_engine_fp16_scales_the_loss(algo, built, tmp_path):
    """Dynamic loss scaling starts at 2^16 and halves on every overflowing step, which it skips: after the run
    the scale is 2^(16-k) for k skipped steps, fewer than the steps taken (at least one applied, and it moved the
    weights).  How many a first step at 2^16 overflows depends on the CPU's fp16 kernels (a CI machine skipped
    five of ArCHer's six TD steps, this one four), so the bound is the run's own step count, not a constant."""
    engine = TorchEngine(device="cpu", precision="fp16")
    steps = ["smoke.steps=4", "smoke.max_steps_per_round=4", "smoke.episodes_per_round=4"]
    if algo == "archer":  # TD errors start near the maze's -4 rewards: several halvings pass before a step fits fp16
        steps[1] = "smoke.max_steps_per_round=10"
    check_one_step(*one_step_and_turn(algo, engine, built, tmp_path, *steps))
    skipped = math.log2(2.0**16 / engine.scaler.get_scale())
    assert skipped == int(skipped) and 0 <= skipped < engine.global_step, (engine.scaler.get_scale(), engine.global_step)


@pytest.mark.parametrize("algo", TRAINED)
def test_zero2_bf16(algo, built, tmp_path, process_group):
    """(DeepSpeed refuses fp16 on its CPU accelerator, "Type fp16 is not supported on your device":
    ZeRO-2 in fp16 is in the GPU tier, tests/test_gpu.py.)"""
    from lmrl.deepspeed_engine import DeepSpeedEngine

    check_one_step(*one_step_and_turn(algo, DeepSpeedEngine(stage=2, precision="bf16"), built, tmp_path))
