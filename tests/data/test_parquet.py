"""Episodes as Parquet rows: exact round trips for any segment order, row groups, and errors naming file and row."""

import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lmrl.data.importers import load_episodes
from lmrl.data.jsonl import DatasetError, write_episodes
from lmrl.data.parquet import (arrow_schema, episode_to_row, episode_turns, file_metadata, iter_parquet, num_episodes,
                               split_path, write_parquet)
from lmrl.envs.base import Episode, Text
from tests.helpers import junk


def game(done: bool = True) -> Episode:
    turns = [Text("Wordle:\n", False), Text("s l a t e\n", True), Text("b y b b g\n", False),
             Text("c r a n e\n", True), Text("g g g g g\n", False)]
    return Episode(turns, [0.0, -1.0, 0.0, -1.0, 0.0], done, {"secret": "crane", "success": done})


def test_turns_pair_each_observation_with_the_reply_and_close_with_the_last_observation():
    turns = episode_turns(game())
    assert [(t["observation"], t["action"], t["reward"], t["done"]) for t in turns] == [
        ("Wordle:\n", "s l a t e\n", -1.0, False), ("b y b b g\n", "c r a n e\n", -1.0, True),
        ("g g g g g\n", None, 0.0, True)]
    assert not any(t["done"] for t in episode_turns(game(done=False)))  # an unfinished episode


def random_episode(rng: random.Random) -> Episode:
    """Any segment order: consecutive observations or actions, a leading action, no closing observation."""
    turns = [Text(junk(rng, 12), rng.random() < 0.5) for _ in range(rng.randrange(1, 9))]
    rewards = [rng.choice([-1.0, 0.5, 1e-300, 3.25]) if t.is_action else 0.0 for t in turns]
    info = {"secret": junk(rng, 6), "nested": {"a": [1, None, 2.5]}, "success": rng.random() < 0.5}
    return Episode(turns, rewards, rng.random() < 0.7, info)


def test_any_episode_reads_back_exactly_and_as_its_jsonl_does(tmp_path):
    rng = random.Random(0)
    episodes = [random_episode(rng) for _ in range(300)]
    assert write_parquet(tmp_path / "e.parquet", episodes, "wordle", rows_per_group=7) == 300
    write_episodes(tmp_path / "e.jsonl", episodes)
    assert list(iter_parquet(tmp_path / "e.parquet")) == episodes == list(load_episodes(tmp_path / "e.jsonl"))
    assert list(load_episodes(tmp_path / "e.parquet", "lmrl")) == episodes  # the lmrl format reads Parquet too


def test_rows_go_in_groups_and_carry_the_provenance(tmp_path):
    path = split_path(tmp_path, "train")
    write_parquet(path, [game()] * 25, "wordle", "abc", "lmrl-0.1.0+def", {"task": "wordle"}, rows_per_group=10)
    source = pq.ParquetFile(path)
    assert [source.metadata.row_group(g).num_rows for g in range(source.num_row_groups)] == [10, 10, 5]
    assert source.schema_arrow.remove_metadata() == arrow_schema()
    assert file_metadata(path) == {"task": "wordle"} and num_episodes(tmp_path) == 25
    row = source.read().slice(3, 1).to_pylist()[0]
    assert (row["episode_id"], row["task"], row["return"], row["success"]) == (3, "wordle", -2.0, True)
    provenance = (row["recipe_hash"], row["generator_version"], json.loads(row["info"])["secret"])
    assert provenance == ("abc", "lmrl-0.1.0+def", "crane")
    assert list(load_episodes(tmp_path, "lmrl")) == [game()] * 25  # a dataset directory: its train split


def write_rows(path, rows) -> None:
    pq.write_table(pa.Table.from_pylist(rows, schema=arrow_schema()), path, row_group_size=2)


@pytest.mark.parametrize("change, message", [
    (lambda r: r.update(turns=[]), "non-empty"),
    (lambda r: r["turns"][0].update(observation=None, action=None), "turn 0 has neither"),
    (lambda r: r["turns"][2].update(reward=1.0), "turn 2: reward"),
    (lambda r: r["turns"][0].update(reward=float("nan")), "turn 0: reward"),
    (lambda r: r["turns"][2].update(done=False), "turn 2: done"),
    (lambda r: r.update(**{"return": -3.0}), "not the sum"),
    (lambda r: r.update(info="[1, 2]"), "JSON object"),
    (lambda r: r.update(info="{oops"), "Expecting property name"),
])
def test_a_malformed_row_names_the_file_and_row(tmp_path, change, message):
    rows = [episode_to_row(game(), k, "wordle", "", "") for k in range(5)]
    change(rows[3])  # in the second row group
    write_rows(tmp_path / "bad.parquet", rows)
    episodes = iter_parquet(tmp_path / "bad.parquet")
    assert [next(episodes) for _ in range(3)] == [game()] * 3  # streamed: the good rows come first
    with pytest.raises(DatasetError, match=rf"bad\.parquet: row 3: malformed episode: .*{message}"):
        next(episodes)


def test_rows_of_another_task_a_foreign_file_and_a_missing_split_are_refused(tmp_path):
    write_parquet(tmp_path / "w.parquet", [game()] * 2, "wordle")
    with pytest.raises(DatasetError, match=r"w\.parquet: row 0: .*task 'wordle', not of 'maze_fo'"):
        list(iter_parquet(tmp_path / "w.parquet", task="maze_fo"))
    pq.write_table(pa.table({"x": [1]}), tmp_path / "x.parquet")
    with pytest.raises(DatasetError, match=r"x\.parquet: not an lmrl episode file \(no column task, turns"):
        list(iter_parquet(tmp_path / "x.parquet"))
    with pytest.raises(DatasetError, match="no heldout split"):
        list(iter_parquet(tmp_path, "heldout"))


def test_a_failed_write_leaves_no_file(tmp_path):
    def broken():
        yield game()
        raise RuntimeError("generator died")

    with pytest.raises(RuntimeError, match="generator died"):
        write_parquet(tmp_path / "e.parquet", broken(), "wordle")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="rows_per_group"):
        write_parquet(tmp_path / "e.parquet", [], "wordle", rows_per_group=0)
