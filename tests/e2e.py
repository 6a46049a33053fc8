"""Helpers for end-to-end tests: run the real CLI in a subprocess and read its metrics."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_cli(module: str, overrides: list[str], run_dir: Path, cache_dir: Path, timeout: int = 600) -> dict:
    """`python -m <module> <overrides>` with its Hydra run dir pinned; returns metrics.json."""
    env = dict(os.environ, LMRL_CACHE=str(cache_dir), HF_HUB_OFFLINE="1", WANDB_MODE="disabled",
               TOKENIZERS_PARALLELISM="false")
    cmd = [sys.executable, "-m", module, *overrides, f"hydra.run.dir={run_dir}"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stderr[-4000:]}"
    assert "[lmrl] task=" in proc.stdout, proc.stdout[-2000:]
    return json.loads((run_dir / "metrics.json").read_text())
