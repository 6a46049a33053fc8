"""Token-level MDP tensors on a hand-made episode (character tokens, so indices are countable)."""

import numpy as np
import torch

from lmrl.data.tokenize import (
    NO_NEXT,
    SegmentEncoder,
    collate,
    decision_points,
    episode_to_sequences,
    next_decision_index,
    tokenize_segments,
)
from lmrl.envs.base import Episode, Text

# obs "xy", act "ab" (reward -1), obs "z", act "c" (reward 0) -> tokens x y a b z c at 0..5
EPISODE = Episode([Text("xy", False), Text("ab", True), Text("z", False), Text("c", True)], [0, -1, 0, 0], True, {})


def test_per_segment_tensors(char_tokenizer):
    seq = tokenize_segments(EPISODE.turns, EPISODE.rewards, SegmentEncoder(char_tokenizer))
    assert seq.input_ids.tolist() == [ord(c) for c in "xyabzc"]
    assert seq.action_mask.tolist() == [False, False, True, True, False, True]
    # the turn reward sits on the last token of its action ("b" at index 3)
    assert seq.rewards.tolist() == [0, 0, 0, -1, 0, 0]
    assert seq.done


def test_decision_points_and_next_state(char_tokenizer):
    seq = tokenize_segments(EPISODE.turns, EPISODE.rewards, SegmentEncoder(char_tokenizer))
    decide = decision_points(torch.from_numpy(seq.action_mask))
    # position t decides when token t+1 is an agent token: t=1 (->a), t=2 (->b), t=4 (->c)
    assert decide.tolist() == [False, True, True, False, True]
    nxt = next_decision_index(decide)
    # inside "ab": 1 -> 2; after "b" the env token "z" is skipped: 2 -> 4 (h[4] predicts "c"); 4 is last
    assert nxt.tolist() == [1, 2, 4, 4, NO_NEXT]
    step_rewards = torch.from_numpy(seq.rewards)[1:]
    assert step_rewards.tolist() == [0, 0, -1, 0, 0]


def test_next_decision_batched_with_padding():
    decide = torch.tensor([[True, False, True, False], [False, False, False, True]])
    attn = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]])
    assert next_decision_index(decide).tolist() == [[2, 2, NO_NEXT, NO_NEXT], [3, 3, 3, NO_NEXT]]
    masked = decision_points(torch.tensor([[0, 1, 0, 1, 1], [0, 0, 0, 0, 1]]), attn)
    assert masked.tolist() == [[True, False, True, False], [False, False, False, True]]


def test_left_truncation_keeps_the_end(char_tokenizer):
    seq = tokenize_segments(EPISODE.turns, EPISODE.rewards, SegmentEncoder(char_tokenizer), max_length=4)
    assert seq.input_ids.tolist() == [ord(c) for c in "abzc"]
    assert seq.action_mask.tolist() == [True, True, False, True]
    assert seq.rewards.tolist() == [0, -1, 0, 0]


def test_windowed_sequences_one_per_action(char_tokenizer):
    enc = SegmentEncoder(char_tokenizer)
    first, second = episode_to_sequences(EPISODE, enc, last_k=1, max_length=None)
    assert first.input_ids.tolist() == [ord(c) for c in "xyab"] and first.action_mask.tolist() == [0, 0, 1, 1]
    assert second.input_ids.tolist() == [ord(c) for c in "zc"] and second.action_mask.tolist() == [0, 1]
    assert (first.done, second.done) == (False, True)
    # a wider window puts the earlier action in the state: it is context, not a decision here
    _, wide = episode_to_sequences(EPISODE, enc, last_k=2, max_length=None)
    assert wide.input_ids.tolist() == [ord(c) for c in "abzc"]
    assert wide.action_mask.tolist() == [0, 0, 0, 1] and wide.rewards.tolist() == [0, 0, 0, 0]


def test_whole_history_is_one_sequence(char_tokenizer):
    (seq,) = episode_to_sequences(EPISODE, SegmentEncoder(char_tokenizer), last_k=None, max_length=None)
    assert len(seq) == 6


def test_collate_right_pads_with_masks(char_tokenizer):
    enc = SegmentEncoder(char_tokenizer)
    a, b = episode_to_sequences(EPISODE, enc, last_k=1, max_length=None)
    batch = collate([a, b], pad_id=0)
    assert batch["input_ids"].shape == (2, 4)
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1], [1, 1, 0, 0]]
    assert batch["action_mask"][1].tolist() == [False, True, False, False]
    assert batch["dones"].tolist() == [False, True]
    assert np.isclose(batch["rewards"][0, 3].item(), -1.0)


