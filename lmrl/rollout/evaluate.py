"""The evaluation protocol: every start state x N sampled episodes, stepped in one batch."""

from __future__ import annotations

from typing import Callable, Sequence

from tqdm.auto import tqdm

from lmrl.envs.base import BatchedEnv, Episode, TextEnv
from lmrl.rollout.policy import Policy


def run_episodes(
    policy: Policy, make_env: Callable[[], TextEnv], options: Sequence[dict], seeds: Sequence[int], desc: str = "eval"
) -> list[Episode]:
    """Play one episode per (options, seed) with all envs in lockstep: one policy call per turn.  A policy with
    `wants_legal_actions` also gets `legal=`, each active env's `legal_actions()` (None where not known)."""
    envs = BatchedEnv(make_env, len(options))
    envs.reset_all(options, seeds)
    wants_legal = getattr(policy, "wants_legal_actions", False)
    with tqdm(total=len(options), desc=desc, unit="ep", leave=False) as bar:
        while envs.active:
            histories = [envs.histories[i] for i in envs.active]
            if wants_legal:
                actions = policy.act(histories, legal=[envs.envs[i].legal_actions() for i in envs.active])
            else:
                actions = policy.act(histories)
            bar.update(len(envs.step(actions)))
    return list(envs.episodes)


def protocol(
    make_env: Callable[[], TextEnv], episodes_per_start: int, seed: int, max_starts: int | None = None
) -> tuple[list[dict], list[int]]:
    """Each of the env's evaluation start states, `episodes_per_start` times, with distinct seeds.

    `max_starts` keeps that many start states, evenly spread over the env's list (quick runs
    on tasks with hundreds of them: 645 endgame positions, every Wordle secret)."""
    starts = spread(make_env().eval_reset_options(), max_starts)
    options = [opt for opt in starts for _ in range(episodes_per_start)]
    seeds = [seed * 1_000_003 + k for k in range(len(options))]
    return options, seeds


def spread(items: Sequence, k: int | None) -> list:
    """`k` items evenly spaced over `items` (all of them when `k` is None or not smaller)."""
    items = list(items)
    if k is None or k >= len(items):
        return items
    if k < 1:
        raise ValueError(f"eval.max_starts must be >= 1 or null, got {k}")
    return [items[(i * len(items)) // k] for i in range(k)]
