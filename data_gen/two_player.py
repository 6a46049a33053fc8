"""Datasets for the two-player games played from one seat (`task=tictactoe`, `task=kuhn`): a mixture player against
the task's scripted opponent, through `lmrl.envs.two_player.VersusEnv`.

Each of the agent's moves is, with probability `prob_expert`, the game's strong scripted player's (minimax for
tic-tac-toe, the Nash equilibrium for Kuhn poker), else a uniformly random legal move.  The seat alternates with the
episode (even episodes move first).  Every episode draws its deal, its opponent's choices and its player's coin flips
from seeds derived from `(game, seed, index)`, so the dataset is deterministic and a smaller one is a prefix of a
larger one.

CLI: `python -m data_gen.two_player --game tictactoe --out PATH` writes JSONL and prints its statistics; `--anchors`
prints the normalization anchors of the task's config instead: the game's lowest return, the recipe's dataset
average, and the strong player's mean return over the evaluation protocol.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Iterator

from lmrl.data.stats import dataset_stats, write_and_describe
from lmrl.envs.base import Episode
from lmrl.envs.two_player import SCRIPTED, ScriptedVersusEnv, VersusEnv, scripted_player

# The strong scripted player each game's mixture draws its expert moves from.
EXPERT = {"tictactoe": "minimax", "kuhn": "equilibrium"}
# The lowest return a game can give the agent (a lost Kuhn hand after a call costs 2 chips).
MIN_RETURN = {"tictactoe": -1.0, "kuhn": -2.0}
DEFAULT_EPISODES = 2000
# Games the strong player's mean return (the normalization maximum) is measured over, seats alternating.
ANCHOR_GAMES = 1000


def play_episode(env: VersusEnv, game: str, rng: random.Random, seed: int, seat: int, prob_expert: float) -> Episode:
    """One game from `seed` with the mixture player in `seat`, recorded segment by segment."""
    expert = scripted_player(game, EXPERT[game], rng)
    history, info = env.reset(seed=seed, options={"seat": seat})
    rewards, result = [0.0] * len(history), None
    while result is None or not (result.terminated or result.truncated):
        moves = env.legal_actions()
        action = expert(env.game) if rng.random() < prob_expert else rng.choice(moves)
        result = env.step(action)
        rewards += [result.reward, 0.0]
    return Episode(list(result.history), rewards, True, {**info, **result.info})


def generate(episodes: int = DEFAULT_EPISODES, seed: int = 0, game: str = "tictactoe", opponent: str = "random",
             prob_expert: float = 0.3) -> Iterator[Episode]:
    """`episodes` mixture-player games of `game` against its scripted `opponent`, deterministic in `seed` (see the
    module docstring).  Parameters are checked before the first episode is asked for."""
    if not 0.0 <= prob_expert <= 1.0:
        raise ValueError(f"prob_expert must lie in [0, 1], got {prob_expert}")
    if int(episodes) != episodes or episodes < 0:
        raise ValueError(f"episodes must be a non-negative integer, got {episodes}")
    env = ScriptedVersusEnv(game, opponent)  # names the valid games and opponents on a bad one
    return _episodes(env, game, int(episodes), seed, float(prob_expert))


def _episodes(env: VersusEnv, game: str, episodes: int, seed: int, prob_expert: float) -> Iterator[Episode]:
    for index in range(episodes):
        rng = random.Random(f"lmrl-two-player:{game}:{seed}:{index}")
        yield play_episode(env, game, rng, rng.randrange(2**31), index % 2, prob_expert)


def expert_return(game: str, opponent: str = "random", games: int = ANCHOR_GAMES) -> float:
    """The strong player's mean return over `games` games against `opponent`, seats alternating (the normalization
    maximum)."""
    env, rng, total = ScriptedVersusEnv(game, opponent), random.Random(0), 0.0
    for k in range(games):
        total += play_episode(env, game, rng, k, k % 2, 1.0).total_return
    return total / games


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Generate a two-player game's one-seat dataset as episode JSONL.")
    parser.add_argument("--game", default="tictactoe", choices=sorted(SCRIPTED))
    parser.add_argument("--opponent", default="random")
    parser.add_argument("--episodes", type=int, default=DEFAULT_EPISODES)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--prob-expert", type=float, default=0.3)
    parser.add_argument("--out", help="output JSONL path (required unless --anchors)")
    parser.add_argument("--anchors", action="store_true", help="print the task's normalization anchors and exit")
    args = parser.parse_args(argv)

    def episodes() -> Iterator[Episode]:
        return generate(args.episodes, args.seed, args.game, args.opponent, args.prob_expert)

    if args.anchors:
        stats = dataset_stats(episodes())
        print(f"{args.game} vs {args.opponent}: min {MIN_RETURN[args.game]}, avg {stats['avg_return']:.4f} (the "
              f"dataset's mean return), max {expert_return(args.game, args.opponent):.4f} ({EXPERT[args.game]}'s "
              f"mean over {ANCHOR_GAMES} games)")
        return
    if not args.out:
        parser.error("--out is required unless --anchors is given")
    write_and_describe(args.out, episodes)


if __name__ == "__main__":
    main()
