"""Maze dataset generator: scripted episodes mixing BFS-optimal play with noise and bad text.

LMRL-Gym ships no generator for its maze data and does not say which policies made it; the
one firm number is the dataset average its score normalization uses (-83).  Each episode
draws one of three behaviours, and the default mix was tuned to land on that average:

- `near_optimal` (7%): the BFS move, replaced by a random move with probability <= 0.05.
- `noisy` (18%): heads for the goal, but moves at random with probability U[0.5, 0.9].
- `stuck` (75%): starts in one of the four dead ends, takes it for the goal and keeps
  pushing against its walls (random moves with probability <= 0.05, after which it walks
  back); it reaches the goal only by accident.
Imperfect behaviours also say invalid text (`go left`, `move forward`, ...) at a per-step
rate drawn from U[0, 0.01]; the env penalizes each with -4.

Why failures are *stuck in dead ends* rather than random walks: a fully observed policy
sees only its cell, so BC converges to the per-cell action frequencies of the data.  A
100-step horizon makes every failure cost >= 101, so an average of -83 needs ~75% failing
episodes, and they supply ~97% of all steps.  Failures spread over the maze (random walks,
agents chasing decoy cells) then set BC's action at every cell, and BC scores like a random
walker (measured: normalized 36-48 against 42 for uniform random moves).  Failures that sit
in the four dead-end leaves dominate only cells no other start passes through, so BC
imitates the goal-directed episodes elsewhere and lands well above the dataset average,
as the paper's BC did (58 > 50).  `python -m data_gen.maze --report` prints that estimate.

Why only 7% near-optimal: filtered BC keeps the top 10% by return, and a start next to the
goal scores better than any start far from it.  With a larger near-optimal slice the top
decile fills with short episodes and drops the 12-move corner starts.
A 100-step horizon makes every failure cost >= 101, so an average of -83 needs a success
rate of at least ~0.2 (ours is ~0.24; Table 1's 0.11 is inconsistent with -83).

Each episode draws from its own RNG seeded by `(seed, index)`, so the dataset is
deterministic and a smaller dataset is a prefix of a larger one.  The actions depend only
on the hidden position, so FO and PO datasets of one seed hold the same trajectories.

CLI: `python -m data_gen.maze --episodes 1240 --seed 0 [--po] --out PATH`.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Iterator

from data_gen.mix import with_overrides
from lmrl.data.jsonl import write_episodes
from lmrl.data.stats import dataset_stats, format_stats_table
from lmrl.envs.base import Episode, Text
from lmrl.envs.maze import (
    ACTIONS,
    GOAL,
    MOVES,
    Cell,
    MazeEnv,
    distances_to_goal,
    is_wall,
    neighbour,
    optimal_directions,
    parse_action,
    start_cells,
)

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
    noise_low: float = 0.5
    noise_high: float = 0.9
    # The rest are `stuck` in a dead end: random moves with U[0, stuck_noise_high].
    stuck_noise_high: float = 0.05
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
    """One episode's scripted policy: its label and noise levels."""

    label: str
    noise: float
    invalid_rate: float

    @property
    def stuck(self) -> bool:
        return self.label == "stuck"


def draw_behaviour(rng: random.Random, mix: MazeMix) -> Behaviour:
    u = rng.random()
    if u < mix.near_optimal_frac:
        return Behaviour("near_optimal", rng.uniform(0.0, mix.near_optimal_noise), 0.0)
    invalid_rate = rng.uniform(0.0, mix.invalid_max)
    if u < mix.near_optimal_frac + mix.noisy_frac:
        return Behaviour("noisy", rng.uniform(mix.noise_low, mix.noise_high), invalid_rate)
    return Behaviour("stuck", rng.uniform(0.0, mix.stuck_noise_high), invalid_rate)


