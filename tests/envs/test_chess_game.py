"""Chess as a two-player game for the Elo ladder: the chess task's text and lenient SAN, mate and the ply cap by hand,
forfeits on fuzzed text, and Stockfish rungs that beat random play."""

import random

import lmrl.envs.chess_game as chess_game
from lmrl.envs.chess import fen_to_text
from lmrl.envs.chess_game import ChessGame
from lmrl.envs.two_player import SCRIPTED, VersusEnv, play, random_legal, scripted_player
from tests.envs.test_env_fuzz import fuzz_corpus


def test_fools_mate_in_the_chess_tasks_lenient_san():
    game = ChessGame()
    game.reset()
    assert game.observation(0) == game.observation(1) == fen_to_text(game.board.fen())
    assert game.canonical("e2e4\n") == "e 4\n" and game.canonical("e4\n") == "e 4\n"  # the task's lenient reading
    for move in ("f 3\n", "e5\n", "g 4\n", "Q h 4\n"):  # `Qh4` without its `#`, as the chess task accepts
        assert not game.done
        game.step(move)
    assert game.done and game.returns() == (-1.0, 1.0) and game.winner == 1 and game.forfeited_by is None


def test_an_unfinished_game_is_a_draw_at_the_ply_cap(monkeypatch):
    monkeypatch.setattr(chess_game, "MAX_PLIES", 6)
    game, rng = ChessGame(), random.Random(0)
    play(game, [random_legal(rng), random_legal(rng)])
    assert game.board.ply() == 6 and game.returns() == (0.0, 0.0)


def test_any_other_text_forfeits():
    start = ChessGame()
    start.reset()
    corpus = fuzz_corpus(["e 5\n", "N f 6\n", "e 4", "K e 2\n", "O - O\n", "e 4\n\n", "e\t4\n"],
                         start.legal_actions(), ["abcdefgh12345678NBRQKx+#=O- "], n=80)
    tried = 0
    for text in corpus:
        game = ChessGame()
        game.reset()
        if game.canonical(text) is not None:  # lenient SAN may read a mutation as a real move
            continue
        result = game.step(text)
        assert result.info["invalid"] and game.returns() == (-1.0, 1.0) and game.forfeited_by == 0, text
        tried += 1
    assert tried >= 60


def test_stockfish_rungs_beat_random_play_from_either_seat():
    assert sorted(SCRIPTED["chess"]) == ["random", "stockfish_d1", "stockfish_d4", "stockfish_s0_d1"]
    engine = scripted_player("chess", "stockfish_d1", random.Random(0))
    assert play(ChessGame(), [engine, random_legal(random.Random(1))]) == (1.0, -1.0)
    assert play(ChessGame(), [random_legal(random.Random(2)), engine]) == (-1.0, 1.0)
    # and as a one-seat env for an agent: random play against it loses
    env = VersusEnv(ChessGame(), engine)
    env.reset(seed=0, options={"seat": 0})
    rng, done = random.Random(3), False
    while not done:
        result = env.step(rng.choice(env.legal_actions()))
        done = result.terminated
    assert result.reward == -1.0 and not result.info["invalid"]
