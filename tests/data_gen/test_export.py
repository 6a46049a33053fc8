"""`python -m data_gen.export`: Parquet splits and a Hub dataset card that `datasets` loads, and a directory that
trains exactly as the cached JSONL it came from."""

import json

import pytest
import torch
import yaml
from hydra.utils import instantiate

from data_gen import export
from lmrl.algos.base import build_trainer
from lmrl.data.jsonl import DatasetError
from lmrl.data.parquet import ROW_FIELDS, TURN_FIELDS, file_metadata, split_path
from lmrl.task import Task
from lmrl.tracking import NullLogger
from tests.e2e import run_cli

SMALL = ["task.data.recipe.episodes=60"]
TINY = ["algo=bc", "debug=smoke", "smoke.batch_size=4", "model=tiny", "model.n_layer=1", "model.n_embd=32",
        "model.n_head=2"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A 60-episode maze_fo dataset (and 8 held-out ones) exported by the CLI; its cache and directory."""
    cache, out = tmp_path_factory.mktemp("cache"), tmp_path_factory.mktemp("export") / "maze"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LMRL_CACHE", str(cache))
        export.main(["--task", "maze_fo", "--out", str(out), "--heldout", "8", "--rows-per-group", "16", *SMALL])
    return cache, out


def tasks(cache, out, *overrides: str) -> tuple[Task, Task]:
    """The task as `lmrl.train` builds it from the recipe, and from the exported directory."""
    recipe = Task(export.compose_train("maze_fo", [*SMALL, *overrides]).task, cache)
    given = Task(export.compose_train("maze_fo", [f"task.data.path={out}", *overrides]).task, cache)
    return recipe, given


def card(out) -> tuple[dict, str]:
    _, front, prose = (out / "README.md").read_text().split("---\n", 2)
    return yaml.safe_load(front), prose


def test_the_card_describes_the_splits_schema_recipe_and_statistics(exported):
    cache, out = exported
    meta, prose = card(out)
    assert meta["license"] == "mit" and "reinforcement-learning" in meta["task_categories"]
    assert meta["configs"][0]["data_files"] == [{"split": "train", "path": "data/train-*.parquet"},
                                                {"split": "heldout", "path": "data/heldout-*.parquet"}]
    assert [(s["name"], s["num_examples"]) for s in meta["dataset_info"]["splits"]] == [("train", 60), ("heldout", 8)]
    recipe, _ = tasks(cache, out)
    stats = json.loads(recipe.dataset_path().with_suffix(".stats.json").read_text())  # written when generated
    assert f"avg_return    {stats['avg_return']:.2f}" in prose and "episodes: 60" in prose
    assert file_metadata(split_path(out, "heldout"))["recipe"]["seed"] == 0 and "| observation |" in prose
    config_hash, sources = recipe.dataset_path().stem.split("-")  # the cache file's name is the recipe key
    assert f"recipe hash `{config_hash}`, generator version `lmrl-" in prose and f"+{sources}`" in prose


def test_datasets_loads_the_files_and_the_card(exported, tmp_path):
    datasets = pytest.importorskip("datasets")
    _, out = exported
    files = {"train": str(out / "data/train-*.parquet"), "heldout": str(out / "data/heldout-*.parquet")}
    plain = datasets.load_dataset("parquet", data_files=files, cache_dir=str(tmp_path))
    by_card = datasets.load_dataset(str(out), cache_dir=str(tmp_path))  # the card's configs and features
    assert plain["train"].features == by_card["train"].features and by_card.num_rows == {"train": 60, "heldout": 8}
    first = by_card["train"][0]
    assert first["turns"][0]["observation"].startswith("The goal is at") and first["turns"][-1]["action"] is None
    assert first["return"] == sum(t["reward"] for t in first["turns"]) and first["task"] == "maze_fo"
    streamed = datasets.load_dataset("parquet", data_files=files, split="train", streaming=True)
    assert next(iter(streamed))["info"] == first["info"]


def first_batches(task: Task, cfg) -> tuple[list, list[dict]]:
    """The tokenizer's vocabulary and the first BC batches, as `lmrl.train` builds them for `task`."""
    model, tokenizer = instantiate(cfg.model, corpus=task.texts)
    trainer = build_trainer(cfg.algo, task=task, engine=instantiate(cfg.hardware.engine), model=model,
                            tokenizer=tokenizer, logger=NullLogger(), seed=0, run_dir=None, checkpointer=None)
    batches = trainer.batches(trainer.seqs)
    return sorted(tokenizer.get_vocab().items()), [next(batches) for _ in range(3)]


def test_training_from_the_directory_sees_the_batches_of_the_jsonl_route(exported):
    cache, out = exported
    recipe, given = tasks(cache, out)
    cfg = export.compose_train("maze_fo", [*SMALL, *TINY])
    vocab, batches = first_batches(recipe, cfg)
    vocab_dir, batches_dir = first_batches(given, cfg)
    assert vocab == vocab_dir
    for a, b in zip(batches, batches_dir, strict=True):
        assert a.keys() == b.keys() and {"input_ids", "action_mask", "rewards", "weights"} <= a.keys()
        for key, value in a.items():
            assert torch.equal(value, b[key]) if torch.is_tensor(value) else value == b[key], key
    assert given.heldout_episodes(8) == recipe.heldout_episodes(8) and len(given.heldout_episodes(8)) == 8
    assert given.dataset_name().startswith("maze-") and given.dataset_name() != recipe.dataset_name()


def test_a_run_of_another_task_and_an_occupied_directory_are_refused(exported, tmp_path, monkeypatch):
    cache, out = exported
    po = Task(export.compose_train("maze_po", [f"task.data.path={out}"]).task, cache)
    with pytest.raises(DatasetError, match=r"train-00000-of-00001\.parquet: row 0: .*task 'maze_fo', not of 'maze_po'"):
        next(po.episodes())
    fo = Task(export.compose_train("maze_fo", [f"task.data.path={out}"]).task, cache)
    with pytest.raises(ValueError, match="is the dataset being exported"):
        export.export(fo, out, force=True)
    monkeypatch.setenv("LMRL_CACHE", str(cache))
    again = ["--task", "maze_fo", "--out", str(out), "--heldout", "0", *SMALL]
    with pytest.raises(SystemExit, match="already holds a dataset"):
        export.main(again)
    copy = tmp_path / "copy"
    export.main(["--task", "maze_fo", "--out", str(copy), "--heldout", "8", *SMALL])
    export.main([*again[:3], str(copy), "--heldout", "0", "--force", *SMALL])  # replaces, without a heldout split
    assert sorted(p.name for p in (copy / "data").iterdir()) == ["train-00000-of-00001.parquet"]
    assert [s["name"] for s in card(copy)[0]["dataset_info"]["splits"]] == ["train"]


def test_the_card_documents_every_column_and_turn_field():
    assert [name for name, _, _ in export.ROW_DOCS] == [name for name, _ in ROW_FIELDS]
    assert [name for name, _, _ in export.TURN_DOCS] == [name for name, _ in TURN_FIELDS]


def test_size_categories_and_licenses():
    assert [export.size_category(n) for n in (0, 999, 1000, 60_000, 100_000, 1_000_000, 10**10)] == [
        "n<1K", "n<1K", "1K<n<10K", "10K<n<100K", "100K<n<1M", "1M<n<10M", "100M<n<1B"]
    assert export.LICENSES["guess"][0] == "cc-by-4.0"


@pytest.mark.slow
def test_lmrl_train_runs_from_an_exported_directory(exported, tmp_path):
    _, out = exported
    metrics = run_cli("lmrl.train", ["task=maze_fo", f"task.data.path={out}", *TINY, "smoke.steps=2",
                                     "task.eval.episodes_per_start=1", "task.eval.max_starts=2"],
                      tmp_path / "run", tmp_path / "cache", timeout=170)
    assert metrics["task"] == "maze_fo" and metrics["algo"] == "bc"


EVERY_TASK = ["maze_fo", "maze_po", "text_nav_fo", "text_nav_po", "wordle", "chess", "endgames",
              "twenty_questions", "guess", "car_dealer"]


@pytest.mark.parametrize("name", EVERY_TASK)
def test_every_task_exports_and_reads_back_its_episodes(name, tmp_path, monkeypatch):
    """Each task's (small) dataset through Parquet and back: the same episodes as its JSONL, and a card naming it."""
    monkeypatch.setenv("LMRL_CACHE", str(tmp_path / "cache"))
    small = ["task.data.recipe.episodes=12"]
    out = tmp_path / name
    export.main(["--task", name, "--out", str(out), "--heldout", "2", "--rows-per-group", "5", *small])
    recipe = Task(export.compose_train(name, small).task, tmp_path / "cache")
    given = Task(export.compose_train(name, [f"task.data.path={out}"]).task, tmp_path / "cache")
    assert list(given.episodes()) == list(recipe.episodes()) and len(list(recipe.episodes())) == 12
    front, prose = card(out)
    assert name in prose and front["configs"]