def scripted_action(rng: random.Random, towards: list[str], walls: list[str], behaviour: Behaviour) -> str:
    """Invalid text with prob `invalid_rate`, else a random move with prob `noise`, else a BFS move.

    `towards` lists the moves that shorten the path to the current target; when it is
    empty (a stuck agent in its dead end) the agent pushes against one of its walls.
    """
    if rng.random() < behaviour.invalid_rate:
        return rng.choice(INVALID_UTTERANCES)
    if rng.random() < behaviour.noise:
        return rng.choice(ACTIONS)
    if not towards:
        return f"move {rng.choice(walls)}\n"
    return f"move {rng.choice(towards)}\n"


class Navigator:
    """BFS move tables towards every free cell and each cell's walls, built once per `generate` call."""

    def __init__(self):
        self.cells = start_cells()
        self.tables = {t: {c: optimal_directions(c, goal=t) for c in self.cells} for t in self.cells + [GOAL]}
        self.walls = {c: [d for d in MOVES if is_wall(neighbour(c, d))] for c in self.cells}
        self.dead_ends = [c for c in self.cells if len(self.walls[c]) == 3]

    def start(self, rng: random.Random, behaviour: Behaviour) -> Cell:
        """Uniform over the 25 start cells; a stuck agent starts in one of the dead ends."""
        return rng.choice(self.dead_ends if behaviour.stuck else self.cells)


def play_episode(env: MazeEnv, rng: random.Random, start: Cell, behaviour: Behaviour, nav: Navigator) -> Episode:
    """Run one scripted episode from `start` and record every segment with its reward."""
    history, info = env.reset(options={"init_position": start})
    turns, rewards = list(history), [0.0] * len(history)
    target, done = start if behaviour.stuck else GOAL, False
    while not done:
        pos = env.position
        action = scripted_action(rng, nav.tables[target][pos], nav.walls[pos], behaviour)
        result = env.step(action)
        turns += [Text(action, True), result.history[-1]]
        rewards += [float(result.reward), 0.0]
        done = result.terminated or result.truncated
    info = {
        "start": info["start"], "goal": info["goal"], "success": bool(result.info["success"]),
        "behaviour": behaviour.label, "noise": behaviour.noise, "invalid_rate": behaviour.invalid_rate,
    }
    return Episode(turns, rewards, True, info)


def marginal_policy_return(episodes: list[Episode], per_start: int = 20, seed: int = 1) -> float:
    """Mean return of the data's per-observation action frequencies, played on every start cell.

    That tabular policy is what a memoryless (FO) BC policy converges to, so this predicts
    BC's score in seconds, without training a model.
    """
    counts: dict[str, Counter] = defaultdict(Counter)
    for ep in episodes:
        for obs, act in zip(ep.turns[::2], ep.turns[1::2]):
            counts[obs.text][act.text] += 1
    rng, env, returns = random.Random(seed), MazeEnv(fully_observed=True), []
    for start in start_cells():
        for _ in range(per_start):
            history, _ = env.reset(options={"init_position": start})
            total, done = 0.0, False
            while not done:
                c = counts.get(history[-1].text)
                action = rng.choices(list(c), weights=list(c.values()))[0] if c else rng.choice(ACTIONS)
                history, reward, terminated, truncated, _ = env.step(action)
                total, done = total + reward, terminated or truncated
            returns.append(total)
    return sum(returns) / len(returns)


