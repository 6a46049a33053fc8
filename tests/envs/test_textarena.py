"""TextArena both ways: lmrl's tasks as TextArena games (lmrl.interop.textarena), TextArena's single-player games as
the `textarena` task (lmrl.envs.textarena, data_gen.textarena, conf/task/textarena.yaml)."""

from __future__ import annotations

import random
import re

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from omegaconf.errors import InterpolationKeyError

pytest.importorskip("textarena")

import textarena as ta  # noqa: E402
from textarena.envs.registration import ENV_REGISTRY  # noqa: E402

from data_gen.textarena import (EXPERTS, config_prob_expert, generate, hanoi_solution_move, main,  # noqa: E402
                                play_episode)
from lmrl.data.importers import load_episodes  # noqa: E402
from lmrl.envs.base import history_to_str  # noqa: E402
from lmrl.envs.maze import optimal_directions  # noqa: E402
from lmrl.envs.textarena import EVAL_SEED_BASE, SUPPORTED_GAMES, TextArenaEnv, render_messages  # noqa: E402
from lmrl.interop.textarena import TASK_IDS, LmrlGame, agent_action, play, task_config  # noqa: E402
from lmrl.task import Task  # noqa: E402
from tests.e2e import ROOT, run_cli  # noqa: E402


def compose_task(*overrides: str):
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        return compose("train", overrides=["task=textarena", *overrides])


# -- (a) lmrl's tasks as TextArena games ----------------------------------------------------------------------------

def unwrapped(env):
    while isinstance(env, ta.Wrapper):
        env = env.env
    return env


def replay(task: str, seed: int, actions: list[str]) -> list[float]:
    """The rewards the task's own env (built as lmrl.task.Task builds it) gives the same actions from the same seed."""
    cfg = task_config(task)
    env = Task(cfg.task, cfg.cache_dir).make_env()
    env.reset(seed=seed)
    return [env.step(agent_action(a)).reward for a in actions]


def test_every_task_is_registered_with_and_without_textarenas_wrappers():
    tasks = sorted(p.stem for p in (ROOT / "conf" / "task").glob("*.yaml") if p.stem != "textarena")
    assert sorted(TASK_IDS) == tasks
    for env_id in TASK_IDS.values():
        assert ENV_REGISTRY[env_id].default_wrappers and ENV_REGISTRY[env_id + "-raw"].default_wrappers is None


@pytest.mark.parametrize("reply, action", [("move up", "move up\n"), ("[move up]", "move up\n"),
                                           (" [s l a t e] \n", "s l a t e\n"), ("[a] or [b]", "[a] or [b]\n"),
                                           ("e2e4\n", "e2e4\n")])
def test_a_reply_becomes_an_action_without_its_brackets_and_with_a_newline(reply, action):
    assert agent_action(reply) == action


def test_a_scripted_agent_solves_the_fo_maze_through_textarenas_loop():
    """TextArena's own loop with its default wrappers: the agent reads the whole conversation (LLMObservationWrapper)
    and answers `move up` (ActionFormattingWrapper sends `[move up]`); the final reward is the episode's return."""
    env = ta.make("lmrl-MazeFO-v0")
    position = re.compile(r"Your current position is at position ([\d ]+), ([\d ]+)\.")

    def agent(observation: str) -> str:
        row, col = (int(x.replace(" ", "")) for x in position.findall(observation)[-1])
        return "move " + optimal_directions((row, col))[0]

    env.reset(num_players=1, seed=11)
    actions, step_rewards, done = [], [], False
    while not done:
        player_id, observation = env.get_observation()
        assert player_id == 0 and observation.startswith("\n[GAME] You are in a maze")
        actions.append(agent(observation))
        done, info = env.step(action=actions[-1])
        step_rewards.append(info["reward"])
    rewards, game_info = env.close()
    assert game_info[0]["success"] and not game_info[0]["truncated"] and game_info[0]["invalid_moves"] == 0
    assert rewards == {0: sum(step_rewards)} and step_rewards == replay("maze_fo", 11, actions)
    assert step_rewards[-1] == 0.0 and set(step_rewards[:-1]) <= {-1.0}  # -1 a move, 0 on reaching the goal


@pytest.mark.parametrize("task, seed", [("maze_po", 3), ("wordle", 5), ("tictactoe", 2), ("kuhn", 4)])
def test_textarena_rewards_are_the_envs_rewards(task, seed):
    """A random legal agent (plus one invalid reply) through `play`: each step's reward and the final TextArena reward
    match the task's env given the same seed and actions, invalid reply included."""
    env = ta.make(TASK_IDS[task])
    game, rng, actions = unwrapped(env), random.Random(seed), []

    def agent(observation: str) -> str:
        actions.append("not an action" if not actions else rng.choice(game.env.legal_actions()).strip())
        return actions[-1]

    rewards, game_info, infos = play(env, agent, seed=seed)
    assert infos[0]["invalid"] and not any(i["invalid"] for i in infos[1:])
    assert [i["reward"] for i in infos] == replay(task, seed, actions)
    assert rewards[0] == pytest.approx(sum(i["reward"] for i in infos)) == game_info[0]["return"]
    assert game_info[0]["invalid_moves"] == 1


