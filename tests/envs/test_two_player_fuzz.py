"""Fuzz the two-player games with arbitrary strings: never raise, an invalid move forfeits (the game's `forfeit_loss`
lost by the sender and won by the other, `info["invalid"]`), random legal games end within `max_length` and are zero-sum."""

import random

import pytest

from lmrl.envs.base import Text
from lmrl.envs.two_player import KuhnPoker, TicTacToe, VersusEnv, play, random_legal
from tests.envs.test_env_fuzz import ALPHABETS, fuzz_corpus
from tests.helpers import random_unicode

# Every string that is a legal move somewhere in the game, spelled out here rather than taken from the game.
VALID = {
    TicTacToe: {f"mark {r} {c}\n" for r in (1, 2, 3) for c in (1, 2, 3)},
    KuhnPoker: {"check\n", "bet\n", "call\n", "fold\n"},
}
NEAR_MISSES = {
    TicTacToe: [
        "mark 1 1", "mark 2 2", "mark 1 1\n\n", " mark 1 1\n", "mark 1 1 \n", "mark  1 1\n", "Mark 1 1\n",
        "MARK 2 2\n", "mark 0 0\n", "mark 4 1\n", "mark 1 4\n", "mark 1\n", "mark 1 1 1\n", "mark 1,1\n",
        "mark (1, 1)\n", "mark a b\n", "mark -1 1\n", "mark 1.0 1\n", "mark １ １\n", "mark 1 1\r\n", "mark\t1 1\n",
        "1 1\n", "11\n", "X 1 1\n", "mark 1 1.\n", "\nmark 1 1", "mark 1 1\nmark 2 2\n", "place 1 1\n", "", "\n", " ",
    ],
    KuhnPoker: [
        "check", "bet", "call", "fold", "Check\n", "BET\n", "check \n", " bet\n", "bet\n\n", "raise\n", "pass\n",
        "bet 1\n", "call!\n", "checkbet\n", "check\nbet\n", "fold\r\n", "c\n", "b\n", "all in\n", "bet\t\n",
        "ｂｅｔ\n", "\nbet", "", "\n", " ",
    ],
}
GAMES = [TicTacToe, KuhnPoker]


def fuzz_strings(game_class, n: int = 10_000, seed: int = 0) -> list[str]:
    """Near misses, arbitrary unicode, letters from a few alphabets, and mutations of the game's valid moves."""
    valid = VALID[game_class]
    alphabets = ALPHABETS + ["".join(sorted(set("".join(valid))))]
    return fuzz_corpus(NEAR_MISSES[game_class], valid, alphabets, n, seed)


def random_position(game_class, rng: random.Random):
    """A game after a random number of random legal moves, still on."""
    game = game_class()
    while True:
        game.reset(rng.randrange(1 << 30))
        for _ in range(rng.randrange(game.max_length)):
            if game.done:
                break
            game.step(rng.choice(game.legal_actions()))
        if not game.done:
            return game


@pytest.mark.parametrize("game_class", GAMES)
def test_fuzz_corpus_is_large_and_invalid(game_class):
    strings = fuzz_strings(game_class)
    assert len(strings) >= 9_000 and not VALID[game_class] & set(strings)
    assert "" in strings and sum("\n" in s for s in strings) > 1000


def assert_forfeit(game, result, mover: int) -> None:
    """The step ended the game with `mover` losing by forfeit."""
    loss = game.forfeit_loss
    expected = (-loss, loss) if mover == 0 else (loss, -loss)
    assert result.info["invalid"] and result.info["player"] == mover and result.done and game.done
    assert result.rewards == expected and game.returns() == expected and game.winner == 1 - mover
    assert game.legal_actions() == [] and all(game.observation(p).endswith("\n") for p in (0, 1))


@pytest.mark.parametrize("game_class", GAMES)
def test_arbitrary_strings_forfeit_and_never_raise(game_class):
    rng = random.Random(1)
    for action in fuzz_strings(game_class):
        game = random_position(game_class, rng)
        mover = game.current_player()
        assert_forfeit(game, game.step(action), mover)


@pytest.mark.parametrize("game_class", GAMES)
def test_well_formed_moves_that_are_illegal_here_forfeit(game_class):
    rng, tried = random.Random(2), 0
    for _ in range(300):
        game = random_position(game_class, rng)
        illegal = sorted(VALID[game_class] - set(game.legal_actions()))
        if illegal:
            mover = game.current_player()
            assert_forfeit(game, game.step(rng.choice(illegal)), mover)
            tried += 1
    assert tried >= 200


@pytest.mark.parametrize("game_class,outcomes", [
    (TicTacToe, {(1.0, -1.0), (-1.0, 1.0), (0.0, 0.0)}),
    (KuhnPoker, {(1.0, -1.0), (-1.0, 1.0), (2.0, -2.0), (-2.0, 2.0)}),
])
def test_random_legal_games_end_in_time_and_are_zero_sum(game_class, outcomes):
    rng, game, seen = random.Random(3), game_class(), set()
    for seed in range(2000):
        game.reset(seed)
        for _ in range(game.max_length):
            legal = game.legal_actions()
            assert legal and set(legal) <= VALID[game_class] and all(a.endswith("\n") for a in legal)
            assert all(game.observation(p).endswith("\n") for p in (0, 1))
            result = game.step(rng.choice(legal))
            assert not result.info["invalid"]
            if result.done:
                break
            assert result.rewards == (0.0, 0.0)
        assert game.done and result.rewards == game.returns() and sum(game.returns()) == 0
        seen.add(game.returns())
    assert seen == outcomes


@pytest.mark.parametrize("game_class", GAMES)
def test_play_with_a_junk_player_ends_in_its_forfeit(game_class):
    rng = random.Random(4)
    for seat in (0, 1):
        players = [random_legal(rng), random_legal(rng)]
        players[seat] = lambda game: random_unicode(rng, 5)
        returns = play(game_class(), players, seed=7)
        assert returns[seat] == -game_class.forfeit_loss and sum(returns) == 0


@pytest.mark.parametrize("game_class", GAMES)
def test_versus_env_takes_any_string_in_either_seat(game_class):
    """Through `VersusEnv` (the agent's seat against a random opponent) every non-move forfeits at once: -forfeit_loss, the
    game over, `info["invalid"]`, and the history ends with the agent's text and its final observation."""
    rng = random.Random(2)
    env = VersusEnv(game_class(), random_legal(rng))
    for i, action in enumerate(fuzz_strings(game_class, n=2_000, seed=5)):
        env.reset(seed=i, options={"seat": i % 2})
        result = env.step(action)
        assert result.terminated and result.reward == -game_class.forfeit_loss and result.info["invalid"], repr(action)
        assert result.history[-2] == Text(action, True) and not result.history[-1].is_action
