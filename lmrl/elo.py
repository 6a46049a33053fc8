"""An Elo ladder: Bradley-Terry ratings fitted to a set of games, bootstrap intervals, and a table of them.

Model: player a scores against player b with probability `expected_score(ra, rb) = 1 / (1 + 10**((rb - ra) / 400))`;
a draw counts as half a win for each side (Elo's score).  `fit_ratings` maximizes the likelihood of all games at
once (Newton's method on the log-odds), so the ratings are a function of the set of games: sequential Elo updates
would depend on the order in which they were played.

Prior: the likelihood alone sends a player who won every game to an infinite rating, so the fit adds a Gaussian
prior on each rating around the players' mean, of standard deviation `prior_sd` Elo points (1000 by default: it
carries the information of about an eighth of one game between equals, negligible once a player has a few games).
"""

from __future__ import annotations

import math
from typing import Hashable, Sequence

import numpy as np
import pandas as pd

# Rating points per unit of natural log-odds: 400 points is a factor 10 in the odds.
ELO_SCALE = 400 / math.log(10)
# The prior's standard deviation in Elo points (see the module docstring).
PRIOR_SD = 1000.0

Result = tuple[Hashable, Hashable, float]


def expected_score(ra: float, rb: float) -> float:
    """The score a player rated `ra` expects against one rated `rb` (400 points ahead: 10/11)."""
    return 1 / (1 + 10 ** ((rb - ra) / 400))


def fit_ratings(results: Sequence[Result], anchor: Hashable | None = None, anchor_rating: float = 1000.0,
                prior_sd: float = PRIOR_SD) -> dict[Hashable, float]:
    """Maximum-a-posteriori Elo ratings from `(player_a, player_b, score_a)` games, score_a in {0, 0.5, 1}.

    The `anchor` player is pinned at `anchor_rating`; without one the ratings average `anchor_rating`."""
    players, a, b, s = _encode(results)
    if anchor is not None and anchor not in players:
        raise ValueError(f"anchor {anchor!r} played no game")
    games, scores = _totals(len(players), a, b, s)
    theta = _fit_theta(games, scores, prior_precision=(ELO_SCALE / prior_sd) ** 2)
    return _to_ratings(players, theta, anchor, anchor_rating)


def bootstrap_intervals(results: Sequence[Result], n_boot: int = 200, seed: int = 0, level: float = 0.95,
                        anchor: Hashable | None = None, anchor_rating: float = 1000.0,
                        prior_sd: float = PRIOR_SD) -> dict[Hashable, tuple[float, float]]:
    """Percentile intervals of each player's rating over `n_boot` refits on the games resampled with replacement.

    A resample without the anchor is skipped; a player absent from a resample has no rating in it."""
    players, a, b, s = _encode(results)
    rng = np.random.default_rng(seed)
    samples: dict[Hashable, list[float]] = {p: [] for p in players}
    anchor_index = players.index(anchor) if anchor is not None else None
    for _ in range(n_boot):
        idx = rng.integers(0, len(s), len(s))
        games, scores = _totals(len(players), a[idx], b[idx], s[idx])
        present = games.sum(axis=1) > 0
        if anchor_index is not None and not present[anchor_index]:
            continue
        theta = _fit_theta(games, scores, prior_precision=(ELO_SCALE / prior_sd) ** 2)
        ratings = _to_ratings(players, theta, anchor, anchor_rating)
        for i in np.flatnonzero(present):
            samples[players[i]].append(ratings[players[i]])
    tail = 100 * (1 - level) / 2
    return {p: tuple(float(x) for x in np.percentile(v, [tail, 100 - tail])) for p, v in samples.items() if v}


def count_games(results: Sequence[Result]) -> dict[Hashable, int]:
    """How many games each player played."""
    counts: dict[Hashable, int] = {}
    for a, b, _ in results:
        counts[a] = counts.get(a, 0) + 1
        counts[b] = counts.get(b, 0) + 1
    return counts


