"""Behaviour cloning and filtered BC (%BC): cross-entropy on agent tokens only."""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import logging
import math
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf
from tqdm.auto import tqdm

from lmrl.algos.base import OptimFields
from lmrl.data.packed import PackedSequences
from lmrl.data.tokenize import SegmentEncoder, TokenSequence, collate, episode_to_sequences, has_decision
from lmrl.checkpoint import Checkpointer
from lmrl.tracking import StageLogger
from lmrl.utils import file_lock, release_memory
from lmrl.dist import (OptimConfig, all_mean, barrier, broadcast_object, is_main, load_trainable_state, rank,
                       trainable_state, world_size, write_step)
from lmrl.envs.base import Episode
from lmrl.models.factory import lora_settings, model_max_length
from lmrl.rollout.evaluate import protocol, run_episodes
from lmrl.rollout.policy import LMPolicy
from lmrl.scoring import normalize, summarize

log = logging.getLogger(__name__)

# `keep_best`'s validation episodes: the protocol's episode seeds are `seed * 1_000_003 + k`, so adding this to the
# run's seed gives seeds no test episode of a run seed below it uses.
VALIDATION_SEED_OFFSET = 1_000_000
# The best curve point's weights in the run directory (`keep_best`), for a run resumed after that point.
BEST_WEIGHTS = "best_weights.pt"


def bc_loss(logits: torch.Tensor, input_ids: torch.Tensor, action_mask: torch.Tensor, attention_mask: torch.Tensor,
            seq_weights: torch.Tensor | None = None, norm: float | None = None):
    """Mean next-token NLL over agent tokens.  logits [B,T,V]; ids/masks [B,T]; seq_weights [B] each
    sequence's multiplicity (merged duplicates; None = 1); norm replaces the denominator (`loss_norm`).

    Position t predicts token t+1, so targets and weights are the `[:, 1:]` side.
    """
    targets = input_ids[:, 1:]
    weights = (action_mask[:, 1:].bool() & attention_mask[:, 1:].bool()).float()  # [B, T-1]
    if seq_weights is not None:
        weights = weights * seq_weights[:, None].float()
    nll = F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), targets.flatten(), reduction="none")
    return (nll.view_as(targets) * weights).sum() / (weights.sum().clamp(min=1e-12) if norm is None else norm)


@dataclass
class BCConfig(OptimFields):
    """`algo=bc`: the optimization fields of `OptimFields` and how often the loss is logged."""

    name: str = "bc"
    # Log train/loss every this many steps.
    log_every: int = 25


@dataclass
class FilteredBCConfig(BCConfig):
    """`algo=filtered_bc`: BC on the episodes whose return reaches the top `top_fraction` of the dataset's."""

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


def top_fraction(episodes: list[Episode], fraction: float, drop_worst: bool = False,
                 cap_ties: bool = False) -> list[Episode]:
    """The episodes the original's filter keeps (see `return_threshold`).

    When fewer than `fraction` of the episodes beat the worst return, the percentile lands on it and `>=` keeps
    every episode, failures included. `drop_worst` also drops the episodes tied at the worst return (none kept when
    all tie): the filter then never imitates the group's worst outcome.  `cap_ties` drops the episodes tied at the
    threshold when keeping them would keep more than `fraction` of the episodes and some episode is above it (ties at
    the best return are the best there is, and stay): a common failure return above the worst one (PO maze: -101
    at the step limit with valid moves only, invalid replies below it) is then dropped too."""
    returns = np.array([ep.total_return for ep in episodes])
    threshold = return_threshold(returns, fraction)
    keep = returns >= threshold
    if drop_worst:
        keep &= returns > returns.min()
    if cap_ties and keep.sum() > math.ceil(fraction * len(returns)) and (returns > threshold).any():
        keep &= returns > threshold
    return [ep for ep, kept in zip(episodes, keep) if kept]


