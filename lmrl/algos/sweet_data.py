"""SWEET-RL's training data: sequences that carry `c`, and the two pairwise objectives.

- `context_sequences`: an episode's token sequences with `c` in front as an environment segment
  (whole-history tasks: one `c` before the dialogue; windowed tasks: each turn's own `c_t` before
  its window).  The dialogue is left-truncated; `c` never is.
- `TrajectoryPairs`: Bradley–Terry on (chosen, rejected) trajectories of one task, each scored by a
  sum over its turns.  SWEET-RL's critic (per turn: mean log-ratio to the frozen initial critic, or a
  value head) and the trajectory-DPO baseline (per turn: summed log-ratio to the initial actor, plus
  NLL on the chosen side) are both this.  A windowed task's trajectory is many sequences (PO maze:
  up to 101 of ~300 tokens), too many to differentiate on a CPU: `sample_turns` of them carry the
  gradient, scaled by n / k.  With `exact` the others are scored without gradients, so the loss sees
  the exact score; without it the score is the same unbiased n / k estimate (far cheaper).  With
  `alternatives` (a task's fixed moves; one turn a sequence) each turn's score is normalized over the
  moves playable there: each turn's prefix runs once, its KV cache repeated for every move
  (`move_options`, `option_logprobs`).
- `TurnPairs`: DPO on (prompt, chosen turn, rejected turn) triples, plus NLL on the chosen turn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from lmrl.algos.bc import hash_seed
from lmrl.algos.ppo import token_logprobs
from lmrl.algos.turn_losses import (
    bradley_terry_loss, dpo_loss, exact_value, group_sums, log_softmax_by_group, mean_nll, reverse_kl, sequence_logprob_sums,
    sum_scale, turn_ends, turn_means, turn_starts, turn_sums,
)
from lmrl.data.packed import PackedSequences
from lmrl.data.tokenize import SegmentEncoder, TokenSequence, collate, decision_points, episode_to_sequences
from lmrl.envs.base import Episode
from lmrl.rollout.candidates import continuation_logprobs, select_rows
from lmrl.rollout.sampler import left_pad, right_pad


def context_sequences(episode: Episode, contexts: list[str] | None, encode: SegmentEncoder, window: int | None,
                      max_length: int) -> list[TokenSequence]:
    """The episode's sequences as the policy's data has them, each with its turn's `c` in front."""
    if contexts is None:
        return list(episode_to_sequences(episode, encode, window, max_length))
    per_seq = contexts[:1] if window is None else contexts
    ids = [np.asarray(encode(c), dtype=np.int32) for c in per_seq]
    seqs = list(episode_to_sequences(episode, encode, window, max_length - max(len(x) for x in ids)))
    return [prefixed(s, c) for s, c in zip(seqs, ids, strict=True)]


def prefixed(seq: TokenSequence, prefix: np.ndarray) -> TokenSequence:
    """`seq` with environment tokens `prefix` in front (no reward, not decisions)."""
    return TokenSequence(np.concatenate([prefix, seq.input_ids]).astype(np.int32),
                         np.concatenate([np.zeros(len(prefix), bool), seq.action_mask]),
                         np.concatenate([np.zeros(len(prefix), np.float32), seq.rewards]), seq.done)


class TrajectorySource:
    """The token sequences of a list of episodes, indexed flat (trajectory t owns `offsets[t]:offsets[t+1]`) and
    tokenized on first use: a step reads a few turns of a few trajectories, so most are never built."""

    def __init__(self, episodes: Sequence[Episode], contexts, encode: SegmentEncoder, window: int | None,
                 max_length: int):
        self.episodes, self.contexts, self.encode = episodes, contexts, encode
        self.window, self.max_length = window, max_length
        sizes = [1 if window is None else ep.num_actions for ep in episodes]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self._built: dict[int, list[TokenSequence]] = {}

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def trajectory(self, t: int) -> list[TokenSequence]:
        if t not in self._built:
            ep = self.episodes[t]
            contexts = self.contexts(ep) if self.contexts is not None else None
            self._built[t] = context_sequences(ep, contexts, self.encode, self.window, self.max_length)
        return self._built[t]

    def __getitem__(self, i: int) -> TokenSequence:
        t = int(np.searchsorted(self.offsets, i, side="right")) - 1
        return self.trajectory(t)[i - int(self.offsets[t])]

    def __iter__(self):
        return (s for t in range(len(self.episodes)) for s in self.trajectory(t))


