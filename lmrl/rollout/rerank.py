"""Reranker policy for tasks with an enumerable action set (maze): the critic picks the move.

Each candidate action is appended to the prompt and scored by the summed advantage of its
tokens, `sum_t min_i Q_i(s_t, a_t) - V(s_t)` (MC, no V head: `sum_t Q(s_t, a_t)`).  All
histories x candidates go through the value model in one right-padded batch.
"""

from __future__ import annotations

from typing import Sequence

import torch

from lmrl.data.tokenize import SegmentEncoder
from lmrl.envs.base import History
from lmrl.models.factory import model_max_length
from lmrl.rollout.policy import prompt_ids


class RerankPolicy:
    def __init__(self, value, tokenizer, actions: Sequence[str], history_window: int | None, max_input_tokens: int,
                 seed: int = 0, batch_size: int = 512):
        self.value, self.tokenizer, self.actions = value, tokenizer, list(actions)
        self.window, self.batch_size = history_window, batch_size
        self.encode = SegmentEncoder(tokenizer)
        self.candidates = [list(self.encode(a)) for a in self.actions]
        longest = max(len(c) for c in self.candidates)
        self.max_input_tokens = min(max_input_tokens, model_max_length(value) - longest)

    @torch.no_grad()
    def scores(self, prompts: list[list[int]]) -> torch.Tensor:
        """[len(prompts), n_actions] summed advantages."""
        rows = [(p, c) for p in prompts for c in self.candidates]
        out = torch.cat([self._score_rows(rows[i : i + self.batch_size]) for i in range(0, len(rows), self.batch_size)])
        return out.view(len(prompts), len(self.candidates))

    def _score_rows(self, rows: list[tuple[list[int], list[int]]]) -> torch.Tensor:
        length = max(len(p) + len(c) for p, c in rows)
        pad = self.tokenizer.pad_token_id
        ids = torch.full((len(rows), length), pad, dtype=torch.long)
        attn = torch.zeros_like(ids)
        for b, (p, c) in enumerate(rows):
            ids[b, : len(p) + len(c)] = torch.tensor(p + c)
            attn[b, : len(p) + len(c)] = 1
        out = self.value(ids, attn)
        q = torch.stack(out.qs).min(dim=0).values  # [R, T, V]
        scores = torch.zeros(len(rows))
        for b, (p, c) in enumerate(rows):
            pos = torch.arange(len(p) - 1, len(p) + len(c) - 1)  # positions predicting the candidate's tokens
            adv = q[b, pos, torch.tensor(c)]
            if out.v is not None:
                adv = adv - out.v[b, pos]
            scores[b] = adv.sum()
        return scores

    def act(self, histories: Sequence[History]) -> list[str]:
        was_training = self.value.training
        self.value.eval()
        prompts = [prompt_ids(h, self.window, self.encode, self.max_input_tokens) for h in histories]
        best = self.scores(prompts).argmax(dim=-1).tolist()
        self.value.train(was_training)
        return [self.actions[k] for k in best]
