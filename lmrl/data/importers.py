"""Readers for the original LMRL-Gym maze datasets, yielding our `Episode`s.

Two formats exist in the original repository (see `lmrl_gym_tasks.md` §2):

- FO (`fully_observed_maze_data.jsonl`): each line is a list of steps
  `{"state", "action", "reward", "done"}`; the state is the observation the action answered.
- PO (`partially_observed_maze_data.jsonl`): each line is
  `{"text_history": [obs0, act0, obs1, ...], "rewards": [...], "dones": [...]}`, the two
  lists aligned with the history; even positions are observations, odd ones actions.

Every segment is given a trailing newline if it lacks one, because our histories are
plain concatenations and every segment carries its own newline.  The original files
hold no hidden state, so `info` only records where the episode came from.  A malformed
line raises `DatasetError` naming the file and line (via `iter_jsonl`).

`load_episodes` also reads our own format, `lmrl`: a JSONL file, or a Parquet file or dataset directory
written by `data_gen.export`.
"""

from __future__ import annotations

import os
from typing import Callable, Iterator

from lmrl.data.jsonl import iter_episodes, iter_jsonl
from lmrl.data.parquet import is_parquet, iter_parquet
from lmrl.envs.base import Episode, Text


def _segment(text, is_action: bool) -> Text:
    if not isinstance(text, str):
        raise TypeError(f"expected a string segment, got {type(text).__name__}")
    return Text(text if text.endswith("\n") else text + "\n", is_action)


def _number(value) -> float:
    """A reward; bools and non-numbers are refused rather than silently converted."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"expected a number, got {value!r}")
    return float(value)


def fo_episode(steps) -> Episode:
    """One FO line (a list of steps) -> turns obs0, act0, obs1, act1, ...; reward on actions."""
    if not isinstance(steps, list) or not steps:
        raise ValueError("expected a non-empty list of steps")
    turns, rewards = [], []
    for k, step in enumerate(steps):
        if not isinstance(step, dict):
            raise ValueError(f"step {k} is not an object")
        turns += [_segment(step["state"], False), _segment(step["action"], True)]
        rewards += [0.0, _number(step["reward"])]
    return Episode(turns, rewards, bool(steps[-1]["done"]), {"source": "lmrl_gym_maze_fo"})


def po_episode(obj) -> Episode:
    """One PO line -> the text history as turns; rewards must be 0 on observations."""
    history, rewards, dones = obj["text_history"], obj["rewards"], obj["dones"]
    if not isinstance(history, list) or not history:
        raise ValueError('"text_history" must be a non-empty list')
    if not (isinstance(rewards, list) and isinstance(dones, list) and len(rewards) == len(dones) == len(history)):
        raise ValueError('"rewards" and "dones" must be lists as long as "text_history"')
    turns = [_segment(text, is_action=k % 2 == 1) for k, text in enumerate(history)]
    values = [_number(r) for r in rewards]
    for k, (turn, reward) in enumerate(zip(turns, values)):
        if reward != 0.0 and not turn.is_action:
            raise ValueError(f"observation {k} has a non-zero reward")
    return Episode(turns, values, any(bool(d) for d in dones), {"source": "lmrl_gym_maze_po"})


def import_lmrl_gym_maze_fo(path: str | os.PathLike) -> Iterator[Episode]:
    """Stream the episodes of an original LMRL-Gym fully observed maze dataset file."""
    return iter_jsonl(path, fo_episode)


def import_lmrl_gym_maze_po(path: str | os.PathLike) -> Iterator[Episode]:
    """Stream the episodes of an original LMRL-Gym partially observed maze dataset file."""
    return iter_jsonl(path, po_episode)


def read_lmrl(path: str | os.PathLike) -> Iterator[Episode]:
    """Stream episodes in our own format: a JSONL file (`lmrl.data.jsonl`), or a Parquet file or exported dataset
    directory (`lmrl.data.parquet`; a directory's `train` split)."""
    return iter_parquet(path) if is_parquet(path) else iter_episodes(path)


IMPORTERS: dict[str, Callable[[str | os.PathLike], Iterator[Episode]]] = {
    "lmrl": read_lmrl,
    "lmrl_gym_maze_fo": import_lmrl_gym_maze_fo,
    "lmrl_gym_maze_po": import_lmrl_gym_maze_po,
}


def load_episodes(path: str | os.PathLike, fmt: str = "lmrl") -> Iterator[Episode]:
    """Stream the episodes of `path` read in format `fmt` (a key of `IMPORTERS`)."""
    if fmt not in IMPORTERS:
        raise ValueError(f"unknown dataset format {fmt!r}; valid formats: {', '.join(sorted(IMPORTERS))}")
    return IMPORTERS[fmt](path)
