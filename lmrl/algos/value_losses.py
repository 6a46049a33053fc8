"""Value-learning losses for MC returns and ILQL, as pure functions of tensors.

Per-step arrays follow the shift convention of `lmrl.data.tokenize` (length L = T-1; position t
evaluates token t+1).  `decide` [B, L] marks decision points (padding already removed),
`step_rewards` [B, L] = rewards[:, 1:], `next_idx` [B, L] = `next_decision_index(decide)`.
Every loss sums over decision points and divides by n = #decision points in the batch.
"""

from __future__ import annotations

from typing import Iterable

import torch
from torch import Tensor

from lmrl.data.tokenize import NO_NEXT


def _masked_mean(x: Tensor, decide: Tensor, weights: Tensor | None = None, norm: float | None = None) -> Tensor:
    """Σ_{decisions} w·x / Σ_{decisions} w, w [B] a sequence's weight (its multiplicity in the data; 1 when
    None, then this is Σ x / n).  `norm` replaces the denominator: with several processes, the global
    batch's Σ w / world, so the averaged gradients are the whole batch's mean's (see `loss_norm`).
    Indexing (not multiplying by a mask) keeps padding garbage out of the graph."""
    w = torch.ones_like(x[decide], dtype=torch.float32) if weights is None else \
        weights[:, None].expand_as(decide)[decide].float()
    denominator = w.sum().clamp(min=1e-12) if norm is None else norm
    return (x[decide].float() * w).sum() / denominator


def gather_tokens(values: Tensor, tokens: Tensor) -> Tensor:
    """values [B, L, V], tokens [B, L] -> [B, L] fp32: values[b, t, tokens[b, t]].  Gathering before the
    cast keeps the [B, L, V] tensor in the forward's precision; what the losses reduce is fp32."""
    return values.gather(-1, tokens.long().unsqueeze(-1)).squeeze(-1).float()


def mc_returns(step_rewards: Tensor, decide: Tensor, next_idx: Tensor, tail: Tensor, gamma: float) -> Tensor:
    """Discounted reward-to-go at each decision point; 0 elsewhere.  -> [B, L] fp32, no gradient.

    G[t] = r[t] + γ · (G[next_idx[t]] if there is one, else tail).  `tail` [B] is the return of the
    next chunk at its first decision point (0 when this chunk ends the episode).  MC: γ once per agent
    token; the next state skips environment tokens.  It is `lambda_targets` at λ = 1 (V unused).
    """
    unused = torch.zeros_like(step_rewards, dtype=torch.float32)
    return lambda_targets(step_rewards, decide, next_idx, unused, unused[:, 0], tail, gamma, 1.0)


def bellman_targets(
    step_rewards: Tensor, decide: Tensor, next_idx: Tensor, v: Tensor, v_final: Tensor, gamma: float
) -> Tensor:
    """y[t] = r[t] + γ · V(next decision point), V = v_final after the last one; 0 off decisions.  -> [B, L].

    v [B, L] is the online V; v_final [B] is 0 for done sequences, else V of the next chunk's state.
    """
    v, v_final = v.detach().float(), v_final.detach().float()  # ILQL: targets carry no gradient, in fp32
    # ILQL: next-state value skips env tokens (next_idx points at the next decision, not t+1)
    v_next = torch.where(next_idx == NO_NEXT, v_final.unsqueeze(-1), v.gather(-1, next_idx.clamp(min=0)))  # [B, L]
    return torch.where(decide, step_rewards.detach() + gamma * v_next, 0.0)


def lambda_targets(
    step_rewards: Tensor, decide: Tensor, next_idx: Tensor, v: Tensor, v_final: Tensor, tail: Tensor, gamma: float,
    lam: float,
) -> Tensor:
    """TD(λ) targets: y[t] = r[t] + γ · ((1-λ) · V(next decision point) + λ · y[next]); after a chunk's last
    decision (1-λ) · v_final + λ · tail, the next chunk's realized return standing in for its λ-return.
    λ = 0 is `bellman_targets`, λ = 1 `mc_returns`.  v [B, L] online V (detached), v_final, tail [B].  -> [B, L],
    fp32, no gradient.

    With one-step targets a value crosses one target-network lag per agent token (3 a maze move, ~5-10 a
    Text-Nav command); λ > 0 carries the realized return back through the whole chunk in one update.
    """
    rewards = step_rewards.detach().float()
    v, v_final, tail = v.detach().float(), v_final.detach().float(), tail.detach().float().to(rewards.device)
    rows = torch.arange(rewards.shape[0], device=rewards.device)
    y = torch.zeros_like(rewards)  # [B, L]
    for t in reversed(range(rewards.shape[1])):
        nxt = next_idx[:, t].clamp(min=0)  # [B]
        last = next_idx[:, t] == NO_NEXT
        v_next = torch.where(last, v_final, v[rows, nxt])
        y_next = torch.where(last, tail, y[rows, nxt])
        y[:, t] = torch.where(decide[:, t], rewards[:, t] + gamma * ((1.0 - lam) * v_next + lam * y_next), 0.0)
    return y


def expectile_loss(v: Tensor, target: Tensor, decide: Tensor, tau: float, weights: Tensor | None = None,
                   norm: float | None = None) -> Tensor:
    """Σ w · ½ (V - q̂)² / n with w = τ where q̂ >= V else 1-τ.  v, target [B, L] -> scalar."""
    v, target = v.float(), target.detach().float()
    weight = torch.where(target >= v.detach(), tau, 1.0 - tau)  # [B, L]; τ > ½ pushes V up toward max Q
    return _masked_mean(weight * 0.5 * (v - target) ** 2, decide, weights, norm)


