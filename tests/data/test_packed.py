"""PackedSequences hands back exactly the sequences it was built from, in flat arrays."""

import numpy as np
import pytest

from lmrl.data.packed import PackedSequences
from lmrl.data.tokenize import TokenSequence, collate, has_decision


def seq(ids, actions, done=True, next_state=None, tail=0.0):
    ids = np.asarray(ids, dtype=np.int32)
    mask = np.zeros(len(ids), dtype=bool)
    mask[actions] = True
    rewards = np.arange(len(ids), dtype=np.float32) * mask
    return TokenSequence(ids, mask, rewards, done, None if next_state is None else np.asarray(next_state, np.int32), tail)


SEQS = [
    seq([5, 6, 7], [2], next_state=[9, 9], tail=-1.5),
    seq([1, 2, 3, 4], [2, 3], done=False),
    seq([8], []),  # no decision: dropped by has_decision
    seq([4, 4], [1], next_state=[], tail=2.0),
]


def same(a: TokenSequence, b: TokenSequence) -> bool:
    def arr(x):
        return None if x is None else np.asarray(x).tolist()

    return (arr(a.input_ids), arr(a.action_mask), arr(a.rewards), a.done, arr(a.next_state), a.tail) == (
        arr(b.input_ids), arr(b.action_mask), arr(b.rewards), b.done, arr(b.next_state), b.tail)


def test_round_trip_with_filter():
    packed = PackedSequences.build(iter(SEQS), keep=has_decision)
    kept = [s for s in SEQS if has_decision(s)]
    assert len(packed) == 3 and packed.num_tokens == 9
    assert all(same(p, s) for p, s in zip(packed, kept))
    assert same(packed[-1], kept[-1]) and [same(a, b) for a, b in zip(packed[1:], kept[1:])] == [True, True]
    with pytest.raises(IndexError):
        packed[3]


def test_collate_matches_the_unpacked_batch():
    packed = PackedSequences.build(SEQS)
    a, b = collate(list(packed), pad_id=0), collate(SEQS, pad_id=0)
    assert a.keys() == b.keys() and all(bool((a[k] == b[k]).all()) for k in a)


def test_small_vocabularies_pack_to_16_bits_and_chunks_concatenate(monkeypatch):
    monkeypatch.setattr("lmrl.data.packed._CHUNK", 2)
    packed = PackedSequences.build(SEQS * 3)
    assert packed.ids.dtype == np.uint16 and len(packed) == 12
    assert all(same(p, s) for p, s in zip(packed, SEQS * 3))
    big = PackedSequences.build([seq([70_000, 1], [1])])
    assert big.ids.dtype == np.int32 and big[0].input_ids.tolist() == [70_000, 1]


def test_empty():
    packed = PackedSequences.build([])
    assert len(packed) == 0 and packed.num_tokens == 0


def _seq(ids, reward=0.0, tail=0.0, next_state=None):
    n = len(ids)
    return TokenSequence(np.asarray(ids, np.int32), np.array([False] + [True] * (n - 1)),
                         np.array([0.0] * (n - 1) + [reward], np.float32), next_state is None,
                         None if next_state is None else np.asarray(next_state, np.int32), tail)


def test_dedup_merges_identical_sequences_with_counts_and_mean_tails():
    seqs = [_seq([1, 2, 3], tail=-1.0), _seq([1, 2, 3], tail=-3.0), _seq([1, 2, 4]), _seq([1, 2, 3], tail=-5.0),
            _seq([1, 2, 3], next_state=[7]), _seq([1, 2, 3], reward=1.0)]
    packed = PackedSequences.build(seqs, dedup=True)
    assert len(packed) == 4 and packed.total_weight == 6
    assert [s.input_ids.tolist() for s in packed] == [[1, 2, 3], [1, 2, 4], [1, 2, 3], [1, 2, 3]]
    assert packed.weight.tolist() == [3, 1, 1, 1]
    assert packed[0].tail == pytest.approx(-3.0) and packed[0].weight == 3.0  # mean of -1, -3, -5
    plain = PackedSequences.build(seqs)
    assert len(plain) == 6 and plain.weight.tolist() == [1] * 6
