"""The token-level MDP shared by every algorithm.

A conversation becomes one token sequence: every `Text` segment is tokenized on its own
(no BPE merge crosses a speaker boundary) and the pieces are concatenated.  Per token:
`action_mask` marks agent tokens; a turn's reward sits on its last token.

Shift convention (the original's, used by BC, MC, ILQL and PPO alike), for a sequence of
length T and per-step arrays of length T-1:
  * position t is a *decision point* when token t+1 is an agent token;
  * `step_rewards[t] = rewards[t+1]`;
  * the next state of decision t is the next decision point after t.  Inside an utterance
    that is t+1; after an utterance's last token it is the last token of the environment's
    reply (environment tokens are skipped, never transitions).  -1 marks "none left".

Tasks whose policy sees only a window of the history (maze FO sees one observation, PO
the last 40 segments) are cut into one sequence per action: the window as state, then
the action.  Agent text inside the window is state, not a decision of that sequence.
With `moves > 1` a sequence is the window before its first action, then `moves`
consecutive actions with the environment's replies between them: every action of the
run is a decision (a later one sees up to 2(moves-1) segments more than the window).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Iterator, Sequence

import numpy as np
import torch

from lmrl.envs.base import Episode, Text, history_window

NO_NEXT = -1


@dataclass
class TokenSequence:
    """One training sequence; arrays are token-aligned (length T)."""

    input_ids: np.ndarray  # int32 [T]
    action_mask: np.ndarray  # bool  [T]  agent tokens that are decisions of this sequence
    rewards: np.ndarray  # float32 [T] reward on the last token of each action
    done: bool  # the sequence ends its episode (terminal: no bootstrap after it)
    # Windowed tasks only (one sequence per action): the next link's state tokens, whose value
    # bootstraps this link's last decision, and the MC return at the next link's first decision.
    next_state: np.ndarray | None = None
    tail: float = 0.0
    # How many identical sequences of the data this one stands for (merged duplicates, `PackedSequences`);
    # losses weight it so (tail is then their mean: a squared error's gradient is unchanged).
    weight: float = 1.0

    def __len__(self) -> int:
        return len(self.input_ids)


class SegmentEncoder:
    """Tokenizes text segments one at a time, memoizing repeats (task text repeats a lot)."""

    def __init__(self, tokenizer, cache_size: int = 1 << 16):
        self.tokenizer = tokenizer
        self._encode = lru_cache(maxsize=cache_size)(self._encode_uncached)

    def _encode_uncached(self, text: str) -> tuple[int, ...]:
        return tuple(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def __call__(self, text: str) -> tuple[int, ...]:
        return self._encode(text)


def tokenize_segments(
    segments: Sequence[Text],
    rewards: Sequence[float],
    encode: SegmentEncoder,
    max_length: int | None = None,
    done: bool = True,
) -> TokenSequence:
    """Per-segment tokenization with rewards on last action tokens; left-truncated to `max_length`."""
    ids: list[int] = []
    mask: list[bool] = []
    rew: list[float] = []
    for seg, r in zip(segments, rewards, strict=True):
        piece = encode(seg.text)
        if not piece:
            continue
        ids += piece
        mask += [seg.is_action] * len(piece)
        rew += [0.0] * (len(piece) - 1) + [float(r) if seg.is_action else 0.0]
    if max_length is not None and len(ids) > max_length:
        # Left truncation keeps the end of the conversation: the part the next action depends on.
        ids, mask, rew = ids[-max_length:], mask[-max_length:], rew[-max_length:]
    return TokenSequence(
        np.asarray(ids, dtype=np.int32), np.asarray(mask, dtype=bool), np.asarray(rew, dtype=np.float32), done
    )


def episode_to_sequences(
    episode: Episode, encode: SegmentEncoder, last_k: int | None, max_length: int | None, moves: int = 1
) -> Iterator[TokenSequence]:
    """Whole-history tasks give one sequence; windowed tasks one per run of `moves` actions
    (the window before the run's first action -> the run)."""
    if last_k is None:
        yield tokenize_segments(episode.turns, episode.rewards, encode, max_length, episode.done)
        return
    if moves < 1:
        raise ValueError(f"moves per sequence must be >= 1, got {moves}")
    action_idx = [i for i, t in enumerate(episode.turns) if t.is_action]
    for n in range(0, len(action_idx), moves):
        first, last = action_idx[n], action_idx[min(n + moves, len(action_idx)) - 1]
        state = [Text(t.text, False) for t in history_window(episode.turns[:first], last_k)]
        segments = state + list(episode.turns[first : last + 1])
        rewards = [0.0] * len(state) + list(episode.rewards[first : last + 1])
        is_last = n + moves >= len(action_idx)
        yield tokenize_segments(segments, rewards, encode, max_length, done=episode.done and is_last)


def episode_to_chain(
    episode: Episode, encode: SegmentEncoder, last_k: int | None, max_length: int | None, gamma: float,
    moves: int = 1,
) -> list[TokenSequence]:
    """Sequences for value learning: `episode_to_sequences` plus, for windowed tasks, each
    link's `next_state` and MC `tail` (gamma applied once per action token)."""
    seqs = list(episode_to_sequences(episode, encode, last_k, max_length, moves))
    if last_k is None:
        return seqs
    actions = [(t, r) for t, r in zip(episode.turns, episode.rewards) if t.is_action]
    first_returns, later = [0.0] * len(actions), 0.0
    for n in reversed(range(len(actions))):
        text, reward = actions[n]
        k = max(1, len(encode(text.text)))
        # G at an action's first token: its reward sits k-1 decisions later, the next action k later
        first_returns[n] = later = gamma ** (k - 1) * reward + gamma**k * later
    for n in range(len(seqs) - 1):
        nxt = seqs[n + 1]
        seqs[n].next_state = nxt.input_ids[: int(np.flatnonzero(nxt.action_mask)[0])] if nxt.action_mask.any() else None
        seqs[n].tail = first_returns[(n + 1) * moves]
    return seqs


def has_decision(seq: TokenSequence) -> bool:
    """A sequence is trainable when some token after the first is an agent decision."""
    return bool(seq.action_mask[1:].any())


def decision_points(action_mask: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """[..., T] -> [..., T-1]: position t decides when token t+1 is a (real) agent token."""
    decide = action_mask[..., 1:].bool()
    if attention_mask is not None:
        decide = decide & attention_mask[..., 1:].bool()
    return decide


def move_ends(action_mask: np.ndarray) -> np.ndarray:
    """[T] -> [number of decisions]: for each decision (an agent token after the first position, in order), whether
    it ends a move of two or more tokens (the next token is not an agent token, or there is none, and the previous
    one is).  A move of one token is its own decision, not an end after one."""
    agent = np.asarray(action_mask, dtype=bool)
    after = np.append(agent[1:], False)
    before = np.insert(agent[:-1], 0, False)
    return (~after & before)[1:][agent[1:]]


def next_decision_index(decide: torch.Tensor) -> torch.Tensor:
    """[..., L] bool -> [..., L] long: the first decision point strictly after t, else NO_NEXT.

    Vectorized as a reversed cumulative minimum over `t if decide[t] else BIG`.
    """
    length = decide.shape[-1]
    big = length  # any value >= length means "none"
    pos = torch.arange(length, device=decide.device).expand_as(decide)
    idx = torch.where(decide, pos, torch.full_like(pos, big))
    suffix_min = torch.flip(torch.cummin(torch.flip(idx, [-1]), dim=-1).values, [-1])
    nxt = torch.cat([suffix_min[..., 1:], torch.full_like(suffix_min[..., :1], big)], dim=-1)
    return torch.where(nxt >= big, torch.full_like(nxt, NO_NEXT), nxt)


def collate(seqs: Sequence[TokenSequence], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-pad a batch; explicit attention masks (a pad id may equal a real token id)."""
    length = max(len(s) for s in seqs)
    batch = len(seqs)
    input_ids = torch.full((batch, length), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((batch, length), dtype=torch.long)
    action_mask = torch.zeros((batch, length), dtype=torch.bool)
    rewards = torch.zeros((batch, length), dtype=torch.float32)
    for b, s in enumerate(seqs):
        n = len(s)
        input_ids[b, :n] = torch.from_numpy(s.input_ids.astype(np.int64))
        attention_mask[b, :n] = 1
        action_mask[b, :n] = torch.from_numpy(s.action_mask)
        rewards[b, :n] = torch.from_numpy(s.rewards)
    dones = torch.tensor([s.done for s in seqs], dtype=torch.bool)
    batch_out = {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "action_mask": action_mask,
        "rewards": rewards,
        "dones": dones,
        "tails": torch.tensor([s.tail for s in seqs], dtype=torch.float32),
        "weights": torch.tensor([s.weight for s in seqs], dtype=torch.float32),
    }
    if any(s.next_state is not None and len(s.next_state) for s in seqs):
        batch_out.update(_collate_next_states(seqs, pad_id))
    return batch_out


def _collate_next_states(seqs: Sequence[TokenSequence], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded next-link states; `next_last` indexes each one's last token (its decision point)."""
    states = [s.next_state if s.next_state is not None and len(s.next_state) else np.array([pad_id]) for s in seqs]
    length = max(len(x) for x in states)
    ids = torch.full((len(seqs), length), pad_id, dtype=torch.long)
    attn = torch.zeros((len(seqs), length), dtype=torch.long)
    for b, x in enumerate(states):
        ids[b, : len(x)] = torch.from_numpy(x.astype(np.int64))
        attn[b, : len(x)] = 1
    has_next = torch.tensor([s.next_state is not None and len(s.next_state) > 0 for s in seqs])
    last = torch.tensor([len(x) - 1 for x in states])
    return {"next_input_ids": ids, "next_attention_mask": attn, "next_last": last, "has_next": has_next}
