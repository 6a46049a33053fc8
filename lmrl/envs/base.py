"""The text-environment contract every task implements.

An environment speaks in `Text` segments: what it says (`is_action=False`) and what the
agent says (`is_action=True`). Observations are whole histories (LMRL-Gym's model), and
`reset`/`step` return Gymnasium's tuples. Any string is a legal argument to `step`:
an unparseable action is penalized by the task's rules, never raised.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any, NamedTuple, Sequence

History = tuple["Text", ...]


class Text(NamedTuple):
    """One segment of a conversation; every segment carries its own trailing newline."""

    text: str
    is_action: bool


class StepResult(NamedTuple):
    """What `TextEnv.step` returns: Gymnasium's five-tuple, with the whole history as the observation."""

    history: History
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]


def history_window(history: Sequence[Text], last_k: int | None) -> History:
    """The part of the history a policy conditions on: the last `last_k` segments (None = all)."""
    history = tuple(history)
    return history if last_k is None else history[-last_k:]


def history_to_str(history: Sequence[Text]) -> str:
    """Plain concatenation, as the original: nothing is inserted between turns."""
    return "".join(t.text for t in history)


class TextEnv(abc.ABC):
    """A multi-turn text task.  Subclasses keep all state needed to replay an episode."""

    @abc.abstractmethod
    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[History, dict]:
        """Start an episode; `options` are task specific (e.g. maze `init_position`)."""

    @abc.abstractmethod
    def step(self, action: str) -> StepResult:
        """Apply one agent utterance.  Must accept any string."""

    def eval_reset_options(self) -> list[dict]:
        """The evaluation protocol's start states (one `options` dict each); default: one free start."""
        return [{}]

    def legal_actions(self) -> list[str] | None:
        """Every action the rules accept in the current state (each with its newline), or None
        when the set is open-ended.  Used by random-legal baselines, benchmarks and fuzzers."""
        return None


@dataclass
class Episode:
    """A finished interaction: the segments with per-segment rewards, and hidden task state."""

    turns: list[Text]
    rewards: list[float]
    done: bool
    info: dict[str, Any]
    # Agent turns the env flagged `info["invalid"]` (unparseable or illegal), counted by `BatchedEnv`.
    invalid_turns: int = 0

    @property
    def total_return(self) -> float:
        """The sum of the episode's rewards."""
        return float(sum(self.rewards))

    @property
    def num_actions(self) -> int:
        """The number of agent turns."""
        return sum(t.is_action for t in self.turns)

    @property
    def success(self) -> bool:
        """Whether the env reported `info["success"]` at the end."""
        return bool(self.info.get("success", False))


class BatchedEnv:
    """Steps many independent envs in lockstep and records each one's episode.

    `reset_all(options_list)` starts one episode per entry; `step(actions)` takes one
    action per *active* env (in `active` order) and returns the indices that finished.
    Env classes with a static `prefetch_batch(envs, actions)` (the dialogue tasks, whose
    oracles embed questions or run an LM) get the whole batch first, to answer it in one pass.
    """

    def __init__(self, make_env, n: int):
        self.envs = [make_env() for _ in range(n)]
        self.histories: list[History] = [()] * n
        self.episodes: list[Episode | None] = [None] * n
        self.active: list[int] = []

    def reset_all(self, options_list: Sequence[dict], seeds: Sequence[int | None]) -> None:
        """Start one episode per env, with `options_list[i]` and `seeds[i]` for env i; every env becomes active."""
        assert len(options_list) == len(self.envs) == len(seeds)
        self.active = list(range(len(self.envs)))
        for i, (env, opts, seed) in enumerate(zip(self.envs, options_list, seeds)):
            history, info = env.reset(seed=seed, options=dict(opts))
            self.histories[i] = history
            self.episodes[i] = Episode(list(history), [0.0] * len(history), False, dict(info))

    def step(self, actions: Sequence[str]) -> list[int]:
        """Apply one action per active env (in `active` order), record them in the episodes, and return the indices of
        the envs whose episode ended (they leave `active`)."""
        assert len(actions) == len(self.active), "one action per active env"
        prefetch = getattr(type(self.envs[0]), "prefetch_batch", None) if self.active else None
        if prefetch is not None:  # dialogue envs: one batched oracle pass instead of one per env
            prefetch([self.envs[i] for i in self.active], actions)
        finished = []
        for i, action in zip(self.active, actions):
            result = self.envs[i].step(action)
            episode = self.episodes[i]
            new_obs = _new_observations(result.history)
            episode.turns += [Text(action, True), *new_obs]
            episode.rewards += [float(result.reward)] + [0.0] * len(new_obs)
            episode.info.update(result.info)
            episode.invalid_turns += bool(result.info.get("invalid"))
            self.histories[i] = result.history
            if result.terminated or result.truncated:
                episode.done = True
                finished.append(i)
        self.active = [i for i in self.active if i not in set(finished)]
        return finished


def _new_observations(history: History) -> list[Text]:
    """The environment segments appended after the last action of `history`."""
    out: list[Text] = []
    for t in reversed(history):
        if t.is_action:
            break
        out.append(t)
    return out[::-1]