def test_the_raw_id_shows_the_games_messages_and_takes_actions_as_written():
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):  # inside a Hydra context too
        env = ta.make("lmrl-Wordle-v0-raw", overrides=["task.env.invalid_reward=-3"])
    env.reset(num_players=1, seed=0)
    _, messages = env.get_observation()
    assert [kind for _, _, kind in messages] == [ta.ObservationType.PROMPT, ta.ObservationType.GAME_BOARD]
    assert messages[0][1].startswith("Play Wordle") and messages[1][1] == "Wordle:"
    done, info = env.step("[c r a n e]")  # brackets are dropped here too: `crane` is not in the list
    assert not done and info["invalid"] and info["reward"] == -3.0
    assert env.get_board_str() == ""  # the original answers an invalid word with an empty line


def test_only_one_player_and_one_source_of_env():
    with pytest.raises(ValueError, match="num_players must be 1"):
        ta.make("lmrl-MazePO-v0").reset(num_players=2)
    with pytest.raises(ValueError, match="a task name or an env"):
        LmrlGame()


@pytest.mark.slow
@pytest.mark.parametrize("task", ["text_nav_fo", "text_nav_po", "chess", "endgames", "twenty_questions", "guess",
                                  "car_dealer"])
def test_the_other_tasks_play_through_textarena_with_the_envs_rewards(task):
    """Slow tier (Text-Nav's game files, Stockfish, the dialogue oracles' embedding model): a random legal agent, or
    a fixed round of questions for the dialogue tasks, through TextArena's loop."""
    env = ta.make(TASK_IDS[task], overrides=["task.env.max_steps=12"] if "text_nav" in task else [])
    game, rng, actions = unwrapped(env), random.Random(1), []
    phrases = ["Is it an animal?", "Is it bigger than a car?", "Is it in Europe?", "I can offer you a discount."]

    def agent(observation: str) -> str:
        legal = game.env.legal_actions()
        actions.append(rng.choice(legal).strip() if legal else phrases[len(actions) % len(phrases)])
        return actions[-1]

    rewards, game_info, infos = play(env, agent, seed=2)
    assert [i["reward"] for i in infos] == replay(task, 2, actions)
    assert rewards[0] == pytest.approx(game_info[0]["return"])


# -- (b) TextArena's games as the `textarena` task ------------------------------------------------------------------

def test_a_game_is_played_through_the_adapter_with_textarenas_rewards():
    """GuessTheNumber: a hint, a rejected reply (`invalid_reward`), a second rejection in a row ends the game with
    TextArena's final reward on top; the game's own messages, no echo of the moves; then a binary search wins."""
    env = TextArenaEnv("GuessTheNumber-v0", invalid_reward=-0.5)
    history, info = env.reset(options={"game_seed": 42})
    assert info == {"game_seed": 42, "env_id": "GuessTheNumber-v0"} and len(history) == 1
    assert history[0].text.startswith("You are Player 0. You are playing Guess The Number.\n")
    secret = env.game.game_number
    wrong = 1 if secret > 10 else 20
    first = env.step(f"[{wrong}]\n")
    hint = "higher" if secret > wrong else "lower"
    assert (first.reward, first.terminated, first.info["invalid"]) == (0.0, False, False)
    assert first.history[-1].text == f"[GAME] The target number is {hint}.\n"
    rejected = env.step("twelve?\n")
    assert rejected.info["invalid"] and rejected.reward == -0.5 and not rejected.terminated
    assert rejected.history[-1].text.startswith("[GAME] You attempted an invalid move.")
    ended = env.step(f"[{wrong}]\n")  # guessed already: the second rejection in a row
    partial = 1 - abs(wrong - secret) / 19
    assert ended.terminated and not ended.truncated and ended.info["invalid"] and not ended.info["success"]
    assert ended.reward == pytest.approx(-0.5 + partial) and ended.info["game_reward"] == pytest.approx(partial)
    text = history_to_str(ended.history)
    assert f"[GAME] [{wrong}]" not in text and text.count(f"[{wrong}]\n") == 2
    assert all(t.text.endswith("\n") for t in ended.history)
    assert [t.is_action for t in ended.history] == [False, True, False, True, False, True, False]
    with pytest.raises(RuntimeError, match="finished episode"):
        env.step("[3]\n")

    env.reset(options={"game_seed": 42})
    low, high, results = 1, 20, []
    while not results or not results[-1].terminated:
        guess = (low + high) // 2
        results.append(env.step(f"[{guess}]\n"))
        low, high = (guess + 1, high) if "higher" in results[-1].history[-1].text else (low, guess - 1)
    assert [r.reward for r in results] == [0.0] * (len(results) - 1) + [1.0] and results[-1].info["success"]


