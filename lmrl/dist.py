"""Process topology and engines: the only way trainers reach a model's parameters.

A trainer calls `setup`, then `forward` / `backward` / `step`, switches `train` / `eval`,
exports with `save` (a `save_pretrained` directory) and checkpoints with `save_state` /
`load_state` (model, optimizer, schedule: what resuming needs).  Frozen models (ILQL's
target, PPO's reference) go through `prepare_frozen`, and `local_tensors` gives the slices
of a model's parameters this process holds, so a Polyak update never gathers anything.

`TorchEngine` is plain PyTorch: CPU, one GPU, or DDP when the launcher starts several
processes.  `lmrl.deepspeed_engine.DeepSpeedEngine` implements the same methods with ZeRO
stage 2 or 3; DeepSpeed is imported only there.

Topology comes from the environment: torchrun / the `deepspeed` launcher set RANK,
WORLD_SIZE and LOCAL_RANK; in an srun step (one task per GPU, started by `srun` directly or by
submitit) Slurm's own SLURM_PROCID, SLURM_NTASKS and SLURM_LOCALID are used, with the master
at the step's first host and a port derived from the job id.  Without either, the run is a
single process (also in an sbatch script itself, which is no step).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from lmrl.allocator import preload_env
from lmrl.threads import set_threads


# -- topology ------------------------------------------------------------------------------------
def topology() -> tuple[int, int, int]:
    """(rank, world size, local rank) from torchrun's variables, else an srun step's, else (0, 1, 0)."""
    env = os.environ
    if "WORLD_SIZE" in env:
        return int(env.get("RANK", 0)), int(env["WORLD_SIZE"]), int(env.get("LOCAL_RANK", 0))
    if in_slurm_step():
        world = int(env.get("SLURM_STEP_NUM_TASKS") or env.get("SLURM_NTASKS") or 1)
        return int(env["SLURM_PROCID"]), world, int(env.get("SLURM_LOCALID", 0))
    return 0, 1, 0


def in_slurm_step() -> bool:
    """One task of an srun step.  An sbatch script also sees SLURM_PROCID=0 and the job's SLURM_NTASKS,
    but it is one process: a step has a step id."""
    return "SLURM_PROCID" in os.environ and "SLURM_STEP_ID" in os.environ


def first_host(nodelist: str) -> str:
    """The first host of Slurm's compressed node list: `gpu[07-09,12],cpu01` -> `gpu07`."""
    depth, end = 0, len(nodelist)
    for i, ch in enumerate(nodelist):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            end = i
            break
    # each bracket's first entry, keeping its zero padding: `rack[1-2]-n[01-04]` -> `rack1-n01`
    return re.sub(r"\[([^\],-]+)[^\]]*\]", r"\1", nodelist[:end])


def slurm_master() -> tuple[str, int] | None:
    """(address, port) of rank 0 in an srun step: the step's first host, and a port every task derives
    alike from the job and step ids (20000-31999: below Linux's ephemeral range)."""
    env = os.environ
    nodes = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST")
    if not (in_slurm_step() and nodes and "SLURM_JOB_ID" in env):
        return None
    step = int(env["SLURM_STEP_ID"]) if env["SLURM_STEP_ID"].isdigit() else 0
    return first_host(nodes), 20000 + (int(env["SLURM_JOB_ID"]) * 8 + step) % 12000


def local_cuda_index(local: int) -> int:
    """This process's GPU: its local rank, wrapped when the launcher shows each task only its own GPU(s)."""
    return local % max(1, torch.cuda.device_count())


def rank() -> int:
    """This process's rank (0 in a single process)."""
    return dist.get_rank() if dist.is_initialized() else topology()[0]


def world_size() -> int:
    """The number of processes of the run (1 in a single process)."""
    return dist.get_world_size() if dist.is_initialized() else topology()[1]


def is_main() -> bool:
    """Rank 0: the only process that writes metrics, logs, exports and the run's files."""
    return rank() == 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Variables a launcher (torchrun, Slurm via submitit, a parent's W&B service) leaves in a process's
# environment that a separately launched child run must not inherit: it would join the wrong process
# group, or share a W&B service that keeps a killed run's id "in use".
INHERITED_LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "LOCAL_SIZE", "MASTER_ADDR",
                         "MASTER_PORT", "WANDB_SERVICE")


