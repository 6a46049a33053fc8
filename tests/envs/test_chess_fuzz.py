"""Fuzz ChessEnv.step with >= 10,000 strings: never raise; either -1 with nothing changed, or
(only when python-chess itself parses the text as a legal non-null move) exactly that move played."""

import random

import chess
import pytest

from lmrl.envs.chess import ChessEnv, find_stockfish
from tests.helpers import random_unicode

ALPHABETS = [
    "abcdefghNBRQKOx+#=-0123456789 \n",
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ \n\t\r",
    " \n\t\r\x00\x0b\x0c",
    "éß漢字🙂Ωж\u200b\u202e\ufeff١٢٣ａｂｃ８",
]
FIXED = ["", "\n", "\n\n", " ", "--", "- -\n", "0000", "Z0", "@@@@", "e4\n\n", "\ne4", "e4\r\n", "e\t4", "x" * 10_000,
         "e 4\n" * 2500, "O-O-O-O", "Nf3,e4", "e4 e5"]


def near_miss(rng: random.Random, board: chess.Board) -> str:
    """A legal move's SAN, spaced or not, then damaged: case, squares, piece letters, extra characters."""
    san = board.san(rng.choice(list(board.legal_moves)))
    op = rng.randrange(8)
    if op == 0:
        san = san.swapcase() if rng.random() < 0.5 else san.lower()
    elif op == 1:
        i = rng.randrange(len(san))
        san = san[:i] + rng.choice("abcdefgh12345678") + san[i + 1:]
    elif op == 2:
        san = san[1:] if san[0] in "NBRQK" else rng.choice("NBRQKP") + san
    elif op == 3:
        i = rng.randrange(len(san) + 1)
        san = san[:i] + rng.choice("x+#=-!?. \n0Oo") + san[i:]
    elif op == 4:
        move = rng.choice(list(board.legal_moves))
        san = move.uci() if rng.random() < 0.5 else board.lan(move)
    elif op == 5:
        san = san.rstrip("+#") + rng.choice(["", "+", "#", "++"])
    elif op == 6:
        san = san + san
    spaced = " ".join(san) if rng.random() < 0.7 else san
    return spaced + rng.choice(["\n", "", "\n\n", " \n"])


def fuzz_action(rng: random.Random, board: chess.Board) -> str:
    kind = rng.randrange(10)
    if kind < 5:
        return near_miss(rng, board)
    if kind < 7:
        return "".join(rng.choice(rng.choice(ALPHABETS)) for _ in range(rng.randrange(0, 12)))
    if kind < 9:
        return random_unicode(rng, rng.randrange(0, 20))
    return rng.choice(FIXED)


def python_chess_move(board: chess.Board, action: str) -> chess.Move | None:
    """The oracle, written from the rules: drop one trailing newline and all spaces, then parse_san."""
    text = action.removesuffix("\n")
    try:
        move = board.parse_san(text.replace(" ", ""))
    except Exception:  # noqa: BLE001 - any failure means "not a move"
        return None
    return None if move == chess.Move.null() else move


def check_step(env: ChessEnv, action: str) -> bool:
    """Step once and check the outcome against the oracle; True if a move was played."""
    before = env.board.copy()
    expected = python_chess_move(before, action)
    obs_before = env.history[-1].text
    result = env.step(action)
    if expected is None:
        assert result.reward == -1.0 and result.info["invalid"], repr(action)
        assert env.board.fen() == before.fen() and env.board.move_stack == before.move_stack, repr(action)
        assert result.history[-1].text == obs_before and not result.terminated, repr(action)
    else:
        assert not result.info["invalid"], repr(action)
        played = len(env.board.move_stack) - len(before.move_stack)
        assert played in (1, 2) and env.board.move_stack[len(before.move_stack)] == expected, repr(action)
        assert result.reward in (-1.0, 0.0, 1.0)
        assert (played == 1) == (result.terminated and result.reward != -1.0 and env.board.turn == chess.BLACK)
    return expected is not None


def run_fuzz(env: ChessEnv, n: int, seed: int) -> tuple[int, int]:
    rng, played, illegal = random.Random(seed), 0, 0
    env.reset(seed=seed)
    for _ in range(n):
        if env.done:
            env.reset()
        if check_step(env, fuzz_action(rng, env.board)):
            played += 1
        else:
            illegal += 1
    return played, illegal


@pytest.mark.parametrize("start", ["standard", "endgame"])
def test_fuzz_random_opponent(start):
    played, illegal = run_fuzz(ChessEnv(start=start, random_opponent=True), 6000, seed=1 if start == "standard" else 2)
    assert played >= 200 and illegal >= 4000


def test_fuzz_against_stockfish():
    try:
        find_stockfish()
    except FileNotFoundError:
        pytest.skip("Stockfish not installed (`make install`)")
    played, illegal = run_fuzz(ChessEnv(), 600, seed=3)
    assert played >= 20 and illegal >= 300


def test_oracle_is_not_trivial():
    """The near-miss generator produces both legal texts (lenient parsing) and illegal ones."""
    rng, board = random.Random(0), chess.Board()
    verdicts = [python_chess_move(board, near_miss(rng, board)) is not None for _ in range(500)]
    assert 25 <= sum(verdicts) <= 475
