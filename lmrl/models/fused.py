"""A lean KV-cache forward pass for GPT-2 trunks that can run several trunks as one.

Why it exists: sampling a small model one token at a time is dominated by per-call framework
work (the Hugging Face forward builds masks and cache objects on every call), not by
arithmetic.  Value-guided sampling needs two trunks per token (the frozen BC policy and the
value trunk), so through Hugging Face it pays that work twice.  `StackedGPT2` stacks the
weights of N trunks of the same shape on a leading axis and runs them with batched matmuls:
one call's overhead for N trunks' work.  `python -m lmrl.bench` measures the effect.

Only the GPT-2 architecture is covered (the tiny default model and `model=gpt2`); `fusable`
says when, and callers fall back to the Hugging Face forward otherwise.  Inference only:
with one trunk the weights are views of the live parameters, with several they are a copy
taken at construction (build a new one after the weights change).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import GPT2Model

_ACTIVATIONS = {
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "gelu": F.gelu,
    "relu": F.relu,
}
_BLOCK = ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
          "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight",
          "mlp.c_proj.bias"]


def _trunk(lm: nn.Module) -> nn.Module:
    return getattr(lm, "transformer", lm)


def fusable(*lms: nn.Module) -> bool:
    """True when every model is a GPT-2 of one shape with the standard attention scaling, and none has adapters in
    its layers (LoRA: a fused pass would read the base weights alone)."""
    if not all(isinstance(_trunk(lm), GPT2Model) for lm in lms):
        return False
    if any(hasattr(module, "base_layer") for lm in lms for module in _trunk(lm).modules()):
        return False
    configs = [lm.config for lm in lms]
    shape = lambda c: (c.n_layer, c.n_embd, c.n_head, c.vocab_size, c.n_positions)  # noqa: E731
    return all(
        c.model_type == "gpt2" and c.activation_function in _ACTIVATIONS and c.scale_attn_weights
        and not c.scale_attn_by_inverse_layer_idx and not c.reorder_and_upcast_attn and shape(c) == shape(configs[0])
        for c in configs
    )


class StackedGPT2(nn.Module):
    """N GPT-2 trunks in one pass: hidden states [N, B, T, d] after the final layer norm."""

    def __init__(self, lms: list[nn.Module]):
        super().__init__()
        trunks = [_trunk(lm) for lm in lms]
        cfg = trunks[0].config
        self.n, self.n_head, self.eps = len(trunks), cfg.n_head, cfg.layer_norm_epsilon
        self.act = _ACTIVATIONS[cfg.activation_function]

        def stack(get):
            tensors = [get(t).detach() for t in trunks]
            return tensors[0].unsqueeze(0) if len(tensors) == 1 else torch.stack(tensors)

        self.wte = stack(lambda t: t.wte.weight)  # [N, V, d]
        self.wpe = stack(lambda t: t.wpe.weight)  # [N, P, d]
        self.blocks = [{name: stack(lambda t: t.h[i].get_parameter(name)) for name in _BLOCK}
                       for i in range(cfg.n_layer)]
        self.ln_f = (stack(lambda t: t.ln_f.weight), stack(lambda t: t.ln_f.bias))

    @property
    def device(self) -> torch.device:
        return self.wte.device

    def _norm(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        if self.n == 1:
            return F.layer_norm(x, x.shape[-1:], weight[0], bias[0], self.eps)
        return F.layer_norm(x, x.shape[-1:], eps=self.eps) * weight[:, None, None] + bias[:, None, None]

    @staticmethod
    def _linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """x [N, B, T, i] @ weight [N, i, o] + bias [N, o] (GPT-2's Conv1D stores [in, out])."""
        n, b, t, _ = x.shape
        return torch.baddbmm(bias[:, None], x.reshape(n, b * t, -1), weight).view(n, b, t, -1)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None, past: list[tuple[torch.Tensor, torch.Tensor]] | None = None):
        """input_ids, position_ids [B, T]; attention_mask [B, S] over cached + new tokens (default: all
        ones; positions default to counting attended tokens).
        Returns (hidden [N, B, T, d], cache: per layer (k, v) [N, B, H, S, d/H])."""
        if attention_mask is None:
            cached = past[0][0].shape[3] if past is not None else 0
            attention_mask = torch.ones(input_ids.shape[0], cached + input_ids.shape[1], dtype=torch.long,
                                        device=input_ids.device)
        if position_ids is None:
            position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)[:, -input_ids.shape[1] :]
        batch, new = input_ids.shape
        total = attention_mask.shape[1]
        keys = torch.arange(total, device=input_ids.device)
        queries = keys[total - new :]
        allowed = (keys[None, :] <= queries[:, None])[None] & attention_mask[:, None, :].bool()  # [B, T, S]
        # a padding query sees itself, so its (ignored) row stays finite instead of NaN
        allowed = (allowed | (keys[None, :] == queries[:, None])).unsqueeze(1)  # [B, 1, T, S]
        x = self.wte[:, input_ids] + self.wpe[:, position_ids]  # [N, B, T, d]
        n, d = self.n, x.shape[-1]
        heads, head_dim = self.n_head, d // self.n_head
        cache = []
        for i, p in enumerate(self.blocks):
            h = self._norm(x, p["ln_1.weight"], p["ln_1.bias"])
            qkv = self._linear(h, p["attn.c_attn.weight"], p["attn.c_attn.bias"])
            q, k, v = qkv.view(n, batch, new, 3, heads, head_dim).permute(3, 0, 1, 4, 2, 5)  # each [N, B, H, T, hd]
            if past is not None:
                k, v = torch.cat([past[i][0], k], dim=3), torch.cat([past[i][1], v], dim=3)
            cache.append((k, v))
            a = F.scaled_dot_product_attention(q.reshape(n * batch, heads, new, head_dim),
                                               k.reshape(n * batch, heads, total, head_dim),
                                               v.reshape(n * batch, heads, total, head_dim),
                                               attn_mask=allowed.repeat(n, 1, 1, 1))
            a = a.view(n, batch, heads, new, head_dim).transpose(2, 3).reshape(n, batch, new, d)
            x = x + self._linear(a, p["attn.c_proj.weight"], p["attn.c_proj.bias"])
            h = self._norm(x, p["ln_2.weight"], p["ln_2.bias"])
            h = self.act(self._linear(h, p["mlp.c_fc.weight"], p["mlp.c_fc.bias"]))
            x = x + self._linear(h, p["mlp.c_proj.weight"], p["mlp.c_proj.bias"])
        return self._norm(x, *self.ln_f), cache