def q_loss(q_taken: Tensor, target: Tensor, decide: Tensor, weights: Tensor | None = None,
           norm: float | None = None) -> Tensor:
    """Σ ½ (Q(s, a) - y)² / n.  q_taken, target [B, L] -> scalar; the target is not differentiated."""
    return _masked_mean(0.5 * (q_taken - target.detach()) ** 2, decide, weights, norm)


def cql_loss(q_all: Tensor, tokens: Tensor, decide: Tensor, weights: Tensor | None = None,
             norm: float | None = None) -> Tensor:
    """Σ [logsumexp_v Q(s, v) - Q(s, a)] / n: cross-entropy with Q as logits.  q_all [B, L, V] -> scalar."""
    q = q_all[decide].float()  # [n, V]; only decision rows, so the float copy stays small
    taken = q.gather(-1, tokens[decide].long().unsqueeze(-1)).squeeze(-1)  # [n]
    per_row = torch.zeros_like(decide, dtype=q.dtype).masked_scatter(decide, torch.logsumexp(q, dim=-1) - taken)
    return _masked_mean(per_row, decide, weights, norm)


def ilql_loss(
    q1_all: Tensor,
    q2_all: Tensor,
    v: Tensor,
    target_q1_taken: Tensor,
    target_q2_taken: Tensor,
    tokens: Tensor,
    step_rewards: Tensor,
    decide: Tensor,
    next_idx: Tensor,
    v_final: Tensor,
    gamma: float,
    tau: float,
    cql_weight: float,
    weights: Tensor | None = None,
    norm: float | None = None,
    value_max: float | None = None,
    tail: Tensor | None = None,
    td_lambda: float = 0.0,
) -> tuple[Tensor, dict[str, Tensor]]:
    """L = L_Q1 + L_Q2 + L_V + cql_weight · (CQL_1 + CQL_2)  (algorithms.md §3.2).

    q*_all [B, L, V] online Q heads; v [B, L] online V; target_q*_taken [B, L] target-network Q of the
    taken tokens; tokens [B, L] = input_ids[:, 1:]; v_final [B] bootstrap after the last decision;
    weights [B] each sequence's multiplicity (merged duplicates; None = 1); norm: the denominator of every
    mean (`_masked_mean`; None = this batch's own).  value_max: an upper bound on both targets (the largest
    return the rewards allow): a value above it is an error TD would otherwise feed on (not in the original).
    td_lambda > 0: the Q heads regress on TD(λ) targets (`lambda_targets`, with `tail` [B] the next chunk's
    realized return) instead of one-step ones (not in the original, which is td_lambda = 0).
    """
    if td_lambda > 0:
        if tail is None:
            raise ValueError("ilql_loss: td_lambda > 0 needs `tail`, the next chunk's realized return")
        y = lambda_targets(step_rewards, decide, next_idx, v, v_final, tail, gamma, td_lambda)
    else:
        y = bellman_targets(step_rewards, decide, next_idx, v, v_final, gamma)  # [B, L], online V, detached
    q1, q2 = gather_tokens(q1_all, tokens), gather_tokens(q2_all, tokens)  # [B, L]
    q_hat = torch.minimum(target_q1_taken, target_q2_taken).detach()  # ILQL: V regresses on min target Q
    if value_max is not None:
        y, q_hat = y.clamp(max=value_max), q_hat.clamp(max=value_max)
    l_q1, l_q2 = q_loss(q1, y, decide, weights, norm), q_loss(q2, y, decide, weights, norm)
    l_v = expectile_loss(v, q_hat, decide, tau, weights, norm)
    l_cql = cql_loss(q1_all, tokens, decide, weights, norm) + cql_loss(q2_all, tokens, decide, weights, norm)
    loss = l_q1 + l_q2 + l_v + cql_weight * l_cql
    # logs stay on the device (read at logging steps: no host sync inside a training step)
    logs = {
        "q1_loss": l_q1.detach(),
        "q2_loss": l_q2.detach(),
        "v_loss": l_v.detach(),
        "cql_loss": l_cql.detach(),
        "q_mean": _masked_mean((q1.detach() + q2.detach()) / 2, decide, weights).detach(),
        "v_mean": _masked_mean(v.detach(), decide, weights).detach(),
        "target_mean": _masked_mean(y, decide, weights).detach(),
    }
    return loss, logs


def mc_loss(
    q_all: Tensor,
    tokens: Tensor,
    step_rewards: Tensor,
    decide: Tensor,
    next_idx: Tensor,
    tail: Tensor,
    gamma: float,
    cql_weight: float,
    weights: Tensor | None = None,
    norm: float | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """L = Σ ½ (Q(s, a) - G)² / n + cql_weight · CQL  (algorithms.md §2).  q_all [B, L, V]."""
    returns = mc_returns(step_rewards, decide, next_idx, tail, gamma)  # [B, L]
    q = gather_tokens(q_all, tokens)  # [B, L]
    l_q = q_loss(q, returns, decide, weights, norm)
    l_cql = cql_loss(q_all, tokens, decide, weights, norm)
    loss = l_q + cql_weight * l_cql
    logs = {
        "q_loss": l_q.detach(),
        "cql_loss": l_cql.detach(),
        "q_mean": _masked_mean(q.detach(), decide, weights).detach(),
        "target_mean": _masked_mean(returns, decide, weights).detach(),
    }
    return loss, logs


@torch.no_grad()
def polyak_update(target: Iterable[torch.Tensor], online: Iterable[torch.Tensor], alpha: float) -> None:
    """θ_tgt ← α·θ + (1-α)·θ_tgt for every pair of parameter tensors (α weights the online net, as optax)."""
    with torch.no_grad():
        for t, p in zip(target, online, strict=True):
            t.mul_(1.0 - alpha).add_(p.to(t.dtype), alpha=alpha)
