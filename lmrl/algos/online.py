"""Online training: rounds of batched rollouts with the current policy, then an update.

`OnlineTrainer` holds what every online algorithm shares:

- the starting policy: the cached BC stage (`bc_checkpoint`, as for ILQL) or `init_from`;
- rollouts of `episodes_per_round` episodes from the env's random start states, all envs
  stepped in lockstep with one batched KV-cache generation per turn (finished episodes leave
  the batch, so no compute goes to them);
- transcripts: every round's episodes as JSONL under `<run>/rollouts/`, one sample printed;
- the learning curve: `<run>/rounds.csv` and `<run>/rounds.png` (rollout return per round).

Subclasses build their models in `setup_models` and learn from a round in `update`.

`OnlineFilteredBCTrainer` is LMRL-Gym's online %BC: keep the top fraction of this round's
episodes by return and fine-tune on them with the BC loss, from this round only.
"""

from __future__ import annotations

import csv
import itertools
import logging
import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from omegaconf import OmegaConf
from tqdm.auto import tqdm
from transformers import AutoModelForCausalLM

from lmrl.algos.base import OptimFields
from lmrl.algos.bc import BCConfig, BCTrainer, bc_loss, lm_policy, start_checkpoint, top_fraction
from lmrl.data.jsonl import write_episodes
from lmrl.data.tokenize import SegmentEncoder, TokenSequence, episode_to_sequences, has_decision
from lmrl.checkpoint import Checkpointer
from lmrl.dist import OptimConfig, gather_lists, is_main, shard
from lmrl.envs.base import Episode, history_to_str
from lmrl.models.factory import lora_settings, model_max_length, with_lora
from lmrl.rollout.evaluate import run_episodes
from lmrl.scoring import summarize

log = logging.getLogger(__name__)


@dataclass
class OnlineConfig(OptimFields):
    """The fields every online trainer shares: rounds, episodes per round, rollout temperature, the passes and step cap
    of each round's update, and the BC stage the policy starts from."""

    name: str = "online"
    # Rollout/update rounds, and episodes sampled per round (random start states).
    rounds: int = 20
    episodes_per_round: int = 64
    # Sampling temperature of the rollouts.
    temperature: float = 1.0
    # Passes over each round's training data, capped at max_steps_per_round optimizer steps (0 = no cap).
    epochs: int = 1
    max_steps_per_round: int = 0
    # A BC checkpoint to start from; null trains (or reuses a cached) BC stage with `bc`.
    init_from: str | None = None
    bc: BCConfig = field(default_factory=BCConfig)
    log_every: int = 25

    def validate(self) -> list[str]:
        problems = super().validate() + [f"bc.{p}" for p in self.bc.validate()]
        if self.keep_best:
            problems.append("keep_best is for offline trainers (an online run keeps its last round's weights)")
        for key in ("rounds", "episodes_per_round", "epochs"):
            if getattr(self, key) < 1:
                problems.append(f"{key} must be >= 1 (got {getattr(self, key)})")
        if self.max_steps_per_round < 0:
            problems.append(f"max_steps_per_round must be >= 0 (got {self.max_steps_per_round})")
        if self.temperature < 0:
            problems.append(f"temperature must be >= 0 (got {self.temperature})")
        return problems


@dataclass
class OnlineFilteredBCConfig(OnlineConfig):
    """`algo=online_filtered_bc`: `OnlineConfig` plus which of a round's episodes are kept for BC."""

    name: str = "online_filtered_bc"
    # Keep this round's episodes with return >= the (1 - top_fraction) percentile (LMRL-Gym: 0.3).
    top_fraction: float = 0.3
    # Also drop the episodes tied at the round's worst return (the original keeps them when fewer than top_fraction
    # of the round beat it, so a round of mostly failures imitates its failures).
    drop_worst: bool = False
    # Drop the episodes tied at the threshold when keeping them would keep more than top_fraction of the round and
    # some episode is above it (a common failure return above the worst: PO maze's -101, invalid replies below it).
    cap_ties: bool = False

    def validate(self) -> list[str]:
        problems = super().validate()
        if not 0 < self.top_fraction <= 1:
            problems.append(f"top_fraction must be in (0, 1] (got {self.top_fraction})")
        return problems


