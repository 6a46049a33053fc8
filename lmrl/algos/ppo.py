"""Multi-turn token-level PPO (LMRL-Gym's recipe, algorithms.md §4).

Model layout as in the original: the policy LM with a value head on its last hidden state
(one trunk, value gradients reach it), and a frozen copy of the BC policy as the KL
reference.  Dropout is switched off so log-probs are deterministic.

One round:

1. Roll out `episodes_per_round` episodes with the current policy (temperature 1).
2. Re-tokenize them exactly like the offline data (one sequence per action for windowed
   tasks) and run one teacher-forced pass of policy + value and of the reference: the old
   log-probs and values come from this pass, not from the sampler, so ratios start at 1.
3. Per agent token: `r - kl_coef * (log pi - log pi_ref)` (env reward on an utterance's last
   token).  The decision points of an episode's sequences, in order, form one stream, and GAE
   runs over it: environment tokens are never states, and the value after an action's last
   token is the value at the next action's first decision (0 after the episode).
4. Whiten advantages over the round; `epochs` passes of shuffled minibatches of the clipped
   policy loss + `value_coef` x clipped value loss (+ `bc_weight` x BC on the offline data).
5. Adapt the KL coefficient when `kl_target` is set.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM

from lmrl.algos.bc import bc_loss, lm_policy
from lmrl.algos.online import OnlineConfig, OnlineTrainer
from lmrl.algos.ppo_losses import (AdaptiveKL, FixedKL, gae, kl_k3, kl_penalized_rewards, policy_loss, value_loss,
                                   whiten)
from lmrl.algos.value_losses import gather_tokens
from lmrl.dist import OptimConfig, shard
from lmrl.data.tokenize import TokenSequence, decision_points, next_decision_index
from lmrl.envs.base import Episode
from lmrl.models.factory import adapters_off, with_lora
from lmrl.models.value import ValueModel

log = logging.getLogger(__name__)


@dataclass
class PPOConfig(OnlineConfig):
    """`algo=ppo`: `OnlineConfig` plus GAE's discount and lambda, the clip ranges, the value loss's weight and learning
    rate, the KL penalty (fixed, or adaptive with `kl_target`), and an optional BC term on the offline data."""

    name: str = "ppo"
    gamma: float = 0.99
    lam: float = 0.95
    cliprange: float = 0.2
    cliprange_value: float = 0.2
    value_coef: float = 0.5
    # Learning rate of the value head (its zero-initialised output layer moves ~lr per Adam step); null = `lr`,
    # the original's single rate.  The trunk, shared with the policy, always trains at `lr`.
    value_lr: float | None = None
    # Per-token KL penalty to the BC reference; adaptive (Ziegler) when kl_target is set.
    kl_coef: float = 0.001
    kl_target: float | None = None
    kl_horizon: int = 10000
    whiten_advantages: bool = True
    # Weight of a BC loss on the offline dataset added to each minibatch (0 for maze).
    bc_weight: float = 0.0
    # Initial value-head bias; null = the mean discounted return of the first round's decisions.
    value_bias: float | None = None
    # Sequences per teacher-forced pass when scoring a round (memory, not math).
    score_batch_size: int = 64

    def validate(self) -> list[str]:
        problems = super().validate()
        if not (0 <= self.gamma <= 1 and 0 <= self.lam <= 1):
            problems.append(f"gamma and lam must be in [0, 1] (got {self.gamma}, {self.lam})")
        if self.cliprange <= 0 or self.cliprange_value <= 0 or self.value_coef < 0 or self.kl_coef < 0:
            problems.append("cliprange and cliprange_value must be > 0; value_coef and kl_coef >= 0")
        if self.kl_target is not None and (self.kl_target <= 0 or self.kl_horizon < 1):
            problems.append("kl_target must be > 0 and kl_horizon >= 1")
        if self.value_lr is not None and self.value_lr <= 0:
            problems.append(f"value_lr must be > 0 or null (got {self.value_lr})")
        if self.bc_weight < 0 or self.score_batch_size < 1:
            problems.append("bc_weight must be >= 0 and score_batch_size >= 1")
        return problems


@dataclass
class Scored:
    """One sequence of a round with per-decision arrays (decision points in order)."""

    seq: TokenSequence
    old_logp: torch.Tensor  # [n]
    old_values: torch.Tensor  # [n]
    advantages: torch.Tensor  # [n]
    returns: torch.Tensor  # [n]
    ref_logp: torch.Tensor | None = None  # [n], where the loss itself has a KL term (group PG)


class PPOTrainer(OnlineTrainer):
    """Multi-turn token-level PPO from the BC stage (see the module docstring for one round's steps): a value head on
    the policy's trunk, a frozen BC reference for the KL penalty, GAE over each episode's decisions."""

    config_class = PPOConfig
    supports_lora = True

    def setup_models(self, bc_dir: Path) -> None:
        """The policy with a value head on its trunk (dropout off, so ratios start at 1), the frozen reference, the KL
        controller and, with `bc_weight`, the offline batches of the BC term."""
        lm = with_lora(AutoModelForCausalLM.from_pretrained(bc_dir), self.lora, bc_dir)  # model.lora: adapters
        for module in lm.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0  # PPO ratios need deterministic log-probs (the adapters' dropout too)
        self.model = ValueModel(lm, n_q=0, with_v=True, keep_lm_head=True)
        self.engine.setup(self.model, self.optim_config())
        # the KL reference is the BC policy: with LoRA, the trunk itself with its adapters off (no second copy)
        self.reference = self.engine.prepare_frozen(
            adapters_off(lm) if self.lora is not None else AutoModelForCausalLM.from_pretrained(bc_dir))
        cfg = self.cfg
        self.kl = AdaptiveKL(cfg.kl_coef, cfg.kl_target, cfg.kl_horizon) if cfg.kl_target else FixedKL(cfg.kl_coef)
        self.value_initialized = cfg.value_bias is not None
        if cfg.value_bias is not None:
            torch.nn.init.constant_(self.model.v_head.out.bias, cfg.value_bias)
        self.offline = None
        if cfg.bc_weight > 0:
            self.offline = self.batches(self.sequences())  # the task's offline data, for the BC term

    def policy_lm(self) -> torch.nn.Module:
        """The policy LM under the value head (rollouts sample from it)."""
        return self.model.lm

    def optim_config(self) -> OptimConfig:
        """The online schedule, with the value head at `value_lr` when one is given."""
        optim = super().optim_config()
        if self.cfg.value_lr is not None:
            optim.group_lrs = (("v_head.", self.cfg.value_lr),)
        return optim

    def fit(self) -> dict:
        """The online loop's metrics plus the value head's health: its explained variance over the last five
        rounds (each measured on a round's targets before that round's update)."""
        metrics = super().fit()
        recent = [ev for r in self.rounds[-5:] if math.isfinite(ev := r.get("explained_variance", math.nan))]
        if recent:
            metrics["critic/explained_variance"] = sum(recent) / len(recent)
        return metrics

    def trainer_state(self) -> dict:
        """The online state plus the KL coefficient and whether the value head's bias was set."""
        return {**super().trainer_state(), "kl_coef": self.kl.value, "value_initialized": self.value_initialized}

    def load_round_state(self, state: dict) -> None:
        """Restore the KL coefficient and the value-bias flag from a checkpoint."""
        self.kl.value, self.value_initialized = state["kl_coef"], state["value_initialized"]

    @torch.no_grad()
    def score(self, seqs: list[TokenSequence]) -> list[dict]:
        """Teacher-forced pass: per sequence, its decisions' log-probs (policy, reference), values, rewards."""
        self.engine.eval()
        out = []
        for i in range(0, len(seqs), self.cfg.score_batch_size):
            chunk = seqs[i : i + self.cfg.score_batch_size]
            batch = self.collate(chunk)
            decide = decision_points(batch["action_mask"], batch["attention_mask"])
            tokens = batch["input_ids"][:, 1:]
            model_out = self.engine.forward(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
            ref_logits = self.reference(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
            columns = {  # the round stays on the device: scoring -> GAE -> minibatches
                "logp": token_logprobs(model_out.logits, tokens),
                "ref_logp": token_logprobs(ref_logits, tokens),
                "values": model_out.v[:, :-1].float(),
                "rewards": batch["rewards"][:, 1:],
            }
            counts = decide.sum(dim=1).tolist()
            split = {k: v[decide].split(counts) for k, v in columns.items()}  # row-major: each row in order
            out += [{k: split[k][b] for k in columns} for b in range(len(chunk))]
        return out

    def advantages(self, episodes_scored: list[list[dict]]) -> tuple[list[list[dict]], dict]:
        """GAE over each episode's stream of decisions (all its sequences, in order)."""
        streams = [{k: torch.cat([s[k] for s in links]) for k in links[0]} for links in episodes_scored]
        length, device = max(len(s["logp"]) for s in streams), streams[0]["logp"].device
        valid = torch.zeros(len(streams), length, dtype=torch.bool, device=device)
        padded = {k: torch.zeros(len(streams), length, device=device) for k in streams[0]}
        for e, s in enumerate(streams):
            valid[e, : len(s["logp"])] = True
            for k in padded:
                padded[k][e, : len(s[k])] = s[k]
        if not self.value_initialized:
            # Adam moves a bias by ~lr per step: start V at the mean discounted return (V == bias now,
            # the head's output weights are still zero), as MC/ILQL do for their heads
            _, mc = gae(padded["rewards"], torch.zeros_like(padded["values"]), valid, next_decision_index(valid),
                        self.cfg.gamma, 1.0)
            bias = float(mc[valid].mean())
            torch.nn.init.constant_(self.model.v_head.out.bias, bias)
            padded["values"] = torch.where(valid, torch.full_like(padded["values"], bias), 0.0)
            self.value_initialized = True
            log.info("ppo: value head bias set to the first round's mean return %.3f", bias)
        rewards = kl_penalized_rewards(padded["rewards"], padded["logp"], padded["ref_logp"], valid, self.kl.value)
        adv, ret = gae(rewards, padded["values"], valid, next_decision_index(valid), self.cfg.gamma, self.cfg.lam)
        if self.cfg.whiten_advantages:
            adv = whiten(adv, valid)
        kl = float(kl_k3(padded["logp"], padded["ref_logp"], valid))
        # critic health before this round's update: how much of the targets' variance the values explain
        explained = explained_variance(padded["values"], ret, valid)
        out = []
        for e, links in enumerate(episodes_scored):
            n = [len(s["logp"]) for s in links]
            fields = {"old_values": padded["values"][e][valid[e]], "advantages": adv[e][valid[e]],
                      "returns": ret[e][valid[e]]}
            per_link = {k: v.split(n) for k, v in fields.items()}
            out.append([{**s, **{k: per_link[k][j] for k in per_link}} for j, s in enumerate(links)])
        return out, {"kl": kl, "kl_coef": self.kl.value, "return_target_mean": float(ret[valid].mean()),
                     "old_value_mean": float(padded["values"][valid].mean()), "explained_variance": explained}

    def update(self, episodes: list[Episode], round_idx: int) -> dict:
        """One PPO update from a round: score its sequences, compute KL-penalized GAE advantages, optimize, then adapt
        the KL coefficient. Returns the round's logs (KL, value statistics, losses, steps)."""
        links = [ep_links for ep_links in map(self.link_sequences, episodes) if ep_links]
        scored = iter(self.score([s for ep_links in links for s in ep_links]))
        per_episode, logs = self.advantages([[next(scored) for _ in ep_links] for ep_links in links])
        samples = [Scored(seq, d["logp"], d["old_values"], d["advantages"], d["returns"])
                   for ep_links, ds in zip(links, per_episode) for seq, d in zip(ep_links, ds)]
        train_logs = self.optimize(samples, round_idx)
        self.kl.update(logs["kl"], len(samples))
        return {**logs, **train_logs}

    def optimize(self, samples: list[Scored], round_idx: int) -> dict:
        """`epochs` passes of shuffled minibatches over a round's scored sequences, at most `train_steps` optimizer
        steps; returns the step count and the mean of each logged value. Raises `FloatingPointError` on a non-finite
        loss."""
        self.engine.train()
        totals: dict[str, float] = {}
        steps, budget = 0, self.train_steps(len(samples))
        order_gen = torch.Generator().manual_seed(self.seed * 7919 + round_idx)
        for _ in range(self.cfg.epochs):
            order = torch.randperm(len(samples), generator=order_gen).tolist()
            for i in range(0, len(order), self.cfg.batch_size):
                if steps == budget:
                    break
                # every process holds the whole round; each takes its share of the minibatch
                mb = shard([samples[j] for j in order[i : i + self.cfg.batch_size]])
                loss, logs = self.minibatch_loss(mb)
                if not torch.isfinite(loss):
                    raise FloatingPointError(f"non-finite PPO loss in round {round_idx}: {logs}")
                self.engine.backward(loss)
                stats = self.engine.step()
                for k, v in {**logs, "grad_norm": float(stats["grad_norm"])}.items():
                    totals[k] = totals.get(k, 0.0) + v
                steps += 1
        return {"train_steps": steps, **{k: v / max(steps, 1) for k, v in totals.items()}}

    def minibatch_loss(self, mb: list[Scored]) -> tuple[torch.Tensor, dict]:
        """The clipped policy loss + `value_coef` x the clipped value loss on a minibatch (+ `bc_weight` x BC on an
        offline batch), and its logs."""
        batch = self.collate([s.seq for s in mb])
        decide = decision_points(batch["action_mask"], batch["attention_mask"])
        out = self.engine.forward(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        logp = token_logprobs(out.logits, batch["input_ids"][:, 1:])[decide]
        values = out.v[:, :-1][decide]
        cat = lambda name: torch.cat([getattr(s, name) for s in mb])  # noqa: E731
        pg, pg_logs = policy_loss(logp, cat("old_logp"), cat("advantages"), self.cfg.cliprange)
        vf, vf_logs = value_loss(values.float(), cat("old_values"), cat("returns"), self.cfg.cliprange_value)
        loss = pg + self.cfg.value_coef * vf
        logs = {"pg_loss": pg.item(), "vf_loss": vf.item(), **pg_logs, **vf_logs}
        if self.offline is not None:
            bc_batch = next(self.offline)
            bc_out = self.engine.forward(input_ids=bc_batch["input_ids"], attention_mask=bc_batch["attention_mask"])
            bc = bc_loss(bc_out.logits, bc_batch["input_ids"], bc_batch["action_mask"], bc_batch["attention_mask"],
                         bc_batch["weights"])
            loss = loss + self.cfg.bc_weight * bc
            logs["bc_loss"] = bc.item()
        return loss, logs

    def save(self, directory: Path) -> None:
        """The policy as a save_pretrained LM (what `lmrl.evaluate` loads) plus its value head."""
        directory = Path(directory)
        self.model.lm.save_pretrained(directory)
        self.tokenizer.save_pretrained(directory)
        torch.save(self.model.v_head.state_dict(), directory / "value_head.pt")

    def policies(self, eval_cfg, seed: int) -> dict:
        """The trained policy LM, sampled."""
        return {"sample": lm_policy(self.model.lm, self.tokenizer, self.task, eval_cfg, seed)}


def explained_variance(values: torch.Tensor, targets: torch.Tensor, valid: torch.Tensor) -> float:
    """1 - Var(targets - values) / Var(targets) over the valid entries: 1 for a value that predicts its targets,
    0 for a constant at their mean, negative for worse (NaN when the targets do not vary)."""
    v, t = values[valid].double(), targets[valid].double()
    var = t.var(unbiased=False)
    return float(1 - (t - v).var(unbiased=False) / var) if var > 0 else math.nan


def token_logprobs(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """log p(token t+1 | prefix) for every position: logits [B, T, V], tokens [B, T-1] -> [B, T-1]."""
    return gather_tokens(F.log_softmax(logits[:, :-1].float(), dim=-1), tokens)

