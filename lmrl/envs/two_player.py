"""Two-player text games (tic-tac-toe, Kuhn poker), scripted players for them, and `play` to pit two players.

The contract (`TwoPlayerGame`): `reset(seed)` starts a game, `current_player()` (0 or 1) is the player to move,
`legal_actions()` lists its moves (each with its trailing newline), `step(action)` plays one move for it,
`observation(player)` is the text that player sees (every line ends with a newline), and once `done`,
`returns()` is each player's zero-sum result and `winner` the player with the positive one (None for a draw).

Rules of the text:

- an action is legal only when it equals one of `legal_actions()` exactly, newline included (as in the maze:
  `mark 1 1` cut off before its newline is not a move);
- any string is accepted by `step`.  **Invalid-move rule:** a string that is not a legal move (unparseable, or
  well-formed but illegal here, such as an occupied cell or `call` with no bet to call) forfeits the game at once:
  the player who sent it loses the game's `forfeit_loss`, the other wins it, and the step's `info["invalid"]` is
  True.  It is the most a game can be lost by, so no invalid move is ever cheaper than a legal one: 1 in tic-tac-toe
  (a loss) and 2 chips in Kuhn poker (a called bet; at 1, a fold's price, self-play learnt to forfeit instead of
  folding);
- tic-tac-toe: X (player 0) moves first; a move is `mark <row> <col>\\n` with rows 1-3 from the top and columns
  1-3 from the left (`mark 1 3\\n` is the top-right cell); a line of three wins (+1 / -1), a full board draws (0);
- Kuhn poker: cards J < Q < K, one to each player; each antes 1; player 0 acts first with `check\\n` or `bet\\n`
  (1 chip); facing a bet a player may `call\\n` or `fold\\n`; after check-check or a call the higher card wins the
  pot; a fold gives the pot to the bettor.  Returns are the chips won or lost (+-1 or +-2).  A player's
  observation shows only its own card.

The scripted players are callables `(game) -> action string`: `random_legal(rng)`, `minimax_tictactoe` (perfect
play) and `kuhn_equilibrium(alpha, rng)` (a Nash equilibrium of Kuhn poker).
"""

from __future__ import annotations

import abc
import functools
import random
from fractions import Fraction
from typing import Any, Callable, NamedTuple, Sequence

from lmrl.envs.base import History, StepResult, Text, TextEnv

Player = Callable[["TwoPlayerGame"], str]


class TurnResult(NamedTuple):
    """What `TwoPlayerGame.step` returns: each player's reward for the move (nonzero only on the move that ends the
    game, where it equals `returns()`), whether the game is over, and `info` (`invalid`, and `player` who moved)."""

    rewards: tuple[float, float]
    done: bool
    info: dict[str, Any]


