"""Metric loggers.  `logger=none` keeps metrics in memory only; W&B plugs in behind the same API."""

from __future__ import annotations


class NullLogger:
    """Keeps the logged history (tests and the summary read it) and writes nothing."""

    def __init__(self, **_: object):
        self.history: list[tuple[int | None, dict]] = []

    def log(self, metrics: dict, step: int | None = None) -> None:
        self.history.append((step, dict(metrics)))

    def finish(self) -> None:
        pass
