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
  the exact score; without it the score is the same unbiased n / k estimate (far cheaper).
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
    bradley_terry_loss, dpo_loss, exact_value, group_sums, mean_nll, reverse_kl, sequence_logprob_sums, sum_scale,
    turn_ends, turn_means, turn_starts, turn_sums,
)
from lmrl.data.packed import PackedSequences
from lmrl.data.tokenize import SegmentEncoder, TokenSequence, collate, decision_points, episode_to_sequences
from lmrl.envs.base import Episode


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
                 aggregate: str = "sum", kl_coef: float = 0.0):
        self.seqs, self.traj_offsets, self.pairs, self.rule = seqs, np.asarray(traj_offsets), list(pairs), rule
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
        chunks = lambda rows: [collate([self.seqs[i] for i in rows[a : a + self.chunk]], self.pad_id)  # noqa: E731
                               for a in range(0, len(rows), self.chunk)]
        return {"grad": collate([self.seqs[i] for _, i in grad], self.pad_id), "rest": chunks([i for _, i in rest]),
                "ref": chunks(missing), "ref_ids": torch.tensor(missing, dtype=torch.long),
                "grad_traj": torch.tensor([k for k, _ in grad]), "grad_scale": torch.tensor(grad_scale),
                "all_ids": torch.tensor([i for _, i in everything], dtype=torch.long),
                "all_traj": torch.tensor([k for k, _ in everything]), "all_weight": torch.tensor(weight),
                "all_turns": torch.tensor([count_turns(self.seqs[i]) for _, i in everything], dtype=torch.float32),
                "n_traj": len(trajs), "chosen": torch.tensor([local[self.pairs[j][0]] for j in pair_ids]),
                "rejected": torch.tensor([local[self.pairs[j][1]] for j in pair_ids]),
                "num_tokens": sum(len(self.seqs[i]) for _, i in everything)}

    def reference_scores(self, reference, batch: dict) -> torch.Tensor:
        """The reference's score of every sequence in the batch (computed once per sequence, then cached)."""
        ids = batch["all_ids"]
        if self.ref_table is None:
            self.ref_table = torch.full((len(self.seqs),), float("nan"), device=ids.device)
        with torch.no_grad():
            for chunk, chunk_ids in zip(batch["ref"], batch["ref_ids"].split(self.chunk)):
                out = reference(input_ids=chunk["input_ids"], attention_mask=chunk["attention_mask"])
                self.ref_table.index_copy_(0, chunk_ids, self.rule.sequence_scores(out, chunk).float())
        return self.ref_table[ids]

    def loss(self, forward, reference, batch: dict) -> tuple[torch.Tensor, dict]:
        """BT on the pairs' trajectory scores (+ nll_coef x NLL of the chosen trajectories' sampled turns)."""
        g = batch["grad"]
        out = forward(input_ids=g["input_ids"], attention_mask=g["attention_mask"])
        grad_scores = self.rule.sequence_scores(out, g)  # [n_grad], differentiable
        with torch.no_grad():
            rest = [self.rule.sequence_scores(forward(input_ids=c["input_ids"], attention_mask=c["attention_mask"]), c)
                    for c in batch["rest"]]
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
