"""TextNavEnv against the original LMRL-Gym rules: texts, win/lose, step limit, robustness, caching."""

import os
import random

import pytest

from lmrl.envs import text_nav
from lmrl.envs.base import BatchedEnv, history_to_str
from lmrl.envs.text_nav import INVALID_REPLY, OBJECTIVE, ROOMS, TextNavEnv, walkthrough

pytest.importorskip("textworld")  # the optional `textnav` extra

OBJ = OBJECTIVE + "\n"
BEDROOM_TABLE = (
    "You can see a table. You wonder idly who left that here. The table is usual. "
    "On the table you can make out a bowl.\n"
    "There are unblocked exits to the south and west.\n"
)
FO_RESET_BEDROOM = (
    OBJ + "You've entered a bedroom.\n" + BEDROOM_TABLE + "You are carrying nothing.\n"
    "\nAdmissible commands: go south, go west, take bowl from table\n"
)
PO_RESET_BEDROOM = OBJ + BEDROOM_TABLE + "\nAdmissible commands: go south, go west, take bowl from table\n"
FO_LIVING_ROOM = (
    "You find yourself in a living room. A typical kind of place.\n"
    "You make out a table. You wonder idly who left that here. The table is usual. "
    "On the table you see a stale food and a fresh food.\n"
    "There are unguarded exits to the east, south and west.\n"
    "You are carrying nothing.\n"
    "\nAdmissible commands: go east, go south, go west, take fresh food from table, take stale food from table\n"
)
FO_WIN = "You close the fridge.\nYour score has just gone up by one point.\n*** The End ***\nYou are carrying nothing.\n"
PO_LOSE = "You eat the stale food. Not bad.\n*** You lost! ***\n"
# Optimal command counts per start room, by hand from the map (mean 7.625, the reference's number).
OPTIMAL = {"bedroom": 7, "office": 7, "bathroom": 8, "living room": 6,
           "kitchen": 8, "dining room": 7, "garden": 9, "backyard": 9}


def make(room="bedroom", **kwargs):
    env = TextNavEnv(**kwargs)
    history, info = env.reset(options={"start_room": room})
    return env, history, info


def play(env, commands):
    return [env.step(c + "\n") for c in commands]


def test_reset_text_fo_verbatim():
    _, history, info = make()
    assert history_to_str(history) == FO_RESET_BEDROOM
    assert info == {"start_room": "bedroom", "room": "bedroom"}


def test_reset_text_po_verbatim():
    _, history, _ = make(fully_observed=False)
    assert history_to_str(history) == PO_RESET_BEDROOM


def test_step_text_fo_verbatim():
    env, _, _ = make()
    result = env.step("go west\n")
    assert result.history[-1].text == FO_LIVING_ROOM and result.reward == 0.0
    assert result.info == {"room": "living room", "success": False, "failed": False, "invalid": False}


@pytest.mark.parametrize("room", ROOMS)
def test_po_never_names_the_room_and_has_no_inventory(room):
    env, history, _ = make(room, fully_observed=False)
    texts = [history[0].text.removeprefix(OBJ)]
    texts += [r.history[-1].text for r in play(env, walkthrough(room)[:-1] + ["look"])]
    for text in texts:
        assert "You are carrying" not in text
        assert not [name for name in ROOMS if name in text.lower()], text


def test_fo_and_po_differ_only_by_room_sentences_and_inventory():
    fo, _, _ = make("garden")
    po, _, _ = make("garden", fully_observed=False)
    decorations = fo._game.decorations
    for command in walkthrough("garden"):
        a, b = fo.step(command + "\n"), po.step(command + "\n")
        kept = [line for line in a.history[-1].text.splitlines(keepends=True)
                if line.strip() not in decorations and not line.startswith("You are carrying")]
        assert "".join(kept) == b.history[-1].text
        assert (a.reward, a.terminated, a.info) == (b.reward, b.terminated, b.info)


def test_optimal_lengths_by_room():
    assert {room: len(walkthrough(room)) for room in ROOMS} == OPTIMAL
    assert sum(OPTIMAL.values()) / len(OPTIMAL) == 7.625


