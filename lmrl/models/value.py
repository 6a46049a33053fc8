"""Value heads on a causal-LM trunk, and the value-guided LM used for policy extraction.

`ValueModel` puts Q heads (d -> d -> |V|, one Q value per next token) and optionally a V head
(d -> d -> 1) on a trunk.  With `keep_lm_head` it also returns the LM logits: that is the
shared-trunk layout (trlx), where one network is both policy and critic.

`GuidedLM` is what the sampler sees: `logits = policy_logits + beta * min_i Q_i`, with one
KV cache per trunk carried together, so value-guided sampling never recomputes a prefix.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import torch
from torch import nn

from lmrl.models.fused import StackedGPT2, fusable


def no_autocast(device: torch.device):
    """Autocast off for the block (a no-op on devices without autocast)."""
    if torch.amp.is_autocast_available(device.type):
        return torch.autocast(device.type, enabled=False)
    return contextlib.nullcontext()


def trunk_of(lm: nn.Module) -> nn.Module:
    """The transformer under a causal LM's head (its hidden states); a LoRA model's (`lmrl.models.lora`) is the
    wrapped LM's, with the adapters in its layers."""
    inner = lm.get_base_model() if hasattr(lm, "get_base_model") else lm
    return inner.base_model


class MLPHead(nn.Module):
    """d -> d -> out with ReLU; the last layer starts at zero weights and a constant bias."""

    def __init__(self, d: int, out: int, bias_init: float = 0.0):
        super().__init__()
        self.hidden, self.out = nn.Linear(d, d), nn.Linear(d, out)
        nn.init.zeros_(self.out.weight)
        nn.init.constant_(self.out.bias, bias_init)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """The head's outputs for hidden states `h` [..., d]."""
        return self.out(torch.relu(self.hidden(h)))


@dataclass
class ValueOutput:
    """What `ValueModel` returns: the Q heads' outputs [B, T, V] each, V [B, T] or None, the LM head's logits when it is
    kept (shared trunk, PPO), and the KV cache with `use_cache`."""

    qs: list[torch.Tensor]  # each [B, T, V]
    v: torch.Tensor | None  # [B, T]
    logits: torch.Tensor | None  # [B, T, V] when the LM head is kept
    past_key_values: object = None


class ValueModel(nn.Module):
    """Q (and V) heads on the trunk of `lm`; the trunk is trained with them."""

    def __init__(self, lm: nn.Module, n_q: int, with_v: bool, keep_lm_head: bool = False, bias_init: float = 0.0):
        super().__init__()
        self.lm = lm  # kept whole so save_pretrained/config/embeddings keep working
        self.keep_lm_head = keep_lm_head
        d, vocab = lm.config.hidden_size, lm.get_output_embeddings().weight.shape[0]
        self.q_heads = nn.ModuleList(MLPHead(d, vocab, bias_init) for _ in range(n_q))
        self.v_head = MLPHead(d, 1, bias_init) if with_v else None

    @property
    def config(self):
        return self.lm.config

    def get_output_embeddings(self):
        return self.lm.get_output_embeddings()

    def forward(self, input_ids, attention_mask=None, position_ids=None, past_key_values=None, use_cache=False,
                logits_to_keep: int = 0):
        """Heads on every position, or on the last `logits_to_keep` (sampling needs only the last)."""
        out = trunk_of(self.lm)(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                                past_key_values=past_key_values, use_cache=use_cache)
        h = out.last_hidden_state[:, -logits_to_keep:]  # [B, T, d]; -0: all positions
        logits = self.lm.get_output_embeddings()(h) if self.keep_lm_head else None
        with no_autocast(h.device):  # values of ~-20 differ by fractions: bf16 would round them to 1/8
            x = h.to(self.head_dtype)
            v = self.v_head(x).squeeze(-1) if self.v_head is not None else None
            qs = [head(x) for head in self.q_heads]
        return ValueOutput(qs, v, logits, out.past_key_values if use_cache else None)

    @property
    def head_dtype(self) -> torch.dtype:
        """The heads' weights' dtype: fp32 under autocast (fp32 weights), bf16 when DeepSpeed cast them."""
        return next(self.q_heads.parameters() if len(self.q_heads) else self.v_head.parameters()).dtype


