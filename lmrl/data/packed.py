"""Training sequences packed into a few flat arrays.

A list of `TokenSequence` objects costs several hundred bytes of Python overhead per
sequence; a windowed chess dataset has one sequence per move, so hundreds of thousands of
games would need tens of GB.  `PackedSequences` keeps every sequence's tokens end to end
in flat numpy arrays with offsets, and hands out `TokenSequence` views on indexing:
about 7 bytes per token (uint16 ids when the vocabulary allows) and ~30 bytes per sequence.
It is built in one streaming pass over the episodes, which are never all in memory.
"""

from __future__ import annotations

from typing import Callable, Iterable

import numpy as np

from lmrl.data.tokenize import TokenSequence

_CHUNK = 20_000  # sequences gathered before they are flattened


class PackedSequences:
    """An immutable, indexable collection of `TokenSequence`s backed by flat arrays."""

    def __init__(self, ids, mask, rewards, offsets, done, tail, next_ids, next_offsets, has_next):
        self.ids, self.mask, self.rewards, self.offsets = ids, mask, rewards, offsets
        self.done, self.tail = done, tail
        self.next_ids, self.next_offsets, self.has_next = next_ids, next_offsets, has_next

    @classmethod
    def build(cls, seqs: Iterable[TokenSequence], keep: Callable[[TokenSequence], bool] | None = None):
        """Pack `seqs` (a generator is fine) in chunks, keeping those for which `keep` is true."""
        parts: list[dict[str, np.ndarray]] = []
        chunk: list[TokenSequence] = []
        for s in seqs:
            if keep is None or keep(s):
                chunk.append(s)
            if len(chunk) == _CHUNK:
                parts.append(_flatten(chunk))
                chunk = []
        if chunk or not parts:
            parts.append(_flatten(chunk))
        return cls(**_concat(parts))

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
                             next_state, float(self.tail[i]))

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    @property
    def nbytes(self) -> int:
        arrays = (self.ids, self.mask, self.rewards, self.offsets, self.done, self.tail, self.next_ids,
                  self.next_offsets, self.has_next)
        return sum(a.nbytes for a in arrays)

    @property
    def num_tokens(self) -> int:
        return int(self.offsets[-1])


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