@pytest.mark.parametrize("room", ROOMS)
def test_walkthrough_wins_with_reward_one_on_the_last_step(room):
    env, _, _ = make(room)
    results = play(env, walkthrough(room))
    assert [r.reward for r in results] == [0.0] * (OPTIMAL[room] - 1) + [1.0]
    assert [r.terminated for r in results] == [False] * (OPTIMAL[room] - 1) + [True]
    last = results[-1]
    assert last.info["success"] and not last.truncated and last.history[-1].text == FO_WIN
    assert env.legal_actions() == []
    with pytest.raises(RuntimeError):
        env.step("look\n")


def test_stale_food_in_open_fridge_or_closed_empty_fridge_does_not_win():
    env, _, _ = make("kitchen")
    results = play(env, ["open fridge", "close fridge", "go east", "go east", "take stale food from table",
                         "go west", "go west", "open fridge", "insert stale food into fridge"])
    assert all(r.reward == 0.0 and not r.terminated for r in results)
    assert env.state().food_holder == "fridge" and "fridge" in env.state().open
    assert env.step("close fridge\n").reward == 1.0


def test_eating_the_stale_food_loses():
    env, _, _ = make("living room", fully_observed=False)
    results = play(env, ["take stale food from table", "eat stale food"])
    last = results[-1]
    assert last.reward == 0.0 and last.terminated and not last.truncated
    assert last.info["failed"] and not last.info["success"] and last.history[-1].text == PO_LOSE


def test_eating_the_fresh_food_does_not_lose():
    env, _, _ = make("living room")
    results = play(env, ["take fresh food from table", "eat fresh food"])
    assert not results[-1].terminated and not results[-1].info["failed"]


def test_step_limit_truncates_counting_invalid_steps():
    env, _, _ = make(max_steps=3)
    results = [env.step(a) for a in ("go west\n", "dance\n", "go east\n")]
    assert [r.truncated for r in results] == [False, False, True]
    assert not any(r.terminated for r in results) and results[1].info["invalid"]
    assert results[-1].history[-1].text.endswith("Admissible commands: go south, go west, take bowl from table\n")
    with pytest.raises(RuntimeError):
        env.step("go west\n")


def test_win_on_the_last_allowed_step_is_terminated_not_truncated():
    env, _, _ = make("living room", max_steps=6)
    last = play(env, walkthrough("living room"))[-1]
    assert last.terminated and not last.truncated and last.reward == 1.0


def test_invalid_command_leaves_the_game_untouched():
    env, _, _ = make()
    before = (env.state(), env.admissible_commands(), env.legal_actions())
    result = env.step("take stale food from table\n")
    assert result.reward == 0.0 and result.info["invalid"] and not result.terminated
    assert result.history[-1].text == (INVALID_REPLY + "You are carrying nothing.\n"
                                       "\nAdmissible commands: go south, go west, take bowl from table\n")
    assert (env.state(), env.admissible_commands(), env.legal_actions()) == before
    results = play(env, walkthrough("bedroom"))
    assert results[0].history[-1].text == FO_LIVING_ROOM and results[-1].reward == 1.0


@pytest.mark.parametrize("action", ["quit\n", "restart\n", "undo\n", "save\n", "restore\n", "script\n", "QUIT",
                                    "go west\n\n", "go\twest\n", "go west\r\n", "go west.\n", "\ngo west", "", "\n"])
def test_meta_verbs_and_malformed_commands_are_rejected(action):
    env, _, _ = make()
    result = env.step(action)
    assert result.info["invalid"] and result.reward == 0.0 and env.state().room == "bedroom"
    assert play(env, walkthrough("bedroom"))[-1].reward == 1.0


@pytest.mark.parametrize("action", ["go west", "Go West\n", "  GO   west  \n", "go west \n"])
def test_case_and_spaces_are_normalized(action):
    env, _, _ = make()
    result = env.step(action)
    assert not result.info["invalid"] and env.state().room == "living room"
    assert result.history[-2].text == action  # the agent's text is recorded as said


