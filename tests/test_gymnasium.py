"""lmrl's tasks as Gymnasium environments (lmrl/gym.py): every task registered, Gymnasium's own `check_env` passes
on each, one episode of each through `gymnasium.make`, the observation is the policy's window, and the vector env
over `BatchedEnv` steps, autoresets and records like single envs.

Fast tier: eight tasks (~1-2 s each: chess needs Stockfish, Text-Nav TextWorld's compiled games, cached under
.cache/lmrl after the first build).  Twenty Questions and Guess My City are slow-marked: their oracles load the
sentence encoder and embed their intent phrasings on the first question (~15 s on one core).
"""

from __future__ import annotations

import re
import sys
import warnings
from pathlib import Path

import gymnasium
import numpy as np
import pytest
import yaml
from gymnasium.utils.env_checker import check_env

import lmrl.gym as lg
from lmrl.envs.base import Text, history_to_str, history_window

ROOT = Path(__file__).resolve().parents[1]
DIALOGUE = {"twenty_questions", "guess"}
# The tasks whose env lists its legal actions.
LISTED = {"maze_fo", "maze_po", "text_nav_fo", "text_nav_po", "wordle", "chess", "endgames", "tictactoe", "kuhn"}
TASKS = [pytest.param(t, marks=pytest.mark.slow) if t in DIALOGUE else t for t in lg.ENV_IDS]


def make(task: str, **kwargs) -> gymnasium.Env:
    return gymnasium.make(lg.ENV_IDS[task], **kwargs)


def test_every_task_is_registered_under_its_id():
    benchmark = yaml.safe_load((ROOT / "conf" / "experiment" / "table2.yaml").read_text())["sweep"]["tasks"]
    # the benchmark's ten tasks and the two-player games' one-seat tasks (TextArena's games have their own ids)
    assert set(lg.ENV_IDS) == set(benchmark) | {"tictactoe", "kuhn", "car_dealer_duel"}
    assert len(set(lg.ENV_IDS.values())) == 13
    for task, env_id in lg.ENV_IDS.items():
        spec = gymnasium.spec(env_id)
        assert spec.namespace == "lmrl" and spec.version == 0
        assert spec.entry_point == "lmrl.gym:LmrlEnv" and spec.vector_entry_point == "lmrl.gym:LmrlVectorEnv"
        assert spec.kwargs == {"task": task}


def test_the_module_prefix_registers_the_tasks_from_a_bare_gymnasium(monkeypatch):
    """`gymnasium.make("lmrl.gym:lmrl/MazeFO-v0")` imports the module that registers the ids."""
    for env_id in lg.ENV_IDS.values():
        monkeypatch.delitem(gymnasium.registry, env_id)
    monkeypatch.delitem(sys.modules, "lmrl.gym")
    with pytest.raises(gymnasium.error.Error, match="[Nn]amespace lmrl not found"):
        gymnasium.make("lmrl/MazeFO-v0")
    env = gymnasium.make("lmrl.gym:lmrl/MazeFO-v0")
    assert env.reset(seed=0)[0].startswith("The goal is at position 8, 6.")
    assert "lmrl/Chess-v0" in gymnasium.registry


@pytest.mark.parametrize("task", TASKS)
def test_check_env_passes_without_a_warning(task, capsys):
    env = make(task)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    gym_warnings = [str(w.message) for w in caught if "gymnasium" in w.filename]
    assert not gym_warnings, gym_warnings
    assert capsys.readouterr().out, "check_env made the human render mode env and reset it: it printed"


@pytest.mark.parametrize("task, secret", [("twenty_questions", "piano"), ("guess", "tokyo")])
def test_the_dialogue_envs_reset_in_the_fast_tier(task, secret):
    """Their full checks are slow (the encoder loads on the first question); a reset asks nothing."""
    env = make(task)
    obs, info = env.reset(seed=0, options={"secret": secret})
    assert obs == info["latest"] == "Questions:\n" and obs in env.observation_space
    assert info["secret"] == secret and "legal_actions" not in info


def legal_or_random(env: gymnasium.Env, info: dict) -> str:
    """A uniformly random legal action where the env lists them, else a random string from the action space."""
    legal = info.get("legal_actions")
    if legal:
        return legal[int(env.np_random.integers(len(legal)))]
    return env.action_space.sample()


