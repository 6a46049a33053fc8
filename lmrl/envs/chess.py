"""Chess and Chess Endgames: LMRL-Gym's FEN-in, SAN-out games against Stockfish.

Rules (faithful to `llm_rl_scripts/chess/env/env.py` unless noted):

- The agent plays White and sees only the current position: its FEN with every character
  space-separated (`r n b q k b n r / ... / R N B Q K B N R   w   K Q k q   -   0   1`).
  We end every observation with `\\n`, as the original's datasets do (its eval env did not).
- An action is SAN with its characters spaced (`N f 3\\n`).  The env drops one trailing
  newline and every space and parses with python-chess `parse_san` (lenient: `Ng1f3`, `e2e4`
  and a missing `+` are accepted).  Null moves and anything unparseable are illegal.  The
  original `.strip()`ped all surrounding whitespace; we accept one trailing newline only
  (the contract of every lmrl env), so `e4\n\n` or a tab is illegal here.
- A legal move that ends the game scores +1 if it mates, else 0 (draws are 0).  Otherwise
  the opponent replies: -1 if that mates the agent, else 0; the episode ends when
  python-chess `is_game_over()` (default rules: no claimed draws) says so.
- An illegal move scores -1 and changes nothing (the same observation comes back).
- Every call to `step` counts, illegal ones included; the call that takes the count past
  `max_moves` (400) ends the episode (`truncated=True`), so the worst return is -401.

`start="standard"` plays full games; `start="endgame"` draws a random endgame (LMRL-Gym's
`large_piece_random_endgame`: pieces on distinct uniform squares, valid, nobody in check)
that is not one of the 645 evaluation positions in `data/endgames_eval.txt`.

The opponent is the real Stockfish through `chess.engine`, pinned to full skill with a
fixed search limit (the original's "UCI_Elo 1200" was below Stockfish 15.1's minimum and
ignored).  Every search starts from a cleared engine (`ucinewgame`), so a position and its
move history always get the same reply, across engine restarts.  Depth 1 costs ~3 ms per
reply on an idle core (~4 ms with the machine loaded), most of it the clear and the IPC.
One engine process per (path, options) serves all envs of a process: `BatchedEnv` builds
hundreds of envs.
"""

from __future__ import annotations

import atexit
import functools
import os
import random
import shutil
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import chess
import chess.engine

from lmrl.envs.base import History, StepResult, Text, TextEnv

EVAL_POSITIONS_FILE = Path(__file__).resolve().parent / "data" / "endgames_eval.txt"
# The original's online endgame sampler draws these setups (lower case = Black, upper = White).
SETUPS = ("kQK", "kRK", "kQRK", "kRRK")
STARTS = ("standard", "endgame")
# Full strength, one thread, no randomness: determinism needs Threads 1 and a node/depth limit.
# Hash 1 MB: `ucinewgame` before each search clears it, and 16 MB doubles that cost (~1 ms).
DEFAULT_ENGINE_OPTIONS: dict[str, Any] = {"Threads": 1, "Hash": 1, "Skill Level": 20}
# Depth 1 (+ quiescence): takes hanging material and mates in one, misses two-move tactics.
DEFAULT_LIMIT: dict[str, Any] = {"depth": 1}
# `time` is accepted but makes replies depend on machine load: not reproducible.
LIMIT_KEYS = ("depth", "nodes", "time")
FALLBACK_STOCKFISH = "/usr/games/stockfish"
# Longer than any SAN python-chess accepts (`Qa1xb2=Q+` is 9), so the cap never rejects a move.
MAX_SAN_CHARS = 16


def fen_to_text(fen: str) -> str:
    """The observation: every FEN character separated by a space, then a newline."""
    return " ".join(fen) + "\n"


def move_to_text(san: str) -> str:
    """The action text of a SAN move: `Nf3` -> `N f 3\\n`."""
    return " ".join(san) + "\n"


def parse_move(board: chess.Board, action: str) -> chess.Move | None:
    """The legal move an action names, or None (unparseable, illegal, ambiguous, null move)."""
    body = action.removesuffix("\n")
    san = body.replace(" ", "")
    if not san or len(san) > MAX_SAN_CHARS or not san.isascii():
        return None
    try:
        move = board.parse_san(san)
    except ValueError:  # python-chess's InvalidMoveError, IllegalMoveError, AmbiguousMoveError
        return None
    return move if move else None  # a null move (`--`, `0000`, `Z0`, `@@@@`) is falsy


