"""`python -m lmrl.bench foundation` (part of `make bench`): the throughput numbers of docs/benchmarks.md, as JSON.

Runs on whatever device is present (`--device auto|cpu|cuda`; the device goes into the JSON).
Measures, on maze FO data: BC and ILQL training steps (forward + backward + optimizer step) in
tokens/s and model-FLOPs utilisation, for the tiny model (and `--shapes`, e.g. GPT-2 small's
12x768), across the levers a GPU needs — precision (fp32 / bf16), the optimizer kernel (fused /
multi-tensor AdamW), tokens per step (`--budgets`: length-bucketed batches of that many padded
tokens) and `torch.compile` (`--compile`); evaluation throughput (batched turns with a KV cache);
sampling tokens/s of plain vs value-guided sampling (separate and shared trunks) vs Hugging Face
`generate`; and online-RL rollouts at 1, 16 and 64 envs in lockstep.  MFU counts 6·N·tokens
(padding included) for a BC step and adds the target's and next state's forwards (2·N·tokens each)
for ILQL, against `--peak-tflops` (default: 798 on an H100, the measured bf16 matmul peak of
../shared/gpu/README.md; none elsewhere, then only TFLOP/s are reported).
Writes `results/bench/foundation.json` (CPU) or `results/bench/foundation_<device>.json`.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from data_gen.maze import generate
from lmrl.algos.bc import bc_loss
from lmrl.algos.value_rl import ILQLConfig, ILQLTrainer
from lmrl.data.tokenize import SegmentEncoder, collate, episode_to_chain, episode_to_sequences
from lmrl.dist import OptimConfig, TorchEngine, native_bf16
from lmrl.envs.maze import MazeEnv
from lmrl.models.factory import build_tiny
from lmrl.models.fused import fast_lm
from lmrl.models.value import GuidedLM, ValueModel
from lmrl.rollout.evaluate import protocol, run_episodes
from lmrl.rollout.policy import LMPolicy
from lmrl.rollout.sampler import left_pad, sample_turns
from lmrl.threads import usable_cores


def timed(fn, repeats: int, device: torch.device | None = None) -> list[float]:
    """Wall seconds of each of `repeats` calls after a warm-up (waiting for the GPU's queue to drain)."""
    sync = torch.cuda.synchronize if device is not None and device.type == "cuda" else (lambda: None)
    fn()  # warm-up
    sync()
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        out.append(time.perf_counter() - start)
    return out


def device_info(device: torch.device) -> dict:
    if device.type == "cuda":
        return {"type": "cuda", "name": torch.cuda.get_device_name(device)}
    cpuinfo = Path("/proc/cpuinfo")
    models = [ln.split(":", 1)[1].strip() for ln in cpuinfo.read_text().splitlines()
              if ln.startswith("model name")] if cpuinfo.exists() else []
    # bf16 native or not decides what precision=auto trains in, and moves every figure here by ~1.2-1.6x
    return {"type": "cpu", "name": models[0] if models else platform.processor() or platform.machine(),
            "native_bf16": native_bf16(device)}


def default_peak_tflops(device: torch.device) -> float | None:
    """The measured bf16 matmul peak of an H100 (../shared/gpu/README.md); unknown elsewhere."""
    return 798.0 if device.type == "cuda" and "H100" in torch.cuda.get_device_name(device) else None


def budget_batch(seqs: list, budget: int, pad_id: int) -> dict:
    """Consecutive sequences (cycled) whose padded size, count x longest, stays within `budget` tokens."""
    chosen, longest = [], 0
    for i in range(10**7):
        s = seqs[i % len(seqs)]
        if chosen and (len(chosen) + 1) * max(longest, len(s)) > budget:
            break
        chosen.append(s)
        longest = max(longest, len(s))
    return collate(chosen, pad_id)


def step_result(times: list[float], batch: dict, flops: float, peak_tflops: float | None) -> dict:
    seconds = statistics.median(times)
    padded = batch["input_ids"].numel()
    out = {"sequences": batch["input_ids"].shape[0], "padded_tokens_per_step": padded,
           "tokens_per_step": int(batch["attention_mask"].sum()), "step_seconds_median": seconds,
           "tokens_per_s": int(batch["attention_mask"].sum()) / seconds, "tflops": flops / seconds / 1e12}
    if peak_tflops:
        out["mfu"] = out["tflops"] / peak_tflops
    return out


def bench_bc_step(model, batch: dict, repeats: int, peak_tflops: float | None, **engine_kwargs) -> dict:
    """One BC step (forward + backward + AdamW) on `batch`; 6·N FLOPs per padded token."""
    engine = TorchEngine(**engine_kwargs)
    engine.setup(model, OptimConfig(lr=1e-4, total_steps=10**6))
    batch = engine.to_device(batch)

    def step():
        out = engine.forward(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        engine.backward(bc_loss(out.logits, batch["input_ids"], batch["action_mask"], batch["attention_mask"]))
        engine.step()

    n = sum(p.numel() for p in model.parameters())
    times = timed(step, repeats, engine.device)
    return {**engine_kwargs, **step_result(times, batch, 6 * n * batch["input_ids"].numel(), peak_tflops)}


def bench_ilql_step(model, batch: dict, repeats: int, peak_tflops: float | None, **engine_kwargs) -> dict:
    """One ILQL step (value fwd/bwd + target fwd + next-state V + Polyak): 6·N + 2·N FLOPs per padded
    token and 2·N per next-state token, N = the value model (trunk and heads)."""
    trainer = ILQLTrainer.__new__(ILQLTrainer)
    trainer.cfg = ILQLConfig()
    trainer.value = ValueModel(copy.deepcopy(model), 2, True)
    trainer.engine = TorchEngine(**engine_kwargs)
    trainer.target = trainer.engine.prepare_frozen(copy.deepcopy(trainer.value))
    trainer.engine.setup(trainer.value, OptimConfig(lr=1e-4, total_steps=10**6))
    batch = trainer.engine.to_device(batch)

    def step():
        loss, _ = trainer.loss(batch)
        trainer.engine.backward(loss)
        trainer.engine.step()
        trainer.after_step()

    n = sum(p.numel() for p in trainer.value.parameters())
    nxt = batch["next_input_ids"].numel() if "next_input_ids" in batch else 0
    times = timed(step, repeats, trainer.engine.device)
    return {**engine_kwargs, **step_result(times, batch, n * (8 * batch["input_ids"].numel() + 2 * nxt), peak_tflops)}


def bench_train(model, tok, episodes, batch_size: int, repeats: int, device: torch.device) -> dict:
    """The headline BC step of docs/benchmarks.md: 64 maze FO sequences, fp32."""
    encode = SegmentEncoder(tok)
    seqs = [s for ep in episodes for s in episode_to_sequences(ep, encode, 1, 512)][: batch_size * 4]
    row = bench_bc_step(model, collate(seqs[:batch_size], tok.pad_token_id), repeats, None, device=str(device))
    return {"batch_size": batch_size, **row}


def bench_levers(model, tok, episodes, args, device: torch.device) -> list[dict]:
    """BC and ILQL steps per model shape and token budget at the device's default precision, then
    each lever alone at the largest budget: the other precision, multi-tensor AdamW, torch.compile."""
    encode = SegmentEncoder(tok)
    plain = [s for ep in episodes for s in episode_to_sequences(ep, encode, 1, 512)]
    chain = [s for ep in episodes for s in episode_to_chain(ep, encode, 1, 512, 0.99)]
    default = "bf16" if device.type == "cuda" else "fp32"
    other = "fp32" if default == "bf16" else "bf16"
    rows = []
    for shape in args.shapes:
        layers, width = (int(x) for x in shape.split("x"))
        base = shaped(model, layers, width)
        for budget in args.budgets:
            for kind, seqs, bench in (("bc", plain, bench_bc_step), ("ilql", chain, bench_ilql_step)):
                batch = budget_batch(seqs, budget, tok.pad_token_id)
                variants = [{"precision": default}]
                if budget == max(args.budgets):
                    variants += [{"precision": other}, {"precision": default, "fused_adamw": False}]
                    variants += [{"precision": default, "compile": True}] if args.compile else []
                for levers in variants:
                    row = bench(copy.deepcopy(base), batch, args.repeats, args.peak_tflops, device=str(device),
                                **levers)
                    rows.append({"step": kind, "shape": shape, "budget": budget, **row})
                    print(json.dumps(rows[-1]), flush=True)
    return rows


def shaped(model, layers: int, width: int):
    """A GPT-2 of `layers` x `width` with the tiny model's vocabulary (random init)."""
    cfg = copy.deepcopy(model.config)
    cfg.n_layer, cfg.n_embd, cfg.n_head = layers, width, max(1, width // 64)
    return type(model)(cfg)


def bench_eval(model, tok, episodes_per_start: int) -> dict:
    make_env = lambda: MazeEnv(fully_observed=True)  # noqa: E731
    options, seeds = protocol(make_env, episodes_per_start, seed=0)
    policy = LMPolicy(model, tok, history_window=1, max_input_tokens=256, max_new_tokens=8, batch_size=256)
    start = time.perf_counter()
    eps = run_episodes(policy, make_env, options, seeds, desc="bench eval")
    seconds = time.perf_counter() - start
    steps = sum(ep.num_actions for ep in eps)
    gen_tokens = sum(len(tok(t.text)["input_ids"]) for ep in eps for t in ep.turns if t.is_action)
    return {"episodes": len(eps), "env_steps": steps, "seconds": seconds, "env_steps_per_s": steps / seconds,
            "generated_tokens_per_s": gen_tokens / seconds}


def bench_sampling(model, tok, episodes, batch_sizes: list[int], new_tokens: int, repeats: int,
                   device: torch.device) -> dict:
    """Sampling tokens/s at each batch size, same model, prompts and lengths throughout: plain
    sampling of the BC model; value-guided sampling with a separate value trunk (the ILQL layout:
    two trunks per token) and with a shared trunk (one trunk, extra heads); HF `generate`; and
    the two-trunk guided sampler through the Hugging Face forward instead of the fused one."""
    never_stop = torch.zeros(model.get_output_embeddings().weight.shape[0], dtype=torch.bool)
    value = ValueModel(copy.deepcopy(model), 2, True)
    separate = GuidedLM(value, model, beta=8.0, min_prob=1e-3).eval()
    shared = GuidedLM(ValueModel(copy.deepcopy(model), 2, True, keep_lm_head=True), None, 8.0, 1e-3).eval()
    unfused = GuidedLM(value, model, beta=8.0, min_prob=1e-3).eval()
    unfused.fused = None
    fast = fast_lm(model)
    rows = []
    for batch_size in batch_sizes:
        prompts = [tok(ep.turns[0].text)["input_ids"] for ep in episodes[:batch_size]]
        ids, attn = (x.to(device) for x in left_pad(prompts, tok.pad_token_id))

        def generate():
            model.generate(input_ids=ids, attention_mask=attn, do_sample=True, top_k=0, max_new_tokens=new_tokens,
                           min_new_tokens=new_tokens, pad_token_id=tok.pad_token_id)

        sample = lambda m: lambda: sample_turns(m, prompts, never_stop, tok.pad_token_id, new_tokens)  # noqa: E731
        runs = {"plain": sample(fast), "guided_separate_trunks": sample(separate),
                "guided_shared_trunk": sample(shared), "hf_generate": generate,
                "plain_hf_forward": sample(model), "guided_separate_hf_forward": sample(unfused)}
        speed = {name: batch_size * new_tokens / statistics.median(timed(fn, repeats, device))
                 for name, fn in runs.items()}
        rows.append({"batch_size": batch_size, "tokens_per_s": speed,
                     "separate_over_plain": speed["guided_separate_trunks"] / speed["plain"],
                     "shared_over_plain": speed["guided_shared_trunk"] / speed["plain"]})
        print(json.dumps(rows[-1]), flush=True)
    return {"new_tokens": new_tokens, "prompt_tokens_mean": statistics.mean(len(tok(ep.turns[0].text)["input_ids"])
                                                                           for ep in episodes[:max(batch_sizes)]),
            "by_batch": rows}


def bench_rollout(model, tok, batch_sizes: list[int], episodes: int) -> dict:
    """Online-RL rollouts on maze FO: `episodes` episodes from random starts, played `batch` envs at
    a time in lockstep (one batched generation per turn; finished episodes leave the batch)."""
    make_env = lambda: MazeEnv(fully_observed=True)  # noqa: E731
    rows = []
    for batch in batch_sizes:
        policy = LMPolicy(model, tok, history_window=1, max_input_tokens=256, max_new_tokens=8, batch_size=batch)
        start, played = time.perf_counter(), []
        for first in range(0, episodes, batch):
            n = min(batch, episodes - first)
            played += run_episodes(policy, make_env, [{}] * n, list(range(first, first + n)), desc=f"rollout b={batch}")
        seconds = time.perf_counter() - start
        steps = sum(ep.num_actions for ep in played)
        tokens = sum(len(tok(t.text)["input_ids"]) for ep in played for t in ep.turns if t.is_action)
        rows.append({"batch_envs": batch, "episodes": len(played), "env_steps": steps, "seconds": seconds,
                     "env_steps_per_s": steps / seconds, "generated_tokens_per_s": tokens / seconds,
                     "mean_return": sum(ep.total_return for ep in played) / len(played)})
        print(json.dumps(rows[-1]), flush=True)
    return {"policy": "tiny model after a short BC run (mostly valid 3-token moves)", "by_batch": rows}


def quick_bc(model, tok, episodes, steps: int, device: torch.device) -> None:
    """A short BC run so rollout benchmarks see realistic actions rather than untrained noise."""
    encode = SegmentEncoder(tok)
    seqs = [s for ep in episodes for s in episode_to_sequences(ep, encode, 1, 512)]
    engine = TorchEngine(device=str(device))
    engine.setup(model, OptimConfig(lr=1e-3, total_steps=steps))
    generator = torch.Generator().manual_seed(0)
    for _ in range(steps):
        idx = torch.randint(len(seqs), (64,), generator=generator).tolist()
        batch = engine.to_device(collate([seqs[i] for i in idx], tok.pad_token_id))
        out = engine.forward(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        engine.backward(bc_loss(out.logits, batch["input_ids"], batch["action_mask"], batch["attention_mask"]))
        engine.step()
    model.eval()


def bench_contention(model, tok, episodes, repeats: int, workers: int = 2) -> dict:
    """A BC step's tokens/s on the CPU while another process keeps one core busy (a spin loop standing for a
    sibling sweep worker or DeepSpeed rank): at torch's default (every core) and at the share `lmrl.threads`
    gives each of `workers` processes; the same two without the busy process for reference."""
    encode = SegmentEncoder(tok)
    seqs = [s for ep in episodes for s in episode_to_sequences(ep, encode, 1, 512)]
    batch = collate(seqs[:64], tok.pad_token_id)
    before = torch.get_num_threads()
    settings = {"torch_default": os.cpu_count() or 1, "lmrl_share": max(1, usable_cores() // workers)}

    def speeds() -> dict:
        return {name: bench_bc_step(copy.deepcopy(model), batch, repeats, None, device="cpu", threads=n)["tokens_per_s"]
                for name, n in settings.items()}

    idle = speeds()
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        loaded = speeds()
    finally:
        busy.kill()
        busy.wait()
    torch.set_num_threads(before)
    return {"threads": settings, "tokens_per_step": int(batch["attention_mask"].sum()),
            "load_average_before": os.getloadavg()[0],  # other work on the machine, for reading the numbers
            "tokens_per_s_one_core_busy": loaded, "tokens_per_s_idle": idle,
            "share_over_default_one_core_busy": loaded["lmrl_share"] / loaded["torch_default"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="auto", help="auto (cuda when present), cpu or cuda")
    parser.add_argument("--out", default=None, help="default: results/bench/foundation[_<device>].json")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--shapes", nargs="+", default=None,
                        help="model shapes LAYERSxWIDTH for the step levers (default: 2x128 on a CPU; "
                             "2x128 12x768 24x1024 on a GPU)")
    parser.add_argument("--budgets", type=int, nargs="+", default=None,
                        help="padded tokens per step (default: 2304 8192 on a CPU; 4096 32768 on a GPU)")
    parser.add_argument("--compile", action="store_true", help="also measure torch.compile at the largest budget")
    parser.add_argument("--peak-tflops", type=float, default=None, help="for MFU (default: 798 on an H100)")
    args = parser.parse_args()
    device = torch.device(args.device if args.device != "auto" else "cuda" if torch.cuda.is_available() else "cpu")
    gpu = device.type == "cuda"
    args.shapes = args.shapes or (["2x128", "12x768", "24x1024"] if gpu else ["2x128"])
    args.budgets = args.budgets or ([4096, 32768] if gpu else [2304, 8192])
    args.peak_tflops = args.peak_tflops or default_peak_tflops(device)
    out = Path(args.out or ("results/bench/foundation.json" if not gpu else "results/bench/foundation_cuda.json"))
    torch.manual_seed(0)
    episodes = list(generate(300, seed=0))
    model, tok = build_tiny(lambda: (t.text for ep in episodes for t in ep.turns))
    result = {
        "machine": {"cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(), "torch": torch.__version__,
                    "python": platform.python_version(), "processor": platform.processor() or platform.machine()},
        "device": {**device_info(device), "peak_tflops": args.peak_tflops},
        "model": {"name": "tiny", "parameters": sum(p.numel() for p in model.parameters())},
        "bc_train_step": bench_train(copy.deepcopy(model), tok, episodes, 64, args.repeats, device),
        "levers": bench_levers(model, tok, episodes, args, device),
    }
    model = model.to(device)
    # an untrained model: most turns are invalid text up to the 8-token budget (the worst case)
    result["eval_untrained_maze_fo"] = bench_eval(model.eval(), tok, episodes_per_start=4)
    result["sampling"] = bench_sampling(model.eval(), tok, episodes, [1, 16, 64, 256], 32, args.repeats, device)
    result["ilql_train_step"] = headline_ilql(result)
    quick_bc(model, tok, episodes, steps=200, device=device)
    result["rollout_maze_fo"] = bench_rollout(model, tok, [1, 16, 64], episodes=64)
    result["contention"] = bench_contention(copy.deepcopy(model).cpu(), tok, episodes, args.repeats)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


def headline_ilql(result: dict) -> dict:
    """The ILQL row of docs/benchmarks.md: the smallest budget's ILQL step at the default precision, vs a BC step."""
    first = [r for r in result["levers"] if r["shape"] == result["levers"][0]["shape"]
             and r["budget"] == result["levers"][0]["budget"] and "fused_adamw" not in r and "compile" not in r]
    bc, ilql = (next(r for r in first if r["step"] == k) for k in ("bc", "ilql"))
    return {**ilql, "cost_vs_bc_step": bc["tokens_per_s"] / ilql["tokens_per_s"]}


if __name__ == "__main__":
    main()
