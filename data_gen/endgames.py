"""Chess Endgames: the KQ-vs-K training dataset and the 645-position evaluation set.

Training data: each episode starts from a uniformly random kQK position (Black king, White
queen and king; valid, White to move, nobody in check) that is not in the evaluation set,
and White is one of the agent families of `data_gen/chess.py` against the pinned opponent.
LMRL-Gym does not say which policies made its endgame data; Table 1 says 59% of episodes
end in a win, with an average return of 0.586 (so nearly no illegal moves and no losses:
a lone king cannot mate).  The default mix lands there: strong agents mate, and weak ones
(mostly random moves) drop the queen or stalemate.  Measured (seed 0, 600 games): 61% wins,
return 0.60, 13.3 +- 12.0 moves (Table 1: 59%, 0.586, 11.9 +- 12.0).  ~0.1 s per game on 2 cores with
`workers=2` (200 games in ~22 s, 1000 in ~100 s; the paper's 97.8k: ~2.7 hours).

Evaluation set (`python -m data_gen.endgames --build-eval-set`): the original kept 645
random positions on which "Stockfish does not find a mate in under 15 moves".  A full
search mates every KQ-K position in at most 10 moves, so that must have been a limited
search.  Our criterion: a Stockfish 15.1 `analyse` to depth 12 (Threads 1, Hash 16,
cleared before each search) reports no mate score.  About half of all random kQK positions
pass (645 of the first 1246 candidates): those whose mate lies beyond what a depth-12 search
sees (at that depth Stockfish reports mates of up to ~13 moves).  Building takes ~2 min with
`--workers 2`.  Candidates come from a seeded stream, in order, so the set is reproducible
(with Stockfish 15.1); the file names the command.

CLI: `python -m data_gen.endgames --episodes 1000 --seed 0 --workers 2 --out PATH`.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import multiprocessing
import random
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import chess
import chess.engine

from data_gen.chess import (
    AgentMix,
    AgentPlayer,
    check_run_params,
    draw_agent,
    make_mix,
    play_episode,
    run_indexed,
)
from lmrl.data.jsonl import write_episodes
from lmrl.data.stats import dataset_stats, format_stats_table
from lmrl.envs.base import Episode
from lmrl.envs.chess import (
    EVAL_POSITIONS_FILE,
    ChessEnv,
    eval_position_keys,
    get_engine,
    plain_mapping,
    position_key,
    random_endgame,
)

PAPER_ENDGAMES_ROW = {
    "size": 97_756, "avg_length": 11.9, "std_length": 12.0,
    "success_rate": 0.59, "avg_return": 0.586, "std_return": 0.492,
}
NORMALIZATION_AVG_RETURN = 0.586
# Strong agents (node budgets of 2000-8000 mate from any position, in ~9.5 moves) in 58% of
# episodes; weak ones move at random 50-100% of the time, drop the queen and win ~7%.
ENDGAME_MIX = AgentMix(
    strong_frac=0.58, strong_nodes_low=2000, strong_nodes_high=8000, strong_random_max=0.05,
    weak_nodes_low=20, weak_nodes_high=200, weak_random_low=0.5, weak_random_high=1.0,
    illegal_frac=0.05, illegal_max=0.02,
)
EVAL_SET_SIZE = 645
EVAL_DEPTH = 12
EVAL_ENGINE_OPTIONS = {"Threads": 1, "Hash": 16}


def training_start(rng: random.Random) -> str:
    """A random kQK start FEN outside the evaluation set (the first draw of an episode's RNG)."""
    return random_endgame(rng, "kQK", exclude=eval_position_keys()).fen()


def episode_rng(seed: int, index: int) -> random.Random:
    return random.Random(f"lmrl-endgames:{seed}:{index}")


def training_positions(n: int, seed: int = 0) -> list[str]:
    """The start FENs of the first `n` episodes of `generate(seed=seed)`, without playing them."""
    return [training_start(episode_rng(seed, i)) for i in range(n)]


def _endgame_episode(seed: int, mix: AgentMix, opponent: dict, attempts_per_task: int, index: int) -> Episode:
    rng = episode_rng(seed, index)
    start = training_start(rng)
    if attempts_per_task > 1:  # every attempt at a task starts from its first episode's position
        start = training_start(episode_rng(seed, index - index % attempts_per_task))
    agent = draw_agent(rng, mix)
    env = ChessEnv(start="endgame", opponent=opponent)
    return play_episode(env, AgentPlayer(agent, rng, env.opponent), {"fen": start})


def generate(
    episodes: int = 1000, seed: int = 0, workers: int = 1, opponent: Mapping[str, Any] | None = None,
    attempts_per_task: int = 1, **mix
) -> Iterator[Episode]:
    """`episodes` KQ-vs-K games from random non-evaluation positions, deterministic in (seed, index).  With
    `attempts_per_task` k > 1, each run of k consecutive games starts from one position (SWEET-RL compares
    attempts at one task)."""
    check_run_params(episodes, workers)
    if int(attempts_per_task) != attempts_per_task or attempts_per_task < 1:
        raise ValueError(f"attempts_per_task must be a positive integer, got {attempts_per_task}")
    params, opponent = make_mix(ENDGAME_MIX, **mix), plain_mapping(opponent or {})
    ChessEnv(start="endgame", opponent=opponent)  # validates the opponent settings
    play = functools.partial(_endgame_episode, seed, params, opponent, int(attempts_per_task))
    return run_indexed(play, episodes, workers)


def is_tricky(board: chess.Board, depth: int = EVAL_DEPTH) -> bool:
    """The evaluation-set criterion: a cleared depth-`depth` search reports no mate score."""
    engine = get_engine(None, EVAL_ENGINE_OPTIONS, slot="analysis")
    info = engine.analyse(board, chess.engine.Limit(depth=depth), game=object())
    return not info["score"].is_mate()


def _eval_candidate(seed: int, depth: int, index: int) -> str | None:
    board = random_endgame(random.Random(f"lmrl-endgames-eval:{seed}:{index}"), "kQK")
    return board.fen() if is_tricky(board, depth) else None


def build_eval_set(n: int = EVAL_SET_SIZE, seed: int = 0, depth: int = EVAL_DEPTH, workers: int = 1) -> tuple[list[str], int]:
    """The first `n` distinct candidates that pass `is_tricky`, and how many candidates were examined."""
    check = functools.partial(_eval_candidate, seed, depth)
    batch, kept, seen, examined = (64 * workers if workers > 1 else 1), [], set(), 0
    ctx = multiprocessing.get_context("forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn")
    pool = ctx.Pool(workers) if workers > 1 else None
    try:
        for start in itertools.count(0, batch):
            indices = range(start, start + batch)
            results = pool.map(check, indices) if pool else list(map(check, indices))
            for fen in results:
                examined += 1
                if fen is not None and position_key(chess.Board(fen)) not in seen:
                    seen.add(position_key(chess.Board(fen)))
                    kept.append(fen)
                    if len(kept) == n:
                        return kept, examined
    finally:
        if pool:
            pool.terminate()
    raise AssertionError("unreachable")


def write_eval_set(path: str | Path, fens: list[str], examined: int, seed: int, depth: int) -> None:
    header = [
        "# Chess Endgames evaluation positions: KQ vs K, White to move, one FEN per line.",
        "# Regenerate with: python -m data_gen.endgames --build-eval-set --workers 2",
        f"# Random kQK positions (seed {seed}) on which Stockfish 15.1 (Threads 1, Hash 16, cleared) analysing",
        f"# to depth {depth} finds no mate; kept the first {len(fens)} of {examined} examined.",
    ]
    Path(path).write_text("\n".join(header + fens) + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Generate the endgames dataset, or build the evaluation set.")
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--out", help="output JSONL path (dataset), or the FEN file with --build-eval-set")
    parser.add_argument("--build-eval-set", action="store_true", help=f"write the {EVAL_SET_SIZE} evaluation FENs")
    args = parser.parse_args(argv)
    if args.build_eval_set:
        out = args.out or EVAL_POSITIONS_FILE
        fens, examined = build_eval_set(EVAL_SET_SIZE, args.seed, EVAL_DEPTH, args.workers)
        write_eval_set(out, fens, examined, args.seed, EVAL_DEPTH)
        print(f"wrote {len(fens)} positions to {out} ({examined} examined, {len(fens) / examined:.1%} kept)")
        return
    if not args.out:
        parser.error("--out is required")
    data = list(generate(args.episodes, args.seed, workers=args.workers))
    write_episodes(args.out, data)
    print(f"wrote {len(data)} episodes to {args.out}")
    print(format_stats_table(dataset_stats(data), PAPER_ENDGAMES_ROW))
    print(f"normalization dataset average return: {NORMALIZATION_AVG_RETURN}")


if __name__ == "__main__":
    main()