def position_key(board: chess.Board) -> str:
    """Piece placement and side to move: two FENs that differ only in move counters match."""
    return f"{board.board_fen()} {'w' if board.turn == chess.WHITE else 'b'}"


def board_from_fen(fen: str) -> chess.Board:
    """A board the agent can start from, or ValueError saying why not."""
    if not isinstance(fen, str):
        raise ValueError(f"the fen option must be a FEN string, got {fen!r}")  # noqa: TRY004 - bad options are ValueErrors
    try:
        board = chess.Board(fen)
    except ValueError as err:
        raise ValueError(f"invalid FEN {fen!r}: {err}") from None
    if board.turn != chess.WHITE:
        raise ValueError(f"FEN {fen!r} has Black to move; the agent plays White")
    if not board.is_valid():
        raise ValueError(f"FEN {fen!r} is not a legal position ({board.status()!r})")
    if board.is_game_over():
        raise ValueError(f"FEN {fen!r} is already over ({board.outcome().termination.name.lower()})")
    return board


def random_endgame(rng: random.Random, setup: str = "kQK", exclude: frozenset[str] = frozenset()) -> chess.Board:
    """A uniformly random valid `setup` position, White to move, nobody in check, not in `exclude`
    (a set of `position_key`s)."""
    if setup not in SETUPS:
        raise ValueError(f"unknown endgame setup {setup!r}; valid: {list(SETUPS)}")
    pieces = [chess.Piece.from_symbol(symbol) for symbol in setup]
    while True:
        board = chess.Board.empty()
        for square, piece in zip(rng.sample(chess.SQUARES, len(pieces)), pieces):
            board.set_piece_at(square, piece)
        if board.is_valid() and not board.is_check() and not board.is_game_over() and position_key(board) not in exclude:
            return board


@functools.lru_cache(maxsize=4)
def load_eval_positions(path: str | os.PathLike = EVAL_POSITIONS_FILE) -> tuple[str, ...]:
    """The evaluation FENs, one per line; `#` lines are comments."""
    lines = Path(path).read_text().splitlines()
    return tuple(line.strip() for line in lines if line.strip() and not line.startswith("#"))


@functools.lru_cache(maxsize=4)
def eval_position_keys(path: str | os.PathLike = EVAL_POSITIONS_FILE) -> frozenset[str]:
    return frozenset(position_key(chess.Board(fen)) for fen in load_eval_positions(path))


# ---------------------------------------------------------------------------------------
# Stockfish processes: one per (process, binary, options, slot), started lazily.

_ENGINES: dict[tuple, chess.engine.SimpleEngine] = {}
_ENGINES_LOCK = threading.Lock()
# python-chess cancels a running search when another command arrives: searches from several
# threads would interrupt each other and break determinism, so replies are serialized.
_SEARCH_LOCK = threading.Lock()


@functools.lru_cache(maxsize=8)
def find_stockfish(path: str | None = None) -> str:
    """The Stockfish binary: `path`, else `stockfish` on PATH, else /usr/games/stockfish (cached:
    it is asked on every engine call; a failure is not cached)."""
    if path:
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise FileNotFoundError(f"Stockfish binary {path!r} (opponent.path) does not exist or is not executable")
        return path
    found = shutil.which("stockfish") or (FALLBACK_STOCKFISH if os.access(FALLBACK_STOCKFISH, os.X_OK) else None)
    if found is None:
        raise FileNotFoundError(
            "Stockfish not found (not on PATH, not at /usr/games/stockfish): run `make install` "
            "(or `apt-get install stockfish`), or set the task's env.opponent.path"
        )
    return found


