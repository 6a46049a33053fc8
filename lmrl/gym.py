"""Every lmrl task as a Gymnasium environment: `gymnasium.make("lmrl/MazeFO-v0")`.

Importing this module registers every task (`ENV_IDS`) in Gymnasium's registry; without importing it first,
`gymnasium.make("lmrl.gym:lmrl/MazeFO-v0")` imports it itself.  Each env is built the way `lmrl.task.Task` builds
it (`conf/train.yaml` composed with `task=<name>` and any Hydra `overrides`), so the rules, oracle, opponent and
horizon are the ones training and evaluation use.

The observation is the text an lmrl policy conditions on: the task's history window (`history_window` in its
config: the current observation for Maze FO and chess, the whole conversation for Wordle) concatenated as the
policy reads it.  `info["latest"]` is the text the env appended with this step (the first observation after a
reset), `info["history"]` the whole episode as `Text(text, is_action)` segments.  Step infos carry the env's own
keys (`success`, the secret, ...) plus `invalid` (the action broke the task's rules or format); tasks whose env
lists its legal actions (maze, Text-Nav, Wordle, chess, endgames, the two-player games) add `legal_actions`.

Actions are the agent's whole turn, newline included (`"move up\\n"`), as for every lmrl env.  Any string is
applied, even one outside the action space (the task's rules penalize it, never raise), but its echo in the
windowed history can then fall outside the observation space too.

`LmrlVectorEnv` (`gymnasium.make_vec(..., vectorization_mode="vector_entry_point")`) steps many envs through one
`BatchedEnv`, so the dialogue oracles answer a whole batch in one encoder pass.
"""

from __future__ import annotations

import copy
import string
from pathlib import Path
from typing import Any, Sequence

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space
from omegaconf import DictConfig

from lmrl.envs.base import BatchedEnv, Episode, History, StepResult, TextEnv, history_to_str, history_window
from lmrl.task import Task

CONF = Path(__file__).resolve().parents[1] / "conf"

# lmrl task name -> Gymnasium id (namespace `lmrl`, version 0).
ENV_IDS: dict[str, str] = {
    "maze_fo": "lmrl/MazeFO-v0",
    "maze_po": "lmrl/MazePO-v0",
    "text_nav_fo": "lmrl/TextNavFO-v0",
    "text_nav_po": "lmrl/TextNavPO-v0",
    "wordle": "lmrl/Wordle-v0",
    "chess": "lmrl/Chess-v0",
    "endgames": "lmrl/Endgames-v0",
    "twenty_questions": "lmrl/TwentyQuestions-v0",
    "guess": "lmrl/GuessMyCity-v0",
    "car_dealer": "lmrl/CarDealer-v0",
    # one seat of a two-player game against the task's scripted opponent
    "tictactoe": "lmrl/TicTacToeVsScripted-v0",
    "kuhn": "lmrl/KuhnVsScripted-v0",
    "car_dealer_duel": "lmrl/CarDealerDuelVsScripted-v0",
}

# Printable ASCII, Latin-1 and Latin Extended-A (the accented letters of city names: São Paulo, Kraków), typographic
# quotes and dashes: every character the envs and their data files emit (tests/test_gymnasium.py checks the files).
CHARSET: frozenset[str] = frozenset(
    string.printable + "".join(chr(c) for c in range(0xA0, 0x180)) + "".join(chr(c) for c in range(0x2010, 0x2028))
)
# One agent turn: far longer than any move, guess, question or seller line (generation budgets are <= 24 tokens).
MAX_ACTION_CHARS = 1024
# One observation: the longest history windows of the default configs hold at most 51 segments (Car Dealer's whole
# conversation; Twenty Questions 41, Maze PO 40), ~52k characters even with every segment MAX_ACTION_CHARS long.
MAX_OBSERVATION_CHARS = 1 << 17


