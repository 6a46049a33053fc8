"""Compute and memory of a training run, from its config and its data's token statistics.

The arithmetic behind `python -m launchers.sweep experiment=<name> --dry-run` (launchers/sizing.py
gathers the inputs: model shape, a dataset sample's token lengths, the hardware).  Conventions, those
of `make bench` and the measured H100 figures (../shared/gpu/README.md), so utilisations carry over:

- FLOPs: 2 per multiply-accumulate of every weight a token passes through (embedding lookups are
  free, attention scores are left out, as in the 6·N·tokens rule).  A trained pass (forward +
  backward) costs 6 per weight and token, a forward alone 2.
- Tokens are padded tokens: `collate` pads a batch to its longest sequence, and padding costs compute.
- Memory is per process, on the device, at the peak of a stage: the model state (weights, gradients,
  AdamW) sharded per ZeRO stage, frozen models, and the largest of the stage's phases (a training
  step's activations and vocabulary-sized tensors, PPO's scoring pass, generation's KV cache).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

FP32 = 4
# Utilisation lmrl measured on an H100 at a large step (12x768 GPT-2, 1,024 maze sequences = 36.8k tokens,
# TorchEngine): 205k tokens/s in bf16 = 14% of the 798 TFLOP/s bf16 matmul peak; 69k tokens/s in fp32, the
# same convention against the same peak (../shared/gpu/README.md, 2026-11-24).
H100_PEAK_TFLOPS = 798.0
MEASURED_UTILISATION = {"bf16": 0.14, "fp16": 0.14, "fp32": 0.14 * 69 / 205}
TARGET_UTILISATION = 0.40
# Activation bytes per token, hidden unit and layer of a GPT-2 block kept for backward with 16-bit
# activations: 34 (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
# Models", eq. 1, without its 5·a·s/h attention-score term: SDPA attention never stores the scores).
ACTIVATION_BYTES_16BIT = 34


# -- model -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelShape:
    """A causal LM's parameter counts and sizes, as `shape_of` reads them from its config."""

    params: int  # every parameter once (a tied LM head counts once)
    body: int  # transformer blocks + final norm: what every token's forward multiplies by
    d: int  # hidden size
    vocab: int
    layers: int
    context: int

    @property
    def lm(self) -> int:
        """N of 6·N·tokens for a full LM forward: the body plus the LM head (d x V, tied or not)."""
        return self.body + self.d * self.vocab

    @property
    def q_head(self) -> int:
        """A Q head, d -> d -> |V| (lmrl/models/value.py `MLPHead`)."""
        return self.d * self.d + self.d + self.d * self.vocab + self.vocab

    @property
    def v_head(self) -> int:
        """The V head, d -> d -> 1."""
        return self.d * self.d + 2 * self.d + 1


def shape_of(config) -> ModelShape:
    """Counts of a Hugging Face causal-LM config, from the model built on the `meta` device (no weights)."""
    import torch
    from transformers import AutoModelForCausalLM

    from lmrl.models.factory import model_max_length

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    params = sum(p.numel() for p in model.parameters())
    lookups = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Embedding))
    head = model.get_output_embeddings()
    untied = 0 if head.weight is model.get_input_embeddings().weight else sum(p.numel() for p in head.parameters())
    return ModelShape(params, params - lookups - untied, config.hidden_size, head.weight.shape[0],
                      config.num_hidden_layers, model_max_length(model))


# -- data --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EpisodeTokens:
    """One episode as the trainers see it: its return; the token lengths of its training sequences
    and of each one's next-link state (windowed tasks; 0 = none); per action, the rollout prompt's
    tokens (the history window, truncated as the sampler does) and the action's tokens."""

    ret: float
    seqs: tuple[int, ...]
    nexts: tuple[int, ...]
    prompts: tuple[int, ...]
    actions: tuple[int, ...]


