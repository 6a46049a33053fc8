"""The Elo ladder on simulated games: it recovers known ratings, its intervals narrow with games, an unbeaten
player stays finite, the order of games does not matter, and the table is sorted and printable."""

import math
import random

import pytest

from lmrl.elo import bootstrap_intervals, count_games, expected_score, fit_ratings, format_table, ladder_table

TRUE = {"a": 800.0, "b": 1000.0, "c": 1200.0, "d": 1400.0}


def simulate(n_games: int, seed: int, true: dict = TRUE) -> list[tuple[str, str, float]]:
    """Games between random pairs, won with the logistic probability of the true ratings (written out here)."""
    rng = random.Random(seed)
    games = []
    for _ in range(n_games):
        x, y = rng.sample(sorted(true), 2)
        p_x = 1 / (1 + 10 ** ((true[y] - true[x]) / 400))
        games.append((x, y, 1.0 if rng.random() < p_x else 0.0))
    return games


def test_expected_score_by_hand():
    assert expected_score(1400, 1000) == pytest.approx(10 / 11)
    assert expected_score(1000, 1400) == pytest.approx(1 / 11)
    assert expected_score(1234, 1234) == 0.5
    assert expected_score(1800, 1000) == pytest.approx(100 / 101)


def test_fit_recovers_known_ratings():
    ratings = fit_ratings(simulate(2000, seed=0))
    assert sorted(ratings, key=ratings.get) == ["a", "b", "c", "d"]
    assert sum(ratings.values()) / 4 == pytest.approx(1000.0)
    true_mean = sum(TRUE.values()) / 4
    for player, true in TRUE.items():
        assert abs((ratings[player] - 1000.0) - (true - true_mean)) < 60, (player, ratings)


def test_anchor_pins_one_player():
    games = simulate(500, seed=1)
    free, pinned = fit_ratings(games), fit_ratings(games, anchor="b", anchor_rating=1500.0)
    assert pinned["b"] == pytest.approx(1500.0)
    for player in TRUE:
        assert pinned[player] - pinned["b"] == pytest.approx(free[player] - free["b"])
    with pytest.raises(ValueError):
        fit_ratings(games, anchor="nobody")


def test_fit_does_not_depend_on_the_order_of_games():
    games = simulate(300, seed=2)
    shuffled = list(games)
    random.Random(0).shuffle(shuffled)
    swapped = [(b, a, 1.0 - s) for a, b, s in games]  # the same games written from the other side
    assert fit_ratings(games) == fit_ratings(shuffled)
    assert fit_ratings(swapped) == pytest.approx(fit_ratings(games), abs=1e-9)


def test_draws_count_half():
    one_each = fit_ratings([("x", "y", 1.0), ("x", "y", 0.0)])
    two_draws = fit_ratings([("x", "y", 0.5), ("y", "x", 0.5)])
    assert one_each == pytest.approx(two_draws) and one_each["x"] == pytest.approx(one_each["y"])
    lopsided = fit_ratings([("x", "y", 1.0), ("x", "y", 0.5)] * 20)
    assert expected_score(lopsided["x"], lopsided["y"]) == pytest.approx(0.75, abs=0.01)


def test_a_player_who_wins_every_game_gets_a_finite_top_rating():
    games = simulate(500, seed=3) + [("w", o, 1.0) for o in TRUE for _ in range(10)]
    games += [(o, "w", 0.0) for o in TRUE for _ in range(10)]
    ratings = fit_ratings(games)
    assert all(math.isfinite(r) for r in ratings.values())
    assert max(ratings, key=ratings.get) == "w" and ratings["w"] > ratings["d"] + 200


def test_bootstrap_interval_narrows_with_more_games():
    def widths(n_games):
        intervals = bootstrap_intervals(simulate(n_games, seed=4), n_boot=100, seed=0)
        return {p: high - low for p, (low, high) in intervals.items()}

    few, many = widths(500), widths(4000)
    assert all(many[p] < 0.7 * few[p] for p in TRUE), (few, many)


def test_bootstrap_interval_covers_the_fit_and_pins_the_anchor():
    games = simulate(1000, seed=5)
    ratings, intervals = fit_ratings(games), bootstrap_intervals(games, n_boot=100)
    assert all(low < ratings[p] < high for p, (low, high) in intervals.items())
    anchored = bootstrap_intervals(games, n_boot=20, anchor="a", anchor_rating=800.0)
    assert anchored["a"] == pytest.approx((800.0, 800.0)) and anchored["d"][0] > 1200


def test_ladder_table_is_sorted_and_formats_as_markdown():
    games = simulate(400, seed=6)
    ratings, intervals, counts = fit_ratings(games), bootstrap_intervals(games, n_boot=50), count_games(games)
    table = ladder_table(ratings, intervals, counts)
    assert list(table["player"]) == ["d", "c", "b", "a"] and list(table.index) == [1, 2, 3, 4]
    assert table["games"].sum() == 2 * len(games)
    text = format_table(table)
    lines = text.splitlines()
    assert lines[0].startswith("| rank | player | rating") and len(lines) == 6
    assert lines[2].startswith(f"| 1 | d | {ratings['d']:.0f} | [{intervals['d'][0]:.0f}, ")


def test_bad_games_are_refused():
    with pytest.raises(ValueError):
        fit_ratings([("x", "y", 0.7)])
    with pytest.raises(ValueError):
        fit_ratings([("x", "x", 1.0)])
    with pytest.raises(ValueError):
        fit_ratings([])
