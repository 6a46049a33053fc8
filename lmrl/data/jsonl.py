"""Episodes as JSONL, one per line.

Line format: ``{"turns": [{"text": str, "is_action": bool, "reward": float}, ...],
"done": bool, "info": {...}}``.  Rewards sit on action turns (0 on environment turns);
`info` holds the hidden state (maze start and goal, the secret word, ...).

Reading is streaming (`iter_episodes`) so large datasets never have to live in RAM, and a
malformed line raises `DatasetError` naming the file and line.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable, Iterator

from lmrl.envs.base import Episode, Text


class DatasetError(ValueError):
    """A dataset file is malformed; the message names the file and the 1-based line."""


def episode_to_dict(ep: Episode) -> dict:
    """One episode as its JSON object: `turns` (text, is_action, reward), `done` and `info`."""
    turns = [{"text": t.text, "is_action": t.is_action, "reward": r} for t, r in zip(ep.turns, ep.rewards)]
    return {"turns": turns, "done": ep.done, "info": ep.info}


def episode_from_dict(d: dict) -> Episode:
    """Validate and convert one parsed line; raises ValueError/KeyError/TypeError on bad shape."""
    if not isinstance(d, dict) or not isinstance(d.get("turns"), list):
        raise ValueError('expected an object with a "turns" list')
    turns, rewards = [], []
    for k, turn in enumerate(d["turns"]):
        if not isinstance(turn.get("text"), str) or not isinstance(turn.get("is_action"), bool):
            raise ValueError(f'turn {k} needs "text" (string) and "is_action" (bool)')
        reward = float(turn.get("reward", 0.0))
        if reward != 0.0 and not turn["is_action"]:
            raise ValueError(f"turn {k} is an environment turn with a non-zero reward")
        turns.append(Text(turn["text"], turn["is_action"]))
        rewards.append(reward)
    return Episode(turns, rewards, bool(d.get("done", True)), dict(d.get("info", {})))


def iter_jsonl(path: str | os.PathLike, parse) -> Iterator:
    """Yield `parse(obj)` for every non-empty line; any failure names file and line."""
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield parse(json.loads(line))
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                raise DatasetError(f"{path}:{lineno}: malformed episode: {e}") from e


def iter_episodes(path: str | os.PathLike) -> Iterator[Episode]:
    """Stream the episodes of a JSONL file in our format (`DatasetError` naming the file and line on a bad one)."""
    return iter_jsonl(path, episode_from_dict)


def read_episodes(path: str | os.PathLike) -> list[Episode]:
    """Every episode of a JSONL file in our format, as a list."""
    return list(iter_episodes(path))


def write_episodes(path: str | os.PathLike, episodes: Iterable[Episode]) -> int:
    """Write atomically (temp file + rename) so an interrupted write never leaves a half file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}")
    n = 0
    with open(tmp, "w", encoding="utf-8") as f:
        for ep in episodes:
            f.write(json.dumps(episode_to_dict(ep)) + "\n")
            n += 1
    os.replace(tmp, path)
    return n
