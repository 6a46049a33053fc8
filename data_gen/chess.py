"""Chess dataset generator: Stockfish agents of several strengths (White) against the pinned opponent.

LMRL-Gym's README says its chess data is "Stockfish 15.1 of various strengths vs Stockfish
elo 1200"; no script or settings survive.  Table 1 gives the numbers to aim at: 60% wins and
an average return of 0.21, so about 39% losses and almost no draws.  Each episode draws an
agent from one of two families, and the default mix was tuned to land on those numbers:

- `strong`: Stockfish with a per-episode node budget (log-uniform), plus a small per-move
  probability of a uniformly random legal move.  It beats the depth-1 opponent.
- `weak`: a small node budget and a large random-move probability; it loses most games.
Some episodes also say an illegal near-miss of a legal move (`N f 4` where only `N f 3` is
legal, a lower-case piece letter, ...) at a small per-move rate, so the data shows the -1
penalty: the env answers with the same position and the agent then plays a real move.

Episodes are played through `ChessEnv`, so their text is exactly what the env produces.
The agent's engine is a second Stockfish process, cleared once per episode (the opponent's
is cleared before every search), so an episode depends only on (seed, index): the dataset is
the same for any `workers`, and a smaller one is a prefix of a larger one.

Measured (seed 0, 500 games): 63% wins, average return 0.25, 41 moves per game (Table 1:
60%, 0.21, 46.7).  Strong games take ~48 moves, weak ones ~25; ~3% of episodes say illegal text.

Cost: two engine calls per move, ~0.33 CPU-s per game; 200 games take ~47 s on 2 cores with
`workers=2` (500: ~2-2.7 min), so the paper's 625k games would take ~40 hours there.

CLI: `python -m data_gen.chess --episodes 500 --seed 0 --workers 2 --out PATH`.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import multiprocessing
import random
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import chess
import chess.engine

from data_gen.mix import with_overrides
from lmrl.data.jsonl import write_episodes
from lmrl.data.stats import dataset_stats, format_stats_table
from lmrl.envs.base import Episode, Text
from lmrl.envs.chess import (
    ChessEnv,
    StockfishOpponent,
    get_engine,
    move_to_text,
    parse_move,
    plain_mapping,
)

PAPER_CHESS_ROW = {
    "size": 625_000, "avg_length": 46.7, "std_length": 18.16,
    "success_rate": 0.60, "avg_return": 0.210, "std_return": 0.970,
}
NORMALIZATION_AVG_RETURN = 0.21


PROBABILITIES = ("strong_frac", "strong_random_max", "weak_random_low", "weak_random_high", "illegal_frac", "illegal_max")


@dataclass(frozen=True)
class AgentMix:
    """The agent families of a dataset; every field can be overridden through `generate(**mix)`."""

    # Share of `strong` episodes (they win ~92%; weak ones ~0%): 0.66 gives Table 1's 60% wins.
    strong_frac: float = 0.66
    # Their node budget is log-uniform in [strong_nodes_low, strong_nodes_high] ...
    strong_nodes_low: int = 500
    strong_nodes_high: int = 2000
    # ... and their random-move probability uniform in [0, strong_random_max].
    strong_random_max: float = 0.005
    # `weak` episodes: node budget log-uniform in [weak_nodes_low, weak_nodes_high] ...
    weak_nodes_low: int = 20
    weak_nodes_high: int = 100
    # ... and random-move probability uniform in [weak_random_low, weak_random_high].
    weak_random_low: float = 0.3
    weak_random_high: float = 0.7
    # Share of episodes that say illegal text, at a per-move rate uniform in [0, illegal_max].
    illegal_frac: float = 0.1
    illegal_max: float = 0.02

    def __post_init__(self):
        values = dataclasses.asdict(self)
        bad = [k for k in PROBABILITIES if not 0.0 <= values[k] <= 1.0]
        nodes_ok = 1 <= self.strong_nodes_low <= self.strong_nodes_high and 1 <= self.weak_nodes_low <= self.weak_nodes_high
        if bad or not nodes_ok or self.weak_random_low > self.weak_random_high:
            raise ValueError(
                f"invalid agent mix {values}: probabilities in [0, 1], 1 <= *_nodes_low <= *_nodes_high, "
                "weak_random_low <= weak_random_high"
            )


@dataclass(frozen=True)
class Agent:
    """One episode's White player."""

    label: str
    nodes: int
    random_move: float
    illegal: float


def make_mix(defaults: AgentMix = AgentMix(), **overrides) -> AgentMix:
    """`defaults` with `overrides`; an unknown name is a TypeError that lists the valid ones."""
    return with_overrides(defaults, "agent", **overrides)


def log_uniform(rng: random.Random, low: int, high: int) -> int:
    return round(math.exp(rng.uniform(math.log(low), math.log(high))))


def draw_agent(rng: random.Random, mix: AgentMix) -> Agent:
    if rng.random() < mix.strong_frac:
        label, nodes = "strong", log_uniform(rng, mix.strong_nodes_low, mix.strong_nodes_high)
        random_move = rng.uniform(0.0, mix.strong_random_max)
    else:
        label, nodes = "weak", log_uniform(rng, mix.weak_nodes_low, mix.weak_nodes_high)
        random_move = rng.uniform(mix.weak_random_low, mix.weak_random_high)
    illegal = rng.uniform(0.0, mix.illegal_max) if rng.random() < mix.illegal_frac else 0.0
    return Agent(label, nodes, random_move, illegal)


