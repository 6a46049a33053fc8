"""Wordle: LMRL-Gym's rules and text format, and the information-gain optimal policy.

Rules (faithful to the original unless noted):

- One 431-word list holds both the possible secrets and the only accepted guesses: the
  original's own `wordle_official_400.txt`, verbatim and in its order (`data/wordle_words.txt`;
  its header names the source commit and the MIT licence).
- The secret is drawn uniformly from the list at reset with the env RNG.  The original
  draws a "target" lazily, uniformly from the words still consistent with the feedback,
  at every guess; that gives every game the same distribution as a uniform secret fixed
  up front, and a fixed secret can be set (`reset(options={"secret": "point"})`) and
  reported (`info["secret"]`).
- Feedback is per letter and not standard Wordle for repeated letters: `g` if the letter
  equals the secret's letter at that position, else `y` if the letter occurs anywhere in
  the secret, else `b`.  So `sheep` against `eight` is `b y y y b`: both e's are yellow
  although the secret has one e (standard Wordle would say `b y y b b`).
- Text, verbatim: the history opens with `Wordle:\\n`; a guess is five lowercase letters
  separated by single spaces (`s l a t e\\n`) and is answered with spaced feedback
  (`b b y b b\\n`).  Anything else, or a word not in the list, is answered with an empty
  line `\\n`, costs `invalid_reward` and uses one of the six tries.
- Reward -1 per guess and 0 for the winning guess.  The game ends on the win or on the
  sixth guess, both `terminated` (six tries is the game's rule, not a time limit), so
  returns lie in [-6, 0] with `invalid_reward=-1`.

Parsing is strict: exactly `x x x x x` with at most one trailing newline.  The original
stripped whitespace and deleted every space before looking the word up, and re-wrote
the history in the spaced form; we keep the agent's text verbatim in the history (the env
contract), so only text already in the canonical form is accepted.  `slate`, `S L A T E`
and `s  l a t e` are invalid.

The optimal policy guesses, among the words consistent with all feedback so far, the one
whose feedback pattern has maximal entropy (ties: the word listed first; the original picks
a tied word at random, which gives exactly the same mean return on this list).  Its mean
return over all secrets is the normalization maximum (`optimal_value`).
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from lmrl.envs.base import History, StepResult, Text, TextEnv

WORDS_PATH = Path(__file__).resolve().parent / "data" / "wordle_words.txt"
WORD_LENGTH = 5
MAX_GUESSES = 6
PROMPT = "Wordle:\n"
INVALID_FEEDBACK = "\n"
# Pattern codes are base 3 with position i as digit i: b=0, y=1, g=2.
DIGIT = {"b": 0, "y": 1, "g": 2}
NUM_PATTERNS = 3**WORD_LENGTH
WIN_CODE = NUM_PATTERNS - 1


def load_words(path: str | Path = WORDS_PATH) -> tuple[str, ...]:
    """The word list: one lowercase five-letter word a line; `#` lines are comments."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    words = tuple(line.strip() for line in lines if line.strip() and not line.startswith("#"))
    bad = [w for w in words if not re.fullmatch(r"[a-z]{5}", w)]
    if bad or len(set(words)) != len(words):
        raise ValueError(f"{path}: words must be unique five-letter lowercase a-z; bad: {bad[:5]}")
    return words


WORDS = load_words()
WORD_INDEX = {w: i for i, w in enumerate(WORDS)}


def spaced(letters: str) -> str:
    """`slate` -> `s l a t e\\n`: how guesses and feedback are written."""
    return " ".join(letters) + "\n"


ACTIONS = tuple(spaced(w) for w in WORDS)


def feedback(guess: str, secret: str) -> str:
    """The original's per-letter rule: `g` right place, `y` anywhere in the secret, else `b`."""
    return "".join("g" if c == s else "y" if c in secret else "b" for c, s in zip(guess, secret))


def pattern_code(pattern: str) -> int:
    return sum(DIGIT[c] * 3**i for i, c in enumerate(pattern))