def child_env(**extra: str) -> dict:
    """This process's environment for a separately launched run: launch variables dropped, `extra` set, and the
    heap allocator preloaded (`lmrl.allocator`)."""
    env = {k: v for k, v in os.environ.items() if k not in INHERITED_LAUNCH_VARS}
    env.update(extra)
    return preload_env(env)


# Hardware configs (conf/hardware) whose runs are several processes started by a launcher.
LAUNCHED_HARDWARE = ("ddp", "zero2", "zero3", "zero3_offload")


def torchrun_prefix(nproc: int) -> list[str]:
    """The start of a command that runs `-m <module> ...` in `nproc` processes on this node (torchrun
    `--standalone`: a rendezvous on a free local port, so runs side by side do not collide)."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"]


def init_distributed(force: bool = False) -> bool:
    """Join the process group when there are several processes (or `force`, for DeepSpeed in
    one process).  gloo on CPU, nccl on GPUs.  Returns whether a group is up."""
    if dist.is_initialized():
        return True
    r, world, local = topology()
    if world == 1 and not force:
        return False
    env = os.environ
    master = slurm_master() if "MASTER_ADDR" not in env else None  # srun, with or without submitit
    env.setdefault("RANK", str(r))
    env.setdefault("WORLD_SIZE", str(world))
    env.setdefault("LOCAL_RANK", str(local))
    env.setdefault("MASTER_ADDR", master[0] if master else "127.0.0.1")
    env.setdefault("MASTER_PORT", str(master[1] if master else free_port()))
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(local_cuda_index(local))
    dist.init_process_group(backend, rank=r, world_size=world)
    return True


def barrier() -> None:
    """Wait for every process (a no-op without a process group)."""
    if dist.is_initialized():
        dist.barrier()


def shutdown() -> None:
    """Leave the process group (without this, gloo can abort at interpreter exit)."""
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def exit_worker() -> None:
    """End a process other than rank 0 once it has left the process group, without returning.  Returning frees the
    DDP reducer and with it the gloo process group, whose destructor joins gloo's worker threads while holding the
    GIL; a worker still releasing the last barrier's tensors waits for the GIL: deadlock (torch 2.13, seen in a
    2-process run sharing one core: rank 1 hung in ~ProcessGroupGloo until the test's 10-minute timeout)."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def all_mean(value: float) -> float:
    """The mean of a per-process scalar over all processes (the value itself in one process)."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return value
    t = torch.tensor([float(value)], dtype=torch.float64)
    if dist.get_backend() == "nccl":
        t = t.cuda()
    dist.all_reduce(t)
    return float(t.item()) / dist.get_world_size()


def broadcast_object(obj):
    """Rank 0's `obj` on every process."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def gather_lists(items: list) -> list:
    """Every process's list, concatenated in rank order, on every process."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return items
    boxes = [None] * dist.get_world_size()
    dist.all_gather_object(boxes, items)
    return [x for box in boxes for x in box]


@contextlib.contextmanager
def main_first():
    """Rank 0 runs the block first (e.g. builds a cached dataset); the others run it after."""
    if not is_main():
        barrier()
    yield
    if is_main():
        barrier()


def shard(items: list, r: int | None = None, world: int | None = None) -> list:
    """This process's share of `items` (interleaved: every rank gets a similar mix)."""
    r = rank() if r is None else r
    world = world_size() if world is None else world
    return items[r::world]


# -- optimization --------------------------------------------------------------------------------
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
    # (name prefix, lr) pairs: parameters whose name starts with the prefix train at that lr (the first match
    # wins), e.g. a freshly initialised value head beside a pretrained trunk; the schedule scales every group.
    group_lrs: tuple[tuple[str, float], ...] = ()


