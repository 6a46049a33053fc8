"""ArCHer (`algo=archer`; Zhou et al. 2024, arXiv 2402.19446): an utterance-level off-policy critic and a token-level
actor that follows the critic's turn advantage.

Each round plays `episodes_per_round` episodes with the current actor and adds their utterance transitions
(s, a, r, s', done) to a replay buffer (FIFO, `replay_size`; optionally seeded with the first `offline_episodes` of the
dataset).  Then `updates_per_round` optimizer steps each draw `batch_size` transitions and, for every drawn state s,
a fresh action a_pi ~ pi(. | s), and minimise

    critic:  sum_i (Q_i(s, a) - [r + gamma (1 - done) V_i^tgt(s')])^2 + (V_i(s) - Q_i^tgt(s, a_pi))^2,   i = 1, 2
    actor:   -A(s, a_pi) * sum_k log pi(a_pi,k | s, a_pi,<k),     A = min(Q1, Q2)(s, a_pi) - min(V1, V2)(s)

(`lmrl.algos.turn_losses.archer_*`), the actor's term only after `warmup_rounds` critic-only rounds.  The target
critic follows the critic by Polyak averaging (`tau`) after every step.

The critic is an LM trunk initialised from the BC stage (the original: RoBERTa): it encodes the state and the action
separately, each pooled at its last token; Q_i = MLP([e_s; e_a]), V_i = MLP(e_s).  Actor and critic are one module on
the engine, trained by one optimizer with the critic at `critic_lr`.  The original alternates 50 critic steps and 3
actor steps an iteration; here every step after the warm-up updates both (docs/algorithms/turn-level.md).
"""

from __future__ import annotations

import copy
import logging
import math
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Sequence

import pandas as pd
import torch
from torch import nn

from lmrl.algos.bc import check_finite, hash_seed, lm_policy
from lmrl.algos.critic import MIN_SPEARMAN, spearman
from lmrl.algos.online import OnlineConfig, OnlineTrainer
from lmrl.algos.ppo import token_logprobs
from lmrl.algos.ppo_losses import kl_k3_loss
from lmrl.algos.sweet_critic import load_lm
from lmrl.algos.turn_losses import archer_actor_loss, archer_advantages, archer_critic_loss
from lmrl.algos.value_losses import polyak_update
from lmrl.data.jsonl import read_episodes
from lmrl.dist import OptimConfig, rank, world_size, write_step
from lmrl.envs.base import Episode
from lmrl.rollout.policy import end_turn
from lmrl.rollout.sampler import sample_turns

log = logging.getLogger(__name__)


@dataclass
class ArcherConfig(OnlineConfig):
    """`algo=archer`: `OnlineConfig` plus the critic's discount, learning rate and target rate, the replay buffer, the
    updates per round and the critic-only warm-up."""

    name: str = "archer"
    # Discount per utterance (the original: 0.95).
    gamma: float = 0.95
    # Polyak rate of the target critic after every step (the original: 0.1).
    tau: float = 0.1
    # The critic's learning rate (`lr` is the actor's).
    critic_lr: float = 1e-4
    # Utterance transitions the replay buffer keeps (FIFO; the original: 100k).
    replay_size: int = 100_000
    # Optimizer steps per round, each on `batch_size` transitions drawn from the buffer.
    updates_per_round: int = 16
    # Rounds whose steps train only the critic (the original: 20 iterations; 10 for Guess My City).
    warmup_rounds: int = 2
    # The dataset's first episodes added to the buffer before the first round (0 = online data only).
    offline_episodes: int = 0
    # How Q reads the action: "joint" (one causal pass over [state; action]) or "separate" (the original: the action
    # encoded on its own; `TurnCritic`).
    critic_input: str = "joint"
    # After the warm-up, the actor's term joins every `actor_every`-th step; the others train the critic alone (the
    # original: 3 actor steps an iteration to 50 critic steps).
    actor_every: int = 1
    # Weight of a KL(pi || pi_BC) term on the actor's sampled tokens (GRPO's k3 estimate, the frozen BC stage as
    # reference; 0 = none, the original).
    kl_coef: float = 0.0

    def validate(self) -> list[str]:
        problems = super().validate()
        if not 0 <= self.gamma <= 1 or not 0 < self.tau <= 1:
            problems.append(f"gamma must be in [0, 1] and tau in (0, 1] (got {self.gamma}, {self.tau})")
        if not self.critic_lr > 0:
            problems.append(f"critic_lr must be > 0 (got {self.critic_lr})")
        if self.replay_size < 1 or self.updates_per_round < 1:
            problems.append("replay_size and updates_per_round must be >= 1")
        if self.warmup_rounds < 0 or self.offline_episodes < 0:
            problems.append("warmup_rounds and offline_episodes must be >= 0")
        if self.actor_every < 1:
            problems.append(f"actor_every must be >= 1 (got {self.actor_every})")
        if self.kl_coef < 0:
            problems.append(f"kl_coef must be >= 0 (got {self.kl_coef})")
        if self.critic_input not in ("joint", "separate"):
            problems.append(f"critic_input must be one of joint, separate (got {self.critic_input!r})")
        return problems


