"""Many continuations of one prompt for the price of one prefill.

SWEET-RL samples N candidate turns at each dataset state and scores every one with a critic.
Both start from the same prefix, so the prefix runs once: `prefill` keeps its KV cache, and the
cache rows are repeated (`select_rows`) for every continuation.  Works with the fused GPT-2 cache
(a list of per-layer (k, v) tensors [N, B, H, S, d]) and Hugging Face `Cache` objects.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import torch

from lmrl.rollout.sampler import Prefilled, decode, prefill, right_pad


def select_rows(past, index: torch.Tensor):
    """The KV cache with its batch rows picked (repeats allowed) by `index` [R] (on the cache's device)."""
    if hasattr(past, "reorder_cache"):  # Hugging Face Cache: reordered in place, as beam search does
        past.reorder_cache(index)
        return past
    return [(k.index_select(1, index), v.index_select(1, index)) for k, v in past]  # fused: batch is dim 1


def repeat_prefilled(state: Prefilled, index: torch.Tensor) -> Prefilled:
    """A prefilled batch whose row r continues prefix `index[r]`."""
    logits = state.logits.index_select(0, index) if state.logits is not None else None
    return replace(state, past=select_rows(state.past, index), logits=logits,
                   attn=state.attn.index_select(0, index), next_pos=state.next_pos.index_select(0, index))


@torch.no_grad()
def sample_candidates(model: torch.nn.Module, prompts: Sequence[Sequence[int]], n: int, stop_mask: torch.Tensor,
                      pad_id: int, max_new_tokens: int, temperature: float = 1.0,
                      generator: torch.Generator | None = None) -> list[list[list[int]]]:
    """`n` sampled turns per prompt (each up to and including its stop token), with one prefill per prompt."""
    state = prefill(model, prompts, pad_id)
    index = torch.arange(len(prompts), device=state.attn.device).repeat_interleave(n)
    rows = decode(model, repeat_prefilled(state, index), stop_mask, pad_id, max_new_tokens, temperature, generator)
    return [rows[i * n : (i + 1) * n] for i in range(len(prompts))]


@torch.no_grad()
def continue_prefixes(model: torch.nn.Module, prefixes: Sequence[Sequence[int]], owner: Sequence[int],
                      continuations: Sequence[Sequence[int]], pad_id: int):
    """Teacher-force each continuation after its prefix (`owner[r]` indexes `prefixes`), every prefix run once.

    Returns (the prefix state's last logits per row [R, V] or None, the model's output over the right-padded
    continuation tokens, those tokens [R, C], their mask [R, C])."""
    state = prefill(model, prefixes, pad_id)
    device = state.attn.device
    rows = repeat_prefilled(state, torch.as_tensor(list(owner), dtype=torch.long, device=device))
    ids, mask = right_pad(continuations, pad_id)
    ids, mask = ids.to(device), mask.to(device)
    width = ids.shape[1]
    positions = rows.next_pos[:, None] + torch.arange(width, device=device)[None]
    # Padding after a short continuation sits at its prefix's next position (any valid one: it is masked), so a
    # long prefix with a short continuation never indexes past the model's positions because another row is long.
    positions = torch.where(mask.bool(), positions, rows.next_pos[:, None])
    out = model(input_ids=ids, attention_mask=torch.cat([rows.attn, mask], dim=-1), position_ids=positions,
                past_key_values=rows.past, use_cache=True)
    return rows.logits, out, ids, mask.bool()


def continuation_logprobs(first_logits: torch.Tensor, logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """log p of every continuation token [R, C] (fp32): token 0 from the prefix's last logits [R, V], token j
    from the output at j - 1 (logits [R, C, V])."""
    scores = torch.cat([first_logits[:, None], logits[:, :-1]], dim=1).float()
    return torch.log_softmax(scores, dim=-1).gather(-1, ids[..., None]).squeeze(-1)