def warmup_cosine(step: int, cfg: OptimConfig) -> float:
    """LR multiplier at `step` (0-based)."""
    if cfg.warmup_steps > 0 and step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    span = max(1, cfg.total_steps - cfg.warmup_steps)
    progress = min(1.0, (step - cfg.warmup_steps) / span)
    return cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def param_groups(model: torch.nn.Module, weight_decay: float,
                 group_lrs: tuple[tuple[str, float], ...] = ()) -> list[dict]:
    """No weight decay on biases and norms (the original's decay mask); parameters named by a prefix of
    `group_lrs` get that prefix's lr (the others the optimizer's default).  Decaying groups first; empty ones
    are left out."""
    groups: dict[tuple[bool, float | None], list] = {}
    for decays in (True, False):
        for name, p in model.named_parameters():
            if p.requires_grad and (p.dim() >= 2) == decays:
                lr = next((lr for prefix, lr in group_lrs if name.startswith(prefix)), None)
                groups.setdefault((decays, lr), []).append(p)
    return [{"params": params, "weight_decay": weight_decay if decays else 0.0,
             **({"lr": lr} if lr is not None else {})} for (decays, lr), params in groups.items()]


def frozen_keys(model: torch.nn.Module) -> set[str]:
    """The state-dict keys of `model`'s frozen parameters (LoRA: the base weights under the adapters)."""
    frozen = {id(p) for p in model.parameters() if not p.requires_grad}
    return {k for k, v in model.state_dict(keep_vars=True).items() if id(v) in frozen} if frozen else set()


def trainable_state(model: torch.nn.Module) -> dict:
    """`model`'s state dict without its frozen parameters: what a checkpoint keeps (frozen weights come back from
    where the run started; a model that trains every weight keeps them all)."""
    skip = frozen_keys(model)
    return {k: v for k, v in model.state_dict().items() if k not in skip}


def load_trainable_state(model: torch.nn.Module, state: dict) -> None:
    """Load `trainable_state`'s dict: strict, except that frozen parameters may be missing."""
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = set(missing) - frozen_keys(model)
    if missing or unexpected:
        raise RuntimeError(f"checkpoint does not fit the model: missing {sorted(missing)[:8]}, "
                           f"unexpected {sorted(unexpected)[:8]}")


