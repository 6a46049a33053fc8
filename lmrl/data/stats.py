"""Dataset statistics in the shape of the paper's Table 1, for any task.

Length is the number of agent actions in an episode (Table 1's "one agent response");
return is the sum of its rewards; success is `info["success"]`.  Standard deviations are
population ones (ddof=0): the numbers describe the dataset itself, not a sample of it.
"""

from __future__ import annotations

import math
from typing import Iterable

from lmrl.envs.base import Episode

STAT_KEYS = ("size", "avg_length", "std_length", "success_rate", "avg_return", "std_return")


def _mean_std(values: list[float]) -> tuple[float, float]:
    if not values:
        return math.nan, math.nan
    mean = sum(values) / len(values)
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


def dataset_stats(episodes: Iterable[Episode]) -> dict:
    """Size, length, success and return statistics of `episodes` (NaN where empty)."""
    lengths, returns, successes = [], [], []
    for ep in episodes:
        lengths.append(float(ep.num_actions))
        returns.append(ep.total_return)
        successes.append(float(ep.success))
    avg_length, std_length = _mean_std(lengths)
    avg_return, std_return = _mean_std(returns)
    success_rate = sum(successes) / len(successes) if successes else math.nan
    return {
        "size": len(lengths), "avg_length": avg_length, "std_length": std_length,
        "success_rate": success_rate, "avg_return": avg_return, "std_return": std_return,
    }


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, int):
        return str(value)
    return f"{value:.3g}" if abs(value) < 1 else f"{value:.2f}"


def format_stats_table(ours: dict, paper: dict | None = None) -> str:
    """An aligned text table: one row per statistic, columns `ours` and (if given) `paper`."""
    header = ["stat", "ours"] + (["paper"] if paper is not None else [])
    rows = [header]
    for key in STAT_KEYS:
        row = [key, _cell(ours.get(key))]
        if paper is not None:
            row.append(_cell(paper.get(key)))
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def write_and_describe(path, make_episodes, paper: dict | None = None) -> int:
    """A generator CLI's output step: write `make_episodes()` to JSONL at `path`, print the count and speed, then
    the statistics of a second pass (`make_episodes` is called twice: generators are deterministic).  Returns the
    count."""
    import time

    from lmrl.data.jsonl import write_episodes

    start = time.perf_counter()
    count = write_episodes(path, make_episodes())
    seconds = time.perf_counter() - start
    print(f"wrote {count} episodes to {path} in {seconds:.1f} s ({count / max(seconds, 1e-9):.0f} episodes/s)")
    print(format_stats_table(dataset_stats(make_episodes()), paper))
    return count
