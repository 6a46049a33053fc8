"""Benchmarks behind `make bench`, each writing JSON under `results/bench/`.

`python -m lmrl.bench` runs them all, each in its own process; `python -m lmrl.bench NAME [ARGS]` runs one
(`python -m lmrl.bench NAME --help` for its options):

- `foundation`: training-step, evaluation, sampling and rollout throughput (`foundation.json`);
- `primitive_cache`: oneDNN's primitive cache capacity vs peak memory and speed on the CPU (`primitive_cache.json`);
- `envs`: every simulator's speed under a random legal policy (`envs.json`);
- `oracles`: dialogue-oracle throughput, or an LM scored as the oracle (`oracles.json`, `oracle_lm_<name>.json`);
- `pretrained`: what SmolLM2-135M-Instruct costs on this CPU (`smollm2.json`);
- `lora`: LoRA against full fine-tuning on a GPT-2-small-shaped model: trainable parameters, peak memory, step
  throughput (`lora.json`);
- `archer`: seconds a round of ArCHer costs on each task, and the table's 40 rounds projected (`archer.json`).
"""

# in the order `python -m lmrl.bench` runs them
BENCHMARKS = ("foundation", "primitive_cache", "envs", "oracles", "pretrained", "lora", "archer")
