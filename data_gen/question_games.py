"""What the 20 Questions and Guess My City generators share: who plays, and the command line."""

from __future__ import annotations

import argparse
import dataclasses
import random
import time
from collections.abc import Callable, Iterator

import numpy as np

from lmrl.data.jsonl import write_episodes
from lmrl.data.stats import dataset_stats, format_stats_table
from lmrl.envs.base import Episode


def check_episodes(episodes) -> int:
    if int(episodes) != episodes or episodes < 0:
        raise ValueError(f"episodes must be a non-negative integer, got {episodes}")
    return int(episodes)


def check_mix(mix) -> None:
    """Every field of a mix dataclass is a probability, and expert + noisy players are at most everyone."""
    for field in dataclasses.fields(mix):
        value = getattr(mix, field.name)
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{field.name} must lie in [0, 1], got {value}")
    if mix.p_expert + mix.p_noisy > 1.0:
        raise ValueError(f"p_expert + p_noisy must be at most 1, got {mix.p_expert + mix.p_noisy}")


def draw_player(rng: random.Random, p_expert: float, p_noisy: float) -> str:
    """"expert", "noisy" or "random", with the mix's probabilities."""
    draw = rng.random()
    return "expert" if draw < p_expert else "noisy" if draw < p_expert + p_noisy else "random"


def main(argv: list[str] | None, task: str, generate: Callable[..., Iterator[Episode]],
         best_returns: Callable[[], np.ndarray], paper_row: dict, default_episodes: int, secrets: str) -> None:
    """`--episodes N --seed S --out F` writes JSONL and prints its statistics beside Table 1's;
    `--best` prints the expert's mean return over every secret (the normalization maximum)."""
    parser = argparse.ArgumentParser(description=f"Generate the {task} dataset as episode JSONL.")
    parser.add_argument("--episodes", type=int, default=default_episodes)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="output JSONL path (required unless --best)")
    parser.add_argument("--best", action="store_true", help="print the expert's mean return and exit")
    args = parser.parse_args(argv)
    if args.best:
        returns = best_returns()
        print(f"expert over all {len(returns)} {secrets}: mean return {returns.mean():.4f} "
              f"(min {returns.min():.4g}, max {returns.max():.4g})")
        return
    if not args.out:
        parser.error("--out is required unless --best is given")
    start = time.perf_counter()
    count = write_episodes(args.out, generate(args.episodes, args.seed))
    seconds = time.perf_counter() - start
    print(f"wrote {count} episodes to {args.out} in {seconds:.1f} s ({count / max(seconds, 1e-9):.0f} episodes/s)")
    print(format_stats_table(dataset_stats(generate(args.episodes, args.seed)), paper_row))
