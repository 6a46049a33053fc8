"""Group-relative policy gradient (`algo=group_pg`): the turn-level baseline of GRPO / RLOO-style
multi-turn agents.

Each round pins `episodes_per_round / k` tasks (a random start, then `reset(options=...)` from its
task-defining info, `conf/task_info`) and plays each `k` times with the current policy.  Episode i
of a group gets A_i = (R_i − mean) / std over the group (`normalize=false`: R_i − mean), applied to
every one of its agent tokens; the loss is PPO's clipped surrogate on old log-probs from a
teacher-forced pass.  No value head: the group mean is the baseline.  `kl_coef` > 0 adds GRPO's
KL term, kl_coef x mean k3(π, π_BC) over the same tokens, with the frozen BC stage as reference.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

import torch

from lmrl.algos.bc import BCTrainer
from lmrl.algos.online import OnlineConfig, OnlineTrainer
from lmrl.algos.ppo import PPOTrainer, Scored, token_logprobs
from lmrl.algos.ppo_losses import kl_k3_loss, policy_loss
from lmrl.algos.privileged import TaskInfo, task_info_for
from lmrl.algos.sweet_critic import load_lm
from lmrl.algos.turn_losses import group_advantages
from lmrl.data.tokenize import TokenSequence, decision_points
from lmrl.dist import OptimConfig
from lmrl.envs.base import Episode


@dataclass
class GroupPGConfig(OnlineConfig):
    """`algo=group_pg`: `OnlineConfig` plus the group size `k`, whether advantages are divided by the group's standard
    deviation, the clip range, the KL weight, and each task's reset options that pin a start (`task_info`)."""

    name: str = "group_pg"
    # Rollouts per pinned start.
    k: int = 8
    # Divide by the group's standard deviation (GRPO) or only subtract its mean (RLOO-like).
    normalize: bool = True
    cliprange: float = 0.2
    # A bounded update per round of fresh rollouts (conf/algo/group_pg.yaml: uncapped, PO maze collapses late).
    max_steps_per_round: int = 16
    # Weight of GRPO's KL(π || π_BC) term in the loss (k3 estimator on the trained tokens; 0 = none).
    kl_coef: float = 0.05
    # Sequences per no-grad pass when computing old log-probs (memory, not math).
    score_batch_size: int = 64
    # Per task: the reset options that pin a start (and the keys that identify it).
    task_info: dict[str, TaskInfo] = field(default_factory=dict)

    def validate(self) -> list[str]:
        problems = super().validate() + [f"task_info.{t}: {p}" for t, i in self.task_info.items() for p in i.validate()]
        if self.k < 2 or self.episodes_per_round % self.group_size:
            problems.append(f"k must be >= 2 and episodes_per_round a multiple of k (got {self.k}, "
                            f"{self.episodes_per_round})")
        if self.cliprange <= 0 or self.score_batch_size < 1 or self.kl_coef < 0:
            problems.append("cliprange must be > 0, score_batch_size >= 1 and kl_coef >= 0")
        return problems

    @property
    def group_size(self) -> int:
        """k, or the whole round when it has fewer episodes (debug=smoke's rounds of 4)."""
        return min(self.k, self.episodes_per_round)


