"""Group-relative policy gradient (`algo=group_pg`): the turn-level baseline of GRPO / RLOO-style
multi-turn agents.

Each round pins `episodes_per_round / k` tasks (a random start, then `reset(options=...)` from its
task-defining info, `conf/task_info`) and plays each `k` times with the current policy.  Episode i
of a group gets A_i = (R_i − mean) / std over the group (`normalize=false`: R_i − mean), applied to
every one of its agent tokens; the loss is PPO's clipped surrogate on old log-probs from a
teacher-forced pass.  No value head, no KL term: the group mean is the baseline.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

import torch

from lmrl.algos.bc import BCTrainer
from lmrl.algos.online import OnlineConfig, OnlineTrainer
from lmrl.algos.ppo import PPOTrainer, Scored, token_logprobs
from lmrl.algos.ppo_losses import policy_loss
from lmrl.algos.privileged import TaskInfo, task_info_for
from lmrl.algos.sweet_critic import load_lm
from lmrl.algos.turn_losses import group_advantages
from lmrl.data.tokenize import TokenSequence, decision_points
from lmrl.envs.base import Episode


@dataclass
class GroupPGConfig(OnlineConfig):
    name: str = "group_pg"
    # Rollouts per pinned start.
    k: int = 8
    # Divide by the group's standard deviation (GRPO) or only subtract its mean (RLOO-like).
    normalize: bool = True
    cliprange: float = 0.2
    # Sequences per no-grad pass when computing old log-probs (memory, not math).
    score_batch_size: int = 64
    # Per task: the reset options that pin a start (and the keys that identify it).
    task_info: dict[str, TaskInfo] = field(default_factory=dict)

    def validate(self) -> list[str]:
        problems = super().validate() + [f"task_info.{t}: {p}" for t, i in self.task_info.items() for p in i.validate()]
        if self.k < 2 or self.episodes_per_round % self.group_size:
            problems.append(f"k must be >= 2 and episodes_per_round a multiple of k (got {self.k}, "
                            f"{self.episodes_per_round})")
        if self.cliprange <= 0 or self.score_batch_size < 1:
            problems.append("cliprange must be > 0 and score_batch_size >= 1")
        return problems

    @property
    def group_size(self) -> int:
        """k, or the whole round when it has fewer episodes (debug=smoke's rounds of 4)."""
        return min(self.k, self.episodes_per_round)


class GroupPGTrainer(PPOTrainer):
    """PPO's rounds and minibatch loop with group-relative advantages instead of a critic."""

    config_class = GroupPGConfig

    def setup_models(self, bc_dir: Path) -> None:
        self.info = task_info_for(self.cfg.task_info, self.task.name)
        self.engine.setup(load_lm(bc_dir), self.optim_config())  # dropout off: ratios start at exactly 1

    def policy_lm(self) -> torch.nn.Module:
        return self.engine.unwrap()

    def trainer_state(self) -> dict:
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
        keys = [self.info.task_key(ep) for ep in episodes]
        ids = {key: g for g, key in enumerate(dict.fromkeys(keys))}
        returns = torch.tensor([ep.total_return for ep in episodes], dtype=torch.float32)
        adv = group_advantages(returns, torch.tensor([ids[k] for k in keys]), self.cfg.normalize).tolist()
        # an episode as good as its group's mean teaches nothing: its tokens are left out
        seqs, seq_adv = [], []
        for ep, a in zip(episodes, adv):
            if a != 0.0:
                links = self.link_sequences(ep)
                seqs, seq_adv = seqs + links, seq_adv + [a] * len(links)
        logs = {"groups": len(ids), "episodes_with_signal": sum(a != 0.0 for a in adv)}
        if not seqs:
            return {**logs, "train_steps": 0}
        samples = [Scored(s, lp, lp.new_zeros(0), torch.full_like(lp, a), lp.new_zeros(0))
                   for s, lp, a in zip(seqs, self.old_logprobs(seqs), seq_adv)]
        return {**logs, **self.optimize(samples, round_idx)}

    @torch.no_grad()
    def old_logprobs(self, seqs: list[TokenSequence]) -> list[torch.Tensor]:
        """Teacher-forced log-probs of each sequence's decisions under the current policy (ratios start at 1)."""
        self.engine.eval()
        out = []
        for i in range(0, len(seqs), self.cfg.score_batch_size):
            batch = self.collate(seqs[i : i + self.cfg.score_batch_size])
            decide = decision_points(batch["action_mask"], batch["attention_mask"])
            logits = self.engine.forward(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
            out += list(token_logprobs(logits, batch["input_ids"][:, 1:])[decide].split(decide.sum(dim=1).tolist()))
        return out

    def minibatch_loss(self, mb: list[Scored]) -> tuple[torch.Tensor, dict]:
        batch = self.collate([s.seq for s in mb])
        decide = decision_points(batch["action_mask"], batch["attention_mask"])
        logits = self.engine.forward(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        logp = token_logprobs(logits, batch["input_ids"][:, 1:])[decide]
        old, adv = torch.cat([s.old_logp for s in mb]), torch.cat([s.advantages for s in mb])
        loss, logs = policy_loss(logp, old, adv, self.cfg.cliprange)
        return loss, {"pg_loss": loss.item(), **logs}

    def save(self, directory: Path) -> None:
        BCTrainer.save(self, directory)

    def policies(self, eval_cfg, seed: int) -> dict:
        return BCTrainer.policies(self, eval_cfg, seed)
