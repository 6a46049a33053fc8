"""Metric loggers: `logger=none` (memory only) and `logger=wandb`; every run also writes `log.jsonl`.

A logger has `start` (once, with the resolved config and a run name), `log(metrics, step)`,
`table(name, columns, rows)`, `finish`, and `run_id` (kept in checkpoints so a resumed run
continues the same W&B run).  Only the main process gets a real logger.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from pathlib import Path

log = logging.getLogger(__name__)


class NullLogger:
    """Keeps the logged history (tests and the summary read it) and writes nothing."""

    run_id: str | None = None

    def __init__(self, **_: object):
        self.history: list[tuple[int | None, dict]] = []

    def start(self, **_: object) -> None:
        pass

    def log(self, metrics: dict, step: int | None = None) -> None:
        self.history.append((step, dict(metrics)))

    def table(self, name: str, columns: list[str], rows: list[list]) -> None:
        pass

    def finish(self) -> None:
        pass


class RunLog:
    """Appends every logged record to `<run>/log.jsonl` (one JSON object per line, with its step)
    and forwards it to the configured logger.  A resumed run appends: the last record of a step wins."""

    def __init__(self, path: Path, inner):
        self.path, self.inner = Path(path), inner

    @property
    def run_id(self):
        return self.inner.run_id

    def start(self, **kwargs) -> None:
        self.inner.start(**kwargs)

    def log(self, metrics: dict, step: int | None = None) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps({"step": step, **metrics}, default=float) + "\n")
        self.inner.log(metrics, step)

    def table(self, name: str, columns: list[str], rows: list[list]) -> None:
        self.inner.table(name, columns, rows)

    def finish(self) -> None:
        self.inner.finish()


class StageLogger:
    """Logs of a nested stage (an RL run's BC stage) under `<stage>/...` instead of `train/...`,
    so they do not collide with the main stage's steps."""

    def __init__(self, inner, stage: str):
        self.inner, self.stage = inner, stage
        self.run_id = getattr(inner, "run_id", None)

    def log(self, metrics: dict, step: int | None = None) -> None:
        self.inner.log({f"{self.stage}/{k.split('/', 1)[-1]}": v for k, v in metrics.items()}, step)

    def table(self, name: str, columns: list[str], rows: list[list]) -> None:
        self.inner.table(f"{self.stage}/{name}", columns, rows)


def read_log(path: Path) -> dict[int, dict]:
    """`log.jsonl` as {step: merged record}; later lines override earlier ones (resumed runs)."""
    out: dict[int, dict] = {}
    for line in Path(path).read_text().splitlines():
        rec = json.loads(line)
        out.setdefault(rec.pop("step"), {}).update(rec)
    return out


class WandbLogger:
    """Weights & Biases.  `mode` defaults to WANDB_MODE, else offline: a run never waits on a network.
    An online init that fails (no network, no key) falls back to offline with a warning."""

    def __init__(self, project: str = "lmrl", entity: str | None = None, group: str | None = None,
                 mode: str | None = None, tags: list[str] | None = None, init_timeout: float = 60.0, **_: object):
        self.project, self.entity, self.group, self.tags = project, entity, group, list(tags or [])
        self.mode = mode or os.environ.get("WANDB_MODE") or "offline"
        self.init_timeout = init_timeout
        self.run = None

    @property
    def run_id(self) -> str | None:
        return self.run.id if self.run is not None else None

    def start(self, run_dir: Path, config: dict, name: str, run_id: str | None = None) -> None:
        import wandb

        kwargs = dict(project=self.project, entity=self.entity, group=self.group, tags=self.tags, name=name,
                      config=config, dir=str(run_dir), id=run_id or uuid.uuid4().hex[:8], resume="allow",
                      settings=wandb.Settings(init_timeout=self.init_timeout, console="off"))
        try:
            self.run = wandb.init(mode=self.mode, **kwargs)
        except Exception as e:  # noqa: BLE001 - any failure to reach W&B must not cost the run
            if self.mode == "offline":
                raise
            log.warning("W&B %s init failed (%s); logging offline instead (wandb sync later)", self.mode, e)
            self.run = wandb.init(mode="offline", **kwargs)

    def log(self, metrics: dict, step: int | None = None) -> None:
        self.run.log({**metrics, **({"trainer/step": step} if step is not None else {})})

    def table(self, name: str, columns: list[str], rows: list[list]) -> None:
        import wandb

        self.run.log({name: wandb.Table(columns=columns, data=rows)})

    def finish(self) -> None:
        if self.run is not None:
            self.run.finish()