def near_miss(rng: random.Random, board: chess.Board) -> str:
    """Illegal text that looks like a move: a legal SAN with a wrong square or a wrong-case piece."""
    sans = sorted(board.san(m) for m in board.legal_moves)
    for _ in range(20):
        san = rng.choice(sans)
        kind = rng.randrange(3)
        if kind == 0:  # wrong destination square
            square = chess.square_name(rng.randrange(64))
            core = san.rstrip("+#")
            candidate = core[:-2] + square if core[-2:-1].isalpha() and core[-1].isdigit() else core + square
        elif kind == 1:  # piece letter in lower case, or a pawn given a piece letter
            candidate = san[0].lower() + san[1:] if san[0].isupper() else rng.choice("NBRQK") + san
        else:  # the king to a random square
            candidate = "K" + chess.square_name(rng.randrange(64))
        if parse_move(board, candidate) is None:
            return move_to_text(candidate)
    return move_to_text("Ke9")


class AgentPlayer:
    """Chooses White's moves: illegal text, a random legal move, or Stockfish at `agent.nodes`."""

    def __init__(self, agent: Agent, rng: random.Random, opponent: StockfishOpponent):
        self.agent, self.rng = agent, rng
        self.engine = get_engine(opponent.path, opponent.options, slot="agent")
        self.limit = chess.engine.Limit(nodes=agent.nodes)
        # One `game` per episode: python-chess clears the agent's engine once, at the first move.
        self.game = object()

    def action(self, board: chess.Board) -> str:
        if self.agent.illegal and self.rng.random() < self.agent.illegal:
            return near_miss(self.rng, board)
        if self.rng.random() < self.agent.random_move:
            move = self.rng.choice(list(board.legal_moves))
        else:
            move = self.engine.play(board, self.limit, game=self.game).move
        return move_to_text(board.san(move))


def play_episode(env: ChessEnv, player: AgentPlayer, options: dict) -> Episode:
    """One game from `options` (reset options); every segment recorded with its reward."""
    history, info = env.reset(options=options)
    turns, rewards = list(history), [0.0] * len(history)
    done, result = False, None
    while not done:
        action = player.action(env.board)
        result = env.step(action)
        turns += [Text(action, True), result.history[-1]]
        rewards += [float(result.reward), 0.0]
        done = result.terminated or result.truncated
    agent = player.agent
    info = {
        "start_fen": info["start_fen"], "success": bool(result.info["success"]), "outcome": result.info["outcome"],
        "agent": agent.label, "nodes": agent.nodes, "random_move": agent.random_move, "illegal": agent.illegal,
    }
    return Episode(turns, rewards, True, info)


def run_indexed(play_one: Callable[[int], Episode], episodes: int, workers: int) -> Iterator[Episode]:
    """`play_one(i)` for i in range(episodes), in order, on `workers` processes.

    Each worker starts its own engines (the cache is per process), so the output equals
    `workers=1`'s.  forkserver avoids forking a parent that runs engine or torch threads.
    """
    if workers == 1:
        yield from map(play_one, range(episodes))
        return
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    with ctx.Pool(workers) as pool:
        yield from pool.imap(play_one, range(episodes), chunksize=4)


def check_run_params(episodes: int, workers: int) -> None:
    if episodes < 0 or workers < 1:
        raise ValueError(f"need episodes >= 0 and workers >= 1, got episodes={episodes}, workers={workers}")


def _chess_episode(seed: int, mix: AgentMix, opponent: dict, index: int) -> Episode:
    rng = random.Random(f"lmrl-chess:{seed}:{index}")
    agent = draw_agent(rng, mix)
    env = ChessEnv(start="standard", opponent=opponent)
    return play_episode(env, AgentPlayer(agent, rng, env.opponent), {})


def generate(
    episodes: int = 500, seed: int = 0, workers: int = 1, opponent: Mapping[str, Any] | None = None, **mix
) -> Iterator[Episode]:
    """`episodes` full games, deterministic in (seed, index) (see the module docstring).

    `opponent` is the env's `{path, options, limit}` (the config passes `env.opponent`).
    Parameters are checked here, before the first game is asked for.
    """
    check_run_params(episodes, workers)
    params, opponent = make_mix(**mix), plain_mapping(opponent or {})
    ChessEnv(opponent=opponent)  # validates the opponent settings
    return run_indexed(functools.partial(_chess_episode, seed, params, opponent), episodes, workers)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Generate the chess (full games) dataset as episode JSONL.")
    parser.add_argument("--episodes", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--out", required=True, help="output JSONL path")
    args = parser.parse_args(argv)
    data = list(generate(args.episodes, args.seed, workers=args.workers))
    write_episodes(args.out, data)
    print(f"wrote {len(data)} episodes to {args.out}")
    print(format_stats_table(dataset_stats(data), PAPER_CHESS_ROW))
    print(f"normalization dataset average return: {NORMALIZATION_AVG_RETURN}")


if __name__ == "__main__":
    main()