def split_turn(seq: TokenSequence) -> tuple[np.ndarray, np.ndarray]:
    """(the tokens before the sequence's one agent turn, the turn), the turn at the sequence's end."""
    decide = np.flatnonzero(seq.action_mask)
    start = int(decide[0]) if len(decide) else len(seq)
    if len(decide) == 0 or len(decide) != len(seq) - start:
        raise ValueError("normalizing over a task's moves needs one agent turn at the end of each sequence "
                         "(a windowed task, one move a sequence)")
    return seq.input_ids[:start], seq.input_ids[start:]


def move_options(seqs: Sequence[TokenSequence], moves: Sequence[np.ndarray], pad_id: int) -> dict:
    """Each sequence's prefix (left-padded: its last token in the last column) and its options: every one of
    `moves` and the sequence's own turn when it is none of them (right-padded), with each option's prefix
    (`owner`) and the option that was played (`taken`, one per sequence)."""
    prefixes, options, owner, taken = [], [], [], []
    for r, seq in enumerate(seqs):
        prefix, turn = split_turn(seq)
        prefixes.append(prefix.tolist())
        played = next((k for k, m in enumerate(moves) if np.array_equal(m, turn)), None)
        row_moves = list(moves) if played is not None else [*moves, turn]
        taken.append(len(options) + (played if played is not None else len(moves)))
        options += [m.tolist() for m in row_moves]
        owner += [r] * len(row_moves)
    ids, attn = left_pad(prefixes, pad_id)
    opt_ids, opt_mask = right_pad(options, pad_id)
    return {"input_ids": ids, "attention_mask": attn, "options": opt_ids, "options_mask": opt_mask,
            "owner": torch.tensor(owner, dtype=torch.long), "taken": torch.tensor(taken, dtype=torch.long)}


def option_logprobs(forward, batch: dict) -> torch.Tensor:
    """log p of every option token [n_options, width] (0 at padding): each prefix runs once (with gradients when
    `forward` has them), its KV cache repeated for its options."""
    attn = batch["attention_mask"]
    positions = (attn.cumsum(-1) - 1).clamp(min=0)
    out = forward(input_ids=batch["input_ids"], attention_mask=attn, position_ids=positions, use_cache=True,
                  logits_to_keep=1)
    owner, ids, mask = batch["owner"], batch["options"], batch["options_mask"]
    past = select_rows(out.past_key_values, owner)
    steps = (positions[:, -1] + 1).index_select(0, owner)[:, None] + torch.arange(ids.shape[1], device=ids.device)
    cont = forward(input_ids=ids, attention_mask=torch.cat([attn.index_select(0, owner), mask], dim=-1),
                   position_ids=steps, past_key_values=past, use_cache=True)
    logp = continuation_logprobs(out.logits[:, -1].index_select(0, owner), cont.logits, ids)
    return logp * mask


def count_turns(seq: TokenSequence) -> int:
    """The agent turns a sequence scores: runs of decision tokens (token 0 is never a decision)."""
    decide = seq.action_mask[1:]
    return int(decide[0]) + int(np.sum(decide[1:] & ~decide[:-1])) if len(decide) else 0


# -- how a sequence is scored -------------------------------------------------------------------------
def turn_rows(decide: torch.Tensor) -> torch.Tensor:
    """[n_turns]: the row of every turn, in `turn_index` order."""
    return turn_starts(decide).nonzero()[:, 0]


@dataclass
class LogRatio:
    """Σ_turns reduce(log π) per sequence; a trajectory's score is β · (that − the reference's)."""

    beta: float
    per_turn: str = "mean"  # SWEET-RL's critic averages each turn's tokens; DPO sums them
    uses_reference = True

    def sequence_scores(self, out, batch: dict) -> torch.Tensor:
        decide = decision_points(batch["action_mask"], batch["attention_mask"])
        logp = token_logprobs(out.logits, batch["input_ids"][:, 1:])
        turns = turn_means(logp, decide) if self.per_turn == "mean" else turn_sums(logp, decide)
        return group_sums(turns, turn_rows(decide), decide.shape[0])

    @property
    def weight(self) -> float:
        return self.beta


@dataclass
class HeadValue:
    """A value head's output after each turn's last token (it has read c, the history and the turn),
    summed over the sequence's turns: the `critic=head` ablation."""

    uses_reference = False
    weight = 1.0

    def sequence_scores(self, out, batch: dict) -> torch.Tensor:
        decide = decision_points(batch["action_mask"], batch["attention_mask"])
        ends = turn_ends(decide)
        values = out.v[:, 1:][ends].float()  # the hidden state that has read the turn's last token
        return group_sums(values, ends.nonzero()[:, 0], decide.shape[0])


