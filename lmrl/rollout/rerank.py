"""Reranker policy for tasks with an enumerable action set (maze): the critic picks the move.

Each candidate action is appended to the prompt and scored by the summed advantage of its
tokens, `sum_t min_i Q_i(s_t, a_t) - V(s_t)` (MC, no V head: `sum_t Q(s_t, a_t)`).  All
histories x candidates go through the value model in one right-padded batch.  The policy takes
the argmax, or (`temperature` > 0) samples from softmax(scores / temperature): the original's two
modes.  Under partial observation the argmax is a deterministic function of the window, so it can
walk a loop until the turn limit; sampling breaks such loops.
"""

from __future__ import annotations

from typing import Sequence

import torch

from lmrl.data.tokenize import SegmentEncoder
from lmrl.envs.base import History
from lmrl.models.factory import model_max_length
from lmrl.rollout.policy import prompt_ids


# Floats of one Q head's output per reranking forward (2**26: 256 MB in fp32).
LOGIT_ELEMENTS = 2**26


class RerankPolicy:
    """A policy for tasks with an action list: every action is scored by the critic's summed advantage over its tokens
    after the history window (see the module docstring), and the best is taken (`temperature` 0) or one is sampled from
    softmax(scores / temperature). `act(histories)` returns one action per history."""

    def __init__(self, value, tokenizer, actions: Sequence[str], history_window: int | None, max_input_tokens: int,
                 seed: int = 0, batch_size: int = 512, temperature: float = 0.0):
        if temperature < 0:
            raise ValueError(f"reranker temperature must be >= 0 (0 = argmax; got {temperature})")
        self.value, self.tokenizer, self.actions = value, tokenizer, list(actions)
        self.temperature = temperature
        # Scores come back on the host, so the sampler's generator lives there whatever the model's device.
        self.generator = torch.Generator().manual_seed(seed)
        self.window, self.batch_size = history_window, batch_size
        self.encode = SegmentEncoder(tokenizer)
        self.candidates = [list(self.encode(a)) for a in self.actions]
        longest = max(len(c) for c in self.candidates)
        self.max_input_tokens = min(max_input_tokens, model_max_length(value) - longest)

    @torch.no_grad()
    def scores(self, prompts: list[list[int]]) -> torch.Tensor:
        """[len(prompts), n_actions] summed advantages."""
        rows = [(p, c) for p in prompts for c in self.candidates]
        # The forward's Q heads are [rows, length, vocab] each: with GPT-2's 50,257 tokens, 100 maze rows were 2 GB a
        # head.  Rows per forward are capped so that one head's output stays under LOGIT_ELEMENTS floats.
        length = max((len(p) + len(c) for p, c in rows), default=1)
        step = max(1, min(self.batch_size, LOGIT_ELEMENTS // (length * len(self.tokenizer))))
        out = torch.cat([self._score_rows(rows[i : i + step]) for i in range(0, len(rows), step)])
        return out.view(len(prompts), len(self.candidates))

    def _score_rows(self, rows: list[tuple[list[int], list[int]]]) -> torch.Tensor:
        """Summed advantages of each row's candidate tokens -> [R] (on the host)."""
        length = max(len(p) + len(c) for p, c in rows)
        ids = torch.full((len(rows), length), self.tokenizer.pad_token_id, dtype=torch.long)
        attn = torch.zeros_like(ids)
        row, pos, tok = [], [], []  # one entry per candidate token: (row, position predicting it, token)
        for b, (p, c) in enumerate(rows):
            ids[b, : len(p) + len(c)] = torch.tensor(p + c)
            attn[b, : len(p) + len(c)] = 1
            row += [b] * len(c)
            pos += range(len(p) - 1, len(p) + len(c) - 1)
            tok += c
        device = next(self.value.parameters()).device
        ids, attn, row, pos, tok = (torch.as_tensor(x).to(device) for x in (ids, attn, row, pos, tok))
        out = self.value(ids, attn)
        adv = torch.stack([q[row, pos, tok] for q in out.qs]).min(dim=0).values  # [tokens]; no stacked [R, T, V] copy
        if out.v is not None:
            adv = adv - out.v[row, pos]
        return torch.zeros(len(rows), device=device).index_add_(0, row, adv.float()).cpu()

    def act(self, histories: Sequence[History]) -> list[str]:
        """One action per history: the argmax of the actions' scores, or a sample at `temperature`."""
        was_training = self.value.training
        self.value.eval()
        prompts = [prompt_ids(h, self.window, self.encode, self.max_input_tokens) for h in histories]
        scores = self.scores(prompts)
        if self.temperature > 0:
            best = torch.multinomial(torch.softmax(scores / self.temperature, dim=-1), 1, generator=self.generator)
            best = best.squeeze(-1).tolist()
        else:
            best = scores.argmax(dim=-1).tolist()
        self.value.train(was_training)
        return [self.actions[k] for k in best]