def compose_task(task: str, overrides: Sequence[str] = ()) -> Task:
    """The `Task` `python -m lmrl.train task=<task> <overrides>` would build (`conf/train.yaml` composed with Hydra's
    compose API). Raises `ValueError` for an unknown task name and `RuntimeError` inside a running Hydra app (build
    `Task(cfg.task, cfg.cache_dir)` from its config and pass it as `task=` instead)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    if task not in ENV_IDS:
        raise ValueError(f"unknown task {task!r}; valid: {sorted(ENV_IDS)}")
    if not (CONF / "train.yaml").exists():
        raise FileNotFoundError(f"{CONF} has no train.yaml: lmrl.gym needs the repository's conf/ (an editable "
                                "install, `pip install -e .`)")
    if GlobalHydra.instance().is_initialized():
        raise RuntimeError("Hydra is already initialized (inside a @hydra.main app): build the Task from the app's "
                           "config, Task(cfg.task, cfg.cache_dir), and pass it as task=")
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        cfg = compose("train", overrides=[f"task={task}", *overrides])
    return Task(cfg.task, cfg.cache_dir)


def _as_task(task: str | Task, overrides: Sequence[str]) -> Task:
    if isinstance(task, Task):
        if overrides:
            raise ValueError("overrides apply when the task is given by name; a Task object is already composed")
        return task
    if isinstance(task, DictConfig):
        raise TypeError("pass a Task (lmrl.task.Task(cfg.task, cfg.cache_dir)), not its config")
    return compose_task(task, overrides)


def text_spaces(max_action_length: int, max_observation_length: int) -> tuple[spaces.Text, spaces.Text]:
    """(action space, observation space): strings over `CHARSET`, the empty string included."""
    if not 1 <= max_action_length <= max_observation_length:
        raise ValueError(f"need 1 <= max_action_length ({max_action_length}) <= max_observation_length "
                         f"({max_observation_length}): the observation echoes actions")
    return (spaces.Text(max_action_length, min_length=0, charset=CHARSET),
            spaces.Text(max_observation_length, min_length=0, charset=CHARSET))


def latest_text(history: History) -> str:
    """The env's text after the last agent turn of `history` (the whole history before the first turn)."""
    out: list[str] = []
    for segment in reversed(history):
        if segment.is_action:
            break
        out.append(segment.text)
    return "".join(reversed(out))


def step_info(env: TextEnv, history: History, env_info: dict, invalid: bool | None) -> dict[str, Any]:
    """The Gymnasium info of one reset (`invalid=None`) or step: a deep copy of the env's own info, plus `latest`,
    `history`, `invalid` (steps) and `legal_actions` (envs that list them)."""
    info = copy.deepcopy(env_info)
    info["latest"] = latest_text(history)
    info["history"] = tuple(history)
    if invalid is not None:
        info["invalid"] = invalid
    legal = env.legal_actions()
    if legal is not None:
        info["legal_actions"] = list(legal)
    return info


