"""Episodes as Parquet, one row per episode: the layout `data_gen.export` publishes for Hugging Face `datasets`.

A row holds `episode_id`, `task`, `turns`, `return`, `success`, `info`, `recipe_hash` and `generator_version`
(`ROW_FIELDS`).  `turns` is a list of `{observation, action, reward, done}`: the environment's text, then the agent's
reply to it and that reply's reward; `done` is true from the action that ended the episode on.  The environment's
last reply (`Failure`, the oracle's goodbye) is a turn of its own with a null action.  Any segment order maps to
turns (a null observation or action marks the missing half), so an episode reads back exactly as it was written.
`info` is the episode's hidden state as a JSON string: its keys and types differ between tasks.

A dataset directory holds `data/<split>-<shard>-of-<shards>.parquet` files (`train`, optionally `heldout`).
Writing goes row group by row group (`ParquetEpisodeWriter`) and reading iterates row groups (`iter_parquet`),
so neither holds a dataset in memory.  A malformed row raises `DatasetError` naming the file and the row
(0-based, as `datasets` indexes it).  pyarrow comes with the `interop` extra (`pip install lmrl[interop]`).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Iterable, Iterator

from lmrl.data.jsonl import DatasetError
from lmrl.envs.base import Episode, Text

# Episodes per row group: a group of the longest task's episodes (chess, ~90 segments) stays near 10 MB.
ROWS_PER_GROUP = 1000
SPLITS = ("train", "heldout")
# Turn fields and row fields, in order.  (Kept as plain tuples: the pyarrow schema is built on first use.)
TURN_FIELDS = (("observation", "string"), ("action", "string"), ("reward", "float64"), ("done", "bool"))
ROW_FIELDS = (("episode_id", "int64"), ("task", "string"), ("turns", TURN_FIELDS), ("return", "float64"),
              ("success", "bool"), ("info", "string"), ("recipe_hash", "string"), ("generator_version", "string"))
READ_COLUMNS = ["task", "turns", "return", "info"]


def _pyarrow():
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401  (the submodule the callers use)
    except ImportError as e:  # pragma: no cover - the interop extra is installed wherever the tests run
        raise ImportError("Parquet datasets need pyarrow: pip install 'lmrl[interop]'") from e
    return pyarrow


def arrow_schema():
    """The pyarrow schema of an episode row (`ROW_FIELDS`)."""
    pa = _pyarrow()

    def kind(spec):
        if isinstance(spec, tuple):
            return pa.list_(pa.struct([pa.field(name, kind(sub)) for name, sub in spec]))
        return {"string": pa.string(), "float64": pa.float64(), "bool": pa.bool_(), "int64": pa.int64()}[spec]

    return pa.schema([pa.field(name, kind(spec)) for name, spec in ROW_FIELDS])


def episode_turns(ep: Episode) -> list[dict]:
    """The episode's segments as turns: an optional observation, then an optional action with its reward; `done`
    from the turn of the episode's last action on (from the last turn when it has no action), if it finished."""
    turns, k, segs = [], 0, ep.turns
    while k < len(segs):
        turn = {"observation": None, "action": None, "reward": 0.0, "done": False}
        if not segs[k].is_action:
            turn["observation"], k = segs[k].text, k + 1
        if k < len(segs) and segs[k].is_action:
            turn["action"], turn["reward"], k = segs[k].text, float(ep.rewards[k]), k + 1
        turns.append(turn)
    if ep.done and turns:
        acted = [j for j, t in enumerate(turns) if t["action"] is not None]
        for turn in turns[acted[-1] if acted else len(turns) - 1:]:
            turn["done"] = True
    return turns


def episode_to_row(ep: Episode, episode_id: int, task: str, recipe_hash: str, generator_version: str) -> dict:
    """One episode as its row (`ROW_FIELDS`)."""
    return {"episode_id": episode_id, "task": task, "turns": episode_turns(ep), "return": ep.total_return,
            "success": ep.success, "info": json.dumps(ep.info), "recipe_hash": recipe_hash,
            "generator_version": generator_version}


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def episode_from_row(row: dict) -> Episode:
    """Validate and convert one row; raises ValueError/TypeError on a bad shape."""
    turns_in = row.get("turns")
    if not isinstance(turns_in, list) or not turns_in:
        raise ValueError('"turns" must be a non-empty list')
    turns, rewards, ended = [], [], False
    for k, turn in enumerate(turns_in):
        obs, action, reward, done = (turn.get(key) for key in ("observation", "action", "reward", "done"))
        if obs is None and action is None:
            raise ValueError(f"turn {k} has neither an observation nor an action")
        if not all(x is None or isinstance(x, str) for x in (obs, action)):
            raise ValueError(f"turn {k}: observation and action must be strings or null")
        if not _number(reward) or not math.isfinite(reward) or (action is None and reward != 0.0):
            raise ValueError(f"turn {k}: reward must be a finite number, 0 on a turn without an action "
                             f"(got {reward!r})")
        if not isinstance(done, bool) or (ended and not done):
            raise ValueError(f"turn {k}: done must be a bool that stays true once the episode ended")
        ended = done
        if obs is not None:
            turns.append(Text(obs, False))
            rewards.append(0.0)
        if action is not None:
            turns.append(Text(action, True))
            rewards.append(float(reward))
    total = float(sum(rewards))
    if not _number(row.get("return")) or not math.isclose(row["return"], total, rel_tol=1e-9, abs_tol=1e-9):
        raise ValueError(f'"return" {row.get("return")!r} is not the sum of the turns\' rewards ({total!r})')
    info = json.loads(row["info"]) if isinstance(row.get("info"), str) else None
    if not isinstance(info, dict):
        raise ValueError('"info" must be a JSON object in a string')
    return Episode(turns, rewards, ended, info)