class OnlineTrainer(BCTrainer):
    """The online loop shared by PPO, group PG and online filtered BC (see the module docstring): each round plays
    `episodes_per_round` episodes with the current policy and learns from them in `update`.

    Subclasses provide `setup_models(bc_dir)` (build the trained model and call `engine.setup`) and `update(episodes,
    round_idx)`; they may override `policy_lm`, `start_states` and `load_round_state`."""

    config_class = OnlineConfig

    def __init__(self, cfg: OnlineConfig, task, engine, model, tokenizer, logger, seed: int = 0,
                 run_dir: str | Path | None = None, checkpointer: Checkpointer | None = None):
        self.cfg, self.task, self.engine, self.tokenizer, self.logger = cfg, task, engine, tokenizer, logger
        self.seed, self.run_dir, self.checkpointer = seed, Path(run_dir) if run_dir is not None else None, checkpointer
        self.encode = SegmentEncoder(tokenizer)
        self.max_length = model_max_length(model)
        self.lora = lora_settings(model)  # model.lora: `setup_models` puts fresh adapters on the BC stage's weights
        bc_dir = self.start_dir = start_checkpoint(cfg, task, engine, model, tokenizer, logger, seed)
        self.setup_models(bc_dir)
        rollout_cfg = OmegaConf.merge(task.cfg.eval, {"temperature": cfg.temperature})
        # ZeRO-3 keeps the policy in slices: rollouts use a whole replica, refreshed from it every round
        self.actor = AutoModelForCausalLM.from_pretrained(bc_dir).eval().to(engine.device) if engine.sharded else None
        self.rollout_policy = lm_policy(self.actor or self.policy_lm(), tokenizer, task, rollout_cfg, seed)
        self.rounds: list[dict] = []

    # -- what subclasses provide ------------------------------------------------------------------
    def setup_models(self, bc_dir: Path) -> None:
        """Build the trained model from the BC stage in `bc_dir` and set it up on the engine (here: the LM itself, under
        LoRA adapters with `model.lora`)."""
        model = with_lora(AutoModelForCausalLM.from_pretrained(bc_dir), self.lora, bc_dir)
        self.engine.setup(model, self.optim_config())

    def policy_lm(self) -> torch.nn.Module:
        """The causal LM that acts (its live weights: rollouts always use the current policy)."""
        return self.engine.unwrap()

    def update(self, episodes: list[Episode], round_idx: int) -> dict:
        """Learn from one round's episodes (every process holds all of them); returns the round's training logs."""
        raise NotImplementedError

    # -- shared machinery ---------------------------------------------------------------------------
    def optim_config(self) -> OptimConfig:
        """A constant learning rate after warm-up: the number of steps depends on the rollouts."""
        return OptimConfig(self.cfg.lr, total_steps=1, warmup_steps=self.cfg.warmup_steps,
                           weight_decay=self.cfg.weight_decay, grad_clip=self.cfg.grad_clip, min_lr_ratio=1.0)

    def link_sequences(self, episode: Episode) -> list[TokenSequence]:
        """The episode tokenized as in the offline data (one sequence per action for windowed tasks)."""
        seqs = episode_to_sequences(episode, self.encode, self.task.history_window, self.max_length,
                                    self.task.moves_per_sequence)
        return [s for s in seqs if has_decision(s)]

    def sync_actor(self) -> None:
        """ZeRO-3: copy the current policy's whole weights (gathered once per round) into the replica."""
        if self.actor is None:
            return
        with self.engine.gathered():
            state = {k: v.detach().to("cpu", copy=True) for k, v in self.policy_lm().state_dict().items()}
        self.actor.load_state_dict(state)

    def start_states(self, round_idx: int) -> tuple[list[dict], list[int]]:
        """Reset options and seeds of the round's episodes: `episodes_per_round` random start states."""
        rng = random.Random(f"{self.seed}/{round_idx}")
        seeds = [rng.randrange(2**31) for _ in range(self.cfg.episodes_per_round)]
        return [{}] * len(seeds), seeds

    def collect(self, round_idx: int) -> list[Episode]:
        """The round's episodes (`start_states`) played by the current policy."""
        self.sync_actor()
        options, seeds = self.start_states(round_idx)
        # each process plays its share; then every process holds the whole round (same updates everywhere)
        episodes = gather_lists(run_episodes(self.rollout_policy, self.task.make_env, shard(options), shard(seeds),
                                             desc=f"rollout {round_idx}"))
        if self.run_dir is not None and is_main():
            write_episodes(self.run_dir / "rollouts" / f"round_{round_idx:03d}.jsonl", episodes)
        return episodes

    def trainer_state(self) -> dict:
        """BC's checkpoint state plus every finished round's row (a resumed run continues the curve)."""
        return {**super().trainer_state(), "rounds": self.rounds}

    def fit(self) -> dict:
        """Play and learn for `rounds` rounds (resuming after the last checkpointed round), log each round under
        `rollout/`, write `rounds.csv` and `rounds.png`, and return the run's training metrics, among them the first and
        last rounds' normalized scores."""
        start = time.perf_counter()
        resumed = self.restore()
        if resumed:
            self.rounds = resumed["rounds"]
            self.load_round_state(resumed)
        first = len(self.rounds)
        bar = tqdm(range(first, self.cfg.rounds), desc=f"{self.cfg.name} rounds", unit="round", initial=first,
                   total=self.cfg.rounds, disable=not is_main())
        for r in bar:
            t0 = time.perf_counter()
            episodes = self.collect(r)
            rollout_seconds = time.perf_counter() - t0
            stats = summarize(episodes, self.task.normalization)
            sample = episodes[r % len(episodes)]
            log.info("round %d sample episode (return %.1f):\n%s", r, sample.total_return,
                     history_to_str(sample.turns)[-1500:])
            t1 = time.perf_counter()
            logs = self.update(episodes, r)
            actions = sum(ep.num_actions for ep in episodes)
            tokens = sum(len(self.encode(t.text)) for ep in episodes for t in ep.turns if t.is_action)
            row = {"round": r, "return_mean": stats["return_mean"], "normalized_score": stats["normalized_score"],
                   "success_rate": stats["success_rate"], "episode_length": stats["episode_length"],
                   "env_steps_per_s": actions / rollout_seconds, "generated_tokens_per_s": tokens / rollout_seconds,
                   "rollout_seconds": rollout_seconds, "update_seconds": time.perf_counter() - t1, **logs}
            self.rounds.append(row)
            self.logger.log({f"rollout/{k}": v for k, v in row.items() if k != "round"}, step=r)
            bar.set_postfix(ret=f"{row['return_mean']:.1f}", norm=f"{row['normalized_score']:.1f}")
            if self.checkpointer is not None and self.checkpointer.due(r + 1):
                self.checkpoint(r + 1)
        self.write_curve()
        first, last = self.rounds[0], self.rounds[-1]
        return {"train_rounds": self.cfg.rounds, "train_seconds": time.perf_counter() - start,
                "rollout_normalized_first": first["normalized_score"],
                "rollout_normalized_last": last["normalized_score"],
                "rollout_env_steps_per_s": sum(r["env_steps_per_s"] for r in self.rounds) / len(self.rounds)}

    def load_round_state(self, state: dict) -> None:
        """Subclasses restore what they keep between rounds (PPO: the KL coefficient)."""

    def write_curve(self) -> None:
        """rounds.csv and rounds.png: the rollout return per round, the learning curve of online RL."""
        if self.run_dir is None or not self.rounds or not is_main():
            return
        self.run_dir.mkdir(parents=True, exist_ok=True)
        keys = list(dict.fromkeys(k for row in self.rounds for k in row))
        with open(self.run_dir / "rounds.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=keys)
            writer.writeheader()
            writer.writerows(self.rounds)
        plot_rounds(self.rounds, self.run_dir / "rounds.png",
                    f"{self.task.name} {self.cfg.name}: rollouts at temperature {self.cfg.temperature:g}")

    def train_steps(self, n_items: int) -> int:
        """Optimizer steps for a round with `n_items` sequences: `epochs` passes, capped."""
        steps = self.cfg.epochs * max(1, math.ceil(n_items / self.cfg.batch_size))
        return min(steps, self.cfg.max_steps_per_round) if self.cfg.max_steps_per_round else steps


def plot_rounds(rounds: list[dict], path: Path, title: str) -> None:
    """Plot each round's normalized rollout score (with the dataset average, 50, marked) to `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [r["round"] for r in rounds]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(x, [r["normalized_score"] for r in rounds], marker="o", label="normalized score")
    ax.axhline(50, color="grey", linestyle=":", linewidth=1, label="dataset average (50)")
    ax.set_xlabel("round")
    ax.set_ylabel("normalized score of the round's rollouts")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


class OnlineFilteredBCTrainer(OnlineTrainer):
    """Online filtered BC: each round, BC on the round's top `top_fraction` episodes by return (LMRL-Gym's online
    %BC)."""

    config_class = OnlineFilteredBCConfig
    supports_lora = True

    def update(self, episodes: list[Episode], round_idx: int) -> dict:
        """BC on the round's kept episodes (`top_fraction`, with `drop_worst` and `cap_ties`) for `train_steps` steps;
        logs the kept count, the lowest kept return and the mean BC loss."""
        kept = top_fraction(episodes, self.cfg.top_fraction, self.cfg.drop_worst, self.cfg.cap_ties)
        seqs = [s for ep in kept for s in self.link_sequences(ep)]
        if not seqs:
            return {"kept_episodes": len(kept), "train_steps": 0, "bc_loss": float("nan")}
        self.engine.train()
        losses = []
        for batch in itertools.islice(self.batches(seqs, salt=round_idx + 1), self.train_steps(len(seqs))):
            out = self.engine.forward(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
            loss = bc_loss(out.logits, batch["input_ids"], batch["action_mask"], batch["attention_mask"],
                           batch["weights"])
            if not torch.isfinite(loss):
                raise FloatingPointError(f"non-finite online filtered BC loss in round {round_idx}")
            self.engine.backward(loss)
            self.engine.step()
            losses.append(loss.item())
        return {"kept_episodes": len(kept), "kept_return_min": min(ep.total_return for ep in kept),
                "train_steps": len(losses), "bc_loss": sum(losses) / len(losses)}

