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
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Sequence

import torch
from torch import nn

from lmrl.algos.bc import check_finite, hash_seed, lm_policy
from lmrl.algos.online import OnlineConfig, OnlineTrainer
from lmrl.algos.ppo import token_logprobs
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
    """Twin Q(s, a) and twin V(s) on a trunk that encodes state and action separately (pooled at the last token)."""

    def __init__(self, trunk: nn.Module, width: int):
        super().__init__()
        self.trunk = trunk
        self.q1, self.q2 = mlp(2 * width, width), mlp(2 * width, width)
        self.v1, self.v2 = mlp(width, width), mlp(width, width)

    def encode(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """[B, width]: the trunk's last hidden state at each row's last real token (rows right-padded)."""
        hidden = self.trunk(input_ids=ids, attention_mask=mask).last_hidden_state
        last = mask.long().sum(dim=1) - 1
        pooled = hidden[torch.arange(ids.shape[0], device=ids.device), last]
        return pooled.to(self.v1[0].weight.dtype)  # ZeRO's bf16 weights take bf16 inputs (autocast: either)

    def forward(self, state_ids, state_mask, action_ids=None, action_mask=None) -> tuple:
        """(Q1, Q2, V1, V2), each [B]; the Qs are None without actions."""
        e_s = self.encode(state_ids, state_mask)
        v1, v2 = self.v1(e_s).squeeze(-1).float(), self.v2(e_s).squeeze(-1).float()
        if action_ids is None:
            return None, None, v1, v2
        e_sa = torch.cat([e_s, self.encode(action_ids, action_mask)], dim=-1)
        return self.q1(e_sa).squeeze(-1).float(), self.q2(e_sa).squeeze(-1).float(), v1, v2


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


def right_padded(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, mask) [B, longest] with each row at the left and pads after it."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)], mask[i, : len(r)] = torch.as_tensor(list(r), dtype=torch.long), 1
    return ids, mask


class ArcherTrainer(OnlineTrainer):
    """ArCHer's rounds (the module docstring): rollouts into a replay buffer, then joint critic and actor steps."""

    config_class = ArcherConfig

    def setup_models(self, bc_dir: Path) -> None:
        """The actor (the BC stage, dropout off), a critic whose trunk is another copy of it, the frozen target critic,
        and the replay buffer (seeded from the dataset with `offline_episodes`)."""
        if self.engine.sharded:
            raise ValueError("algo=archer samples fresh actions every step from whole weights: use engine=torch or "
                             "ZeRO-2, not ZeRO-3")
        lm = load_lm(bc_dir)
        critic = TurnCritic(load_lm(bc_dir).base_model, lm.config.hidden_size)
        self.target = self.engine.prepare_frozen(copy.deepcopy(critic))
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
        self.buffer.extend(self.transitions(episodes))
        actor_on = round_idx >= self.cfg.warmup_rounds
        generator = torch.Generator().manual_seed(hash_seed(self.seed, round_idx, 7))
        self.engine.train()
        rows = []
        for _ in range(self.cfg.updates_per_round):
            drawn = self.buffer.sample(self.cfg.batch_size, generator)
            loss, logs = self.step_loss(drawn[rank()::world_size()], actor_on)
            check_finite(loss, f"archer loss in round {round_idx}", logs, self.checkpointer)
            self.engine.backward(loss)
            self.engine.step()
            self.after_step()
            rows.append(logs)
        means = {k: sum(r[k] for r in rows) / len(rows) for k in rows[0]}
        return {"replay": len(self.buffer), "actor_on": float(actor_on), "train_steps": len(rows), **means}

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
            actor = archer_actor_loss(self.action_logprob_sums(states, fresh), adv)
            loss = loss + actor
            logs.update(actor_loss=actor.item(), advantage_mean=adv.mean().item(),
                        advantage_abs=adv.abs().mean().item())
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
        rows = [(s[-(self.max_length - len(a)):] if len(s) + len(a) > self.max_length else s) + a
                for s, a in zip(states, actions)]
        ids, mask = (t.to(self.engine.device) for t in right_padded(rows, self.tokenizer.pad_token_id))
        logp = token_logprobs(self.engine.forward(input_ids=ids, attention_mask=mask, head="lm"), ids[:, 1:])
        scored = torch.zeros_like(mask[:, 1:], dtype=torch.bool)
        for i, (row, a) in enumerate(zip(rows, actions)):
            scored[i, len(row) - len(a) - 1 : len(row) - 1] = True  # position t scores token t + 1
        return (logp * scored).sum(dim=1)

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

