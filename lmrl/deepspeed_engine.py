"""DeepSpeed ZeRO behind the engine interface of `lmrl.dist` (the only module importing deepspeed).

What each stage shards across the processes of a run:

- stage 2: optimizer moments and gradients; every process keeps whole parameters, so
  generation, frozen models and exports work as with plain torch;
- stage 3: the parameters too.  Forward passes gather each layer's weights just in time.
  Frozen models (ILQL's target, PPO's reference) are partitioned the same way through an
  optimizer-less DeepSpeed engine, so a Polyak update is a local operation on each
  process's slice; exports and evaluation gather the whole weights (`gathered`).

`offload_optimizer` / `offload_param` move optimizer state / parameters to CPU memory
(ZeRO-Offload).  DeepSpeed's own AdamW (`ds_optimizer=true`, CPU Adam when offloading) is
what you want on GPUs; it is compiled the first time (about 2 minutes), so CPU tests use
the torch AdamW (`ds_optimizer=false`), which DeepSpeed accepts with offload when
`zero_force_ds_cpu_optimizer` is off.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from pathlib import Path

import torch

from lmrl.dist import (Autocast, OptimConfig, TorchEngine, init_distributed, is_main, param_groups, resolve_precision,
                       warmup_cosine)
from lmrl.threads import set_threads


def _deepspeed():
    os.environ.setdefault("DS_ACCELERATOR", "cpu" if not torch.cuda.is_available() else "cuda")
    try:
        import deepspeed
    except ImportError as e:  # an install without the extra still runs hardware=cpu
        raise ImportError("hardware=zero2/zero3 needs DeepSpeed: pip install 'lmrl[deepspeed]'") from e
    # torch deprecated the collectives DeepSpeed calls; harmless, and printed at every step otherwise
    warnings.filterwarnings("ignore", message=r".*(all_gather_into_tensor|reduce_scatter_tensor).*",
                            category=FutureWarning)
    # The shared-memory all-reduce op serves inference only and takes a minute to JIT-compile on first use.
    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
    return deepspeed


class DeepSpeedEngine:
    """The engine interface of `lmrl.dist.TorchEngine` on DeepSpeed ZeRO (`hardware=zero2`, `zero3`, ...): `stage`
    1, 2 or 3, `precision` fp32, bf16, fp16 or auto, optional CPU offload of the optimizer state and (stage 3) of the
    parameters, DeepSpeed's own AdamW with `ds_optimizer`, and raw DeepSpeed keys in `config` merged over the
    defaults. Invalid combinations raise `ValueError` at construction. It steps whatever it is given (`guards_steps`
    is False), so trainers check each loss before `backward`."""

    guards_steps = False  # DeepSpeed applies any step: trainers check the loss first
    def __init__(self, stage: int = 2, precision: str = "fp32", offload_optimizer: bool = False,
                 offload_param: bool = False, ds_optimizer: bool = False, config: dict | None = None,
                 threads: int | None = None, compile: bool = False):
        if stage not in (1, 2, 3):
            raise ValueError(f"ZeRO stage must be 1, 2 or 3, got {stage}")
        if precision not in ("fp32", "bf16", "fp16", "auto"):
            raise ValueError(f"precision must be fp32, bf16, fp16 or auto, got {precision!r}")
        if offload_param and stage != 3:
            raise ValueError("offload_param needs ZeRO stage 3")
        self.ds = None
        self.stage, self.precision = stage, resolve_precision(precision, self.device)
        self.offload_optimizer, self.offload_param, self.ds_optimizer = offload_optimizer, offload_param, ds_optimizer
        self.extra = dict(config or {})
        self.init_kwargs = {"stage": stage, "precision": precision, "offload_optimizer": offload_optimizer,
                            "offload_param": offload_param, "ds_optimizer": ds_optimizer, "config": config,
                            "threads": threads, "compile": compile}
        self.compile = compile
        self.threads = set_threads(threads)  # the config's count, else this rank's share of its cores
        self.sharded = stage == 3
        self.frozen: list = []
        self.global_step = 0

    @property
    def device(self) -> torch.device:
        """Where DeepSpeed puts this process's model: its accelerator's device for our local rank."""
        if self.ds is not None:
            return torch.device(self.ds.device)
        local = int(os.environ.get("LOCAL_RANK", 0))
        return torch.device(_deepspeed().accelerator.get_accelerator().device_name(local))

    def spawn(self) -> "DeepSpeedEngine":
        """A fresh engine with the same settings (e.g. for a BC stage before RL)."""
        return type(self)(**self.init_kwargs)

    # -- config --
    def ds_config(self, grad_clip: float | None = None) -> dict:
        """The DeepSpeed config this engine runs with: ZeRO stage and offload, precision, `grad_clip`, and the hardware
        config's `config:` block merged over them."""
        zero: dict = {"stage": self.stage}
        if self.offload_optimizer:
            zero["offload_optimizer"] = {"device": "cpu", "pin_memory": torch.cuda.is_available()}
        if self.offload_param:
            zero["offload_param"] = {"device": "cpu", "pin_memory": torch.cuda.is_available()}
        cfg = {
            # We call backward/step ourselves with our own batches: DeepSpeed's batch bookkeeping is 1 x 1.
            "train_micro_batch_size_per_gpu": 1,
            "gradient_accumulation_steps": 1,
            "zero_optimization": zero,
            "steps_per_print": 10**9,
            "wall_clock_breakdown": False,
        }
        if grad_clip is not None:
            cfg["gradient_clipping"] = grad_clip
        if self.precision == "bf16":
            cfg["bf16"] = {"enabled": True}
        elif self.precision == "fp16":
            cfg["fp16"] = {"enabled": True, "loss_scale": 0}
        if (self.offload_optimizer or self.offload_param) and not self.ds_optimizer:
            cfg["zero_force_ds_cpu_optimizer"] = False
        return _merge(cfg, self.extra)

    # -- setup --
    def setup(self, model: torch.nn.Module, optim: OptimConfig) -> None:
        """The trained model, sharded, with its optimizer and schedule (inference-only models: `place`)."""
        deepspeed = _deepspeed()
        init_distributed(force=True)
        cfg = self.ds_config(optim.grad_clip)
        groups = param_groups(model, optim.weight_decay, optim.group_lrs)
        if self.ds_optimizer:
            cfg["optimizer"] = {"type": "AdamW", "params": {"lr": optim.lr, "betas": list(optim.betas),
                                                            "weight_decay": optim.weight_decay}}
            optimizer = None
        else:
            optimizer = torch.optim.AdamW(groups, lr=optim.lr, betas=optim.betas)
        schedule = lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lambda s: warmup_cosine(s, optim))  # noqa: E731
        self.ds, self.optimizer, _, self.scheduler = deepspeed.initialize(
            model=model, model_parameters=groups, optimizer=optimizer, lr_scheduler=schedule, config=cfg)
        if self.compile:
            self.ds.compile()

    def prepare_frozen(self, module: torch.nn.Module) -> torch.nn.Module:
        """Stage 3: partitioned like the trained model (an optimizer-less engine); else a replica."""
        module = module.eval().requires_grad_(False)
        if not self.sharded:  # fp32 weights (a Polyak average needs them), forward in the run's precision
            return Autocast(module.to(self.device), self.device, self.precision)
        engine = _deepspeed().initialize(model=module, config=self.ds_config())[0]
        engine.eval()
        self.frozen.append(engine)
        return engine

    # -- the device boundary (as plain torch's) --
    to_device = TorchEngine.to_device

    def place(self, module: torch.nn.Module) -> torch.nn.Module:
        """A whole-weights model for inference on this process's device, in the dtype DeepSpeed trains
        in (bf16/fp16 runs hold low-precision weights: a policy and a critic acting together match)."""
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(self.precision, torch.float32)
        return module.to(self.device, dtype=dtype)

    # -- training --
    def forward(self, **batch):
        """The trained model on a batch already on the device (`to_device`)."""
        return self.ds(**batch)

    def backward(self, loss: torch.Tensor) -> None:
        """Backpropagate `loss` through DeepSpeed (which scales and reduces gradients)."""
        self.ds.backward(loss)

    def step(self) -> dict[str, float]:
        """Optimizer and schedule step. Returns the global gradient norm (NaN where DeepSpeed reports none) and the lr
        used."""
        lr = self.ds.get_lr()[0]
        self.ds.step()
        self.global_step += 1
        norm = self.ds.get_global_grad_norm()
        return {"grad_norm": norm if norm is not None else float("nan"), "lr": lr}

    def check_steps(self) -> int:
        """DeepSpeed steps whatever it is given: trainers check each loss before backward instead."""
        return 0

    def train(self) -> None:
        """Put the trained model in training mode."""
        self.ds.train()

    def eval(self) -> None:
        """Put the trained model in evaluation mode (no dropout)."""
        self.ds.eval()

    def unwrap(self) -> torch.nn.Module:
        """The module (stage 3: its parameters are slices outside `gathered()`)."""
        return self.ds.module

    # -- sharded parameters --
    def local_tensors(self, module: torch.nn.Module | None = None) -> list[torch.Tensor]:
        """This process's slice of each parameter (stage 3) or the whole tensors (stage 1/2)."""
        module = self.ds.module if module is None else getattr(module, "module", module)
        return [p.ds_tensor if hasattr(p, "ds_tensor") else p.data for p in module.parameters()]

    def _has_frozen(self) -> bool:
        return any(not p.requires_grad for p in self.ds.module.parameters())

    def _params(self) -> list:
        modules = [self.ds.module] + [e.module for e in self.frozen]
        return [p for m in modules for p in m.parameters()]

    @contextlib.contextmanager
    def gathered(self, modifier_rank: int | None = None):
        """Whole parameters on every process inside the block (stage 3; a no-op otherwise).
        With `modifier_rank`, that rank's in-place changes are broadcast on exit."""
        if not self.sharded:
            yield
            return
        with _deepspeed().zero.GatheredParameters(self._params(), modifier_rank=modifier_rank):
            yield

    def frozen_state(self, module) -> dict | None:
        """A frozen model's full state dict, gathered from its shards (on the main process; None elsewhere). Collective:
        every process calls it."""
        inner = getattr(module, "module", module)
        with self.gathered():
            state = {k: v.detach().cpu().clone() for k, v in inner.state_dict().items()} if is_main() else None
        return state

    def load_frozen_state(self, module, state: dict | None) -> None:
        """Load `frozen_state`'s dict into a frozen model (the main process loads, the change is broadcast to the
        shards). Collective."""
        inner = getattr(module, "module", module)
        with self.gathered(modifier_rank=0):
            if is_main():
                inner.load_state_dict(state)

    # -- export and checkpoints --
    # the export is the same as plain torch's: whole weights (gathered), written by rank 0
    save = TorchEngine.save

    def save_state(self, directory: Path) -> None:
        """DeepSpeed's sharded checkpoint: every process writes its own optimizer/parameter shards.  Frozen parameters
        (LoRA's base weights) are left out: they come back from where the run started."""
        self.ds.save_checkpoint(str(directory), tag="deepspeed", client_state={"global_step": self.global_step},
                                save_latest=False, exclude_frozen_parameters=self._has_frozen())

    def load_state(self, directory: Path) -> None:
        """Restore `save_state`'s sharded checkpoint: weights, optimizer and schedule state, and the step."""
        _, client = self.ds.load_checkpoint(str(directory), tag="deepspeed", load_optimizer_states=True,
                                            load_lr_scheduler_states=True, load_module_strict=not self._has_frozen())
        self.global_step = int((client or {}).get("global_step", 0))


def _merge(base: dict, extra: dict) -> dict:
    """`extra` (the hardware config's `config:` block, raw DeepSpeed keys) over our defaults."""
    out = dict(base)
    for k, v in extra.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out