class LmrlEnv(gymnasium.Env):
    """One lmrl task as a `gymnasium.Env` with `Text` observation and action spaces.

    `task` is a task name (`maze_fo`, ..., the keys of `ENV_IDS`) composed with Hydra `overrides`
    (`["task.env.max_steps=20"]`), or a built `lmrl.task.Task`. `render_mode="ansi"` makes `render()` return the
    transcript so far; `"human"` prints each new turn as it happens. `reset(options=...)` passes the options to the
    task's env (`{"init_position": [1, 1]}` for the maze, `{"fen": ...}` for chess, `{"secret": ...}` for the
    question games; `text_env.eval_reset_options()` lists the evaluation protocol's).
    """

    metadata = {"render_modes": ["ansi", "human"], "render_fps": 4}

    def __init__(self, task: str | Task = "maze_fo", overrides: Sequence[str] = (), render_mode: str | None = None,
                 max_action_length: int = MAX_ACTION_CHARS, max_observation_length: int = MAX_OBSERVATION_CHARS):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode {render_mode!r} is not one of {self.metadata['render_modes']}")
        self.task = _as_task(task, overrides)
        self.text_env: TextEnv = self.task.make_env()
        self.window = self.task.history_window
        self.render_mode = render_mode
        self.action_space, self.observation_space = text_spaces(max_action_length, max_observation_length)
        self.history: History = ()

    def observe(self, history: History) -> str:
        """The observation of a history: its window, concatenated as the task's policies read it."""
        return history_to_str(history_window(history, self.window))

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        """Start an episode. `seed` reseeds the task's env (and `np_random`); `options` go to its `reset`."""
        super().reset(seed=seed)
        self.history, env_info = self.text_env.reset(seed=None if seed is None else int(seed),
                                                     options=dict(options or {}))
        if self.render_mode == "human":
            print(history_to_str(self.history), end="", flush=True)
        return self.observe(self.history), step_info(self.text_env, self.history, env_info, None)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        """Apply one agent turn (a string, its newline included) and return Gymnasium's five-tuple."""
        if not isinstance(action, str):
            raise TypeError(f"an action is the agent's text (a str), got {type(action).__name__}")
        result: StepResult = self.text_env.step(action)
        self.history = result.history
        info = step_info(self.text_env, result.history, result.info, bool(result.info.get("invalid", False)))
        if self.render_mode == "human":
            print(action + info["latest"], end="", flush=True)
        return (self.observe(result.history), float(result.reward), bool(result.terminated),
                bool(result.truncated), info)

    def render(self) -> str | None:
        """`ansi`: the whole transcript so far; `human`: None (turns are printed as they happen)."""
        return history_to_str(self.history) if self.render_mode == "ansi" else None

    def legal_actions(self) -> list[str] | None:
        """The task env's legal actions now, or None where the action set is open-ended."""
        return self.text_env.legal_actions()

    def eval_reset_options(self) -> list[dict]:
        """The evaluation protocol's start states, one `reset` options dict each."""
        return self.text_env.eval_reset_options()


class _Recording(TextEnv):
    """A task env that keeps its last `StepResult`, so a `BatchedEnv` step's rewards and flags can be read back."""

    def __init__(self, env: TextEnv):
        self.env, self.last = env, None

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[History, dict]:
        self.last = None
        return self.env.reset(seed=seed, options=options)

    def step(self, action: str) -> StepResult:
        self.last = self.env.step(action)
        return self.last

    def legal_actions(self) -> list[str] | None:
        return self.env.legal_actions()

    def eval_reset_options(self) -> list[dict]:
        return self.env.eval_reset_options()

    @staticmethod
    def prefetch_batch(envs: Sequence[_Recording], actions: Sequence[str]) -> None:
        """The wrapped class's batched oracle pass, when it has one (the dialogue tasks)."""
        inner = [e.env for e in envs]
        prefetch = getattr(type(inner[0]), "prefetch_batch", None) if inner else None
        if prefetch is not None:
            prefetch(inner, actions)