# -- trajectory pairs ------------------------------------------------------------------------------------
class TrajectoryPairs:
    """Pairs of trajectories as training items (item j is pair j); see the module docstring."""

    def __init__(self, seqs: TrajectorySource, traj_offsets: Sequence[int], pairs: Sequence[tuple[int, int]], rule,
                 sample_turns: int, exact: bool, chunk: int, pad_id: int, seed: int, nll_coef: float = 0.0,
                 aggregate: str = "sum", kl_coef: float = 0.0, alternatives: Sequence[np.ndarray] | None = None):
        self.seqs, self.traj_offsets, self.pairs, self.rule = seqs, np.asarray(traj_offsets), list(pairs), rule
        # A task's fixed moves: each turn's score is normalized over them (None: the raw per-turn score).
        self.alternatives = None if alternatives is None else [np.asarray(a, dtype=np.int32) for a in alternatives]
        self.sample_turns, self.exact, self.chunk, self.pad_id = sample_turns, exact, chunk, pad_id
        self.aggregate = aggregate  # a trajectory's score: the sum of its turns' scores, or their mean
        self.kl_coef = kl_coef  # x KL(model || reference) at the sampled turns' tokens (log-ratio rules only)
        self.seed, self.nll_coef = seed, nll_coef
        self.ref_known = np.zeros(len(seqs), dtype=bool)  # reference scores are cached: the reference is frozen
        self.ref_table: torch.Tensor | None = None

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, j: int) -> int:
        return j

    def collate(self, pair_ids: list[int], step: int) -> dict:
        """Host tensors for these pairs: the sampled (gradient) sequences, with `exact` the others in chunks, the
        reference's missing scores, each sequence's trajectory and weight (n / k for a sampled estimate)."""
        trajs = list(dict.fromkeys(t for j in pair_ids for t in self.pairs[j]))
        local = {t: k for k, t in enumerate(trajs)}
        g = np.random.default_rng(hash_seed(self.seed, step, *pair_ids))
        grad, rest, grad_scale, weight = [], [], [], []
        for k, t in enumerate(trajs):
            ids = np.arange(self.traj_offsets[t], self.traj_offsets[t + 1])
            k_turns = len(ids) if not self.sample_turns else min(len(ids), self.sample_turns)
            pick = np.sort(g.choice(ids, k_turns, replace=False))
            picked = set(pick.tolist())
            grad += [(k, int(i)) for i in pick]
            scale = sum_scale(len(ids), len(pick))
            grad_scale += [scale] * len(pick)
            if self.exact:  # the others are scored without gradients: the trajectory's score is exact
                rest += [(k, int(i)) for i in ids if int(i) not in picked]
            weight += [1.0 if self.exact else scale] * len(pick)
        weight += [1.0] * len(rest)
        everything = grad + rest
        missing = [i for _, i in everything if self.rule.uses_reference and not self.ref_known[i]]
        self.ref_known[missing] = True
        chunks = lambda rows: [self.rows([self.seqs[i] for i in rows[a : a + self.chunk]])  # noqa: E731
                               for a in range(0, len(rows), self.chunk)]
        return {"grad": self.rows([self.seqs[i] for _, i in grad]), "rest": chunks([i for _, i in rest]),
                "ref": chunks(missing), "ref_ids": torch.tensor(missing, dtype=torch.long),
                "grad_traj": torch.tensor([k for k, _ in grad]), "grad_scale": torch.tensor(grad_scale),
                "all_ids": torch.tensor([i for _, i in everything], dtype=torch.long),
                "all_traj": torch.tensor([k for k, _ in everything]), "all_weight": torch.tensor(weight),
                "all_turns": torch.tensor([count_turns(self.seqs[i]) for _, i in everything], dtype=torch.float32),
                "n_traj": len(trajs), "chosen": torch.tensor([local[self.pairs[j][0]] for j in pair_ids]),
                "rejected": torch.tensor([local[self.pairs[j][1]] for j in pair_ids]),
                "num_tokens": sum(len(self.seqs[i]) for _, i in everything)}

    def rows(self, seqs: list[TokenSequence]) -> dict:
        """A batch of sequences; with `alternatives`, also their prefixes and every move playable at their turn."""
        batch = collate(seqs, self.pad_id)
        if self.alternatives is not None:
            batch["moves"] = move_options(seqs, self.alternatives, self.pad_id)
        return batch

    def scores(self, forward, rows: dict, out=None) -> torch.Tensor:
        """The rule's score of every row of a `rows` batch (its forward output `out` if already run); with
        `alternatives`, the turn's score normalized over the moves playable there (prefix run once)."""
        if self.alternatives is None:
            out = forward(input_ids=rows["input_ids"], attention_mask=rows["attention_mask"]) if out is None else out
            return self.rule.sequence_scores(out, rows)
        moves = rows["moves"]
        logp, mask = option_logprobs(forward, moves), moves["options_mask"]
        per_option = logp.sum(1) / (mask.sum(1) if self.rule.per_turn == "mean" else 1)
        return log_softmax_by_group(per_option, moves["owner"], moves["taken"].shape[0])[moves["taken"]]

    def reference_scores(self, reference, batch: dict) -> torch.Tensor:
        """The reference's score of every sequence in the batch (computed once per sequence, then cached)."""
        ids = batch["all_ids"]
        if self.ref_table is None:
            self.ref_table = torch.full((len(self.seqs),), float("nan"), device=ids.device)
        with torch.no_grad():
            for chunk, chunk_ids in zip(batch["ref"], batch["ref_ids"].split(self.chunk)):
                self.ref_table.index_copy_(0, chunk_ids, self.scores(reference, chunk).float())
        return self.ref_table[ids]

    def loss(self, forward, reference, batch: dict) -> tuple[torch.Tensor, dict]:
        """BT on the pairs' trajectory scores (+ nll_coef x NLL of the chosen trajectories' sampled turns)."""
        g = batch["grad"]
        # with `alternatives` the turns are scored from their prefixes; NLL and KL need the whole rows' output
        needs_rows = self.alternatives is None or self.nll_coef or self.kl_coef
        out = forward(input_ids=g["input_ids"], attention_mask=g["attention_mask"]) if needs_rows else None
        grad_scores = self.scores(forward, g, out)  # [n_grad], differentiable
        with torch.no_grad():
            rest = [self.scores(forward, c) for c in batch["rest"]]
        scores = torch.cat([grad_scores.detach(), *rest])  # in `all_ids` order
        if self.rule.uses_reference:
            scores = scores - self.reference_scores(reference, batch)
        n, w = batch["n_traj"], self.rule.weight
        if self.aggregate == "mean":  # divide by the turns each trajectory's score stands for
            w = w / group_sums(batch["all_turns"] * batch["all_weight"], batch["all_traj"], n)
        value = w * group_sums(scores * batch["all_weight"], batch["all_traj"], n)  # exact, or the sampled estimate
        estimate = w * group_sums(grad_scores * batch["grad_scale"], batch["grad_traj"], n)
        traj = exact_value(value, estimate)
        loss, logs = bradley_terry_loss(traj[batch["chosen"]], traj[batch["rejected"]])
        decide = decision_points(g["action_mask"], g["attention_mask"])
        if self.nll_coef:
            chosen_rows = torch.isin(batch["grad_traj"], batch["chosen"])
            nll = mean_nll(token_logprobs(out.logits, g["input_ids"][:, 1:]), decide & chosen_rows[:, None])
            loss, logs = loss + self.nll_coef * nll, {**logs, "nll": nll.detach()}
        if self.kl_coef:
            with torch.no_grad():
                ref_logits = reference(input_ids=g["input_ids"], attention_mask=g["attention_mask"]).logits
            kl = reverse_kl(out.logits[:, :-1][decide], ref_logits[:, :-1][decide])
            loss, logs = loss + self.kl_coef * kl, {**logs, "kl": kl.detach()}
        return loss, logs


