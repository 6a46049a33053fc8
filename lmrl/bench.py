"""`python -m lmrl.bench` (`make bench`): throughput numbers the README quotes, as JSON.

Measures, for the tiny model on maze FO data: BC and ILQL training tokens/s (forward +
backward + optimizer step), evaluation throughput (batched turns with a KV cache, env
steps/s over full episodes), sampling tokens/s of plain vs value-guided sampling (separate and
shared trunks) vs Hugging Face `generate` on the same model, batch, prompts and lengths, and
online-RL rollout throughput (env steps/s, generated tokens/s) at 1, 16 and 64 envs in lockstep.
Writes `results/bench/foundation.json`.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch

from data_gen.maze import generate
from lmrl.algos.bc import bc_loss
from lmrl.algos.value_rl import ILQLConfig, ILQLTrainer
from lmrl.data.tokenize import SegmentEncoder, collate, episode_to_chain, episode_to_sequences
from lmrl.dist import OptimConfig, TorchEngine
from lmrl.envs.maze import MazeEnv
from lmrl.models.factory import build_tiny
from lmrl.models.fused import fast_lm
from lmrl.models.value import GuidedLM, ValueModel
from lmrl.rollout.evaluate import protocol, run_episodes
from lmrl.rollout.policy import LMPolicy
from lmrl.rollout.sampler import left_pad, sample_turns


def timed(fn, repeats: int) -> list[float]:
    fn()  # warm-up
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def bench_train(model, tok, episodes, batch_size: int, repeats: int) -> dict:
    encode = SegmentEncoder(tok)
    seqs = [s for ep in episodes for s in episode_to_sequences(ep, encode, 1, 512)][: batch_size * 4]
    batch = collate(seqs[:batch_size], tok.pad_token_id)
    engine = TorchEngine()
    engine.setup(model, OptimConfig(lr=1e-3, total_steps=1000))

    def step():
        out = engine.forward(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        engine.backward(bc_loss(out.logits, batch["input_ids"], batch["action_mask"], batch["attention_mask"]))
        engine.step()

    times = timed(step, repeats)
    tokens = int(batch["attention_mask"].sum())
    return {"batch_size": batch_size, "tokens_per_step": tokens, "step_seconds_median": statistics.median(times),
            "tokens_per_s": tokens / statistics.median(times)}


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


def bench_sampling(model, tok, episodes, batch_sizes: list[int], new_tokens: int, repeats: int) -> dict:
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
        ids, attn = left_pad(prompts, tok.pad_token_id)

        def generate():
            model.generate(input_ids=ids, attention_mask=attn, do_sample=True, top_k=0, max_new_tokens=new_tokens,
                           min_new_tokens=new_tokens, pad_token_id=tok.pad_token_id)

        sample = lambda m: lambda: sample_turns(m, prompts, never_stop, tok.pad_token_id, new_tokens)  # noqa: E731
        runs = {"plain": sample(fast), "guided_separate_trunks": sample(separate),
                "guided_shared_trunk": sample(shared), "hf_generate": generate,
                "plain_hf_forward": sample(model), "guided_separate_hf_forward": sample(unfused)}
        speed = {name: batch_size * new_tokens / statistics.median(timed(fn, repeats)) for name, fn in runs.items()}
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


def quick_bc(model, tok, episodes, steps: int) -> None:
    """A short BC run so rollout benchmarks see realistic actions rather than untrained noise."""
    encode = SegmentEncoder(tok)
    seqs = [s for ep in episodes for s in episode_to_sequences(ep, encode, 1, 512)]
    engine = TorchEngine()
    engine.setup(model, OptimConfig(lr=1e-3, total_steps=steps))
    generator = torch.Generator().manual_seed(0)
    for _ in range(steps):
        idx = torch.randint(len(seqs), (64,), generator=generator).tolist()
        batch = collate([seqs[i] for i in idx], tok.pad_token_id)
        out = engine.forward(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        engine.backward(bc_loss(out.logits, batch["input_ids"], batch["action_mask"], batch["attention_mask"]))
        engine.step()
    model.eval()


def bench_ilql_step(model, tok, episodes, batch_size: int, repeats: int, bc_tokens_per_s: float) -> dict:
    """One ILQL optimizer step (value fwd/bwd + target fwd + next-state V + Polyak) vs a BC step."""
    trainer = ILQLTrainer.__new__(ILQLTrainer)
    trainer.cfg, trainer.tokenizer = ILQLConfig(), tok
    trainer.value = ValueModel(copy.deepcopy(model), 2, True)
    trainer.target = copy.deepcopy(trainer.value).requires_grad_(False)
    trainer.engine = TorchEngine()
    trainer.engine.setup(trainer.value, OptimConfig(lr=1e-3, total_steps=1000))
    encode = SegmentEncoder(tok)
    seqs = [s for ep in episodes for s in episode_to_chain(ep, encode, 1, 512, 0.99)][:batch_size]
    batch = collate(seqs, tok.pad_token_id)

    def step():
        loss, _ = trainer.loss(batch)
        trainer.engine.backward(loss)
        trainer.engine.step()
        trainer.after_step()

    seconds = statistics.median(timed(step, repeats))
    tokens = int(batch["attention_mask"].sum())
    return {"batch_size": batch_size, "step_seconds_median": seconds, "tokens_per_s": tokens / seconds,
            "cost_vs_bc_step": bc_tokens_per_s / (tokens / seconds)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="results/bench/foundation.json")
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    torch.manual_seed(0)
    episodes = list(generate(300, seed=0))
    model, tok = build_tiny(lambda: (t.text for ep in episodes for t in ep.turns))
    result = {
        "machine": {"cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(), "torch": torch.__version__,
                    "python": platform.python_version(), "processor": platform.processor() or platform.machine()},
        "model": {"name": "tiny", "parameters": sum(p.numel() for p in model.parameters())},
        "bc_train_step": bench_train(copy.deepcopy(model), tok, episodes, batch_size=64, repeats=args.repeats),
        # an untrained model: most turns are invalid text up to the 8-token budget (the worst case)
        "eval_untrained_maze_fo": bench_eval(model.eval(), tok, episodes_per_start=4),
        "sampling": bench_sampling(model.eval(), tok, episodes, [1, 16, 64, 256], new_tokens=32, repeats=args.repeats),
    }
    result["ilql_train_step"] = bench_ilql_step(model, tok, episodes, 64, args.repeats,
                                                result["bc_train_step"]["tokens_per_s"])
    quick_bc(model, tok, episodes, steps=200)
    result["rollout_maze_fo"] = bench_rollout(model, tok, [1, 16, 64], episodes=64)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
