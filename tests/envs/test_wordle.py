"""WordleEnv against the original LMRL-Gym rules: text, rewards, tries, feedback, secrets, optimal policy."""

import math
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from lmrl.envs.base import BatchedEnv, Text, history_to_str
from lmrl.envs.wordle import (
    WORDS,
    WORDS_PATH,
    WordleEnv,
    best_guess,
    consistent_words,
    feedback,
    feedback_matrix,
    optimal_action,
    optimal_returns,
    pattern_code,
    pattern_entropy,
)

CONFIG = Path(__file__).resolve().parents[2] / "conf" / "task" / "wordle.yaml"


def play(secret: str, guesses: list[str], **kwargs):
    env = WordleEnv(**kwargs)
    env.reset(options={"secret": secret})
    results = [env.step(g) for g in guesses]
    return env, results


def test_short_game_verbatim():
    env, results = play("point", ["t r a i n\n", "p o i n t\n"])
    assert history_to_str(env.history) == "Wordle:\nt r a i n\ny b b y y\np o i n t\ng g g g g\n"
    assert [r.reward for r in results] == [-1.0, 0.0]
    assert [(r.terminated, r.truncated) for r in results] == [(False, False), (True, False)]
    assert results[-1].info == {"secret": "point", "success": True, "invalid": False, "guesses": 2}
    assert [t.is_action for t in env.history] == [False, True, False, True, False]


def test_reference_example_invalid_words_then_valid():
    """The reference's `crane`/`xxxxx` example; `slate` is not in our list either, so it is invalid too."""
    guesses = ["c r a n e\n", "x x x x x\n", "s l a t e\n", "t r a i n\n", "p o i n t\n"]
    env, results = play("point", guesses)
    expected = "Wordle:\nc r a n e\n\nx x x x x\n\ns l a t e\n\nt r a i n\ny b b y y\np o i n t\ng g g g g\n"
    assert history_to_str(env.history) == expected
    assert [r.reward for r in results] == [-1.0, -1.0, -1.0, -1.0, 0.0]
    assert [r.info["invalid"] for r in results] == [True, True, True, False, False]
    assert results[-1].terminated and results[-1].info["success"]


@pytest.mark.parametrize("guess, secret, expected", [
    ("green", "eight", "ybyyb"),  # standard Wordle: y b y b b (eight has one e)
    ("error", "order", "ygyyg"),  # standard Wordle: y g b y g (order has two r's, both matched green)
    ("sheep", "eight", "byyyb"),  # standard Wordle: b y y b b
    ("eight", "level", "ybbbb"),
    ("three", "teeth", "gybyy"),
    ("point", "point", "ggggg"),
    ("music", "heavy", "bbbbb"),
])
def test_repeated_letter_feedback_is_the_originals_rule(guess, secret, expected):
    assert feedback(guess, secret) == expected


def test_repeated_letter_feedback_in_the_env_text():
    _, results = play("order", ["e r r o r\n"])
    assert results[0].history[-1] == Text("y g y y g\n", False)


def test_six_wrong_guesses_end_the_game_at_minus_six():
    env, results = play("point", ["t r a i n\n"] * 5 + ["g r e e n\n"])
    assert sum(r.reward for r in results) == -6.0
    assert [r.terminated for r in results] == [False] * 5 + [True]
    assert not any(r.truncated for r in results) and not results[-1].info["success"]
    with pytest.raises(RuntimeError):
        env.step("p o i n t\n")


def test_invalid_word_uses_a_try():
    env, results = play("point", ["slate\n"] * 5 + ["p o i n t\n"])
    assert [r.reward for r in results] == [-1.0] * 5 + [0.0]
    assert results[-1].terminated and results[-1].info["success"] and results[-1].info["guesses"] == 6
    env, results = play("point", ["slate\n"] * 6, invalid_reward=-10)
    assert [r.reward for r in results] == [-10.0] * 6 and results[-1].terminated
    assert [t.text for t in env.history[2::2]] == ["\n"] * 6


@pytest.mark.parametrize("action", [
    "point\n", "point", "P O I N T\n", "p  o i n t\n", " p o i n t\n", "p o i n t \n", "p o i n t\n\n",
    "p o i n\n", "p o i n t s\n", "p,o,i,n,t\n", "p\to\ti\tn\tt\n", "p o i n t\r\n", "",
])
def test_parsing_is_strict(action):
    _, results = play("point", [action])
    assert results[0].info["invalid"] and results[0].reward == -1.0 and results[0].history[-1].text == "\n"
    assert not results[0].info["success"]


def test_a_guess_without_newline_is_accepted_and_kept_verbatim():
    env, results = play("point", ["p o i n t"])
    assert results[0].info["success"] and env.history[1] == Text("p o i n t", True)


def test_reset_reports_and_sets_the_secret():
    env = WordleEnv()
    history, info = env.reset(options={"secret": "green"})
    assert history == (Text("Wordle:\n", False),) and info == {"secret": "green"} and env.secret == "green"
    for bad in ("crane", "GREEN", "gree", 42):
        with pytest.raises(ValueError, match="not in the 431-word list"):
            env.reset(options={"secret": bad})