class TwoPlayerGame(abc.ABC):
    """A finite, zero-sum, alternating two-player game played in text.  Subclasses keep the state and apply legal
    moves; this base applies the invalid-move rule and keeps the result."""

    # The most moves (legal ones) a game can last.
    max_length: int
    # What an invalid move costs its sender (the other player wins it): the most the game can be lost by.
    forfeit_loss: float = 1.0
    # Whether the returns sum to zero (an Elo ladder rates its players); a general-sum game scores each seat instead.
    zero_sum: bool = True

    def __init__(self):
        self.done = True
        self.forfeited_by: int | None = None
        self._returns: tuple[float, float] = (0.0, 0.0)

    @abc.abstractmethod
    def reset(self, seed: int | None = None) -> None:
        """Start a new game; `seed` fixes whatever the game deals at random."""

    @abc.abstractmethod
    def current_player(self) -> int:
        """The player to move: 0 or 1."""

    @abc.abstractmethod
    def legal_actions(self) -> list[str]:
        """The moves the player to move may make, each with its newline; empty once the game is over."""

    @abc.abstractmethod
    def observation(self, player: int) -> str:
        """The text `player` sees now: its role, what it may know of the position, the moves so far, the status."""

    @abc.abstractmethod
    def _apply(self, action: str) -> None:
        """Play a legal move for the player to move; call `_finish` if it ends the game."""

    def step(self, action: str) -> TurnResult:
        """Play `action` for the player to move.  Any string is accepted: one that is not exactly a legal move
        forfeits the game (-forfeit_loss for the mover, +forfeit_loss for the other, `info["invalid"]`)."""
        if self.done:
            raise RuntimeError("step() called on a finished game; call reset() first")
        player = self.current_player()
        move = self.canonical(action)
        invalid = move is None
        if invalid:
            self.forfeited_by = player
            self._finish(self.forfeit_returns(player))
        else:
            self._apply(move)
        rewards = self._returns if self.done else (0.0, 0.0)
        return TurnResult(rewards, self.done, {"invalid": invalid, "player": player})

    def forfeit_returns(self, player: int) -> tuple[float, float]:
        """The returns when `player` forfeits: -forfeit_loss for it, +forfeit_loss for the other (a zero-sum game; a
        general-sum one such as Car Dealer's duel overrides it)."""
        loss = float(self.forfeit_loss)
        return (-loss, loss) if player == 0 else (loss, -loss)

    def canonical(self, action: str) -> str | None:
        """The legal move `action` names, as `legal_actions()` writes it, or None: here only an exact match (a game
        with a lenient notation, such as chess's SAN, overrides it)."""
        return action if action in self.legal_actions() else None

    def returns(self) -> tuple[float, float]:
        """Each player's result (they sum to zero); (0, 0) while the game is on."""
        return self._returns

    @property
    def winner(self) -> int | None:
        """The player with the positive return once the game is over; None for a draw or a game still on."""
        if not self.done or self._returns[0] == 0:
            return None
        return 0 if self._returns[0] > 0 else 1

    def _start(self) -> None:
        """Clear the result for a new game (subclasses' `reset` call it)."""
        self.done, self.forfeited_by, self._returns = False, None, (0.0, 0.0)

    def _finish(self, returns: tuple[float, float]) -> None:
        self.done, self._returns = True, (float(returns[0]), float(returns[1]))

    def _status_line(self, player: int) -> str:
        """Whose move it is, or how the game ended, from `player`'s side."""
        if not self.done:
            return "Your move.\n" if self.current_player() == player else f"Player {1 - player} to move.\n"
        forfeit = ""
        if self.forfeited_by is not None:
            who = "You" if self.forfeited_by == player else f"Player {self.forfeited_by}"
            forfeit = f"{who} made an invalid move. "
        mine = self._returns[player]
        outcome = "A draw." if mine == 0 else f"You {'win' if mine > 0 else 'lose'} {abs(mine):g}."
        return f"Game over. {forfeit}{outcome}\n"


# --- tic-tac-toe -----------------------------------------------------------------------------------------------

MARKS = "XO"
EMPTY = "."
# The eight lines of three, as indices into the row-major board string.
LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
TICTACTOE_ACTIONS = tuple(f"mark {r} {c}\n" for r in (1, 2, 3) for c in (1, 2, 3))


def line_winner(board: str) -> str | None:
    """The mark ("X" or "O") that fills a line of the 9-character board, or None."""
    for a, b, c in LINES:
        if board[a] != EMPTY and board[a] == board[b] == board[c]:
            return board[a]
    return None


class TicTacToe(TwoPlayerGame):
    """3x3 tic-tac-toe: X (player 0) moves first; moves are `mark <row> <col>\\n`, rows and columns 1-3."""

    max_length = 9

    def __init__(self):
        super().__init__()
        self.board = EMPTY * 9
        self.moves: list[str] = []

    def reset(self, seed: int | None = None) -> None:
        """An empty board (the game has no chance: `seed` changes nothing)."""
        self._start()
        self.board, self.moves = EMPTY * 9, []

    def current_player(self) -> int:
        """X (0) after an even number of moves, O (1) after an odd one."""
        return len(self.moves) % 2

    def legal_actions(self) -> list[str]:
        """`mark r c\\n` for every empty cell, row-major."""
        if self.done:
            return []
        return [a for i, a in enumerate(TICTACTOE_ACTIONS) if self.board[i] == EMPTY]

    def observation(self, player: int) -> str:
        """Role, the moves so far, the full board (rows top to bottom, `.` for empty) and the status."""
        moves = ", ".join(f"{MARKS[i % 2]} {m.strip()}" for i, m in enumerate(self.moves)) or "none"
        rows = "".join(" ".join(self.board[r * 3 : r * 3 + 3]) + "\n" for r in range(3))
        return (
            f"You are {MARKS[player]} (player {player}) in tic-tac-toe. Moves are `mark <row> <col>`, "
            "rows 1-3 from the top, columns 1-3 from the left.\n"
            f"Moves so far: {moves}\n{rows}{self._status_line(player)}"
        )

    def _apply(self, action: str) -> None:
        cell = TICTACTOE_ACTIONS.index(action)
        self.board = self.board[:cell] + MARKS[self.current_player()] + self.board[cell + 1 :]
        self.moves.append(action)
        winner = line_winner(self.board)
        if winner is not None:
            self._finish((1.0, -1.0) if winner == "X" else (-1.0, 1.0))
        elif EMPTY not in self.board:
            self._finish((0.0, 0.0))