def get_engine(path: str | None, options: Mapping[str, Any], slot: str = "opponent") -> chess.engine.SimpleEngine:
    """The process-wide engine for (binary, options, slot), started on first use and restarted if it
    died.  `slot` keeps engines apart that must not share search state (data generation's agent)."""
    exe = find_stockfish(path)
    key = (os.getpid(), exe, tuple(sorted(options.items())), slot)
    with _ENGINES_LOCK:
        engine = _ENGINES.get(key)
        if engine is not None and engine.protocol.returncode.done():
            del _ENGINES[key]
            engine = None
        if engine is None:
            engine = _popen_daemon(exe)
            engine.configure(dict(options))
            _ENGINES[key] = engine
        return engine


def _popen_daemon(exe: str) -> chess.engine.SimpleEngine:
    """`SimpleEngine.popen_uci` called from a daemon thread, so the event-loop thread python-chess
    starts inherits daemon=True.  Otherwise the interpreter joins that thread at exit, before
    atexit handlers run, and an engine nobody quit keeps the process alive forever."""
    box: dict[str, Any] = {}

    def start() -> None:
        try:
            box["engine"] = chess.engine.SimpleEngine.popen_uci(exe)
        except Exception as err:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = err

    starter = threading.Thread(target=start, name="stockfish-start", daemon=True)
    starter.start()
    starter.join()
    if "error" in box:
        raise box["error"]
    return box["engine"]


def close_engines() -> None:
    """Quit every engine this process started (registered with atexit)."""
    with _ENGINES_LOCK:
        mine = [key for key in _ENGINES if key[0] == os.getpid()]
        for key in mine:
            engine = _ENGINES.pop(key)
            try:
                engine.quit()
            except (chess.engine.EngineError, TimeoutError, RuntimeError):
                engine.close()


atexit.register(close_engines)


def plain_mapping(value):
    """Mappings (an OmegaConf DictConfig from Hydra) -> plain dicts, recursively."""
    return {str(k): plain_mapping(v) for k, v in value.items()} if isinstance(value, Mapping) else value


def make_limit(limit: Mapping[str, Any]) -> chess.engine.Limit:
    unknown = set(limit) - set(LIMIT_KEYS)
    if unknown or not limit:
        raise ValueError(f"bad search limit {dict(limit)}: use one or more of {list(LIMIT_KEYS)}")
    return chess.engine.Limit(**limit)


class StockfishOpponent:
    """Stockfish at a fixed search limit, its state cleared before every search (reproducible)."""

    def __init__(self, path: str | None = None, options: Mapping | None = None, limit: Mapping | None = None):
        self.path = path
        self.options = {**DEFAULT_ENGINE_OPTIONS, **plain_mapping(options or {})}
        self.limit_config = plain_mapping(limit or DEFAULT_LIMIT)
        self.limit = make_limit(self.limit_config)

    def engine(self) -> chess.engine.SimpleEngine:
        """The process-wide Stockfish for this opponent's binary and options (`get_engine`)."""
        return get_engine(self.path, self.options)

    def reply(self, board: chess.Board) -> chess.Move:
        """The engine's move; a fresh `game` object makes python-chess send `ucinewgame` first."""
        with _SEARCH_LOCK:
            try:
                result = self.engine().play(board, self.limit, game=object())
            except chess.engine.EngineTerminatedError:
                result = self.engine().play(board, self.limit, game=object())  # the dead engine was replaced
        if result.move is None or result.move not in board.legal_moves:
            raise RuntimeError(f"Stockfish returned no legal move ({result.move}) in {board.fen()}")
        return result.move