def ladder_table(ratings: dict[Hashable, float], intervals: dict[Hashable, tuple[float, float]],
                 games_per_player: dict[Hashable, int]) -> pd.DataFrame:
    """One row per player (`player`, `rating`, `low`, `high`, `games`), best first, indexed by rank from 1."""
    rows = [
        {"player": p, "rating": r, "low": intervals.get(p, (math.nan,) * 2)[0],
         "high": intervals.get(p, (math.nan,) * 2)[1], "games": games_per_player.get(p, 0)}
        for p, r in ratings.items()
    ]
    table = pd.DataFrame(rows, columns=["player", "rating", "low", "high", "games"])
    table = table.sort_values("rating", ascending=False, kind="stable").reset_index(drop=True)
    table.index = pd.RangeIndex(1, len(table) + 1, name="rank")
    return table


def format_table(table: pd.DataFrame) -> str:
    """A `ladder_table` as a markdown table, ratings rounded to whole points."""
    lines = ["| rank | player | rating | interval | games |", "|---:|---|---:|---|---:|"]
    for rank, row in table.iterrows():
        interval = "n/a" if math.isnan(row["low"]) else f"[{row['low']:.0f}, {row['high']:.0f}]"
        lines.append(f"| {rank} | {row['player']} | {row['rating']:.0f} | {interval} | {row['games']} |")
    return "\n".join(lines) + "\n"


def _encode(results: Sequence[Result]) -> tuple[list, np.ndarray, np.ndarray, np.ndarray]:
    """The players (sorted, so the fit cannot depend on the order of games) and the games as index arrays."""
    for a, b, score in results:
        if a == b or score not in (0, 0.5, 1):
            raise ValueError(f"a game is two different players and a score of 0, 0.5 or 1; got {(a, b, score)!r}")
    if not results:
        raise ValueError("no games to rate")
    players = sorted({p for a, b, _ in results for p in (a, b)}, key=repr)
    index = {p: i for i, p in enumerate(players)}
    a = np.array([index[r[0]] for r in results])
    b = np.array([index[r[1]] for r in results])
    return players, a, b, np.array([float(r[2]) for r in results])


def _totals(n: int, a: np.ndarray, b: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`games[i, j]`: games between i and j (symmetric); `scores[i, j]`: i's total score in them.  Scores are
    multiples of 1/2, so these sums are exact in any order."""
    games, scores = np.zeros((n, n)), np.zeros((n, n))
    np.add.at(games, (a, b), 1.0)
    np.add.at(scores, (a, b), s)
    np.add.at(scores, (b, a), 1.0 - s)
    return games + games.T, scores


def _neg_log_posterior(theta: np.ndarray, scores: np.ndarray, prior_precision: float) -> float:
    """-sum over ordered pairs of scores[i, j] * log sigmoid(theta_i - theta_j) + prior_precision / 2 * |theta|^2."""
    diff = theta[:, None] - theta[None, :]
    return float(np.sum(scores * np.logaddexp(0.0, -diff)) + prior_precision / 2 * theta @ theta)


def _fit_theta(games: np.ndarray, scores: np.ndarray, prior_precision: float, tol: float = 1e-10) -> np.ndarray:
    """Newton's method with step halving on the (strictly convex) negative log posterior; theta in log-odds."""
    theta = np.zeros(len(games))
    loss = _neg_log_posterior(theta, scores, prior_precision)
    for _ in range(100):
        p = 1 / (1 + np.exp(theta[None, :] - theta[:, None]))  # p[i, j]: i's expected score against j
        grad = -(scores - games * p).sum(axis=1) + prior_precision * theta
        w = games * p * (1 - p)
        hessian = np.diag(w.sum(axis=1)) - w + prior_precision * np.eye(len(theta))
        step = np.linalg.solve(hessian, grad)
        t = 1.0
        while (new := _neg_log_posterior(theta - t * step, scores, prior_precision)) > loss and t > 1e-8:
            t /= 2
        theta, loss = theta - t * step, new
        if np.max(np.abs(t * step)) < tol:
            break
    return theta


def _to_ratings(players: list, theta: np.ndarray, anchor: Hashable | None, anchor_rating: float) -> dict:
    """Elo points, shifted so the anchor sits at `anchor_rating` (or, without one, their mean does)."""
    ratings = theta * ELO_SCALE
    shift = anchor_rating - (ratings[players.index(anchor)] if anchor is not None else ratings.mean())
    return {p: float(r + shift) for p, r in zip(players, ratings)}