class GroupPGTrainer(PPOTrainer):
    """PPO's rounds and minibatch loop with group-relative advantages instead of a critic."""

    config_class = GroupPGConfig

    def setup_models(self, bc_dir: Path) -> None:
        """The policy LM (dropout off) and, with `kl_coef` > 0, the frozen BC reference; the task's pinning
        information."""
        self.info = task_info_for(self.cfg.task_info, self.task.name)
        self.engine.setup(load_lm(bc_dir), self.optim_config())  # dropout off: ratios start at exactly 1
        self.reference = self.engine.prepare_frozen(load_lm(bc_dir)) if self.cfg.kl_coef > 0 else None

    def policy_lm(self) -> torch.nn.Module:
        """The trained LM itself (there is no value head)."""
        return self.engine.unwrap()

    def optim_config(self) -> OptimConfig:
        """The online schedule, with no value-head learning rate."""
        return OnlineTrainer.optim_config(self)  # no value head

    def trainer_state(self) -> dict:
        """The online state (no KL controller and no value head to save)."""
        return OnlineTrainer.trainer_state(self)

    def load_round_state(self, state: dict) -> None:
        pass

    def start_states(self, round_idx: int) -> tuple[list[dict], list[int]]:
        """k episodes (distinct seeds) of each of episodes_per_round / k tasks drawn from the env's starts."""
        rng, env, options, seeds = random.Random(f"{self.seed}/{round_idx}"), self.task.make_env(), [], []
        k = self.cfg.group_size
        for _ in range(self.cfg.episodes_per_round // k):
            _, info = env.reset(seed=rng.randrange(2**31))
            options += [self.info.options(info)] * k
            seeds += [rng.randrange(2**31) for _ in range(k)]
        return options, seeds

    def update(self, episodes: list[Episode], round_idx: int) -> dict:
        """Group-relative advantages over each pinned start's `k` episodes, applied to every agent token of an episode
        (episodes with zero advantage are left out), then PPO's minibatch loop."""
        keys = [self.info.task_key(ep) for ep in episodes]
        ids = {key: g for g, key in enumerate(dict.fromkeys(keys))}
        returns = torch.tensor([ep.total_return for ep in episodes], dtype=torch.float32)
        adv = group_advantages(returns, torch.tensor([ids[k] for k in keys]), self.cfg.normalize).tolist()
        logs = {"groups": len(ids), "episodes_with_signal": sum(a != 0.0 for a in adv)}
        return {**logs, **self.learn_from(episodes, adv, round_idx)}

    def learn_from(self, episodes: list[Episode], advantages: list[float], round_idx: int) -> dict:
        """PPO's minibatch loop with each episode's advantage on every token of its moves; an episode with zero
        advantage teaches nothing and is left out.  Returns the loop's logs (`train_steps` 0 when nothing is left)."""
        seqs, seq_adv = [], []
        for ep, a in zip(episodes, advantages):
            if a != 0.0:
                links = self.link_sequences(ep)
                seqs, seq_adv = seqs + links, seq_adv + [a] * len(links)
        if not seqs:
            return {"train_steps": 0}
        old, ref = self.old_logprobs(seqs)
        samples = [Scored(s, lp, lp.new_zeros(0), self.token_advantages(s, lp, a), lp.new_zeros(0), r)
                   for s, lp, r, a in zip(seqs, old, ref, seq_adv)]
        return self.optimize(samples, round_idx)

    def token_advantages(self, seq: TokenSequence, logp: torch.Tensor, advantage: float) -> torch.Tensor:
        """The advantage of each of the sequence's decisions (aligned with `logp`): the episode's, on every one."""
        return torch.full_like(logp, advantage)

    @torch.no_grad()
    def old_logprobs(self, seqs: list[TokenSequence]) -> tuple[list[torch.Tensor], list[torch.Tensor | None]]:
        """Teacher-forced log-probs of each sequence's decisions under the current policy (ratios start at 1)
        and under the reference (None without a KL term)."""
        self.engine.eval()
        old, ref = [], []
        for i in range(0, len(seqs), self.cfg.score_batch_size):
            batch = self.collate(seqs[i : i + self.cfg.score_batch_size])
            decide = decision_points(batch["action_mask"], batch["attention_mask"])
            counts, tokens = decide.sum(dim=1).tolist(), batch["input_ids"][:, 1:]
            inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
            old += list(token_logprobs(self.engine.forward(**inputs).logits, tokens)[decide].split(counts))
            if self.reference is None:
                ref += [None] * len(counts)
            else:
                ref += list(token_logprobs(self.reference(**inputs).logits, tokens)[decide].split(counts))
        return old, ref

    def minibatch_loss(self, mb: list[Scored]) -> tuple[torch.Tensor, dict]:
        """PPO's clipped surrogate on the group advantages, + `kl_coef` x the k3 estimate of KL to the BC reference."""
        batch = self.collate([s.seq for s in mb])
        decide = decision_points(batch["action_mask"], batch["attention_mask"])
        logits = self.engine.forward(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        logp = token_logprobs(logits, batch["input_ids"][:, 1:])[decide]
        old, adv = torch.cat([s.old_logp for s in mb]), torch.cat([s.advantages for s in mb])
        loss, logs = policy_loss(logp, old, adv, self.cfg.cliprange)
        logs["pg_loss"] = loss.item()
        if self.reference is not None:
            kl = kl_k3_loss(logp, torch.cat([s.ref_logp for s in mb]))
            loss, logs["kl"] = loss + self.cfg.kl_coef * kl, kl.item()
        return loss, logs

    def save(self, directory: Path) -> None:
        """The LM as a `save_pretrained` checkpoint (BC's export; no value head)."""
        BCTrainer.save(self, directory)

    def policies(self, eval_cfg, seed: int) -> dict:
        """The trained LM, sampled (BC's policy)."""
        return BCTrainer.policies(self, eval_cfg, seed)
