"""Batched sampling with a KV cache, stopping each row at the end of its turn.

Prompts are left-padded with explicit attention masks and position ids, so rows of
different lengths share one forward pass.  A row stops when it emits any token whose text
contains a newline (agent turns end in `\\n`) or the eos token.  `logits_hook` lets
value-guided policies (ILQL, MC) add their term to the logits of each step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch

LogitsHook = Callable[[torch.Tensor, int], torch.Tensor]  # (logits [B, V], step) -> logits


def newline_stop_mask(tokenizer, vocab_size: int) -> torch.Tensor:
    """[V] bool: tokens that end a turn (contain a newline, or are eos)."""
    mask = torch.zeros(vocab_size, dtype=torch.bool)
    for i in range(min(vocab_size, len(tokenizer))):
        if "\n" in tokenizer.decode([i]):
            mask[i] = True
    if tokenizer.eos_token_id is not None:
        mask[tokenizer.eos_token_id] = True
    return mask


def left_pad(prompts: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token rows padded on the left -> (ids [R, max len], mask [R, max len]): each prompt ends at the last column,
    where decoding continues."""
    length = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), length), pad_id, dtype=torch.long)
    attn = torch.zeros((len(prompts), length), dtype=torch.long)
    for b, p in enumerate(prompts):
        if len(p):
            ids[b, length - len(p) :] = torch.as_tensor(list(p), dtype=torch.long)
            attn[b, length - len(p) :] = 1
    return ids, attn


def right_pad(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token rows padded on the right -> (ids [R, max len], mask [R, max len])."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for k, r in enumerate(rows):
        ids[k, : len(r)] = torch.as_tensor(list(r), dtype=torch.long)
        mask[k, : len(r)] = 1
    return ids, mask


def pick(logits: torch.Tensor, temperature: float, generator: torch.Generator | None) -> torch.Tensor:
    """Sample from softmax(logits / T); T = 0 is greedy."""
    if temperature == 0:
        return logits.argmax(-1)
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


@torch.no_grad()
def sample_turns(
    model: torch.nn.Module,
    prompts: Sequence[Sequence[int]],
    stop_mask: torch.Tensor,
    pad_id: int,
    max_new_tokens: int,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
    logits_hook: LogitsHook | None = None,
) -> list[list[int]]:
    """Generate one turn per prompt; returns each row's new tokens up to and including its stop token."""
    state = prefill(model, prompts, pad_id)
    return decode(model, state, stop_mask, pad_id, max_new_tokens, temperature, generator, logits_hook)


@dataclass
class Prefilled:
    """Left-padded prompts after one cached forward pass: what decoding continues from."""

    past: object  # the model's KV cache
    logits: torch.Tensor | None  # [B, V] at each prompt's last token
    attn: torch.Tensor  # [B, S] attention mask over the cached tokens
    next_pos: torch.Tensor  # [B] position id of each row's next token


@torch.no_grad()
def prefill(model: torch.nn.Module, prompts: Sequence[Sequence[int]], pad_id: int) -> Prefilled:
    """One forward pass over the left-padded prompts, keeping the KV cache and the last logits."""
    device = next(model.parameters()).device
    ids, attn = left_pad(prompts, pad_id)
    ids, attn = ids.to(device), attn.to(device)
    positions = (attn.cumsum(-1) - 1).clamp(min=0)
    # heads only at the last position: the prompt's other logits are never used
    out = model(input_ids=ids, attention_mask=attn, position_ids=positions, use_cache=True, logits_to_keep=1)
    logits = out.logits[:, -1] if out.logits is not None else None  # a value model without an LM head has none
    return Prefilled(out.past_key_values, logits, attn, positions[:, -1] + 1)


@torch.no_grad()
def decode(
    model: torch.nn.Module,
    state: Prefilled,
    stop_mask: torch.Tensor,
    pad_id: int,
    max_new_tokens: int,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
    logits_hook: LogitsHook | None = None,
) -> list[list[int]]:
    """Sample each row's turn from a prefilled state; the row's new tokens up to and including its stop token."""
    past, logits, attn, next_pos = state.past, state.logits, state.attn, state.next_pos
    device = logits.device
    finished = torch.zeros(logits.shape[0], dtype=torch.bool, device=device)
    stop_mask = stop_mask.to(device)
    new_tokens = []
    for step in range(max_new_tokens):
        if logits_hook is not None:
            logits = logits_hook(logits, step)
        tok = pick(logits, temperature, generator)
        tok = torch.where(finished, torch.full_like(tok, pad_id), tok)
        new_tokens.append(tok)
        finished |= stop_mask[tok]
        if bool(finished.all()) or step == max_new_tokens - 1:
            break
        attn = torch.cat([attn, torch.ones_like(attn[:, :1])], dim=-1)
        out = model(
            input_ids=tok[:, None], attention_mask=attn, position_ids=next_pos[:, None], past_key_values=past,
            use_cache=True, logits_to_keep=1,
        )
        past, logits, next_pos = out.past_key_values, out.logits[:, -1], next_pos + 1
    return _cut_rows(torch.stack(new_tokens, dim=1).tolist(), stop_mask.tolist())


def _cut_rows(rows: list[list[int]], stop: list[bool]) -> list[list[int]]:
    out = []
    for row in rows:
        end = next((k + 1 for k, t in enumerate(row) if stop[t]), len(row))
        out.append(row[:end])
    return out
