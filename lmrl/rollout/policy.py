"""Policies: anything with `act(histories) -> actions`, batched over episodes."""

from __future__ import annotations

import random
from typing import Protocol, Sequence

import torch

from lmrl.data.tokenize import SegmentEncoder, tokenize_segments
from lmrl.envs.base import History, Text, history_window
from lmrl.models.factory import model_max_length
from lmrl.models.fused import fast_lm
from lmrl.rollout.sampler import newline_stop_mask, sample_turns


class Policy(Protocol):
    """`act(histories) -> actions`; one that sets `wants_legal_actions = True` is called by `run_episodes` as
    `act(histories, legal=[env.legal_actions() of each])` (algo=prompt chooses among them)."""

    def act(self, histories: Sequence[History]) -> list[str]:
        """One action per history, in order: the agent's whole turn as the env receives it."""


def end_turn(text: str) -> str:
    """Keep the text up to its first newline and end it with exactly one (the original's rule).

    LMRL-Gym's policies stop generating at a newline and their output processing drops one trailing
    newline and appends one to every turn (`out_str_process` in maze/bc/eval_bc.py, maze/ilql/eval_ilql.py,
    maze/ppo/train_ppo_online.py, wordle/bc/eval_bc.py, ...), so a turn cut off at the token budget
    reaches the env with its newline: `move up` becomes the valid `move up\\n` there too."""
    return text.split("\n", 1)[0] + "\n"


def prompt_ids(history: History, window: int | None, encode: SegmentEncoder, max_tokens: int) -> list[int]:
    """The policy's input: the history window, tokenized per segment, left-truncated."""
    segments = [Text(t.text, False) for t in history_window(history, window)]
    return tokenize_segments(segments, [0.0] * len(segments), encode, max_tokens).input_ids.tolist()


class LMPolicy:
    """Samples each agent turn from a causal LM, conditioned on the task's history window."""

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer,
        history_window: int | None,
        max_input_tokens: int,
        max_new_tokens: int,
        temperature: float = 1.0,
        batch_size: int = 256,
        seed: int = 0,
        logits_hook=None,
    ):
        self.model, self.tokenizer = fast_lm(model), tokenizer
        # The prompt plus the turn being generated must fit the model's context.
        self.window = history_window
        self.max_input_tokens = min(max_input_tokens, model_max_length(model) - max_new_tokens)
        self.max_new_tokens, self.temperature, self.batch_size = max_new_tokens, temperature, batch_size
        self.encode = SegmentEncoder(tokenizer)
        vocab = model.get_output_embeddings().weight.shape[0]
        self.stop_mask = newline_stop_mask(tokenizer, vocab)
        self.seed, self.logits_hook = seed, logits_hook
        self.generator, self.generator_device = None, None

    def prompt_ids(self, history: History) -> list[int]:
        """The model's input for one history (`prompt_ids` with this policy's window and token budget)."""
        return prompt_ids(history, self.window, self.encode, self.max_input_tokens)

    def sampling_generator(self) -> torch.Generator:
        """The seeded generator on the model's device (sampling happens there), made on first use
        and again only if the model moves: a seeded run draws the same stream on each device."""
        device = next(self.model.parameters()).device
        if self.generator is None or self.generator_device != device:
            self.generator, self.generator_device = torch.Generator(device=device).manual_seed(self.seed), device
        return self.generator

    def act(self, histories: Sequence[History]) -> list[str]:
        """One sampled turn per history, batched `batch_size` at a time, each ending at its first newline
        (`end_turn`)."""
        was_training = self.model.training
        self.model.eval()
        prompts = [self.prompt_ids(h) for h in histories]
        actions: list[str] = []
        for start in range(0, len(prompts), self.batch_size):
            rows = sample_turns(
                self.model, prompts[start : start + self.batch_size], self.stop_mask, self.tokenizer.pad_token_id,
                self.max_new_tokens, self.temperature, self.sampling_generator(), self.logits_hook,
            )
            actions += [end_turn(self.tokenizer.decode(r, skip_special_tokens=True)) for r in rows]
        self.model.train(was_training)
        return actions


class RandomPolicy:
    """Uniform over a fixed list of actions: the baseline learning tests compare against."""

    def __init__(self, actions: Sequence[str], seed: int = 0):
        self.actions, self.rng = list(actions), random.Random(seed)

    def act(self, histories: Sequence[History]) -> list[str]:
        """A uniformly drawn action per history."""
        return [self.rng.choice(self.actions) for _ in histories]