def tabular_ilql(episodes: list[Episode], tau: float = 0.95, gamma: float = 0.99 ** 3, sweeps: int = 500) -> dict:
    """ILQL's fixed point solved exactly on the data's FO transitions: Q(s, a) = mean over the data's
    (s, a) of r + gamma V(s') (0 after the last move), V(s) = the tau-expectile of Q(s, .) weighted by
    the data's action counts.  Move-level (gamma per move = 0.99 per token ** 3 tokens).  What a critic
    that fits could learn from this data: {"probe": share of start cells whose best move is BFS-optimal,
    "v": {cell: V}, "q": {cell: {direction: Q}}}."""
    moves: dict[str, Counter] = defaultdict(Counter)  # observation -> (action, reward, next obs or None) counts
    for ep in episodes:
        turns = ep.turns
        for i in range(1, len(turns), 2):
            last = i + 1 == len(turns) - 1
            moves[turns[i - 1].text][(turns[i].text, ep.rewards[i], None if last else turns[i + 1].text)] += 1
    counts = {state: Counter({a: 0 for a, _, _ in outcomes}) for state, outcomes in moves.items()}
    for state, outcomes in moves.items():
        for (action, _, _), n in outcomes.items():
            counts[state][action] += n
    v: dict[str, float] = defaultdict(float)
    q: dict[str, dict[str, float]] = {}
    for _ in range(sweeps):
        for state, outcomes in moves.items():
            totals = defaultdict(float)
            for (action, reward, nxt), n in outcomes.items():
                totals[action] += n * (reward + (gamma * v[nxt] if nxt is not None else 0.0))
            q[state] = {a: totals[a] / n for a, n in counts[state].items()}
            value = v[state]
            for _ in range(30):  # the expectile: a fixed point of its weighted mean
                w = {a: n * (tau if q[state][a] >= value else 1 - tau) for a, n in counts[state].items()}
                value = sum(w[a] * q[state][a] for a in w) / sum(w.values())
            v[state] = value
    env, cells = MazeEnv(fully_observed=True), start_cells()
    table = {c: env.reset(options={"init_position": c})[0][-1].text for c in cells}
    best = {c: max(q[table[c]], key=q[table[c]].get) for c in cells if table[c] in q}
    ok = sum(parse_action(best[c]) in optimal_directions(c) for c in best)
    return {"probe": ok / len(cells), "v": {c: v[table[c]] for c in cells},
            "q": {c: {parse_action(a) or f"invalid {a.strip()[:10]!r}": x for a, x in q.get(table[c], {}).items()}
                  for c in cells}}


def make_mix(**overrides) -> MazeMix:
    """`MazeMix` with `overrides`; an unknown name is a TypeError that lists the valid ones."""
    return with_overrides(MazeMix(), "maze", **overrides)


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
        behaviour = draw_behaviour(rng, params)
        yield play_episode(env, rng, nav.start(rng, behaviour), behaviour, nav)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Generate the maze dataset as episode JSONL.")
    parser.add_argument("--episodes", type=int, default=DEFAULT_EPISODES)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--po", action="store_true", help="partially observed text (walls only)")
    parser.add_argument("--out", required=True, help="output JSONL path")
    parser.add_argument("--report", action="store_true", help="also estimate FO BC's score (tabular marginal policy)")
    parser.add_argument("--tabular-ilql", type=float, default=None, metavar="TAU",
                        help="also solve ILQL's fixed point exactly on the FO data at expectile TAU (what a fitted critic gives)")
    args = parser.parse_args(argv)
    data = list(generate(args.episodes, args.seed, fully_observed=not args.po))
    write_episodes(args.out, data)
    print(f"wrote {len(data)} episodes to {args.out}")
    print(format_stats_table(dataset_stats(data), PAPER_MAZE_ROW))
    print(f"normalization dataset average return: {NORMALIZATION_AVG_RETURN}")
    if args.report:
        print(f"FO BC estimate (per-observation action frequencies): return {marginal_policy_return(data):.2f}")
    if args.tabular_ilql is not None and not args.po:
        solved = tabular_ilql(data, tau=args.tabular_ilql)
        dist = distances_to_goal()
        for cell, value in sorted(solved["v"].items(), key=lambda kv: dist[kv[0]]):
            print(f"  {cell} distance {dist[cell]:2d}  V {value:7.2f}  " +
                  " ".join(f"{d}:{x:7.2f}" for d, x in solved["q"][cell].items()))
        print(f"tabular ILQL (tau {args.tabular_ilql}): best move BFS-optimal at {solved['probe']:.0%} of start cells")


if __name__ == "__main__":
    main()
