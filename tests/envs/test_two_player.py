"""Two-player games by hand: tic-tac-toe's lines, draw and forfeits, Kuhn poker's payoff for every betting sequence,
perfect tic-tac-toe play, and Kuhn poker's equilibrium checked exactly on the game tree."""

import itertools
import random
from fractions import Fraction

import pytest

from lmrl.envs.base import Text
from lmrl.envs.two_player import (
    CARDS,
    KuhnPoker,
    TicTacToe,
    VersusEnv,
    kuhn_equilibrium,
    kuhn_equilibrium_strategy,
    minimax_tictactoe,
    play,
    random_legal,
)

# The eight lines as (row, col) cells, 1-based, written out here rather than taken from the game.
LINES = [
    [(1, 1), (1, 2), (1, 3)], [(2, 1), (2, 2), (2, 3)], [(3, 1), (3, 2), (3, 3)],
    [(1, 1), (2, 1), (3, 1)], [(1, 2), (2, 2), (3, 2)], [(1, 3), (2, 3), (3, 3)],
    [(1, 1), (2, 2), (3, 3)], [(1, 3), (2, 2), (3, 1)],
]


def mark(row: int, col: int) -> str:
    return f"mark {row} {col}\n"


def tictactoe(*cells: tuple[int, int]) -> TicTacToe:
    """A game after the given moves (X first), each asserted legal."""
    game = TicTacToe()
    game.reset()
    for cell in cells:
        assert not game.step(mark(*cell)).info["invalid"]
    return game


@pytest.mark.parametrize("line", LINES)
def test_x_wins_with_any_line(line):
    others = [(r, c) for r in (1, 2, 3) for c in (1, 2, 3) if (r, c) not in line][:2]
    game = tictactoe(line[0], others[0], line[1], others[1])
    assert not game.done and game.winner is None
    result = game.step(mark(*line[2]))
    assert result.done and result.rewards == (1.0, -1.0) and game.returns() == (1.0, -1.0) and game.winner == 0
    assert game.legal_actions() == [] and "You win 1." in game.observation(0) and "You lose 1." in game.observation(1)


def test_o_wins_a_column():
    game = tictactoe((1, 1), (1, 3), (2, 1), (2, 3), (3, 2), (3, 3))
    assert game.done and game.returns() == (-1.0, 1.0) and game.winner == 1


def test_full_board_without_a_line_is_a_draw():
    # X O X / X O O / O X X
    game = tictactoe((1, 1), (1, 2), (1, 3), (2, 2), (2, 1), (3, 1), (3, 2), (2, 3), (3, 3))
    assert game.done and game.returns() == (0.0, 0.0) and game.winner is None
    assert "X O X\nX O O\nO X X\n" in game.observation(0) and "A draw." in game.observation(1)


def test_moves_alternate_and_the_board_is_shown_to_both():
    game = tictactoe((2, 2))
    assert game.current_player() == 1 and mark(2, 2) not in game.legal_actions() and len(game.legal_actions()) == 8
    for player in (0, 1):
        assert ". . .\n. X .\n. . .\n" in game.observation(player) and "X mark 2 2" in game.observation(player)
    assert "You are O" in game.observation(1) and "Your move." in game.observation(1)


@pytest.mark.parametrize("player", [0, 1])
def test_marking_an_occupied_cell_forfeits(player):
    game = tictactoe(*[(1, 1), (2, 2)][: 2 - player])  # (1, 1) is taken and `player` is to move
    assert game.current_player() == player
    result = game.step(mark(1, 1))
    expected = (-1.0, 1.0) if player == 0 else (1.0, -1.0)
    assert result.info == {"invalid": True, "player": player} and result.done and result.rewards == expected
    assert game.winner == 1 - player and "You made an invalid move." in game.observation(player)


@pytest.mark.parametrize("action", ["mark 1 1", "mark 0 1\n", "mark 4 4\n", "Mark 1 1\n", "1 1\n", "mark 1,1\n",
                                    "mark 1 1\n\n", " mark 1 1\n", "X mark 1 1\n", ""])
def test_a_malformed_move_loses_for_the_player_who_sent_it(action):
    game = tictactoe((2, 2))  # O to move
    result = game.step(action)
    assert result.info["invalid"] and game.done and game.returns() == (1.0, -1.0) and game.winner == 0
    with pytest.raises(RuntimeError):
        game.step(mark(1, 1))


def kuhn(cards: tuple[str, str], *actions: str) -> KuhnPoker:
    game = KuhnPoker()
    game.reset(cards=cards)
    for action in actions:
        assert not game.step(action).info["invalid"]
    return game


