"""ChessEnv against the original LMRL-Gym rules: text, rewards, horizon, opponent, endgame starts."""

import os
import random
import shutil
import signal

import chess
import pytest

from lmrl.envs import chess as chess_env
from lmrl.envs.base import BatchedEnv, history_to_str
from lmrl.envs.chess import (
    ChessEnv,
    StockfishOpponent,
    close_engines,
    eval_position_keys,
    find_stockfish,
    get_engine,
    load_eval_positions,
    position_key,
    random_endgame,
)


def stockfish_available() -> bool:
    try:
        find_stockfish()
    except FileNotFoundError:
        return False
    return True


needs_stockfish = pytest.mark.skipif(not stockfish_available(), reason="Stockfish not installed (`make install`)")

START_TEXT = (
    "r n b q k b n r / p p p p p p p p / 8 / 8 / 8 / 8 / P P P P P P P P / "
    "R N B Q K B N R   w   K Q k q   -   0   1\n"
)
MATE_IN_ONE = "6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1"  # Ra8#
# White's only move is Kh4, after which Black mates in one (Qh6#).
FORCED_INTO_MATE = "8/5kr1/q7/8/8/7K/7P/8 w - - 0 1"
STALEMATE_IN_ONE = "k7/8/1K6/2Q5/8/8/8/8 w - - 0 1"  # Qc7 stalemates


def make(fen=None, **kwargs):
    env = ChessEnv(**kwargs)
    history, info = env.reset(options={"fen": fen} if fen else None)
    return env, history, info


def test_start_text_verbatim():
    _, history, info = make(random_opponent=True)
    assert history_to_str(history) == START_TEXT
    assert info == {"fen": chess.STARTING_FEN, "start_fen": chess.STARTING_FEN}


def test_legal_actions_are_spaced_san():
    env, _, _ = make(random_opponent=True)
    actions = env.legal_actions()
    assert len(actions) == 20 and "N f 3\n" in actions and "e 4\n" in actions
    for action in actions:
        assert action.endswith("\n") and env.board.parse_san(action.replace(" ", "").strip())


def test_mate_in_one_wins():
    env, _, _ = make(MATE_IN_ONE)
    result = env.step("R a 8 #\n")
    assert result.reward == 1.0 and result.terminated and not result.truncated
    assert result.info["success"] and not result.info["invalid"] and result.info["outcome"] == "checkmate"
    assert result.history[-1].text == " ".join("R5k1/5ppp/8/8/8/8/8/6K1 b - - 1 1") + "\n"
    with pytest.raises(RuntimeError):
        env.step("K f 1\n")


def test_lenient_parsing_accepts_long_algebraic_and_missing_suffix():
    for action in ("R a 1 a 8\n", "Ra8", "R a 8", "R a 8 #"):
        env, _, _ = make(MATE_IN_ONE)
        assert env.step(action).reward == 1.0, action


@needs_stockfish
def test_opponent_mate_loses():
    env, _, _ = make(FORCED_INTO_MATE)
    assert env.legal_actions() == ["K h 4\n"]
    result = env.step("K h 4\n")
    assert result.reward == -1.0 and result.terminated and not result.info["success"]
    assert result.info["outcome"] == "checkmate" and result.info["opponent_move"].endswith("#")
    assert env.board.is_checkmate() and env.board.turn == chess.WHITE


def test_stalemate_is_a_zero_reward_end():
    env, _, _ = make(STALEMATE_IN_ONE)
    result = env.step("Q c 7\n")
    assert result.reward == 0.0 and result.terminated and result.info["outcome"] == "stalemate"
    assert not result.info["success"]


def test_illegal_move_costs_one_and_changes_nothing():
    env, history, _ = make(random_opponent=True)
    for action in ("e 5\n", "N f 4\n", "K e 2\n", "hello\n", "", "e4\n\n", "O - O\n"):
        result = env.step(action)
        assert result.reward == -1.0 and not result.terminated and not result.truncated, repr(action)
        assert result.info["invalid"] and result.history[-1] == history[0] and env.board.fen() == chess.STARTING_FEN


