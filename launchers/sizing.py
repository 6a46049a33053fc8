"""What an experiment's cells cost before they run: the table `python -m launchers.sweep ... --dry-run` prints.

Per cell (a row per task x algorithm; seeds cost the same) and in total: tokens per epoch of the cell's
training data, training FLOPs, GPU-hours at a stated utilisation and peak, and peak memory per process
for the cell's hardware (`lmrl/scaling.py` holds the arithmetic and its conventions).

Token statistics come from a sample of each dataset — its first `--plan-sample` episodes (256), made by
the dataset's own recipe (every generator is deterministic per episode index, so they are the full
dataset's first episodes) — tokenized as the cell's model would (`model=tiny`: a BPE trained on the
sample; a pretrained model: its own tokenizer when it is on this machine, else `CHARS_PER_TOKEN`,
GPT-2's measured ratios), cut into training sequences and rollout prompts by the trainers' own code,
and scaled to the recipe's episode count.  A sample's per-segment token counts are cached as
`<cache_dir>/plan/<task>/<recipe key>-<model key>.json` (keyed like the datasets), so a second dry run
is instant.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import textwrap
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import OmegaConf

from lmrl import scaling
from lmrl.algos.base import ConfigError, typed_config
from lmrl.algos.bc import BCConfig, BCTrainer, stage_fields
from lmrl.data.importers import load_episodes
from lmrl.data.parquet import is_parquet, num_episodes
from lmrl.data.tokenize import episode_to_chain, has_decision
from lmrl.envs.base import Episode, Text
from lmrl.rollout.policy import prompt_ids
from lmrl.task import OUTPUT_NEUTRAL, recipe_key
from lmrl.utils import atomic_write_text

# The trainer whose runs publish their weights as the BC stage of their config (`BCTrainer.publish`).
BC_PUBLISHER = f"{BCTrainer.__module__}.{BCTrainer.__qualname__}"

SAMPLE_EPISODES = 256
# Characters per token of GPT-2's BPE on each task's text, for a pretrained model whose tokenizer is not on
# this machine (model=gpt2 offline).  Measured with GPT-2's own vocab.json and merges.txt (the hash-pinned
# copy tests/test_gpt2_shape.py fetches) on the first 256 episodes of each task's default dataset, segment
# by segment: `python -m launchers.sizing --gpt2-bpe <dir>`.  A segment then counts max(1, round(chars /
# ratio)) tokens, within 3.2% of the tokenizer's total on every task (Twenty Questions -3.2%, others <= 1.6%).
CHARS_PER_TOKEN = {"maze_fo": 3.739, "maze_po": 3.650, "wordle": 1.688, "text_nav_fo": 3.853,
                   "text_nav_po": 3.832, "twenty_questions": 2.761, "guess": 3.816, "car_dealer": 3.338,
                   "endgames": 1.664, "chess": 1.784}
DEFAULT_CHARS_PER_TOKEN = 3.0
# (layers, width, heads) of the published GPT-2 checkpoints (vocabulary 50257, context 1024): their shape
# without their config file, which offline machines do not have.
GPT2_SHAPES = {"gpt2": (12, 768, 12), "gpt2-medium": (24, 1024, 16), "gpt2-large": (36, 1280, 20),
               "gpt2-xl": (48, 1600, 25)}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("cost table (--dry-run)")
    group.add_argument("--mfu", type=float, help="model-FLOPs utilisation (default: lmrl's measured H100 figure for "
                       "the cell's precision: bf16 0.14, fp32 0.047)")
    group.add_argument("--target-mfu", type=float, default=scaling.TARGET_UTILISATION,
                       help="a second utilisation column (default 0.40)")
    group.add_argument("--peak-tflops", type=float, default=scaling.H100_PEAK_TFLOPS,
                       help="the GPU's peak (default: 798, an H100's measured bf16 matmul peak)")
    group.add_argument("--gpu-mem-gb", type=float, default=80.0, help="flag cells whose peak exceeds this")
    group.add_argument("--plan-sample", type=int, default=SAMPLE_EPISODES, help="episodes sampled per dataset")
    group.add_argument("--no-costs", action="store_true", help="list the cells only")


# -- the model ---------------------------------------------------------------------------------------
def target_name(node) -> str:
    return str(node["_target_"]).rsplit(".", 1)[-1]


def on_this_machine(path: str) -> bool:
    """A local directory, or a hub id whose files the local Hugging Face cache holds."""
    if Path(path).exists():
        return True
    from huggingface_hub import try_to_load_from_cache

    try:
        return isinstance(try_to_load_from_cache(path, "config.json"), str)
    except ValueError:  # not a valid hub id
        return False


def pretrained_source(model: dict) -> tuple[str, dict]:
    """(path, from_pretrained keyword arguments) of a `load_pretrained` model config, offline only."""
    from lmrl.models.resolve import LMSpec, resolve_model

    path, gguf = resolve_model(LMSpec(model=model["path"], gguf_file=model.get("gguf_file")))
    return path, {"local_files_only": True, **({"gguf_file": gguf} if gguf else {})}


@lru_cache(maxsize=None)
def model_shape(model_json: str) -> tuple[scaling.ModelShape | None, str]:
    """The model's counts and where they came from; (None, reason) for no local model."""
    from transformers import AutoConfig, GPT2Config

    model = json.loads(model_json)
    kind = target_name(model)
    if kind == "no_model":
        return None, "no local model"
    if kind == "build_tiny":
        config = GPT2Config(vocab_size=model["vocab_size"], n_layer=model["n_layer"], n_embd=model["n_embd"],
                            n_head=model["n_head"], n_positions=model["n_positions"], bos_token_id=0, eos_token_id=0)
        return scaling.shape_of(config), "its config"
    path, kwargs = pretrained_source(model)
    if on_this_machine(path):
        return scaling.shape_of(AutoConfig.from_pretrained(path, **kwargs)), f"{path}'s config"
    if model["path"] in GPT2_SHAPES:
        layers, width, heads = GPT2_SHAPES[model["path"]]
        return scaling.shape_of(GPT2Config(n_layer=layers, n_embd=width, n_head=heads)), "GPT-2's published shape"
    raise ValueError(f"model {model['path']!r}: no config on this machine (give model.path=<local dir>)")