# (cards of player 0 and 1, betting, player 0's return): ante 1 each, a bet or call adds 1.
KUHN_PAYOFFS = [
    (("K", "J"), ["check\n", "check\n"], 1), (("J", "Q"), ["check\n", "check\n"], -1),
    (("Q", "K"), ["bet\n", "call\n"], -2), (("K", "Q"), ["bet\n", "call\n"], 2),
    (("J", "K"), ["bet\n", "fold\n"], 1), (("K", "J"), ["bet\n", "fold\n"], 1),
    (("Q", "J"), ["check\n", "bet\n", "call\n"], 2), (("J", "K"), ["check\n", "bet\n", "call\n"], -2),
    (("K", "Q"), ["check\n", "bet\n", "fold\n"], -1), (("J", "Q"), ["check\n", "bet\n", "fold\n"], -1),
]


@pytest.mark.parametrize("cards,actions,p0_return", KUHN_PAYOFFS)
def test_kuhn_payoffs_by_hand(cards, actions, p0_return):
    game = kuhn(cards, *actions[:-1])
    assert not game.done and game.returns() == (0.0, 0.0)
    result = game.step(actions[-1])
    assert result.done and result.rewards == (p0_return, -p0_return) and game.returns() == (p0_return, -p0_return)
    assert game.winner == (0 if p0_return > 0 else 1)


def test_kuhn_legal_moves_and_turns():
    game = kuhn(("Q", "K"))
    assert game.current_player() == 0 and game.legal_actions() == ["check\n", "bet\n"]
    game.step("check\n")
    assert game.current_player() == 1 and game.legal_actions() == ["check\n", "bet\n"]
    game.step("bet\n")
    assert game.current_player() == 0 and game.legal_actions() == ["call\n", "fold\n"]
    assert kuhn(("Q", "K"), "bet\n").legal_actions() == ["call\n", "fold\n"]


def test_kuhn_invalid_moves_forfeit_two_chips_more_than_any_fold():
    """A forfeit costs the most a hand can lose (2), so it is never cheaper than folding (1): at 1 chip a self-play
    policy learnt to answer bets with junk instead of folding."""
    game = kuhn(("K", "J"))
    result = game.step("call\n")
    assert result.info["invalid"] and game.returns() == (-2.0, 2.0) and game.winner == 1
    folded = kuhn(("K", "J"), "bet\n", "fold\n")
    assert folded.returns() == (1.0, -1.0)
    junk = kuhn(("K", "J"), "bet\n")
    junk.step("check\n")  # not a move facing a bet
    assert junk.returns() == (2.0, -2.0) and junk.forfeited_by == 1


def test_kuhn_observation_shows_only_the_players_own_card():
    for mine in CARDS:
        seen = {kuhn((mine, other), "check\n").observation(0) for other in CARDS if other != mine}
        assert len(seen) == 1 and f"Your card: {mine}\n" in seen.pop()
    assert "Your card: J\n" in kuhn(("K", "J")).observation(1)


def test_kuhn_deals_are_reproducible_and_cover_every_deal():
    def deal(seed):
        game = KuhnPoker()
        game.reset(seed)
        return game.cards

    deals = [deal(seed) for seed in range(200)]
    assert deals == [deal(seed) for seed in range(200)]
    assert set(deals) == set(itertools.permutations(CARDS, 2))


def test_minimax_never_loses_to_random_and_beats_it_mostly():
    rng = random.Random(0)
    as_x = [play(TicTacToe(), [minimax_tictactoe, random_legal(rng)])[0] for _ in range(200)]
    as_o = [play(TicTacToe(), [random_legal(rng), minimax_tictactoe])[1] for _ in range(200)]
    assert min(as_x + as_o) == 0.0
    assert sum(r > 0 for r in as_x) > 150 and sum(r > 0 for r in as_o) > 100


def test_minimax_draws_itself_and_wins_or_blocks_at_once():
    assert play(TicTacToe(), [minimax_tictactoe, minimax_tictactoe]) == (0.0, 0.0)
    # X O O / X . . / . . .: (2, 2) also wins, later; perfect play takes the win now.
    assert minimax_tictactoe(tictactoe((1, 1), (1, 2), (2, 1), (1, 3))) == mark(3, 1)
    assert minimax_tictactoe(tictactoe((1, 1), (2, 2), (1, 2))) == mark(1, 3)  # O blocks it


def exact_value(strategies, cards, actions=()) -> Fraction:
    """Player 0's expected return from a position, over the strategies' probabilities ({move: probability})."""
    game = kuhn(cards, *actions)
    if game.done:
        return Fraction(game.returns()[0])
    probs = strategies[game.current_player()](game)
    return sum((p * exact_value(strategies, cards, actions + (a,)) for a, p in probs.items() if p), Fraction(0))


def game_value(strategies) -> Fraction:
    """Player 0's expected return over the six equally likely deals."""
    return sum((exact_value(strategies, deal) for deal in itertools.permutations(CARDS, 2)), Fraction(0)) / 6


def pure(choices: dict):
    """A deterministic strategy: `choices[(betting so far, own card)]` is the move (without newline)."""
    return lambda game: {choices[(tuple(game.history), game.cards[game.current_player()])] + "\n": 1}


