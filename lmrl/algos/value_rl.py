"""Offline value-based RL: MC returns and ILQL, starting from a (cached) BC stage.

Layout as in LMRL-Gym: a frozen BC policy, a value trunk initialized from it with Q heads
(ILQL: Q1, Q2 and V) trained on the token-level MDP, and for ILQL a Polyak-averaged target
copy updated after every completed optimizer step.  `shared_trunk=true` instead trains one
network as policy (BC loss on its LM head) and critic (trlx style): half the memory and
compute at generation time, at the price of value gradients reshaping the policy's features.
Policies: sampling from `logits_BC + beta * min(Q1, Q2)` (MC: `+ beta * Q`) with a KV cache
per trunk, and, for tasks with an enumerable action list, a reranker.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from lmrl.algos.base import OptimFields
from lmrl.algos.bc import BCConfig, BCTrainer, bc_loss, lm_policy, log_sequences, start_checkpoint
from lmrl.algos.critic import critic_health
from lmrl.algos.value_losses import gather_tokens, ilql_loss, mc_loss, mc_returns, polyak_update
from lmrl.data.packed import PackedSequences
from lmrl.data.tokenize import (
    SegmentEncoder, collate, decision_points, episode_to_chain, has_decision, next_decision_index,
)
from lmrl.checkpoint import Checkpointer
from lmrl.models.factory import lora_settings, model_max_length, with_lora
from lmrl.models.value import GuidedLM, ValueModel
from lmrl.rollout.rerank import RerankPolicy

log = logging.getLogger(__name__)


HEADLINES = ("guided", "rerank")


@dataclass
class ValueRLConfig(OptimFields):
    """`algo=mc`: the Q head's regression (discount, CQL weight), policy extraction (beta, the reranker) and the BC
    stage the critic starts from (`bc`, or `init_from`)."""

    name: str = "mc"
    lr: float = 1e-4
    gamma: float = 0.99
    cql_weight: float = 0.0
    # Policy extraction weight on Q; eval_betas adds more betas evaluated in the same run.
    beta: float = 8.0
    eval_betas: list[float] = field(default_factory=list)
    # Guidance re-ranks only tokens the BC policy gives at least this probability (0 = all, as LMRL-Gym).
    guide_min_prob: float = 1.0e-3
    # Also evaluate a greedy reranker over the task's action list (when the task has one).
    rerank: bool = True
    # The run's headline policy: `guided` (value-guided sampling at beta) or `rerank` (the reranker over the
    # task's action list, argmax of each move's summed Q: the original's other extraction; always evaluated).
    headline: str = "guided"
    # The reranker's temperature: 0 takes the argmax (policy `rerank`), T > 0 samples from softmax(scores / T)
    # (policy `rerank T=<T>`), the original's two modes.
    rerank_temperature: float = 0.0
    # Initial bias of the heads' last layer; null = the data's mean discounted return at decision points.
    head_bias: float | None = None
    # One network as policy and critic (trlx) instead of frozen BC policy + value trunk.
    shared_trunk: bool = False
    # A BC checkpoint to start from; null trains (or reuses a cached) BC stage with `bc`.
    init_from: str | None = None
    bc: BCConfig = field(default_factory=BCConfig)
    log_every: int = 25
    # Held-out episodes (the recipe with another seed) the critic's health is measured on.
    critic_episodes: int = 64

    def validate(self) -> list[str]:
        problems = super().validate() + [f"bc.{p}" for p in self.bc.validate()]
        if self.critic_episodes < 1:
            problems.append(f"critic_episodes must be >= 1 (got {self.critic_episodes})")
        if not 0 <= self.gamma <= 1:
            problems.append(f"gamma must be in [0, 1] (got {self.gamma})")
        if self.cql_weight < 0 or self.beta < 0 or any(b < 0 for b in self.eval_betas):
            problems.append("cql_weight, beta and eval_betas must be >= 0")
        if self.headline not in HEADLINES:
            problems.append(f"headline must be one of {', '.join(HEADLINES)} (got {self.headline!r})")
        if self.rerank_temperature < 0:
            problems.append(f"rerank_temperature must be >= 0 (0 = argmax; got {self.rerank_temperature})")
        return problems


@dataclass
class ILQLConfig(ValueRLConfig):
    """`algo=ilql`: `ValueRLConfig` plus V's expectile, the Polyak target's rate, a bound on bootstrapped targets and
    TD(lambda) targets."""

    name: str = "ilql"
    # Expectile of the V regression (> 0.5 pushes V toward the best in-data action).
    tau: float = 0.7
    # Polyak weight on the online network for the target update.
    polyak_alpha: float = 0.005
    # Upper bound of every bootstrapped target (Q's r + gamma V(s'), V's min target Q): the largest return the
    # task's rewards allow from any state (0 on the maze, whose rewards are <= 0); None = no bound.
    value_max: float | None = None
    # Q's targets: one-step r + gamma V(s') at 0 (the original), TD(lambda) returns through the chunk above it.
    td_lambda: float = 0.0

    def validate(self) -> list[str]:
        problems = super().validate()
        if not 0 < self.tau < 1 or not 0 < self.polyak_alpha <= 1:
            problems.append(f"tau must be in (0, 1) and polyak_alpha in (0, 1] (got {self.tau}, {self.polyak_alpha})")
        if not 0 <= self.td_lambda <= 1:
            problems.append(f"td_lambda must be in [0, 1] (got {self.td_lambda})")
        return problems


class MCTrainer(BCTrainer):
    """MC returns: one Q head regressed on discounted per-token reward-to-go (+ CQL)."""

    config_class = ValueRLConfig
    supports_lora = True
    n_q, with_v = 1, False

    def __init__(self, cfg: ValueRLConfig, task, engine, model, tokenizer, logger, seed: int = 0, run_dir=None,
                 checkpointer: Checkpointer | None = None):
        self.cfg, self.task, self.engine, self.tokenizer, self.logger = cfg, task, engine, tokenizer, logger
        self.seed, self.checkpointer = seed, checkpointer
        self.run_dir = Path(run_dir) if run_dir is not None else None
        bc_dir = self.start_dir = start_checkpoint(cfg, task, engine, model, tokenizer, logger, seed)
        # the BC stage's weights; with model.lora under fresh adapters (the Q and V heads train fully)
        trunk = with_lora(AutoModelForCausalLM.from_pretrained(bc_dir), lora_settings(model), bc_dir)
        self.max_length = model_max_length(trunk)
        self.seqs, self.heldout = self.build_sequences(), None
        bias = cfg.head_bias if cfg.head_bias is not None else self.mean_return()
        log.info("%s: head bias %.3f", cfg.name, bias)
        self.value = ValueModel(trunk, self.n_q, self.with_v, keep_lm_head=cfg.shared_trunk, bias_init=bias)
        self.policy_lm = None if cfg.shared_trunk else AutoModelForCausalLM.from_pretrained(bc_dir).eval()
        if self.policy_lm is not None:
            self.policy_lm.requires_grad_(False)  # used only to act after training: on the host until then
        target = self.make_target()  # copied before the engine shards the value model (ZeRO-3)
        engine.setup(self.value, self.offline_optim())
        self.target = engine.prepare_frozen(target) if target is not None else None

    def make_target(self) -> torch.nn.Module | None:
        """The target network a subclass bootstraps from (ILQL: a frozen copy of the value model); None for MC."""
        return None

    def fit(self) -> dict:
        """Train, then measure the critic on held-out episodes (`lmrl.algos.critic`)."""
        metrics = super().fit()
        health = self.critic_point()
        self.logger.log(health, step=self.steps - 1)
        return {**metrics, **health}

    def critic_point(self) -> dict:
        """The critic's health on the task's held-out episodes (`lmrl.algos.critic.critic_health`), for curve points and
        the run's metrics."""
        if self.heldout is None:
            self.heldout = self.task.heldout_episodes(self.cfg.critic_episodes)
        return critic_health(self.value, self.tokenizer, self.task, self.heldout, self.cfg.gamma)

    def sequences(self):
        """The training chains built in `__init__` by `build_sequences` (the head bias is computed from them first)."""
        return self.seqs  # built once in __init__ (the head bias needs them before training)

    def build_sequences(self):
        """The dataset's episodes as chains of linked sequences (`episode_to_chain`): each carries the discounted return
        of what follows its window, so Monte Carlo targets stay exact on windowed tasks."""
        encode = SegmentEncoder(self.tokenizer)
        seqs = PackedSequences.build(
            (s for ep in self.task.episodes()
             for s in episode_to_chain(ep, encode, self.task.history_window, self.max_length, self.cfg.gamma,
                                       self.task.moves_per_sequence)),
            keep=has_decision, dedup=self.cfg.dedup,
            balance_states=self.cfg.balance_states)
        log_sequences(self.cfg.name, seqs)
        return seqs

    def mean_return(self) -> float:
        """Mean discounted return over the data's decision points (merged sequences count as often as they
        occur).  Adam moves a weight by about lr per step, so heads that start at 0 cannot reach returns of -50
        in a CPU-sized run; starting at the mean leaves them only the differences between actions to learn."""
        total, count = 0.0, 0.0
        for i in range(0, len(self.seqs), 1024):
            batch = collate(self.seqs[i : i + 1024], self.tokenizer.pad_token_id)
            m = self.mdp(batch)
            returns = mc_returns(m["step_rewards"], m["decide"], m["next_idx"], batch["tails"], self.cfg.gamma)
            weight = batch["weights"][:, None].expand_as(returns).double()
            total += float((returns.double() * weight)[m["decide"]].sum())
            count += float(weight[m["decide"]].sum())
        return total / max(count, 1e-12)

    def mdp(self, batch: dict) -> dict:
        """Shifted per-step tensors of the token-level MDP for a collated batch."""
        decide = decision_points(batch["action_mask"], batch["attention_mask"])
        return {"tokens": batch["input_ids"][:, 1:], "decide": decide, "next_idx": next_decision_index(decide),
                "step_rewards": batch["rewards"][:, 1:]}

    def loss(self, batch: dict) -> tuple[torch.Tensor, dict]:
        """The MC regression of Q on each decision's discounted reward-to-go, + CQL (`mc_loss`); the BC loss too with a
        shared trunk."""
        out = self.engine.forward(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        m = self.mdp(batch)
        loss, logs = mc_loss(out.qs[0][:, :-1], m["tokens"], m["step_rewards"], m["decide"], m["next_idx"],
                             batch["tails"], self.cfg.gamma, self.cfg.cql_weight, batch["weights"], batch.get("norm"))
        return self.add_bc(loss, logs, out, batch)

    def add_bc(self, loss, logs, out, batch):
        """Shared trunk: the LM head is the policy and keeps its BC loss."""
        if out.logits is None:
            return loss, logs
        bc = bc_loss(out.logits, batch["input_ids"], batch["action_mask"], batch["attention_mask"], batch["weights"],
                     batch.get("norm"))
        return loss + bc, {**logs, "bc_loss": bc.detach()}

    def policies(self, eval_cfg, seed: int) -> dict:
        """The value-guided policies and the reranker (`value_policies`), the frozen BC policy placed beside the
        critic."""
        policy_lm = self.engine.place(self.policy_lm) if self.policy_lm is not None else None  # beside the critic
        return value_policies(self.value, policy_lm, self.tokenizer, self.task, self.cfg, eval_cfg, seed)

    def save(self, directory: Path) -> None:
        """The value model (trunk as a save_pretrained dir + heads) and the BC policy beside it;
        `load_value_checkpoint` reads it back (`python -m lmrl.evaluate checkpoint=<dir>`)."""
        directory = Path(directory)
        self.value.lm.save_pretrained(directory / "value")
        self.tokenizer.save_pretrained(directory / "value")
        torch.save({"q_heads": self.value.q_heads.state_dict(),
                    "v_head": self.value.v_head.state_dict() if self.value.v_head is not None else None},
                   directory / "value" / "value_heads.pt")
        if self.policy_lm is not None:
            self.policy_lm.save_pretrained(directory / "policy")
            self.tokenizer.save_pretrained(directory / "policy")
        (directory / "lmrl_algo.json").write_text(json.dumps(dataclasses.asdict(self.cfg), default=str, indent=2))


def value_policies(value: ValueModel, policy_lm, tokenizer, task, cfg: ValueRLConfig, eval_cfg, seed: int,
                   betas: list[float] | None = None) -> dict:
    """Value-guided sampling at `cfg.beta` and each of `cfg.eval_betas` (or at `betas` when given), plus the
    reranker (greedy, or sampled at `cfg.rerank_temperature`) when the task lists its actions; the first is the
    headline (the reranker with `headline: rerank`)."""
    value.eval()
    actions = task.cfg.get("actions")
    if cfg.headline == "rerank" and not actions:
        raise ValueError(f"algo.headline=rerank needs a task with an action list (task.actions); {task.name} "
                         "has none: use algo.headline=guided")
    guided = {f"beta={beta:g}": lm_policy(GuidedLM(value, policy_lm, beta, cfg.guide_min_prob), tokenizer, task,
                                          eval_cfg, seed)
              for beta in dict.fromkeys(betas if betas else [cfg.beta, *cfg.eval_betas])}
    if not (actions and (cfg.rerank or cfg.headline == "rerank")):
        return guided
    name = f"rerank T={cfg.rerank_temperature:g}" if cfg.rerank_temperature > 0 else "rerank"
    rerank = {name: RerankPolicy(value, tokenizer, list(actions), task.history_window, eval_cfg.max_input_tokens,
                                 seed, temperature=cfg.rerank_temperature)}
    return {**rerank, **guided} if cfg.headline == "rerank" else {**guided, **rerank}


def load_value_checkpoint(directory: Path) -> tuple[ValueModel, torch.nn.Module | None, object, ValueRLConfig]:
    """(value model, BC policy or None for a shared trunk, tokenizer, algo config) from `save`'s layout."""
    directory = Path(directory)
    raw = json.loads((directory / "lmrl_algo.json").read_text())
    cfg_class = ILQLConfig if raw["name"] == "ilql" else ValueRLConfig
    names = {f.name for f in dataclasses.fields(cfg_class)}
    cfg = cfg_class(**{k: v for k, v in raw.items() if k in names and k != "bc"})
    n_q, with_v = (2, True) if cfg_class is ILQLConfig else (1, False)
    value = ValueModel(AutoModelForCausalLM.from_pretrained(directory / "value"), n_q, with_v,
                       keep_lm_head=cfg.shared_trunk)
    heads = torch.load(directory / "value" / "value_heads.pt", map_location="cpu")
    value.q_heads.load_state_dict(heads["q_heads"])
    if value.v_head is not None:
        value.v_head.load_state_dict(heads["v_head"])
    policy = None if cfg.shared_trunk else AutoModelForCausalLM.from_pretrained(directory / "policy").eval()
    return value.eval(), policy, AutoTokenizer.from_pretrained(directory / "value"), cfg


class ILQLTrainer(MCTrainer):
    """ILQL: Q1/Q2 regress on r + gamma V(s'), V on the expectile of the target min-Q, + CQL."""

    config_class = ILQLConfig
    supports_lora = True
    n_q, with_v = 2, True

    def make_target(self) -> torch.nn.Module:
        """A frozen deep copy of the value model, made before the engine can shard it.  Parameters the value model
        never trains (LoRA's base) are shared, not copied: the target differs only in what trains."""
        frozen = {id(p): p for p in self.value.parameters() if not p.requires_grad}
        return copy.deepcopy(self.value, frozen).requires_grad_(False)

    def frozen_modules(self) -> dict:
        """The Polyak target, which checkpoints save and restore with the engine's state."""
        return {"target": self.target}

    def loss(self, batch: dict) -> tuple[torch.Tensor, dict]:
        """The ILQL loss (`ilql_loss`): Q1 and Q2 on the target's bootstrapped values, V on the expectile of the
        target's min Q, + CQL; the BC loss too with a shared trunk."""
        out = self.engine.forward(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        m = self.mdp(batch)
        with torch.no_grad():
            tgt = self.target(batch["input_ids"], batch["attention_mask"])
            tq1, tq2 = (gather_tokens(q[:, :-1], m["tokens"]) for q in tgt.qs)
            v_final = self.bootstrap(batch)
        loss, logs = ilql_loss(out.qs[0][:, :-1], out.qs[1][:, :-1], out.v[:, :-1], tq1, tq2, m["tokens"],
                               m["step_rewards"], m["decide"], m["next_idx"], v_final, self.cfg.gamma, self.cfg.tau,
                               self.cfg.cql_weight, batch["weights"], batch.get("norm"), value_max=self.cfg.value_max,
                               tail=batch["tails"], td_lambda=self.cfg.td_lambda)
        return self.add_bc(loss, logs, out, batch)

    def bootstrap(self, batch: dict) -> torch.Tensor:
        """V after a sequence's last decision: V of the next link's state (windowed tasks), else 0 (done)."""
        if "next_input_ids" not in batch:
            return torch.zeros(batch["input_ids"].shape[0], device=batch["input_ids"].device)
        out = self.engine.forward(input_ids=batch["next_input_ids"], attention_mask=batch["next_attention_mask"])
        v_next = out.v.gather(1, batch["next_last"][:, None]).squeeze(1)  # ILQL: V at the next decision point
        return torch.where(batch["has_next"], v_next, torch.zeros_like(v_next))

    def after_step(self) -> None:
        """Polyak-average the target towards the value model, once per completed optimizer step."""
        # each process updates its own slices (ZeRO-3 partitions target and value alike); frozen parameters (LoRA's
        # base, shared by the two) are left alone
        trains = [p.requires_grad for p in self.engine.unwrap().parameters()]
        pairs = [(t, p) for t, p, train in zip(self.engine.local_tensors(self.target), self.engine.local_tensors(),
                                               trains, strict=True) if train]
        polyak_update([t for t, _ in pairs], [p for _, p in pairs], self.cfg.polyak_alpha)