class Transition(NamedTuple):
    """One utterance step: the actor's prompt before it, its action's tokens, the reward up to the next action, the
    prompt before the next action (or after the last one), and whether the env ended there."""

    state: list[int]
    action: list[int]
    reward: float
    next_state: list[int]
    done: bool


class ReplayBuffer:
    """The last `size` transitions; batches drawn uniformly with replacement."""

    def __init__(self, size: int):
        self.items: deque[Transition] = deque(maxlen=size)

    def __len__(self) -> int:
        return len(self.items)

    def extend(self, transitions: Sequence[Transition]) -> None:
        """Add transitions at the new end (the oldest fall out past `size`)."""
        self.items.extend(transitions)

    def sample(self, n: int, generator: torch.Generator) -> list[Transition]:
        """`n` transitions drawn uniformly with replacement by `generator`."""
        picks = torch.randint(len(self.items), (n,), generator=generator).tolist()
        return [self.items[i] for i in picks]


def mlp(width_in: int, width: int) -> nn.Sequential:
    """The original's head shape: in -> width -> width -> 1 with ReLUs."""
    return nn.Sequential(nn.Linear(width_in, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 1))


class TurnCritic(nn.Module):
    """Twin Q(s, a) and twin V(s) on an LM trunk, each head an MLP on hidden states pooled at a last token.

    `joint=True` (`critic_input: joint`, the default): one causal pass over [state; action]; e_s is the hidden state at
    the state's last token (what the state alone gives: the action comes after it) and e_sa the one at the action's,
    which has read the state.  `joint=False` (`critic_input: separate`, the original's): the action is encoded on its
    own, so e_a is one vector per action text whatever the state.  Q_i = MLP([e_s; e_sa or e_a]), V_i = MLP(e_s)."""

    def __init__(self, trunk: nn.Module, width: int, joint: bool = True):
        super().__init__()
        self.trunk, self.joint = trunk, joint
        self.q1, self.q2 = mlp(2 * width, width), mlp(2 * width, width)
        self.v1, self.v2 = mlp(width, width), mlp(width, width)

    def hidden(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """[B, T, width] the trunk's last hidden states, in the heads' dtype (ZeRO's bf16 weights take bf16 inputs)."""
        return self.trunk(input_ids=ids, attention_mask=mask).last_hidden_state.to(self.v1[0].weight.dtype)

    def encode(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """[B, width]: the trunk's last hidden state at each row's last real token (rows right-padded)."""
        return pooled(self.hidden(ids, mask), mask.long().sum(dim=1) - 1)

    def forward(self, state_ids, state_mask, action_ids=None, action_mask=None) -> tuple:
        """(Q1, Q2, V1, V2), each [B]; the Qs are None without actions."""
        if action_ids is None:
            e_s = self.encode(state_ids, state_mask)
        elif self.joint:
            ids, mask, state_last = joined(state_ids, state_mask, action_ids, action_mask, self.max_positions())
            h = self.hidden(ids, mask)
            e_s, e_a = pooled(h, state_last), pooled(h, mask.long().sum(dim=1) - 1)
        else:
            e_s, e_a = self.encode(state_ids, state_mask), self.encode(action_ids, action_mask)
        v1, v2 = self.v1(e_s).squeeze(-1).float(), self.v2(e_s).squeeze(-1).float()
        if action_ids is None:
            return None, None, v1, v2
        e_sa = torch.cat([e_s, e_a], dim=-1)
        return self.q1(e_sa).squeeze(-1).float(), self.q2(e_sa).squeeze(-1).float(), v1, v2

    def max_positions(self) -> int | None:
        """The trunk's longest input (GPT-2's `n_positions`), None where its config does not say."""
        config = getattr(self.trunk, "config", None)
        return getattr(config, "n_positions", None) or getattr(config, "max_position_embeddings", None)


def pooled(hidden: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """[B, width]: row b's hidden state at position index[b]."""
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), index]


def joined(state_ids, state_mask, action_ids, action_mask, max_len: int | None) -> tuple:
    """Right-padded rows [state; action] (the state left-truncated where the pair would pass `max_len`), their mask,
    and [B] the position of each row's last state token."""
    s_len, a_len = state_mask.long().sum(dim=1).tolist(), action_mask.long().sum(dim=1).tolist()
    rows, state_last = [], []
    for i, (ns, na) in enumerate(zip(s_len, a_len)):
        state = state_ids[i, :ns]
        if max_len is not None and ns + na > max_len:
            state = state[ns + na - max_len:]
        rows.append(torch.cat([state, action_ids[i, :na]]).tolist())
        state_last.append(len(state) - 1)
    ids, mask = right_padded(rows, 0)  # pads come after every real token and are masked: any id serves
    return ids.to(state_ids.device), mask.to(state_ids.device), torch.tensor(state_last, device=state_ids.device)


class ArcherModel(nn.Module):
    """The actor LM and the critic, trained together on one engine; `head` picks which one a forward runs."""

    def __init__(self, lm: nn.Module, critic: TurnCritic):
        super().__init__()
        self.lm, self.critic = lm, critic

    def forward(self, input_ids, attention_mask, head: str = "lm", action_ids=None, action_mask=None):
        """`head="lm"`: the actor's logits; `head="critic"`: the critic's (Q1, Q2, V1, V2) (`TurnCritic.forward`)."""
        if head == "lm":
            return self.lm(input_ids=input_ids, attention_mask=attention_mask).logits
        return self.critic(input_ids, attention_mask, action_ids, action_mask)


def discounted_returns(rewards: Sequence[float], gamma: float) -> list[float]:
    """Each turn's discounted return to the end of its episode, G_t = r_t + gamma G_{t+1}, from the episode's turn
    rewards in order (an episode cut by the step limit ends at its last turn: the return it realized)."""
    out, ahead = [0.0] * len(rewards), 0.0
    for i in range(len(rewards) - 1, -1, -1):
        ahead = rewards[i] + gamma * ahead
        out[i] = ahead
    return out


def turn_value_fit(values: torch.Tensor, returns: torch.Tensor, states: Sequence[int]) -> dict[str, float]:
    """The value methods' critic metrics (`lmrl.algos.critic`) for turn values against realized returns: rank
    correlation per turn and per distinct state (each state's mean return), mean bias, RMSE, and `fitted`."""
    turns = pd.DataFrame({"value": values.numpy(), "ret": returns.numpy(), "state": list(states)})
    by_state = turns.groupby("state")[["value", "ret"]].mean()
    rho_states = spearman(by_state["value"], by_state["ret"])
    return {"critic/spearman": spearman(turns["value"], turns["ret"]), "critic/spearman_states": rho_states,
            "critic/value_bias": float((values - returns).mean()),
            "critic/value_rmse": float((values - returns).pow(2).mean().sqrt()),
            "critic/fitted": float(rho_states >= MIN_SPEARMAN)}


def right_padded(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, mask) [B, longest] with each row at the left and pads after it."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)], mask[i, : len(r)] = torch.as_tensor(list(r), dtype=torch.long), 1
    return ids, mask


def final_critic_health(rounds: Sequence[dict], last: int = 5) -> dict[str, float]:
    """The critic's health at the end of a run, for its record: the means over the `last` rounds of each round's
    fit on its fresh rollouts (`critic/spearman_states`, `critic/value_bias`, ...; a NaN correlation, from rollouts
    of one return, left out), and `fitted` when the mean per-state correlation reaches the value methods' bar."""
    tail = list(rounds)[-last:]
    out = {}
    for key in ("critic/spearman", "critic/spearman_states", "critic/value_bias", "critic/value_rmse"):
        values = [float(r[key]) for r in tail if key in r and not math.isnan(float(r[key]))]
        if values:
            out[key] = sum(values) / len(values)
    if "critic/spearman_states" in out:
        out["critic/fitted"] = float(out["critic/spearman_states"] >= MIN_SPEARMAN)
    return out


class ArcherTrainer(OnlineTrainer):
    """ArCHer's rounds (the module docstring): rollouts into a replay buffer, then joint critic and actor steps."""

    config_class = ArcherConfig

    def fit(self) -> dict:
        """The rounds, and the critic's health over the last 5 (its record's `critic/*`)."""
        return {**super().fit(), **final_critic_health(self.rounds)}

    def setup_models(self, bc_dir: Path) -> None:
        """The actor (the BC stage, dropout off), a critic whose trunk is another copy of it, the frozen target critic,
        and the replay buffer (seeded from the dataset with `offline_episodes`)."""
        if self.engine.sharded:
            raise ValueError("algo=archer samples fresh actions every step from whole weights: use engine=torch or "
                             "ZeRO-2, not ZeRO-3")
        lm = load_lm(bc_dir)
        critic = TurnCritic(load_lm(bc_dir).base_model, lm.config.hidden_size, joint=self.cfg.critic_input == "joint")
        self.target = self.engine.prepare_frozen(copy.deepcopy(critic))
        self.reference = self.engine.prepare_frozen(load_lm(bc_dir)) if self.cfg.kl_coef > 0 else None
        self.engine.setup(ArcherModel(lm, critic), self.optim_config())
        self.buffer = ReplayBuffer(self.cfg.replay_size)
        self.offline_seeded = False

    def optim_config(self) -> OptimConfig:
        """The online schedule, with the critic at `critic_lr`."""
        optim = super().optim_config()
        optim.group_lrs = (("critic.", self.cfg.critic_lr),)
        return optim

    def policy_lm(self) -> nn.Module:
        """The actor."""
        return self.engine.unwrap().lm

    def frozen_modules(self) -> dict:
        """The target critic, which checkpoints save and restore with the engine's state."""
        return {"target": self.target}

    def load_round_state(self, state: dict) -> None:
        """A resumed run refills the buffer from the finished rounds' rollouts (`<run>/rollouts/`), as it was."""
        self.seed_offline()
        for r in range(len(self.rounds)):
            self.buffer.extend(self.transitions(read_episodes(self.run_dir / "rollouts" / f"round_{r:03d}.jsonl")))

    # -- data ------------------------------------------------------------------------------------------
    def transitions(self, episodes: Sequence[Episode]) -> list[Transition]:
        """Every agent turn of the episodes as a transition: the reward is the sum from the action up to the next one,
        the next state the history just before the next action (after the last: the whole episode)."""
        policy, out = self.rollout_policy, []
        for ep in episodes:
            acts = [i for i, t in enumerate(ep.turns) if t.is_action]
            for j, i in enumerate(acts):
                nxt = acts[j + 1] if j + 1 < len(acts) else len(ep.turns)
                last = j + 1 == len(acts)
                out.append(Transition(policy.prompt_ids(ep.turns[:i]), list(policy.encode(ep.turns[i].text)),
                                      float(sum(ep.rewards[i:nxt])), policy.prompt_ids(ep.turns[:nxt]),
                                      bool(last and ep.done)))
        return out

    def seed_offline(self) -> None:
        """Put the dataset's first `offline_episodes` episodes in the buffer (once)."""
        if self.offline_seeded or not self.cfg.offline_episodes:
            return
        episodes = []
        for ep in self.task.episodes():
            episodes.append(ep)
            if len(episodes) == self.cfg.offline_episodes:
                break
        self.buffer.extend(self.transitions(episodes))
        self.offline_seeded = True
        log.info("archer: %d dataset episodes seeded the replay buffer with %d transitions", len(episodes),
                 len(self.buffer))

    # -- one round's update ----------------------------------------------------------------------------
    def update(self, episodes: list[Episode], round_idx: int) -> dict:
        """Add the round's transitions, then `updates_per_round` steps (critic only during the warm-up)."""
        self.seed_offline()
        per_episode = [self.transitions([ep]) for ep in episodes]
        fresh = [t for ts in per_episode for t in ts]
        fit = self.critic_fit(fresh, [g for ts in per_episode for g in discounted_returns([t.reward for t in ts],
                                                                                          self.cfg.gamma)])
        self.buffer.extend(fresh)
        actor_on = round_idx >= self.cfg.warmup_rounds
        generator = torch.Generator().manual_seed(hash_seed(self.seed, round_idx, 7))
        self.engine.train()
        rows = []
        for i in range(self.cfg.updates_per_round):
            drawn = self.buffer.sample(self.cfg.batch_size, generator)
            loss, logs = self.step_loss(drawn[rank()::world_size()], actor_on and i % self.cfg.actor_every == 0)
            check_finite(loss, f"archer loss in round {round_idx}", logs, self.checkpointer)
            self.engine.backward(loss)
            self.engine.step()
            self.after_step()
            rows.append(logs)
        keys = dict.fromkeys(k for r in rows for k in r)  # the actor's only on its steps
        means = {k: sum(r[k] for r in rows if k in r) / sum(k in r for r in rows) for k in keys}
        return {"replay": len(self.buffer), "actor_on": float(actor_on), "train_steps": len(rows), **means, **fit}

    @torch.no_grad()
    def critic_fit(self, fresh: Sequence[Transition], returns: Sequence[float]) -> dict[str, float]:
        """How well the critic, before this round's update, values the states the current actor just visited: V(s) =
        min(V1, V2)(s) of each turn against the discounted return that followed it in the rollout (what V estimates
        for the policy that played it), the `critic/...` metrics of the value methods (`lmrl.algos.critic`)."""
        self.engine.eval()
        values = []
        for i in range(0, len(fresh), self.cfg.batch_size):
            states = [t.state for t in fresh[i : i + self.cfg.batch_size]]
            s_ids, s_mask = self.critic_inputs(states)
            _, _, v1, v2 = self.engine.forward(input_ids=s_ids, attention_mask=s_mask, head="critic")
            values.append(torch.minimum(v1, v2).float().cpu())
        fit = turn_value_fit(torch.cat(values), torch.tensor(returns), [hash(tuple(t.state)) for t in fresh])
        fit.update(self.maze_probe())
        self.engine.train()
        return fit

    @torch.no_grad()
    def maze_probe(self) -> dict[str, float]:
        """On the maze tasks (`critic_probe: ...maze_probe`): from every start cell's first observation, the share where
        the critic's best move (max over the four moves of min(Q1, Q2)) is BFS-optimal, and the share where the actor's
        most likely move is (its summed log-prob over the move's tokens) -- whether the critic knows the way, and
        whether the actor has learned it."""
        if "maze_probe" not in str(self.task.cfg.get("critic_probe") or ""):
            return {}
        from lmrl.envs.maze import optimal_directions

        env, policy, actions = self.task.make_env(), self.rollout_policy, list(self.task.cfg.actions)
        cells = [tuple(opt["init_position"]) for opt in env.eval_reset_options()]
        states = [policy.prompt_ids(env.reset(options={"init_position": c})[0]) for c in cells]
        pairs_s = [s for s in states for _ in actions]
        pairs_a = [list(policy.encode(a)) for _ in states for a in actions]
        q1, q2, _, _ = self.critic_forward(pairs_s, pairs_a)
        critic_best = torch.minimum(q1, q2).float().view(len(states), len(actions)).argmax(dim=1).tolist()
        actor_best = self.action_logprob_sums(pairs_s, pairs_a).float().view(len(states), len(actions)).argmax(dim=1)
        moves = [a.split()[1] for a in actions]  # "move up\n" -> "up"
        optimal = [optimal_directions(c, env.goal, env.layout) for c in cells]
        share = lambda best: sum(moves[b] in opt for b, opt in zip(best, optimal)) / len(cells)  # noqa: E731
        return {"critic/probe_agreement": share(critic_best), "actor/probe_agreement": share(actor_best.tolist())}

    def step_loss(self, drawn: Sequence[Transition], actor_on: bool) -> tuple[torch.Tensor, dict]:
        """The critic's TD loss on the drawn transitions, plus the actor's on fresh actions at their states."""
        states, device = [t.state for t in drawn], self.engine.device
        rewards = torch.tensor([t.reward for t in drawn], device=device)
        dones = torch.tensor([t.done for t in drawn], device=device)
        with torch.no_grad():
            fresh = self.sample_actions(states)
            _, _, tv1, tv2 = self.target(*self.critic_inputs([t.next_state for t in drawn]))
            tq1, tq2, _, _ = self.target(*self.critic_inputs(states, fresh))
        q1, q2, v1, v2 = self.critic_forward(states, [t.action for t in drawn])
        loss, logs = archer_critic_loss(q1, q2, v1, v2, tv1, tv2, tq1, tq2, rewards, dones, self.cfg.gamma)
        if actor_on:
            with torch.no_grad():
                adv = archer_advantages(*self.critic_forward(states, fresh))
            logp, scored = self.action_token_logprobs(states, fresh)
            actor = archer_actor_loss((logp * scored).sum(dim=1), adv)
            loss = loss + actor
            logs.update(actor_loss=actor.item(), advantage_mean=adv.mean().item(),
                        advantage_abs=adv.abs().mean().item())
            if self.reference is not None:
                with torch.no_grad():
                    ref_logp, _ = self.action_token_logprobs(states, fresh, self.reference)
                kl = kl_k3_loss(logp[scored], ref_logp[scored])
                loss, logs["kl"] = loss + self.cfg.kl_coef * kl, kl.item()
        return loss, logs

    def critic_inputs(self, states, actions=None) -> tuple:
        """Padded (state ids, state mask[, action ids, action mask]) on the engine's device."""
        pad = self.tokenizer.pad_token_id
        out = right_padded(states, pad) + (right_padded(actions, pad) if actions is not None else ())
        return tuple(t.to(self.engine.device) for t in out)

    def critic_forward(self, states, actions) -> tuple:
        """The trained critic's (Q1, Q2, V1, V2) at (state, action) pairs, through the engine."""
        s_ids, s_mask, a_ids, a_mask = self.critic_inputs(states, actions)
        return self.engine.forward(input_ids=s_ids, attention_mask=s_mask, head="critic", action_ids=a_ids,
                                   action_mask=a_mask)

    @torch.no_grad()
    def sample_actions(self, states: Sequence[list[int]]) -> list[list[int]]:
        """One fresh turn of the current actor at each state (the rollout's sampling: temperature, newline stop),
        as the tokens the policy's training sequences would hold for it."""
        policy = self.rollout_policy
        was_training = policy.model.training
        policy.model.eval()
        rows = sample_turns(policy.model, states, policy.stop_mask, self.tokenizer.pad_token_id, policy.max_new_tokens,
                            policy.temperature, policy.sampling_generator())
        policy.model.train(was_training)
        return [list(policy.encode(end_turn(self.tokenizer.decode(r, skip_special_tokens=True)))) for r in rows]

    def action_logprob_sums(self, states, actions) -> torch.Tensor:
        """[B] sum over each action's tokens of log pi(token | state, earlier tokens), with gradient."""
        logp, scored = self.action_token_logprobs(states, actions)
        return (logp * scored).sum(dim=1)

    def action_token_logprobs(self, states, actions, model: nn.Module | None = None) -> tuple:
        """([B, T-1] log-probs of each row's next token under the actor, or under `model` (the KL reference), and the
        [B, T-1] mask of the positions that score an action token)."""
        rows = [(s[-(self.max_length - len(a)):] if len(s) + len(a) > self.max_length else s) + a
                for s, a in zip(states, actions)]
        ids, mask = (t.to(self.engine.device) for t in right_padded(rows, self.tokenizer.pad_token_id))
        logits = (model(input_ids=ids, attention_mask=mask).logits if model is not None
                  else self.engine.forward(input_ids=ids, attention_mask=mask, head="lm"))
        logp = token_logprobs(logits, ids[:, 1:])
        scored = torch.zeros_like(mask[:, 1:], dtype=torch.bool)
        for i, (row, a) in enumerate(zip(rows, actions)):
            scored[i, len(row) - len(a) - 1 : len(row) - 1] = True  # position t scores token t + 1
        return logp, scored

    def after_step(self) -> None:
        """Polyak-average the target critic towards the critic, once per completed optimizer step."""
        polyak_update(list(self.target.parameters()), list(self.engine.unwrap().critic.parameters()), self.cfg.tau)

    # -- export and evaluation ---------------------------------------------------------------------------
    def save(self, directory: Path) -> None:
        """The actor as a `save_pretrained` checkpoint (what `lmrl.evaluate` and `lmrl.serve` load), and the critic's
        weights beside it (`archer_critic.pt`)."""
        model = self.engine.unwrap()
        model.lm.save_pretrained(directory)
        self.tokenizer.save_pretrained(directory)
        torch.save(model.critic.state_dict(), Path(directory) / "archer_critic.pt")
        write_step(Path(directory), self.engine.global_step)

    def policies(self, eval_cfg, seed: int) -> dict:
        """The actor, sampled (BC's policy)."""
        return {"sample": lm_policy(self.policy_lm(), self.tokenizer, self.task, eval_cfg, seed)}