# -- the data sample ---------------------------------------------------------------------------------
def sample_source(task_cfg, n: int) -> tuple[dict, float]:
    """The recipe of the dataset's first `n` episodes (one worker: the same episodes), and the dataset's size."""
    recipe = OmegaConf.to_container(task_cfg.data.recipe, resolve=True)
    size = float(recipe["episodes"])
    recipe["episodes"] = min(n, int(size))
    if "workers" in recipe:
        recipe["workers"] = 1
    return recipe, size


def count_lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))


def sample_episodes(task_cfg, n: int) -> tuple[list[Episode], float]:
    """The first `n` episodes of the task's dataset and its size (a given `data.path`: one episode a line)."""
    if task_cfg.data.path:
        path = Path(task_cfg.data.path)
        return list(itertools.islice(load_episodes(path, task_cfg.data.format), n)), float(num_episodes(path) if is_parquet(path) else count_lines(path))
    recipe, size = sample_source(task_cfg, n)
    return list(instantiate(recipe)), size


def counting(model: dict, task: str) -> str:
    """How a sample's segments are counted: "tiny" (a BPE trained on the sample), "pretrained" (the model's
    tokenizer is on this machine) or "ratio:<chars per token>"."""
    kind = target_name(model)
    if kind == "build_tiny":
        return "tiny"
    if kind == "load_pretrained" and on_this_machine(pretrained_source(model)[0]):
        return "pretrained"
    return f"ratio:{CHARS_PER_TOKEN.get(task, DEFAULT_CHARS_PER_TOKEN)}"


