"""A task: its env factory, its dataset (generated once and cached), window and scoring.

The dataset cache key is a hash of the recipe config, so changing any generation
parameter builds a new file while repeated runs reuse the old one.
"""

from __future__ import annotations

import hashlib
import importlib
import itertools
import inspect
import json
import logging
from pathlib import Path
from typing import Iterator

from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm

from lmrl.data.importers import load_episodes
from lmrl.data.jsonl import write_episodes
from lmrl.data.parquet import has_split, is_parquet, iter_parquet, split_files
from lmrl.data.stats import dataset_stats, format_stats_table
from lmrl.envs.base import Episode, TextEnv
from lmrl.scoring import normalize
from lmrl.utils import atomic_write_text, file_lock

log = logging.getLogger(__name__)

# Held-out episodes use the recipe's seed plus this (every generator draws its episodes from the seed).
HELDOUT = 1_000_003


# Recipe options that change how a dataset is made, never what it holds (the chess and endgames generators
# give the same episodes for any `workers`: tests/data_gen/test_chess_gen.py): left out of the cache key.
OUTPUT_NEUTRAL = ("workers",)


def recipe_key(recipe) -> str:
    """Cache key of a dataset recipe: its config, plus the source of the generator's module and of
    every `lmrl.envs` / `data_gen` module and task data file it uses, so editing a generator, an
    env's rules or a word list invalidates old datasets instead of silently reusing them."""
    module = importlib.import_module(recipe._target_.rsplit(".", 1)[0])
    digest = hashlib.sha256()
    for path in generator_sources(module):
        digest.update(path.read_bytes())
    content = {k: v for k, v in OmegaConf.to_container(recipe, resolve=True).items() if k not in OUTPUT_NEUTRAL}
    config = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:12]
    return f"{config}-{digest.hexdigest()[:8]}"


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes, kept beside it (`<name>.sha256`, recomputed when the file is newer)."""
    sidecar = path.with_name(path.name + ".sha256")
    if sidecar.exists() and sidecar.stat().st_mtime >= path.stat().st_mtime:
        return sidecar.read_text().strip()
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    atomic_write_text(sidecar, digest.hexdigest())  # concurrent runs write the same digest
    return digest.hexdigest()


def generator_sources(module) -> list[Path]:
    """The generator's own file, the task-code modules it uses directly or through other task-code
    modules (the oracle's parser and rules behind the env), and the envs' data files."""
    ours = ("lmrl.envs", "data_gen")
    files = {Path(inspect.getfile(module))}
    todo, seen = [module], {module.__name__}
    while todo:
        for value in vars(todo.pop()).values():
            source = value if inspect.ismodule(value) else inspect.getmodule(value)
            if source is None or not source.__name__.startswith(ours) or not getattr(source, "__file__", None):
                continue
            files.add(Path(source.__file__))
            if source.__name__ not in seen:
                seen.add(source.__name__)
                todo.append(source)
    data_dir = Path(inspect.getfile(importlib.import_module("lmrl.envs"))).parent / "data"
    files.update(data_dir.glob("*.txt"))
    files.update(data_dir.glob("*.json"))
    return sorted(files)


class Task:
    """One task variant, built from its `conf/task/<name>.yaml`: the env factory, the dataset (a user-given file, or
    generated from the recipe once and cached under `<cache_dir>/datasets/<task>/`), the history window a policy sees,
    and the normalization anchors of its scores. Raises `ValueError` at construction for an inconsistent
    `moves_per_sequence`."""

    def __init__(self, cfg: DictConfig, cache_dir: str | Path):
        self.cfg = cfg
        self.name: str = cfg.name
        self.history_window: int | None = cfg.history_window
        # Windowed tasks: consecutive actions trained per sequence (conf/task/maze_po.yaml says why and when).
        self.moves_per_sequence: int = int(cfg.get("moves_per_sequence", 1))
        if self.moves_per_sequence < 1 or (self.moves_per_sequence > 1 and self.history_window is None):
            raise ValueError(f"task {self.name!r}: moves_per_sequence must be 1, or > 1 only with a history_window "
                             f"(whole-history tasks train every move in one sequence already); got "
                             f"{self.moves_per_sequence} with history_window={self.history_window}")
        self.normalization: dict = OmegaConf.to_container(cfg.normalization, resolve=True)
        self.cache_dir = Path(cache_dir)

    def make_env(self) -> TextEnv:
        """A new environment from the task's `env` config (its `_target_` and arguments). Raises `ValueError` when an
        `oracle=` override is given to a task whose env has no oracle."""
        if "oracle" in self.cfg.env:
            target = get_class(self.cfg.env._target_)
            if "oracle" not in inspect.signature(target.__init__).parameters:
                raise ValueError(f"task {self.name!r} has no oracle to replace (oracle=... applies to the dialogue "
                                 "tasks: twenty_questions, guess, car_dealer)")
        return instantiate(self.cfg.env)

    def normalize(self, mean_return: float) -> float:
        """A mean return on the task's normalized scale (`lmrl.scoring.normalize` with its anchors): 0 at the minimum
        return, 50 at the dataset's average, 100 at the maximum, not clipped."""
        return normalize(mean_return, **self.normalization)

    def dataset_path(self) -> Path:
        """The dataset file: a user-given `data.path`, or the cached output of `data.recipe`."""
        if self.cfg.data.path:
            return Path(self.cfg.data.path)
        return self._cached(self.cfg.data.recipe)

    def dataset_name(self) -> str:
        """What cached training stages key the dataset by: the file's name, or for a dataset directory
        (`data_gen.export`) its name and a digest of its `train` files' bytes (two exports of one name differ)."""
        path = self.dataset_path()
        if not path.is_dir():
            return path.name
        digest = hashlib.sha256()
        for file in split_files(path, "train"):
            with open(file, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
        return f"{path.name}-{digest.hexdigest()[:12]}"

    def dataset_aliases(self) -> list[str]:
        """Names of other cached dataset files of this task with the same bytes as this one (a generator edit
        that changed no episode gives a new file name, not new data), so stages trained on them can be reused."""
        path = self.dataset_path()
        if self.cfg.data.path:
            return []
        size = path.stat().st_size
        same_size = [p for p in sorted(path.parent.glob("*.jsonl")) if p != path and p.stat().st_size == size]
        if not same_size:
            return []
        digest = file_digest(path)
        return [p.name for p in same_size if file_digest(p) == digest]

    def heldout_episodes(self, n: int) -> list[Episode]:
        """`n` episodes no run trains on, for measuring critics: the recipe with another seed (its own
        cache entry).  A user-given `data.path` has no recipe to draw from: the first `n` episodes of a dataset
        directory's `heldout` split (`data_gen.export`), else its first `n` episodes, which are training data too."""
        path = self.cfg.data.path
        if path and has_split(path, "heldout"):
            episodes = list(itertools.islice(iter_parquet(path, "heldout", task=self.name), n))
            if len(episodes) < n:
                log.warning("%s: the heldout split has %d episodes, fewer than the %d asked for", path,
                            len(episodes), n)
            return episodes
        if path:
            return list(itertools.islice(self.episodes(), n))
        return list(load_episodes(self.heldout_path(n), "lmrl"))

    def heldout_path(self, n: int) -> Path:
        """The cached file of the recipe's `n` held-out episodes (its seed plus `HELDOUT`), generated on first use."""
        recipe = OmegaConf.merge(self.cfg.data.recipe, {"episodes": n, "seed": int(self.cfg.data.recipe.seed) + HELDOUT})
        return self._cached(recipe, "heldout")

    def _cached(self, recipe, kind: str = "") -> Path:
        """The recipe's file under `datasets/<task>/` (held-out sets in its `heldout/` folder)."""
        path = self.cache_dir / "datasets" / self.name / kind / f"{recipe_key(recipe)}.jsonl"
        if not path.exists():
            # concurrent runs (a sweep's cells) generate it once; the others wait and reuse it
            with file_lock(self.cache_dir / "locks" / f"data_{self.name}_{kind}{path.stem}.lock"):
                if not path.exists():
                    self._generate(path, recipe)
        return path

    def episodes(self) -> Iterator[Episode]:
        """Stream the dataset's episodes from disk (never all in RAM unless the caller keeps them)."""
        fmt = self.cfg.data.format if self.cfg.data.path else "lmrl"
        if fmt == "lmrl" and is_parquet(self.dataset_path()):  # an exported dataset: every row of this task
            return iter_parquet(self.dataset_path(), task=self.name)
        return load_episodes(self.dataset_path(), fmt)

    def texts(self) -> Iterator[str]:
        """Every segment of the dataset: the corpus a from-scratch tokenizer is trained on."""
        for ep in self.episodes():
            for turn in ep.turns:
                yield turn.text

    def _generate(self, path: Path, recipe) -> None:
        n = int(recipe.episodes)
        log.info("generating %s dataset (%d episodes) -> %s", self.name, n, path)
        episodes = tqdm(instantiate(recipe), total=n, desc=f"data {self.name}", unit="ep")
        write_episodes(path, episodes)
        stats = dataset_stats(load_episodes(path, "lmrl"))
        paper = OmegaConf.to_container(self.cfg.data.paper_stats, resolve=True) if self.cfg.data.get("paper_stats") else None
        path.with_suffix(".stats.json").write_text(json.dumps(stats, indent=2))
        log.info("dataset statistics (ours vs paper):\n%s", format_stats_table(stats, paper))
