"""Critic health: does a value-based run's critic fit, measured on held-out episodes.

A score alone cannot tell a critic that learned values from a BC policy tilted by noise.  Every
MC / ILQL run therefore measures, on episodes it never trained on (`Task.heldout_episodes`):

- `critic/q_rmse`: how far Q(s, a) of the data's tokens is from its regression target — the TD
  target r + γ·V(s') for ILQL, the realized discounted return for MC;
- `critic/spearman`: the rank correlation between the critic's value of each turn's state (V,
  or Q of the taken token without a V head) and the discounted return that actually followed;
  `critic/spearman_states` the same over distinct states, each with its mean return — where states
  repeat (the maze's 25 cells), a single return mostly says which behaviour the episode came from
  (75% of the maze data's episodes sit in dead ends whatever the cell), its mean what the state is worth;
- `critic/value_bias`: mean(value - return) over those states (overestimation shows here);
- a task probe where the task has one (`critic_probe` in its config): on the maze, the share of
  start cells whose best move by the critic's advantage is a BFS-optimal move, the best share any
  function of the first observation can reach (`probe_ceiling`: 1 on FO, 0.84 on PO, where start
  cells with the same walls look alike), and the value one move from the goal (0 in truth on FO; on
  PO the first observation does not say the goal is near, so the data's value of it is lower).

`fitted` summarizes them: the per-state ρ >= `MIN_SPEARMAN` and, with a probe, its agreement >= `MIN_PROBE`.
"""

from __future__ import annotations

import math
from typing import Sequence

import pandas as pd
import torch

from lmrl.algos.value_losses import bellman_targets, gather_tokens, mc_returns
from lmrl.data.tokenize import (
    SegmentEncoder, collate, decision_points, episode_to_chain, has_decision, next_decision_index,
)
from lmrl.dist import move
from lmrl.envs.base import Episode
from lmrl.models.factory import model_max_length

# A critic whose values rank held-out states at least this well (and agrees with a task probe this
# often) counts as fitted; below, the run's summary line says it did not fit.
MIN_SPEARMAN = 0.5
MIN_PROBE = 0.8


def device_of(module: torch.nn.Module) -> torch.device:
    """The device of a module's first parameter."""
    return next(module.parameters()).device


@torch.no_grad()
def heldout_values(value, tokenizer, episodes: Sequence[Episode], window: int | None, gamma: float,
                   batch_size: int = 64) -> dict[str, torch.Tensor]:
    """Per decision point of `episodes` (flat, host tensors): the critic's value estimate, its Q of the
    taken token, that Q's regression target, the realized return, and whether it starts a turn."""
    encode, device = SegmentEncoder(tokenizer), device_of(value)
    seqs = [s for ep in episodes for s in episode_to_chain(ep, encode, window, model_max_length(value), gamma)
            if has_decision(s)]
    out: dict[str, list] = {"value": [], "q": [], "target": [], "ret": [], "first": [], "state": []}
    for i in range(0, len(seqs), batch_size):
        batch = move(collate(seqs[i : i + batch_size], tokenizer.pad_token_id), device)
        res = value(batch["input_ids"], batch["attention_mask"])
        decide = decision_points(batch["action_mask"], batch["attention_mask"])
        nxt, rewards = next_decision_index(decide), batch["rewards"][:, 1:]
        # min over the heads of each head's Q of the taken token: never a stacked [heads, B, T, vocab] copy
        q = torch.stack([gather_tokens(q_all[:, :-1], batch["input_ids"][:, 1:]) for q_all in res.qs]).min(dim=0).values
        ret = mc_returns(rewards, decide, nxt, batch["tails"], gamma)
        if res.v is not None:
            estimate = res.v[:, :-1].float()
            target = bellman_targets(rewards, decide, nxt, estimate, next_state_values(value, batch), gamma)
        else:
            estimate, target = q, ret
        first = decide.clone()
        first[:, 1:] &= ~decide[:, :-1]  # a turn's first decision: the text-level state
        for key, x in (("value", estimate), ("q", q), ("target", target), ("ret", ret), ("first", first)):
            out[key].append(x[decide].cpu())
        ids = batch["input_ids"].cpu()
        out["state"].append(torch.tensor([hash(tuple(ids[b, : t + 1].tolist())) for b, t in decide.nonzero().tolist()]))
    return {k: torch.cat(v) for k, v in out.items()}


def next_state_values(value, batch: dict) -> torch.Tensor:
    """V at the next link's decision point (windowed tasks), 0 where the episode ended there."""
    if "next_input_ids" not in batch:
        return torch.zeros(batch["input_ids"].shape[0], device=batch["input_ids"].device)
    v = value(batch["next_input_ids"], batch["next_attention_mask"]).v.float()
    v_next = v.gather(1, batch["next_last"][:, None]).squeeze(1)
    return torch.where(batch["has_next"], v_next, torch.zeros_like(v_next))