def segment_counter(model: dict, task: str, texts: list[str]):
    """(text -> token count, what it is), by `counting`."""
    method = counting(model, task)
    if method.startswith("ratio:"):
        ratio = float(method.removeprefix("ratio:"))
        return (lambda text: max(1, round(len(text) / ratio)) if text else 0), f"{ratio} chars/token"
    if method == "tiny":
        from lmrl.models.factory import train_tokenizer

        tokenizer = train_tokenizer(texts, model["vocab_size"])
        label = f"BPE-{model['vocab_size']} trained on the sample"
    else:
        from transformers import AutoTokenizer

        path, kwargs = pretrained_source(model)
        tokenizer, label = AutoTokenizer.from_pretrained(path, **kwargs), f"{model['name']}'s tokenizer"
    # task text repeats a lot: each distinct segment is tokenized once
    return lru_cache(maxsize=1 << 16)(lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"])), label


def profile_path(cfg, n: int) -> Path:
    """Keyed like the dataset (its recipe, generator sources) plus the model and how its tokens are counted."""
    if cfg.task.data.path:
        stat = Path(cfg.task.data.path).stat()
        data_key = hashlib.sha256(f"{cfg.task.data.path}:{stat.st_size}:{stat.st_mtime}".encode()).hexdigest()[:12]
    else:
        data_key = recipe_key(OmegaConf.create(sample_source(cfg.task, n)[0]))
    model = OmegaConf.to_container(cfg.model, resolve=True)
    model_key = hashlib.sha256(json.dumps([model, counting(model, cfg.task.name)], sort_keys=True).encode())
    return Path(cfg.cache_dir) / "plan" / cfg.task.name / f"{data_key}-{model_key.hexdigest()[:8]}.json"


def segment_profile(cfg, n: int) -> Path:
    """The file of the sample's per-segment token counts, the dataset's size and the tokenizer used."""
    path = profile_path(cfg, n)
    if path.exists():
        return path
    episodes, size = sample_episodes(cfg.task, n)
    model = OmegaConf.to_container(cfg.model, resolve=True)
    count, label = segment_counter(model, cfg.task.name, [t.text for ep in episodes for t in ep.turns])
    doc = {"tokenizer": label, "dataset_episodes": size,
           "episodes": [[ep.total_return, [[count(t.text), t.is_action] for t in ep.turns]] for ep in episodes]}
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(doc))
    return path


@lru_cache(maxsize=None)
def sample_tokens(path: Path, window: int | None, context: int, max_prompt: int, moves: int = 1):
    """(sample as the trainers cut it, dataset size, tokenizer): read once per run for all of a task's cells."""
    doc = json.loads(path.read_text())
    sample = tuple(episode_tokens(ret, turns, window, context, max_prompt, moves) for ret, turns in doc["episodes"])
    return sample, doc["dataset_episodes"], doc["tokenizer"]


def episode_tokens(ret: float, turns: list, window: int | None, context: int, max_prompt: int,
                   moves: int = 1) -> scaling.EpisodeTokens:
    """The trainers' and the sampler's own tokenization code run on token counts: a segment's text is its
    index and the encoder returns that many ids, so windows (of `moves` actions each: `task.moves_per_sequence`),
    truncation and next states are exactly theirs."""
    counts = [n for n, _ in turns]
    encode = lambda text: (0,) * counts[int(text)]  # noqa: E731
    segments = [Text(str(i), bool(action)) for i, (_, action) in enumerate(turns)]
    chain = [s for s in episode_to_chain(Episode(segments, [0.0] * len(segments), True, {}), encode, window, context,
                                         1.0, moves) if has_decision(s)]
    actions = [i for i, t in enumerate(segments) if t.is_action]
    return scaling.EpisodeTokens(
        ret, tuple(len(s) for s in chain), tuple(len(s.next_state) if s.next_state is not None else 0 for s in chain),
        tuple(len(prompt_ids(segments[:i], window, encode, max_prompt)) for i in actions),
        tuple(counts[i] for i in actions))


# -- a cell ------------------------------------------------------------------------------------------
@dataclass
class CellCost:
    """What one (task, algo) cell costs: its training stages (FLOPs, tokens, memory by component), model shape and
    hardware, and the sweep's cells it stands for (one per seed)."""

    task: str
    algo: str
    stages: list[scaling.Stage]
    shape: scaling.ModelShape | None
    hardware: scaling.Hardware
    tokenizer: str = ""
    cells: list = field(default_factory=list)  # the sweep's cells with this cost (one per seed)
    error: str = ""  # why it could not be costed (the row says n/a; the cells are still listed)

    @property
    def flops(self) -> float:
        """Training FLOPs of all the cell's stages."""
        return sum(sum(s.flops.values()) for s in self.stages)

    @property
    def bc_stage(self) -> scaling.Stage | None:
        """The BC stage an RL cell trains first (cached: cells sharing it train it once)."""
        return next((s for s in self.stages if s.name == "bc_stage"), None)


