"""An Elo ladder of players of a two-player game: a round robin, ratings with bootstrap intervals, a table.

    python -m lmrl.ladder --game tictactoe --games 200       # random, win-or-block, minimax
    python -m lmrl.ladder --game kuhn --games 200 --out results/ladder   # also <out>/kuhn.{csv,md}
    python -m lmrl.ladder --game chess --games 20            # random and Stockfish at three strengths

Every pair of players meets in `games` matches, and inside a match the seats alternate (tic-tac-toe's X, Kuhn poker's
first to act, chess's White), so no rating carries a seat's advantage.  A match is one game of tic-tac-toe or chess,
or 40 hands of Kuhn poker (`HANDS`: a single hand rewards winning often, not winning chips).  A match's result is its
first-named player's score: 1 if its total return is positive, 0.5 if zero, 0 if negative.  Ratings are anchored so
that `random` sits at 1000 (`lmrl.elo`).  The scripted players (`lmrl.envs.two_player.SCRIPTED`, chess's in
`lmrl.envs.chess_game`) are the fixed rungs a trained checkpoint is rated against (`rate`): random legal play, a
perfect, equilibrium or full-strength player, and middle rungs.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path
from typing import Callable, Sequence

import pandas as pd

from lmrl.elo import Result, bootstrap_intervals, count_games, fit_ratings, format_table, ladder_table
import lmrl.envs.chess_game  # noqa: F401 - registers chess and its Stockfish rungs
import lmrl.envs.dialogue.car_dealer_game  # noqa: F401 - registers car_dealer (general-sum: seat_scores, no ladder)
from lmrl.envs.two_player import GAMES, SCRIPTED, Player, TwoPlayerGame, play, scripted_player
from lmrl.rollout.two_player import Actor, play_games

ANCHOR = "random"


# Games a match lasts: one game of tic-tac-toe; 40 hands of Kuhn poker, whose single hand says little of a
# strategy's worth (the equilibrium gives up hands by folding, and wins chips over many).
HANDS = {"tictactoe": 1, "kuhn": 40, "chess": 1}


def players_for(game: str, seed: int) -> tuple[Callable[[], TwoPlayerGame], dict[str, Player]]:
    """The game's factory and its scripted rungs (`lmrl.envs.two_player.SCRIPTED`), each drawing from its own seeded
    RNG."""
    if game not in SCRIPTED:
        raise ValueError(f"unknown game {game!r}: choose one of {', '.join(SCRIPTED)}")
    if not GAMES[game].zero_sum:
        raise ValueError(f"{game} is general-sum: no Elo ladder rates its players (seat_scores scores each side "
                         "against its scripted players)")
    return GAMES[game], {name: scripted_player(game, name, random.Random(seed * 1000 + k))
                         for k, name in enumerate(SCRIPTED[game])}


def score(total: float) -> float:
    """A match's score for the player named first: 1, 0.5 or 0 as its total return is positive, zero or negative."""
    return 1.0 if total > 0 else 0.5 if total == 0 else 0.0


def round_robin(make_game: Callable[[], TwoPlayerGame], players: dict[str, Player], games: int, hands: int = 1,
                seed: int = 0) -> list[Result]:
    """`games` matches for every pair of players, half with each named first; a match is `hands` games, the named
    first player in the first seat on the even ones.  Returns (first, second, first's score) per match."""
    results, game, k = [], make_game(), 0
    names = sorted(players)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            for g in range(games):
                first, second = (a, b) if g % 2 == 0 else (b, a)
                total = 0.0
                for h in range(hands):
                    k += 1
                    seats = (players[first], players[second]) if h % 2 == 0 else (players[second], players[first])
                    returns = play(game, seats, seed * 1_000_003 + k)
                    total += returns[0] if h % 2 == 0 else returns[1]
                results.append((first, second, score(total)))
    return results


