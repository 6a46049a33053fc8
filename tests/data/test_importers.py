"""Importers for the original LMRL-Gym maze files (FO step lists, PO text histories)."""

import json

import pytest

from lmrl.data.importers import IMPORTERS, import_lmrl_gym_maze_fo, import_lmrl_gym_maze_po, load_episodes
from lmrl.data.jsonl import DatasetError, write_episodes
from lmrl.envs.base import Episode, Text

S11 = (
    "The goal is at position 8, 6. Your current position is at position 1, 1. "
    "There are walls to your left, above you, below you.\n"
)
S12 = "The goal is at position 8, 6. Your current position is at position 1, 2. There are walls above you, below you.\n"
FO_LINE = [
    {"state": S11, "action": "move right\n", "reward": -1.0, "done": False},
    {"state": S12, "action": "move up", "reward": -1, "done": False},
    {"state": S12, "action": "go left\n", "reward": -4.0, "done": True},
]
PO_LINE = {
    "text_history": ["There is a wall above you.\n", "move down\n", "There are walls to your left, to your right.\n",
                     "move down\n", "Success\n"],
    "rewards": [0.0, -1.0, 0.0, 0.0, 0.0],
    "dones": [False, False, False, True, True],
}


def write_lines(path, objs) -> str:
    path.write_text("".join(json.dumps(o) + "\n" for o in objs))
    return str(path)


def test_fo_import(tmp_path):
    path = write_lines(tmp_path / "fo.jsonl", [FO_LINE, FO_LINE[:1]])
    first, second = import_lmrl_gym_maze_fo(path)
    assert first.turns == [
        Text(S11, False), Text("move right\n", True), Text(S12, False), Text("move up\n", True),
        Text(S12, False), Text("go left\n", True),
    ]
    assert first.rewards == [0.0, -1.0, 0.0, -1.0, 0.0, -4.0]
    assert first.done and first.total_return == -6.0 and first.num_actions == 3
    assert not second.done and second.rewards == [0.0, -1.0]


def test_po_import(tmp_path):
    path = write_lines(tmp_path / "po.jsonl", [PO_LINE])
    (episode,) = import_lmrl_gym_maze_po(path)
    assert [t.text for t in episode.turns] == PO_LINE["text_history"]
    assert [t.is_action for t in episode.turns] == [False, True, False, True, False]
    assert episode.rewards == PO_LINE["rewards"] and episode.done and episode.num_actions == 2


def po_with(**changes) -> dict:
    return {**PO_LINE, **changes}


FO_BAD = {
    "missing action": [{"state": S11, "reward": -1, "done": True}],
    "empty list": [],
    "string reward": [{"state": S11, "action": "move up\n", "reward": "-1", "done": True}],
    "non-string state": [{"state": 3, "action": "move up\n", "reward": -1, "done": True}],
}
PO_BAD = {
    "short rewards": po_with(rewards=[0.0, -1.0]),
    "reward on observation": po_with(rewards=[-1.0, -1.0, 0.0, 0.0, 0.0]),
    "missing dones": {"text_history": PO_LINE["text_history"], "rewards": PO_LINE["rewards"]},
    "not an object": [1, 2],
}


@pytest.mark.parametrize(
    "importer, good, bad",
    [(import_lmrl_gym_maze_fo, FO_LINE, b) for b in FO_BAD.values()]
    + [(import_lmrl_gym_maze_po, PO_LINE, b) for b in PO_BAD.values()],
)
def test_malformed_line_names_file_and_line(tmp_path, importer, good, bad):
    path = write_lines(tmp_path / "bad.jsonl", [good, good, bad])
    with pytest.raises(DatasetError) as err:
        list(importer(path))
    assert f"{path}:3:" in str(err.value)


def test_load_episodes_dispatches(tmp_path):
    fo = write_lines(tmp_path / "fo.jsonl", [FO_LINE])
    assert list(load_episodes(fo, "lmrl_gym_maze_fo")) == list(import_lmrl_gym_maze_fo(fo))
    ours = tmp_path / "ours.jsonl"
    episode = Episode([Text("Success\n", False)], [0.0], True, {"start": [7, 6]})
    write_episodes(ours, [episode])
    assert list(load_episodes(ours, "lmrl")) == [episode]
    assert set(IMPORTERS) == {"lmrl", "lmrl_gym_maze_fo", "lmrl_gym_maze_po"}


def test_unknown_format_lists_valid_ones(tmp_path):
    with pytest.raises(ValueError) as err:
        load_episodes(tmp_path / "x.jsonl", "csv")
    for name in IMPORTERS:
        assert name in str(err.value)
