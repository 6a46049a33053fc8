"""Training-time information: what defines a task instance, for critics (SWEET-RL's `c`) and for
pinning starts (group PG).

Each task names, in `conf/task_info/default.yaml`, the `info` keys that *define* an episode's task
(the maze start, the secret word, the buyer profile, the start position) — never how the episode
went (`success`, `behaviour`, `failed`, `outcome`, the sale price ...): `FORBIDDEN` lists those and
`TaskInfo` refuses them.  From the keys:

- `c` per agent turn: a one-line text a privileged critic reads before the dialogue.  Tasks whose
  state moves in a way the agent may not see (the maze position, the Text-Nav room) add the state
  *replayed* from the start: the recorded actions are stepped through the env reset to the task,
  and every observation the env gives must equal the recorded one (else `ReplayError`).
- the reset options that start the env on the same task (`reset(options=...)`).
- a group key: episodes with equal keys are attempts at the same task.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from hydra.utils import get_method

from lmrl.envs.base import Episode, TextEnv
from lmrl.envs.maze import optimal_directions, parse_action

# Outcome and behaviour labels the datasets record: a critic that read them would be told the answer.
FORBIDDEN = frozenset({
    "success", "failed", "outcome", "behaviour", "price", "msrp", "decision", "car", "seller", "agent", "noise",
    "invalid", "invalid_rate", "illegal", "nodes", "random_move", "optimal_rooms", "env_seed", "reward", "return",
    "utterances", "questions", "guesses", "opponent_move", "understood",
})


class ReplayError(ValueError):
    """Replaying an episode's actions did not reproduce its recorded observations."""


@dataclass
class TaskInfo:
    """One task's training-time information (see the module docstring)."""

    # `info` keys that define the task instance (the critic's `c`); outcome labels are refused.
    keys: list[str] = field(default_factory=list)
    # reset(options=...) that starts the env on the episode's task: {option name: info key}.
    reset: dict[str, str] = field(default_factory=dict)
    # A function `env -> dict` describing the env's hidden state now, replayed before every action
    # (null: the task's state is all in `keys`).
    replay: str | None = None
    # A function `(state, action text) -> credit` that knows the best action from the true state (the keys plus
    # the replayed state): SWEET-RL's `critic=oracle`, a sanity check of the actor (null: the task has none).
    oracle: str | None = None

    def validate(self) -> list[str]:
        problems = []
        leaked = sorted(set(self.keys) & FORBIDDEN)
        if leaked:
            problems.append(f"keys {leaked} are outcome or behaviour labels, not task-defining information")
        unknown = sorted(set(self.reset.values()) - set(self.keys))
        if unknown:
            problems.append(f"reset options read {unknown}, which are not among keys {self.keys}")
        return problems

    def allowed(self, info: dict) -> dict:
        """The whitelisted part of an episode's info (the only part anything here reads)."""
        missing = [k for k in self.keys if k not in info]
        if missing:
            raise KeyError(f"episode info lacks the task-defining key(s) {missing} (it has {sorted(info)})")
        return {k: info[k] for k in self.keys}

    def task_key(self, episode: Episode) -> str:
        """Episodes with equal keys are attempts at the same task."""
        return json.dumps(self.allowed(episode.info), sort_keys=True)

    def options(self, info: dict) -> dict:
        """The reset options that start the env on this task."""
        allowed = self.allowed(info)
        return {option: allowed[key] for option, key in self.reset.items()}

    def states(self, episode: Episode, make_env: Callable[[], TextEnv] | None = None) -> list[dict]:
        """The true state before each agent turn, in order: the task's keys, plus the replayed state when the
        task has one."""
        static = self.allowed(episode.info)
        if self.replay is None:
            return [static] * episode.num_actions
        if make_env is None:
            raise ValueError("a task with a replayed state needs make_env")
        states = replay_states(episode, make_env(), self.options(episode.info), get_method(self.replay))
        return [{**static, **state} for state in states]

    def contexts(self, episode: Episode, make_env: Callable[[], TextEnv] | None = None) -> list[str]:
        """`c` before each agent turn, in order: `states` as one line each."""
        return [render(state) for state in self.states(episode, make_env)]


def task_info_for(infos: dict[str, TaskInfo], task_name: str) -> TaskInfo:
    """The task's entry of an algorithm's `task_info` (conf/task_info/default.yaml)."""
    if task_name not in infos:
        raise KeyError(f"no task_info for task {task_name!r} (conf/task_info/default.yaml lists {sorted(infos)})")
    return infos[task_name]


def render(values: dict[str, Any]) -> str:
    """`c` as one environment line: `start: 1, 5; position: 2, 3`."""
    return "; ".join(f"{k}: {_text(v)}" for k, v in values.items()) + "\n"


def _text(value) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {_text(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(_text(v) for v in value)
    return str(value)


def replay_states(episode: Episode, env: TextEnv, options: dict, describe: Callable[[TextEnv], dict]) -> list[dict]:
    """The env's hidden state before each agent turn, from stepping the recorded actions through `env`
    reset with `options`.  Every observation the env returns must equal the recorded one."""
    history, _ = env.reset(options=dict(options))
    turns = episode.turns
    first_action = next((i for i, t in enumerate(turns) if t.is_action), len(turns))
    _expect_same([t.text for t in history], [t.text for t in turns[:first_action]], episode, 0)
    states, i = [], first_action
    while i < len(turns):
        states.append(describe(env))
        result = env.step(turns[i].text)
        j = next((k for k in range(i + 1, len(turns)) if turns[k].is_action), len(turns))
        _expect_same(_after_last_action(result.history), [t.text for t in turns[i + 1 : j]], episode, len(states))
        i = j
    return states


def _after_last_action(history) -> list[str]:
    """The environment segments the env appended after the agent's last turn."""
    out = []
    for t in reversed(history):
        if t.is_action:
            break
        out.append(t.text)
    return out[::-1]


def _expect_same(replayed: Sequence[str], recorded: Sequence[str], episode: Episode, turn: int) -> None:
    if list(replayed) != list(recorded):
        raise ReplayError(f"replaying the episode with info {episode.info} diverges after agent turn {turn}: "
                          f"the env says {list(replayed)!r}, the data {list(recorded)!r}")


def maze_position(env) -> dict:
    """The maze's hidden state: where the agent is."""
    return {"position": list(env.position)}


def maze_oracle(state: dict, action: str) -> float:
    """The maze's oracle credit of a move at the true position: 1 for a BFS-optimal move, 0 for another move
    (a wall included), -1 for a reply that is no move."""
    direction = parse_action(action)
    if direction is None:
        return -1.0
    return float(direction in optimal_directions(tuple(state["position"])))


def text_nav_state(env) -> dict:
    """Text-Nav's hidden state: the player's room, where the stale food is, what is open."""
    state = env.state()
    return {"room": state.room, "food": state.food_holder, "open": sorted(state.open) or ["nothing"]}
