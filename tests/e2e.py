"""Helpers for end-to-end tests: run the real CLI in a subprocess and read its metrics."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from lmrl.dist import child_env

ROOT = Path(__file__).resolve().parents[1]


def cli_env(cache_dir: Path, **extra: str) -> dict:
    """The environment of a CLI run in a test: offline, its own cache, no launcher variables inherited."""
    return child_env(**{"LMRL_CACHE": str(cache_dir), "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled",
                        "TOKENIZERS_PARALLELISM": "false", "DS_ACCELERATOR": "cpu", **extra})


def cli_command(module: str, overrides: list[str], run_dir: Path, nproc: int = 1) -> list[str]:
    """`python -m <module> ...`, or under `torchrun --standalone` with `nproc` processes."""
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"]
    return [*(launcher if nproc > 1 else [sys.executable]), "-m", module, *overrides, f"hydra.run.dir={run_dir}"]


def run_cli(module: str, overrides: list[str], run_dir: Path, cache_dir: Path, timeout: int = 600, nproc: int = 1,
            metrics_dir: Path | None = None, **env_extra: str) -> dict:
    """`python -m <module> <overrides>` with its Hydra run dir pinned; returns metrics.json (from
    `metrics_dir` when the run writes elsewhere, e.g. a resumed run)."""
    env = cli_env(cache_dir, **({"OMP_NUM_THREADS": "1"} if nproc > 1 else {}), **env_extra)
    cmd = cli_command(module, overrides, run_dir, nproc)
    # its own session, so a timeout kills torchrun's workers too (a hung worker otherwise outlives the test)
    with subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{err[-4000:]}"
    assert "[lmrl] task=" in out, out[-2000:]
    return json.loads(((metrics_dir or run_dir) / "metrics.json").read_text())


class Server:
    """`python -m lmrl.serve checkpoint=<dir> <overrides>` in a subprocess on a free port; its base URL from
    the first line it prints.  Its output goes to a file (a pipe nobody reads would stall it)."""

    def __init__(self, checkpoint, cache: Path, *overrides: str, timeout: float = 180):
        self.log = Path(cache) / f"serve_{time.time_ns()}.log"
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "lmrl.serve", f"checkpoint={checkpoint}", "port=0",
                                          *overrides], cwd=ROOT, env=cli_env(cache), stdout=out,
                                         stderr=subprocess.STDOUT)
        deadline, found = time.time() + timeout, None
        while time.time() < deadline and self.proc.poll() is None:
            found = re.search(r"serving \S+ at (http://\S+/v1)", self.log.read_text())
            if found:
                break
            time.sleep(0.2)
        assert found, f"server did not start:\n{self.log.read_text()[-3000:]}"
        self.url = found.group(1)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)