def test_the_adapter_stops_a_game_at_max_steps():
    env = TextArenaEnv("TowerOfHanoi-v0", max_steps=2)
    env.reset(options={"game_seed": 0})
    assert not env.step("[A B]\n").truncated
    last = env.step("[B A]\n")
    assert last.truncated and not last.terminated and last.reward == 0.0 and env.legal_actions() is None


def test_each_adapter_keeps_the_games_randomness_to_itself():
    """Minesweeper lays its mines on the first move with `random`: a game is a function of its seed however other
    adapters and other code draw in between, and the adapter leaves the caller's `random` state as it was."""
    moves = ["[2 2]\n", "[0 0]\n", "[4 4]\n", "[0 4]\n"]

    def alone(seed):
        env = TextArenaEnv("Minesweeper-v0-small")
        env.reset(options={"game_seed": seed})
        return [env.step(m).history[-1].text for m in moves]

    expected = alone(7)
    assert expected != alone(8)
    a, b = TextArenaEnv("Minesweeper-v0-small"), TextArenaEnv("Minesweeper-v0-small")
    a.reset(options={"game_seed": 7})
    got = []
    for k, move in enumerate(moves):
        b.reset(options={"game_seed": 100 + k})
        b.step("[1 1]\n")
        random.seed(k)
        state = random.getstate()
        got.append(a.step(move).history[-1].text)
        assert random.getstate() == state
    assert got == expected


@pytest.mark.parametrize("env_id", SUPPORTED_GAMES)
def test_legal_moves_are_accepted_and_the_expert_wins(env_id):
    """Random legal moves are never rejected (Minesweeper's mines excepted: TextArena answers one as a rejected move);
    the scripted expert wins each evaluation game it plays, the normalization maximum of 1."""
    env, rng = TextArenaEnv(env_id), random.Random(0)
    for seed in range(3):
        env.reset(seed=seed)
        done = False
        while not done:
            result = env.step(rng.choice(env.legal_actions()))
            done = result.terminated or result.truncated
            if result.info["invalid"]:
                assert env_id.startswith("Minesweeper") and "mine" in result.history[-1].text
    for options in env.eval_reset_options()[:3]:
        assert play_episode(env, rng, options["game_seed"], 1.0, 0.0).total_return == 1.0


def test_legal_moves_and_expert_of_the_tower():
    env = TextArenaEnv("TowerOfHanoi-v0")
    env.reset(seed=0)
    assert env.legal_actions() == ["[A B]\n", "[A C]\n"]
    assert hanoi_solution_move({"A": [3, 2, 1], "B": [], "C": []}) == "[A C]\n"  # 3 disks: the smallest goes to C
    assert hanoi_solution_move({"A": [], "B": [], "C": [2, 1]}) is None


def test_reset_options_pin_the_game_and_evaluation_games_are_not_training_games():
    env = TextArenaEnv("FrozenLake-v0")
    first, info = env.reset(seed=5)
    again, _ = env.reset(seed=99, options={"game_seed": info["game_seed"]})
    assert info["game_seed"] == 5 and again == first
    assert env.reset(seed=6)[0] != first
    assert {o["game_seed"] for o in env.eval_reset_options()} == set(range(EVAL_SEED_BASE, EVAL_SEED_BASE + 64))
    assert all(ep.info["game_seed"] < EVAL_SEED_BASE for ep in generate(20, env_id="FrozenLake-v0"))
    with pytest.raises(ValueError, match="unknown options"):
        env.reset(options={"secret": 3})


def test_games_that_cannot_run_here_fail_with_the_reason():
    with pytest.raises(ValueError, match="TextArena has no game 'NoSuchGame-v0'"):
        TextArenaEnv("NoSuchGame-v0")
    with pytest.raises(ValueError, match="TicTacToe-v0 is not a single-player game"):
        TextArenaEnv("TicTacToe-v0")
    try:
        from nltk.corpus import words

        words.words()
    except LookupError:  # no NLTK corpora here (TextArena downloads them at import): Wordle cannot be built
        with pytest.raises(RuntimeError, match="Wordle-v0 could not be built: LookupError: Resource 'words'"):
            TextArenaEnv("Wordle-v0")


def test_render_messages_tags_the_games_messages_and_drops_the_moves():
    kinds = ta.ObservationType
    messages = [(ta.GAME_ID, "Rules.\n", kinds.PROMPT), (0, "[3]", kinds.PLAYER_ACTION),
                (ta.GAME_ID, "[A B]", kinds.PLAYER_ACTION), (ta.GAME_ID, "Board:\nA: []\n", kinds.GAME_BOARD)]
    assert render_messages(messages) == "Rules.\n[GAME] Board:\nA: []\n"


