"""`python -m lmrl.bench` (`make bench`): throughput numbers the README quotes, as JSON.

Measures, for the tiny model on maze FO data: BC training tokens/s (forward + backward +
optimizer step) and evaluation throughput (batched turn generation with a KV cache, env
steps/s over full episodes).  Writes `results/bench/foundation.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch

from data_gen.maze import generate
from lmrl.algos.bc import bc_loss
from lmrl.data.tokenize import SegmentEncoder, collate, episode_to_sequences
from lmrl.dist import OptimConfig, TorchEngine
from lmrl.envs.maze import MazeEnv
from lmrl.models.factory import build_tiny
from lmrl.rollout.evaluate import protocol, run_episodes
from lmrl.rollout.policy import LMPolicy


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
        "bc_train_step": bench_train(model, tok, episodes, batch_size=64, repeats=args.repeats),
        # an untrained model: most turns are invalid text up to the 8-token budget (the worst case)
        "eval_untrained_maze_fo": bench_eval(model.eval(), tok, episodes_per_start=4),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