class BCTrainer:
    """Behaviour cloning: next-token cross-entropy on the agent's tokens of the task's dataset (`bc_loss`).

    The base of every trainer but `PromptTrainer` (offline ones override `sequences`, `loss` and `policies`, online
    ones `fit`) and the interface `lmrl.train` drives: `fit()` trains and returns metrics, `save(directory)` exports
    the weights, `policies(eval_cfg, seed)` names the policies to evaluate, and `publish(export)` caches a plain BC
    run's export as the BC stage of its config. Batch order is a pure function of (seed, step), so a run resumed
    from a checkpoint trains on the same batches as one that never stopped."""

    config_class = BCConfig
    stage_key: dict | None = None  # set by plain BC runs only (`publish`)
    # Trains LoRA adapters when the model has them (`model.lora`); each trainer class opts in itself
    # (`lmrl.algos.base.build_trainer`): a subclass that builds its own models must wrap them first.
    supports_lora = True

    def __init__(self, cfg: BCConfig, task, engine, model, tokenizer, logger, seed: int = 0, run_dir=None,
                 checkpointer: Checkpointer | None = None):
        self.cfg, self.task, self.engine, self.tokenizer, self.logger = cfg, task, engine, tokenizer, logger
        self.seed, self.checkpointer = seed, checkpointer
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.max_length = model_max_length(model)
        self.seqs = self.sequences()
        # A BC run's weights are the BC stage of its config (`publish`): the key is taken before training.
        self.stage_key = (bc_stage_key(cfg, task, model, tokenizer, seed, engine.precision)
                          if type(self) is BCTrainer else None)
        engine.setup(model, self.offline_optim())

    def offline_optim(self) -> OptimConfig:
        """AdamW + schedule over `self.steps`: `steps`, or `epochs` passes over `self.seqs`."""
        cfg = self.cfg
        self.steps = cfg.steps if cfg.epochs is None else max(1, math.ceil(cfg.epochs * len(self.epoch_plan(self.seqs, 0))))
        if cfg.epochs is not None:
            log.info("%s: %g epochs of %d sequences = %d steps", cfg.name, cfg.epochs, len(self.seqs), self.steps)
        self.eval_every = cfg.eval_every or (max(1, self.steps // cfg.curve_points) if cfg.curve_points else 0)
        return OptimConfig(cfg.lr, self.steps, cfg.warmup_steps, cfg.weight_decay, grad_clip=cfg.grad_clip,
                           min_lr_ratio=cfg.min_lr_ratio)

    def select(self) -> Iterable[Episode]:
        """The episodes to imitate, streamed from disk (all of them)."""
        return self.task.episodes()

    def sequences(self) -> PackedSequences:
        """The training sequences of the episodes `select` yields, tokenized with the task's window and
        `moves_per_sequence`, packed, and merged where identical when `dedup` is set."""
        encode = SegmentEncoder(self.tokenizer)
        window, moves = self.task.history_window, self.task.moves_per_sequence
        seqs = PackedSequences.build(
            (s for ep in self.select() for s in episode_to_sequences(ep, encode, window, self.max_length, moves)),
            keep=has_decision, dedup=self.cfg.dedup,
            balance_states=self.cfg.balance_states)
        log_sequences(self.cfg.name, seqs)
        return seqs

    def batches(self, seqs: Sequence[TokenSequence], start: int = 0, salt: int = 0):
        """Endless shuffled epochs of collated batches, starting at batch `start`.

        Epoch e's batches are a pure function of (seed, salt, e), so a resumed run sees exactly the
        batches it would have seen.  The batch (`batch_size` sequences or `batch_tokens` tokens) is
        global: with several processes each takes an interleaved share of every batch."""
        world, r, epoch = world_size(), rank(), 0
        drawn = self.draws_by_weight(seqs)
        plan = self.epoch_plan(seqs, epoch, salt)
        while start >= len(plan):  # resuming: skip whole epochs
            start, epoch = start - len(plan), epoch + 1
            plan = self.epoch_plan(seqs, epoch, salt)
        while True:
            for chunk in plan[start:]:
                items = [seqs[j] for j in chunk]
                if drawn:  # drawn in proportion to their weights: each draw counts once
                    items = [dataclasses.replace(s, weight=1.0) for s in items]
                batch = self.collate(items[r::world] if world > 1 else items)
                if isinstance(items[0], TokenSequence):  # token sequences: the global batch's mean
                    batch["norm"] = loss_norm(items, world)
                yield batch
            start, epoch = 0, epoch + 1
            plan = self.epoch_plan(seqs, epoch, salt)

    def epoch_plan(self, seqs: Sequence[TokenSequence], epoch: int, salt: int = 0) -> list[list[int]]:
        """Epoch `epoch`'s batches as lists of sequence indices."""
        g = torch.Generator().manual_seed(hash_seed(self.seed, salt, epoch))
        n, bs = len(seqs), self.cfg.batch_size
        if self.draws_by_weight(seqs):  # n draws in proportion to the weights, with replacement
            order = torch.multinomial(torch.as_tensor(seqs.weight, dtype=torch.float64), n, replacement=True,
                                      generator=g).tolist()
        else:
            order = torch.randperm(n, generator=g).tolist()
        if self.cfg.batch_tokens:
            return token_batches(order, sequence_lengths(seqs), self.cfg.batch_tokens, g, min_rows=world_size())
        return [order[i : i + bs] for i in range(0, max(1, n - bs + 1), bs)]

    def draws_by_weight(self, seqs) -> bool:
        """Batches of merged sequences drawn in proportion to their weights (`dedup_batches: draw`): when their
        weights differ and one batch does not hold them all (a whole-data batch stays the exact weighted sum)."""
        weight = getattr(seqs, "weight", None)
        if self.cfg.dedup_batches != "draw" or weight is None or len(seqs) == 0 or float(np.ptp(weight)) == 0:
            return False
        return bool(self.cfg.batch_tokens) or len(seqs) > self.cfg.batch_size

    def collate(self, seqs: Sequence[TokenSequence]) -> dict:
        """A padded batch on the engine's device: every tensor a loss sees crosses over here.
        `num_tokens` (its real tokens, counted on the host) needs no device sync to read."""
        return {**self.engine.to_device(collate(seqs, self.tokenizer.pad_token_id)),
                "num_tokens": sum(len(s) for s in seqs)}

    def check_steps(self, loss: torch.Tensor, step: int, logs: dict) -> None:
        """At logging steps: stop if this loss, or any step since the last check, was not finite (the
        engine skipped those updates, so the weights and the last checkpoint are still good)."""
        check_finite(loss, f"{self.cfg.name} loss at step {step}", logs, self.checkpointer)
        skipped = self.engine.check_steps()
        if skipped:
            check_finite(torch.tensor(float("nan")), f"{self.cfg.name} gradient in {skipped} step(s) up to step "
                         f"{step} (their updates were skipped)", logs, self.checkpointer)

    def loss(self, batch: dict) -> tuple[torch.Tensor, dict]:
        """The loss of one collated batch and a dict of extra values to log (BC: none)."""
        out = self.engine.forward(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        return bc_loss(out.logits, batch["input_ids"], batch["action_mask"], batch["attention_mask"],
                       batch["weights"], batch.get("norm")), {}

    def after_step(self) -> None:
        """Hook after each completed optimizer step (ILQL updates its target here)."""

    def fit(self) -> dict:
        """Train for `self.steps` optimizer steps, resuming from the latest checkpoint when there is one, with
        learning-curve points and checkpoints at their intervals. Returns the training metrics (`train_loss`,
        `train_steps`, `train_sequences`, `train_seconds`, `train_tokens_per_s`, and `resumed_from_step` after a
        resume). Raises `FloatingPointError` on a non-finite loss."""
        seqs = self.seqs
        resumed = self.restore()
        first = resumed["step"] if resumed else 0
        if resumed and self.run_dir is not None and is_main():  # points past the checkpoint are evaluated again
            drop_rows_after(self.run_dir / "curve.csv", first)
        self.best = (resumed or {}).get("best") or {"step": None, "score": -math.inf, "since": 0}
        if self.cfg.keep_best and self.engine.sharded:
            raise ValueError(f"{self.cfg.name}: keep_best needs curve points, which ZeRO-3's sliced weights do not "
                             "give; use engine=torch or ZeRO-2")
        if self.cfg.keep_best and first == 0:  # the start is a candidate: a run that only unlearns keeps it
            self.curve_point(0, float("nan"))
        self.engine.train()
        batches, tokens, start = self.batches(seqs, first), 0, time.perf_counter()
        bar = tqdm(range(first, self.steps), desc=f"train {self.cfg.name}", unit="step", initial=first,
                   total=self.steps, disable=not is_main())
        loss = torch.tensor(float("nan"))
        for step in bar:
            batch = next(batches)
            loss, logs = self.loss(batch)
            if not self.engine.guards_steps:  # a host sync each step; a guarding engine skips bad steps itself
                check_finite(loss, f"{self.cfg.name} loss at step {step}", logs, self.checkpointer)
            self.engine.backward(loss)
            stats = self.engine.step()
            self.after_step()  # ILQL: target update only after a completed optimizer step
            tokens += batch["num_tokens"]
            due = self.checkpointer is not None and self.checkpointer.due(step + 1)
            log_now = step % self.cfg.log_every == 0 or step == self.steps - 1
            if log_now or due:  # never checkpoint past a bad step
                self.check_steps(loss, step, logs)
            if log_now:
                value = all_mean(loss.item())  # the mean over processes (each saw its share of the batch)
                bar.set_postfix(loss=f"{value:.4f}")
                self.logger.log({"train/loss": value, **{f"train/{k}": float(v) for k, v in logs.items()},
                                 "train/lr": stats["lr"], "train/grad_norm": float(stats["grad_norm"])}, step=step)
            if self.eval_every and (step + 1) % self.eval_every == 0:
                self.curve_point(step + 1, float(loss))
            if due:
                self.checkpoint(step + 1)
            if self.out_of_patience():
                log.info("%s: no better validation score in %d curve points: stopping after step %d",
                         self.cfg.name, self.cfg.patience, step + 1)
                break
        elapsed = time.perf_counter() - start
        metrics = {"train_loss": all_mean(loss.item()), "train_steps": self.steps, "train_sequences": len(seqs),
                   "train_seconds": elapsed, "train_tokens_per_s": tokens * world_size() / elapsed,
                   **({"resumed_from_step": first} if resumed else {})}
        return {**metrics, **self.restore_best()}

    # -- learning curves ------------------------------------------------------------------------------
    def curve_point(self, step: int, loss: float) -> None:
        """One row of <run>/curve.csv: the step, epochs seen, the training loss, the headline policy's
        score on `curve_episodes_per_start` episodes per start state, and the critic's health (value
        runs).  Rank 0 evaluates; under ZeRO-3 (sliced weights) there are no curve points."""
        if self.engine.sharded:
            return
        row = {"step": step, "epochs": step / max(1, len(self.epoch_plan(self.seqs, 0))), "train_loss": loss,
               **self.critic_point()}
        score = score_stderr = None
        if is_main():
            self.engine.eval()
            eval_cfg = OmegaConf.merge(self.task.cfg.eval, {"episodes_per_start": self.cfg.curve_episodes_per_start})
            seed = self.curve_seed()
            name, policy = next(iter(self.policies(eval_cfg, seed).items()))
            options, seeds = protocol(self.task.make_env, eval_cfg.episodes_per_start, seed, eval_cfg.get("max_starts"))
            stats = summarize(run_episodes(policy, self.task.make_env, options, seeds, desc=f"curve {step}"),
                              self.task.normalization)
            self.engine.train()
            score = stats["normalized_score"]
            # the score's standard error on the normalized scale (`keep_best_margin`)
            score_stderr = abs(normalize(stats["return_mean"] + stats["return_stderr"], **self.task.normalization)
                               - score)
            row.update({"policy": name, "normalized_score": score, "return_mean": stats["return_mean"],
                        "success_rate": stats["success_rate"], "invalid_rate": stats.get("invalid_rate"),
                        "episodes": "validation" if self.cfg.keep_best else "test"})
            self.logger.log({f"curve/{k}": v for k, v in row.items() if k not in ("step", "policy", "episodes")},
                            step=max(step - 1, 0))
            if self.run_dir is not None:
                append_csv(self.run_dir / "curve.csv", row)
        if self.cfg.keep_best:
            self.note_point(step, *broadcast_object((score, score_stderr)))
        barrier()

    # -- early stopping on validation episodes (`keep_best`, `patience`) ----------------------------------------
    def curve_seed(self) -> int:
        """The seed of the curve's episodes: the run's (the test protocol's own episodes), or, when points are chosen
        among (`keep_best`), validation episodes whose sampling seeds no test episode of any run seed uses."""
        return self.seed + VALIDATION_SEED_OFFSET if self.cfg.keep_best else self.seed

    def note_point(self, step: int, score: float, stderr: float = 0.0) -> None:
        """Keep step's weights when its validation score beats the best so far by more than `keep_best_margin`
        standard errors of their difference (a tie keeps the earlier point, the start first); count the points since
        the best for `patience`."""
        margin = self.cfg.keep_best_margin * math.hypot(stderr, self.best.get("stderr", 0.0))
        if score > self.best["score"] + margin:
            self.best = {"step": step, "score": float(score), "stderr": float(stderr), "since": 0}
            self.best_weights = {k: v.detach().to("cpu", copy=True)
                                 for k, v in trainable_state(self.engine.unwrap()).items()}
            if self.run_dir is not None and is_main():  # a resumed run finds them here
                torch.save(self.best_weights, self.run_dir / BEST_WEIGHTS)
        else:
            self.best["since"] += 1

    def out_of_patience(self) -> bool:
        """`patience` curve points in a row without a better validation score."""
        return bool(self.cfg.keep_best and self.cfg.patience and self.best["since"] >= self.cfg.patience)

    def restore_best(self) -> dict:
        """With `keep_best`: put the best point's weights back (unless the last step was it) and report which point
        that was; without it, nothing."""
        if not self.cfg.keep_best or self.best["step"] is None:
            return {}
        if self.best["step"] != self.engine.global_step:
            weights = getattr(self, "best_weights", None)
            if weights is None:  # resumed after the best point: it was kept on disk
                weights = broadcast_object(torch.load(self.run_dir / BEST_WEIGHTS, map_location="cpu")
                                           if is_main() else None)
            load_trainable_state(self.engine.unwrap(), weights)
            log.info("%s: kept step %d's weights (validation score %.1f)", self.cfg.name, self.best["step"],
                     self.best["score"])
        return {"best_step": self.best["step"], "best_validation_score": self.best["score"],
                "stopped_at_step": self.engine.global_step}

    def critic_point(self) -> dict:
        """Value trainers add their critic's health to a curve point."""
        return {}

    # -- checkpoints: what a resumed run needs beyond the engine's state --------------------------
    def frozen_modules(self) -> dict:
        """Models outside the engine whose weights change during training (ILQL: the target)."""
        return {}

    def trainer_state(self) -> dict:
        """What a checkpoint keeps beside the engine's state (the W&B run id; subclasses add theirs)."""
        return {"wandb_id": getattr(self.logger, "run_id", None), **({"best": self.best} if getattr(self.cfg, "keep_best", False) else {})}

    def checkpoint(self, step: int) -> None:
        """Write a checkpoint after `step` completed steps: the engine's state, `trainer_state()`, `frozen_modules()`
        and `checkpoint_files()`."""
        self.checkpointer.save(step, self.engine, self.trainer_state(), self.frozen_modules(), self.checkpoint_files())

    def checkpoint_files(self) -> dict:
        """Objects a checkpoint saves as `<name>.pt` beside the engine's state (self-play: its opponent pool)."""
        return {}

    def restore(self) -> dict | None:
        """Continue from the latest checkpoint, if there is one (the data position is the step)."""
        if self.checkpointer is None:
            return None
        return self.checkpointer.restore(self.engine, self.frozen_modules())

    def save(self, directory: Path) -> None:
        """A save_pretrained checkpoint (model + tokenizer): `python -m lmrl.evaluate checkpoint=<dir>`.
        Trainers' `save` runs on rank 0 only, with whole weights (inside `engine.gathered()`)."""
        self.engine.unwrap().save_pretrained(directory)
        self.tokenizer.save_pretrained(directory)
        write_step(Path(directory), self.engine.global_step)

    def publish(self, export: Path) -> Path | None:
        """Cache this run's export (`save`) as the BC stage of its config, which RL runs of the same task, model,
        seed and `algo.bc` then start from instead of training it again (main process, after `save`).  The same
        trainer, config, initial weights and batch order as a stage trained by `bc_checkpoint`."""
        if self.stage_key is None:
            return None
        return publish_stage(self.task, "bc", self.stage_key, export, "BC stage")

    def policies(self, eval_cfg, seed: int) -> dict[str, LMPolicy]:
        """The policies to evaluate, by name (the first is the run's headline): the trained LM, sampled."""
        return {"sample": lm_policy(self.engine.unwrap(), self.tokenizer, self.task, eval_cfg, seed)}


def sequence_lengths(seqs: Sequence[TokenSequence]) -> np.ndarray:
    """Token count of every sequence (from the packed offsets when there are any: no views built)."""
    offsets = getattr(seqs, "offsets", None)
    return np.diff(offsets) if offsets is not None else np.array([len(s) for s in seqs])


# Batches' worth of sequences `token_batches` sorts together by length.
BUCKET_WINDOW = 64


def token_batches(order: list[int], lengths: np.ndarray, budget: int, g: torch.Generator,
                  window: int = BUCKET_WINDOW, min_rows: int = 1) -> list[list[int]]:
    """Length bucketing: `order` cut into windows of about `window` batches' worth of sequences, each
    window sorted by length and cut greedily into batches whose padded size (count x longest) stays
    within `budget` tokens (a longer sequence gets a batch of its own); the batches are then shuffled
    with `g`.  Padding stays small because neighbours in a window have similar lengths.

    Every batch holds at least `min_rows` sequences (the process count: each process trains an
    interleaved share of a batch, and none may be empty), even where that passes the budget; a
    window's short last batch joins the one before it."""
    per_batch = max(1, budget // max(1, int(np.mean(lengths)) if len(lengths) else 1))
    span = window * per_batch
    batches: list[list[int]] = []
    for w in range(0, len(order), span):
        current: list[int] = []
        longest = 0
        for i in sorted(order[w : w + span], key=lambda j: lengths[j]):
            if len(current) >= min_rows and (len(current) + 1) * max(longest, lengths[i]) > budget:
                batches.append(current)
                current, longest = [], 0
            current.append(i)
            longest = max(longest, int(lengths[i]))
        if len(current) < min_rows and batches:
            batches[-1].extend(current)
        elif current:
            batches.append(current)
    return [batches[k] for k in torch.randperm(len(batches), generator=g).tolist()]


def loss_norm(batch: Sequence[TokenSequence], world: int) -> float:
    """The denominator of a process's loss: the whole (global) batch's weighted decision count / world.
    Each process's mean over its share, averaged by DDP / ZeRO, then equals the whole batch's mean
    exactly (a per-process denominator would weight the shares' tokens differently); in one process it
    is the batch's own count, as a plain mean.  Counted on the host: no communication."""
    return sum(s.weight * int(s.action_mask[1:].sum()) for s in batch) / world


def log_sequences(name: str, seqs: PackedSequences) -> None:
    """Log a dataset's sequence count (with and without merged duplicates), token count and packed size."""
    log.info("%s: %d training sequences (%d distinct), %d tokens (%.0f MB packed)", name, int(seqs.total_weight),
             len(seqs), seqs.num_tokens, seqs.nbytes / 2**20)


def append_csv(path: Path, row: dict) -> None:
    """Append `row` to a CSV, writing the header when the file is new (rows share their keys)."""
    new = not path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(row))
        if new:
            writer.writeheader()
        writer.writerow(row)


def drop_rows_after(path: Path, step: int) -> None:
    """Remove the rows of a curve CSV whose `step` is past `step` (a run resumed from a checkpoint at `step`
    computes them again; kept, they would appear twice)."""
    if not path.exists():
        return
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        keys, rows = reader.fieldnames or [], list(reader)
    kept = [row for row in rows if int(row["step"]) <= step]
    if len(kept) == len(rows):
        return
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys)
        writer.writeheader()
        writer.writerows(kept)


def hash_seed(*parts: int) -> int:
    """A 63-bit seed from integers (stable across processes, unlike `hash`)."""
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "little") >> 1


def check_finite(loss: torch.Tensor, what: str, logs: dict, checkpointer: Checkpointer | None) -> None:
    """Stop on a NaN/inf loss before it reaches the weights; the last checkpoint stays the good one."""
    if torch.isfinite(loss):
        return
    last = checkpointer.latest() if checkpointer is not None else None
    where = (f"the last good checkpoint is {last} (resume with resume={checkpointer.directory.parent})" if last
             else "no checkpoint was written yet (set checkpoint.every to keep one)")
    logs = {k: float(v) for k, v in logs.items()}
    raise FloatingPointError(f"non-finite {what} ({logs}); training stopped, {where}. Lower the learning rate "
                             f"or check the data.")


def lm_policy(model, tokenizer, task, eval_cfg, seed: int, logits_hook=None) -> LMPolicy:
    """A sampling policy over `model` with the task's window and the eval config's budgets."""
    return LMPolicy(model, tokenizer, task.history_window, eval_cfg.max_input_tokens, eval_cfg.max_new_tokens,
                    eval_cfg.temperature, eval_cfg.batch_size, seed, logits_hook)


def cached_stage(task, kind: str, key: dict, what: str, build) -> Path:
    """A training stage trained once and cached under `<cache>/<kind>/<task>/<hash of key>`; concurrent
    sweep jobs train it once.  `build(partial, tmp)` trains (checkpointing under `partial`, so a killed run
    resumes the stage instead of retraining it) and writes the finished stage to `tmp` (main process); `build=None`:
    the stage must be cached already.

    A key's `data` is the dataset's file name; a stage cached under another name of the same bytes
    (`Task.dataset_aliases`: the generator's code changed, its episodes did not) is reused."""
    path = stage_path(task, kind, key)
    with file_lock(stage_lock(task, kind, path)):
        if broadcast_object((path / "config.json").exists()):
            log.info("reusing the cached %s %s", what, path)
            return path
        if "data" in key:
            for alias in task.dataset_aliases():
                same = stage_path(task, kind, {**key, "data": alias})
                if broadcast_object((same / "config.json").exists()):
                    log.info("reusing the cached %s %s (trained on %s, the same bytes as %s)", what, same, alias,
                             key["data"])
                    return same
        if build is None:
            raise FileNotFoundError(f"no cached {what} at {path} (train it first: run the cell)")
        log.info("training the %s (cached afterwards in %s)", what, path)
        partial = path.with_name(path.name + ".partial")
        tmp = path.with_name(path.name + f".tmp{os.getpid()}")
        build(partial, tmp)
        release_memory()  # the stage's activations and optimizer: the run goes on in this process
        if is_main():
            os.replace(tmp, path)
            shutil.rmtree(partial, ignore_errors=True)
        barrier()
    return path


def stage_path(task, kind: str, key: dict) -> Path:
    """Where the stage of `kind` ("bc", "critic") cached under `key` lives: `<cache>/<kind>/<task>/<hash of key>`."""
    blob = json.dumps(key, sort_keys=True, default=str)
    return task.cache_dir / kind / task.name / hashlib.sha256(blob.encode()).hexdigest()[:12]


def stage_lock(task, kind: str, path: Path) -> Path:
    """The lock held while the stage at `path` is trained or published."""
    return task.cache_dir / "locks" / f"{kind}_{task.name}_{path.name}.lock"


# Fields a stage key holds only when set (added after stages were cached: keys from before them stay valid).
KEYED_WHEN_SET = {"keep_best": False, "patience": 0, "keep_best_margin": 0.0}


def stage_fields(cfg: BCConfig) -> dict:
    """The BC config a stage is cached by: all of it but `log_every`, and `KEYED_WHEN_SET` only when set."""
    return {k: v for k, v in dataclasses.asdict(cfg).items()
            if k != "log_every" and not (k in KEYED_WHEN_SET and v == KEYED_WHEN_SET[k])}


def bc_stage_key(cfg: BCConfig, task, model, tokenizer, seed: int, precision: str) -> dict:
    """What a BC stage is cached by: (dataset, model, BC config, seed, precision).  `log_every` is left out: it
    changes what is printed, not the weights (debug=smoke's BC runs log every 5 steps, its stages every 25)."""
    key = {"data": task.dataset_name(), "model": model.config.to_dict(), "vocab": len(tokenizer),
           "bc": stage_fields(cfg), "seed": seed, "precision": precision}
    if task.moves_per_sequence != 1:  # only then: keys from before the option stay valid
        key["moves_per_sequence"] = task.moves_per_sequence
    if (lora := lora_settings(model)) is not None:  # LoRA adapters trained, not the whole model (only then, as above)
        key["lora"] = lora.as_dict()
    return key


def publish_stage(task, kind: str, key: dict, source: Path, what: str) -> Path | None:
    """Offer a finished run's export as the cached stage of `key` (main process only), unless one is cached
    already or another process is training it (it holds the stage's lock: this run does not wait for it);
    returns the stage's path when this call wrote it."""
    path = stage_path(task, kind, key)
    with file_lock(stage_lock(task, kind, path), wait=False) as held:
        if not held or (path / "config.json").exists():
            return None
        tmp = path.with_name(path.name + f".tmp{os.getpid()}")
        shutil.copytree(source, tmp)
        os.replace(tmp, path)
        shutil.rmtree(path.with_name(path.name + ".partial"), ignore_errors=True)  # a killed build's checkpoints
    log.info("this run's weights are the %s of its config: cached in %s for the RL runs that start there", what, path)
    return path


def bc_checkpoint(cfg: BCConfig, task, engine, model, tokenizer, logger, seed: int, train: bool = True) -> Path:
    """The BC stage RL starts from: trained once, cached by `bc_stage_key`, or published by a BC run of the
    same config (`BCTrainer.publish`); `train=False`: it must be cached already."""
    key = bc_stage_key(cfg, task, model, tokenizer, seed, engine.precision)

    def build(partial: Path, tmp: Path) -> None:
        trainer = BCTrainer(cfg, task, engine.spawn(), model, tokenizer, StageLogger(logger, "bc_stage"), seed,
                            checkpointer=Checkpointer(partial / "checkpoints", every=max(1, cfg.steps // 4)))
        trainer.fit()
        trainer.engine.save(tmp, tokenizer)

    return cached_stage(task, "bc", key, "BC stage", build if train else None)


def start_checkpoint(cfg, task, engine, model, tokenizer, logger, seed: int, train: bool = True) -> Path:
    """Where an RL stage starts: `cfg.init_from` if given, else the cached BC stage of `cfg.bc`."""
    if cfg.init_from:
        return Path(cfg.init_from)
    return bc_checkpoint(cfg.bc, task, engine, model, tokenizer, logger, seed, train)


class FilteredBCTrainer(BCTrainer):
    """Filtered BC (%BC): `BCTrainer` on the episodes with return at least the dataset's `(1 - top_fraction)`
    percentile."""

    config_class = FilteredBCConfig
    supports_lora = True

    def select(self) -> Iterator[Episode]:
        """Two streaming passes: the returns (to find the percentile), then the episodes above it."""
        returns = np.array([ep.total_return for ep in self.task.episodes()])
        threshold = return_threshold(returns, self.cfg.top_fraction)
        log.info("filtered BC keeps %d of %d episodes (top %.0f%%)", int((returns >= threshold).sum()), len(returns),
                 100 * self.cfg.top_fraction)
        return (ep for ep in self.task.episodes() if ep.total_return >= threshold)