class ChessEnv(TextEnv):
    """Chess (`start="standard"`) or Chess Endgames (`start="endgame"`) against an opponent.

    `opponent` is a mapping `{path, options, limit}` for Stockfish; `random_opponent=True`
    replies with a uniformly random legal move from the env's RNG instead (the original's
    option; fast, for tests and benchmarks).  `setups` are the endgame families `reset()`
    draws from; `eval_positions` is the evaluation FEN file (default: the committed 645).
    """

    def __init__(
        self,
        start: str = "standard",
        opponent: Mapping | None = None,
        random_opponent: bool = False,
        max_moves: int = 400,
        setups: Sequence[str] = ("kQK",),
        eval_positions: str | None = None,
    ):
        if start not in STARTS:
            raise ValueError(f"unknown start {start!r}; valid: {list(STARTS)}")
        bad = [s for s in setups if s not in SETUPS]
        if bad or not setups:
            raise ValueError(f"unknown endgame setup(s) {bad}; valid: {list(SETUPS)}")
        opponent = plain_mapping(opponent or {})
        unknown = set(opponent) - {"path", "options", "limit"}
        if unknown:
            raise ValueError(f"unknown opponent key(s) {sorted(unknown)}; valid: ['limit', 'options', 'path']")
        self.start = start
        self.opponent = StockfishOpponent(**opponent)
        self.random_opponent = random_opponent
        self.max_moves = max_moves
        self.setups = tuple(setups)
        self.eval_positions = eval_positions or str(EVAL_POSITIONS_FILE)
        self._rng = random.Random()
        self.board = chess.Board()
        self.num_moves = 0
        self.done = True
        self.history: History = ()

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[History, dict]:
        """Start from `options["fen"]` when given (the only option), else the standard position, or with
        `start="endgame"` a random endgame of `setups` that is not an evaluation position."""
        if seed is not None:
            self._rng.seed(seed)
        options = dict(options or {})
        unknown = set(options) - {"fen"}
        if unknown:
            raise ValueError(f"unknown reset option(s) {sorted(unknown)}; valid: ['fen']")
        if options.get("fen") is not None:
            self.board = board_from_fen(options["fen"])
        elif self.start == "standard":
            self.board = chess.Board()
        else:
            setup = self._rng.choice(self.setups)
            self.board = random_endgame(self._rng, setup, exclude=eval_position_keys(self.eval_positions))
        self.num_moves, self.done = 0, False
        fen = self.board.fen()
        self.history = (Text(fen_to_text(fen), False),)
        return self.history, {"fen": fen, "start_fen": fen}

    def step(self, action: str) -> StepResult:
        """One White move in spaced SAN, answered by the opponent (rewards in the module docstring: +1 for mating, -1
        for being mated or for an illegal move, else 0). `info` has the FEN, the opponent's reply and, at the end, the
        outcome."""
        if self.done:
            raise RuntimeError("step() called on a finished episode; call reset() first")
        self.num_moves += 1
        move = parse_move(self.board, action)
        reward, terminated, reply_san = -1.0, False, None
        if move is not None:
            self.board.push(move)
            if self.board.is_game_over():
                reward, terminated = (1.0 if self.board.is_checkmate() else 0.0), True
            else:
                reply = self._reply()
                reply_san = self.board.san(reply)
                self.board.push(reply)
                terminated = self.board.is_game_over()
                reward = -1.0 if self.board.is_checkmate() else 0.0
        truncated = not terminated and self.num_moves > self.max_moves
        self.done = terminated or truncated
        fen = self.board.fen()
        self.history = self.history + (Text(action, True), Text(fen_to_text(fen), False))
        success = terminated and reward == 1.0
        info = {"fen": fen, "success": success, "invalid": move is None, "opponent_move": reply_san}
        if self.done:
            info["outcome"] = self.board.outcome().termination.name.lower() if terminated else "max_moves"
        return StepResult(self.history, reward, terminated, truncated, info)

    def eval_reset_options(self) -> list[dict]:
        """The evaluation's start states: the standard position once, or each endgame evaluation position."""
        if self.start == "standard":
            return [{}]
        return [{"fen": fen} for fen in load_eval_positions(self.eval_positions)]

    def legal_actions(self) -> list[str]:
        """Every legal move of the current position as action text (empty once the game is over)."""
        if self.done:
            return []
        return [move_to_text(self.board.san(move)) for move in self.board.legal_moves]

    def benchmark_extras(self, plies: int = 60) -> dict:
        """The opponent's cost per move: it plays both sides for `plies` from the start state."""
        self.reset(seed=0)
        board, times = self.board.copy(), []
        for _ in range(plies):
            if board.is_game_over():
                board = self.board.copy()
            t0 = time.perf_counter()
            board.push(self.opponent.reply(board))
            times.append(time.perf_counter() - t0)
        return {"opponent_ms_per_move": 1000 * sum(times) / len(times), "opponent_ms_max": 1000 * max(times),
                "opponent_limit": self.opponent.limit_config}

    def _reply(self) -> chess.Move:
        if self.random_opponent:
            return self._rng.choice(list(self.board.legal_moves))
        return self.opponent.reply(self.board)