@pytest.mark.parametrize("null", ["- -\n", "--", "0 0 0 0\n", "Z 0\n", "@ @ @ @\n"])
def test_null_moves_are_illegal(null):
    env, _, _ = make(random_opponent=True)
    result = env.step(null)
    assert result.reward == -1.0 and result.info["invalid"] and not result.terminated
    assert env.board.fen() == chess.STARTING_FEN and not env.board.move_stack


def test_all_illegal_episode_is_minus_401_truncated():
    env, _, _ = make()
    total, steps, result = 0.0, 0, None
    while not env.done:
        result = env.step("K e 3\n")
        total, steps = total + result.reward, steps + 1
    assert steps == 401 and total == -401.0
    assert result.truncated and not result.terminated and result.info["outcome"] == "max_moves"


def test_horizon_counts_legal_moves_too():
    env, _, _ = make(random_opponent=True, max_moves=3)
    env.reset(seed=0)
    results = [env.step(env.legal_actions()[0]) for _ in range(4)]
    assert [r.truncated for r in results] == [False, False, False, True]
    assert len(env.board.move_stack) == 8


@needs_stockfish
def test_opponent_reply_is_deterministic_across_restarts():
    rng, boards = random.Random(0), []
    board = chess.Board()
    for _ in range(30):
        board.push(rng.choice(list(board.legal_moves)))
        if board.is_game_over():
            board = chess.Board()
        if board.turn == chess.BLACK:
            boards.append(board.copy())
    opponent = StockfishOpponent()
    first = [opponent.reply(b) for b in boards]
    assert [opponent.reply(b) for b in reversed(boards)] == first[::-1]
    close_engines()
    assert [opponent.reply(b) for b in boards] == first


@needs_stockfish
def test_envs_share_one_engine_and_survive_its_death():
    a, _, _ = make()
    b, _, _ = make()
    a.step("e 4\n")
    b.step("d 4\n")
    engine = get_engine(None, a.opponent.options)
    assert get_engine(None, b.opponent.options) is engine
    os.kill(engine.transport.get_pid(), signal.SIGKILL)
    result = a.step("N f 3\n")
    assert not result.info["invalid"] and result.info["opponent_move"]
    assert get_engine(None, a.opponent.options) is not engine


