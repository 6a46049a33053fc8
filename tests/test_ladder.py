"""The Elo ladder of scripted players: a round robin with balanced seats, its middle rung's rules by hand, and the
ladders' order (a known-stronger player rates higher, with intervals that do not overlap)."""

import random
from collections import Counter

import json

import pytest

from lmrl.envs.two_player import TicTacToe, minimax_tictactoe, random_legal, win_or_block
from lmrl.ladder import HANDS, ladder, main, matches_against, players_for, rate, round_robin
from tests.e2e import run_cli


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


def test_matches_against_balance_seats_and_name_order():
    """A perfect player against random play: half the matches name it first, and it never loses a match."""
    make_game, rungs = players_for("tictactoe", seed=0)
    results = matches_against(minimax_tictactoe, "perfect", make_game, {"random": rungs["random"]}, games=20)
    assert len(results) == 20 and sum(a == "perfect" for a, _, _ in results) == 10
    assert all((s >= 0.5) if a == "perfect" else (s <= 0.5) for a, _, s in results)


def test_rate_places_new_players_on_the_rungs_scale():
    """A second minimax and a second random player join the ladder at their twins' ratings (within the intervals);
    a name the rungs use is refused."""
    table = rate({"perfect": minimax_tictactoe, "coin": random_legal(random.Random(9))}, "tictactoe", games=100,
                 n_boot=50).set_index("player")
    assert table.loc["perfect", "low"] <= table.loc["minimax", "rating"] <= table.loc["perfect", "high"]
    assert table.loc["coin", "low"] <= 1000.0 <= table.loc["coin", "high"]
    assert table.loc["perfect", "rating"] > table.loc["win_or_block", "rating"] > table.loc["coin", "rating"]
    with pytest.raises(ValueError, match="rungs already use"):
        rate({"minimax": minimax_tictactoe}, "tictactoe", games=2)


def test_evaluate_rates_a_checkpoint_on_the_ladder(tmp_path):
    """`lmrl.evaluate rating=true` on a BC checkpoint of tic-tac-toe, with a second checkpoint in the same ladder:
    the table is printed and written, and metrics.json carries both players' ratings with their intervals."""
    cache = tmp_path / "cache"
    run_cli("lmrl.train", ["debug=smoke", "task=tictactoe", "algo=bc"], tmp_path / "bc", cache)
    ckpt = tmp_path / "bc" / "checkpoint"
    metrics = run_cli("lmrl.evaluate", [f"checkpoint={ckpt}", "task=tictactoe", "debug=smoke", "rating=true",
                                        "rating_games=10", f"+rating_with.twin={ckpt}"], tmp_path / "eval", cache)
    assert set(metrics["elo"]) == {"checkpoint", "twin"}  # a BC export names no algorithm
    for row in metrics["elo"].values():
        assert row["low"] <= row["rating"] <= row["high"]
    assert "minimax" in (tmp_path / "eval" / "rating.md").read_text()
    assert json.loads((tmp_path / "eval" / "metrics.json").read_text())["elo"] == metrics["elo"]

