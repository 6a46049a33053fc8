"""Training sequences packed into a few flat arrays.

A list of `TokenSequence` objects costs several hundred bytes of Python overhead per
sequence; a windowed chess dataset has one sequence per move, so hundreds of thousands of
games would need tens of GB.  `PackedSequences` keeps every sequence's tokens end to end
in flat numpy arrays with offsets, and hands out `TokenSequence` views on indexing:
about 7 bytes per token (uint16 ids when the vocabulary allows) and ~30 bytes per sequence.
It is built in one streaming pass over the episodes, which are never all in memory.

With `dedup`, sequences identical in every field a loss reads (tokens, masks, rewards, end of
episode, next state) are stored once with their count as `weight`, and their MC `tail`s averaged:
the weighted losses have the same gradients as the full data.  Windowed tasks repeat a lot — the
fully observed maze's 101,850 (observation, move) sequences are 215 distinct ones — so an epoch
over the distinct sequences is hundreds of times shorter and every batch sees the rare ones.

`balance_states` then gives every state (the tokens before a sequence's first action) the same
total weight, its actions keeping their frequencies within it.  What a value learner solves for in
a state — Bellman targets, an expectile over the data's actions there, BC's action distribution —
depends only on those within-state weights; across states, the data's frequencies only decide
which states the shared network fits first.  The maze data's goal-side states are 0.3% of its
transitions (75% of its episodes sit in dead ends), and a critic trained on its frequencies
learns them last.
"""

from __future__ import annotations

from typing import Callable, Iterable

import hashlib

import numpy as np

from lmrl.data.tokenize import TokenSequence

_CHUNK = 20_000  # sequences gathered before they are flattened


class PackedSequences:
    """An immutable, indexable collection of `TokenSequence`s backed by flat arrays."""

    def __init__(self, ids, mask, rewards, offsets, done, tail, next_ids, next_offsets, has_next, weight=None):
        self.ids, self.mask, self.rewards, self.offsets = ids, mask, rewards, offsets
        self.done, self.tail = done, tail
        self.next_ids, self.next_offsets, self.has_next = next_ids, next_offsets, has_next
        self.weight = weight if weight is not None else np.ones(len(done), dtype=np.float32)

    @classmethod
    def build(cls, seqs: Iterable[TokenSequence], keep: Callable[[TokenSequence], bool] | None = None,
              dedup: bool = False, balance_states: bool = False):
        """Pack `seqs` (a generator is fine) in chunks, keeping those for which `keep` is true; with
        `dedup`, each distinct sequence once, weighted by its count; with `balance_states` too, every
        state's sequences share a total weight of 1 (module docstring)."""
        parts: list[dict[str, np.ndarray]] = []
        chunk: list[TokenSequence] = []
        seen: dict[bytes, int] = {}
        counts: list[int] = []
        tails: list[float] = []
        for s in seqs:
            if keep is not None and not keep(s):
                continue
            if dedup:
                key = _content_key(s)
                if key in seen:
                    counts[seen[key]] += 1
                    tails[seen[key]] += s.tail
                    continue
                seen[key] = len(counts)
                counts.append(1)
                tails.append(s.tail)
            chunk.append(s)
            if len(chunk) == _CHUNK:
                parts.append(_flatten(chunk))
                chunk = []
        if chunk or not parts:
            parts.append(_flatten(chunk))
        packed = _concat(parts)
        if dedup:
            packed["weight"] = np.asarray(counts, dtype=np.float32)
            packed["tail"] = (np.asarray(tails, dtype=np.float64) / np.maximum(packed["weight"], 1)).astype(np.float32)
        if balance_states:
            if not dedup:
                raise ValueError("balance_states needs dedup (it reweights the merged sequences)")
            packed["weight"] = _balanced(packed)
        return cls(**packed)

    @property
    def total_weight(self) -> float:
        """The number of sequences of the data these stand for."""
        return float(self.weight.sum())

    def __len__(self) -> int:
        return len(self.done)

    def __getitem__(self, i: int | slice) -> TokenSequence | list[TokenSequence]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if not -len(self) <= i < len(self):
            raise IndexError(f"sequence {i} out of range ({len(self)} sequences)")
        i %= len(self)
        a, b = self.offsets[i], self.offsets[i + 1]
        next_state = None
        if self.has_next[i]:
            next_state = self.next_ids[self.next_offsets[i] : self.next_offsets[i + 1]]
        return TokenSequence(self.ids[a:b], self.mask[a:b], self.rewards[a:b], bool(self.done[i]),
                             next_state, float(self.tail[i]), float(self.weight[i]))

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    @property
    def nbytes(self) -> int:
        """Bytes held by the packed arrays."""
        arrays = (self.ids, self.mask, self.rewards, self.offsets, self.done, self.tail, self.next_ids,
                  self.next_offsets, self.has_next, self.weight)
        return sum(a.nbytes for a in arrays)

    @property
    def num_tokens(self) -> int:
        """Tokens of all the distinct sequences together."""
        return int(self.offsets[-1])