def hardware(cfg, spec: dict, launcher: str) -> scaling.Hardware:
    """The cell's engine settings; processes per cell: Slurm's GPUs per node (one task each), else 1."""
    engine = cfg.hardware.engine
    deepspeed = target_name(engine) == "DeepSpeedEngine"
    world = int((spec.get("slurm") or {}).get("gpus_per_node") or 1) if launcher == "slurm" else 1
    # the plan sizes GPUs (an H100 by default), where precision=auto is bf16
    precision = "bf16" if str(engine.precision) == "auto" else str(engine.precision)
    return scaling.Hardware(deepspeed, int(engine.stage) if deepspeed else 0, precision, world,
                            bool(engine.get("offload_optimizer")), bool(engine.get("offload_param")))


def cell_cost(cfg, spec: dict, launcher: str, n: int) -> CellCost:
    """The cost of a cell from its composed config: the model's shape, a tokenized sample of its dataset (`n` episodes),
    and `lmrl.scaling.stages` for its algorithm and hardware."""
    algo, hw = OmegaConf.to_container(cfg.algo, resolve=True), hardware(cfg, spec, launcher)
    shape, _ = model_shape(json.dumps(OmegaConf.to_container(cfg.model, resolve=True), sort_keys=True))
    if shape is None:
        return CellCost(cfg.task.name, cfg.algo.name, [], None, hw)
    ev = cfg.task.eval
    max_prompt = min(int(ev.max_input_tokens), shape.context - int(ev.max_new_tokens))  # as LMPolicy truncates
    sample, size, tokenizer = sample_tokens(segment_profile(cfg, n), cfg.task.history_window, shape.context,
                                            max_prompt, int(cfg.task.get("moves_per_sequence", 1)))
    gen = scaling.Generation(int(ev.batch_size), max(p for e in sample for p in e.prompts), int(ev.max_new_tokens))
    stages = scaling.stages(target_name(cfg.algo), shape, scaling.TaskTokens(sample, size), algo, hw, gen)
    return CellCost(cfg.task.name, cfg.algo.name, stages, shape, hw, tokenizer)


def bc_stage_of(cfg) -> str | None:
    """The BC stage a cell publishes (a plain BC cell: its weights are the stage of its config) or starts from (an
    RL cell's `algo.bc`, unless `init_from` names other weights), as far as its config names it: task, seed, data
    recipe and path, model, BC config but `log_every`, window, precision -- what `lmrl.algos.bc.bc_stage_key` is made
    of, its vocabulary and full model config being fixed by these.  Cells with the same value share one cached stage:
    the sweep starts them after their BC cell, the cost report counts it once.  None: the cell has none."""
    algo = cfg.algo
    if algo.get("_target_") == BC_PUBLISHER:
        bc = algo
    elif "bc" in algo and not algo.get("init_from"):
        bc = algo.bc
    else:
        return None
    try:
        bc = stage_fields(typed_config(BCConfig, bc))
    except ConfigError:  # the cell's own run fails with the reason, into its record; here it shares nothing
        return None
    recipe = OmegaConf.to_container(cfg.task.data.recipe, resolve=True)
    key = {"task": cfg.task.name, "seed": cfg.seed, "bc": bc,
           "model": OmegaConf.to_container(cfg.model, resolve=True),
           "data": {k: v for k, v in recipe.items() if k not in OUTPUT_NEUTRAL}, "path": cfg.task.data.get("path"),
           "window": cfg.task.get("moves_per_sequence", 1), "precision": cfg.hardware.engine.get("precision")}
    return json.dumps(key, sort_keys=True, default=str)


def sweep_costs(sweep, launcher: str, n: int) -> list[CellCost]:
    """One cost per (task, algo) of the sweep (every seed costs the same), holding its cells."""
    costs: dict[tuple[str, str], CellCost] = {}
    for cell in sweep.cells:
        key = (cell.task, cell.algo)
        if key not in costs:
            cfg = sweep.configs[cell.name]
            try:
                costs[key] = cell_cost(cfg, sweep.spec, launcher, n)
            except Exception as err:  # noqa: BLE001 - a dry run still lists the plan; the reason is printed
                costs[key] = CellCost(cell.task, cell.algo, [], None, hardware(cfg, sweep.spec, launcher),
                                      error=f"{type(err).__name__}: {err}")
        costs[key].cells.append(cell)
    order = lambda c: (index(sweep.spec["tasks"], c.task), index(sweep.spec["algos"], c.algo))  # noqa: E731
    return sorted(costs.values(), key=order)