@dataclass
class GuidedOutput:
    """What `GuidedLM` returns: the guided logits and one KV cache per trunk."""

    logits: torch.Tensor
    past_key_values: tuple


class GuidedLM(nn.Module):
    """logits_policy + beta * min(Q1, Q2) (MC: + beta * Q), each trunk with its own KV cache.

    `policy` is a frozen causal LM (the BC checkpoint) or None for a shared trunk, where the
    value model's own LM head is the policy.  With `min_prob`, only tokens the policy gives at
    least that probability stay eligible (its argmax always does) — the same guard as trlx's
    top-k at ILQL generation, but adaptive: Q of a token the data never shows is never trained
    and sits at its initial value, which beta * Q would otherwise prefer over every trained
    token in a bad state.
    """

    def __init__(self, value: ValueModel, policy: nn.Module | None, beta: float, min_prob: float = 0.0):
        super().__init__()
        self.value, self.policy, self.beta, self.min_prob = value, policy, beta, min_prob
        trunks = [value.lm] if policy is None else [value.lm, policy]
        # GPT-2 trunks run stacked in one pass (a weight snapshot: build after training)
        self.fused = StackedGPT2(trunks) if fusable(*trunks) else None

    @property
    def config(self):
        return self.value.config

    @property
    def device(self) -> torch.device:
        return self.value.lm.device

    def get_output_embeddings(self):
        return self.value.get_output_embeddings()

    def forward(self, input_ids, attention_mask=None, position_ids=None, past_key_values=None, use_cache=False,
                logits_to_keep: int = 0):
        """A causal LM's forward with guided logits [B, T, V] (the last `logits_to_keep` positions; 0 = all): the
        policy's logits + beta x the critic's (min) Q, tokens below `min_prob` under the policy masked out; both trunks'
        KV caches are kept for the next call."""
        if self.fused is not None:
            hidden, past = self.fused(input_ids, attention_mask, position_ids, past_key_values)
            hidden = hidden[:, :, -logits_to_keep:]
            qs = [head(hidden[0]) for head in self.value.q_heads]
            lm = self.value.lm if self.policy is None else self.policy
            logits = lm.get_output_embeddings()(hidden[-1])
        else:
            qs, logits, past = self._unfused(input_ids, attention_mask, position_ids, past_key_values, use_cache,
                                             logits_to_keep)
        q = qs[0] if len(qs) == 1 else torch.minimum(qs[0], qs[1])  # ILQL: pessimistic over the two heads
        guided = logits.float() + self.beta * q.float()
        if self.min_prob > 0:
            logp = torch.log_softmax(logits.float(), dim=-1)
            outside = (logp < math.log(self.min_prob)) & (logp < logp.max(dim=-1, keepdim=True).values)
            guided = guided.masked_fill(outside, float("-inf"))  # outside the policy's support
        return GuidedOutput(guided, past)

    def _unfused(self, input_ids, attention_mask, position_ids, past_key_values, use_cache, logits_to_keep):
        """Any architecture: each trunk through its Hugging Face forward, with its own cache."""
        past_value, past_policy = past_key_values if past_key_values is not None else (None, None)
        vout = self.value(input_ids, attention_mask, position_ids, past_value, use_cache, logits_to_keep)
        if self.policy is None:
            return vout.qs, vout.logits, (vout.past_key_values, None)
        pout = self.policy(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                           past_key_values=past_policy, use_cache=use_cache, logits_to_keep=logits_to_keep)
        return vout.qs, pout.logits, (vout.past_key_values, pout.past_key_values)