@dataclass(frozen=True)
class TaskTokens:
    """A sample of a dataset's episodes standing for `dataset_episodes` of them."""

    sample: tuple[EpisodeTokens, ...]
    dataset_episodes: float

    def per_episode(self, key: Callable[[EpisodeTokens], float]) -> float:
        """The mean of `key` over the sample's episodes."""
        return sum(map(key, self.sample)) / max(len(self.sample), 1)

    @property
    def sequences(self) -> float:
        """Training sequences in the whole dataset (the sample's mean per episode, scaled)."""
        return self.dataset_episodes * self.per_episode(lambda e: len(e.seqs))

    @property
    def tokens(self) -> float:
        """Tokens of one epoch over the training sequences."""
        return self.dataset_episodes * self.per_episode(lambda e: sum(e.seqs))

    @property
    def lengths(self) -> list[int]:
        """Token lengths of every training sequence of the sample."""
        return [n for e in self.sample for n in e.seqs]

    @property
    def next_lengths(self) -> list[int]:
        """Next-state lengths as `_collate_next_states` pads them (a sequence without one holds 1 pad)."""
        return [max(n, 1) for e in self.sample for n in e.nexts]

    @property
    def windowed(self) -> bool:
        """Whether the task's sequences link to a next window (windowed tasks: ILQL bootstraps across them)."""
        return any(n for e in self.sample for n in e.nexts)

    def top(self, fraction: float) -> "TaskTokens":
        """The episodes %BC keeps: return >= the (1 - fraction) percentile (lmrl/algos/bc.py's rule)."""
        returns = np.array([e.ret for e in self.sample])
        kept = tuple(e for e in self.sample if e.ret >= np.percentile(returns, 100 * (1 - fraction)))
        return TaskTokens(kept, self.dataset_episodes * len(kept) / len(self.sample))


def expected_max(lengths: Sequence[int], k: int) -> float:
    """E[max of k draws] from the empirical distribution of `lengths`: with l_1 <= ... <= l_n,
    P(max = l_i) = (i/n)^k - ((i-1)/n)^k."""
    xs, n = sorted(lengths), len(lengths)
    return sum(x * ((i / n) ** k - ((i - 1) / n) ** k) for i, x in enumerate(xs, 1))


def step_tokens(lengths: Sequence[int], batch: float, world: int = 1) -> float:
    """Padded tokens of one step of `batch` sequences: each process pads its share to the share's longest."""
    share = max(1, math.ceil(batch / world))
    return batch * expected_max(lengths, share)


# -- hardware and memory -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Hardware:
    """The engine a cell runs on, as far as memory and throughput depend on it: DeepSpeed or not, ZeRO stage, precision,
    processes and offloading."""

    deepspeed: bool
    stage: int  # ZeRO stage; 0 = plain torch (one device, or DDP with world > 1)
    precision: str
    world: int
    offload_optimizer: bool = False
    offload_param: bool = False

    @property
    def half(self) -> bool:
        """16-bit weights (DeepSpeed bf16/fp16); torch's bf16 is autocast over fp32 weights."""
        return self.deepspeed and self.precision != "fp32"

    @property
    def activation_bytes(self) -> int:
        """Activation bytes per token, hidden unit and layer that a training step keeps for backward:
        `ACTIVATION_BYTES_16BIT` with bf16 or fp16 activations, twice that in fp32."""
        return ACTIVATION_BYTES_16BIT * (1 if self.precision != "fp32" else 2)


def model_state(params: float, hw: Hardware) -> dict[str, float]:
    """Weights, gradients and AdamW state per process, as the ZeRO paper counts them (Rajbhandari et al.
    2020 §3): 16-bit training holds 2 + 2 bytes of weights and gradients and 12 of fp32 master weights and
    moments; fp32 4 + 4 + 8.  Stage 1 shards the optimizer, 2 the gradients too, 3 the weights too."""
    w, g, o = (2, 2, 12) if hw.half else (4, 4, 8)
    if hw.stage == 0 and hw.world > 1:
        g *= 2  # DDP's gradient buckets hold a second copy
    split = lambda stage: hw.world if hw.stage >= stage else 1  # noqa: E731
    state = {"weights": params * w / split(3), "grads": params * g / split(2), "optimizer": params * o / split(1)}
    host = (state.pop("optimizer") if hw.offload_optimizer else 0) + (state.pop("weights") if hw.offload_param else 0)
    return {**state, "host": host}


def frozen_bytes(params: float, hw: Hardware) -> float:
    """A forward-only model on the device: fp32 replica (`prepare_frozen` moves it as loaded), ZeRO-3 shards it."""
    if hw.stage == 3:
        return params * (2 if hw.half else FP32) / hw.world
    return params * FP32


def train_phase(shape: ModelShape, hw: Hardware, batch: float, seq: int, vocab_tensors: int) -> dict[str, float]:
    """A training step's activations (micro-batch = this process's share) and its [B, T, V] fp32 tensors."""
    return tokens_phase(shape, hw, max(1, math.ceil(batch / hw.world)) * seq, vocab_tensors)


def tokens_phase(shape: ModelShape, hw: Hardware, micro_tokens: float, vocab_tensors: int) -> dict[str, float]:
    """`train_phase` for a process's padded micro-batch of `micro_tokens` tokens (rows x their longest)."""
    return {"activations": shape.layers * hw.activation_bytes * micro_tokens * shape.d,
            "logits": vocab_tensors * micro_tokens * shape.vocab * FP32}


# Windows of length bucketing `offline_step` simulates on a repeated sample.
BUCKETED_WINDOWS = 8