def index(items: list, item) -> int:
    return items.index(item) if item in items else len(items)


# -- the table ---------------------------------------------------------------------------------------
def human(x: float | None) -> str:
    if x is None:
        return "-"
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= size:
            return f"{x / size:.3g}{unit}"
    return f"{x:.3g}"


def figure(x: float) -> str:
    """3 significant digits, without an exponent up to 10^6."""
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.3g}"


def utilisation(args, hw: scaling.Hardware) -> float:
    return args.mfu if args.mfu else scaling.MEASURED_UTILISATION[hw.precision]


MEMORY_COLUMNS = {"state": ("weights", "grads", "optimizer"), "frozen": ("frozen", "actor_replica", "bc_policy"),
                  "activ": ("activations",), "logits": ("logits",), "kv": ("kv_cache",)}
HEADER = ["task", "algo", "cells", "N", "tok/epoch", "epochs", "trained tok", "PFLOP", "GPU-h", "GPU-h@tgt",
          "state", "frozen", "activ", "logits", "kv", "peak GB", "at"]


def row(cost: CellCost, args) -> list[str]:
    """Per-cell figures; memory in GB per process at the cell's peak (the phase that needs most)."""
    final, top = (cost.stages[-1] if cost.stages else None), scaling.peak_stage(cost.stages)
    memory = top.memory if top else {}
    gb = {col: sum(memory.get(k, 0.0) for k in keys) / 1e9 for col, keys in MEMORY_COLUMNS.items()}
    peak = sum(memory.values()) / 1e9
    flag = "!" if peak > args.gpu_mem_gb else ""
    if cost.error:
        return [cost.task, cost.algo, str(len(cost.cells)), *["n/a"] * (len(HEADER) - 3)]
    return [cost.task, cost.algo, str(len(cost.cells)), human(cost.shape.params) if cost.shape else "-",
            human(final.data_tokens) if final else "-",
            f"{final.epochs:.3g}" if final and final.epochs is not None else "-",
            human(sum(s.tokens for s in cost.stages)), figure(cost.flops / 1e15),
            figure(scaling.gpu_hours(cost.flops, utilisation(args, cost.hardware), args.peak_tflops)),
            figure(scaling.gpu_hours(cost.flops, args.target_mfu, args.peak_tflops)),
            *(f"{gb[c]:.2f}" for c in MEMORY_COLUMNS), f"{peak:.2f}{flag}",
            f"{top.name}/{top.peak_phase}" if top else "-"]


def cell_share(cost: CellCost, cell, sweep, seen: set) -> tuple[float, float]:
    """A cell's (FLOPs, trained tokens), less its BC stage when an earlier cell trains the same one."""
    stage, tokens = cost.bc_stage, sum(s.tokens for s in cost.stages)
    if stage is None:
        return cost.flops, tokens
    key = bc_stage_of(sweep.configs[cell.name])
    shared = key in seen
    seen.add(key)
    return (cost.flops - sum(stage.flops.values()), tokens - stage.tokens) if shared else (cost.flops, tokens)


def totals(costs: list[CellCost], sweep, args) -> dict:
    """Sums over every cell, each shared BC stage counted once; the part still to run; the largest peak."""
    seen: set = set()
    out = {"cells": 0, "tokens": 0.0, "flops": 0.0, "hours": 0.0, "target": 0.0, "todo_hours": 0.0, "peak": 0.0}
    for cost in costs:
        for cell in cost.cells:
            flops, tokens = cell_share(cost, cell, sweep, seen)
            hours = scaling.gpu_hours(flops, utilisation(args, cost.hardware), args.peak_tflops)
            out["cells"], out["tokens"], out["flops"], out["hours"] = (out["cells"] + 1, out["tokens"] + tokens,
                                                                       out["flops"] + flops, out["hours"] + hours)
            out["target"] += scaling.gpu_hours(flops, args.target_mfu, args.peak_tflops)
            out["todo_hours"] += 0.0 if cell.done else hours
        top = scaling.peak_stage(cost.stages)
        out["peak"] = max(out["peak"], sum(top.memory.values()) / 1e9 if top else 0.0)
    return out