def test_seeded_secrets_are_deterministic_and_uniform():
    env = WordleEnv()
    assert env.reset(seed=7)[1] == WordleEnv().reset(seed=7)[1]
    assert [env.reset(seed=s)[1]["secret"] for s in range(20)] == [env.reset(seed=s)[1]["secret"] for s in range(20)]
    draws = 20 * len(WORDS)
    counts = Counter(env.reset(seed=s)[1]["secret"] for s in range(draws))
    assert set(counts) == set(WORDS)
    chi2 = sum((counts[w] - 20) ** 2 / 20 for w in WORDS)  # ~ chi-square with 430 dof: mean 430, sd 29
    assert chi2 < 430 + 5 * math.sqrt(2 * 430)


def test_word_list_file():
    lines = WORDS_PATH.read_text(encoding="utf-8").splitlines()
    header = [line for line in lines if line.startswith("#")]
    assert lines[: len(header)] == header and any("wordfreq==3.1.1" in h for h in header)
    assert "# size: 431" in header and any("python -m data_gen.wordle_words" in h for h in header)
    words = lines[len(header):]
    assert len(words) == 431 and words == sorted(set(words)) and tuple(words) == WORDS
    assert all(re.fullmatch(r"[a-z]{5}", w) for w in words)
    assert sum(w.endswith("s") and not w.endswith("ss") for w in words) <= 15
    assert sum(w.endswith("ed") for w in words) <= 5


def test_legal_actions_and_eval_starts_cover_the_list():
    env = WordleEnv()
    env.reset(seed=0)
    actions = env.legal_actions()
    assert len(actions) == 431 and actions[0] == "a b o u t\n" and len(set(actions)) == 431
    assert all(re.fullmatch(r"([a-z] ){4}[a-z]\n", a) for a in actions)
    starts = env.eval_reset_options()
    assert [s["secret"] for s in starts] == list(WORDS)
    for action in actions:
        env.reset(options={"secret": "point"})
        result = env.step(action)
        assert not result.info["invalid"] and result.info["success"] == (action == "p o i n t\n")


def test_feedback_matrix_matches_the_rule_for_every_pair():
    matrix = feedback_matrix()
    assert matrix.shape == (431, 431) and matrix.dtype == np.uint8
    expected = np.array([[pattern_code(feedback(g, s)) for s in WORDS] for g in WORDS], dtype=np.uint8)
    assert np.array_equal(matrix, expected)
    assert pattern_code("bbbbb") == 0 and pattern_code("ggggg") == 242 and pattern_code("ybbbb") == 1


def test_consistency_filter():
    kept = consistent_words([("train", "ybbyy")])
    assert "point" in kept and "train" not in kept
    assert all(feedback("train", w) == "ybbyy" for w in kept)
    assert consistent_words([("train", "ybbyy"), ("point", "ggggg")]) == ["point"]
    assert consistent_words([("green", "ybyyb")], words=["eight", "greet", "begin"]) == ["eight"]


def test_entropy_by_hand():
    """`aaaaa` splits the three candidates 1+2; `xxxbc` separates them all (bbbbb, bbbyb, bbbbg)."""
    words = ("aaaaa", "aaaab", "aaaac", "xxxbc")
    matrix = feedback_matrix(words)
    candidates = np.arange(3)
    entropy = pattern_entropy(matrix, np.array([0, 3]), candidates)
    assert entropy[0] == pytest.approx(-(1 / 3) * math.log2(1 / 3) - (2 / 3) * math.log2(2 / 3))
    assert entropy[1] == pytest.approx(math.log2(3))
    # Every candidate splits the others 1+2: a tie, which goes to the lowest index.
    assert best_guess(candidates, matrix) == 0
    assert best_guess(np.array([1, 2]), matrix) == 1


def test_optimal_policy_value_matches_config():
    returns = optimal_returns()
    assert returns.shape == (431,) and returns.min() >= -5.0 and returns.max() == 0.0
    assert (returns == 0.0).sum() == 1  # only the first guess itself is won without a miss
    config = OmegaConf.load(CONFIG)
    assert returns.mean() == pytest.approx(config.normalization.max, abs=1e-4)
    assert config.normalization.min == -6.0 and config.normalization.avg == -4.12


def test_optimal_action_plays_the_decision_tree_in_the_env():
    returns = optimal_returns()
    env = WordleEnv()
    for k in range(0, 431, 9):
        history, _ = env.reset(options={"secret": WORDS[k]})
        total, done = 0.0, False
        while not done:
            result = env.step(optimal_action(history))
            history, total, done = result.history, total + result.reward, result.terminated
        assert total == returns[k] and result.info["success"]


def test_batched_env_records_the_env_history():
    secrets = ["point", "green", "order"]
    batch = BatchedEnv(WordleEnv, len(secrets))
    batch.reset_all([{"secret": s} for s in secrets], seeds=[0, 1, 2])
    while batch.active:
        batch.step([optimal_action(batch.histories[i]) if i else "nope\n" for i in batch.active])
    assert batch.episodes[0].total_return == -6.0 and not batch.episodes[0].success
    for i, ep in enumerate(batch.episodes):
        assert ep.done and ep.turns == list(batch.envs[i].history) and ep.info["secret"] == secrets[i]
    assert batch.episodes[1].success and batch.episodes[2].success