@pytest.mark.parametrize("task", TASKS)
def test_one_episode_through_gymnasium_make(task):
    env = make(task)
    env.action_space.seed(0)
    obs, info = env.reset(seed=0)
    assert ("legal_actions" in info) == (task in LISTED)
    total, steps, done = 0.0, 0, False
    while not done:
        assert obs in env.observation_space
        assert obs == history_to_str(history_window(info["history"], env.unwrapped.window))
        chose_legal = bool(info.get("legal_actions"))
        action = legal_or_random(env, info)
        obs, reward, terminated, truncated, info = env.step(action)
        assert isinstance(reward, float) and type(terminated) is bool and type(truncated) is bool
        assert info["history"][-2] == Text(action, True) and info["latest"] == info["history"][-1].text
        assert info["invalid"] is False if chose_legal else isinstance(info["invalid"], bool)
        total, steps, done = total + reward, steps + 1, terminated or truncated
    assert obs in env.observation_space
    assert steps <= 401 and np.isfinite(total)
    assert env.unwrapped.render_mode is None and env.render() is None


def test_observation_is_the_policys_window_and_info_has_the_rest():
    env = make("maze_po")
    obs, info = env.reset(seed=3, options={"init_position": [1, 1]})
    assert obs == info["latest"] == "There are walls to your left, above you, below you.\n"
    for _ in range(25):
        obs, reward, terminated, truncated, info = env.step("move right\n")
    assert env.unwrapped.window == 40 and len(info["history"]) == 51
    assert obs == history_to_str(info["history"][-40:]) != history_to_str(info["history"])
    assert obs.endswith("move right\n" + info["latest"])
    fo = make("maze_fo")
    obs, info = fo.reset(options={"init_position": [1, 1]})
    obs, *_, info = fo.step("move right\n")
    assert obs == info["latest"] == ("The goal is at position 8, 6. Your current position is at position 1, 2. "
                                     "There are walls above you, below you.\n")


def test_invalid_actions_are_penalized_and_flagged_not_raised():
    env = make("maze_fo")
    env.reset(seed=0)
    _, reward, terminated, truncated, info = env.step("fly away")
    assert (reward, terminated, truncated, info["invalid"]) == (-4.0, False, False, True)
    assert info["legal_actions"] == ["move up\n", "move down\n", "move left\n", "move right\n"]
    _, reward, *_, info = env.step("move up\n")
    assert (reward, info["invalid"]) == (-1.0, False)
    with pytest.raises(TypeError, match="a str"):
        env.step(3)


def test_reset_options_and_overrides_reach_the_task_env():
    fen = "8/8/8/8/8/2k5/8/4K2Q w - - 0 1"
    env = make("endgames")
    obs, info = env.reset(options={"fen": fen})
    assert info["fen"] == fen and obs == " ".join(fen) + "\n"
    with pytest.raises(ValueError, match="unknown reset option"):
        env.reset(options={"start": "e4"})
    short = make("maze_fo", overrides=["task.env.max_steps=2"])
    short.reset(seed=0, options={"init_position": [1, 1]})
    flags = [short.step("move left\n")[2:4] for _ in range(3)]
    assert flags == [(False, False), (False, False), (False, True)]


def test_seeded_resets_are_reproducible_and_seeds_differ():
    env = make("wordle")
    secrets = [env.reset(seed=s)[1]["secret"] for s in (1, 2, 1)]
    assert secrets[0] == secrets[2] and len({env.reset(seed=s)[1]["secret"] for s in range(8)}) > 1


def test_render_modes(capsys):
    env = make("maze_fo", render_mode="ansi")
    env.reset(options={"init_position": [1, 1]})
    env.step("move down\n")
    assert env.render() == history_to_str(env.unwrapped.history) and "move down\n" in env.render()
    human = make("maze_fo", render_mode="human")
    human.reset(options={"init_position": [1, 1]})
    human.step("move right\n")
    assert human.render() is None
    out = capsys.readouterr().out
    assert out.startswith("The goal is at position 8, 6.") and "move right\nThe goal" in out
    with pytest.raises(ValueError, match="render_mode 'rgb_array' is not one of"):
        lg.LmrlEnv("maze_fo", render_mode="rgb_array")


def test_bad_arguments_fail_clearly():
    with pytest.raises(ValueError, match="unknown task 'mase_fo'"):
        lg.LmrlEnv("mase_fo")
    with pytest.raises(ValueError, match="max_action_length"):
        lg.LmrlEnv("maze_fo", max_action_length=10, max_observation_length=5)
    task = lg.compose_task("maze_fo")
    assert lg.LmrlEnv(task).task is task
    with pytest.raises(ValueError, match="overrides"):
        lg.LmrlEnv(task, overrides=["task.env.max_steps=2"])
    with pytest.raises(TypeError, match="not its config"):
        lg.LmrlEnv(task.cfg)


def test_the_charset_covers_every_character_of_the_task_data():
    data = ROOT / "lmrl" / "envs" / "data"
    text = "".join(p.read_text(encoding="utf-8") for p in sorted(data.iterdir()) if p.suffix in {".json", ".txt"})
    missing = sorted(set(text) - lg.CHARSET)
    assert not missing, missing
    assert "ã" in text and "ł" in text  # the check reads the accented city names


