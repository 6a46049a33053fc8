"""Does a turn-level critic know the maze?  Its best of the four moves, at held-out states.

States come from held-out episodes (`Task.heldout_episodes`: another seed of the task's recipe):
every agent turn with its history, its `c` and the true position (replayed from the start).  At
most `per_cell` states per cell are kept, so the dead ends the dataset's stuck episodes crowd do
not dominate; the agreement is the mean over cells of the share of states whose highest-scored
move is BFS-optimal.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass
from typing import Sequence

import torch

from lmrl.algos.privileged import TaskInfo, maze_position, replay_states
from lmrl.data.tokenize import SegmentEncoder
from lmrl.envs.base import Episode, Text
from lmrl.envs.maze import optimal_directions, parse_action
from lmrl.rollout.policy import prompt_ids


@dataclass
class ProbeState:
    history: list[Text]  # everything before the agent's turn
    context: str  # c at this turn
    position: tuple[int, int]


def maze_states(episodes: Sequence[Episode], info: TaskInfo, make_env, per_cell: int, seed: int = 0) -> list[ProbeState]:
    """Up to `per_cell` states per maze cell from `episodes` (random, seeded)."""
    by_cell: dict[tuple, list[ProbeState]] = defaultdict(list)
    for ep in episodes:
        contexts = info.contexts(ep, make_env)
        positions = replay_states(ep, make_env(), info.options(ep.info), maze_position)
        actions = [i for i, t in enumerate(ep.turns) if t.is_action]
        for i, c, p in zip(actions, contexts, positions, strict=True):
            by_cell[tuple(p["position"])].append(ProbeState(list(ep.turns[:i]), c, tuple(p["position"])))
    rng, out = random.Random(seed), []
    for cell in sorted(by_cell):
        states = by_cell[cell]
        out += rng.sample(states, min(per_cell, len(states)))
    return out


def move_agreement(scores: torch.Tensor, states: Sequence[ProbeState], actions: Sequence[str]) -> float:
    """Mean over cells of the share of states whose argmax move (scores [n, len(actions)]) is BFS-optimal."""
    best = scores.argmax(dim=-1).tolist()
    per_cell: dict[tuple, list[bool]] = defaultdict(list)
    for state, b in zip(states, best, strict=True):
        per_cell[state.position].append(parse_action(actions[b]) in optimal_directions(state.position))
    return sum(sum(v) / len(v) for v in per_cell.values()) / len(per_cell)


def constant_move_agreement(states: Sequence[ProbeState], actions: Sequence[str]) -> dict[str, float]:
    """The agreement of a scorer that always picks the same move, for each move: the floor a critic must beat.
    (On PO maze's held-out states, always "move down" agrees 44%: a critic that learns one global preference
    scores that much without knowing where it is.)"""
    out = {}
    for k, action in enumerate(actions):
        scores = torch.zeros(len(states), len(actions))
        scores[:, k] = 1.0
        out[action.strip()] = move_agreement(scores, states, actions)
    return out


def critic_move_scores(scorer, tokenizer, states: Sequence[ProbeState], actions: Sequence[str], privileged: bool,
                       window: int | None, max_input: int, batch: int = 64) -> torch.Tensor:
    """A SWEET critic's advantage of every action at every state -> [n, len(actions)] (host)."""
    encode = SegmentEncoder(tokenizer)
    conts = [list(encode(a)) for a in actions]
    rows = []
    for start in range(0, len(states), batch):
        chunk = states[start : start + batch]
        prefixes = []
        for s in chunk:
            c = list(encode(s.context)) if privileged else []
            prefixes.append(c + prompt_ids(s.history, window, encode, max_input - len(c)))
        owner = [k for k in range(len(chunk)) for _ in conts]
        truth = [{"position": list(s.position)} for s in chunk]  # what the oracle critic reads
        rows.append(torch.tensor(scorer.scores(prefixes, owner, conts * len(chunk), tokenizer.pad_token_id, truth))
                    .view(len(chunk), len(conts)))
    return torch.cat(rows)


def reranker_move_scores(reranker, states: Sequence[ProbeState], window: int | None) -> torch.Tensor:
    """A value-based critic's summed advantage of every action (`RerankPolicy.scores`) -> [n, actions]."""
    prompts = [prompt_ids(s.history, window, reranker.encode, reranker.max_input_tokens) for s in states]
    return reranker.scores(prompts)


