"""Chat-style completion with a local causal LM: what `algo=prompt` (local backend) and
`lmrl.serve` share.

Models with a chat template (SmolLM2-Instruct, most instruct models) get it; models without
one (our trained policies) get the messages' contents concatenated, each ending in a newline —
for a policy trained on task text, send the game history as the one user message and the
prompt is exactly what it was trained on.
"""

from __future__ import annotations

import threading
from typing import Sequence

import torch

from lmrl.models.factory import model_max_length


def render(messages: Sequence[dict], tokenizer) -> str:
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
    return "".join(m["content"] if m["content"].endswith("\n") else m["content"] + "\n" for m in messages)


class ChatModel:
    """Batched completions (greedy at temperature 0, else sampling), prompts left-truncated to fit."""

    def __init__(self, model: torch.nn.Module, tokenizer, seed: int = 0):
        self.model, self.tokenizer = model.eval(), tokenizer
        self.chat = bool(getattr(tokenizer, "chat_template", None))
        self.seed = seed
        self.lock = threading.Lock()  # one generation at a time (the server is threaded)

    def complete(self, conversations: Sequence[Sequence[dict]], max_new_tokens: int = 32,
                 temperature: float = 0.0) -> list[str]:
        if not conversations:
            return []
        tok = self.tokenizer
        tok.padding_side, tok.truncation_side = "left", "left"
        texts = [render(c, tok) for c in conversations]
        limit = max(1, model_max_length(self.model) - max_new_tokens)
        batch = tok(texts, return_tensors="pt", padding=True, truncation=True, max_length=limit,
                    add_special_tokens=not self.chat)
        device = next(self.model.parameters()).device
        batch = {k: v.to(device) for k, v in batch.items() if k in ("input_ids", "attention_mask")}
        sample = temperature > 0
        with self.lock, torch.inference_mode():
            torch.manual_seed(self.seed)
            out = self.model.generate(**batch, max_new_tokens=max_new_tokens, do_sample=sample,
                                      temperature=temperature if sample else None, top_k=0 if sample else None,
                                      top_p=None, pad_token_id=tok.pad_token_id)
        new = out[:, batch["input_ids"].shape[1]:]
        return tok.batch_decode(new, skip_special_tokens=True)
