"""The benchmark's arithmetic and building blocks (its numbers are measured by `make bench`, not here)."""

from __future__ import annotations

import pytest
import torch

from lmrl.bench.foundation import budget_batch, step_result
from lmrl.data.tokenize import TokenSequence


def seq(n: int) -> TokenSequence:
    return TokenSequence(torch.arange(n).numpy(), torch.ones(n, dtype=torch.bool).numpy(), torch.zeros(n).numpy(),
                         True)


def test_budget_batch_fills_the_budget_counting_padding():
    batch = budget_batch([seq(10), seq(30), seq(20)], 100, pad_id=0)
    # 10 -> 1x10, +30 -> 2x30 = 60, +20 -> 3x30 = 90, +10 (cycled) -> 4x30 = 120 > 100: three sequences
    assert batch["input_ids"].shape == (3, 30) and int(batch["attention_mask"].sum()) == 60


def test_mfu_by_hand():
    batch = {"input_ids": torch.zeros(4, 50, dtype=torch.long), "attention_mask": torch.ones(4, 50)}
    batch["attention_mask"][:, 40:] = 0
    # 1e12 FLOPs in a median step of 0.5 s = 2 TFLOP/s; against a 10 TFLOP/s peak, MFU 0.2; 160 real tokens
    row = step_result([0.4, 0.5, 0.9], batch, flops=1e12, peak_tflops=10.0)
    assert row["tflops"] == pytest.approx(2.0) and row["mfu"] == pytest.approx(0.2)
    assert row["padded_tokens_per_step"] == 200 and row["tokens_per_s"] == pytest.approx(320.0)
    assert "mfu" not in step_result([1.0], batch, flops=1e12, peak_tflops=None)


def test_unknown_benchmark_names_the_valid_ones(capsys):
    from lmrl.bench import BENCHMARKS
    from lmrl.bench.__main__ import main

    assert main(["nope"]) == 2
    err = capsys.readouterr().err
    assert "'nope'" in err and all(name in err for name in BENCHMARKS)


@pytest.mark.parametrize("given, expected", [(None, None), ("8", "8")])
def test_importing_lmrl_sets_the_primitive_cache_unless_the_user_did(given, expected):
    import os
    import subprocess
    import sys

    from lmrl import DEFAULT_PRIMITIVE_CACHE

    env = {k: v for k, v in os.environ.items() if k != "ONEDNN_PRIMITIVE_CACHE_CAPACITY"}
    if given:
        env["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] = given
    code = "import os, lmrl; print(os.environ['ONEDNN_PRIMITIVE_CACHE_CAPACITY'])"
    seen = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert seen.strip() == (expected or DEFAULT_PRIMITIVE_CACHE)


def test_primitive_cache_bench_runs_each_pattern_in_a_child():
    """Two steps of each shape pattern (in this process): speed and peak RSS come back as numbers."""
    from lmrl.bench.primitive_cache import PATTERNS, child

    for pattern in PATTERNS:
        row = child(pattern, steps=2, rows=2, seed=0)
        assert row["tokens_per_s"] > 0 and row["peak_rss_gb"] > 0, (pattern, row)


def test_archer_projection_by_hand():
    """A critic-only round of 60 s and actor rounds of 100 and 140 s (mean 120): 15 x 60 + 25 x 120 = 3,900 s, 1.08 h."""
    from lmrl.bench.archer import summarize_rounds

    rows = [{"round": str(r), "rollout_seconds": str(roll), "update_seconds": str(upd), "episode_length": "7.5"}
            for r, roll, upd in ((0, 40, 20), (1, 70, 30), (2, 100, 40))]
    out = summarize_rounds(rows)
    assert (out["critic_round_seconds"], out["actor_round_seconds"], out["projected_train_hours"]) == (60, 120, 1.08)
    assert [r["update_seconds"] for r in out["rounds"]] == [20, 30, 40]
    with pytest.raises(ValueError, match="actor round"):
        summarize_rounds(rows[:1])
    from lmrl.bench.archer import summary

    row = summary({"maze_po": {**out, "git_commit": "0123456789abcdef", "git_dirty": True}})[0]
    assert row == {"task": "maze_po", "critic_round_s": 60, "actor_round_s": 120, "episode_length": 7.5,
                   "projected_40_rounds_h": 1.08, "commit": "0123456+dirty"}
