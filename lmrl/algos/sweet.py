"""SWEET-RL (`algo=sweet`): a critic that sees training-time information assigns per-turn credit, and
the actor learns from the critic's turn-level preferences (Zhou et al. 2025, arXiv 2503.15478).

1. BC stage (cached, as for every RL method), the start of both critic and actor.
2. Critic stage (`lmrl/algos/sweet_critic.py`, cached): a critic LM reading training-time
   information `c`, fitted with Bradley–Terry on trajectory pairs of one task, each scored by its
   turns' advantages A(o_t, a_t, c) = β · (mean log π_critic − mean log π_ref).
3. Actor data: at a `turn_fraction` of the dataset's turns, `candidates` turns sampled from the BC
   actor with one shared prefill, scored by the critic at the true state, paired top half vs. bottom
   half (`pairs_per_turn`).
4. Actor: DPO on those pairs with the frozen initial actor as reference, + `nll_coef` x NLL, + `bc_coef` x the BC
   loss on a batch of the dataset's sequences each step (an anchor to the start: the actor's own candidates, ranked
   by a critic that may prefer text the data never shows, cannot then draw it away from the data's moves).

`mode=trajectory_dpo` skips 2-3: multi-turn DPO of the actor on the trajectory pairs themselves.
`privileged=false`: the critic does not read `c`.  `critic=oracle` replaces 2 by the task's oracle
credit at the true state (the maze: BFS), to tell an actor that cannot use credit from a critic
that gives none.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from hydra.utils import get_method
from omegaconf import OmegaConf
from tqdm.auto import tqdm

from lmrl.algos.base import OptimFields
from lmrl.algos.bc import BCConfig, bc_loss, lm_policy, loss_norm, start_checkpoint
from lmrl.algos.privileged import TaskInfo, render, task_info_for
from lmrl.algos.sweet_critic import (
    SCORERS, CriticConfig, OracleScorer, PairTrainer, critic_checkpoint, load_lm, setup_offline, trajectory_items,
    cached_unseen_health,
)
from lmrl.algos.sweet_data import LogRatio, TrajectoryPairs, TurnPairs, prefixed
from lmrl.algos.turn_losses import candidate_pairs
from lmrl.checkpoint import Checkpointer
from lmrl.data.packed import PackedSequences
from lmrl.data.tokenize import SegmentEncoder, TokenSequence, collate, episode_to_sequences, has_decision
from lmrl.dist import is_main, rank, world_size
from lmrl.models.factory import model_max_length
from lmrl.rollout.candidates import sample_candidates
from lmrl.rollout.policy import end_turn, prompt_ids
from lmrl.utils import release_memory

log = logging.getLogger(__name__)
MODES = ("turn", "trajectory_dpo")
CRITICS = ("lm", "head", "oracle")


@dataclass
class SweetConfig(OptimFields):
    """`algo=sweet`: the actor's objective (`mode`), its critic (`critic`, `privileged`, `critic_stage` or
    `critic_from`), DPO and candidate settings, the BC stage, and each task's training-time information
    (`task_info`)."""

    name: str = "sweet"
    # turn: SWEET-RL; trajectory_dpo: multi-turn DPO on the trajectory pairs (no critic).
    mode: str = "turn"
    # lm: the log-ratio critic; head: a value head on the critic trunk; oracle: the task's oracle credit.
    critic: str = "lm"
    # The critic reads the task's training-time information c (false: the ablation without it).
    privileged: bool = True
    # DPO beta of the actor (and of trajectory DPO).
    beta: float = 0.1
    candidates: int = 16
    pairs_per_turn: int = 4
    nll_coef: float = 1.0
    # x the BC loss on `batch_size` dataset sequences a step, added to the actor's loss (0 = none, the original).
    bc_coef: float = 0.0
    # Share of the dataset's agent turns where candidates are sampled.
    turn_fraction: float = 0.5
    temperature: float = 1.0
    # trajectory_dpo on windowed tasks: turns per trajectory scored with gradients (0 = all), and exact scores.
    sample_turns: int = 8
    exact_scores: bool = False
    # Sequences (or candidate turns) per no-grad pass.
    score_batch_size: int = 64
    # A trained critic directory to use instead of the (cached) critic stage.
    critic_from: str | None = None
    # Held-out trajectory pairs the trained critic is checked on (a quarter on windowed tasks; 0 = none).
    unseen_pairs: int = 128
    critic_stage: CriticConfig = field(default_factory=CriticConfig)
    init_from: str | None = None
    bc: BCConfig = field(default_factory=BCConfig)
    # Per task: the info keys that define it (c), its reset options, its replayed state.
    task_info: dict[str, TaskInfo] = field(default_factory=dict)
    log_every: int = 25

    def validate(self) -> list[str]:
        problems = super().validate() + [f"bc.{p}" for p in self.bc.validate()]
        problems += [f"critic_stage.{p}" for p in self.critic_stage.validate()]
        problems += [f"task_info.{t}: {p}" for t, info in self.task_info.items() for p in info.validate()]
        if self.mode not in MODES or self.critic not in CRITICS:
            problems.append(f"mode must be one of {MODES} and critic one of {CRITICS} (got {self.mode}, {self.critic})")
        if self.critic_stage.normalize != "none" and self.critic != "lm":
            problems.append(f"critic_stage.normalize={self.critic_stage.normalize} normalizes the LM critic's "
                            f"log-probs: critic=lm only (got critic={self.critic})")
        if self.critic == "oracle" and not self.privileged:
            problems.append("critic=oracle reads the true state: privileged=false has no meaning for it")
        if self.batch_tokens is not None:
            problems.append("batch_tokens must be null (batches are pairs)")
        if not 0 < self.turn_fraction <= 1 or self.candidates < 2 or self.pairs_per_turn < 1:
            problems.append("turn_fraction must be in (0, 1], candidates >= 2, pairs_per_turn >= 1")
        if self.beta <= 0 or self.nll_coef < 0 or self.temperature <= 0 or self.sample_turns < 0 or self.bc_coef < 0:
            problems.append("beta and temperature must be > 0, nll_coef, bc_coef and sample_turns >= 0")
        return problems


class SweetTrainer(PairTrainer):
    """SWEET-RL's actor (and the trajectory-DPO ablation); see the module docstring."""

    config_class = SweetConfig

    def __init__(self, cfg: SweetConfig, task, engine, model, tokenizer, logger, seed: int = 0, run_dir=None,
                 checkpointer: Checkpointer | None = None):
        self.cfg, self.task, self.engine, self.tokenizer, self.logger = cfg, task, engine, tokenizer, logger
        self.seed, self.checkpointer = seed, checkpointer
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.bc_dir = self.start_dir = start_checkpoint(cfg, task, engine, model, tokenizer, logger, seed)
        self.info, self.stats = task_info_for(cfg.task_info, task.name), {}
        actor = load_lm(self.bc_dir)
        self.max_length = model_max_length(actor)
        setup_offline(self, actor, OBJECTIVES[cfg.mode](self), curves=True)
        self.reference = engine.prepare_frozen(load_lm(self.bc_dir))
        self.anchor = self.anchor_sequences() if cfg.bc_coef > 0 else None

    def fit(self) -> dict:
        """The pair trainer's metrics plus the actor data's statistics (turns, candidates, pairs) and the critic's
        checks."""
        return {**super().fit(), **self.stats}

    # -- the BC anchor (`bc_coef`) ---------------------------------------------------------------------------
    def anchor_sequences(self) -> PackedSequences:
        """The dataset's sequences as the BC stage imitates them (its `dedup` and `balance_states`)."""
        encode, task, moves = SegmentEncoder(self.tokenizer), self.task, self.task.moves_per_sequence
        seqs = (s for ep in task.episodes()
                for s in episode_to_sequences(ep, encode, task.history_window, self.max_length, moves))
        return PackedSequences.build(seqs, keep=has_decision, dedup=self.cfg.bc.dedup,
                                     balance_states=self.cfg.bc.balance_states)

    def anchor_batches(self, start: int):
        """Endless shuffled epochs of `batch_size` dataset sequences from batch `start` on, as BC draws them (merged
        duplicates drawn by weight); epoch e's order is a function of (seed, e), apart from the pairs' order."""
        world, r = world_size(), rank()
        for epoch in itertools.count():
            plan = self.epoch_plan(self.anchor, epoch, salt=1)
            drawn = self.draws_by_weight(self.anchor)
            for chunk in plan[start:]:
                items = [self.anchor[j] for j in chunk]
                if drawn:
                    items = [dataclasses.replace(s, weight=1.0) for s in items]
                yield {**collate(items[r::world], self.tokenizer.pad_token_id), "norm": loss_norm(items, world)}
            start = max(0, start - len(plan))

    def batches(self, items, start: int = 0, salt: int = 0):
        """The pair batches; with `bc_coef`, each carries a batch of dataset sequences under `anchor`."""
        pairs = super().batches(items, start, salt)
        if self.anchor is None:
            yield from pairs
            return
        for batch, anchor in zip(pairs, self.anchor_batches(start)):
            yield {**batch, "anchor": self.engine.to_device(anchor)}

    def loss(self, batch: dict) -> tuple[torch.Tensor, dict]:
        """The pairs' objective (+ `bc_coef` x BC's loss on the batch's dataset sequences)."""
        anchor = batch.get("anchor")
        loss, logs = super().loss({k: v for k, v in batch.items() if k != "anchor"})
        if anchor is None:
            return loss, logs
        out = self.engine.forward(input_ids=anchor["input_ids"], attention_mask=anchor["attention_mask"])
        bc = bc_loss(out.logits, anchor["input_ids"], anchor["action_mask"], anchor["attention_mask"],
                     anchor["weights"], anchor["norm"])
        return loss + self.cfg.bc_coef * bc, {**logs, "bc": bc.detach()}

    # -- the actor's training items, per mode ------------------------------------------------------------
    def trajectory_dpo_items(self) -> TrajectoryPairs:
        """`mode=trajectory_dpo`: multi-turn DPO items on the same trajectory pairs the critic stage fits, scored by the
        actor's summed log-ratio."""
        cfg = self.cfg
        return trajectory_items(self.task, self.info, self.tokenizer, self.max_length, False, LogRatio(cfg.beta, "sum"),
                                cfg.steps * cfg.batch_size, cfg.sample_turns, cfg.exact_scores, cfg.score_batch_size,
                                self.seed, cfg.nll_coef, pairing=cfg.critic_stage.pairing)  # the critic's pairs

    def turn_items(self) -> TurnPairs:
        """Candidates at a `turn_fraction` of the dataset's turns, paired by the critic's advantage."""
        cfg, task = self.cfg, self.task
        scorer = self.scorer()
        eval_cfg = OmegaConf.merge(task.cfg.eval, {"temperature": cfg.temperature})
        policy = lm_policy(self.engine.place(load_lm(self.bc_dir)), self.tokenizer, task, eval_cfg, self.seed)
        rng, seqs, counts = random.Random(f"sweet-turns:{self.seed}"), [], {"turns": 0, "candidates": 0, "pairs": 0}
        picked = self.pick_turns(rng)
        states = []
        for e, ep in enumerate(task.episodes()):
            if e not in picked:
                continue
            truth = self.info.states(ep, task.make_env) if cfg.privileged else None
            actions = [i for i, t in enumerate(ep.turns) if t.is_action]
            states += [(*self.turn_state(policy, ep.turns[: actions[k]], render(truth[k]) if truth else None),
                        truth[k] if truth else None) for k in picked[e]]
        batches = tqdm(range(0, len(states), cfg.score_batch_size), desc=f"{cfg.name} candidates", unit="batch",
                       disable=not is_main())
        for start in batches:
            seqs += self.paired_candidates(policy, scorer, states[start : start + cfg.score_batch_size], rng, counts)
            release_memory()  # each batch's KV caches: freed, and handed back rather than kept by the heap
        if not seqs:
            raise ValueError(f"{task.name}: no candidate pairs (all candidates tied); raise turn_fraction or candidates")
        self.stats.update({"sweet/turns": counts["turns"], "sweet/pairs": counts["pairs"],
                           "sweet/unique_candidates": counts["candidates"] / max(1, counts["turns"])})
        log.info("sweet: %d pairs from %d turns (%.1f distinct candidates a turn)", counts["pairs"], counts["turns"],
                 self.stats["sweet/unique_candidates"])
        return TurnPairs(PackedSequences.build(seqs), cfg.beta, cfg.nll_coef, self.tokenizer.pad_token_id)

    def scorer(self):
        """The critic that ranks candidate turns: the task's oracle, or the (cached) critic stage's."""
        cfg = self.cfg
        if cfg.critic == "oracle":
            return oracle_scorer(cfg.task_info, self.task.name, self.tokenizer)
        critic_dir = critic_checkpoint(cfg, self.task, self.engine, self.tokenizer, self.logger, self.seed, self.bc_dir)
        trained = critic_dir / "critic_metrics.json"
        if trained.exists():  # the critic stage's own fit (absent for a user's critic_from)
            self.stats = {f"sweet/critic_{k}": v for k, v in json.loads(trained.read_text()).items()}
            health = cached_unseen_health(cfg, self.task, self.tokenizer, self.engine, self.seed, critic_dir, self.bc_dir)
            self.stats.update({f"sweet/critic_{k}": v for k, v in health.items()})
        return SCORERS[cfg.critic](critic_dir, self.bc_dir, cfg.critic_stage.beta, self.engine)

    def pick_turns(self, rng: random.Random) -> dict[int, list[int]]:
        """{episode: its agent turns (by order)}: each turn with probability `turn_fraction`, then, in random order,
        only as many as the step budget can use (pairs_per_turn pairs a turn, with a quarter to spare)."""
        turns = [(e, k) for e, ep in enumerate(self.task.episodes()) for k in range(ep.num_actions)
                 if rng.random() < self.cfg.turn_fraction]
        rng.shuffle(turns)
        if getattr(self.cfg, "epochs", None) is None:
            turns = turns[: math.ceil(1.25 * self.cfg.steps * self.cfg.batch_size / self.cfg.pairs_per_turn)]
        picked: dict[int, list[int]] = {}
        for e, k in sorted(turns):
            picked.setdefault(e, []).append(k)
        return picked

    def turn_state(self, policy, history, context: str | None) -> tuple[list[int], list[int], list[int]]:
        """(the actor's prompt, `c`'s tokens, the critic's history window after `c`) at one dataset turn."""
        prompt = policy.prompt_ids(history)
        if context is None:
            return prompt, [], prompt
        c = list(policy.encode(context))
        return prompt, c, prompt_ids(history, policy.window, policy.encode, policy.max_input_tokens - len(c))

    def paired_candidates(self, policy, scorer, states, rng: random.Random, counts: dict) -> list[TokenSequence]:
        """Sample, score and pair candidates at these states (prompt, c, the critic's history window, true state):
        two sequences (prompt + turn) per pair."""
        prompts = [p for p, _, _, _ in states]
        rows = sample_candidates(policy.model, prompts, self.cfg.candidates, policy.stop_mask,
                                 self.tokenizer.pad_token_id, policy.max_new_tokens, self.cfg.temperature,
                                 policy.sampling_generator())
        texts = [list(dict.fromkeys(end_turn(self.tokenizer.decode(r, skip_special_tokens=True)) for r in turn))
                 for turn in rows]
        owner = [s for s, turn in enumerate(texts) for _ in turn]
        conts = [list(policy.encode(t)) for turn in texts for t in turn]
        ends = list(itertools.accumulate(len(turn) for turn in texts))
        longest = [max(len(c) for c in conts[end - len(turn) : end]) for turn, end in zip(texts, ends)]
        prompts, prefixes = fit_states(states, longest, self.max_length)
        flat = scorer.scores(prefixes, owner, conts, self.tokenizer.pad_token_id, [t for _, _, _, t in states])
        out, start = [], 0
        for prompt, turn in zip(prompts, texts):
            scores, cands = flat[start : start + len(turn)], conts[start : start + len(turn)]
            start += len(turn)
            for hi, lo in candidate_pairs(scores, self.cfg.pairs_per_turn, rng):
                out += [action_sequence(prompt, cands[hi]), action_sequence(prompt, cands[lo])]
            counts["turns"], counts["candidates"] = counts["turns"] + 1, counts["candidates"] + len(turn)
        counts["pairs"] += len(out) // 2
        return out


