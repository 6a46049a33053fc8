"""Behaviour cloning and filtered BC (%BC): cross-entropy on agent tokens only."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from lmrl.algos.base import OptimFields
from lmrl.data.packed import PackedSequences
from lmrl.data.tokenize import SegmentEncoder, TokenSequence, collate, episode_to_sequences, has_decision
from lmrl.dist import OptimConfig
from lmrl.envs.base import Episode
from lmrl.models.factory import model_max_length
from lmrl.rollout.policy import LMPolicy

log = logging.getLogger(__name__)


def bc_loss(logits: torch.Tensor, input_ids: torch.Tensor, action_mask: torch.Tensor, attention_mask: torch.Tensor):
    """Mean next-token NLL over agent tokens.  logits [B,T,V]; ids/masks [B,T].

    Position t predicts token t+1, so targets and weights are the `[:, 1:]` side.
    """
    targets = input_ids[:, 1:]
    weights = (action_mask[:, 1:].bool() & attention_mask[:, 1:].bool()).float()  # [B, T-1]
    nll = F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), targets.flatten(), reduction="none")
    return (nll.view_as(targets) * weights).sum() / weights.sum().clamp(min=1.0)


@dataclass
class BCConfig(OptimFields):
    name: str = "bc"
    # Log train/loss every this many steps.
    log_every: int = 25


@dataclass
class FilteredBCConfig(BCConfig):
    name: str = "filtered_bc"
    # Keep episodes whose return is at least the (1 - top_fraction) percentile.
    top_fraction: float = 0.1

    def validate(self) -> list[str]:
        problems = super().validate()
        if not 0 < self.top_fraction <= 1:
            problems.append(f"top_fraction must be in (0, 1] (got {self.top_fraction})")
        return problems


def return_threshold(returns: np.ndarray, fraction: float) -> float:
    """The original's filter keeps `return >= percentile(returns, 100 * (1 - fraction))`."""
    return float(np.percentile(returns, 100 * (1 - fraction)))


def top_fraction(episodes: list[Episode], fraction: float) -> list[Episode]:
    """The episodes the original's filter keeps (see `return_threshold`)."""
    threshold = return_threshold(np.array([ep.total_return for ep in episodes]), fraction)
    return [ep for ep in episodes if ep.total_return >= threshold]