def critic_health(value, tokenizer, task, episodes: Sequence[Episode], gamma: float) -> dict[str, float]:
    """The `critic/...` metrics of the module docstring (the probe's too, when the task names one)."""
    was_training = value.training
    value.eval()
    h = heldout_values(value, tokenizer, episodes, task.history_window, gamma)
    states = h["first"]
    turns = pd.DataFrame({"value": h["value"][states].numpy(), "ret": h["ret"][states].numpy(),
                          "state": h["state"][states].numpy()})
    by_state = turns.groupby("state")[["value", "ret"]].mean()
    out = {"critic/q_rmse": float((h["q"] - h["target"]).pow(2).mean().sqrt()),
           "critic/spearman": spearman(turns["value"], turns["ret"]),
           "critic/spearman_states": spearman(by_state["value"], by_state["ret"]),
           "critic/distinct_states": len(by_state),
           "critic/value_bias": float((h["value"][states] - h["ret"][states]).mean()),
           "critic/states": int(states.sum())}
    probe = task.cfg.get("critic_probe")
    if probe:
        from hydra.utils import get_method

        out.update(get_method(probe)(value, tokenizer, task))
    value.train(was_training)
    agreement = out.get("critic/probe_agreement")
    out["critic/fitted"] = float(out["critic/spearman_states"] >= MIN_SPEARMAN
                                 and (agreement is None or agreement >= MIN_PROBE))
    return out


def spearman(a: pd.Series, b: pd.Series) -> float:
    """Spearman's rank correlation of two series; 0 where it is undefined (fewer than two values, or a constant)."""
    rho = a.corr(b, method="spearman") if len(a) > 1 else float("nan")
    return 0.0 if math.isnan(rho) else float(rho)


@torch.no_grad()
def maze_probe(value, tokenizer, task) -> dict[str, float]:
    """From each start cell's first observation: is the critic's best move BFS-optimal, and what is V
    one move from the goal.  Advantages as the reranker sums them (min Q - V per action token)."""
    from lmrl.envs.maze import distances_to_goal, optimal_directions
    from lmrl.rollout.policy import prompt_ids
    from lmrl.rollout.rerank import RerankPolicy

    env, actions = task.make_env(), list(task.cfg.actions)
    reranker = RerankPolicy(value, tokenizer, actions, task.history_window, int(task.cfg.eval.max_input_tokens))
    cells = [tuple(opt["init_position"]) for opt in env.eval_reset_options()]
    prompts = [prompt_ids(env.reset(options={"init_position": c})[0], task.history_window, reranker.encode,
                          reranker.max_input_tokens) for c in cells]
    best = reranker.scores(prompts).argmax(dim=-1).tolist()
    moves = [a.split()[1] for a in actions]  # "move up\n" -> "up"
    optimal = [optimal_directions(c, env.goal, env.layout) for c in cells]
    agree = [moves[b] in opt for opt, b in zip(optimal, best)]
    dist = distances_to_goal(env.goal, env.layout)
    near = [p for c, p in zip(cells, prompts) if dist[c] == 1]
    return {"critic/probe_agreement": sum(agree) / len(agree),
            "critic/probe_ceiling": probe_ceiling([tuple(p) for p in prompts], optimal, moves),
            "critic/maze_v_next_to_goal": float(state_values(value, near, tokenizer.pad_token_id).mean())}


def probe_ceiling(observations: Sequence, optimal: Sequence[Sequence[str]], moves: Sequence[str]) -> float:
    """The best probe agreement any function of the first observation can reach: start cells that look
    alike (PO maze: the same walls sentence) get one move, right for at most the largest share of them.
    1.0 where every start looks different (FO maze); 21 of 25 cells on PO maze."""
    groups: dict = {}
    for obs, opt in zip(observations, optimal):
        groups.setdefault(obs, []).append(opt)
    return sum(max(sum(m in opt for opt in group) for m in moves) for group in groups.values()) / len(optimal)


def state_values(value, prompts: list[list[int]], pad_id: int) -> torch.Tensor:
    """V at each prompt's last token (the next decision point); without a V head, max_a Q there."""
    from lmrl.rollout.sampler import left_pad

    ids, attn = (x.to(device_of(value)) for x in left_pad(prompts, pad_id))
    out = value(ids, attn, position_ids=(attn.cumsum(-1) - 1).clamp(min=0))
    last = out.v[:, -1] if out.v is not None else torch.stack(out.qs).min(dim=0).values[:, -1].max(dim=-1).values
    return last.float().cpu()
