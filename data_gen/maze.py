"""Maze dataset generator: scripted episodes mixing BFS-optimal play with noise and bad text.

LMRL-Gym ships no generator for its maze data and does not say which policies made it; the
one firm number is the dataset average its score normalization uses (-83).  Each episode
draws one of three behaviours, and the default mix was tuned to land on that average:

- `near_optimal` (7%): the BFS move, replaced by a random move with probability <= 0.05.
- `noisy` (18%): heads for the goal, but moves at random with probability U[0.7, 0.9].
- `lost` (75%): heads for decoy cells (an agent that misread the goal), moving at random
  with probability U[0, 0.3]; it reaches the goal only by accident.
Both imperfect behaviours also say invalid text (`go left`, `move forward`, ...) at a
per-step rate drawn from U[0, 0.01]; the env penalizes each with -4.

Why only 7% near-optimal: filtered BC keeps the top 10% by return, and a start next to the
goal scores better than any start far from it.  With a larger near-optimal slice the top
decile fills with short episodes and drops the four 12-move corner starts; at 7% it holds
every near-optimal episode plus the quickest lucky ones and covers 21-25 of the 25 starts.
A 100-step horizon makes every failure cost >= 101, so an average of -83 needs a success
rate of at least ~0.2 (ours is ~0.25; Table 1's 0.11 is inconsistent with -83).

Each episode draws from its own RNG seeded by `(seed, index)`, so the dataset is
deterministic and a smaller dataset is a prefix of a larger one.  The actions depend only
on the hidden position, so FO and PO datasets of one seed hold the same trajectories.

CLI: `python -m data_gen.maze --episodes 1240 --seed 0 [--po] --out PATH`.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
from dataclasses import dataclass
from typing import Iterator

from lmrl.data.jsonl import write_episodes
from lmrl.data.stats import dataset_stats, format_stats_table
from lmrl.envs.base import Episode, Text
from lmrl.envs.maze import ACTIONS, GOAL, Cell, MazeEnv, optimal_directions, start_cells

DEFAULT_EPISODES = 1240  # the paper's Table 1 size (1.24k)
# Table 1's maze row; its avg return (-19.7) contradicts the code's -83 (see paper_tables.md).
PAPER_MAZE_ROW = {
    "size": 1240, "avg_length": 19.7, "std_length": 24.5,
    "success_rate": 0.11, "avg_return": -19.7, "std_return": 24.5,
}
NORMALIZATION_AVG_RETURN = -83.0
# Near misses an imperfect language policy produces; none of them parses as a move.
INVALID_UTTERANCES = (
    "move forward\n", "go left\n", "left\n", "move north\n", "Move up\n",
    "move  down\n", "move right.\n", "walk up\n", "move\n", "move left right\n",
)


@dataclass(frozen=True)
class MazeMix:
    """The behaviour mix; every field can be overridden through `generate(**mix)`."""

    # Share of `near_optimal` episodes: what filtered BC keeps (see the module docstring).
    near_optimal_frac: float = 0.07
    # Their random-move probability is drawn from U[0, near_optimal_noise].
    near_optimal_noise: float = 0.05
    # Share of `noisy` episodes: BFS towards the goal, random moves with U[noise_low, noise_high].
    noisy_frac: float = 0.18
    noise_low: float = 0.7
    noise_high: float = 0.9
    # The rest are `lost`: BFS towards decoy cells, random moves with U[0, lost_noise_high].
    lost_noise_high: float = 0.3
    # Non-optimal episodes say invalid text at a per-step rate drawn from U[0, invalid_max].
    invalid_max: float = 0.01

    def __post_init__(self):
        probabilities = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        bad = [name for name, p in probabilities.items() if not 0.0 <= p <= 1.0]
        if bad or self.near_optimal_frac + self.noisy_frac > 1.0 or self.noise_low > self.noise_high:
            raise ValueError(
                f"invalid maze mix {probabilities}: every value must lie in [0, 1], "
                "near_optimal_frac + noisy_frac <= 1 and noise_low <= noise_high"
            )


@dataclass(frozen=True)
class Behaviour:
    """One episode's scripted policy: its label, noise levels, and whether it heads for decoys."""

    label: str
    noise: float
    invalid_rate: float

    @property
    def lost(self) -> bool:
        return self.label == "lost"