def fit_states(states, longest: Sequence[int], max_length: int) -> tuple[list[list[int]], list[list[int]]]:
    """(actor prompts, critic prefixes) left-trimmed so each state's longest candidate still fits in `max_length`.

    A re-encoded candidate can run a token or two past `max_new_tokens` (the newline `end_turn` appends), and the
    prompts were cut for `max_new_tokens`: the history loses its oldest tokens, `c` (before it) is never cut."""
    prompts, prefixes = [], []
    for (prompt, c, window, _), n in zip(states, longest):
        room = max_length - n
        if len(c) >= room:
            raise ValueError(f"c is {len(c)} tokens, more than the {room} left for it and its history beside a "
                             f"{n}-token candidate (max length {max_length})")
        prompts.append(prompt[max(0, len(prompt) - room):])
        prefixes.append(c + window[max(0, len(window) - (room - len(c))):])
    return prompts, prefixes


def oracle_scorer(infos: dict[str, TaskInfo], task_name: str, tokenizer) -> OracleScorer:
    """`critic=oracle`'s scorer: the task's oracle credit (`task_info.<task>.oracle`), or an error naming the tasks
    that have one."""
    oracle = task_info_for(infos, task_name).oracle
    if oracle is None:
        raise ValueError(f"critic=oracle: task {task_name} has no oracle (task_info.<task>.oracle); tasks with one: "
                         f"{sorted(t for t, info in infos.items() if info.oracle)}")
    return OracleScorer(get_method(oracle), tokenizer)


OBJECTIVES = {"turn": SweetTrainer.turn_items, "trajectory_dpo": SweetTrainer.trajectory_dpo_items}


def action_sequence(prompt: list[int], action: list[int]) -> TokenSequence:
    """A prompt (environment tokens) followed by one agent turn."""
    turn = TokenSequence(np.asarray(action, dtype=np.int32), np.ones(len(action), bool),
                         np.zeros(len(action), np.float32), False)
    return prefixed(turn, np.asarray(prompt, dtype=np.int32))
