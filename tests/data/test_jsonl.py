"""Episode JSONL: round trips exactly, and a malformed line names its file and line."""

import json

import pytest

from lmrl.data.jsonl import DatasetError, episode_to_dict, iter_episodes, read_episodes, write_episodes
from lmrl.envs.base import Episode, Text


def sample_episodes() -> list[Episode]:
    first = Episode(
        [Text("There is a wall above you.\n", False), Text("move up\n", True), Text("Success\n", False)],
        [0.0, -1.0, 0.0],
        True,
        {"start": [7, 6], "goal": [8, 6], "success": True},
    )
    second = Episode(
        [
            Text("Wordle:\n", False), Text("s l a t e\n", True),
            Text("b y g b b\n", False), Text("ünï\tcode 🙂\n", True),
        ],
        [0.0, -1.0, 0.0, -4.5],
        False,
        {"word": "crane", "nested": {"a": [1, 2]}},
    )
    return [first, second]


def test_round_trip(tmp_path):
    path = tmp_path / "sub" / "episodes.jsonl"
    assert write_episodes(path, sample_episodes()) == 2
    assert read_episodes(path) == sample_episodes()
    assert not list(tmp_path.glob("sub/*.tmp*"))


def test_blank_lines_are_skipped(tmp_path):
    path = tmp_path / "episodes.jsonl"
    lines = [json.dumps(episode_to_dict(ep)) for ep in sample_episodes()]
    path.write_text("\n" + lines[0] + "\n\n" + lines[1] + "\n")
    assert list(iter_episodes(path)) == sample_episodes()


GOOD = json.dumps(episode_to_dict(sample_episodes()[0]))
BAD_LINES = {
    "bad json": '{"turns": [',
    "missing turns": '{"done": true, "info": {}}',
    "non-bool is_action": '{"turns": [{"text": "hi\\n", "is_action": "yes", "reward": 0}], "done": true}',
    "reward on env turn": '{"turns": [{"text": "hi\\n", "is_action": false, "reward": -1}], "done": true}',
    "not an object": "[1, 2, 3]",
}


@pytest.mark.parametrize("bad", sorted(BAD_LINES))
def test_malformed_line_names_file_and_line(tmp_path, bad):
    path = tmp_path / "broken.jsonl"
    # Line 4 is the bad one: a blank line must not shift the count.
    path.write_text("\n".join([GOOD, "", GOOD, BAD_LINES[bad], GOOD]) + "\n")
    with pytest.raises(DatasetError) as err:
        read_episodes(path)
    assert f"{path}:4:" in str(err.value)