def draw_behaviour(rng: random.Random, mix: MazeMix) -> Behaviour:
    u = rng.random()
    if u < mix.near_optimal_frac:
        return Behaviour("near_optimal", rng.uniform(0.0, mix.near_optimal_noise), 0.0)
    invalid_rate = rng.uniform(0.0, mix.invalid_max)
    if u < mix.near_optimal_frac + mix.noisy_frac:
        return Behaviour("noisy", rng.uniform(mix.noise_low, mix.noise_high), invalid_rate)
    return Behaviour("lost", rng.uniform(0.0, mix.lost_noise_high), invalid_rate)


def scripted_action(rng: random.Random, towards: list[str], behaviour: Behaviour) -> str:
    """Invalid text with prob `invalid_rate`, else a random move with prob `noise`, else a BFS move.

    `towards` lists the moves that shorten the path to the current target; when it is
    empty (a lost agent standing on its decoy) the move is random.
    """
    if rng.random() < behaviour.invalid_rate:
        return rng.choice(INVALID_UTTERANCES)
    if rng.random() < behaviour.noise or not towards:
        return rng.choice(ACTIONS)
    return f"move {rng.choice(towards)}\n"


class Navigator:
    """BFS move tables towards every free cell, built once per `generate` call."""

    def __init__(self):
        self.cells = start_cells()
        self.tables = {t: {c: optimal_directions(c, goal=t) for c in self.cells} for t in self.cells + [GOAL]}

    def target(self, rng: random.Random, behaviour: Behaviour, position: Cell, current: Cell | None) -> Cell:
        """The goal, or for a lost agent its decoy (a fresh one once the old one is reached)."""
        if not behaviour.lost:
            return GOAL
        return rng.choice(self.cells) if current is None or current == position else current


def play_episode(env: MazeEnv, rng: random.Random, start: Cell, behaviour: Behaviour, nav: Navigator) -> Episode:
    """Run one scripted episode from `start` and record every segment with its reward."""
    history, info = env.reset(options={"init_position": start})
    turns, rewards = list(history), [0.0] * len(history)
    target, done = None, False
    while not done:
        target = nav.target(rng, behaviour, env.position, target)
        action = scripted_action(rng, nav.tables[target][env.position], behaviour)
        result = env.step(action)
        turns += [Text(action, True), result.history[-1]]
        rewards += [float(result.reward), 0.0]
        done = result.terminated or result.truncated
    info = {
        "start": info["start"], "goal": info["goal"], "success": bool(result.info["success"]),
        "behaviour": behaviour.label, "noise": behaviour.noise, "invalid_rate": behaviour.invalid_rate,
    }
    return Episode(turns, rewards, True, info)


def make_mix(**overrides) -> MazeMix:
    """`MazeMix` with `overrides`; an unknown name is a TypeError that lists the valid ones."""
    valid = {f.name for f in dataclasses.fields(MazeMix)}
    unknown = set(overrides) - valid
    if unknown:
        raise TypeError(f"unknown maze mix parameter(s) {sorted(unknown)}; valid: {sorted(valid)}")
    return MazeMix(**overrides)


def generate(episodes: int = DEFAULT_EPISODES, seed: int = 0, fully_observed: bool = True, **mix) -> Iterator[Episode]:
    """`episodes` scripted maze episodes, deterministic in `seed` (see the module docstring).

    The mix is checked here, before the first episode is asked for, so a bad config fails at once.
    """
    return _episodes(episodes, seed, fully_observed, make_mix(**mix))


def _episodes(episodes: int, seed: int, fully_observed: bool, params: MazeMix) -> Iterator[Episode]:
    nav = Navigator()
    env = MazeEnv(fully_observed=fully_observed)
    for index in range(episodes):
        rng = random.Random(f"lmrl-maze:{seed}:{index}")
        start = rng.choice(nav.cells)
        yield play_episode(env, rng, start, draw_behaviour(rng, params), nav)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Generate the maze dataset as episode JSONL.")
    parser.add_argument("--episodes", type=int, default=DEFAULT_EPISODES)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--po", action="store_true", help="partially observed text (walls only)")
    parser.add_argument("--out", required=True, help="output JSONL path")
    args = parser.parse_args(argv)
    data = list(generate(args.episodes, args.seed, fully_observed=not args.po))
    write_episodes(args.out, data)
    print(f"wrote {len(data)} episodes to {args.out}")
    print(format_stats_table(dataset_stats(data), PAPER_MAZE_ROW))
    print(f"normalization dataset average return: {NORMALIZATION_AVG_RETURN}")


if __name__ == "__main__":
    main()