@dataclass
class LMOutput:
    """What `FastCausalLM` returns: the logits and the KV cache, as a Hugging Face model's output names them."""

    logits: torch.Tensor
    past_key_values: object


class FastCausalLM(nn.Module):
    """A GPT-2 LM head model behind the sampler's calling convention, on `StackedGPT2`.
    Reads the live weights, so it stays current while the wrapped model trains."""

    def __init__(self, lm: nn.Module):
        super().__init__()
        self.lm = lm  # registered: .eval()/.train() and .parameters() reach the real model
        self.stack = StackedGPT2([lm])

    @property
    def config(self):
        return self.lm.config

    @property
    def device(self) -> torch.device:
        return self.stack.device

    def get_output_embeddings(self):
        return self.lm.get_output_embeddings()

    def forward(self, input_ids, attention_mask=None, position_ids=None, past_key_values=None, use_cache=False,
                logits_to_keep: int = 0):
        """The LM's logits for the last `logits_to_keep` positions (0 = all) and the KV cache, as the sampler calls a
        Hugging Face model."""
        hidden, cache = self.stack(input_ids, attention_mask, position_ids, past_key_values)
        return LMOutput(self.lm.get_output_embeddings()(hidden[0, :, -logits_to_keep:]), cache)


def fast_lm(lm: nn.Module) -> nn.Module:
    """`FastCausalLM(lm)` for a GPT-2, else `lm` itself."""
    return FastCausalLM(lm) if fusable(lm) else lm
