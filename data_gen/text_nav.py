"""Text-Nav dataset generator: the original's `PartialWalkthroughAgent`, tuned to Table 1.

The original (`text_nav/dataset/collect_data.py`) draws per episode a set of "optimal
rooms": with probability 0.75 the four rooms off the corridor (office, bathroom, garden,
backyard), else the four on it (kitchen, dining room, living room, bedroom).  In an
optimal room it starts, with probability `follow_prob`, that room's walkthrough segment (the
expert's commands until it leaves the room: `take stale food from table` then `go west`
in the living room, `open fridge`, `insert ...`, `close fridge` in the kitchen with the
food, one `go ...` elsewhere); every other step is a uniformly random listed admissible
command.  We keep that policy, with the expert computed from the hidden state (where the
player and the stale food are, whether the fridge and chest are open) instead of a fixed
per-room table, so it also recovers food that random commands dropped elsewhere.

The original started a segment with probability 0.1 and collected 15 steps; with 0.1 none
of 400 of our episodes succeeds (0.12 at 0.5, 0.24 at 0.9).  `follow_prob=1.0` (always
follow in an optimal room) lands on Table 1: 2,500 episodes of seed 0 give success 0.259
and average return 0.259 (paper 0.26 / 0.258), average length 12.5 (12.2), return std
0.438 (0.424).  Table 1's length std (8.77) cannot hold under a 15-step cap (the std of
lengths in [1, 15] with mean 12.2 is at most 5.6; ours is 3.6); we keep the original's cap,
which matches the average length.

The policy reads only the hidden state and the listed commands (identical in FO and PO),
so FO and PO datasets of one seed hold the same action sequences.  Each episode draws
from its own RNG seeded by `(seed, index)`: the dataset is deterministic and a smaller
one is a prefix of a larger one.

CLI: `python -m data_gen.text_nav --episodes 2500 --seed 0 [--po] --out PATH`.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass

from data_gen.mix import with_overrides
from lmrl.data.jsonl import write_episodes
from lmrl.data.stats import dataset_stats, format_stats_table
from lmrl.envs.base import Episode, Text
from lmrl.envs.text_nav import ROOMS, HouseState, TextNavEnv, route

DEFAULT_EPISODES = 2500  # the paper's Table 1 size (2.5k)
PAPER_TEXT_NAV_ROW = {
    "size": 2500, "avg_length": 12.2, "std_length": 8.77,
    "success_rate": 0.26, "avg_return": 0.258, "std_return": 0.424,
}
FAR_ROOMS = ("office", "bathroom", "garden", "backyard")
NEAR_ROOMS = ("kitchen", "dining room", "living room", "bedroom")


@dataclass(frozen=True)
class WalkthroughMix:
    """The data policy's knobs; every field can be overridden through `generate(**mix)`."""

    # Probability that the optimal rooms are the four off the corridor (the original's 0.75).
    far_rooms_prob: float = 0.75
    # Probability of starting a room's walkthrough segment in an optimal room (original 0.1; tuned to Table 1).
    follow_prob: float = 1.0
    # Steps per episode (the original collected 15).
    max_steps: int = 15

    def __post_init__(self):
        if not (0.0 <= self.far_rooms_prob <= 1.0 and 0.0 <= self.follow_prob <= 1.0) or self.max_steps < 1:
            raise ValueError(
                f"invalid text-nav mix {dataclasses.asdict(self)}: probabilities must lie in [0, 1] "
                "and max_steps must be >= 1"
            )


def step_towards(state: HouseState, room: str, command: str) -> str:
    """`command` if the player is in `room`, else the first move of a shortest route there."""
    return command if state.room == room else route(state.room, room)[0]


def expert_command(state: HouseState) -> str | None:
    """The next command of a shortest win from `state` (None once the stale food is eaten)."""
    fridge_open = "fridge" in state.open
    if state.food_holder == "eaten":
        return None
    if state.food_holder == "fridge":
        return step_towards(state, "kitchen", "close fridge" if fridge_open else "open fridge")
    if state.food_holder == "inventory":
        return step_towards(state, "kitchen", "insert stale food into fridge" if fridge_open else "open fridge")
    if state.food_holder == "chest" and "chest" not in state.open:
        return step_towards(state, state.food_room, "open chest")
    source = "" if state.food_holder == "floor" else f" from {state.food_holder}"
    return step_towards(state, state.food_room, f"take stale food{source}")


def play_episode(env: TextNavEnv, rng: random.Random, start_room: str, optimal_rooms: tuple[str, ...],
                 mix: WalkthroughMix) -> Episode:
    """One episode of the partial-walkthrough policy, every segment recorded with its reward."""
    history, info = env.reset(options={"start_room": start_room})
    turns, rewards = list(history), [0.0] * len(history)
    segment_room, done = None, False
    while not done:
        state = env.state()
        if segment_room != state.room:
            segment_room = None  # a walkthrough segment ends when the player leaves its room
            if state.room in optimal_rooms and rng.random() < mix.follow_prob:
                segment_room = state.room
        expert = expert_command(state) if segment_room else None
        action = (expert or rng.choice(env.legal_actions()).rstrip("\n")) + "\n"
        result = env.step(action)
        turns += [Text(action, True), result.history[-1]]
        rewards += [float(result.reward), 0.0]
        done = result.terminated or result.truncated
    info = {"start_room": start_room, "optimal_rooms": "far" if optimal_rooms == FAR_ROOMS else "near",
            "success": bool(result.info["success"]), "failed": bool(result.info["failed"])}
    return Episode(turns, rewards, True, info)


def make_mix(**overrides) -> WalkthroughMix:
    """`WalkthroughMix` with `overrides`; an unknown name is a TypeError that lists the valid ones."""
    return with_overrides(WalkthroughMix(), "text-nav", **overrides)


def generate(episodes: int = DEFAULT_EPISODES, seed: int = 0, fully_observed: bool = True,
             cache_dir: str | None = None, **mix) -> Iterator[Episode]:
    """`episodes` scripted Text-Nav episodes, deterministic in `seed` (see the module docstring).

    The mix is checked here, before the first episode is asked for, so a bad config fails at once.
    """
    params = make_mix(**mix)
    env = TextNavEnv(fully_observed=fully_observed, max_steps=params.max_steps, cache_dir=cache_dir)
    return _episodes(env, episodes, seed, params)


def _episodes(env: TextNavEnv, episodes: int, seed: int, params: WalkthroughMix) -> Iterator[Episode]:
    for index in range(episodes):
        rng = random.Random(f"lmrl-text_nav:{seed}:{index}")
        optimal_rooms = FAR_ROOMS if rng.random() < params.far_rooms_prob else NEAR_ROOMS
        yield play_episode(env, rng, rng.choice(ROOMS), optimal_rooms, params)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Generate the Text-Nav dataset as episode JSONL.")
    parser.add_argument("--episodes", type=int, default=DEFAULT_EPISODES)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--po", action="store_true", help="partially observed text (no room names, no inventory)")
    parser.add_argument("--follow-prob", type=float, default=WalkthroughMix.follow_prob)
    parser.add_argument("--out", required=True, help="output JSONL path")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    data = list(generate(args.episodes, args.seed, fully_observed=not args.po, follow_prob=args.follow_prob))
    seconds = time.perf_counter() - start
    write_episodes(args.out, data)
    print(f"wrote {len(data)} episodes to {args.out} in {seconds:.1f} s ({1000 * seconds / len(data):.1f} ms/episode)")
    print(format_stats_table(dataset_stats(data), PAPER_TEXT_NAV_ROW))


if __name__ == "__main__":
    main()
