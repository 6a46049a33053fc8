"""SWEET-RL critics of finished runs on held-out pairs: `python -m lmrl.algos.sweet_check [--train] [--probe]
RUN_DIR... [key=value...]` (each run's config.yaml, with the overrides), and the check `launchers.sweep
--check-critics` runs.

`--train` trains (and caches) a missing BC or critic stage first: a critic-only ablation such as
`algo.privileged=false` or `algo.critic_stage.halves=true`, without its actor.  `--probe` (the maze) scores the
critic's best move at held-out states against BFS instead (`turn_probe`), with the floor of always one move.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import NamedTuple, Sequence

from hydra.utils import instantiate
from omegaconf import OmegaConf

from lmrl.algos import turn_probe
from lmrl.algos.base import typed_config
from lmrl.algos.bc import start_checkpoint
from lmrl.algos.privileged import task_info_for
from lmrl.algos.sweet import SweetConfig
from lmrl.algos.sweet_critic import SCORERS, cached_unseen_health, critic_checkpoint
from lmrl.task import Task
from lmrl.tracking import NullLogger


class Stages(NamedTuple):
    """The BC and critic stages behind a SWEET-RL run's config, with what scoring them needs."""
    algo: SweetConfig
    task: Task
    tokenizer: object
    engine: object
    bc_dir: Path
    critic_dir: Path
    seed: int


def cached_stages(cfg, train: bool = False) -> Stages:
    """The stages of a SWEET-RL run's config.  They must be cached, or with `train` are trained (and cached) first."""
    algo = typed_config(SweetConfig, cfg.algo)
    if algo.critic not in SCORERS or algo.mode != "turn" or algo.critic_from:
        raise ValueError(f"no critic stage to check (critic={algo.critic}, mode={algo.mode}, "
                         f"critic_from={algo.critic_from})")
    task = Task(cfg.task, cfg.cache_dir)
    model, tokenizer = instantiate(cfg.model, corpus=task.texts)
    engine = instantiate(cfg.hardware.engine)
    bc_dir = start_checkpoint(algo, task, engine, model, tokenizer, NullLogger(), cfg.seed, train=train)
    critic_dir = critic_checkpoint(algo, task, engine, tokenizer, NullLogger(), cfg.seed, bc_dir, train=train)
    return Stages(algo, task, tokenizer, engine, bc_dir, critic_dir, cfg.seed)


def has_probe(task_name: str) -> bool:
    """The probe needs BFS moves: the maze's tasks."""
    return str(task_name).startswith("maze")


def check_config(cfg, train: bool = False) -> dict:
    """`unseen_pair_health` of the critic behind a SWEET-RL run's config: what a run made before the check existed
    would have logged.  A critic-only ablation (`algo.privileged=false`) with `train`, without the actor."""
    return check_stages(cached_stages(cfg, train))


def check_stages(st: Stages) -> dict:
    return {"task": st.task.name, "seed": st.seed, "privileged": st.algo.privileged, "critic": st.algo.critic,
            **cached_unseen_health(st.algo, st.task, st.tokenizer, st.engine, st.seed, st.critic_dir, st.bc_dir)}


def probe_config(cfg, train: bool = False) -> dict:
    """The maze probe (`probe_stages`) of the critic behind a SWEET-RL run's config."""
    if not has_probe(cfg.task.name):
        raise ValueError(f"the probe needs the maze's BFS moves; task {cfg.task.name} has none")
    return probe_stages(cached_stages(cfg, train))


def probe_stages(st: Stages, episodes: int = 200, per_cell: int = 20) -> dict:
    """On held-out maze states (`episodes` of another seed of the recipe, at most `per_cell` a cell), the % of states
    whose best-scored move is BFS-optimal (mean over cells), beside always playing one move (the floor) and the
    critic's mean score of each move."""
    task, algo = st.task, st.algo
    info = task_info_for(algo.task_info, task.name)
    states = turn_probe.maze_states(task.heldout_episodes(episodes), info, task.make_env, per_cell=per_cell)
    actions = list(task.cfg.actions)
    scorer = SCORERS[algo.critic](st.critic_dir, st.bc_dir, algo.critic_stage.beta, st.engine)
    scores = turn_probe.critic_move_scores(scorer, st.tokenizer, states, actions, algo.privileged,
                                           task.history_window, int(task.cfg.eval.max_input_tokens))
    names = [a.strip() for a in actions]
    return {"task": task.name, "seed": st.seed, "privileged": algo.privileged, "critic": algo.critic,
            "states": len(states), "bfs_agreement": round(100 * turn_probe.move_agreement(scores, states, actions), 1),
            "floor": {m: round(100 * a, 1) for m, a in turn_probe.constant_move_agreement(states, actions).items()},
            "mean_score": dict(zip(names, (round(x, 4) for x in scores.mean(0).tolist())))}


def main(argv: Sequence[str] | None = None) -> None:
    """python -m lmrl.algos.sweet_check [--train] [--probe] RUN_DIR... [key=value...]: each finished run's critic
    (its config.yaml, with the dotted overrides) on held-out pairs (or, with --probe, the maze's held-out states),
    one JSON line a run."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--train", action="store_true", help="train (and cache) a missing BC or critic stage")
    parser.add_argument("--probe", action="store_true", help="the maze: best move vs BFS at held-out states")
    parser.add_argument("items", nargs="+", help="run directories, then overrides such as algo.privileged=false")
    args = parser.parse_args(argv)
    runs = [i for i in args.items if "=" not in i]
    overrides = OmegaConf.from_dotlist([i for i in args.items if "=" in i])
    for run in runs:
        cfg = OmegaConf.merge(OmegaConf.load(Path(run) / "config.yaml"), overrides)
        check = probe_config if args.probe else check_config
        print(json.dumps({"run": run, **check(cfg, args.train)}), flush=True)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    main()
