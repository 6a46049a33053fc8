"""Publish a task's dataset for Hugging Face `datasets`: Parquet files and a dataset card.

`python -m data_gen.export --task wordle --out DIR [overrides]` writes the dataset `python -m lmrl.train task=wordle
[overrides]` trains on (the same cached file, generated first if no run has made it yet) to
`DIR/data/train-00000-of-00001.parquet`, the recipe's held-out episodes (`lmrl.task.HELDOUT`) to
`DIR/data/heldout-00000-of-00001.parquet`, and `DIR/README.md`: a card whose YAML front matter the Hub reads
(configs and data files, features, license, task categories) and whose prose gives the row layout, the recipe and
the Table 1 statistics.  Episodes stream from the cached JSONL into Parquet row groups (`lmrl.data.parquet`), so a
1M-episode dataset never sits in memory.  `python -m lmrl.train task=wordle task.data.path=DIR` trains from it.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Iterable, Iterator

import yaml
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

from lmrl.data.importers import load_episodes
from lmrl.data.parquet import (ROW_FIELDS, ROWS_PER_GROUP, ParquetEpisodeWriter, episode_to_row, has_split,
                               iter_parquet, split_path)
from lmrl.data.stats import dataset_stats, format_stats_table
from lmrl.envs.base import Episode
from lmrl.task import Task, recipe_key

CONF = Path(__file__).resolve().parents[1] / "conf"
# Held-out episodes exported by default: the value-based algorithms' `critic_episodes` (conf/algo/mc.yaml), so a
# run from the directory measures its critic on the episodes a run from the recipe would.
HELDOUT_EPISODES = 64
# Every task's data is the project's own (MIT) except Guess My City's, whose city facts come from GeoNames.
LICENSES = {"guess": ("cc-by-4.0", "The cities' coordinates and populations come from GeoNames "
                                   "(https://www.geonames.org/, CC BY 4.0); the rest is lmrl's own, MIT.")}
DEFAULT_LICENSE = ("mit", "MIT, like lmrl, whose scripted players generated it (the Wordle word list is the "
                          "original LMRL-Gym's, also MIT).")
ROW_DOCS = [
    ("episode_id", "int64", "index of the episode in its split, from 0"),
    ("task", "string", "the lmrl task variant (`conf/task/<task>.yaml`)"),
    ("turns", "list of structs", "the interaction, one entry per turn (below)"),
    ("return", "float64", "sum of the turns' rewards"),
    ("success", "bool", "whether the episode reached the task's goal (`info.success`)"),
    ("info", "string", "the episode's hidden state as a JSON object (the secret word, the maze's start and goal, "
                       "...); its keys differ between tasks"),
    ("recipe_hash", "string", "hash of the generator's config (first half of the cache key; empty for a "
                              "user-given `data.path`)"),
    ("generator_version", "string", "lmrl version + hash of the generator's and envs' source files"),
]
TURN_DOCS = [
    ("observation", "string or null", "the environment's text before the action (null: none came before it)"),
    ("action", "string or null", "the agent's reply (null on the closing turn that only holds the env's last "
                                 "reply)"),
    ("reward", "float64", "the action's reward (0 without an action)"),
    ("done", "bool", "the episode is over: true from the turn of the action that ended it on"),
]


def lmrl_version() -> str:
    """The installed lmrl's version ("unknown" in a source tree that was never installed)."""
    try:
        return version("lmrl")
    except PackageNotFoundError:
        return "unknown"


def compose_train(task: str, overrides: Iterable[str] = ()) -> DictConfig:
    """The training config `python -m lmrl.train task=<task> <overrides>` composes."""
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        return compose("train", overrides=[f"task={task}", *overrides])


def provenance(task: Task) -> tuple[str, str]:
    """(recipe hash, generator version) of the task's dataset: the two halves of its cache key, the second one
    prefixed with the lmrl version; empty for a user-given `data.path`."""
    if task.cfg.data.path:
        return "", ""
    config, sources = recipe_key(task.cfg.data.recipe).split("-")
    return config, f"lmrl-{lmrl_version()}+{sources}"


def write_split(path: Path, episodes: Iterable[Episode], task: Task, meta: dict, rows_per_group: int) -> dict:
    """Stream `episodes` into the Parquet file `path`; their Table 1 statistics (`lmrl.data.stats`)."""
    recipe_hash, generator = meta["recipe_hash"], meta["generator_version"]
    writer = ParquetEpisodeWriter(path, meta, rows_per_group)

    def written() -> Iterator[Episode]:  # each episode goes to the file as the statistics pass over it
        for k, ep in enumerate(episodes):
            writer.write(episode_to_row(ep, k, task.name, recipe_hash, generator))
            yield ep

    try:
        stats = dataset_stats(written())
    except BaseException:
        writer.abort()
        raise
    writer.close()
    return {**stats, "num_bytes": writer.nbytes}


