"""Batched games of a two-player text game where either seat may be a language model or a scripted player.

`play_games(make_game, seats, seeds)` plays one game per entry of `seats` (a pair of actors: seat 0's, seat 1's) in
lockstep: each turn, the games whose mover is the same LM policy are answered in one batched `act` call, and a
scripted player (`lmrl.envs.two_player.Player`, called on the game) answers its own.  An LM sees what a `VersusEnv`
shows its seat, the seat's observation as one segment (every observation is the seat's whole view of the game).

Each recorded seat's game comes back as an `Episode` exactly as `VersusEnv` would have recorded it for that seat:
its observation before each of its moves, its move, the final observation, and its return on its last move.  That is
what self-play trains on (both seats of a game against itself) and what ratings count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence, Union

from lmrl.envs.base import Episode, Text
from lmrl.envs.two_player import Player, TwoPlayerGame
from lmrl.rollout.policy import Policy

# An LM policy (batched `act(histories)`) or a scripted player (`player(game) -> move`).
Actor = Union[Policy, Player]


@dataclass
class GameRecord:
    """One finished game: each player's return, who forfeited (None), and the episode of each recorded seat (None
    for a seat not recorded, or one that never moved)."""

    returns: tuple[float, float]
    forfeited_by: int | None
    episodes: tuple[Episode | None, Episode | None]


def is_lm(actor: Actor) -> bool:
    """Whether `actor` is a batched policy (has `act`) rather than a scripted player."""
    return hasattr(actor, "act")


def play_games(make_game: Callable[[], TwoPlayerGame], seats: Sequence[tuple[Actor, Actor]], seeds: Sequence[int],
               record: Sequence[tuple[bool, bool]] | None = None, info: Sequence[dict] | None = None
               ) -> list[GameRecord]:
    """One game per `seats[i]` from `seeds[i]`, all in lockstep (see the module docstring).  `record[i]` says which
    of game i's seats to keep as episodes (default both); `info[i]` is merged into each of its episodes' info (with
    `seat`, `returns` and `success`)."""
    n = len(seats)
    if len(seeds) != n or (record is not None and len(record) != n) or (info is not None and len(info) != n):
        raise ValueError("seats, seeds, record and info need one entry per game")
    record = record or [(True, True)] * n
    games = [make_game() for _ in range(n)]
    for game, seed in zip(games, seeds):
        game.reset(seed)
    turns: list[list[list[Text]]] = [[[], []] for _ in range(n)]
    invalid = [[0, 0] for _ in range(n)]
    while True:
        active = [i for i in range(n) if not games[i].done]
        if not active:
            break
        # the games each actor must answer this turn, in order of first appearance
        groups: dict[int, tuple[Actor, list[int]]] = {}
        for i in active:
            actor = seats[i][games[i].current_player()]
            groups.setdefault(id(actor), (actor, []))[1].append(i)
        for actor, idx in groups.values():
            observations = [games[i].observation(games[i].current_player()) for i in idx]
            if is_lm(actor):
                histories = [(Text(obs, False),) for obs in observations]
                if getattr(actor, "wants_legal_actions", False):
                    moves = actor.act(histories, legal=[games[i].legal_actions() for i in idx])
                else:
                    moves = actor.act(histories)
            else:
                moves = [actor(games[i]) for i in idx]
            for i, obs, move in zip(idx, observations, moves):
                seat = games[i].current_player()
                turns[i][seat] += [Text(obs, False), Text(move, True)]
                invalid[i][seat] += games[i].step(move).info["invalid"]
    out = []
    for i, game in enumerate(games):
        returns = game.returns()
        episodes = []
        for seat in (0, 1):
            if not record[i][seat] or not turns[i][seat]:
                episodes.append(None)
                continue
            segments = turns[i][seat] + [Text(game.observation(seat), False)]
            rewards = [0.0] * len(segments)
            rewards[-2] = returns[seat]  # on the seat's last move, as VersusEnv's step gives it
            meta = {**(info[i] if info else {}), "seat": seat, "returns": list(returns), "success": returns[seat] > 0,
                    "invalid": bool(invalid[i][seat])}
            episodes.append(Episode(segments, rewards, True, meta, invalid[i][seat]))
        out.append(GameRecord(returns, game.forfeited_by, (episodes[0], episodes[1])))
    return out
