"""The evaluation protocol: every start state x N sampled episodes, stepped in one batch."""

from __future__ import annotations

from typing import Callable, Sequence

from tqdm.auto import tqdm

from lmrl.envs.base import BatchedEnv, Episode, TextEnv
from lmrl.rollout.policy import Policy


def run_episodes(
    policy: Policy, make_env: Callable[[], TextEnv], options: Sequence[dict], seeds: Sequence[int], desc: str = "eval"
) -> list[Episode]:
    """Play one episode per (options, seed) with all envs in lockstep: one policy call per turn."""
    envs = BatchedEnv(make_env, len(options))
    envs.reset_all(options, seeds)
    with tqdm(total=len(options), desc=desc, unit="ep", leave=False) as bar:
        while envs.active:
            actions = policy.act([envs.histories[i] for i in envs.active])
            bar.update(len(envs.step(actions)))
    return list(envs.episodes)


def protocol(make_env: Callable[[], TextEnv], episodes_per_start: int, seed: int) -> tuple[list[dict], list[int]]:
    """Each of the env's evaluation start states, `episodes_per_start` times, with distinct seeds."""
    starts = make_env().eval_reset_options()
    options = [opt for opt in starts for _ in range(episodes_per_start)]
    seeds = [seed * 1_000_003 + k for k in range(len(options))]
    return options, seeds