def clear(out: Path, force: bool) -> None:
    """Make room for an export in `out`: refuse a directory holding one unless `force`, which removes it."""
    previous = sorted((out / "data").glob("*.parquet")) + ([out / "README.md"] if (out / "README.md").exists() else [])
    if previous and not force:
        raise SystemExit(f"{out} already holds a dataset ({previous[0].name}, ...); pass --force to replace it")
    for path in previous:
        path.unlink()


def export(task: Task, out: str | Path, heldout: int = HELDOUT_EPISODES, rows_per_group: int = ROWS_PER_GROUP,
           command: str = "", force: bool = False) -> dict:
    """Write `task`'s dataset to `out` as Parquet splits and a dataset card; returns each split's episode count and
    statistics. `heldout` episodes of the recipe's held-out seed (0: none; a user-given `data.path` has only its
    own `heldout` split, if any). `command` is the line the card says reproduces the export."""
    if heldout < 0:
        raise ValueError(f"heldout must be >= 0 (got {heldout})")
    out = Path(out)
    if task.cfg.data.path and Path(task.cfg.data.path).resolve() == out.resolve():
        raise ValueError(f"{out} is the dataset being exported: write the export elsewhere")
    clear(out, force)
    recipe_hash, generator = provenance(task)
    recipe = OmegaConf.to_container(task.cfg.data.recipe, resolve=True) if not task.cfg.data.path else None
    meta = {"task": task.name, "recipe": recipe, "recipe_hash": recipe_hash, "generator_version": generator}
    splits = {"train": write_split(split_path(out, "train"), task.episodes(), task, {**meta, "split": "train"},
                                   rows_per_group)}
    held = heldout_source(task, heldout)
    if held is not None:
        splits["heldout"] = write_split(split_path(out, "heldout"), held, task, {**meta, "split": "heldout"},
                                        rows_per_group)
    summary = {**meta, "splits": splits}
    (out / "README.md").write_text(dataset_card(task, summary, command))
    return summary


def heldout_source(task: Task, n: int) -> Iterable[Episode] | None:
    """The held-out episodes to export: `n` from the recipe's held-out seed, or a given directory's own split."""
    path = task.cfg.data.path
    if path:
        return iter_parquet(path, "heldout", task=task.name) if has_split(path, "heldout") else None
    return load_episodes(task.heldout_path(n), "lmrl") if n else None


def size_category(n: int) -> str:
    """The Hub's `size_categories` bucket of `n` rows."""
    if n < 1000:
        return "n<1K"
    bounds = ["1K", "10K", "100K", "1M", "10M", "100M", "1B"]
    k = min(int(math.log10(n)) - 3, len(bounds) - 2)
    return f"{bounds[k]}<n<{bounds[k + 1]}"


def features_yaml() -> list[dict]:
    """The `dataset_info.features` of a row (`lmrl.data.parquet.ROW_FIELDS`), in the Hub's YAML form."""
    def feature(name, spec) -> dict:
        if isinstance(spec, tuple):  # a list of structs
            return {"name": name, "list": [feature(*sub) for sub in spec]}
        return {"name": name, "dtype": spec}

    return [feature(name, spec) for name, spec in ROW_FIELDS]


def front_matter(task: Task, summary: dict) -> dict:
    """The card's YAML metadata: what the Hub reads to list, load and preview the dataset."""
    splits = summary["splits"]
    license_id = LICENSES.get(task.name, DEFAULT_LICENSE)[0]
    return {
        "pretty_name": f"lmrl {task.name}",
        "license": license_id,
        "language": ["en"],
        "task_categories": ["reinforcement-learning", "text-generation"],
        "tags": ["lmrl", "lmrl-gym", "offline-rl", "multi-turn", task.name],
        "size_categories": [size_category(splits["train"]["size"])],
        "configs": [{"config_name": "default", "default": True,
                     "data_files": [{"split": name, "path": f"data/{name}-*.parquet"} for name in splits]}],
        "dataset_info": {"config_name": "default", "features": features_yaml(),
                         "splits": [{"name": name, "num_bytes": s["num_bytes"], "num_examples": s["size"]}
                                    for name, s in splits.items()]},
    }


def paper_stats(task_cfg: DictConfig) -> dict | None:
    """The paper's Table 1 row of the task (`data.paper_stats`), if its config has one."""
    stats = task_cfg.data.get("paper_stats")
    return OmegaConf.to_container(stats, resolve=True) if stats else None


