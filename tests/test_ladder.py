"""The Elo ladder of scripted players: a round robin with balanced seats, its middle rung's rules by hand, and the
ladders' order (a known-stronger player rates higher, with intervals that do not overlap)."""

import random
from collections import Counter

from lmrl.envs.two_player import TicTacToe
from lmrl.ladder import HANDS, ladder, main, players_for, round_robin, win_or_block


def test_round_robin_meets_every_pair_with_each_named_first_half_the_time():
    make_game, players = players_for("tictactoe", seed=0)
    results = round_robin(make_game, players, games=10)
    assert len(results) == 3 * 10 and {s for _, _, s in results} <= {0.0, 0.5, 1.0}
    firsts = Counter((a, b) for a, b, _ in results)
    assert set(firsts.values()) == {5} and len(firsts) == 6  # each ordered pair 5 times


def test_win_or_block_takes_a_win_then_blocks():
    game, player = TicTacToe(), win_or_block(random.Random(0))
    game.reset()
    for move in ("mark 1 1\n", "mark 2 1\n", "mark 1 2\n", "mark 2 2\n"):  # X: 1 1, 1 2; O: 2 1, 2 2
        game.step(move)
    assert player(game) == "mark 1 3\n"  # X completes its top row rather than blocking O's middle one
    game.reset()
    for move in ("mark 1 1\n", "mark 2 1\n", "mark 1 2\n"):  # O to move, X threatens the top row
        game.step(move)
    assert player(game) == "mark 1 3\n"


def test_tictactoe_ladder_orders_the_rungs_with_separate_intervals():
    make_game, players = players_for("tictactoe", seed=0)
    table = ladder(round_robin(make_game, players, games=200), n_boot=100)
    assert list(table["player"]) == ["minimax", "win_or_block", "random"]
    assert table["low"].iloc[0] > table["high"].iloc[1] and table["low"].iloc[1] > 1000.0


def test_kuhn_ladder_rates_the_equilibrium_above_random_play(tmp_path):
    """Kuhn matches of 40 hands: the equilibrium and always-bet both beat random play; printed and written."""
    assert main(["--game", "kuhn", "--games", "100", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "kuhn.md").read_text()
    assert text.splitlines()[-1].split("|")[2].strip() == "random" and HANDS["kuhn"] == 40
    assert "equilibrium" in (tmp_path / "kuhn.csv").read_text()
