"""Typed algorithm configs and the trainer factory (no if/elif over algorithm names).

Each `conf/algo/*.yaml` names a trainer class in `_target_`; the class names its config
dataclass in `config_class`.  The YAML is merged onto the dataclass schema (unknown keys
and wrong types fail here, naming the key) and then `validate()` checks ranges — all
before any data is built or a step is taken.
"""

from __future__ import annotations

from dataclasses import dataclass

from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException


class ConfigError(ValueError):
    """A config value is invalid; the message names the key."""


def typed_config(schema: type, node: DictConfig):
    """Merge `node` (without `_target_`) onto the dataclass `schema` and validate it."""
    values = _without_targets(OmegaConf.to_container(node, resolve=True))
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), values)
        obj = OmegaConf.to_object(merged)
    except OmegaConfBaseException as e:
        raise ConfigError(f"invalid {schema.__name__}: {e}") from None
    problems = obj.validate()
    if problems:
        raise ConfigError(f"invalid {schema.__name__}: " + "; ".join(problems))
    return obj


def _without_targets(d):
    """Drop `_target_` keys at every depth (nested stages such as an RL algo's `bc` carry one)."""
    if isinstance(d, dict):
        return {k: _without_targets(v) for k, v in d.items() if k != "_target_"}
    return d


def build_trainer(algo: DictConfig, **deps):
    """Instantiate the trainer named by `algo._target_` with its validated typed config."""
    cls = get_class(algo._target_)
    check_lora(cls, deps.get("model"), deps.get("engine"))
    return cls(typed_config(cls.config_class, algo), **deps)


def check_lora(cls: type, model, engine) -> None:
    """A model with LoRA adapters (`model.lora`) needs a trainer class that says it trains them (`supports_lora` in
    the class itself: a subclass building its own models does not inherit it) and whole parameters on every process
    (not ZeRO-3, whose frozen companions and exports do not share the adapted base)."""
    if getattr(model, "lora_settings", None) is None:
        return
    if not vars(cls).get("supports_lora", False):
        raise ConfigError(f"model.lora: {cls.__name__} does not train LoRA adapters (bc, filtered_bc, mc, ilql, ppo "
                          "and online_filtered_bc do); set model.lora.r=0 to train the whole model")
    if getattr(engine, "sharded", False):
        raise ConfigError("model.lora runs on the torch engine and ZeRO-1/2, not ZeRO-3 (use hardware=zero2)")


@dataclass
class OptimFields:
    """Optimization fields every trainer shares (AdamW + warm-up + cosine + clipping)."""

    steps: int = 500
    # Training length in passes over the dataset instead of `steps` (steps = epochs x batches per epoch).
    epochs: float | None = None
    batch_size: int = 64
    # Batches by a padded-token budget instead (sequences of similar length together, at most this many
    # tokens per batch counting padding; null = `batch_size` sequences).  What keeps a GPU busy: tens of
    # thousands of tokens per step.
    batch_tokens: int | None = None
    # Merge identical training sequences into one weighted by its count (same gradients, far fewer
    # sequences where a windowed task repeats states; an epoch is then a pass over the distinct ones).
    dedup: bool = True
    # ... and give every state (a windowed sequence's window) the same total weight, its actions keeping
    # their frequencies within it (the same per-state targets; rare states are no longer learnt last).
    balance_states: bool = False
    # How merged sequences are batched when one batch does not hold them all: `draw` samples each batch's
    # sequences in proportion to their weights (unit loss weights: the full data's sampling distribution),
    # `weight` shuffles the distinct sequences and weights each one's loss by its count (the same expected
    # gradient, but a batch's gradient is then dominated by its few heavy sequences: on Text-Nav FO BC scored
    # 4.5 this way and 52.0 without merging).  A batch that holds every sequence is always the exact weighted sum.
    dedup_batches: str = "draw"
    lr: float = 1e-3
    warmup_steps: int = 20
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    # The lr decays by cosine to this fraction of `lr`; 1.0 keeps it constant after the warm-up.
    min_lr_ratio: float = 0.1
    # Learning-curve points: every this many steps, evaluate the policy (and a value run's critic) on
    # `curve_episodes_per_start` episodes per start state; written to <run>/curve.csv (0 = none).
    eval_every: int = 0
    # ... or this many points spread evenly over the run (when eval_every is 0).
    curve_points: int = 0
    curve_episodes_per_start: int = 2
    # Early stopping on held-out episodes: curve points then score the policy on validation episodes (the test
    # protocol's start states, sampled with seeds no test episode uses), the start (step 0) included, and the run
    # ends with the best point's weights (ties: the earliest).  Offline trainers; needs curve points.
    keep_best: bool = False
    # ... and stops after this many curve points in a row without a better validation score (0 = every step).
    patience: int = 0
    # ... where "better" means by more than this many standard errors of the two scores' difference (0 = any gain):
    # with few validation episodes a noisy gain otherwise replaces the start, and the test episodes do not repeat it.
    keep_best_margin: float = 0.0

    def validate(self) -> list[str]:
        """Every problem with the values, one message each naming its key; empty when the config is valid. Subclasses
        extend the list with their own checks (and their nested stages', prefixed `bc.`)."""
        problems = []
        for key in ("steps", "batch_size"):
            if getattr(self, key) < 1:
                problems.append(f"{key} must be >= 1 (got {getattr(self, key)})")
        if self.epochs is not None and not self.epochs > 0:
            problems.append(f"epochs must be > 0 or null (got {self.epochs})")
        if self.eval_every < 0 or self.curve_points < 0 or self.curve_episodes_per_start < 1:
            problems.append("eval_every and curve_points must be >= 0, curve_episodes_per_start >= 1")
        if self.keep_best and not (self.eval_every or self.curve_points):
            problems.append("keep_best needs curve points: set eval_every or curve_points")
        if self.patience < 0 or (self.patience and not self.keep_best):
            problems.append(f"patience must be >= 0 and needs keep_best=true (got {self.patience})")
        if self.keep_best_margin < 0 or (self.keep_best_margin and not self.keep_best):
            problems.append(f"keep_best_margin must be >= 0 and needs keep_best=true (got {self.keep_best_margin})")
        if self.balance_states and not self.dedup:
            problems.append("balance_states needs dedup=true")
        if self.dedup_batches not in ("draw", "weight"):
            problems.append(f"dedup_batches must be draw or weight (got {self.dedup_batches!r})")
        if self.batch_tokens is not None and self.batch_tokens < 1:
            problems.append(f"batch_tokens must be >= 1 or null (got {self.batch_tokens})")
        if not self.lr > 0:
            problems.append(f"lr must be > 0 (got {self.lr})")
        if self.warmup_steps < 0 or self.weight_decay < 0 or self.grad_clip <= 0:
            problems.append("warmup_steps and weight_decay must be >= 0, grad_clip > 0")
        if not 0 <= self.min_lr_ratio <= 1:
            problems.append(f"min_lr_ratio must be in [0, 1] (got {self.min_lr_ratio})")
        return problems
