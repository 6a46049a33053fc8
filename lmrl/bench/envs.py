"""`python -m lmrl.bench envs` (part of `make bench`): simulator speed of every task, as JSON.

Each task's env (built from its `conf/task/*.yaml`) plays full episodes under a uniformly
random *legal* policy (`env.legal_actions()`), so the number is the simulator's own cost
with no model in the loop.  Tasks whose opponent is an engine also report its time per move.
Writes `results/bench/envs.json`.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import time
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from tqdm.auto import tqdm

CONF = Path(__file__).resolve().parents[2] / "conf"
TASKS = ("maze_fo", "maze_po", "wordle", "chess", "endgames", "text_nav_fo", "text_nav_po")


def task_env_config(task: str):
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        return compose("train", overrides=[f"task={task}"]).task.env


def random_legal_episodes(make_env, episodes: int, seed: int = 0) -> dict:
    """Full episodes under a uniform random legal policy: env steps/s, resets/s, returns."""
    rng, env = random.Random(seed), make_env()
    steps, returns, reset_seconds = 0, [], 0.0
    start = time.perf_counter()
    for k in tqdm(range(episodes), desc="episodes", unit="ep", leave=False):
        t0 = time.perf_counter()
        env.reset(seed=seed * 100_003 + k)
        reset_seconds += time.perf_counter() - t0
        total, done = 0.0, False
        while not done:
            legal = env.legal_actions()
            if not legal:
                raise RuntimeError(f"{type(env).__name__}.legal_actions() is empty or None: no random legal policy")
            result = env.step(rng.choice(legal))
            total += result.reward
            steps += 1
            done = result.terminated or result.truncated
        returns.append(total)
    seconds = time.perf_counter() - start
    return {"episodes": episodes, "env_steps": steps, "seconds": seconds, "env_steps_per_s": steps / seconds,
            "mean_episode_length": steps / episodes, "reset_ms": 1000 * reset_seconds / episodes,
            "mean_return": sum(returns) / episodes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="results/bench/envs.json")
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--tasks", nargs="*", default=list(TASKS))
    args = parser.parse_args()
    result = {}
    for task in args.tasks:
        cfg = task_env_config(task)
        row = random_legal_episodes(lambda cfg=cfg: instantiate(cfg), args.episodes)
        extra = getattr(instantiate(cfg), "benchmark_extras", None)
        if extra is not None:
            row.update(extra())
        result[task] = row
        print(task, json.dumps(row), flush=True)
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
