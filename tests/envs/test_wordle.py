"""WordleEnv against the original LMRL-Gym rules: text, rewards, tries, feedback, secrets, optimal policy."""

import hashlib
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
    env, results = play("point", ["t o p i c\n", "p o i n t\n"])
    assert history_to_str(env.history) == "Wordle:\nt o p i c\ny g y y b\np o i n t\ng g g g g\n"
    assert [r.reward for r in results] == [-1.0, 0.0]
    assert [(r.terminated, r.truncated) for r in results] == [(False, False), (True, False)]
    assert results[-1].info == {"secret": "point", "success": True, "invalid": False, "guesses": 2}
    assert [t.is_action for t in env.history] == [False, True, False, True, False]


def test_reference_example_invalid_words_then_valid():
    """The reference's transcript from the original env, verbatim: `crane` and `xxxxx` are not in the list
    (an empty feedback line, -1 each); `aroma` is one of the three secrets consistent with its feedback."""
    guesses = ["c r a n e\n", "x x x x x\n", "s l a t e\n", "p o i n t\n", "a r o m a\n"]
    env, results = play("aroma", guesses)
    reference = "Wordle:\nc r a n e\n\nx x x x x\n\ns l a t e\nb b y b b\np o i n t\nb y b b b\n"
    assert history_to_str(env.history) == reference + "a r o m a\ng g g g g\n"
    assert consistent_words([("slate", "bbybb"), ("point", "bybbb")]) == ["cacao", "bayou", "aroma"]
    assert [r.reward for r in results] == [-1.0, -1.0, -1.0, -1.0, 0.0]
    assert [r.info["invalid"] for r in results] == [True, True, False, False, False]
    assert results[-1].terminated and results[-1].info["success"]


@pytest.mark.parametrize("guess, secret, expected", [
    ("green", "eight", "ybyyb"),  # standard Wordle: y b y b b (eight has one e)
    ("error", "order", "ygyyg"),  # standard Wordle: y g b y g (order has two r's, both matched green)
    ("sheep", "eight", "byyyb"),  # standard Wordle: b y y b b
    ("eight", "level", "ybbbb"),
    ("three", "teeth", "gybyy"),
    ("point", "point", "ggggg"),
    ("music", "heavy", "bbbbb"),
    ("retro", "robin", "gbbyy"),  # standard Wordle: g b b b y (robin's one r is matched green)
])
def test_repeated_letter_feedback_is_the_originals_rule(guess, secret, expected):
    assert feedback(guess, secret) == expected


def test_repeated_letter_feedback_in_the_env_text():
    _, results = play("robin", ["r e t r o\n"])
    assert results[0].history[-1] == Text("g b b y y\n", False)


def test_six_wrong_guesses_end_the_game_at_minus_six():
    env, results = play("point", ["t o p i c\n"] * 5 + ["s h e e p\n"])
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
    history, info = env.reset(options={"secret": "sheep"})
    assert history == (Text("Wordle:\n", False),) and info == {"secret": "sheep"} and env.secret == "sheep"
    for bad in ("crane", "SHEEP", "shee", 42):
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


# sha256 of LMRL-Gym's llm_rl_scripts/wordle/vocab/wordle_official_400.txt at commit bdf9b3f3 (431 words, no final
# newline), which is the word lines of our file joined by newlines.
ORIGINAL_LIST_SHA256 = "d206b79145f65345154976a6d6cb328f639cd22bd65cfd0c58c3c7b4a277547b"


def test_word_list_file_is_the_originals_list():
    lines = WORDS_PATH.read_text(encoding="utf-8").splitlines()
    header = [line for line in lines if line.startswith("#")]
    words = lines[len(header):]
    assert lines[: len(header)] == header and tuple(words) == WORDS
    assert len(words) == 431 and len(set(words)) == 431 and all(re.fullmatch(r"[a-z]{5}", w) for w in words)
    assert hashlib.sha256("\n".join(words).encode()).hexdigest() == ORIGINAL_LIST_SHA256
    provenance = "\n".join(header)
    for fact in ("https://github.com/abdulhaim/LMRL-Gym", "bdf9b3f34617ceba88e0c1774e9ac665c4155468",
                 "llm_rl_scripts/wordle/vocab/wordle_official_400.txt", "MIT License",
                 "Copyright (c) 2022 Charlie Snell", ORIGINAL_LIST_SHA256):
        assert fact in provenance


def test_legal_actions_and_eval_starts_cover_the_list():
    env = WordleEnv()
    env.reset(seed=0)
    actions = env.legal_actions()
    assert len(actions) == 431 and actions[0] == "e l e c t\n" and len(set(actions)) == 431
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


def test_random_tie_breaks_give_the_same_mean_return():
    """The original picks a tied best word at random; averaged over those choices, its mean return is ours."""
    matrix, win = feedback_matrix(), pattern_code("ggggg")

    def total_return(candidates: np.ndarray, guesses_made: int) -> float:  # summed over `candidates`
        entropy = pattern_entropy(matrix, candidates, candidates)
        best = candidates[entropy == entropy.max()]
        total = 0.0
        for guess in best:
            codes = matrix[guess, candidates]
            for code in np.unique(codes):
                group = candidates[codes == code]
                if code == win:
                    total += -float(guesses_made)
                elif guesses_made + 1 < 6:
                    total += total_return(group, guesses_made + 1)
                else:
                    total += -6.0 * len(group)
        return total / len(best)

    assert total_return(np.arange(len(WORDS)), 0) / len(WORDS) == pytest.approx(optimal_returns().mean(), abs=1e-12)


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
    secrets = ["point", "sheep", "robin"]
    batch = BatchedEnv(WordleEnv, len(secrets))
    batch.reset_all([{"secret": s} for s in secrets], seeds=[0, 1, 2])
    while batch.active:
        batch.step([optimal_action(batch.histories[i]) if i else "nope\n" for i in batch.active])
    assert batch.episodes[0].total_return == -6.0 and not batch.episodes[0].success
    for i, ep in enumerate(batch.episodes):
        assert ep.done and ep.turns == list(batch.envs[i].history) and ep.info["secret"] == secrets[i]
    assert batch.episodes[1].success and batch.episodes[2].success