def _table(rows: list[tuple], header: tuple) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])


def dataset_card(task: Task, summary: dict, command: str = "") -> str:
    """README.md of an export: YAML front matter, then the splits, row layout, recipe, statistics and use."""
    name, splits = task.name, summary["splits"]
    paper = paper_stats(task.cfg)
    recipe = (f"```yaml\n{yaml.safe_dump(summary['recipe'], sort_keys=False)}```" if summary["recipe"] is not None
              else f"A given file (`data.path: {task.cfg.data.path}`), not generated from a recipe.")
    stats = format_stats_table(splits["train"], paper)
    license_note = LICENSES.get(name, DEFAULT_LICENSE)[1]
    command = command or f"python -m data_gen.export --task {name} --out DIR"
    parts = [
        "---\n" + yaml.safe_dump(front_matter(task, summary), sort_keys=False) + "---",
        f"# lmrl {name}",
        f"The offline dataset of the `{name}` task of lmrl, a PyTorch rebuild of the LMRL-Gym benchmark "
        f"([arXiv:2311.18232](https://arxiv.org/abs/2311.18232)) for multi-turn reinforcement learning with "
        f"language models: the episodes "
        f"`python -m lmrl.train task={name}` trains on, one row per episode.",
        "## Splits\n\n" + _table([(k, s["size"]) for k, s in splits.items()], ("split", "episodes"))
        + "\n\n`heldout` (when present) holds episodes of the same recipe with another seed, which no run trains on.",
        "## Row layout\n\n" + _table(ROW_DOCS, ("column", "type", "meaning"))
        + "\n\nEach entry of `turns`:\n\n" + _table(TURN_DOCS, ("field", "type", "meaning"))
        + "\n\nA turn is the environment's text and the agent's reply to it. The environment's last reply "
          "(e.g. `Failure`, the final feedback) is a closing turn whose action is null. Concatenating the "
          "observations and actions in order gives the text the agent's history is made of.",
        f"## Recipe\n\n{recipe}\n\nrecipe hash `{summary['recipe_hash'] or '-'}`, generator version "
        f"`{summary['generator_version'] or '-'}`. Reproduce with `{command}`.",
        "## Statistics\n\nThe paper's Table 1 quantities over `train` (length = agent actions per episode, return = "
        "sum of rewards; population standard deviations):\n\n```text\n" + stats + "\n```",
        "## Use\n\n```python\nfrom datasets import load_dataset\n\n"
        f"data = load_dataset(\"parquet\", data_files={json.dumps({k: f'data/{k}-*.parquet' for k in splits})})\n"
        "turns = data[\"train\"][0][\"turns\"]\n```\n\n"
        f"Train from the directory: `python -m lmrl.train task={name} task.data.path=DIR`.",
        f"## License\n\n{license_note}",
    ]
    return "\n\n".join(parts) + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line: `--task`, `--out`, `--heldout`, `--rows-per-group`, `--force` and training overrides."""
    parser = argparse.ArgumentParser(description="Export a task's dataset as Parquet with a Hugging Face dataset card.")
    parser.add_argument("--task", required=True, help="task variant (conf/task/<task>.yaml), e.g. wordle")
    parser.add_argument("--out", required=True, help="output directory (data/*.parquet and README.md)")
    parser.add_argument("--heldout", type=int, default=HELDOUT_EPISODES,
                        help=f"held-out episodes to export (default {HELDOUT_EPISODES}, the critics' default; 0: none)")
    parser.add_argument("--rows-per-group", type=int, default=ROWS_PER_GROUP, help="episodes per Parquet row group")
    parser.add_argument("--force", action="store_true", help="replace a dataset already in --out")
    parser.add_argument("overrides", nargs="*", help="training config overrides, e.g. task.data.recipe.episodes=1000")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Export the task's dataset (generating it first if no run has cached it) and print each split's size."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    cfg = compose_train(args.task, args.overrides)
    task = Task(cfg.task, cfg.cache_dir)
    command = " ".join(["python -m data_gen.export", f"--task {args.task}", "--out DIR", *args.overrides])
    summary = export(task, args.out, args.heldout, args.rows_per_group, command, args.force)
    for split, stats in summary["splits"].items():
        print(f"{split}: {stats['size']} episodes -> {split_path(args.out, split)}")
    print(format_stats_table(summary["splits"]["train"], paper_stats(cfg.task)))
    print(f"card: {Path(args.out) / 'README.md'}")


if __name__ == "__main__":
    main()