# -- turn pairs -----------------------------------------------------------------------------------------
class TurnPairs:
    """Pair j is sequences 2j (prompt + chosen turn) and 2j + 1 (prompt + rejected turn)."""

    def __init__(self, seqs: PackedSequences, beta: float, nll_coef: float, pad_id: int):
        self.seqs, self.beta, self.nll_coef, self.pad_id = seqs, beta, nll_coef, pad_id

    def __len__(self) -> int:
        return len(self.seqs) // 2

    def __getitem__(self, j: int) -> int:
        return j

    def collate(self, pair_ids: list[int], step: int) -> dict:
        rows = [self.seqs[2 * j] for j in pair_ids] + [self.seqs[2 * j + 1] for j in pair_ids]
        return {**collate(rows, self.pad_id), "num_tokens": sum(len(s) for s in rows)}

    def loss(self, forward, reference, batch: dict) -> tuple[torch.Tensor, dict]:
        """DPO with summed log-probs of each turn, + nll_coef x mean NLL of the chosen turns."""
        ids, attn = batch["input_ids"], batch["attention_mask"]
        decide = decision_points(batch["action_mask"], attn)
        logp = token_logprobs(forward(input_ids=ids, attention_mask=attn).logits, ids[:, 1:])
        with torch.no_grad():
            ref = sequence_logprob_sums(token_logprobs(reference(input_ids=ids, attention_mask=attn).logits, ids[:, 1:]),
                                        decide)
        sums, p = sequence_logprob_sums(logp, decide), ids.shape[0] // 2
        loss, logs = dpo_loss(sums[:p], sums[p:], ref[:p], ref[p:], self.beta)
        nll = mean_nll(logp[:p], decide[:p])
        return loss + self.nll_coef * nll, {**logs, "nll": nll.detach()}