def all_pure_strategies(player: int) -> list:
    """Every pure strategy of `player`: a move at each of its six information sets (64 strategies)."""
    spots = [((), "bet"), (("check", "bet"), "call")] if player == 0 else [(("check",), "bet"), (("bet",), "call")]
    infosets = [(history, card, strong) for history, strong in spots for card in CARDS]
    strategies = []
    for moves in itertools.product((False, True), repeat=len(infosets)):
        choices = {}
        for (history, card, strong), aggressive in zip(infosets, moves):
            choices[(history, card)] = strong if aggressive else {"bet": "check", "call": "fold"}[strong]
        strategies.append(pure(choices))
    return strategies


@pytest.mark.parametrize("alpha", [Fraction(0), Fraction(1, 6), Fraction(1, 3)])
def test_kuhn_equilibrium_value_is_minus_one_eighteenth_exactly(alpha):
    strategy = kuhn_equilibrium_strategy(alpha)
    assert game_value([strategy, strategy]) == Fraction(-1, 18)


def test_no_deviation_gains_against_the_equilibrium():
    p1 = kuhn_equilibrium_strategy(Fraction(1, 6))
    p0_best = max(game_value([s, p1]) for s in all_pure_strategies(0))
    p1_best = min(game_value([kuhn_equilibrium_strategy(Fraction(1, 6)), s]) for s in all_pure_strategies(1))
    assert p0_best == Fraction(-1, 18) and p1_best == Fraction(-1, 18)
    always_bet = pure({(h, c): m for c in CARDS for h, m in [((), "bet"), (("check", "bet"), "call")]})
    never_bet_always_call = pure({(h, c): m for c in CARDS for h, m in [((), "check"), (("check", "bet"), "call")]})
    assert game_value([always_bet, p1]) < Fraction(-1, 18)
    assert game_value([never_bet_always_call, p1]) < Fraction(-1, 18)


def test_a_non_equilibrium_player_1_is_exploitable():
    # Bets and calls with K only: it never bluffs J and never calls with Q.
    p1_never_bluffs = pure({**{(("check",), c): "bet" if c == "K" else "check" for c in CARDS},
                            **{(("bet",), c): "call" if c == "K" else "fold" for c in CARDS}})
    assert max(game_value([s, p1_never_bluffs]) for s in all_pure_strategies(0)) > Fraction(-1, 18)


def test_sampled_equilibrium_play_matches_the_exact_value():
    rng = random.Random(0)
    players = [kuhn_equilibrium(1 / 6, rng), kuhn_equilibrium(1 / 6, rng)]
    mean = sum(play(KuhnPoker(), players, seed)[0] for seed in range(20_000)) / 20_000
    assert abs(mean - (-1 / 18)) < 0.03  # the per-game sd is ~1.3, so the mean's sd is ~0.009
    with pytest.raises(ValueError):
        kuhn_equilibrium(0.5, rng)


def test_versus_env_seats_the_agent_and_lets_the_opponent_answer():
    """O's seat against minimax's X: X has moved before the agent's first observation; after the agent's move X
    answers, and a lost game ends with -1 for the agent."""
    env = VersusEnv(TicTacToe(), minimax_tictactoe)
    history, info = env.reset(options={"seat": 1})
    assert info == {"seat": 1} and len(history) == 1 and not history[0].is_action
    assert env.game.board.count("X") == 1 and "You are O" in history[0].text
    rewards = []
    while True:
        result = env.step(env.legal_actions()[0])  # the first free cell every time: minimax wins
        rewards.append(result.reward)
        assert result.history[-2] == Text(result.history[-2].text, True) and not result.history[-1].is_action
        if result.terminated:
            break
    assert rewards[-1] == -1.0 and set(rewards[:-1]) <= {0.0} and result.info["returns"] == [1.0, -1.0]
    assert not result.info["success"]


def test_versus_env_invalid_move_forfeits_and_needs_a_reset():
    env = VersusEnv(KuhnPoker(), random_legal(random.Random(0)))
    env.reset(seed=3, options={"seat": 0})
    result = env.step("raise\n")
    assert result.terminated and result.reward == -2.0 and result.info["invalid"]
    with pytest.raises(RuntimeError):
        env.step("check\n")
    assert env.eval_reset_options() == [{"seat": 0}, {"seat": 1}]
    with pytest.raises(ValueError, match="seat must be 0 or 1"):
        env.reset(options={"seat": 2})


def test_versus_env_between_equilibrium_players_averages_the_games_value():
    """The agent playing Kuhn's equilibrium in seat 0 against the equilibrium opponent earns -1/18 a game on
    average (the exact value); 20,000 games put the mean within 0.03 of it."""
    rng = random.Random(1)
    agent, env = kuhn_equilibrium(Fraction(1, 6), rng), VersusEnv(KuhnPoker(), kuhn_equilibrium(Fraction(1, 6), rng))
    total = 0.0
    for g in range(20_000):
        env.reset(seed=g, options={"seat": 0})
        while True:
            result = env.step(agent(env.game))
            if result.terminated:
                total += result.reward
                break
    assert abs(total / 20_000 + 1 / 18) < 0.03