def table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def assumptions(costs: list[CellCost], args) -> str:
    hws = sorted({f"{'ZeRO-' + str(c.hardware.stage) if c.hardware.deepspeed else 'torch'} {c.hardware.precision}"
                  f" x{c.hardware.world} process(es)" for c in costs if c.shape})
    util = f"{args.mfu:.0%}" if args.mfu else "lmrl's measured H100 utilisation (bf16 14%, fp32 4.7%)"
    notes = [f"hardware per cell: {', '.join(hws)}",
             f"GPU-h = FLOPs / (utilisation x {args.peak_tflops:g} TFLOP/s) at {util}; GPU-h@tgt at "
             f"{args.target_mfu:.0%}; a BC stage the RL cells of a (task, seed) share is counted once in the total",
             f"tokens: the first {args.plan_sample} episodes of each dataset, scaled to its size; tokenized with "
             + ", ".join(sorted({f"{c.task} {c.tokenizer}" for c in costs if c.tokenizer}))
             + " (chars/token: GPT-2's BPE measured on the task's data, for a tokenizer not on this machine)",
             "memory, GB per process at the stage/phase in `at`, a batch padded to the sample's longest sequence: "
             "state = weights + grads + AdamW (ZeRO-sharded); frozen = ILQL target, the reference of PPO, group PG and "
             "SWEET-RL, the BC policy at evaluation, SWEET-RL's sampler and critics, ZeRO-3's rollout replica; activ = "
             "34 B x tokens x width x layers (16-bit activations, x2 in fp32); logits = fp32 [B, T, V] tensors; "
             "kv = generation's KV cache"]
    return "\n".join(textwrap.fill(n, 118, initial_indent="- ", subsequent_indent="  ") for n in notes)


def report(sweep, args, launcher: str) -> str:
    """The dry run's cost table for a sweep: one row per (task, algo), the total, what is still to run, and the
    assumptions behind the figures."""
    costs = sweep_costs(sweep, launcher, args.plan_sample)
    t = totals(costs, sweep, args)
    total = ["total", "", str(t["cells"]), "", "", "", human(t["tokens"]), figure(t["flops"] / 1e15),
             figure(t["hours"]), figure(t["target"]), "", "", "", "", "", f"{t['peak']:.2f}", ""]
    lines = [table([HEADER, *(row(c, args) for c in costs), total]),
             f"still to run: {figure(t['todo_hours'])} GPU-h at the measured utilisation "
             f"({sum(not c.done for c in sweep.cells)} cells)",
             *(f"n/a {c.task}/{c.algo}: {c.error[-300:]}" for c in costs if c.error), assumptions(costs, args)]
    return "\n".join(lines)


def chars_per_token(texts: list[str], count) -> float:
    """Characters per token of `texts` tokenized one segment at a time (how CHARS_PER_TOKEN was measured)."""
    return sum(map(len, texts)) / max(sum(map(count, texts)), 1)


def main(argv: list[str] | None = None) -> None:
    """Re-measure CHARS_PER_TOKEN: GPT-2's BPE (a directory with its vocab.json and merges.txt) on the first
    episodes of each task's default dataset."""
    from hydra import compose, initialize_config_dir
    from transformers import GPT2Tokenizer

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--gpt2-bpe", type=Path, required=True, help="directory with vocab.json and merges.txt")
    parser.add_argument("--episodes", type=int, default=SAMPLE_EPISODES)
    args = parser.parse_args(argv)
    tokenizer = GPT2Tokenizer(vocab=str(args.gpt2_bpe / "vocab.json"), merges=str(args.gpt2_bpe / "merges.txt"))
    count = lru_cache(maxsize=1 << 16)(lambda text: len(tokenizer(text)["input_ids"]))
    conf = Path(__file__).resolve().parent.parent / "conf"
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        for task in CHARS_PER_TOKEN:
            texts = [t.text for ep in sample_episodes(compose("train", [f"task={task}"]).task, args.episodes)[0]
                     for t in ep.turns]
            estimate = sum(max(1, round(len(t) / chars_per_token(texts, count))) if t else 0 for t in texts)
            print(f"{task:18s} {chars_per_token(texts, count):.3f} chars/token; per-segment estimate "
                  f"{estimate / sum(map(count, texts)) - 1:+.1%} of the tokenizer's total")


if __name__ == "__main__":
    main()