class ParquetEpisodeWriter:
    """Writes episode rows to one Parquet file, `rows_per_group` at a time (only one group is ever in memory),
    atomically: the rows go to a temporary file that `close()` renames into place."""

    def __init__(self, path: str | os.PathLike, metadata: dict | None = None, rows_per_group: int = ROWS_PER_GROUP):
        if rows_per_group < 1:
            raise ValueError(f"rows_per_group must be >= 1 (got {rows_per_group})")
        pa = _pyarrow()
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = self.path.with_name(self.path.name + f".tmp{os.getpid()}")
        schema = arrow_schema().with_metadata({"lmrl": json.dumps(metadata or {})})
        self.writer = pa.parquet.ParquetWriter(self.tmp, schema, compression="zstd")
        self.rows_per_group, self.rows, self.count = rows_per_group, [], 0
        self.nbytes = 0  # the rows' size in Arrow memory: the `num_bytes` of a Hub card's split

    def write(self, row: dict) -> None:
        """Add one row (`episode_to_row`); a full group goes to disk."""
        self.rows.append(row)
        if len(self.rows) >= self.rows_per_group:
            self._flush()

    def _flush(self) -> None:
        if self.rows:
            pa = _pyarrow()
            table = pa.Table.from_pylist(self.rows, schema=self.writer.schema)
            self.writer.write_table(table, row_group_size=len(self.rows))
            self.nbytes += table.nbytes
            self.count, self.rows = self.count + len(self.rows), []

    def close(self) -> int:
        """Write the last group, close the file and move it into place; the number of rows written."""
        self._flush()
        self.writer.close()
        os.replace(self.tmp, self.path)
        return self.count

    def abort(self) -> None:
        """Drop the partial file (after an error)."""
        self.writer.close()
        self.tmp.unlink(missing_ok=True)


def write_parquet(path: str | os.PathLike, episodes: Iterable[Episode], task: str, recipe_hash: str = "",
                  generator_version: str = "", metadata: dict | None = None,
                  rows_per_group: int = ROWS_PER_GROUP) -> int:
    """Stream `episodes` into one Parquet file of episode rows (ids from 0); returns how many were written."""
    writer = ParquetEpisodeWriter(path, metadata, rows_per_group)
    try:
        for k, ep in enumerate(episodes):
            writer.write(episode_to_row(ep, k, task, recipe_hash, generator_version))
    except BaseException:
        writer.abort()
        raise
    return writer.close()


def split_path(directory: str | os.PathLike, split: str, shard: int = 0, shards: int = 1) -> Path:
    """Where a dataset directory keeps shard `shard` of `split` (the Hub's `data/<split>-00000-of-00001` names)."""
    return Path(directory) / "data" / f"{split}-{shard:05d}-of-{shards:05d}.parquet"


def split_files(path: str | os.PathLike, split: str = "train") -> list[Path]:
    """The Parquet files of `split`: a `.parquet` file itself (any split), or a directory's `data/<split>-*.parquet`
    in shard order. Raises `DatasetError` when a directory has none."""
    path = Path(path)
    if path.is_file():
        return [path]
    files = sorted((path / "data").glob(f"{split}-*.parquet"))
    if not files:
        raise DatasetError(f"{path}: no {split} split (expected {path}/data/{split}-*.parquet)")
    return files


def is_parquet(path: str | os.PathLike) -> bool:
    """Whether `path` is a Parquet file or a dataset directory (the `lmrl` format reads both)."""
    path = Path(path)
    return path.is_dir() or path.suffix == ".parquet"


def has_split(path: str | os.PathLike, split: str) -> bool:
    """Whether a dataset directory holds `split`."""
    path = Path(path)
    return path.is_dir() and any((path / "data").glob(f"{split}-*.parquet"))


def num_episodes(path: str | os.PathLike, split: str = "train") -> int:
    """The number of episodes of `split`, from the files' footers (no row is read)."""
    pq = _pyarrow().parquet
    return sum(pq.ParquetFile(f).metadata.num_rows for f in split_files(path, split))


def file_metadata(path: str | os.PathLike) -> dict:
    """The `lmrl` key-value metadata a file was written with (task, recipe, hashes, split), or {}."""
    meta = _pyarrow().parquet.ParquetFile(path).schema_arrow.metadata or {}
    return json.loads(meta.get(b"lmrl", b"{}"))


def iter_parquet(path: str | os.PathLike, split: str = "train", task: str | None = None) -> Iterator[Episode]:
    """Stream the episodes of a Parquet file or of a dataset directory's `split`, one row group in memory at a time.
    With `task`, every row's `task` must be it. A bad row raises `DatasetError` naming the file and row."""
    pq = _pyarrow().parquet
    for file in split_files(path, split):
        source = pq.ParquetFile(file)
        missing = [c for c in READ_COLUMNS if c not in source.schema_arrow.names]
        if missing:
            raise DatasetError(f"{file}: not an lmrl episode file (no column {', '.join(missing)})")
        index = 0
        for group in range(source.num_row_groups):
            for row in source.read_row_group(group, columns=READ_COLUMNS).to_pylist():
                try:
                    if task is not None and row["task"] != task:
                        raise ValueError(f"an episode of task {row['task']!r}, not of {task!r}")
                    episode = episode_from_row(row)
                except (ValueError, TypeError, AttributeError, KeyError) as e:
                    raise DatasetError(f"{file}: row {index}: malformed episode: {e}") from e
                index += 1
                yield episode