def move(tree, device: torch.device):
    """Every tensor in a (nested) dict / list / tuple on `device`; anything else unchanged.
    Host-to-GPU copies are issued without waiting (the next kernel on the stream orders them)."""
    if torch.is_tensor(tree):
        return tree.to(device, non_blocking=device.type == "cuda")
    if isinstance(tree, dict):
        return {k: move(v, device) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(move(v, device) for v in tree)
    return tree


def write_step(directory: Path, global_step: int) -> None:
    (directory / "lmrl_state.json").write_text(json.dumps({"global_step": global_step}))


def read_step(directory: Path) -> int | None:
    state = Path(directory) / "lmrl_state.json"
    return json.loads(state.read_text())["global_step"] if state.exists() else None


# -- precision -----------------------------------------------------------------------------------
# Mixed precision on plain torch: weights and optimizer state stay fp32, matmuls run in the low
# precision under autocast.  Losses cast what they reduce to fp32 themselves.
AUTOCAST = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def native_bf16(device: torch.device, cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether the device computes bf16 natively: a CUDA GPU that supports it (Ampere or newer), or a CPU
    with AVX-512 BF16 or AMX (`cpuinfo` lists its flags)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported(including_emulation=False)
    if device.type != "cpu" or not cpuinfo.exists():
        return False
    flags = set(cpuinfo.read_text().split())
    return bool(flags & {"avx512_bf16", "amx_bf16"})


def resolve_precision(precision: str, device: torch.device) -> str:
    """`auto`: bf16 where the device has it natively (measured on this project's CPU, AVX-512 BF16: a BC
    step 1.16x at 64 maze sequences, 1.4-1.6x at 8k tokens or a 4 x 256 model; `make bench`), else fp32."""
    if precision != "auto":
        return precision
    return "bf16" if native_bf16(device) else "fp32"


def autocast(device: torch.device, precision: str):
    dtype = AUTOCAST[precision]
    return torch.autocast(device.type, dtype=dtype) if dtype is not None else contextlib.nullcontext()


class Autocast(torch.nn.Module):
    """A frozen model whose forward runs in `precision` (fp32 weights kept: a Polyak average needs them).
    Parameters, state dict and attributes are the wrapped model's."""

    def __init__(self, module: torch.nn.Module, device: torch.device, precision: str):
        super().__init__()
        self.module, self.device_, self.precision = module, device, precision

    def forward(self, *args, **kwargs):
        with autocast(self.device_, self.precision):
            return self.module(*args, **kwargs)

    def state_dict(self, *args, **kwargs):
        return self.module.state_dict(*args, **kwargs)

    def load_state_dict(self, state, *args, **kwargs):
        return self.module.load_state_dict(state, *args, **kwargs)


# -- plain PyTorch -------------------------------------------------------------------------------
class TorchEngine:
    """Plain PyTorch on one device, with optional bf16 autocast; DDP when several processes run."""

    sharded = False  # every process holds whole parameters (ZeRO-3 does not)
    guards_steps = True  # `step` skips non-finite updates itself (see `step`)

    def __init__(self, device: str = "auto", precision: str = "fp32", threads: int | None = None,
                 compile: bool = False, fused_adamw: bool = True):
        if precision not in (*AUTOCAST, "auto"):
            raise ValueError(f"precision must be one of {', '.join(AUTOCAST)} or auto, got {precision!r}")
        if device == "auto":
            device = f"cuda:{local_cuda_index(topology()[2])}" if torch.cuda.is_available() else "cpu"
        self.device = torch.device(device)
        self.precision = resolve_precision(precision, self.device)
        self.init_kwargs = {"device": device, "precision": precision, "threads": threads, "compile": compile,
                            "fused_adamw": fused_adamw}
        self.compile = compile
        self.threads = set_threads(threads)  # the config's count, else this process's share of its cores
        self.model: torch.nn.Module | None = None
        self.wrapped: torch.nn.Module | None = None  # the DDP wrapper when world > 1
        self.optimizer = None
        self.scheduler = None
        # fp16 needs loss scaling (its range underflows small gradients); bf16 and fp32 do not
        self.scaler = torch.amp.GradScaler(self.device.type) if self.precision == "fp16" else None
        # One fused AdamW kernel (3-10x the multi-tensor one's speed on this CPU too: `make bench`); it can
        # skip a step on the device, so the non-finite guard needs no host sync
        self.fused = fused_adamw and self.device.type in ("cuda", "cpu")
        self.nonfinite_steps = torch.zeros((), dtype=torch.long, device=self.device)
        self.global_step = 0

    def setup(self, model: torch.nn.Module, optim: OptimConfig) -> None:
        """Place the trained model and build its optimizer and schedule (inference-only models: `place`)."""
        self.model = model.to(self.device)
        self.wrapped = self.model
        if init_distributed() and world_size() > 1:
            from torch.nn.parallel import DistributedDataParallel

            ids = [self.device.index] if self.device.type == "cuda" else None
            self.wrapped = DistributedDataParallel(self.model, device_ids=ids)
        if self.compile:  # graphs are traced on the first steps; sequence lengths vary, so shapes are dynamic
            self.wrapped = torch.compile(self.wrapped, dynamic=True)
        self.optim_cfg = optim
        groups = param_groups(model, optim.weight_decay, optim.group_lrs)
        self.optimizer = torch.optim.AdamW(groups, lr=optim.lr, betas=optim.betas,
                                           **({"fused": True} if self.fused else {}))
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: warmup_cosine(s, optim))

    def spawn(self) -> "TorchEngine":
        """A fresh engine with the same settings (e.g. for a BC stage before RL)."""
        return type(self)(**self.init_kwargs)

    def autocast(self):
        """A context in which forward passes run in the engine's precision (bf16 or fp16 autocast; a no-op in fp32)."""
        return autocast(self.device, self.precision)

    # -- the device boundary --
    def to_device(self, tree):
        """A batch (or any nest of tensors) on the engine's device: the one place host data crosses over."""
        return move(tree, self.device)

    def place(self, module: torch.nn.Module) -> torch.nn.Module:
        """A whole-weights model for inference (a policy to sample from) on this process's device."""
        return module.to(self.device)

    def forward(self, **batch):
        """The trained model on a batch already on the device (`to_device`)."""
        with self.autocast():
            return self.wrapped(**batch)

    def backward(self, loss: torch.Tensor) -> None:
        """Backpropagate `loss` (scaled first under fp16)."""
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def step(self) -> dict:
        """Clip, step optimizer and schedule, zero grads.  Returns the pre-clip grad norm (a device tensor:
        reading it is a host sync, left to the caller's logging steps) and the lr used.

        A step whose gradients are not finite leaves the weights and moments alone and is counted in
        `nonfinite_steps` (`check_steps` raises on it); with the fused optimizer this is decided on the
        device.  fp16: gradients are unscaled before clipping, and the loss scaler skips overflowing
        steps itself (an overflow is expected there, not an error)."""
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.optim_cfg.grad_clip)
        lr = self.scheduler.get_last_lr()[0]
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            bad = ~torch.isfinite(grad_norm)
            self.nonfinite_steps += bad
            if self.fused:
                self.optimizer.found_inf = bad.float()  # the fused kernel skips the update when set
                self.optimizer.step()
            elif not bool(bad):
                self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.global_step += 1
        return {"grad_norm": grad_norm, "lr": lr}

    def check_steps(self) -> int:
        """Steps skipped for non-finite gradients so far (a host sync: call it at logging steps)."""
        return int(self.nonfinite_steps)

    def train(self) -> None:
        """Put the trained model in training mode."""
        self.model.train()

    def eval(self) -> None:
        """Put the trained model in evaluation mode (no dropout)."""
        self.model.eval()

    def unwrap(self) -> torch.nn.Module:
        """The model itself (whole parameters: usable for generation)."""
        return self.model

    # -- frozen models and Polyak updates --
    def prepare_frozen(self, module: torch.nn.Module) -> torch.nn.Module:
        """A model that is only run forward (a target or reference network), in the engine's precision."""
        return Autocast(module.to(self.device).eval().requires_grad_(False), self.device, self.precision)

    def local_tensors(self, module: torch.nn.Module | None = None) -> list[torch.Tensor]:
        """The parameter tensors of `module` (default: the trained model) this process holds."""
        return [p.data for p in (module if module is not None else self.model).parameters()]

    def frozen_state(self, module: torch.nn.Module) -> dict | None:
        """A frozen model's full state dict (on the main process; None elsewhere)."""
        return {k: v.detach().cpu().clone() for k, v in module.state_dict().items()} if is_main() else None

    def load_frozen_state(self, module: torch.nn.Module, state: dict) -> None:
        """Load a state dict saved by `frozen_state` into a frozen model."""
        module.load_state_dict(state)

    @contextlib.contextmanager
    def gathered(self):
        """Whole parameters available inside the block (a no-op here; ZeRO-3 gathers)."""
        yield

    # -- export and checkpoints --
    def save(self, directory: str | os.PathLike, tokenizer=None) -> Path:
        """A `save_pretrained` checkpoint (model + tokenizer) loadable by `from_pretrained`.

        Models that are not HF models (value heads on a trunk) implement `save_pretrained` themselves.
        """
        directory = Path(directory)
        with self.gathered():
            if is_main():
                self.unwrap().save_pretrained(directory)
                if tokenizer is not None:
                    tokenizer.save_pretrained(directory)
                write_step(directory, self.global_step)
        barrier()
        return directory

    def load(self, directory: str | os.PathLike) -> None:
        """Load weights saved by `save` into the current model."""
        from transformers import AutoModelForCausalLM

        loaded = AutoModelForCausalLM.from_pretrained(directory)
        self.model.load_state_dict(loaded.state_dict())
        self.global_step = read_step(Path(directory)) or self.global_step

    def save_state(self, directory: Path) -> None:
        """Everything resuming needs: weights, optimizer moments, schedule, step (main process writes)."""
        if is_main():
            torch.save({"model": trainable_state(self.model), "optimizer": self.optimizer.state_dict(),
                        "scheduler": self.scheduler.state_dict(), "global_step": self.global_step,
                        "scaler": self.scaler.state_dict() if self.scaler is not None else None},
                       Path(directory) / "engine.pt")

    def load_state(self, directory: Path) -> None:
        """Restore what `save_state` wrote: weights, optimizer moments, schedule, loss scaler and step."""
        state = torch.load(Path(directory) / "engine.pt", map_location=self.device, weights_only=False)
        load_trainable_state(self.model, state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if self.scaler is not None and state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        self.global_step = state["global_step"]