@dataclass(frozen=True)
class OfflineStep:
    """One optimizer step of an offline trainer: padded tokens (all processes), sequences, and the padded
    tokens of the largest share one process holds (what sizes its activations)."""

    tokens: float
    sequences: float
    micro_tokens: float


def offline_step(lengths: Sequence[int], algo: dict, world: int = 1) -> OfflineStep:
    """`batch_size` sequences a step, or with `batch_tokens` the trainers' own length bucketing
    (lmrl/algos/bc.py `token_batches`) run on the sample's lengths: its batches' mean padded tokens and
    sequences, and the largest process share any of them gives.  The sample is repeated to fill several of
    the bucketing's windows, so windows and their short last batches weigh as they do over a whole dataset."""
    if not algo.get("batch_tokens"):
        batch = algo["batch_size"]
        return OfflineStep(step_tokens(lengths, batch, world), batch, max(1, math.ceil(batch / world)) * max(lengths))
    import torch

    from lmrl.algos.bc import BUCKET_WINDOW, token_batches

    g, budget = torch.Generator().manual_seed(0), int(algo["batch_tokens"])
    per_window = BUCKET_WINDOW * max(1, budget // max(1, int(np.mean(lengths))))
    lengths = np.tile(np.asarray(lengths), max(1, math.ceil(BUCKETED_WINDOWS * per_window / len(lengths))))
    batches = token_batches(torch.randperm(len(lengths), generator=g).tolist(), lengths, budget, g, min_rows=world)
    shares = [[len(b[r::world]) * int(lengths[b[r::world]].max()) for r in range(world)] for b in batches]
    return OfflineStep(float(np.mean([sum(s) for s in shares])), float(np.mean([len(b) for b in batches])),
                       float(max(max(s) for s in shares)))


# -- stages ------------------------------------------------------------------------------------------
@dataclass
class Stage:
    """One training stage of a run (an RL run trains its BC stage first): FLOPs by component, padded tokens
    through the trained model, the model state and frozen models held throughout (`static`), and the
    phases whose transient memory comes on top of it, one at a time."""

    name: str
    flops: dict[str, float]
    tokens: float
    static: dict[str, float]
    phases: dict[str, dict[str, float]] = field(default_factory=dict)
    host: float = 0.0
    data_tokens: float = 0.0  # offline: one epoch of the stage's data; online: what its rounds generate
    epochs: float | None = None  # passes over the data (offline stages)

    @property
    def peak_phase(self) -> str:
        """The name of the phase that needs the most memory ("" without phases)."""
        return max(self.phases, key=lambda p: sum(self.phases[p].values())) if self.phases else ""

    @property
    def memory(self) -> dict[str, float]:
        """Device bytes per process at the stage's peak, by component."""
        return {**self.static, **self.phases.get(self.peak_phase, {})}


@dataclass(frozen=True)
class Generation:
    """What generation needs from the task's eval config: rows per batched call, prompt and turn budgets."""

    batch_size: int
    max_prompt: int  # the longest prompt in the sample, after the sampler's truncation
    max_new_tokens: int

    def kv(self, shape: ModelShape, hw: Hardware, rows: float | None = None, trunks: int = 1) -> dict[str, float]:
        """Generation's KV cache: keys and values of every layer and trunk, `rows` sequences (default: a full
        batch, as evaluation decodes) of the longest prompt plus a turn."""
        rows = self.batch_size if rows is None else rows
        seq = self.max_prompt + self.max_new_tokens
        return {"kv_cache": trunks * 2 * shape.layers * rows * seq * shape.d * (2 if hw.half else FP32)}


def new_stage(name: str, flops: dict, tokens: float, params: float, hw: Hardware, phases: dict,
              frozen: float = 0.0, host: float = 0.0, data: tuple[float, float | None] = (0.0, None)) -> Stage:
    """A stage training `params` parameters (their state per `model_state`) beside `frozen` device bytes;
    `data` = (its data tokens, epochs)."""
    static = model_state(params, hw)
    host += static.pop("host")
    return Stage(name, flops, tokens, {**static, **({"frozen": frozen} if frozen else {})}, phases, host, *data)


def epoch(data: TaskTokens, algo: dict, step: OfflineStep) -> tuple[float, float]:
    """An offline stage's data tokens per epoch and the epochs its `steps` steps of `step.sequences` make."""
    return data.tokens, algo["steps"] * step.sequences / max(data.sequences, 1e-9)


def bc_stage(shape: ModelShape, data: TaskTokens, algo: dict, hw: Hardware, gen: Generation | None = None,
             name: str = "bc") -> Stage:
    """BC (and %BC on its kept episodes): `steps` steps of `batch_size` sequences (or `batch_tokens` padded
    tokens), cross-entropy on the LM; `gen`: the run evaluates after this stage."""
    step = offline_step(data.lengths, algo, hw.world)
    tokens = algo["steps"] * step.tokens
    # the LM's logits and the fp32 log-softmax cross-entropy keeps for backward
    phases = {"train": tokens_phase(shape, hw, step.micro_tokens, 2), **({"eval": gen.kv(shape, hw)} if gen else {})}
    return new_stage(name, {"train": 6 * shape.lm * tokens}, tokens, shape.params, hw, phases,
                     data=epoch(data, algo, step))


def value_stage(shape: ModelShape, data: TaskTokens, algo: dict, hw: Hardware, gen: Generation, ilql: bool) -> Stage:
    """MC (one Q head) or ILQL (Q1, Q2, V; a Polyak target run forward on every batch, and on windowed tasks
    the value model forward on the next link's states for the bootstrap V): heads on the trunk, no LM head
    unless `shared_trunk`; the frozen BC policy waits on the host until it acts beside the critic."""
    shared = algo.get("shared_trunk", False)
    heads = (2 * shape.q_head + shape.v_head) if ilql else shape.q_head
    fwd = shape.body + heads + (shape.d * shape.vocab if shared else 0)
    steps, step = algo["steps"], offline_step(data.lengths, algo, hw.world)
    tokens = steps * step.tokens
    flops = {"train": 6 * fwd * tokens}
    if ilql:
        flops["target"] = 2 * fwd * tokens
        if data.windowed:  # ILQL: V(s') of a window's last decision comes from the next link's state
            flops["next_v"] = 2 * fwd * steps * step_tokens(data.next_lengths, step.sequences, hw.world)
    # kept for backward: each Q head's [B, T, V] (and the LM logits + log-softmax with a shared trunk);
    # ILQL's target Q1, Q2 stay alive through the loss
    vocab_tensors = (4 if ilql else 1) + (2 if shared else 0)
    # evaluation: the BC policy joins the critic on the device, each trunk with its KV cache
    policy = {} if shared else {"bc_policy": shape.params * FP32}
    phases = {"train": tokens_phase(shape, hw, step.micro_tokens, vocab_tensors),
              "eval": {**gen.kv(shape, hw, trunks=1 if shared else 2), **policy}}
    return new_stage("ilql" if ilql else "mc", flops, tokens, shape.params + heads, hw, phases,
                     frozen=frozen_bytes(shape.params + heads, hw) if ilql else 0.0,
                     host=0.0 if shared else shape.params * FP32, data=epoch(data, algo, step))


def train_steps(items: float, algo: dict) -> int:
    """An online round's optimizer steps: `epochs` passes over `items` sequences, capped (OnlineTrainer)."""
    steps = algo.get("epochs", 1) * max(1, math.ceil(items / algo["batch_size"]))
    return min(steps, algo["max_steps_per_round"]) if algo.get("max_steps_per_round") else steps


def sample_flops(shape: ModelShape, prompt: float, action: float, n: float = 1) -> float:
    """One prompt prefilled through the body, then `n` turns of `action` tokens decoded from it (the last token of a
    turn is not fed back); the LM head runs once per generated token."""
    return 2 * shape.body * (prompt + n * (action - 1)) + 2 * shape.d * shape.vocab * n * action


def rollout_flops(shape: ModelShape, data: TaskTokens, episodes: float) -> float:
    """Sampling `episodes` episodes: each turn prefills its prompt and decodes its action (`sample_flops`)."""
    return episodes * data.per_episode(lambda e: sum(sample_flops(shape, p, a) for p, a in zip(e.prompts, e.actions)))


def chunked_tokens(lengths: Sequence[int], rows: float, chunk: int, world: int = 1) -> float:
    """Padded tokens of `rows` sequences run through no-grad passes of at most `chunk` sequences, each process
    passing its share (world = 1: every process runs all of them)."""
    return rows * expected_max(lengths, max(1, min(chunk, math.ceil(rows / world))))


def round_tokens(data: TaskTokens, algo: dict) -> float:
    """Tokens of the sequences all rounds' episodes make (an online run's data; the policy's episodes are taken
    to be as long as the dataset's, which its BC start imitates)."""
    return algo["rounds"] * algo["episodes_per_round"] * data.per_episode(lambda e: sum(e.seqs))


def online_phases(shape: ModelShape, hw: Hardware, algo: dict, gen: Generation, seq: int) -> dict[str, dict]:
    """A round's training step, its rollouts (this process's share of the episodes; under ZeRO-3 on a whole
    fp32 replica of the policy), and the final evaluation."""
    rows = min(gen.batch_size, math.ceil(algo["episodes_per_round"] / hw.world))
    replica = {"actor_replica": shape.params * FP32} if hw.stage == 3 else {}
    return {"train": train_phase(shape, hw, algo["batch_size"], seq, 2),
            "rollout": {**gen.kv(shape, hw, rows), **replica}, "eval": {**gen.kv(shape, hw), **replica}}


def scored_rounds(data: TaskTokens, algo: dict, hw: Hardware) -> tuple[int, float, float]:
    """PPO's and group PG's rounds: (optimizer steps, padded tokens they train, padded tokens of the no-grad scoring
    passes over every round's sequences, which every process runs whole)."""
    rounds, score_batch = algo["rounds"], algo.get("score_batch_size", 64)
    items = algo["episodes_per_round"] * data.per_episode(lambda e: len(e.seqs))
    steps = rounds * train_steps(items, algo)
    tokens = steps * step_tokens(data.lengths, min(algo["batch_size"], items), hw.world)
    return steps, tokens, rounds * chunked_tokens(data.lengths, items, score_batch) * hw.world


def ppo_stage(shape: ModelShape, data: TaskTokens, algo: dict, hw: Hardware, gen: Generation) -> Stage:
    """Per round: rollouts; a no-grad scoring pass of policy + value and of the reference over the whole round
    (on every process); `epochs` passes of minibatches through policy + value head (+ a BC batch of offline
    data when `bc_weight` > 0)."""
    batch, score_batch = algo["batch_size"], algo.get("score_batch_size", 64)
    steps, tokens, scored = scored_rounds(data, algo, hw)
    trained = shape.lm + shape.v_head
    flops = {"rollout": rollout_flops(shape, data, algo["rounds"] * algo["episodes_per_round"]),
             "train": 6 * trained * tokens, "score": 2 * trained * scored, "reference": 2 * shape.lm * scored}
    if algo.get("bc_weight", 0) > 0:
        flops["bc_term"] = 6 * trained * steps * step_tokens(data.lengths, batch, hw.world)
    seq = max(data.lengths)
    # scoring: policy and reference logits and one fp32 log-softmax of score_batch_size rows, no activations kept
    phases = {**online_phases(shape, hw, algo, gen, seq),
              "score": {"logits": 3 * score_batch * seq * shape.vocab * FP32}}
    return new_stage("ppo", flops, tokens, shape.params + shape.v_head, hw, phases,
                     frozen=frozen_bytes(shape.params, hw), data=(round_tokens(data, algo), None))


def group_pg_stage(shape: ModelShape, data: TaskTokens, algo: dict, hw: Hardware, gen: Generation) -> Stage:
    """Per round: rollouts; a no-grad pass of the policy (the old log-probs) and, with `kl_coef` > 0, of the frozen
    BC stage over the whole round (on every process); then minibatches through the LM alone (no value head).  Every
    episode counts: those at their group's mean, which the trainer leaves out, are not known in advance."""
    score_batch = algo.get("score_batch_size", 64)
    _, tokens, scored = scored_rounds(data, algo, hw)
    kl = algo["kl_coef"] > 0  # always in the resolved config: its default lives there alone
    flops = {"rollout": rollout_flops(shape, data, algo["rounds"] * algo["episodes_per_round"]),
             "train": 6 * shape.lm * tokens, "score": 2 * shape.lm * scored,
             **({"reference": 2 * shape.lm * scored} if kl else {})}
    seq = max(data.lengths)
    # scoring: one model's logits and their fp32 log-softmax at a time (the policy's are freed before the reference's)
    phases = {**online_phases(shape, hw, algo, gen, seq),
              "score": {"logits": 2 * score_batch * seq * shape.vocab * FP32}}
    return new_stage("group_pg", flops, tokens, shape.params, hw, phases,
                     frozen=frozen_bytes(shape.params, hw) if kl else 0.0, data=(round_tokens(data, algo), None))


def archer_stage(shape: ModelShape, data: TaskTokens, algo: dict, hw: Hardware, gen: Generation) -> Stage:
    """ArCHer (`lmrl.algos.archer`): per round, rollouts and the critic's no-grad fit on their turns; then
    `updates_per_round` steps, each on `batch_size` transitions drawn from the replay buffer: one fresh turn of the
    actor sampled at every drawn state, the target critic on the next states and on (state, fresh turn), the critic
    trained on (state, turn).  After `warmup_rounds`, every `actor_every`-th step adds the critic on (state, fresh
    turn), the actor trained on [state; fresh turn] and, with `kl_coef` > 0, the frozen BC stage on it.  Transitions
    are drawn uniformly, so their lengths are the dataset's turns'; next states are taken as long as states.  The
    critic's trunk has the policy's shape (it starts from the BC stage), as has its target copy."""
    rounds, batch, updates = algo["rounds"], algo["batch_size"], algo["updates_per_round"]
    steps = rounds * updates
    actor_steps = max(0, rounds - algo["warmup_rounds"]) * math.ceil(updates / algo.get("actor_every", 1))
    turns = [(p, a) for e in data.sample for p, a in zip(e.prompts, e.actions)]
    states, pairs = [p for p, _ in turns], [p + a for p, a in turns]
    mean_state, mean_action = float(np.mean(states)), float(np.mean([a for _, a in turns]))
    padded_states, padded_pairs = batch * expected_max(states, batch), batch * expected_max(pairs, batch)
    per_round = algo["episodes_per_round"] * data.per_episode(lambda e: len(e.actions))
    kl = algo.get("kl_coef", 0) > 0
    flops = {"rollout": rollout_flops(shape, data, rounds * algo["episodes_per_round"]),
             "critic_fit": rounds * 2 * shape.body * per_round * mean_state,
             "sample": steps * batch * sample_flops(shape, mean_state, mean_action),
             "target": steps * 2 * shape.body * (padded_states + padded_pairs),
             "critic": steps * 6 * shape.body * padded_pairs,
             "actor": actor_steps * (2 * shape.body + 6 * shape.lm) * padded_pairs,
             **({"reference": actor_steps * 2 * shape.lm * padded_pairs} if kl else {})}
    tokens = (steps + actor_steps) * padded_pairs
    # trained: the actor and the critic's trunk; frozen: the target trunk and, with the KL term, the BC stage
    frozen = frozen_bytes(shape.body, hw) + (frozen_bytes(shape.params, hw) if kl else 0.0)
    return new_stage("archer", flops, tokens, shape.params + shape.body, hw,
                     online_phases(shape, hw, algo, gen, max(pairs)), frozen=frozen,
                     data=(round_tokens(data, algo), None))


def online_bc_stage(shape: ModelShape, data: TaskTokens, algo: dict, hw: Hardware, gen: Generation) -> Stage:
    """Online %BC: per round, rollouts, then BC on the round's top `top_fraction` episodes."""
    kept = data.top(algo["top_fraction"])
    rounds, per_round = algo["rounds"], algo["episodes_per_round"]
    items = per_round * len(kept.sample) / len(data.sample) * kept.per_episode(lambda e: len(e.seqs))
    tokens = rounds * train_steps(items, algo) * step_tokens(kept.lengths, min(algo["batch_size"], items), hw.world)
    flops = {"rollout": rollout_flops(shape, data, rounds * per_round), "train": 6 * shape.lm * tokens}
    return new_stage("online_filtered_bc", flops, tokens, shape.params, hw,
                     online_phases(shape, hw, algo, gen, max(kept.lengths)), data=(round_tokens(data, algo), None))


def placed_bytes(params: float, hw: Hardware) -> float:
    """A whole inference copy on each process (`engine.place`): in DeepSpeed's 16-bit dtype, else fp32."""
    return params * (2 if hw.half else FP32)


def pair_stage(name: str, shape: ModelShape, data: TaskTokens, cfg: dict, chunk: int, hw: Hardware, head: bool = False,
               gen: Generation | None = None) -> Stage:
    """Bradley-Terry on `steps` x `batch_size` trajectory pairs (lmrl/algos/sweet_data.py `TrajectoryPairs`): SWEET-RL's
    critic, or the actor of `mode=trajectory_dpo`.  A trajectory is its training sequences (one per action when
    windowed): `sample_turns` of them (0 = all) forward and backward, with `exact_scores` the others forward in passes
    of `chunk`; the frozen reference scores each sequence once (cached per process), and the trained rows again with
    `kl_coef`; the NLL term reuses the trained forward.  `head`: a value head on the trunk (no LM head, no reference).
    A step's trajectories are taken to be distinct; `c`'s tokens (not in the sample) are left out."""
    steps, batch, sample = cfg["steps"], cfg["batch_size"], cfg.get("sample_turns", 0)
    picked = data.per_episode(lambda e: min(len(e.seqs), sample) if sample else len(e.seqs))
    rows = 2 * batch * picked  # a step's trained sequences
    rest = 2 * batch * (data.per_episode(lambda e: len(e.seqs)) - picked) if cfg.get("exact_scores") else 0.0
    fwd = shape.body + shape.v_head if head else shape.lm
    tokens, seq = steps * step_tokens(data.lengths, rows, hw.world), max(data.lengths)
    flops = {"train": 6 * fwd * tokens}
    if rest:
        flops["rest"] = 2 * fwd * steps * chunked_tokens(data.lengths, rest, chunk, hw.world)
    phase = train_phase(shape, hw, rows, seq, 0 if head else 2)
    if not head:
        share = max(1, min(chunk, math.ceil((rows + rest) / hw.world)))  # a reference pass's sequences
        scored = min(steps * (rows + rest), hw.world * data.sequences)
        flops["reference"] = 2 * shape.lm * scored * expected_max(data.lengths, share)
        # while the step's activations are held: the reference's logits and log-softmax of a pass
        phase["logits"] += 2 * share * seq * shape.vocab * FP32
        if cfg.get("kl_coef", 0) > 0:  # the reference's logits of the trained rows, kept for the KL term
            flops["kl"] = 2 * shape.lm * tokens
            phase["logits"] += math.ceil(rows / hw.world) * seq * shape.vocab * FP32
    phases = {"train": phase, **({"eval": gen.kv(shape, hw)} if gen else {})}
    return new_stage(name, flops, tokens, shape.params + (shape.v_head if head else 0), hw, phases,
                     frozen=0.0 if head else frozen_bytes(shape.params, hw),
                     data=(data.tokens, steps * rows / max(data.sequences, 1e-9)))


def turns(data: TaskTokens) -> list[tuple[int, int]]:
    """(rollout prompt, action) tokens of every agent turn in the sample."""
    return [pa for e in data.sample for pa in zip(e.prompts, e.actions)]


def picked_turns(data: TaskTokens, algo: dict) -> float:
    """The dataset turns SWEET-RL samples candidates at: a `turn_fraction` of them, at most what the actor's steps
    use (`pick_turns`: pairs_per_turn pairs a turn, a quarter to spare)."""
    dataset_turns = data.dataset_episodes * data.per_episode(lambda e: len(e.actions))
    return min(algo["turn_fraction"] * dataset_turns,
               math.ceil(1.25 * algo["steps"] * algo["batch_size"] / algo["pairs_per_turn"]))


def candidates_stage(shape: ModelShape, data: TaskTokens, algo: dict, hw: Hardware, gen: Generation) -> Stage:
    """SWEET-RL's actor data (lmrl/algos/sweet.py `turn_items`), before the actor is set up; nothing trained.  At a
    `turn_fraction` of the dataset's turns (at most 1.25 x steps x batch_size / pairs_per_turn), `candidates` turns
    decoded from one prefill of the sampler's prompt (a placed BC actor), then teacher-forced after the prompt by the
    critic and its reference (`critic=lm`; `head`: one value model; `oracle`: no model), `score_batch_size` turns
    a pass, padded to the pass's longest prompt and turn, on every process.  Candidates are taken to be as long as the
    dataset's turns and all distinct (the trainer scores each distinct one once)."""
    n, chunk, critic = algo["candidates"], algo.get("score_batch_size", 64), algo.get("critic", "lm")
    prompts, actions = zip(*turns(data))
    picked = picked_turns(data, algo)
    states = max(1, min(chunk, math.ceil(picked)))  # a pass's turns
    prompt, width, rows = expected_max(prompts, states), expected_max(actions, states * n), states * n
    flops = {"sample": picked * sample_flops(shape, prompt, width, n) * hw.world}
    if critic == "lm":  # critic and reference: the prefix through the body (the LM head at its end), the turns whole
        per_model = 2 * shape.body * prompt + 2 * shape.d * shape.vocab + 2 * shape.lm * n * width
        flops["critic"] = picked * 2 * per_model * hw.world
    elif critic == "head":
        flops["critic"] = picked * 2 * (shape.body + shape.v_head) * (prompt + n * width) * hw.world
    critics = {"lm": 2 * shape.params, "head": shape.params + shape.v_head}.get(critic, 0)
    # a pass's KV cache (sampling's, then each critic's in turn); the LM critic's continuation logits [rows, width, V],
    # their fp32 copy and log-softmax
    logits = 3 * rows * max(actions) * shape.vocab * FP32 if critic == "lm" else 0.0
    return new_stage("sweet_candidates", flops, 0.0, 0, hw, {"score": {**gen.kv(shape, hw, rows), "logits": logits}},
                     frozen=placed_bytes(shape.params + critics, hw))


def turn_dpo_stage(shape: ModelShape, data: TaskTokens, algo: dict, hw: Hardware, gen: Generation) -> Stage:
    """SWEET-RL's actor (`TurnPairs`): `steps` x `batch_size` DPO pairs of (prompt + turn) sequences, forward and
    backward through the actor and forward through the frozen initial actor; the NLL term reuses the actor's forward.
    Its data: `pairs_per_turn` pairs of the picked turns (fewer where candidates tie)."""
    lengths, rows = [p + a for p, a in turns(data)], 2 * algo["batch_size"]
    tokens = algo["steps"] * step_tokens(lengths, rows, hw.world)
    pairs = picked_turns(data, algo) * algo["pairs_per_turn"]
    # the actor's logits and log-softmax kept for backward, the reference's while its log-probs are taken
    phases = {"train": train_phase(shape, hw, rows, max(lengths), 4), "eval": gen.kv(shape, hw)}
    return new_stage("sweet", {"train": 6 * shape.lm * tokens, "reference": 2 * shape.lm * tokens}, tokens,
                     shape.params, hw, phases, frozen=frozen_bytes(shape.params, hw),
                     data=(pairs * 2 * sum(lengths) / len(lengths), algo["steps"] * algo["batch_size"] / pairs))


def sweet_stages(shape: ModelShape, data: TaskTokens, algo: dict, hw: Hardware, gen: Generation) -> list[Stage]:
    """SWEET-RL: its BC stage; the critic stage unless `critic=oracle` or `critic_from` (one is given); the actor's
    candidates; the actor.  `mode=trajectory_dpo`: the BC stage, then DPO of the actor on trajectory pairs."""
    chunk = algo.get("score_batch_size", 64)
    if algo.get("mode", "turn") == "trajectory_dpo":
        return with_bc_stage(algo, shape, data, hw, pair_stage("trajectory_dpo", shape, data, algo, chunk, hw, gen=gen))
    critic = algo.get("critic", "lm")
    fitted = [] if critic == "oracle" or algo.get("critic_from") else [
        pair_stage("sweet_critic", shape, data, algo["critic_stage"], chunk, hw, head=critic == "head")]
    return with_bc_stage(algo, shape, data, hw, *fitted, candidates_stage(shape, data, algo, hw, gen),
                         turn_dpo_stage(shape, data, algo, hw, gen))


# -- a cell ------------------------------------------------------------------------------------------
def with_bc_stage(algo: dict, shape: ModelShape, data: TaskTokens, hw: Hardware, *stages: Stage) -> list[Stage]:
    """An RL run trains (or reuses) its BC stage first, unless it starts from `init_from`."""
    return [*stages] if algo.get("init_from") else [bc_stage(shape, data, algo["bc"], hw, name="bc_stage"), *stages]


LAYOUTS: dict[str, Callable[..., list[Stage]]] = {
    "BCTrainer": lambda shape, data, algo, hw, gen: [bc_stage(shape, data, algo, hw, gen)],
    "FilteredBCTrainer": lambda shape, data, algo, hw, gen: [
        bc_stage(shape, data.top(algo["top_fraction"]), algo, hw, gen, name="filtered_bc")],
    "MCTrainer": lambda shape, data, algo, hw, gen: with_bc_stage(
        algo, shape, data, hw, value_stage(shape, data, algo, hw, gen, ilql=False)),
    "ILQLTrainer": lambda shape, data, algo, hw, gen: with_bc_stage(
        algo, shape, data, hw, value_stage(shape, data, algo, hw, gen, ilql=True)),
    "PPOTrainer": lambda shape, data, algo, hw, gen: with_bc_stage(
        algo, shape, data, hw, ppo_stage(shape, data, algo, hw, gen)),
    "OnlineFilteredBCTrainer": lambda shape, data, algo, hw, gen: with_bc_stage(
        algo, shape, data, hw, online_bc_stage(shape, data, algo, hw, gen)),
    "GroupPGTrainer": lambda shape, data, algo, hw, gen: with_bc_stage(
        algo, shape, data, hw, group_pg_stage(shape, data, algo, hw, gen)),
    "SweetTrainer": sweet_stages,
    "ArcherTrainer": lambda shape, data, algo, hw, gen: with_bc_stage(
        algo, shape, data, hw, archer_stage(shape, data, algo, hw, gen)),
    # the prompted baseline trains nothing
    "PromptTrainer": lambda shape, data, algo, hw, gen: [],
}


def stages(trainer: str, shape: ModelShape, data: TaskTokens, algo: dict, hw: Hardware, gen: Generation) -> list[Stage]:
    """The training stages of a cell whose algorithm is `trainer` (the class name in `algo._target_`)."""
    if trainer not in LAYOUTS:
        raise ValueError(f"no cost layout for trainer {trainer!r}; known: {', '.join(LAYOUTS)}")
    return LAYOUTS[trainer](shape, data, algo, hw, gen)


def gpu_hours(flops: float, utilisation: float, peak_tflops: float = H100_PEAK_TFLOPS) -> float:
    """GPU-hours for `flops` at `utilisation` of a `peak_tflops` device (default: an H100's measured bf16 matmul
    peak)."""
    return flops / (utilisation * peak_tflops * 1e12) / 3600


def peak_stage(cell: Sequence[Stage]) -> Stage | None:
    """The cell's stage needing the most device memory per process (its `memory` is the peak, by component)."""
    return max(cell, key=lambda s: sum(s.memory.values()), default=None)