def matches_against(actor: Actor, name: str, make_game: Callable[[], TwoPlayerGame], rungs: dict[str, Actor],
                    games: int, hands: int = 1, seed: int = 0) -> list[Result]:
    """`games` matches of `actor` (an LM policy or a scripted player, called `name`) against each of `rungs` (scripted
    players or policies), played in one batch (`lmrl.rollout.two_player.play_games`): as in `round_robin`, half the matches name `actor` first and a
    match's hands alternate the seats.  Returns (first, second, first's score) per match."""
    plan, seats, seeds = [], [], []
    for r, rung in enumerate(sorted(rungs)):
        for g in range(games):
            first_is_actor = g % 2 == 0
            for h in range(hands):
                actor_seat = h % 2 if first_is_actor else 1 - h % 2
                pair = (actor, rungs[rung]) if actor_seat == 0 else (rungs[rung], actor)
                plan.append((rung, g, actor_seat))
                seats.append(pair)
                seeds.append(seed * 1_000_003 + 7_919 * (r + 1) + g * hands + h)
    records = play_games(make_game, seats, seeds, record=[(False, False)] * len(seats))
    totals: dict[tuple[str, int], float] = {}
    for (rung, g, actor_seat), rec in zip(plan, records):
        totals[(rung, g)] = totals.get((rung, g), 0.0) + rec.returns[actor_seat]
    results = []
    for (rung, g), total in totals.items():
        results += [(name, rung, score(total))] if g % 2 == 0 else [(rung, name, score(-total))]
    return results


def rate(actors: dict[str, Actor], game: str, games: int = 100, seed: int = 0, rung_games: int = 200,
         n_boot: int = 200) -> pd.DataFrame:
    """The rated table of `actors` (name -> an LM policy or a scripted player) on `game`'s ladder: each plays `games`
    matches against every scripted rung and every other actor, fitted together with the rungs' own round robin
    (`rung_games` matches a pair), so every rating shares the scale anchored at random = 1000."""
    make_game, rungs = players_for(game, seed)
    clash = set(actors) & set(rungs)
    if clash:
        raise ValueError(f"{sorted(clash)}: the ladder's rungs already use these names")
    results = round_robin(make_game, rungs, rung_games, HANDS[game], seed)
    names = list(actors)
    for i, name in enumerate(names):
        opponents = {**rungs, **{other: actors[other] for other in names[i + 1 :]}}
        results += matches_against(actors[name], name, make_game, opponents, games, HANDS[game], seed + i)
    return ladder(results, seed=seed, n_boot=n_boot)


def seat_scores(actor: Actor, game: str, opponent: str = "expert", games: int = 100, seed: int = 0,
                make_game: Callable[[], TwoPlayerGame] | None = None) -> dict:
    """`actor`'s mean return and its standard error in each seat against `game`'s scripted `opponent`, `games`
    games a seat: the measure of a general-sum game (Car Dealer's duel), whose returns no Elo rating summarises.
    Keys `seat<k>`, `seat<k>_se` and `seat<k>_positive` (the share of games with a positive return).  `make_game`:
    the game's factory with the task's settings (default: `GAMES[game]`)."""
    make_game = make_game or GAMES[game]
    opp = scripted_player(game, opponent, random.Random(f"{seed}/seat_scores/{opponent}"))
    seats = [(actor, opp)] * games + [(opp, actor)] * games
    record = [(True, False)] * games + [(False, True)] * games
    rng = random.Random(f"{seed}/seat_scores")
    seeds = [rng.randrange(2**31) for _ in range(games)] * 2
    played = play_games(make_game, seats, seeds, record)
    out = {}
    for seat in (0, 1):
        returns = [rec.returns[seat] for rec in played[seat * games:(seat + 1) * games]]
        mean = sum(returns) / games
        var = sum((r - mean) ** 2 for r in returns) / max(games - 1, 1)
        out.update({f"seat{seat}": mean, f"seat{seat}_se": (var / games) ** 0.5,
                    f"seat{seat}_positive": sum(r > 0 for r in returns) / games})
    return out


def ladder(results: Sequence[Result], seed: int = 0, n_boot: int = 200) -> pd.DataFrame:
    """The rated table of a set of games: ratings anchored at `random` = 1000, 95% bootstrap intervals."""
    ratings = fit_ratings(results, anchor=ANCHOR)
    intervals = bootstrap_intervals(results, n_boot=n_boot, seed=seed, anchor=ANCHOR)
    return ladder_table(ratings, intervals, count_games(results))


def main(argv: list[str] | None = None) -> int:
    """Play the round robin of `--game`'s scripted players, print the rated table (and write it under `--out`)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--game", default="tictactoe", help="tictactoe, kuhn or chess")
    parser.add_argument("--games", type=int, default=200, help="matches per pair of players (half with each first)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="a directory for <game>.csv and <game>.md")
    args = parser.parse_args(argv)
    make_game, players = players_for(args.game, args.seed)
    table = ladder(round_robin(make_game, players, args.games, HANDS[args.game], args.seed), seed=args.seed)
    text = format_table(table)
    print(text, end="")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        table.to_csv(args.out / f"{args.game}.csv")
        (args.out / f"{args.game}.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