@functools.cache
def _negamax(board: str) -> int:
    """The value of `board` for the player to move under perfect play: 0 for a draw, +-(1 + empty cells left at
    the end) for a win or loss, so that sooner wins (and later losses) are preferred."""
    if line_winner(board) is not None:  # the player who just moved won
        return -(1 + board.count(EMPTY))
    if EMPTY not in board:
        return 0
    mark = MARKS[(9 - board.count(EMPTY)) % 2]
    return max(-_negamax(board[:i] + mark + board[i + 1 :]) for i in range(9) if board[i] == EMPTY)


def minimax_tictactoe(game: TicTacToe) -> str:
    """Perfect play: the first legal move (row-major) of the best value, so the choice is deterministic."""
    mark = MARKS[game.current_player()]

    def value(action: str) -> int:
        i = TICTACTOE_ACTIONS.index(action)
        return -_negamax(game.board[:i] + mark + game.board[i + 1 :])

    return max(game.legal_actions(), key=value)


# --- Kuhn poker ------------------------------------------------------------------------------------------------

CARDS = ("J", "Q", "K")
KUHN_ACTIONS = ("check\n", "bet\n", "call\n", "fold\n")


class KuhnPoker(TwoPlayerGame):
    """Kuhn poker: three cards, ante 1, one betting round of a 1-chip bet; player 0 acts first."""

    max_length = 3
    forfeit_loss = 2.0  # a called bet's pot: an invalid move never costs less than folding would

    def __init__(self):
        super().__init__()
        self.cards: tuple[str, str] = ("J", "Q")
        self.history: list[str] = []  # the moves so far, without newlines
        self._rng = random.Random()

    def reset(self, seed: int | None = None, cards: Sequence[str] | None = None) -> None:
        """Deal two different cards from the RNG (`seed` reseeds it, so a seed fixes the deal), or deal `cards`
        (player 0's, player 1's) as given."""
        if seed is not None:
            self._rng.seed(seed)
        dealt = tuple(cards) if cards is not None else tuple(self._rng.sample(CARDS, 2))
        if len(dealt) != 2 or dealt[0] == dealt[1] or not set(dealt) <= set(CARDS):
            raise ValueError(f"cards must be two different cards of {CARDS}, got {cards!r}")
        self._start()
        self.cards, self.history = dealt, []

    def current_player(self) -> int:
        """Player 0 acts on moves 1 and 3, player 1 on move 2."""
        return len(self.history) % 2

    def legal_actions(self) -> list[str]:
        """`call\\n`/`fold\\n` facing a bet, else `check\\n`/`bet\\n`."""
        if self.done:
            return []
        return ["call\n", "fold\n"] if "bet" in self.history else ["check\n", "bet\n"]

    def observation(self, player: int) -> str:
        """Role, the player's own card (never the other's), the betting so far and the status."""
        moves = ", ".join(f"player {i % 2} {m}" for i, m in enumerate(self.history)) or "none"
        legal = f"Legal moves: {', '.join(a.strip() for a in self.legal_actions())}.\n"
        return (
            f"You are player {player} in Kuhn poker. Cards rank J < Q < K; each player antes 1 and one bet of 1 "
            "may be made.\n"
            f"Your card: {self.cards[player]}\nBetting so far: {moves}\n{self._status_line(player)}"
            + (legal if not self.done and self.current_player() == player else "")
        )

    def _apply(self, action: str) -> None:
        self.history.append(action.strip())
        if self.history[-1] == "fold":
            bettor = self.history.index("bet") % 2  # a fold gives the pot (one ante won) to the player who bet
            self._finish((1.0, -1.0) if bettor == 0 else (-1.0, 1.0))
        elif self.history in (["check", "check"], ["bet", "call"], ["check", "bet", "call"]):
            stake = 2.0 if self.history[-1] == "call" else 1.0
            p0_wins = CARDS.index(self.cards[0]) > CARDS.index(self.cards[1])
            self._finish((stake, -stake) if p0_wins else (-stake, stake))