def test_look_examine_inventory_are_legal_but_not_listed():
    env, _, _ = make()
    hidden = {"look", "inventory", "examine table", "examine bowl"}
    assert hidden <= set(env.admissible_commands())
    assert not hidden & {a.rstrip("\n") for a in env.legal_actions()}
    look = env.step("look\n")
    assert not look.info["invalid"] and look.history[-1].text == FO_RESET_BEDROOM.removeprefix(OBJ)
    assert env.step("inventory\n").history[-1].text.startswith("You are carrying nothing.\nYou are carrying nothing.\n")


def test_legal_actions_are_the_listed_commands():
    env, history, _ = make("kitchen")
    listed = history[-1].text.split("Admissible commands: ")[1].rstrip("\n").split(", ")
    assert env.legal_actions() == [c + "\n" for c in listed] == ["go east\n", "go north\n", "go west\n", "open fridge\n"]


def test_bad_start_room_lists_rooms():
    with pytest.raises(ValueError, match="living room"):
        TextNavEnv().reset(options={"start_room": "attic"})


def test_eval_reset_options_cover_every_room():
    assert TextNavEnv().eval_reset_options() == [{"start_room": room} for room in ROOMS]


def test_seeded_starts_are_uniform_and_deterministic():
    env = TextNavEnv()
    starts = [env.reset(seed=seed)[1]["start_room"] for seed in range(800)]
    assert set(starts) == set(ROOMS) and all(60 <= starts.count(r) <= 140 for r in ROOMS)  # expected 100
    a, b = TextNavEnv(), TextNavEnv()
    rng_a, rng_b = random.Random(5), random.Random(5)
    texts = []
    for env, rng in ((a, rng_a), (b, rng_b)):
        history, _ = env.reset(seed=11)
        while not env.done:
            history = env.step(rng.choice(env.legal_actions())).history
        texts.append(history_to_str(history))
    assert texts[0] == texts[1]


def test_interleaved_envs_do_not_disturb_each_other():
    """All envs of a process share one interpreter per start room (snapshots are swapped in)."""
    alone, _, _ = make("office")
    expected = [r.history[-1].text for r in play(alone, walkthrough("office"))]
    x, _, _ = make("office")
    y, _, _ = make("office")
    got = []
    for command in walkthrough("office"):
        got.append(x.step(command + "\n").history[-1].text)
        y.step("go north\n" if y.state().room == "office" else "go south\n")
    assert got == expected


def test_game_cache_is_built_once_and_atomically(tmp_path, monkeypatch):
    builds = []

    def fake_compile(folder, grammar_seed):
        builds.append(folder)
        (folder / "manifest.json").write_text("{}")

    monkeypatch.setattr(text_nav, "_compile_all", fake_compile)
    first = text_nav.game_dir(tmp_path)
    assert text_nav.game_dir(tmp_path) == first and len(builds) == 1
    assert first.parent == tmp_path / "text_nav" and first.name == text_nav.builder_hash(text_nav.GRAMMAR_SEED)
    assert builds[0] != first and not builds[0].exists()  # built under a temporary name, then renamed
    assert os.listdir(tmp_path / "text_nav") == [first.name]


def test_second_env_construction_does_not_rebuild(monkeypatch):
    TextNavEnv()  # the shared cache exists after this

    def no_build(*args):
        raise AssertionError("rebuilt the games")

    monkeypatch.setattr(text_nav, "_compile_all", no_build)
    env = TextNavEnv()
    assert (env.folder / "manifest.json").exists() and len(list(env.folder.glob("*.z8"))) == len(ROOMS)


def test_256_concurrent_envs_fit_in_a_small_memory_budget():
    def rss_mb():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

    warm = TextNavEnv()  # the shared part: TextWorld, the eight games and their interpreters
    for room in ROOMS:
        warm.reset(options={"start_room": room})
        warm.step("look\n")
    before, rng = rss_mb(), random.Random(0)
    batch = BatchedEnv(TextNavEnv, 256)
    batch.reset_all([{"start_room": ROOMS[i % 8]} for i in range(256)], seeds=list(range(256)))
    for _ in range(2):
        batch.step([rng.choice(batch.envs[i].legal_actions()) for i in batch.active])
    assert rss_mb() - before < 64  # one interpreter per room per process, not one per env