def _balanced(packed: dict[str, np.ndarray]) -> np.ndarray:
    """count / (the count of all sequences sharing its state), the state being the tokens before the
    sequence's first action token: in a windowed task, the window the action was taken in."""
    offsets, ids, mask, counts = packed["offsets"], packed["ids"], packed["mask"], packed["weight"]
    keys = []
    for i in range(len(counts)):
        a, b = offsets[i], offsets[i + 1]
        first = a + int(np.argmax(mask[a:b])) if mask[a:b].any() else b
        keys.append(ids[a:first].tobytes())
    totals: dict[bytes, float] = {}
    for key, count in zip(keys, counts):
        totals[key] = totals.get(key, 0.0) + float(count)
    return np.asarray([c / totals[k] for k, c in zip(keys, counts)], dtype=np.float32)


def _content_key(s: TokenSequence) -> bytes:
    """A digest of everything a loss reads from a sequence except its MC tail."""
    h = hashlib.blake2b(digest_size=16)
    for array in (s.input_ids, s.action_mask, s.rewards):
        h.update(np.ascontiguousarray(array).tobytes())
        h.update(b"|")
    h.update(b"done" if s.done else b"open")
    h.update(b"none" if s.next_state is None else np.ascontiguousarray(s.next_state, dtype=np.int32).tobytes())
    return h.digest()


def _flatten(chunk: list[TokenSequence]) -> dict[str, np.ndarray]:
    lengths = np.array([len(s) for s in chunk], dtype=np.int64)
    next_states = [s.next_state if s.next_state is not None else np.zeros(0, np.int32) for s in chunk]

    def cat(arrays, dtype):
        return np.concatenate(arrays).astype(dtype, copy=False) if arrays else np.zeros(0, dtype)

    return {
        "ids": cat([s.input_ids for s in chunk], np.int32),
        "mask": cat([s.action_mask for s in chunk], bool),
        "rewards": cat([s.rewards for s in chunk], np.float32),
        "lengths": lengths,
        "done": np.array([s.done for s in chunk], dtype=bool),
        "tail": np.array([s.tail for s in chunk], dtype=np.float32),
        "next_ids": cat(next_states, np.int32),
        "next_lengths": np.array([len(x) for x in next_states], dtype=np.int64),
        "has_next": np.array([s.next_state is not None for s in chunk], dtype=bool),
    }


def _concat(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    def joined(key):
        return np.concatenate([p[key] for p in parts])

    ids, next_ids = joined("ids"), joined("next_ids")
    # Token ids of a small vocabulary fit in 16 bits: half the memory of the biggest array.
    small = max(int(ids.max(initial=0)), int(next_ids.max(initial=0))) < np.iinfo(np.uint16).max
    id_type = np.uint16 if small else np.int32
    return {
        "ids": ids.astype(id_type), "mask": joined("mask"), "rewards": joined("rewards"),
        "offsets": np.concatenate([[0], np.cumsum(joined("lengths"))]).astype(np.int64),
        "done": joined("done"), "tail": joined("tail"), "next_ids": next_ids.astype(id_type),
        "next_offsets": np.concatenate([[0], np.cumsum(joined("next_lengths"))]).astype(np.int64),
        "has_next": joined("has_next"),
    }