def pattern_text(code: int) -> str:
    return "".join("byg"[(code // 3**i) % 3] for i in range(WORD_LENGTH))


# The env's answer for each pattern code: `b b y b b\n`.
FEEDBACK_TEXTS = tuple(spaced(pattern_text(code)) for code in range(NUM_PATTERNS))


def parse_guess(action: str, word_index: dict[str, int] = WORD_INDEX) -> str | None:
    """`s l a t e` with at most one trailing newline -> `slate` if it is a list word, else None."""
    body = action.removesuffix("\n")
    word = body[::2]
    if len(body) == 2 * WORD_LENGTH - 1 and body[1::2] == " " * (WORD_LENGTH - 1) and word in word_index:
        return word
    return None


def is_consistent(word: str, guess: str, pattern: str) -> bool:
    """Could `word` be the secret, given that `guess` was answered with `pattern`?"""
    return feedback(guess, word) == pattern


def consistent_words(observations: Iterable[tuple[str, str]], words: Sequence[str] = WORDS) -> list[str]:
    """The words consistent with every (guess, pattern) pair, in list order."""
    observations = list(observations)
    return [w for w in words if all(is_consistent(w, g, p) for g, p in observations)]


@functools.lru_cache(maxsize=4)
def feedback_matrix(words: tuple[str, ...] = WORDS) -> np.ndarray:
    """`M[g, s]` = pattern code of guess `words[g]` against secret `words[s]` (uint8, n x n)."""
    letters = np.array([[ord(c) - ord("a") for c in w] for w in words], dtype=np.int64)  # (n, 5)
    present = np.zeros((len(words), 26), dtype=bool)
    np.put_along_axis(present, letters, True, axis=1)  # present[s, letter]
    green = letters[:, None, :] == letters[None, :, :]  # (guess, secret, pos)
    anywhere = present[:, letters].transpose(1, 0, 2)  # present[s, letters[g, i]] -> (guess, secret, pos)
    digits = np.where(green, 2, np.where(anywhere, 1, 0))
    matrix = (digits * 3 ** np.arange(WORD_LENGTH)).sum(-1).astype(np.uint8)
    matrix.setflags(write=False)
    return matrix


def pattern_entropy(matrix: np.ndarray, guesses: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """Entropy (bits) of each guess's feedback when the secret is uniform over `candidates`.

    Counts are sorted before summing so guesses that split the candidates alike get
    bit-identical entropies and the tie-break stays a tie-break.
    """
    codes = matrix[np.ix_(guesses, candidates)].astype(np.int64)  # (guesses, candidates)
    offsets = NUM_PATTERNS * np.arange(len(guesses))[:, None]
    counts = np.bincount((codes + offsets).ravel(), minlength=NUM_PATTERNS * len(guesses))
    p = np.sort(counts.reshape(len(guesses), NUM_PATTERNS), axis=1) / len(candidates)
    logs = np.log2(p, out=np.zeros_like(p), where=p > 0)
    return -(p * logs).sum(axis=1)


def best_guess(candidates: np.ndarray, matrix: np.ndarray | None = None) -> int:
    """Index of the consistent word with maximal feedback entropy (ties: the lowest index).

    `candidates` are word indices in increasing order (the consistent set)."""
    matrix = feedback_matrix() if matrix is None else matrix
    return int(candidates[int(np.argmax(pattern_entropy(matrix, candidates, candidates)))])


def filter_candidates(candidates: np.ndarray, guess: int, code: int, matrix: np.ndarray) -> np.ndarray:
    """The consistency filter on indices: keep the candidates that would give `code` for `guess`."""
    return candidates[matrix[guess, candidates] == code]


def optimal_returns(matrix: np.ndarray | None = None) -> np.ndarray:
    """The optimal policy's return for every secret (index order), by walking its decision tree."""
    matrix = feedback_matrix() if matrix is None else matrix
    returns = np.full(len(matrix), -float(MAX_GUESSES))

    def walk(candidates: np.ndarray, guesses_made: int) -> None:
        guess, guesses_made = best_guess(candidates, matrix), guesses_made + 1
        codes = matrix[guess, candidates]
        for code in np.unique(codes):
            group = candidates[codes == code]
            if code == WIN_CODE:
                returns[group] = -(guesses_made - 1.0)  # -1 per guess, 0 for the winning one
            elif guesses_made < MAX_GUESSES:
                walk(group, guesses_made)

    walk(np.arange(len(matrix)), 0)
    return returns


def optimal_value() -> float:
    """Mean optimal return over every secret in the list: the normalization maximum."""
    return float(optimal_returns().mean())


def observations_from_history(history: Sequence[Text]) -> list[tuple[str, str]]:
    """(guess, pattern) for every valid guess in an env history; invalid guesses drop out."""
    pairs = []
    for action, answer in zip(history[1::2], history[2::2]):
        word = parse_guess(action.text)
        if word is not None and answer.text != INVALID_FEEDBACK:
            pairs.append((word, answer.text.replace(" ", "").rstrip("\n")))
    return pairs


def optimal_action(history: Sequence[Text]) -> str:
    """The information-gain optimal guess for an env history, as an action string."""
    matrix, candidates = feedback_matrix(), np.arange(len(WORDS))
    for word, pattern in observations_from_history(history):
        candidates = filter_candidates(candidates, WORD_INDEX[word], pattern_code(pattern), matrix)
    if len(candidates) == 0:
        raise ValueError("no word in the list is consistent with this history")
    return ACTIONS[best_guess(candidates, matrix)]


class WordleEnv(TextEnv):
    """Guess the secret word in six tries (see the module docstring for the exact rules).

    `invalid_reward` is the reward for an invalid guess: -1 in the original's data and
    evaluation, -10 in its ILQL/MC/PPO training envs.
    """

    def __init__(self, invalid_reward: float = -1.0):
        self.invalid_reward = float(invalid_reward)
        self._rng = random.Random()
        self._matrix = feedback_matrix()
        self.secret = WORDS[0]
        self.num_guesses = 0
        self.done = True
        self.history: History = ()

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[History, dict]:
        """Start a game with `options["secret"]` (a word of the list), else a random word from the env's RNG."""
        if seed is not None:
            self._rng.seed(seed)
        options = options or {}
        secret = options.get("secret")
        if secret is None:
            secret = self._rng.choice(WORDS)
        elif not isinstance(secret, str) or secret not in WORD_INDEX:
            raise ValueError(f"secret {secret!r} is not in the {len(WORDS)}-word list; choose one of {list(WORDS)}")
        self.secret, self.num_guesses, self.done = secret, 0, False
        self.history = (Text(PROMPT, False),)
        return self.history, {"secret": secret}

    def step(self, action: str) -> StepResult:
        """One guess: 0 and terminated when it is the secret, -1 for another list word (answered with the letter
        feedback), `invalid_reward` for anything else; the sixth guess ends the episode."""
        if self.done:
            raise RuntimeError("step() called on a finished episode; call reset() first")
        word = parse_guess(action)
        self.num_guesses += 1
        if word is None:
            answer, reward, success = INVALID_FEEDBACK, self.invalid_reward, False
        else:
            success = word == self.secret
            code = self._matrix[WORD_INDEX[word], WORD_INDEX[self.secret]]  # == feedback(word, secret)
            answer, reward = FEEDBACK_TEXTS[code], 0.0 if success else -1.0
        self.done = success or self.num_guesses >= MAX_GUESSES
        self.history = self.history + (Text(action, True), Text(answer, False))
        info = {"secret": self.secret, "success": success, "invalid": word is None, "guesses": self.num_guesses}
        return StepResult(self.history, reward, self.done, False, info)

    def eval_reset_options(self) -> list[dict]:
        """Every secret once: the evaluation protocol covers the whole list."""
        return [{"secret": w} for w in WORDS]

    def legal_actions(self) -> list[str]:
        """Every word of the list as a guess (spaced letters and a newline)."""
        return list(ACTIONS)