def test_the_generator_is_deterministic_and_checks_its_parameters():
    a = list(generate(6, seed=1, env_id="TowerOfHanoi-v0"))
    b = list(generate(4, seed=1, env_id="TowerOfHanoi-v0"))
    assert [history_to_str(e.turns) for e in a[:4]] == [history_to_str(e.turns) for e in b]
    assert len({e.info["game_seed"] for e in a}) == 6
    paired = [e.info["game_seed"] for e in generate(4, seed=1, env_id="GuessTheNumber-v0", attempts_per_task=2)]
    assert paired[0] == paired[1] != paired[2] == paired[3]
    for ep in a:
        assert len(ep.rewards) == len(ep.turns) and ep.done and ep.total_return == ep.rewards[-2]
    for bad, match in (({"prob_expert": 1.5}, "prob_expert"), ({"attempts_per_task": 0}, "attempts_per_task"),
                       ({"env_id": "Mastermind-v0"}, "no scripted player for Mastermind-v0")):
        with pytest.raises(ValueError, match=match):
            generate(3, **bad)
    assert sorted(EXPERTS) == sorted(type(TextArenaEnv(g).game).__name__ for g in SUPPORTED_GAMES)


def test_the_generator_cli_writes_episodes_with_the_configs_mixture(tmp_path, capsys):
    assert config_prob_expert("GuessTheNumber-v0") == 0.0 and config_prob_expert("Mastermind-v0") == 0.5
    main(["--env-id", "GuessTheNumber-v0", "--episodes", "3", "--out", str(tmp_path / "d.jsonl")])
    assert "wrote 3 episodes" in capsys.readouterr().out
    written = [history_to_str(ep.turns) for ep in load_episodes(tmp_path / "d.jsonl", "lmrl")]
    assert written == [history_to_str(ep.turns) for ep in generate(3, prob_expert=0.0)]


def test_the_task_config_takes_the_games_settings():
    cfg = compose_task("task.env_id=FrozenLake-v0")
    task = OmegaConf.to_container(cfg.task, resolve=True)
    assert task["name"] == "textarena" and task["env"]["env_id"] == task["data"]["recipe"]["env_id"] == "FrozenLake-v0"
    assert task["history_window"] == 1 and task["normalization"] == {"min": 0.0, "avg": 0.6853, "max": 1.0}
    assert task["data"]["recipe"]["prob_expert"] == 0.5 and "4x4 frozen lake" in task["rules"]
    assert sorted(task["games"]) == sorted(SUPPORTED_GAMES)
    with pytest.raises(InterpolationKeyError, match="games.Mastermind-v0"):
        OmegaConf.to_container(compose_task("task.env_id=Mastermind-v0").task, resolve=True)


@pytest.mark.parametrize("env_id", [pytest.param(g, marks=() if g == "GuessTheNumber-v0" else pytest.mark.slow)
                                    for g in SUPPORTED_GAMES])
def test_the_average_anchor_is_the_recipes_dataset_average(env_id):
    task = OmegaConf.to_container(compose_task(f"task.env_id={env_id}").task, resolve=True)
    recipe = {k: v for k, v in task["data"]["recipe"].items() if k != "_target_"}
    returns = [ep.total_return for ep in generate(**recipe)]
    assert sum(returns) / len(returns) == pytest.approx(task["normalization"]["avg"], abs=5e-5)


def test_online_filtered_bc_smoke_run_on_a_textarena_game(tmp_path):
    """`python -m lmrl.train debug=smoke task=textarena task.env_id=FrozenLake-v0 algo=online_filtered_bc` with
    budgets cut further (4 BC steps on 40 games, 2 evaluation games): data, BC stage, rollouts, evaluation."""
    metrics = run_cli("lmrl.train", ["debug=smoke", "task=textarena", "task.env_id=FrozenLake-v0",
                                     "algo=online_filtered_bc", "smoke.steps=4", "task.data.recipe.episodes=40",
                                     "+smoke_eval_starts=2", "records.dir=null"], tmp_path / "run", tmp_path / "cache")
    assert (metrics["task"], metrics["algo"], metrics["episodes"]) == ("textarena", "online_filtered_bc", 2)
    assert 0.0 <= metrics["return_mean"] <= 1.0 and "start_normalized" in metrics
    assert len(list((tmp_path / "run" / "rollouts").glob("round_*.jsonl"))) == 2
    saved = OmegaConf.load(tmp_path / "run" / "config.yaml").task
    assert saved.env.env_id == saved.data.recipe.env_id == "FrozenLake-v0" and saved.history_window == 1
