"""`python -m lmrl.bench primitive_cache` (part of `make bench`): oneDNN's primitive cache vs memory and speed.

Under bf16 autocast on a CPU, torch runs its matmuls through oneDNN, which keeps one primitive (with its scratch
memory) per input shape, up to `ONEDNN_PRIMITIVE_CACHE_CAPACITY` (oneDNN's default: 1024).  A batch padded to its
own longest row brings a new shape at nearly every step (the SWEET-RL critic, windowed dialogue BC), so the process
grows with the cache.  This runs the same training steps (the tiny GPT-2, bf16, AdamW, one thread, a fresh process
per run) at each capacity on three shape patterns:

- `varying`: rows of 32..512 tokens drawn at random, each batch padded to its longest (a new shape most steps);
- `buckets`: 16 recurring padded lengths (length-bucketed batches: a cache smaller than 16 re-creates them);
- `fixed`: one length (packed batches: one shape).

and reports tokens/s (median over repeats) and peak RSS.  `--capacities` takes `unset` for no variable in the
environment, i.e. what importing `lmrl` sets (lmrl/__init__.py: `DEFAULT_PRIMITIVE_CACHE`), which also checks
that the setting takes effect; 1024 is oneDNN's own default.  Writes `results/bench/primitive_cache.json`.
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

PATTERNS = ("varying", "buckets", "fixed")


def child(pattern: str, steps: int, rows: int, seed: int) -> dict:
    """One run in this process: `steps` BC steps on random token ids shaped by `pattern`; speed and peak RSS."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from lmrl.algos.bc import bc_loss
    from lmrl.dist import OptimConfig, TorchEngine

    torch.manual_seed(seed)
    vocab = 512
    model = GPT2LMHeadModel(GPT2Config(vocab_size=vocab, n_layer=2, n_embd=128, n_head=4, n_positions=512))
    engine = TorchEngine(device="cpu", precision="bf16", threads=1)
    engine.setup(model, OptimConfig(lr=1e-4, total_steps=10**6))
    generator = torch.Generator().manual_seed(seed)
    buckets = torch.arange(1, 17) * 32  # 32 .. 512

    def lengths() -> torch.Tensor:
        if pattern == "varying":
            return torch.randint(32, 513, (rows,), generator=generator)
        if pattern == "buckets":
            width = int(buckets[torch.randint(len(buckets), (1,), generator=generator)])
            n = torch.randint(16, width + 1, (rows,), generator=generator)
            n[0] = width  # the batch pads to its bucket
            return n
        return torch.full((rows,), 256)

    def step() -> int:
        n = lengths()
        width = int(n.max())
        mask = (torch.arange(width)[None, :] < n[:, None]).long()
        ids = torch.randint(vocab, (rows, width), generator=generator) * mask
        out = engine.forward(input_ids=ids, attention_mask=mask)
        engine.backward(bc_loss(out.logits, ids, mask, mask))
        engine.step()
        return int(mask.sum())

    step()  # warm-up
    tokens, start = 0, time.perf_counter()
    for _ in range(steps):
        tokens += step()
    seconds = time.perf_counter() - start
    return {"tokens_per_s": tokens / seconds, "seconds": seconds,
            "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6,
            "capacity_seen": os.environ.get("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "unset")}


def run_child(capacity: str, pattern: str, args) -> dict:
    """`child` in a fresh process (its own cache and peak RSS) at `capacity`, one thread."""
    env = {k: v for k, v in os.environ.items() if k not in ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "DNNL_PRIMITIVE_CACHE_CAPACITY")}
    env.update(thread_env(1))
    if capacity != "unset":  # unset: importing lmrl sets its default, as in `python -m lmrl.train`
        env["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] = capacity
    code = [sys.executable, "-m", "lmrl.bench.primitive_cache", "--child", pattern, "--steps", str(args.steps),
            "--rows", str(args.rows)]
    out = subprocess.run(code, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--capacities", nargs="+", default=["1024", "256", "64", "16", "unset"],
                        help="ONEDNN_PRIMITIVE_CACHE_CAPACITY values (1024: oneDNN's default; `unset`: none in the "
                             "environment, so lmrl's default)")
    parser.add_argument("--patterns", nargs="+", default=list(PATTERNS), choices=PATTERNS)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rows", type=int, default=8, help="sequences per step")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", default="results/bench/primitive_cache.json")
    parser.add_argument("--child", choices=PATTERNS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.steps, args.rows, seed=0)))
        return
    from tqdm import tqdm

    from lmrl import DEFAULT_PRIMITIVE_CACHE

    runs = [(r, p, c) for r in range(args.repeats) for p in args.patterns for c in args.capacities]
    found: dict[tuple[str, str], list[dict]] = {}
    for _, pattern, capacity in tqdm(runs, desc="primitive cache", unit="run"):
        found.setdefault((pattern, capacity), []).append(run_child(capacity, pattern, args))
    rows = []
    for (pattern, capacity), results in found.items():
        rows.append({"pattern": pattern, "capacity": capacity,
                     "capacity_seen": results[0]["capacity_seen"],
                     "tokens_per_s_median": statistics.median(r["tokens_per_s"] for r in results),
                     "tokens_per_s": [round(r["tokens_per_s"]) for r in results],
                     "peak_rss_gb_max": max(r["peak_rss_gb"] for r in results)})
        print(json.dumps(rows[-1]), flush=True)
    result = {"lmrl_default": DEFAULT_PRIMITIVE_CACHE, "steps": args.steps, "rows_per_step": args.rows,
              "threads": 1, "precision": "bf16", "model": "tiny GPT-2 (2 x 128, vocab 512)",
              "cpus": os.cpu_count(), "load_average_before": os.getloadavg()[0], "runs": rows}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