def test_vector_env_autoresets_on_the_next_step_and_records_episodes():
    vec = gymnasium.make_vec("lmrl/MazeFO-v0", num_envs=3, vectorization_mode="vector_entry_point",
                             overrides=["task.env.max_steps=2"], render_mode="ansi")
    assert isinstance(vec, lg.LmrlVectorEnv)
    assert vec.metadata["autoreset_mode"] == gymnasium.vector.AutoresetMode.NEXT_STEP
    starts = [{"init_position": [7, 6]}, {"init_position": [1, 1]}, {"init_position": [1, 1]}]
    obs, info = vec.reset(seed=0, options=starts)
    assert obs in vec.observation_space and [list(p) for p in info["start"]] == [[7, 6], [1, 1], [1, 1]]
    obs, rewards, terms, truncs, info = vec.step(["move down\n", "move down\n", "jump\n"])
    assert rewards.tolist() == [0.0, -1.0, -4.0] and terms.tolist() == [True, False, False]
    assert obs[0] == "Success\n" and info["invalid"].tolist() == [False, False, True]
    episode = info["lmrl_episode"][0]
    assert info["_lmrl_episode"].tolist() == [True, False, False] and episode.success and episode.total_return == 0.0
    assert {"latest", "history", "legal_actions"}.isdisjoint(episode.info)  # the record stays as lmrl stores it
    obs, rewards, terms, truncs, info = vec.step(["ignored", "move down\n", "move down\n"])
    assert rewards[0] == 0.0 and not terms[0] and "start" in info and info["_start"].tolist() == [True, False, False]
    assert obs[0] == info["latest"][0] and "Your current position" in obs[0]
    obs, rewards, terms, truncs, info = vec.step(["move up\n"] * 3)
    assert truncs.tolist() == [False, True, True] and info["_lmrl_episode"].tolist() == [False, True, True]
    assert [ep.num_actions for ep in info["lmrl_episode"][1:]] == [3, 3]
    assert vec.render()[1] == history_to_str(info["history"][1])
    with pytest.raises(ValueError, match="expected 3 actions"):
        vec.step(["move up\n"])
    with pytest.raises(ValueError, match="options: expected one per env"):
        vec.reset(options=[{}])


def test_vector_env_steps_like_single_envs():
    """Same seeds, same actions: the vector env's observations, rewards and flags are the single env's."""
    vec = lg.LmrlVectorEnv("wordle", num_envs=2)
    singles = [make("wordle") for _ in range(2)]
    obs, info = vec.reset(seed=5)
    assert [s.reset(seed=5 + i)[1]["secret"] for i, s in enumerate(singles)] == list(info["secret"])
    for guess in ["s l a t e\n", "crane", "p o i n t\n"]:
        obs, rewards, terms, truncs, info = vec.step([guess, guess])
        for i, single in enumerate(singles):
            s_obs, s_reward, s_term, s_trunc, s_info = single.step(guess)
            assert (obs[i], rewards[i], terms[i], truncs[i]) == (s_obs, s_reward, s_term, s_trunc)
            assert info["legal_actions"][i] == s_info["legal_actions"]


@pytest.mark.slow
def test_vector_env_batches_the_dialogue_oracle():
    """The dialogue env's batched oracle pass runs through the recording wrapper (one prefetch per step)."""
    from lmrl.envs.dialogue.twenty_questions import TwentyQuestionsEnv

    calls = []
    original = TwentyQuestionsEnv.prefetch_batch

    def counting(envs, actions):
        calls.append(len(actions))
        return original(envs, actions)

    vec = lg.LmrlVectorEnv("twenty_questions", num_envs=4)
    vec.reset(options={"secret": "piano"})
    TwentyQuestionsEnv.prefetch_batch = staticmethod(counting)
    try:
        obs, rewards, *_ = vec.step(["Is it an instrument?\n", "Is it alive?\n", "Is it a piano?\n", "Hi\n"])
    finally:
        TwentyQuestionsEnv.prefetch_batch = staticmethod(original)
    assert calls == [4] and rewards.tolist()[:2] == [-1.0, -1.0]
    assert obs[0].endswith("Yes.\n") and obs[1].endswith("No.\n")


def test_the_python_examples_of_the_gymnasium_page_run(capsys):
    page = (ROOT / "docs" / "interop" / "gymnasium.md").read_text()
    blocks = re.findall(r"^```python\n(.*?)^```", page, re.S | re.M)
    assert len(blocks) >= 2
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "docs/interop/gymnasium.md", "exec"), namespace)  # noqa: S102 - the page's own examples
