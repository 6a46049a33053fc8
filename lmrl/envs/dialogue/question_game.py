"""The rules Twenty Questions and Guess My City share (LMRL-Gym's question games).

The history opens with `Questions:\\n`; each agent utterance is one question, answered by
an oracle with one line; every question costs -1 except a correct guess, which gets 0 and
ends the game, and the game ends after `max_questions` (20).  Returns lie in [-20, 0].
An oracle has `answer(secret, question) -> reply` (with `.text`, `.correct_guess` and
`.parse.kind`), `answer_batch(secrets, questions)` and a knowledge base `kb`; subclasses
say what the secrets are (`secrets()`, `resolve(name)`).
"""

from __future__ import annotations

import abc
import random
from collections.abc import Sequence

from lmrl.envs.base import History, StepResult, Text, TextEnv

PROMPT = "Questions:\n"
MAX_QUESTIONS = 20


class QuestionGameEnv(TextEnv):
    """Find the oracle's secret with questions.  `reset(options={"secret": name})` fixes it."""

    #: What the secret is called in error messages ("object", "city").
    noun = "secret"

    def __init__(self, oracle, max_questions: int = MAX_QUESTIONS):
        if int(max_questions) < 1:
            raise ValueError(f"max_questions must be at least 1, got {max_questions}")
        self.max_questions = int(max_questions)
        self.oracle = oracle
        self._rng = random.Random()
        self.secret = self.secrets()[0]
        self.num_questions = 0
        self.done = True
        self.history: History = ()

    @abc.abstractmethod
    def secrets(self) -> list[str]:
        """Every possible secret, by canonical name."""

    @abc.abstractmethod
    def resolve(self, name: str) -> str | None:
        """The canonical name of a secret given by any accepted name, or None."""

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[History, dict]:
        """Start a game about `options["secret"]` (any name `resolve` accepts), else a random secret from the env's
        RNG."""
        if seed is not None:
            self._rng.seed(seed)
        secret = (options or {}).get("secret")
        if secret is None:
            secret = self._rng.choice(self.secrets())
        else:
            name = self.resolve(secret) if isinstance(secret, str) else None
            if name is None:
                names = self.secrets()
                raise ValueError(f"secret {secret!r} is not one of the {len(names)} {self.noun} names: {names}")
            secret = name
        self.secret, self.num_questions, self.done = secret, 0, False
        self.history = (Text(PROMPT, False),)
        return self.history, {"secret": secret}

    @staticmethod
    def prefetch_batch(envs: Sequence[QuestionGameEnv], actions: Sequence[str]) -> None:
        """Batched rollouts call this with the active envs and their next actions before stepping
        them: the oracle answers all in one pass (one embedding batch, or one LM generate call)
        and caches the answers that `step` then reads."""
        envs[0].oracle.answer_batch([e.secret for e in envs], [a.removesuffix("\n") for a in actions])

    def step(self, action: str) -> StepResult:
        """One question (or guess) answered by the oracle: 0 and terminated for a correct guess, else -1; the
        `max_questions`-th question ends the episode. `info["invalid"]` marks a question the oracle did not
        understand."""
        if self.done:
            raise RuntimeError("step() called on a finished episode; call reset() first")
        reply = self.oracle.answer(self.secret, action.removesuffix("\n"))
        self.num_questions += 1
        self.done = reply.correct_guess or self.num_questions >= self.max_questions
        self.history = self.history + (Text(action, True), Text(reply.text + "\n", False))
        info = {"secret": self.secret, "success": reply.correct_guess, "questions": self.num_questions,
                "understood": reply.parse.kind != "unknown", "invalid": reply.parse.kind == "unknown"}
        return StepResult(self.history, 0.0 if reply.correct_guess else -1.0, self.done, False, info)

    def eval_reset_options(self) -> list[dict]:
        """Every secret once (the original's guesser evaluation played each word once)."""
        return [{"secret": name} for name in self.secrets()]


def build_oracle(spec, default, task: str):
    """The oracle an env config asks for: None or "kb" -> `default()` (knowledge-grounded);
    a mapping `{kind: lm, model: ..., ...}` -> an LM oracle (`lm_oracle.py`) over `default()`;
    an oracle object is used as is."""
    if hasattr(spec, "answer_batch"):
        return spec
    from lmrl.envs.dialogue.lm_oracle import LMQuestionOracle, lm_spec_from_config

    lm_spec = lm_spec_from_config(spec)
    return default() if lm_spec is None else LMQuestionOracle(default(), task, lm_spec)
