"""Turn-level credit (SWEET-RL, trajectory DPO, group-relative baselines) as pure functions.

Per-step arrays follow the shift convention of `lmrl.data.tokenize` (length L = T-1; position t
scores token t+1); `decide` [B, L] marks agent tokens.  A *turn* is a run of consecutive decision
positions in a row (one utterance); turns are numbered row-major, so a windowed task's sequence
(one turn) and a whole-history sequence (many turns) are handled alike.

SWEET-RL (arXiv 2503.15478): a critic conditioned on training-time information `c` gives each turn
the advantage A(o_t, a_t, c) = β · (mean log π_c − mean log π_ref) over the turn's tokens, and is
fitted with the Bradley–Terry loss on pairs of trajectories of one task, each scored by Σ_t A.
The actor then learns by DPO from pairs of its own candidate turns ranked by that advantage.
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Hashable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor


# -- turns ------------------------------------------------------------------------------------------
def turn_starts(decide: Tensor) -> Tensor:
    """[B, L] bool: the first decision position of every turn."""
    starts = decide.clone()
    starts[:, 1:] &= ~decide[:, :-1]
    return starts


def turn_ends(decide: Tensor) -> Tensor:
    """[B, L] bool: the last decision position of every turn (it scores the turn's last token)."""
    ends = decide.clone()
    ends[:, :-1] &= ~decide[:, 1:]
    return ends


def turn_index(decide: Tensor) -> Tensor:
    """[B, L] long: each decision position's turn, numbered row-major from 0; -1 off decisions."""
    ids = turn_starts(decide).flatten().long().cumsum(0).view_as(decide) - 1
    return torch.where(decide, ids, -1)


def turn_sums(x: Tensor, decide: Tensor) -> Tensor:
    """[B, L] -> [n_turns] fp32: x summed over each turn's positions (indexing keeps padding out)."""
    ids = turn_index(decide)
    n = int(turn_starts(decide).sum())
    return torch.zeros(n, dtype=torch.float32, device=x.device).index_add(0, ids[decide], x[decide].float())


def turn_means(x: Tensor, decide: Tensor) -> Tensor:
    """[B, L] -> [n_turns] fp32: x averaged over each turn's positions."""
    return turn_sums(x, decide) / turn_sums(torch.ones_like(x, dtype=torch.float32), decide)


def ratio_advantages(logp: Tensor, ref_logp: Tensor, decide: Tensor, beta: float) -> Tensor:
    """SWEET-RL's per-turn advantage β · (mean log π − mean log π_ref) over each turn's tokens.  -> [n_turns]."""
    return beta * (turn_means(logp, decide) - turn_means(ref_logp, decide))


def group_sums(values: Tensor, group: Tensor, n_groups: int) -> Tensor:
    """values [n] summed by `group` [n] (long, 0..n_groups-1) -> [n_groups]."""
    return torch.zeros(n_groups, dtype=values.dtype, device=values.device).index_add(0, group, values)


def group_logsumexp(values: Tensor, group: Tensor, n_groups: int) -> Tensor:
    """log Σ exp(values) by `group` [n] (long, every group 0..n_groups-1 non-empty) -> [n_groups], stable."""
    top = torch.full((n_groups,), float("-inf"), dtype=values.dtype, device=values.device)
    top = top.scatter_reduce(0, group, values.detach(), reduce="amax")
    return top + group_sums((values - top[group]).exp(), group, n_groups).log()


def log_softmax_by_group(scores: Tensor, group: Tensor, n_groups: int) -> Tensor:
    """Each score minus the log-sum-exp of its group's (`group` [n], long): a softmax over each group, e.g. the
    moves playable at one turn.  A constant added to every score of a group changes nothing, so a critic cannot
    raise or lower every move of a turn at once.  -> [n]."""
    return scores - group_logsumexp(scores, group, n_groups)[group]


def exact_value(exact: Tensor, estimate: Tensor) -> Tensor:
    """A tensor whose value is `exact` and whose gradient is `estimate`'s.  A trajectory score summed over
    every turn without gradients, with the gradient of a scaled sum over a sample of its turns: the loss
    then sees the true score while backpropagation runs through only the sampled turns."""
    return exact.detach() + estimate - estimate.detach()


# -- preference losses ------------------------------------------------------------------------------
def bradley_terry_loss(chosen: Tensor, rejected: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
    """mean −log σ(s⁺ − s⁻) over pairs.  chosen, rejected [P] -> scalar (fp32)."""
    margin = chosen.float() - rejected.float()
    loss = F.softplus(-margin).mean()  # = -log sigmoid(margin), stable for large |margin|
    return loss, {"pair_accuracy": (margin.detach() > 0).float().mean(), "margin": margin.detach().mean()}


def dpo_loss(logp_chosen: Tensor, logp_rejected: Tensor, ref_chosen: Tensor, ref_rejected: Tensor,
             beta: float) -> tuple[Tensor, dict[str, Tensor]]:
    """DPO: −log σ(β[(log π(y⁺) − log π_ref(y⁺)) − (log π(y⁻) − log π_ref(y⁻))]), log-probs summed over each
    response's tokens.  All [P] -> scalar."""
    chosen = beta * (logp_chosen.float() - ref_chosen.detach().float())
    rejected = beta * (logp_rejected.float() - ref_rejected.detach().float())
    loss, logs = bradley_terry_loss(chosen, rejected)
    return loss, {**logs, "chosen_reward": chosen.detach().mean(), "rejected_reward": rejected.detach().mean()}


def reverse_kl(logits: Tensor, ref_logits: Tensor) -> Tensor:
    """Mean over rows of KL(π || π_ref) = Σ_v π(v) (log π(v) − log π_ref(v)).  [n, V] -> scalar fp32.

    Keeps a log-ratio critic inside the reference's support: without it, lowering every data action's
    probability (mass moved to tokens the data never shows) passes for a negative advantage, and text
    the data never shows then scores as the best action."""
    logp, ref = torch.log_softmax(logits.float(), dim=-1), torch.log_softmax(ref_logits.detach().float(), dim=-1)
    return (logp.exp() * (logp - ref)).sum(-1).mean() if logits.shape[0] else logits.new_zeros((), dtype=torch.float32)


# -- pairs --------------------------------------------------------------------------------------------
PAIRINGS = ("best", "all")


def trajectory_pairs(returns: Sequence[float], tasks: Sequence[Hashable],
                     pairing: str = "best") -> list[tuple[int, int]]:
    """(chosen, rejected) index pairs within each task.  `best`: a best-return attempt against every attempt with
    a strictly lower return (tied best attempts take turns as the chosen side).  `all`: every attempt against
    every attempt with a strictly lower return (a task with many attempts then has many chosen trajectories,
    not one: the maze's 25 starts would otherwise give the critic 25 chosen trajectories to memorise)."""
    if pairing not in PAIRINGS:
        raise ValueError(f"pairing must be one of {PAIRINGS} (got {pairing!r})")
    groups: dict[Hashable, list[int]] = defaultdict(list)
    for i, task in enumerate(tasks):
        groups[task].append(i)
    pairs = []
    for members in groups.values():
        if pairing == "all":
            pairs += [(i, j) for i in members for j in members if returns[i] > returns[j]]
            continue
        best = max(returns[i] for i in members)
        top = [i for i in members if returns[i] == best]
        lower = [i for i in members if returns[i] < best]
        pairs += [(top[k % len(top)], i) for k, i in enumerate(lower)]
    return pairs


def candidate_pairs(scores: Sequence[float], n_pairs: int, rng: random.Random) -> list[tuple[int, int]]:
    """Up to `n_pairs` distinct (chosen, rejected) pairs of candidates: one from the top half by score, one
    from the bottom half, the higher-scored chosen; pairs of equal score carry no preference and are left out."""
    ranked = sorted(range(len(scores)), key=lambda i: -scores[i])
    half = len(ranked) // 2
    pairs = [(hi, lo) for hi in ranked[:half] for lo in ranked[half:] if scores[hi] > scores[lo]]
    rng.shuffle(pairs)
    return pairs[:n_pairs]


# -- group-relative baseline ----------------------------------------------------------------------------
def group_advantages(returns: Tensor, group: Tensor, normalize: bool = True, eps: float = 1e-6) -> Tensor:
    """A_i = R_i − mean of i's group (÷ (std + eps) with `normalize`, population std).  returns [E] fp32,
    group [E] long -> [E].  A group whose returns are all equal gets 0 everywhere: no signal."""
    n_groups = int(group.max()) + 1 if group.numel() else 0
    count = group_sums(torch.ones_like(returns), group, n_groups)
    mean = group_sums(returns, group, n_groups) / count
    centered = returns - mean[group]
    if not normalize:
        return centered
    std = (group_sums(centered**2, group, n_groups) / count).sqrt()[group]
    return torch.where(std > 0, centered / (std + eps), 0.0)


# -- role-conditioned baseline (self-play) ----------------------------------------------------------------
def role_advantages(returns: Tensor, role: Tensor, baselines: Tensor, decay: float) -> tuple[Tensor, Tensor]:
    """SPIRAL's role-conditioned advantage estimation, one batch at a time: each role's baseline moves to
    b_r <- decay * b_r + (1 - decay) * mean(R_i : role_i = r) (a role absent from the batch keeps its baseline), and
    A_i = R_i - b_{role_i} with the moved baseline.  returns [E] fp32, role [E] long, baselines [n_roles] fp32 ->
    (A [E], the new baselines).  A seat's own baseline keeps the first mover's edge out of the other seat's
    advantages."""
    n_roles = baselines.numel()
    count = group_sums(torch.ones_like(returns), role, n_roles)
    mean = group_sums(returns, role, n_roles) / count.clamp(min=1)
    moved = torch.where(count > 0, decay * baselines + (1 - decay) * mean, baselines)
    return returns - moved[role], moved


def sequence_logprob_sums(logp: Tensor, decide: Tensor) -> Tensor:
    """[B, L] -> [B] fp32: each row's log-probabilities summed over its decision positions."""
    return torch.where(decide, logp.float(), 0.0).sum(dim=1)


def mean_nll(logp: Tensor, decide: Tensor) -> Tensor:
    """Mean −log π over the decision positions of all rows (DPO's NLL term on the chosen side)."""
    return -logp.float()[decide].sum() / decide.sum().clamp(min=1)


def sum_scale(n_total: int, n_sampled: int) -> float:
    """The factor that makes a sum over `n_sampled` of `n_total` turns an unbiased estimate of the full sum."""
    return n_total / n_sampled if n_sampled else 0.0



# -- ArCHer: an utterance-level critic and a token-level actor -------------------------------------------------------
def archer_critic_loss(q1: Tensor, q2: Tensor, v1: Tensor, v2: Tensor, target_v1_next: Tensor,
                       target_v2_next: Tensor, target_q1_pi: Tensor, target_q2_pi: Tensor, rewards: Tensor,
                       dones: Tensor, gamma: float) -> tuple[Tensor, dict[str, float]]:
    """ArCHer's critic loss on a batch of utterance transitions (s, a, r, s', done), every argument [B]:

        Q_i(s, a) -> r + gamma (1 - done) V_i^tgt(s')      V_i(s) -> Q_i^tgt(s, a_pi),  a_pi ~ pi(. | s)

    for i = 1, 2 (each Q on its own target V, each V on its own target Q, no min), squared errors summed over the
    four heads and averaged over the batch.  The targets carry no gradient."""
    not_done = 1.0 - dones.float()
    tq1, tq2 = (rewards + gamma * not_done * v for v in (target_v1_next, target_v2_next))
    pairs = [(q1, tq1), (q2, tq2), (v1, target_q1_pi), (v2, target_q2_pi)]
    losses = [F.mse_loss(x.float(), t.detach().float()) for x, t in pairs]
    logs = {"q_loss": (losses[0] + losses[1]).item() / 2, "v_loss": (losses[2] + losses[3]).item() / 2,
            "q_mean": q1.detach().float().mean().item(), "v_mean": v1.detach().float().mean().item(),
            "q_target_mean": tq1.detach().float().mean().item()}
    return sum(losses), logs


def archer_advantages(q1: Tensor, q2: Tensor, v1: Tensor, v2: Tensor) -> Tensor:
    """[B] the turn advantage the actor follows: A(s, a) = min(Q1, Q2)(s, a) - min(V1, V2)(s), without gradient."""
    return (torch.minimum(q1, q2) - torch.minimum(v1, v2)).detach().float()


def archer_actor_loss(logp_sums: Tensor, advantages: Tensor) -> Tensor:
    """ArCHer's token-level policy gradient: -mean_batch(A(s, a) * sum_i log pi(a_i | s, a_<i)), one utterance
    advantage on every token of its utterance (REINFORCE; no clipping, KL or entropy term, as the original)."""
    return -(advantages.detach() * logp_sums).mean()
