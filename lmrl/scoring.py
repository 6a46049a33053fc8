"""Normalized scores (the paper's piecewise-linear formula) and episode summaries."""

from __future__ import annotations

import math
from typing import Sequence

from lmrl.envs.base import Episode


def normalize(score: float, min: float, avg: float, max: float) -> float:  # noqa: A002 - the paper's names
    """0 at the minimum return, 50 at the dataset average, 100 at the maximum (not clipped)."""
    if score < avg:
        return 50.0 * (score - min) / (avg - min)
    return 50.0 + 50.0 * (score - avg) / (max - avg)


def summarize(episodes: Sequence[Episode], normalization: dict) -> dict:
    """Mean/std/stderr of the return, the normalized mean, success rate, invalid-turn rate (the share of agent
    turns the env flagged `info["invalid"]`: unparseable or illegal) and length."""
    returns = [ep.total_return for ep in episodes]
    n = len(returns)
    mean = sum(returns) / n
    std = math.sqrt(sum((r - mean) ** 2 for r in returns) / n)
    return {
        "return_mean": mean,
        "return_std": std,
        "return_stderr": std / math.sqrt(n),
        "normalized_score": normalize(mean, **normalization),
        "success_rate": sum(ep.success for ep in episodes) / n,
        "invalid_rate": sum(ep.invalid_turns for ep in episodes) / max(1, sum(ep.num_actions for ep in episodes)),
        "episode_length": sum(ep.num_actions for ep in episodes) / n,
        "episodes": n,
    }
