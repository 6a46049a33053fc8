"""lmrl's tasks as TextArena games: `textarena.make("lmrl-MazeFO-v0")`, played by any TextArena agent.

Importing this module registers two TextArena ids per task (`TASK_IDS`): `lmrl-<Name>-v0` with TextArena's default
wrappers (`LLMObservationWrapper`: the agent gets the whole conversation as one string; `ActionFormattingWrapper`: a
reply without brackets is wrapped in them) and `lmrl-<Name>-v0-raw` with none. Each builds the task's env from
`conf/task/<task>.yaml` as `lmrl.task.Task` does; `overrides=` takes Hydra overrides of the training config
(`textarena.make("lmrl-MazeFO-v0", overrides=["task.env.max_steps=20"])`).

The game (`LmrlGame`) follows TextArena's single-player protocol (`reset(num_players=1, seed)`, `get_observation()`,
`step(action) -> (done, step_info)`, `close() -> (rewards, game_info)`):

- the prompt is the task's `rules` (what `algo=prompt` reads); every segment the env says is a `GAME_BOARD` message;
- a reply is the env's action after two changes: square brackets around the whole reply are removed (TextArena's
  convention, which `ActionFormattingWrapper` enforces) and the trailing newline every lmrl action ends with is
  added. Anything else reaches the env as written, so an invalid reply gets the task's own penalty;
- `step_info` carries the step's lmrl `reward` and the env's `info`; when the episode ends, player 0's TextArena
  reward is the episode's return (the sum of the step rewards) and `game_info[0]` holds `return`, `success`,
  `truncated` and `invalid_moves`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

from lmrl.envs.base import History, Text, TextEnv
from lmrl.envs.textarena import require_textarena

ta = require_textarena()

CONF = Path(__file__).resolve().parents[2] / "conf"
# lmrl task (conf/task/<task>.yaml) -> its TextArena id.
TASK_IDS = {
    "maze_fo": "lmrl-MazeFO-v0",
    "maze_po": "lmrl-MazePO-v0",
    "text_nav_fo": "lmrl-TextNavFO-v0",
    "text_nav_po": "lmrl-TextNavPO-v0",
    "wordle": "lmrl-Wordle-v0",
    "chess": "lmrl-Chess-v0",
    "endgames": "lmrl-Endgames-v0",
    "twenty_questions": "lmrl-TwentyQuestions-v0",
    "guess": "lmrl-GuessMyCity-v0",
    "car_dealer": "lmrl-CarDealer-v0",
    # one seat of a two-player game against the task's scripted opponent (TextArena's own TicTacToe-v0 and
    # KuhnPoker-v0 are two-player games)
    "tictactoe": "lmrl-TicTacToeVsScripted-v0",
    "kuhn": "lmrl-KuhnVsScripted-v0",
    "car_dealer_duel": "lmrl-CarDealerDuelVsScripted-v0",
}


def task_config(task: str, overrides: Sequence[str] = ()):
    """The training config composed with `task=<task>` and `overrides` (the task's node is `.task`); inside a running
    Hydra app or `initialize` context, with that context's config search path."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    if GlobalHydra.instance().is_initialized():
        return compose("train", overrides=[f"task={task}", *overrides])
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        return compose("train", overrides=[f"task={task}", *overrides])


def agent_action(reply: str) -> str:
    """A TextArena agent's reply as an lmrl action: without square brackets around the whole of it (`[move up]`),
    ending in one newline."""
    text = reply.strip()
    if len(text) >= 2 and text[0] == "[" and text[-1] == "]" and "[" not in text[1:-1] and "]" not in text[1:-1]:
        text = text[1:-1].strip()
    return text + "\n"


def new_segments(history: History) -> list[Text]:
    """The environment segments after the last action of `history` (all of it when it holds no action)."""
    out: list[Text] = []
    for segment in reversed(history):
        if segment.is_action:
            break
        out.append(segment)
    return out[::-1]


class LmrlGame(ta.Env):
    """One lmrl task as a single-player TextArena game (see the module docstring).

    Args:
        task: the task's config name (`maze_fo`, ...), built from `conf/task/<task>.yaml` with `overrides`.
        overrides: Hydra overrides of the training config, e.g. `["task.env.max_steps=20"]`.
        env: an env to play instead of a task's (then `rules` is the prompt).
        rules: the prompt; default: the task's `rules`.
    """

    def __init__(self, task: str | None = None, overrides: Sequence[str] = (), env: TextEnv | None = None,
                 rules: str | None = None):
        if (task is None) == (env is None):
            raise ValueError(f"LmrlGame takes a task name or an env, not both nor neither; tasks: {list(TASK_IDS)}")
        if task is not None:
            from lmrl.task import Task

            cfg = task_config(task, overrides)
            env = Task(cfg.task, cfg.cache_dir).make_env()
            rules = rules or cfg.task.get("rules")
        self.task, self.env = task, env
        self.rules = rules or "Play the text game: reply with your next action only."
        self.total, self.invalid_moves, self.last_observation = 0.0, 0, ""

    def reset(self, num_players: int = 1, seed: int | None = None, options: dict | None = None):
        """Start an episode of the env (`seed` and `options` as the env's `reset`); one player only."""
        if num_players != 1:
            raise ValueError(f"lmrl tasks are single-player games: num_players must be 1, got {num_players}")
        self.state = ta.SinglePlayerState(num_players=1, seed=seed)
        history, info = self.env.reset(seed=seed, options=options)
        self.state.reset(game_state={"task": self.task, "info": info}, player_prompt_function=self._prompt)
        self.total, self.invalid_moves = 0.0, 0
        self._observe(new_segments(history))

    def _prompt(self, player_id: int, game_state: dict) -> str:
        return f"{self.rules.strip()}\nReply with your next action only."

    def _observe(self, segments: Sequence[Text]) -> None:
        for segment in segments:
            self.last_observation = segment.text.rstrip("\n")
            self.state.add_observation(message=self.last_observation, observation_type=ta.ObservationType.GAME_BOARD)

    def step(self, action: str) -> tuple[bool, dict]:
        """Apply one reply (as `agent_action` turns it into an lmrl action); returns TextArena's `(done, step_info)`
        with the step's lmrl `reward` in `step_info`."""
        if self.state.done:
            raise RuntimeError("step() called on a finished game; call reset() first")
        self.state.add_observation(from_id=0, message=action, observation_type=ta.ObservationType.PLAYER_ACTION)
        result = self.env.step(agent_action(action))
        self._observe(new_segments(result.history))
        self.total += float(result.reward)
        self.invalid_moves += bool(result.info.get("invalid"))
        self.state.step_info = {**result.info, "reward": float(result.reward)}
        if result.terminated or result.truncated:
            success = bool(result.info.get("success", False))
            reason = "The task is solved." if success else (
                "The episode was cut at its step limit." if result.truncated else "The episode is over.")
            self.state.set_outcome(reward=self.total, reason=reason)
            self.state.game_info[0].update({"return": self.total, "success": success,
                                            "truncated": bool(result.truncated), "invalid_moves": self.invalid_moves})
        return self.state.step()

    def get_board_str(self) -> str:
        """The env's latest segment (what TextArena's render wrappers show)."""
        return self.last_observation


def register_tasks() -> list[str]:
    """Register `lmrl-<Name>-v0` (TextArena's default wrappers) and `lmrl-<Name>-v0-raw` for every task in
    `TASK_IDS` (ids already registered are kept); returns the ids with default wrappers."""
    from textarena.envs.registration import ENV_REGISTRY
    from textarena.wrappers import ActionFormattingWrapper, LLMObservationWrapper

    for task, env_id in TASK_IDS.items():
        for suffix, wrappers in (("", [LLMObservationWrapper, ActionFormattingWrapper]), ("-raw", None)):
            if env_id + suffix not in ENV_REGISTRY:
                ta.register(id=env_id + suffix, entry_point=LmrlGame, default_wrappers=wrappers, task=task)
    return list(TASK_IDS.values())


def play(env, agent: Callable[[str], str], seed: int | None = None) -> tuple[dict, dict, list[dict]]:
    """TextArena's single-player loop: reset, then get_observation -> agent -> step until done, then close.
    Returns `(rewards, game_info, step_infos)`; `env` is a TextArena env (`textarena.make(...)`)."""
    env.reset(num_players=1, seed=seed)
    done, infos = False, []
    while not done:
        _, observation = env.get_observation()
        done, info = env.step(agent(observation))
        infos.append(info)
    rewards, game_info = env.close()
    return rewards, game_info, infos


register_tasks()
