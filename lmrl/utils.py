"""Small shared helpers: seeding and the one-line run summary."""

from __future__ import annotations

import random

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def summary_line(m: dict) -> str:
    """The single line a run ends with."""
    return (
        f"[lmrl] task={m['task']} algo={m['algo']} return={m['return_mean']:.2f}±{m['return_stderr']:.2f} "
        f"normalized={m['normalized_score']:.1f} success={m['success_rate']:.3f} episodes={m['episodes']}"
    )