class LmrlVectorEnv(VectorEnv):
    """`num_envs` copies of one task stepped together through a `BatchedEnv` (the dialogue oracles answer the
    whole batch in one pass), with Gymnasium's next-step autoreset: the step after an episode ends resets that env
    (its action is ignored) and returns the new first observation.

    `reset(options=...)` takes one options dict for every env or a list with one per env (an evaluation protocol's
    start states). The info of a step that ends an episode carries `lmrl_episode`: the finished `Episode`, as
    `lmrl.data.jsonl.write_episodes` stores it. `batched` is the underlying `BatchedEnv`.
    """

    metadata = {"render_modes": ["ansi"], "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, task: str | Task = "maze_fo", num_envs: int = 1, overrides: Sequence[str] = (),
                 render_mode: str | None = None, max_action_length: int = MAX_ACTION_CHARS,
                 max_observation_length: int = MAX_OBSERVATION_CHARS):
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode {render_mode!r} is not one of {self.metadata['render_modes']}")
        self.task = _as_task(task, overrides)
        self.window = self.task.history_window
        self.num_envs, self.render_mode = num_envs, render_mode
        self.batched = BatchedEnv(lambda: _Recording(self.task.make_env()), num_envs)
        self.single_action_space, self.single_observation_space = text_spaces(max_action_length,
                                                                              max_observation_length)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self._autoreset = np.zeros(num_envs, dtype=np.bool_)

    def reset(self, *, seed: int | Sequence[int | None] | None = None,
              options: dict | Sequence[dict] | None = None) -> tuple[tuple[str, ...], dict]:
        """Reset every env: `seed` None, an int (env i gets `seed + i`) or one per env; `options` as above."""
        super().reset(seed=seed if isinstance(seed, int) else None)
        seeds = self._per_env("seed", [None] * self.num_envs if seed is None else
                              [seed + i for i in range(self.num_envs)] if isinstance(seed, int) else list(seed))
        opts = self._per_env("options", [options or {}] * self.num_envs if options is None or
                             isinstance(options, dict) else list(options))
        self.batched.reset_all([dict(o) for o in opts], [None if s is None else int(s) for s in seeds])
        self._autoreset[:] = False
        infos: dict = {}
        for i, env in enumerate(self.batched.envs):
            history = self.batched.histories[i]
            infos = self._add_info(infos, step_info(env, history, self.batched.episodes[i].info, None), i)
        return self._observations(), infos

    def step(self, actions: Sequence[str]) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray, dict]:
        """One action per env (ignored for an env being autoreset); returns batched observations, rewards,
        terminations, truncations and infos."""
        actions = list(actions)
        if len(actions) != self.num_envs:
            raise ValueError(f"expected {self.num_envs} actions, got {len(actions)}")
        for i in self.batched.active:
            if not isinstance(actions[i], str):
                raise TypeError(f"action {i} is a {type(actions[i]).__name__}, not the agent's text (a str)")
        stepping = list(self.batched.active)
        finished = set(self.batched.step([actions[i] for i in stepping]))
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminations = np.zeros(self.num_envs, dtype=np.bool_)
        truncations = np.zeros(self.num_envs, dtype=np.bool_)
        infos: dict = {}
        for i in stepping:
            env, result = self.batched.envs[i], self.batched.envs[i].last
            rewards[i], terminations[i], truncations[i] = result.reward, result.terminated, result.truncated
            info = step_info(env, result.history, result.info, bool(result.info.get("invalid", False)))
            if i in finished:
                info["lmrl_episode"] = self.batched.episodes[i]
            infos = self._add_info(infos, info, i)
        for i in np.flatnonzero(self._autoreset):
            infos = self._add_info(infos, self._reset_one(int(i)), int(i))
        self._autoreset[:] = False
        self._autoreset[list(finished)] = True
        return self._observations(), rewards, terminations, truncations, infos

    def eval_reset_options(self) -> list[dict]:
        """The evaluation protocol's start states, one `reset` options dict each (give `reset` `num_envs` of them)."""
        return self.batched.envs[0].eval_reset_options()

    def render(self) -> tuple[str, ...] | None:
        """`ansi`: each env's transcript of its current episode."""
        if self.render_mode != "ansi":
            return None
        return tuple(history_to_str(h) for h in self.batched.histories)

    def _reset_one(self, i: int) -> dict:
        """Autoreset env i (no seed, no options, as Gymnasium's vector envs do) and return its reset info."""
        env = self.batched.envs[i]
        history, env_info = env.reset()
        self.batched.histories[i] = history
        self.batched.episodes[i] = Episode(list(history), [0.0] * len(history), False, dict(env_info))
        self.batched.active = sorted({*self.batched.active, i})
        return step_info(env, history, env_info, None)

    def _observations(self) -> tuple[str, ...]:
        return tuple(history_to_str(history_window(h, self.window)) for h in self.batched.histories)

    def _per_env(self, name: str, values: list) -> list:
        if len(values) != self.num_envs:
            raise ValueError(f"{name}: expected one per env ({self.num_envs}), got {len(values)}")
        return values


def register_all() -> None:
    """Register every task under its `ENV_IDS` id (idempotent), with `LmrlEnv` and `LmrlVectorEnv` as its entry
    points."""
    for task, env_id in ENV_IDS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(env_id, entry_point=f"{__name__}:LmrlEnv",
                               vector_entry_point=f"{__name__}:LmrlVectorEnv", kwargs={"task": task},
                               nondeterministic=False)


register_all()