class BCTrainer:
    config_class = BCConfig

    def __init__(self, cfg: BCConfig, task, engine, model, tokenizer, logger, seed: int = 0, run_dir=None):
        self.cfg, self.task, self.engine, self.tokenizer, self.logger = cfg, task, engine, tokenizer, logger
        self.max_length = model_max_length(model)
        self.generator = torch.Generator().manual_seed(seed)
        engine.setup(model, OptimConfig(cfg.lr, cfg.steps, cfg.warmup_steps, cfg.weight_decay, grad_clip=cfg.grad_clip,
                                        min_lr_ratio=cfg.min_lr_ratio))

    def select(self) -> Iterable[Episode]:
        """The episodes to imitate, streamed from disk (all of them)."""
        return self.task.episodes()

    def sequences(self) -> PackedSequences:
        encode = SegmentEncoder(self.tokenizer)
        seqs = PackedSequences.build(
            (s for ep in self.select() for s in episode_to_sequences(ep, encode, self.task.history_window, self.max_length)),
            keep=has_decision)
        log.info("%s: %d training sequences, %d tokens (%.0f MB packed)", self.cfg.name, len(seqs), seqs.num_tokens,
                 seqs.nbytes / 2**20)
        return seqs

    def batches(self, seqs: Sequence[TokenSequence]):
        """Endless shuffled epochs of collated batches."""
        while True:
            order = torch.randperm(len(seqs), generator=self.generator).tolist()
            for i in range(0, max(1, len(order) - self.cfg.batch_size + 1), self.cfg.batch_size):
                yield collate([seqs[j] for j in order[i : i + self.cfg.batch_size]], self.tokenizer.pad_token_id)

    def loss(self, batch: dict) -> tuple[torch.Tensor, dict]:
        out = self.engine.forward(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        dev = out.logits.device
        loss = bc_loss(out.logits, batch["input_ids"].to(dev), batch["action_mask"].to(dev),
                       batch["attention_mask"].to(dev))
        return loss, {}

    def after_step(self) -> None:
        """Hook after each completed optimizer step (ILQL updates its target here)."""

    def fit(self) -> dict:
        seqs = self.sequences()
        self.engine.train()
        batches, tokens, start = self.batches(seqs), 0, time.perf_counter()
        bar = tqdm(range(self.cfg.steps), desc=f"train {self.cfg.name}", unit="step")
        for step in bar:
            batch = next(batches)
            loss, logs = self.loss(batch)
            if not torch.isfinite(loss):
                raise FloatingPointError(f"non-finite {self.cfg.name} loss at step {step}: {logs}")
            self.engine.backward(loss)
            stats = self.engine.step()
            self.after_step()  # ILQL: target update only after a completed optimizer step
            tokens += int(batch["attention_mask"].sum())
            if step % self.cfg.log_every == 0 or step == self.cfg.steps - 1:
                bar.set_postfix(loss=f"{loss.item():.4f}")
                self.logger.log({"train/loss": loss.item(), **{f"train/{k}": v for k, v in logs.items()},
                                 "train/lr": stats["lr"], "train/grad_norm": stats["grad_norm"]}, step=step)
        elapsed = time.perf_counter() - start
        return {"train_loss": loss.item(), "train_steps": self.cfg.steps, "train_sequences": len(seqs),
                "train_seconds": elapsed, "train_tokens_per_s": tokens / elapsed}

    def save(self, directory: Path) -> None:
        """A save_pretrained checkpoint (model + tokenizer): `python -m lmrl.evaluate checkpoint=<dir>`."""
        self.engine.save(directory, self.tokenizer)

    def policies(self, eval_cfg, seed: int) -> dict[str, LMPolicy]:
        """The policies to evaluate, by name (the first is the run's headline): the trained LM, sampled."""
        return {"sample": lm_policy(self.engine.unwrap(), self.tokenizer, self.task, eval_cfg, seed)}


def lm_policy(model, tokenizer, task, eval_cfg, seed: int, logits_hook=None) -> LMPolicy:
    """A sampling policy over `model` with the task's window and the eval config's budgets."""
    return LMPolicy(model, tokenizer, task.history_window, eval_cfg.max_input_tokens, eval_cfg.max_new_tokens,
                    eval_cfg.temperature, eval_cfg.batch_size, seed, logits_hook)


def bc_checkpoint(cfg: BCConfig, task, engine, model, tokenizer, logger, seed: int) -> Path:
    """The BC stage RL starts from: trained once, cached by (dataset, model, BC config, seed)."""
    blob = json.dumps({"data": task.dataset_path().name, "model": model.config.to_dict(), "vocab": len(tokenizer),
                       "bc": dataclasses.asdict(cfg), "seed": seed}, sort_keys=True, default=str)
    path = task.cache_dir / "bc" / task.name / hashlib.sha256(blob.encode()).hexdigest()[:12]
    if (path / "config.json").exists():
        log.info("reusing the cached BC stage %s", path)
        return path
    log.info("training the BC stage (cached afterwards in %s)", path)
    trainer = BCTrainer(cfg, task, engine.spawn(), model, tokenizer, logger, seed)
    trainer.fit()
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    trainer.engine.save(tmp, tokenizer)
    os.replace(tmp, path)
    return path


def start_checkpoint(cfg, task, engine, model, tokenizer, logger, seed: int) -> Path:
    """Where an RL stage starts: `cfg.init_from` if given, else the cached BC stage of `cfg.bc`."""
    if cfg.init_from:
        return Path(cfg.init_from)
    return bc_checkpoint(cfg.bc, task, engine, model, tokenizer, logger, seed)


class FilteredBCTrainer(BCTrainer):
    config_class = FilteredBCConfig

    def select(self) -> Iterator[Episode]:
        """Two streaming passes: the returns (to find the percentile), then the episodes above it."""
        returns = np.array([ep.total_return for ep in self.task.episodes()])
        threshold = return_threshold(returns, self.cfg.top_fraction)
        log.info("filtered BC keeps %d of %d episodes (top %.0f%%)", int((returns >= threshold).sum()), len(returns),
                 100 * self.cfg.top_fraction)
        return (ep for ep in self.task.episodes() if ep.total_return >= threshold)
