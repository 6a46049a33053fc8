"""PPO pieces (KL-penalized rewards, GAE, clipped losses, KL controllers) as pure functions of tensors.

Per-step arrays follow the shift convention of `lmrl.data.tokenize` (length L = T-1; position t
evaluates token t+1).  `decide` [B, L] marks decision points (agent tokens; environment tokens and
padding are False), `step_rewards` [B, L] carries the env reward on the position that predicts an
utterance's last token, `next_idx` [B, L] = `next_decision_index(decide)`.  GAE runs over decision
points only: environment tokens are never states, so the step after t is `next_idx[t]`, not t+1.
The clipped losses take 1-D [n] tensors of decision points already gathered (e.g. `x[decide]`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from lmrl.data.tokenize import NO_NEXT


def kl_penalized_rewards(
    step_rewards: Tensor, logp: Tensor, ref_logp: Tensor, decide: Tensor, kl_coef: float
) -> Tensor:
    """r[t] - kl_coef · (log π - log π_ref)[t] at decision points, 0 elsewhere.  [B, L] -> [B, L], no gradient.

    The per-token k1 estimator: its expectation under π is KL(π || π_ref), though single samples can be < 0.
    """
    log_ratio = logp.detach() - ref_logp.detach()
    return torch.where(decide, step_rewards.detach() - kl_coef * log_ratio, 0.0)


def kl_k3(logp: Tensor, ref_logp: Tensor, decide: Tensor) -> Tensor:
    """Mean over decision points of exp(lr) - 1 - lr, lr = log π_ref - log π.  [B, L] -> scalar, no gradient.

    k3 estimator (Schulman): non-negative per sample, unbiased for KL(π || π_ref) under samples from π.
    """
    if not decide.any():
        return logp.new_zeros(())
    return kl_k3_loss(logp.detach()[decide], ref_logp[decide])


def kl_k3_loss(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """Mean of exp(lr) - 1 - lr, lr = log π_ref - log π, differentiable in `logp`.  [n] -> scalar.

    GRPO's KL term (Shao et al. 2024): its gradient 1 - π_ref/π pulls a token's log-prob back towards the
    reference's from either side, so mass the policy moves away from the reference's actions is pulled back.
    """
    lr = ref_logp.detach().float() - logp.float()
    return (torch.expm1(lr) - lr).mean()


def gae(
    step_rewards: Tensor,
    values: Tensor,
    decide: Tensor,
    next_idx: Tensor,
    gamma: float,
    lam: float,
    tail_value: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Generalized advantage estimation over decision points.  -> (advantages, returns), [B, L], no gradient.

    δ[t] = r[t] + γ · V[next_idx[t]] - V[t],  A[t] = δ[t] + γλ · A[next_idx[t]].  After a row's last
    decision the next value is `tail_value` [B] (default 0: the episode is over) and the next advantage 0.
    returns = A + V (before any whitening).  Both are 0 off decision points.
    """
    rewards, values = step_rewards.detach(), values.detach()
    if tail_value is None:
        tail = torch.zeros(values.shape[0], dtype=values.dtype, device=values.device)
    else:
        tail = tail_value.detach().to(values.dtype)
    advantages = torch.zeros_like(values)  # [B, L]
    rows = torch.arange(values.shape[0], device=values.device)
    for t in reversed(range(values.shape[1])):
        nxt = next_idx[:, t]  # [B]
        last = nxt == NO_NEXT
        # PPO: the next state skips environment tokens; one γ (and λ) per agent token
        v_next = torch.where(last, tail, values[rows, nxt.clamp(min=0)])
        a_next = torch.where(last, 0.0, advantages[rows, nxt.clamp(min=0)])
        delta = rewards[:, t] + gamma * v_next - values[:, t]
        advantages[:, t] = torch.where(decide[:, t], delta + gamma * lam * a_next, 0.0)
    returns = torch.where(decide, advantages + values, 0.0)
    return advantages, returns


def whiten(x: Tensor, mask: Tensor, eps: float = 1e-8) -> Tensor:
    """(x - mean) / sqrt(var + eps) with mean and population variance over `mask`; 0 where mask is False."""
    n = mask.sum().clamp(min=1)
    picked = x[mask]  # indexing keeps masked-out garbage (even inf/nan) out of the statistics
    mean = picked.sum() / n
    var = ((picked - mean) ** 2).sum() / n
    return torch.where(mask, (x - mean) * torch.rsqrt(var + eps), 0.0)


def policy_loss(
    logp: Tensor, old_logp: Tensor, advantages: Tensor, cliprange: float
) -> tuple[Tensor, dict[str, float]]:
    """Clipped surrogate mean(max(-A·ρ, -A·clip(ρ, 1-c, 1+c))), ρ = exp(logp - old_logp).  [n] -> scalar.

    Only `logp` is differentiated.  logs: clipfrac (clipped term strictly larger), ratio_mean, approx_kl.
    """
    log_ratio = logp - old_logp.detach()
    ratio = torch.exp(log_ratio)
    adv = advantages.detach()
    unclipped = -adv * ratio
    clipped = -adv * torch.clamp(ratio, 1.0 - cliprange, 1.0 + cliprange)
    # pessimistic bound: the clip only bites when it makes the objective worse, then the gradient is 0
    loss = torch.maximum(unclipped, clipped).mean()
    logs = {
        "clipfrac": (clipped > unclipped).float().mean().item(),
        "ratio_mean": ratio.detach().mean().item(),
        "approx_kl": (0.5 * log_ratio.detach() ** 2).mean().item(),
    }
    return loss, logs


def value_loss(
    values: Tensor, old_values: Tensor, returns: Tensor, cliprange_value: float
) -> tuple[Tensor, dict[str, float]]:
    """½ mean(max((V - R)², (V_clip - R)²)), V_clip = V_old + clamp(V - V_old, ±c).  [n] -> scalar.

    Only `values` is differentiated.  logs: vf_clipfrac (clipped term strictly larger), value_mean.
    """
    old_values, returns = old_values.detach(), returns.detach()
    v_clip = old_values + torch.clamp(values - old_values, -cliprange_value, cliprange_value)
    unclipped = (values - returns) ** 2
    clipped = (v_clip - returns) ** 2
    loss = 0.5 * torch.maximum(unclipped, clipped).mean()
    logs = {
        "vf_clipfrac": (clipped > unclipped).float().mean().item(),
        "value_mean": values.detach().mean().item(),
    }
    return loss, logs


class FixedKL:
    """Constant KL coefficient."""

    def __init__(self, coef: float) -> None:
        self.value = coef

    def update(self, kl: float, n_steps: int) -> None:
        """Nothing: the coefficient stays fixed."""
        pass


class AdaptiveKL:
    """Ziegler et al. (2019): move the coefficient so the observed KL tracks `target`.

    error = clip(kl / target - 1, ±0.2);  value ← value · (1 + error · n_steps / horizon).
    """

    def __init__(self, coef: float, target: float, horizon: int) -> None:
        self.value = coef
        self.target = target
        self.horizon = horizon

    def update(self, kl: float, n_steps: int) -> None:
        """Move the coefficient towards the target KL after `n_steps` steps at measured `kl` (the proportional error
        clipped to ±0.2, scaled by `n_steps / horizon`)."""
        error = min(max(kl / self.target - 1.0, -0.2), 0.2)
        self.value *= 1.0 + error * n_steps / self.horizon