def kuhn_equilibrium_strategy(alpha: float | Fraction) -> Callable[[KuhnPoker], dict[str, Any]]:
    """The equilibrium family of Kuhn poker as a function from a position to {legal move: probability}.

    Pass `alpha` as a `Fraction` to get exact probabilities (the test evaluates the game value exactly)."""
    if not 0 <= alpha <= Fraction(1, 3):
        raise ValueError(f"alpha must lie in [0, 1/3], got {alpha}")
    third = Fraction(1, 3)
    # Probability of the aggressive move (bet, or call when facing a bet) at each (betting so far, card).
    # Kuhn (1950); e.g. Wikipedia "Kuhn poker", Southey et al. (2005): player 0 bets J with prob alpha, K with
    # prob 3 alpha, always checks Q; after check-bet it calls with Q with prob alpha + 1/3 (K always, J never).
    # Player 1's response is unique: K always bets/calls; Q checks after a check and calls a bet with prob 1/3;
    # J bets after a check with prob 1/3 and folds to a bet.  Player 0's expected value is -1/18 for every alpha.
    aggressive = {
        ((), "J"): alpha, ((), "Q"): 0, ((), "K"): 3 * alpha,
        (("check", "bet"), "J"): 0, (("check", "bet"), "Q"): alpha + third, (("check", "bet"), "K"): 1,
        (("check",), "J"): third, (("check",), "Q"): 0, (("check",), "K"): 1,
        (("bet",), "J"): 0, (("bet",), "Q"): third, (("bet",), "K"): 1,
    }

    def strategy(game: KuhnPoker) -> dict[str, Any]:
        """{legal move: probability} for the player to move, from its own card and the betting so far."""
        p = aggressive[(tuple(game.history), game.cards[game.current_player()])]
        passive, strong = ("fold\n", "call\n") if "bet" in game.history else ("check\n", "bet\n")
        return {passive: 1 - p, strong: p}

    return strategy


def kuhn_equilibrium(alpha: float | Fraction, rng: random.Random) -> Player:
    """A player that samples its moves from `kuhn_equilibrium_strategy(alpha)` with `rng`."""
    strategy = kuhn_equilibrium_strategy(alpha)

    def player(game: KuhnPoker) -> str:
        """One move drawn from the equilibrium probabilities."""
        probs = strategy(game)
        passive, strong = probs  # the keys: the passive move, then the aggressive one
        return strong if rng.random() < float(probs[strong]) else passive

    return player


# --- any game --------------------------------------------------------------------------------------------------


def random_legal(rng: random.Random) -> Player:
    """A player that picks uniformly among the legal moves with `rng`."""

    def player(game: TwoPlayerGame) -> str:
        """One legal move, uniformly at random."""
        return rng.choice(game.legal_actions())

    return player


def win_or_block(rng: random.Random) -> Player:
    """Tic-tac-toe's middle rung: complete a line of its own if it can, else block the opponent's, else a random
    legal move."""

    def player(game: TicTacToe) -> str:
        """One move: win, block, or random."""
        moves, me = game.legal_actions(), MARKS[game.current_player()]
        for mark in (me, "O" if me == "X" else "X"):  # its own win first, then the opponent's to block
            for move in moves:
                cell = TICTACTOE_ACTIONS.index(move)
                if line_winner(game.board[:cell] + mark + game.board[cell + 1 :]) == mark:
                    return move
        return rng.choice(moves)

    return player


def always_bet(game: KuhnPoker) -> str:
    """Kuhn poker's aggressive rung: bet, or call a bet, with any card."""
    return "call\n" if "call\n" in game.legal_actions() else "bet\n"


# Each game's factory and scripted players by name, each player built from its own RNG (`always_bet` and minimax
# ignore it): the opponents a `VersusEnv` task can name and the fixed rungs of `lmrl.ladder`.
GAMES: dict[str, type[TwoPlayerGame]] = {"tictactoe": TicTacToe, "kuhn": KuhnPoker}
SCRIPTED: dict[str, dict[str, Callable[[random.Random], Player]]] = {
    "tictactoe": {"random": random_legal, "win_or_block": win_or_block, "minimax": lambda rng: minimax_tictactoe},
    "kuhn": {"random": random_legal, "always_bet": lambda rng: always_bet,
             "equilibrium": lambda rng: kuhn_equilibrium(Fraction(1, 6), rng)},
}


