"""Chess as a two-player text game (`ChessGame`), with random play and Stockfish at several strengths as scripted
players: the chess rungs of the Elo ladder (`python -m lmrl.ladder --game chess`).

Importing this module registers `chess` in `lmrl.envs.two_player.GAMES` and `SCRIPTED` (`lmrl.ladder` imports it).

The text is the chess task's (`lmrl.envs.chess`), so a policy trained on `task=chess` plays it as it learnt:

- a player's observation is the position's FEN with its characters spaced, then a newline (the side to move is in
  the FEN); it is the same for both players;
- a move is SAN with its characters spaced (`N f 3\\n`), read leniently as the task reads it (`Ng1f3`, `e2e4`, a
  missing `+`); anything else forfeits the game, as in every two-player game here (`TwoPlayerGame.step`);
- a game ends by python-chess's rules (`is_game_over()`, no claimed draws): a mate scores +1 / -1, any other end
  0; after `max_length` plies (200) it is a draw.
"""

from __future__ import annotations

import chess

from lmrl.envs.chess import StockfishOpponent, fen_to_text, move_to_text, parse_move
from lmrl.envs.two_player import GAMES, SCRIPTED, Player, TwoPlayerGame, random_legal

# Plies before an unfinished game is called a draw (random play rarely ends sooner).
MAX_PLIES = 200


class ChessGame(TwoPlayerGame):
    """Chess from the standard position: White (player 0) moves first; SAN moves, spaced as the chess task writes
    them."""

    max_length = MAX_PLIES

    def __init__(self):
        super().__init__()
        self.board = chess.Board()

    def reset(self, seed: int | None = None) -> None:
        """The standard position (the game has no chance: `seed` changes nothing)."""
        self._start()
        self.board = chess.Board()

    def current_player(self) -> int:
        """White (0) or Black (1), as the board says."""
        return 0 if self.board.turn == chess.WHITE else 1

    def legal_actions(self) -> list[str]:
        """Every legal move as spaced SAN with its newline."""
        if self.done:
            return []
        return [move_to_text(self.board.san(m)) for m in self.board.legal_moves]

    def canonical(self, action: str) -> str | None:
        """The legal move `action` names in the chess task's lenient SAN, as `legal_actions()` writes it."""
        if self.done:
            return None
        move = parse_move(self.board, action)
        return None if move is None else move_to_text(self.board.san(move))

    def observation(self, player: int) -> str:
        """The position's spaced FEN (the chess task's observation), whoever asks."""
        return fen_to_text(self.board.fen())

    def _apply(self, action: str) -> None:
        self.board.push(parse_move(self.board, action))
        if self.board.is_checkmate():
            self._finish((1.0, -1.0) if self.board.turn == chess.BLACK else (-1.0, 1.0))
        elif self.board.is_game_over() or self.board.ply() >= MAX_PLIES:
            self._finish((0.0, 0.0))


def stockfish(skill: int, depth: int) -> Player:
    """Stockfish at `Skill Level` `skill` searching to `depth` (reproducible: cleared before every search)."""
    engine = StockfishOpponent(options={"Skill Level": skill}, limit={"depth": depth})

    def player(game: ChessGame) -> str:
        """Stockfish's move in spaced SAN."""
        return move_to_text(game.board.san(engine.reply(game.board)))

    return player


GAMES["chess"] = ChessGame
# Random play; Stockfish at its weakest skill searching one ply; at full skill and depth 1, the chess task's opponent;
# at full skill and depth 4.
SCRIPTED["chess"] = {
    "random": random_legal,
    "stockfish_s0_d1": lambda rng: stockfish(0, 1),
    "stockfish_d1": lambda rng: stockfish(20, 1),
    "stockfish_d4": lambda rng: stockfish(20, 4),
}