def test_missing_binary_error_says_make_install(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(chess_env, "FALLBACK_STOCKFISH", "/nonexistent/stockfish")
    find_stockfish.cache_clear()
    try:
        with pytest.raises(FileNotFoundError, match="make install"):
            find_stockfish()
        with pytest.raises(FileNotFoundError, match="opponent.path"):
            find_stockfish("/nonexistent/sf")
    finally:
        find_stockfish.cache_clear()


@pytest.mark.parametrize(
    "fen, reason",
    [
        ("not a fen", "invalid FEN"),
        ("rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1", "Black to move"),
        ("8/8/8/8/8/8/8/Kk6 w - - 0 1", "not a legal position"),
        ("k7/8/8/8/8/8/8/Q6K w - - 0 1", "not a legal position"),
        ("7k/8/8/8/8/8/8/K7 w - - 0 1", "already over"),
    ],
)
def test_bad_fen_options_are_rejected(fen, reason):
    with pytest.raises(ValueError, match=reason):
        ChessEnv().reset(options={"fen": fen})


def test_bad_options_and_settings_list_valid_choices():
    with pytest.raises(ValueError, match="valid: \\['fen'\\]"):
        ChessEnv().reset(options={"position": "x"})
    with pytest.raises(ValueError, match="standard"):
        ChessEnv(start="middlegame")
    with pytest.raises(ValueError, match="kRRK"):
        ChessEnv(start="endgame", setups=["kBBK"])
    with pytest.raises(ValueError, match="depth"):
        ChessEnv(opponent={"limit": {"mate": 3}})
    with pytest.raises(ValueError, match="limit"):
        ChessEnv(opponent={"level": 3})


def test_eval_reset_options():
    assert ChessEnv().eval_reset_options() == [{}]
    options = ChessEnv(start="endgame").eval_reset_options()
    assert len(options) == 645 and options[0] == {"fen": load_eval_positions()[0]}


def test_eval_set_is_645_unique_valid_kqk_positions():
    fens = load_eval_positions()
    assert len(fens) == 645 and len({position_key(chess.Board(f)) for f in fens}) == 645
    for fen in fens:
        board = chess.Board(fen)
        assert board.is_valid() and board.turn == chess.WHITE and not board.is_game_over() and not board.is_check()
        pieces = sorted(p.symbol() for p in board.piece_map().values())
        assert pieces == ["K", "Q", "k"]
    header = chess_env.EVAL_POSITIONS_FILE.read_text().splitlines()[0:4]
    assert all(line.startswith("#") for line in header)
    assert any("python -m data_gen.endgames --build-eval-set" in line for line in header)


def test_endgame_resets_avoid_eval_set_and_are_seeded():
    env, keys, seen = ChessEnv(start="endgame"), eval_position_keys(), set()
    for seed in range(2000):
        _, info = env.reset(seed=seed)
        board = chess.Board(info["fen"])
        assert position_key(board) not in keys
        assert sorted(p.symbol() for p in board.piece_map().values()) == ["K", "Q", "k"]
        seen.add(info["fen"])
    assert len(seen) > 1900
    assert env.reset(seed=7)[1] == ChessEnv(start="endgame").reset(seed=7)[1]


def test_exclusion_matters():
    """Without the exclusion some of 2000 seeded draws would hit the eval set (the test above can fail)."""
    keys = eval_position_keys()
    hits = sum(position_key(random_endgame(random.Random(seed), "kQK")) in keys for seed in range(2000))
    assert hits > 0


@pytest.mark.parametrize("setup, pieces", [("kRK", "KRk"), ("kQRK", "KQRk"), ("kRRK", "KRRk")])
def test_other_setups(setup, pieces):
    env = ChessEnv(start="endgame", setups=[setup], random_opponent=True)
    for seed in range(50):
        _, info = env.reset(seed=seed)
        board = chess.Board(info["fen"])
        assert "".join(sorted(p.symbol() for p in board.piece_map().values())) == "".join(sorted(pieces))
        assert board.is_valid() and not board.is_check() and board.turn == chess.WHITE


def test_random_opponent_is_seeded():
    def play(seed):
        env = ChessEnv(random_opponent=True)
        env.reset(seed=seed)
        return [env.step("e 4\n" if k == 0 else env.legal_actions()[0]).info["fen"] for k in range(5)]

    assert play(3) == play(3) and play(3) != play(4)


@needs_stockfish
def test_batched_env_records_episodes():
    fens = load_eval_positions()[:3]
    batch = BatchedEnv(lambda: ChessEnv(start="endgame"), 3)
    batch.reset_all([{"fen": f} for f in fens], seeds=[0, 1, 2])
    rng = random.Random(0)
    while batch.active:
        batch.step(["Q x x 9\n" if rng.random() < 0.2 else rng.choice(batch.envs[i].legal_actions())
                    for i in batch.active])
    for i, episode in enumerate(batch.episodes):
        assert episode.done and episode.turns == list(batch.envs[i].history)
        assert episode.info["start_fen"] == fens[i]
        assert episode.total_return == sum(r for r in episode.rewards)


@needs_stockfish
def test_benchmark_extras_reports_opponent_speed():
    extras = ChessEnv().benchmark_extras(plies=10)
    assert 0 < extras["opponent_ms_per_move"] < 1000 and extras["opponent_limit"] == {"depth": 1}
