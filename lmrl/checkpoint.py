"""Periodic training checkpoints and resuming.

A checkpoint is a directory `<run>/checkpoints/step_<N>/` holding

- the engine's state (`engine.save_state`: weights, optimizer moments, LR schedule; under
  DeepSpeed every process writes its own shards),
- frozen models that change during training (ILQL's Polyak target) as `<name>.pt`, less the tensors they
  share with the trained model's frozen parameters (LoRA: the target shares the value model's base),
- each process's RNG streams (`rng_rank<r>.pt`),
- `trainer_state.json`: the step (for offline trainers also the data position: batch order
  is a pure function of seed and step), online trainers' per-round history, the W&B run id, and
  the run's wall time so far (a resumed run's record counts its earlier attempts).

`checkpoints/latest` names the newest complete one; it is replaced atomically only after
every file is written, so a run killed while saving falls back to the previous checkpoint.
The last `keep` checkpoints are kept.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import time
from pathlib import Path

import numpy as np
import torch

from lmrl.dist import barrier, is_main, rank
from lmrl.utils import atomic_write_text

log = logging.getLogger(__name__)


def rng_state() -> dict:
    """The Python, NumPy, torch (and CUDA, where present) random generators' states of this process."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    """Restore the generators from `rng_state()`'s dict."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def shared_keys(module: torch.nn.Module, trained: torch.nn.Module) -> set[str]:
    """The state-dict keys of a frozen `module` whose tensors are frozen parameters of the `trained` model (LoRA:
    ILQL's target shares the value model's base).  A checkpoint saves neither: they come back from the run's start."""
    frozen = {id(p) for p in trained.parameters() if not p.requires_grad}
    if not frozen:
        return set()
    return {k for k, v in module.state_dict(keep_vars=True).items() if id(v) in frozen}


class Checkpointer:
    """Writes and restores a run's checkpoints under `directory` (the module docstring gives the layout) every `every`
    steps or rounds (0 = never), keeping the last `keep`. `started` is the attempt's start time (`time.perf_counter`),
    from which `elapsed` counts the run's wall time across resumes."""

    def __init__(self, directory: str | os.PathLike, every: int, keep: int = 2, started: float | None = None):
        if every < 0 or keep < 1:
            raise ValueError(f"checkpoint every must be >= 0 and keep >= 1 (got {every}, {keep})")
        self.directory, self.every, self.keep = Path(directory), every, keep
        # The run's wall time: this attempt's since `started` (a perf_counter value; default now), plus what the
        # attempts before it had spent up to the checkpoint it resumed from, so a resumed run reports all of it.
        self.started = time.perf_counter() if started is None else started
        self.earlier_seconds = 0.0

    def elapsed(self) -> float:
        """Seconds of wall time of this run over all its attempts (an attempt's time after its last checkpoint
        is lost with it)."""
        return self.earlier_seconds + time.perf_counter() - self.started

    def due(self, step: int) -> bool:
        """Whether to checkpoint after `step` completed steps (or rounds)."""
        return self.every > 0 and step > 0 and step % self.every == 0

    def latest(self) -> Path | None:
        """The newest complete checkpoint directory, or None."""
        pointer = self.directory / "latest"
        if not pointer.exists():
            return None
        path = self.directory / pointer.read_text().strip()
        return path if (path / "trainer_state.json").exists() else None

    def save(self, step: int, engine, state: dict, frozen: dict | None = None, files: dict | None = None) -> Path:
        """Collective: every process calls it at the same step.  `files` ({name: object}) are written by the main
        process as `<name>.pt`, before the checkpoint is marked complete (a trainer's state too large for JSON)."""
        path = self.directory / f"step_{step:08d}"
        if is_main():
            shutil.rmtree(path, ignore_errors=True)
            path.mkdir(parents=True)
        barrier()
        engine.save_state(path)
        for name, module in (frozen or {}).items():
            full = engine.frozen_state(module)
            if is_main():
                shared = shared_keys(module, engine.unwrap())
                torch.save({k: v for k, v in full.items() if k not in shared}, path / f"{name}.pt")
        torch.save(rng_state(), path / f"rng_rank{rank()}.pt")
        if is_main():
            for name, obj in (files or {}).items():
                torch.save(obj, path / f"{name}.pt")
        barrier()
        if is_main():
            (path / "trainer_state.json").write_text(json.dumps({**state, "step": step,
                                                                 "wall_seconds": round(self.elapsed(), 2)}, indent=1))
            atomic_write_text(self.directory / "latest", path.name)
            self.prune()
            log.info("checkpoint %s", path)
        barrier()
        return path

    def prune(self) -> None:
        """Delete all but the newest `keep` checkpoints."""
        steps = sorted(p for p in self.directory.glob("step_*") if p.is_dir())
        for old in steps[: -self.keep]:
            shutil.rmtree(old, ignore_errors=True)

    def restore(self, engine, frozen: dict | None = None) -> dict | None:
        """Load the latest checkpoint into `engine` (and `frozen`); its trainer state, or None."""
        path = self.latest()
        if path is None:
            return None
        engine.load_state(path)
        for name, module in (frozen or {}).items():
            state = torch.load(path / f"{name}.pt", map_location="cpu", weights_only=False)
            shared = shared_keys(module, engine.unwrap())
            if shared:  # the trained model's own tensors, already in place: loaded onto themselves
                state = {**{k: v for k, v in module.state_dict().items() if k in shared}, **state}
            engine.load_frozen_state(module, state)
        rng = path / f"rng_rank{rank()}.pt"
        if rng.exists():
            set_rng_state(torch.load(rng, weights_only=False))
        state = json.loads((path / "trainer_state.json").read_text())
        self.earlier_seconds = float(state.pop("wall_seconds", 0.0))
        log.info("resumed from %s (step %d)", path, state["step"])
        return state
