"""`python -m lmrl.bench lora` (in `make bench`): LoRA against full fine-tuning on a GPT-2-small-shaped model.

The model is GPT-2 small's shape (vocabulary 50,257, 1,024 positions, 12 layers x 768, 12 heads; random weights,
built from its config: the cost of a step does not depend on the values).  Each mode trains `--steps` BC steps
(after one warm-up step) on `--batch` random sequences of `--length` tokens with the project's engine (plain torch,
fp32, fused AdamW, one thread), in a fresh process of its own so that its peak memory is its own, and reports:
trainable and total parameters, the optimizer's state, the process's peak RSS and its RSS once the model was built
(the difference is what training adds), and the step's median time and tokens/s.  Modes: `full` (every weight
trains), `lora` (`model.lora.r=16 alpha=32 target_modules=[c_attn]`), `lora_all` (the same on every linear layer:
c_attn, c_proj, c_fc).  Writes `results/bench/lora.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from lmrl.threads import thread_env

# GPT-2 small (124M parameters, the LM head tied to the token embeddings).
GPT2_SMALL = {"vocab_size": 50257, "n_positions": 1024, "n_layer": 12, "n_embd": 768, "n_head": 12}
# Mode -> model.lora (None: full fine-tuning).
MODES = {
    "full": None,
    "lora": {"r": 16, "alpha": 32, "dropout": 0.0, "target_modules": ["c_attn"]},
    "lora_all": {"r": 16, "alpha": 32, "dropout": 0.0, "target_modules": ["c_attn", "c_proj", "c_fc"]},
}


def rss_gb() -> float:
    """This process's resident memory now (GB), from /proc (0 where there is none)."""
    status = Path("/proc/self/status")
    if not status.exists():
        return 0.0
    for line in status.read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1e6
    return 0.0


def child(mode: str, steps: int, batch: int, length: int, shape: dict, seed: int = 0) -> dict:
    """One mode in this process: build the model, train `steps` timed BC steps, measure (module docstring)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from lmrl.algos.bc import bc_loss
    from lmrl.dist import OptimConfig, TorchEngine
    from lmrl.models.factory import parameter_count

    torch.manual_seed(seed)
    model = GPT2LMHeadModel(GPT2Config(**shape))
    if MODES[mode] is not None:
        from lmrl.models.lora import LoraLM, LoraSettings

        model = LoraLM(model, LoraSettings.from_config(MODES[mode]), {"path": "GPT-2 small shape, random weights"})
    trainable, total = parameter_count(model)
    loaded = rss_gb()
    engine = TorchEngine(device="cpu", precision="fp32", threads=1)
    engine.setup(model, OptimConfig(lr=1e-4, total_steps=10**6))
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(shape["vocab_size"], (batch, length), generator=generator)
    mask = torch.ones_like(ids)

    def step() -> float:
        start = time.perf_counter()
        out = engine.forward(input_ids=ids, attention_mask=mask)
        engine.backward(bc_loss(out.logits, ids, mask, mask))
        engine.step()
        return time.perf_counter() - start

    step()  # warm-up: first-call allocations and the optimizer's state
    times = [step() for _ in range(steps)]
    optimizer_bytes = sum(t.numel() * t.element_size() for s in engine.optimizer.state.values() for t in s.values()
                          if torch.is_tensor(t))
    seconds = statistics.median(times)
    return {"lora": MODES[mode], "trainable_parameters": trainable, "parameters": total,
            "trainable_share": trainable / total, "optimizer_state_gb": optimizer_bytes / 1e9,
            "rss_after_build_gb": loaded, "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6,
            "seconds_per_step": seconds, "tokens_per_s": batch * length / seconds}


def run_child(mode: str, args) -> dict:
    """`child` in a fresh process on one thread."""
    env = {**os.environ, **thread_env(1)}
    code = [sys.executable, "-m", "lmrl.bench.lora", "--child", mode, "--steps", str(args.steps), "--batch",
            str(args.batch), "--length", str(args.length), "--shape", json.dumps(args.shape)]
    out = subprocess.run(code, env=env, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"lmrl.bench lora: mode {mode} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    parser.add_argument("--steps", type=int, default=3, help="timed steps per mode (after one warm-up step)")
    parser.add_argument("--batch", type=int, default=4, help="sequences per step")
    parser.add_argument("--length", type=int, default=128, help="tokens per sequence")
    parser.add_argument("--shape", type=json.loads, default=GPT2_SMALL, help="GPT2Config keys (JSON)")
    parser.add_argument("--out", default="results/bench/lora.json")
    parser.add_argument("--child", choices=list(MODES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.steps, args.batch, args.length, args.shape)))
        return
    runs = {}
    for mode in args.modes:
        runs[mode] = run_child(mode, args)
        print(mode, json.dumps(runs[mode]), flush=True)
    result = {"model": "GPT-2 small shape (random weights)", "shape": args.shape, "batch": args.batch,
              "length": args.length, "steps": args.steps, "precision": "fp32", "threads": 1,
              "cpus": os.cpu_count(), "runs": runs}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