def test_chain_links_carry_next_state_and_mc_tail(char_tokenizer):
    from lmrl.data.tokenize import episode_to_chain

    enc = SegmentEncoder(char_tokenizer)
    first, second = episode_to_chain(EPISODE, enc, last_k=1, max_length=None, gamma=0.5)
    # link 1 = "xy"+"ab"; its next state is link 2's state "z" (the state before action "c")
    assert first.next_state.tolist() == [ord("z")] and second.next_state is None
    # action "c" (1 token, reward 0) is last: G at its first token = 0 -> link 1's tail is 0
    assert first.tail == 0.0 and second.tail == 0.0
    # with a reward on "c": G_first(c) = 0.5**0 * 2 = 2 -> link 1's tail
    ep = Episode(EPISODE.turns, [0, -1, 0, 2], True, {})
    first, _ = episode_to_chain(ep, enc, last_k=1, max_length=None, gamma=0.5)
    assert first.tail == 2.0
    batch = collate([first], pad_id=0)
    assert batch["next_input_ids"].tolist() == [[ord("z")]] and batch["has_next"].tolist() == [True]
    assert batch["tails"].tolist() == [2.0]
    # whole-history tasks need no chain: one sequence, nothing after it
    (whole,) = episode_to_chain(ep, enc, last_k=None, max_length=None, gamma=0.5)
    assert whole.next_state is None and whole.tail == 0.0


def test_mc_tail_discounts_per_token(char_tokenizer):
    from lmrl.data.tokenize import episode_to_chain

    # actions "ab" (2 tokens, reward 0) then "cd" (2 tokens, reward 4): G_first(cd) = 0.5 * 4 = 2
    ep = Episode([Text("x", False), Text("ab", True), Text("y", False), Text("cd", True), Text("z", False), Text("e", True)],
                 [0, 0, 0, 4, 0, 0], True, {})
    links = episode_to_chain(ep, SegmentEncoder(char_tokenizer), last_k=1, max_length=None, gamma=0.5)
    assert [link.tail for link in links] == [2.0, 0.0, 0.0]


def test_runs_of_moves_share_one_window(char_tokenizer):
    # x ab y cd z e: with 2 moves a sequence, "ab" and "cd" are both decisions after the window [x]
    ep = Episode([Text("x", False), Text("ab", True), Text("y", False), Text("cd", True), Text("z", False), Text("e", True)],
                 [0, 0, 0, 4, 0, 8], True, {})
    enc = SegmentEncoder(char_tokenizer)
    first, second = episode_to_sequences(ep, enc, last_k=1, max_length=None, moves=2)
    assert first.input_ids.tolist() == [ord(c) for c in "xabycd"]
    assert first.action_mask.tolist() == [0, 1, 1, 0, 1, 1] and first.rewards.tolist() == [0, 0, 0, 0, 0, 4]
    assert second.input_ids.tolist() == [ord(c) for c in "ze"] and (first.done, second.done) == (False, True)
    # one move a sequence is the default (the original's chains)
    one = [s.input_ids.tolist() for s in episode_to_sequences(ep, enc, last_k=1, max_length=None, moves=1)]
    assert one == [[ord(c) for c in w] for w in ("xab", "ycd", "ze")]
    assert one == [s.input_ids.tolist() for s in episode_to_sequences(ep, enc, last_k=1, max_length=None)]


def test_runs_of_moves_keep_every_decisions_mc_return(char_tokenizer):
    """The return at each action's first token is the same whether links hold one move or several."""
    from lmrl.algos.value_losses import mc_returns
    from lmrl.data.tokenize import episode_to_chain

    turns, rewards = [], []
    for n in range(7):
        turns += [Text("o" * (1 + n % 2), False), Text("ab" if n % 3 else "c", True)]
        rewards += [0.0, float(n - 3)]
    ep = Episode(turns, rewards, True, {})
    enc = SegmentEncoder(char_tokenizer)

    def first_token_returns(moves: int) -> list[float]:
        out = []
        for link in episode_to_chain(ep, enc, last_k=3, max_length=None, gamma=0.9, moves=moves):
            batch = collate([link], pad_id=0)
            decide = decision_points(batch["action_mask"], batch["attention_mask"])
            step_rewards = batch["rewards"][:, 1:]
            g = mc_returns(step_rewards, decide, next_decision_index(decide), batch["tails"], 0.9)[0]
            mask = link.action_mask
            starts = [t - 1 for t in range(1, len(mask)) if mask[t] and not mask[t - 1]]  # an action's first token
            out += [float(g[t]) for t in starts]
        return out

    single = first_token_returns(1)
    assert len(single) == 7
    for moves in (2, 3, 7, 10):
        assert np.allclose(first_token_returns(moves), single, atol=1e-5)
    links = episode_to_chain(ep, enc, last_k=3, max_length=None, gamma=0.9, moves=3)
    assert len(links) == 3 and [link.done for link in links] == [False, False, True]
    assert links[0].next_state.tolist() == links[1].input_ids[: int(np.flatnonzero(links[1].action_mask)[0])].tolist()


def test_moves_per_sequence_must_be_positive(char_tokenizer):
    import pytest

    with pytest.raises(ValueError, match="moves per sequence"):
        list(episode_to_sequences(EPISODE, SegmentEncoder(char_tokenizer), last_k=1, max_length=None, moves=0))
