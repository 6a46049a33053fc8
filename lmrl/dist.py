"""Engines: the only way trainers reach a model's parameters.

A trainer calls `setup`, then `forward` / `backward` / `step`, and `save` / `load`; it
never touches the optimizer or the device directly.  `TorchEngine` is plain PyTorch (CPU
or one GPU); the DeepSpeed engine will implement the same methods, so no trainer changes.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import torch


@dataclass
class OptimConfig:
    """AdamW with linear warm-up then cosine decay to `min_lr_ratio * lr`, and grad clipping."""

    lr: float
    total_steps: int
    warmup_steps: int = 0
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.95)
    grad_clip: float = 1.0
    min_lr_ratio: float = 0.1


def warmup_cosine(step: int, cfg: OptimConfig) -> float:
    """LR multiplier at `step` (0-based)."""
    if cfg.warmup_steps > 0 and step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    span = max(1, cfg.total_steps - cfg.warmup_steps)
    progress = min(1.0, (step - cfg.warmup_steps) / span)
    return cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """No weight decay on biases and norms (the original's decay mask)."""
    decay, no_decay = [], []
    for _, p in model.named_parameters():
        if p.requires_grad:
            (decay if p.dim() >= 2 else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


class TorchEngine:
    """Plain PyTorch on one device, with optional bf16 autocast."""

    def __init__(self, device: str = "cpu", precision: str = "fp32", threads: int | None = None):
        if precision not in ("fp32", "bf16"):
            raise ValueError(f"precision must be fp32 or bf16, got {precision!r}")
        self.device = torch.device(device)
        self.precision = precision
        self.init_kwargs = {"device": device, "precision": precision, "threads": threads}
        if threads:
            torch.set_num_threads(threads)
        self.model: torch.nn.Module | None = None
        self.optimizer = None
        self.scheduler = None
        self.global_step = 0

    def setup(self, model: torch.nn.Module, optim: OptimConfig | None) -> None:
        """Place the model; with `optim` also build optimizer and schedule (None = inference only)."""
        self.model = model.to(self.device)
        if optim is None:
            return
        self.optim_cfg = optim
        self.optimizer = torch.optim.AdamW(param_groups(model, optim.weight_decay), lr=optim.lr, betas=optim.betas)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: warmup_cosine(s, optim))

    def spawn(self) -> "TorchEngine":
        """A fresh engine with the same settings (e.g. for a BC stage before RL)."""
        return type(self)(**self.init_kwargs)

    def autocast(self):
        if self.precision == "bf16":
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def forward(self, **batch):
        batch = {k: v.to(self.device) if torch.is_tensor(v) else v for k, v in batch.items()}
        with self.autocast():
            return self.model(**batch)

    def backward(self, loss: torch.Tensor) -> None:
        loss.backward()

    def step(self) -> dict[str, float]:
        """Clip, step optimizer and schedule, zero grads; returns the pre-clip grad norm and the lr used."""
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.optim_cfg.grad_clip)
        lr = self.scheduler.get_last_lr()[0]
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.global_step += 1
        return {"grad_norm": float(grad_norm), "lr": lr}

    def train(self) -> None:
        self.model.train()

    def eval(self) -> None:
        self.model.eval()

    def unwrap(self) -> torch.nn.Module:
        return self.model

    def save(self, directory: str | os.PathLike, tokenizer=None) -> Path:
        """A `save_pretrained` checkpoint (model + tokenizer) loadable by `from_pretrained`.

        Models that are not HF models (value heads on a trunk) implement `save_pretrained` themselves.
        """
        directory = Path(directory)
        self.model.save_pretrained(directory)
        if tokenizer is not None:
            tokenizer.save_pretrained(directory)
        (directory / "lmrl_state.json").write_text(json.dumps({"global_step": self.global_step}))
        return directory

    def load(self, directory: str | os.PathLike) -> None:
        """Load weights saved by `save` into the current model."""
        from transformers import AutoModelForCausalLM

        loaded = AutoModelForCausalLM.from_pretrained(directory)
        self.model.load_state_dict(loaded.state_dict())
        state = Path(directory) / "lmrl_state.json"
        if state.exists():
            self.global_step = json.loads(state.read_text())["global_step"]
