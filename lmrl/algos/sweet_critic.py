"""SWEET-RL's critic stage (`lmrl/algos/sweet.py` runs it; cached like the BC stage).

An LM from the BC stage that reads `c` (the task's whitelisted `info`, `lmrl/algos/privileged.py`)
before the dialogue, fitted with Bradley–Terry on pairs of trajectories of one task: a best-return
attempt against each strictly worse one, a trajectory scored by its turns' advantages
A(o_t, a_t, c) = β · (mean log π_critic − mean log π_ref) over the turn's tokens (π_ref: the frozen
BC stage reading the same input), summed over the trajectory (or averaged, `aggregate=mean`).
`critic=head`: A is a value head's output after the turn; `critic=oracle` (no critic stage): the
task's oracle credit from the true state (`TaskInfo.oracle`, the maze only), a sanity check that
the actor learns when its credit is right.  The scorers give A of candidate turns at dataset
states, each state's prefix run once.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch
from transformers import AutoModelForCausalLM

from lmrl.algos.base import OptimFields
from lmrl.algos.bc import BCTrainer, cached_stage
from lmrl.algos.privileged import TaskInfo, task_info_for
from lmrl.algos.sweet_data import HeadValue, LogRatio, TrajectoryPairs, TrajectorySource
from lmrl.algos.turn_losses import PAIRINGS, ratio_advantages, trajectory_pairs
from lmrl.checkpoint import Checkpointer
from lmrl.data.tokenize import SegmentEncoder
from lmrl.dist import is_main, rank, world_size
from lmrl.envs.base import Episode
from lmrl.models.factory import model_max_length
from lmrl.models.fused import fast_lm
from lmrl.models.value import ValueModel
from lmrl.rollout.candidates import continuation_logprobs, continue_prefixes
from lmrl.tracking import StageLogger
from lmrl.utils import atomic_write_text

log = logging.getLogger(__name__)
AGGREGATES = ("sum", "mean")
# A turn's score as is, or normalized over the task's fixed moves (`task.actions`, the maze's four).
NORMALIZE = ("none", "actions")


@dataclass
class CriticConfig(OptimFields):
    """SWEET-RL's critic stage (`algo.critic_stage`): its optimization, the DPO-style beta of its advantages, how a
    trajectory's score is formed (`aggregate`, `normalize`), which pairs it trains on (`pairing`, `pairs`, `halves`),
    and the KL term that keeps its log-ratio an advantage."""

    name: str = "sweet_critic"
    steps: int = 200
    # Trajectory pairs per step.
    batch_size: int = 4
    lr: float = 1e-4
    # A = beta * mean log-ratio per turn (the original's critic DPO beta).
    beta: float = 0.1
    # Windowed tasks: sequences (turns) per trajectory scored with gradients, scaled by n / k (0 = all).
    sample_turns: int = 8
    # Score the other turns without gradients, so a trajectory's score is exact (slower; false: the estimate).
    exact_scores: bool = False
    # A trajectory's score: the sum of its turns' advantages, or their mean (length-blind;
    # docs/algorithms/turn-level.md).
    aggregate: str = "sum"
    # x KL(critic || initial critic) at the scored turns' tokens: keeps log pi_c / pi_ref an advantage
    # (docs/algorithms/turn-level.md).
    kl_coef: float = 0.0
    # Trajectory pairs drawn from the dataset (null = steps x batch_size; at most all of them).
    pairs: int | None = None
    # Within a task: `best` attempt vs each lower one (the original), or `all` attempts vs each lower one.
    pairing: str = "best"
    # none: A from the LM's log-ratio as is; actions: each turn's log-probs normalized over the task's moves
    # (the reply and every one of `task.actions`), so the critic cannot lower every move at once
    # (docs/algorithms/turn-level.md).
    normalize: str = "none"
    # Train on pairs cut after the same number of turns (half the shorter side's): no outcome and no length to read,
    # so ordering them needs credit for early turns (docs/algorithms/turn-level.md).  false: whole trajectories.
    halves: bool = False
    log_every: int = 25

    def validate(self) -> list[str]:
        problems = super().validate()
        if self.batch_tokens is not None:
            problems.append("batch_tokens must be null (batches are trajectory pairs)")
        if self.beta <= 0 or self.sample_turns < 0 or (self.pairs is not None and self.pairs < 1):
            problems.append("beta must be > 0, sample_turns >= 0, pairs >= 1 or null")
        if self.kl_coef < 0:
            problems.append(f"kl_coef must be >= 0 (got {self.kl_coef})")
        if self.aggregate not in AGGREGATES:
            problems.append(f"aggregate must be one of {AGGREGATES} (got {self.aggregate})")
        if self.pairing not in PAIRINGS:
            problems.append(f"pairing must be one of {PAIRINGS} (got {self.pairing})")
        if self.normalize not in NORMALIZE:
            problems.append(f"normalize must be one of {NORMALIZE} (got {self.normalize})")
        return problems


def load_lm(directory: Path) -> torch.nn.Module:
    """A causal LM with dropout off: log-probs of a DPO or Bradley-Terry pair must be deterministic."""
    lm = AutoModelForCausalLM.from_pretrained(directory)
    for module in lm.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    return lm


def setup_offline(trainer, model: torch.nn.Module, items, curves: bool = False) -> None:
    """The offline fit loop's state for pair items: `steps` (or `epochs` passes), and the engine; with `curves`, the
    trained model is evaluated as a policy at `curve_points` (the actor; a critic is not a policy)."""
    trainer.seqs, trainer.run_dir = items, getattr(trainer, "run_dir", None)
    optim = trainer.offline_optim()  # BC's: steps (or epochs), schedule and curve interval
    if not curves:
        trainer.eval_every = 0
    trainer.engine.setup(model, optim)


def trajectory_items(task, info: TaskInfo, tokenizer, max_length: int, with_context: bool, rule, n_pairs: int,
                     sample_turns: int, exact: bool, chunk: int, seed: int, nll_coef: float = 0.0,
                     aggregate: str = "sum", kl_coef: float = 0.0, pairing: str = "best",
                     normalize: str = "none", pairs: list[tuple[int, int]] | None = None,
                     halves: bool = False) -> TrajectoryPairs:
    """The dataset's trajectory pairs (`n_pairs` drawn at random, or the dataset-index `pairs` given), each
    trajectory tokenized with its `c`.  `halves`: both trajectories of a pair cut after the same number of agent
    turns, half the shorter one's (`first_turns`): neither outcome nor length is left to tell them apart."""
    if pairs is None:
        pairs = drawn_pairs(task, info, n_pairs, pairing, seed)[0]
    needed = {t for p in pairs for t in p}
    full = {i: ep for i, ep in enumerate(task.episodes()) if i in needed}
    cut = {p: max(1, min(full[p[0]].num_actions, full[p[1]].num_actions) // 2) if halves else None for p in pairs}
    used = sorted({(t, cut[p]) for p in pairs for t in p}, key=lambda e: (e[0], e[1] or 0))
    local = {e: k for k, e in enumerate(used)}
    episodes = [first_turns(full[t], k) for t, k in used]
    # a cut episode's c: the whole episode replayed (the env checks the reply to every turn, the last kept one's too)
    whole = {id(ep): full[t] for ep, (t, _) in zip(episodes, used)}
    contexts = (lambda ep: info.contexts(whole[id(ep)], task.make_env)[: ep.num_actions]) if with_context else None
    source = TrajectorySource(episodes, contexts, SegmentEncoder(tokenizer), task.history_window, max_length)
    log.info("%s: %d trajectory pairs over %d trajectories (%d sequences)", task.name, len(pairs), len(used),
             len(source))
    return TrajectoryPairs(source, source.offsets, [(local[a, cut[a, b]], local[b, cut[a, b]]) for a, b in pairs],
                           rule, sample_turns, exact, chunk, tokenizer.pad_token_id, seed, nll_coef, aggregate,
                           kl_coef, task_moves(task, tokenizer) if normalize == "actions" else None)


def first_turns(episode: Episode, keep: int | None) -> Episode:
    """The episode up to its first `keep` agent turns, cut right after the last of them: what follows it (later
    replies, the buyer's verdict, the env's last message) is gone.  None: the whole episode."""
    if keep is None or keep >= episode.num_actions:
        return episode
    end = [i for i, turn in enumerate(episode.turns) if turn.is_action][keep - 1] + 1
    return dataclasses.replace(episode, turns=episode.turns[:end], rewards=episode.rewards[:end], done=False)


def drawn_pairs(task, info: TaskInfo, n_pairs: int, pairing: str, seed: int) -> tuple[list, list, list]:
    """(the critic stage's `n_pairs` pairs drawn at random, every pair of the dataset, each episode's task key)."""
    returns, keys = [], []  # one streaming pass: the episodes themselves are not kept
    for ep in task.episodes():
        returns.append(ep.total_return)
        keys.append(info.task_key(ep))
    every = trajectory_pairs(returns, keys, pairing)
    pairs = balanced(every, keys, n_pairs, random.Random(f"sweet-pairs:{seed}"))
    if not pairs:
        raise ValueError(f"{task.name}: no two attempts at one task with different returns; SWEET-RL needs several "
                         "attempts per task (for generated tasks: task.data.recipe.attempts_per_task)")
    return pairs, every, keys


def unseen_pairs(every: list[tuple[int, int]], drawn: list[tuple[int, int]], keys: list, n: int,
                 rng: random.Random) -> tuple[list[tuple[int, int]], bool]:
    """Up to `n` pairs of `every` outside `drawn`, and whether their tasks are unseen too: from tasks with no drawn
    pair when any are left (Car Dealer's buyers, a dialogue task's secrets), else from the drawn tasks (the maze's
    25 starts are all drawn)."""
    seen_tasks, seen = {keys[a] for a, _ in drawn}, set(drawn)
    fresh = [p for p in every if keys[p[0]] not in seen_tasks]
    return balanced(fresh or [p for p in every if p not in seen], keys, n, rng), bool(fresh)


def task_moves(task, tokenizer) -> list[list[int]]:
    """The token ids of the task's fixed moves (`task.actions`), as its turns are encoded."""
    actions = task.cfg.get("actions")
    if not actions:
        raise ValueError(f"{task.name}: critic_stage.normalize=actions needs a task with a fixed action list "
                         "(task.actions: the maze's); this one has none, use normalize=none")
    encode = SegmentEncoder(tokenizer)
    return [list(encode(a)) for a in actions]


def balanced(pairs: list[tuple[int, int]], tasks: list, n: int, rng: random.Random) -> list[tuple[int, int]]:
    """`n` of the pairs (all when there are fewer), drawn round-robin over tasks so that each task gives as many
    as it can (the maze's dead ends have ~250 attempts each, the other starts ~15), in random order."""
    by_task: dict = {}
    for pair in pairs:
        by_task.setdefault(tasks[pair[0]], []).append(pair)
    queues = list(by_task.values())
    for queue in queues:
        rng.shuffle(queue)
    rng.shuffle(queues)
    picked = [q[i] for i in range(max(map(len, queues), default=0)) for q in queues if i < len(q)][:n]
    rng.shuffle(picked)
    return picked


class PairTrainer(BCTrainer):
    """BCTrainer's fit loop over pair items (`TrajectoryPairs` or `TurnPairs` in `self.seqs`)."""

    def sequences(self):
        """The pair items set up in `__init__` (`setup_offline`)."""
        return self.seqs

    def batches(self, items, start: int = 0, salt: int = 0):
        """Endless shuffled epochs of pair batches from batch `start` on (epoch e: a function of seed, salt, e);
        with several processes each takes an interleaved share of every batch."""
        world, r = world_size(), rank()
        for epoch in itertools.count():
            plan = self.epoch_plan(items, epoch, salt)
            yield from (self.collate(chunk[r::world]) for chunk in plan[start:])
            start = max(0, start - len(plan))

    def collate(self, items: list[int]) -> dict:
        """The batch of the pair items at indices `items`, on the engine's device."""
        return self.engine.to_device(self.seqs.collate(items, self.engine.global_step))

    def loss(self, batch: dict) -> tuple[torch.Tensor, dict]:
        """The pair items' own objective on a batch, and its logs: Bradley–Terry on trajectory scores
        (`TrajectoryPairs`: the critic, and trajectory DPO) or DPO on turn pairs (`TurnPairs`: the actor)."""
        return self.seqs.loss(self.engine.forward, self.reference, batch)


class CriticStage(PairTrainer):
    """The critic: Bradley–Terry on trajectory pairs, reading `c` (or not, `privileged=false`)."""

    config_class = CriticConfig

    def __init__(self, cfg: CriticConfig, task, engine, tokenizer, logger, seed: int, bc_dir: Path, head: bool,
                 info: TaskInfo, privileged: bool, chunk: int, checkpointer: Checkpointer | None = None):
        self.cfg, self.task, self.engine, self.tokenizer, self.logger = cfg, task, engine, tokenizer, logger
        self.seed, self.checkpointer, self.head = seed, checkpointer, head
        lm = load_lm(bc_dir)
        self.max_length = model_max_length(lm)
        rule = HeadValue() if head else LogRatio(cfg.beta, "mean")
        items = trajectory_items(task, info, tokenizer, self.max_length, privileged, rule,
                                 cfg.pairs or cfg.steps * cfg.batch_size, cfg.sample_turns, cfg.exact_scores, chunk,
                                 seed, aggregate=cfg.aggregate, kl_coef=0.0 if head else cfg.kl_coef,
                                 pairing=cfg.pairing, normalize=cfg.normalize, halves=cfg.halves)
        setup_offline(self, ValueModel(lm, 0, True) if head else lm, items)
        self.reference = engine.prepare_frozen(load_lm(bc_dir)) if rule.uses_reference else None

    def save(self, directory: Path) -> None:
        """The critic LM (a value head critic: its trunk, and the head beside it) with the tokenizer."""
        model = self.engine.unwrap()
        (model.lm if self.head else model).save_pretrained(directory)
        self.tokenizer.save_pretrained(directory)
        if self.head:
            # host copies: the file loads anywhere, whatever device the head trained on
            torch.save({k: v.detach().cpu() for k, v in model.v_head.state_dict().items()},
                       Path(directory) / "value_head.pt")


# Held-out pairs the critic is checked on once trained (its stage's own pairs measure only the fit).
UNSEEN_PAIRS = 128


@torch.no_grad()
def unseen_pair_health(cfg, task, tokenizer, engine, seed: int, critic_dir: Path, bc_dir: Path,
                       n: int = UNSEEN_PAIRS) -> dict:
    """The trained critic (of a `SweetConfig`) on trajectory pairs its stage never drew: Bradley–Terry loss,
    the share it orders as the returns do, and the mean score margin; `fresh_tasks` says whether the pairs' tasks
    are unseen too (else the pairs are).  Every turn scored (exact trajectory scores).  `unseen_half_*`: the same
    pairs, both sides cut after the same number of turns (half the shorter side's): no outcome (a sale, a solved
    word) and no length is left in the text, so ordering them needs credit for early turns — where `c` can help."""
    st, head = cfg.critic_stage, cfg.critic == "head"
    info = task_info_for(cfg.task_info, task.name)
    lm = load_lm(critic_dir)
    max_length, model = model_max_length(lm), lm
    if head:
        model = ValueModel(lm, 0, True)
        model.v_head.load_state_dict(torch.load(Path(critic_dir) / "value_head.pt", map_location="cpu"))
    model = engine.prepare_frozen(model)
    reference = None if head else engine.prepare_frozen(load_lm(bc_dir))
    drawn, every, keys = drawn_pairs(task, info, st.pairs or st.steps * st.batch_size, st.pairing, seed)
    pairs, fresh = unseen_pairs(every, drawn, keys, n, random.Random(f"sweet-unseen:{seed}"))
    if not pairs:
        return {"unseen_pairs": 0}
    health = {"unseen_pairs": len(pairs), "unseen_fresh_tasks": fresh}
    per_batch = 1 if task.history_window is not None else 8  # windowed: a trajectory is up to ~100 sequences
    for halves, name in ((False, "unseen"), (True, "unseen_half")):
        items = trajectory_items(task, info, tokenizer, max_length, cfg.privileged,
                                 HeadValue() if head else LogRatio(st.beta, "mean"), 0, 0, False, cfg.score_batch_size,
                                 seed, aggregate=st.aggregate, pairing=st.pairing, normalize=st.normalize, pairs=pairs,
                                 halves=halves)
        totals = {"bt_loss": 0.0, "pair_accuracy": 0.0, "margin": 0.0}
        for start in range(0, len(items), per_batch):
            ids = list(range(start, min(len(items), start + per_batch)))
            loss, logs = items.loss(model, reference, engine.to_device(items.collate(ids, 0)))
            for key, value in (("bt_loss", loss), ("pair_accuracy", logs["pair_accuracy"]), ("margin", logs["margin"])):
                totals[key] += float(value) * len(ids)
        health.update({f"{name}_{k}": v / len(items) for k, v in totals.items()})
    return health


def cached_unseen_health(cfg, task, tokenizer, engine, seed: int, critic_dir: Path, bc_dir: Path) -> dict:
    """`unseen_pair_health` on `cfg.unseen_pairs` pairs (a quarter on windowed tasks), measured once per critic and
    kept beside it."""
    n = cfg.unseen_pairs if task.history_window is None else cfg.unseen_pairs // 4
    if n < 1 or cfg.critic not in SCORERS:
        return {}
    path = Path(critic_dir) / f"heldout_check2_{n}.json"
    if path.exists():
        return json.loads(path.read_text())
    health = unseen_pair_health(cfg, task, tokenizer, engine, seed, critic_dir, bc_dir, n)
    if is_main():
        atomic_write_text(path, json.dumps(health, indent=2))
    log.info("SWEET critic on %d unseen pairs: %s", health.get("unseen_pairs", 0), health)
    return health


# Critic options added after critics were cached, at the value that reproduces the earlier stage: left out of its
# key while they hold it, so the cached critics stay found.
NEUTRAL_STAGE = {"halves": False, "keep_best": False, "patience": 0, "keep_best_margin": 0.0}


def stage_key(cfg: CriticConfig) -> dict:
    return {k: v for k, v in dataclasses.asdict(cfg).items() if not (k in NEUTRAL_STAGE and v == NEUTRAL_STAGE[k])}


def critic_checkpoint(cfg, task, engine, tokenizer, logger, seed: int, bc_dir: Path, train: bool = True) -> Path:
    """The critic stage of a `SweetConfig`: trained once, cached by (dataset, BC stage, critic config, c, seed);
    `train=False`: it must be cached already."""
    if cfg.critic_from:
        return Path(cfg.critic_from)
    info = task_info_for(cfg.task_info, task.name)
    key = {"data": task.dataset_name(), "bc": str(bc_dir), "critic": cfg.critic, "privileged": cfg.privileged,
           "stage": stage_key(cfg.critic_stage), "info": dataclasses.asdict(info), "seed": seed}

    def build(partial: Path, tmp: Path) -> None:
        stage = CriticStage(cfg.critic_stage, task, engine.spawn(), tokenizer, StageLogger(logger, "critic_stage"), seed,
                            bc_dir, cfg.critic == "head", info, cfg.privileged, cfg.score_batch_size,
                            Checkpointer(partial / "checkpoints", every=max(1, cfg.critic_stage.steps // 4)))
        metrics = stage.fit()
        with stage.engine.gathered():
            if is_main():
                stage.save(tmp)
                (tmp / "critic_metrics.json").write_text(json.dumps(metrics, indent=2))

    return cached_stage(task, "sweet_critic", key, "SWEET critic", build if train else None)


# -- scoring candidate turns with a trained critic ------------------------------------------------------------
def continuation_scores(model, prefixes, owner, conts, pad_id) -> tuple[torch.Tensor, torch.Tensor]:
    """log p of every candidate token after its state's prefix [R, C], and the candidate tokens' mask [R, C]."""
    if not all(len(c) for c in conts):
        raise ValueError("an empty candidate turn has no tokens to score")
    first, out, ids, mask = continue_prefixes(model, prefixes, owner, conts, pad_id)
    return continuation_logprobs(first, out.logits, ids), mask


# Candidate rows a scorer runs per pass: each row holds its prefix's KV cache (a dialogue state ~500 tokens), and
# the teacher-forced pass keeps a second, extended copy and the attention weights, so 16 candidates at 64 states in
# one pass peaked at 8.05 GB on Guess My City (3.38 GB in chunks).  Rows are independent: the chunks change memory,
# not the scores.
SCORE_ROWS = 256


def owner_chunks(owner: Sequence[int], max_rows: int) -> list[tuple[range, range]]:
    """Split rows grouped by prefix (`owner` non-decreasing) into (prefixes, rows) ranges of at most `max_rows`
    rows each, never splitting a prefix's rows (one prefix with more rows is a chunk of its own)."""
    if any(b < a for a, b in zip(owner, owner[1:])):
        raise ValueError("candidate rows must be grouped by their prefix (owner non-decreasing)")
    runs = [(p, rows[0], rows[-1] + 1) for p, group in itertools.groupby(range(len(owner)), key=owner.__getitem__)
            for rows in [list(group)]]  # (prefix, first row, end row)
    chunks, start = [], 0
    for i in range(1, len(runs) + 1):
        if i == len(runs) or runs[i][2] - runs[start][1] > max_rows:
            chunks.append((range(runs[start][0], runs[i - 1][0] + 1), range(runs[start][1], runs[i - 1][2])))
            start = i
    return chunks


def chunked_scores(score_rows, prefixes, owner, conts, pad_id, max_rows: int = SCORE_ROWS) -> list[float]:
    """`score_rows(prefixes, owner, conts, pad_id) -> list[float]` over the rows in chunks of prefixes."""
    out = []
    for pre, rows in owner_chunks(list(owner), max_rows):
        out += score_rows([prefixes[p] for p in pre], [owner[r] - pre.start for r in rows],
                          [conts[r] for r in rows], pad_id)
    return out


class RatioScorer:
    """A(o_t, a, c) = beta * (mean log pi_critic(a) - mean log pi_ref(a)), the prefix run once per state."""

    def __init__(self, critic_dir: Path, bc_dir: Path, beta: float, engine):
        self.model = fast_lm(engine.place(load_lm(critic_dir)).eval())
        self.ref = fast_lm(engine.place(load_lm(bc_dir)).eval())
        self.beta = beta

    def scores(self, prefixes, owner, conts, pad_id, states=None) -> list[float]:
        return chunked_scores(self.score_rows, prefixes, owner, conts, pad_id)

    def score_rows(self, prefixes, owner, conts, pad_id) -> list[float]:
        logp, mask = continuation_scores(self.model, prefixes, owner, conts, pad_id)
        ref, _ = continuation_scores(self.ref, prefixes, owner, conts, pad_id)
        return ratio_advantages(logp, ref, mask, self.beta).tolist()  # each row is one turn


class HeadScorer:
    """A(o_t, a, c) = the value head after the candidate's last token."""

    def __init__(self, critic_dir: Path, bc_dir: Path, beta: float, engine):
        value = ValueModel(load_lm(critic_dir), 0, True)
        value.v_head.load_state_dict(torch.load(Path(critic_dir) / "value_head.pt", map_location="cpu"))
        self.model = engine.place(value).eval()

    def scores(self, prefixes, owner, conts, pad_id, states=None) -> list[float]:
        return chunked_scores(self.score_rows, prefixes, owner, conts, pad_id)

    def score_rows(self, prefixes, owner, conts, pad_id) -> list[float]:
        _, out, _, mask = continue_prefixes(self.model, prefixes, owner, conts, pad_id)
        last = (mask.sum(1) - 1)[:, None]
        return out.v.gather(1, last).squeeze(1).float().tolist()


class OracleScorer:
    """A(o_t, a, c) = the task's oracle credit of the decoded turn at the true state (`states`, one per prefix):
    no model, no critic stage."""

    def __init__(self, oracle, tokenizer):
        self.oracle, self.tokenizer = oracle, tokenizer

    def scores(self, prefixes, owner, conts, pad_id, states=None) -> list[float]:
        if states is None or len(states) != len(prefixes):
            raise ValueError("the oracle critic needs the true state of every prefix")
        decode = self.tokenizer.decode
        return [self.oracle(states[o], decode(c, skip_special_tokens=True)) for o, c in zip(owner, conts)]


# The learned critics, built from (critic_dir, bc_dir, beta, engine); `oracle` is built by the actor.
SCORERS = {"lm": RatioScorer, "head": HeadScorer}