def scripted_player(game: str, name: str, rng: random.Random) -> Player:
    """The scripted player `name` of `game`, drawing from `rng`; the error lists the valid names."""
    if game not in SCRIPTED:
        raise ValueError(f"unknown game {game!r}: choose one of {sorted(SCRIPTED)}")
    if name not in SCRIPTED[game]:
        raise ValueError(f"unknown {game} player {name!r}: choose one of {sorted(SCRIPTED[game])}")
    return SCRIPTED[game][name](rng)


def play(game: TwoPlayerGame, players: Sequence[Player], seed: int | None = None) -> tuple[float, float]:
    """Reset `game` with `seed`, let `players[0]` and `players[1]` move in turn until it ends, and return the
    returns.  The game's invalid-move rule ends it if a player answers with anything but a legal move."""
    game.reset(seed)
    while not game.done:
        game.step(players[game.current_player()](game))
    return game.returns()


# --- one seat as a single-agent text env ---------------------------------------------------------------------


class VersusEnv(TextEnv):
    """A `TwoPlayerGame` as a `TextEnv` for an agent in one seat against a fixed opponent (a scripted player, or a
    frozen policy wrapped as a `Player`): what trainers, `lmrl.evaluate` and an Elo ladder play.

    `opponent_rng`, when given, is the RNG the opponent draws from; `reset(seed)` reseeds it, so a seed fixes the
    whole game.  `reset(options={"seat": s})` seats the agent (0 moves first; default: alternating with the seed); the opponent
    moves until it is the agent's turn, and the history holds the agent's observation.  `step(action)` plays the
    agent's move (any string: an invalid one forfeits, `info["invalid"]`), then the opponent's replies; the reward is
    0 until the game ends, then the agent's return.  Each observation is the seat's whole view of the game, so a
    history window of 1 loses nothing."""

    def __init__(self, game: TwoPlayerGame, opponent: Player, opponent_rng: random.Random | None = None):
        self.game, self.opponent, self.opponent_rng = game, opponent, opponent_rng
        self.seat, self.history = 0, ()

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[History, dict]:
        """A new game (`seed` fixes its deal) with the agent in `options["seat"]`, else seat `seed % 2`."""
        options = options or {}
        self.seat = int(options.get("seat", (seed or 0) % 2))
        if self.seat not in (0, 1):
            raise ValueError(f"seat must be 0 or 1 (got {self.seat})")
        self.game.reset(seed)
        if self.opponent_rng is not None:  # the opponent's choices, like the deal, follow the seed
            self.opponent_rng.seed(f"opponent/{seed}")
        self._opponent_moves()
        self.history = (Text(self.game.observation(self.seat), False),)
        return self.history, {"seat": self.seat}

    def step(self, action: str) -> StepResult:
        """The agent's move, then the opponent's until the agent is to move again or the game is over."""
        if self.game.done:
            raise RuntimeError("step() called on a finished game; call reset() first")
        info = self.game.step(action).info
        self._opponent_moves()
        done = self.game.done
        reward = self.game.returns()[self.seat] if done else 0.0
        self.history = self.history + (Text(action, True), Text(self.game.observation(self.seat), False))
        out = {"invalid": info["invalid"], "seat": self.seat}
        if done:
            out.update(success=reward > 0, returns=list(self.game.returns()))
        return StepResult(self.history, reward, done, False, out)

    def legal_actions(self) -> list[str] | None:
        """The agent's legal moves now."""
        return self.game.legal_actions()

    def eval_reset_options(self) -> list[dict]:
        """Both seats."""
        return [{"seat": 0}, {"seat": 1}]

    def _opponent_moves(self) -> None:
        while not self.game.done and self.game.current_player() != self.seat:
            self.game.step(self.opponent(self.game))


class ScriptedVersusEnv(VersusEnv):
    """A `VersusEnv` of `game` (a key of `GAMES`) against its scripted player `opponent` (`SCRIPTED[game]`), whose
    RNG each reset reseeds: what `conf/task/tictactoe.yaml` and `conf/task/kuhn.yaml` build."""

    def __init__(self, game: str = "tictactoe", opponent: str = "random"):
        rng = random.Random()
        player = scripted_player(game, opponent, rng)  # names the valid games and players on a bad one
        super().__init__(GAMES[game](), player, rng)
