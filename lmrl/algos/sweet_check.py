"""SWEET-RL critics of finished runs on held-out pairs: `python -m lmrl.algos.sweet_check [--train] RUN_DIR...
[key=value...]` (each run's config.yaml, with the overrides), and the check `launchers.sweep --check-critics` runs.

`--train` trains (and caches) a missing BC or critic stage first: a critic-only ablation such as
`algo.privileged=false` or `algo.critic_stage.halves=true`, without its actor.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Sequence

from hydra.utils import instantiate
from omegaconf import OmegaConf

from lmrl.algos.base import typed_config
from lmrl.algos.bc import start_checkpoint
from lmrl.algos.sweet import SweetConfig
from lmrl.algos.sweet_critic import SCORERS, cached_unseen_health, critic_checkpoint
from lmrl.task import Task
from lmrl.tracking import NullLogger


def check_config(cfg, train: bool = False) -> dict:
    """`unseen_pair_health` of the critic behind a SWEET-RL run's config: what a run made before the check existed
    would have logged.  Its BC and critic stages must be cached, or with `train` are trained (and cached) first: a
    critic-only ablation (`algo.privileged=false`) without the actor."""
    algo = typed_config(SweetConfig, cfg.algo)
    if algo.critic not in SCORERS or algo.mode != "turn" or algo.critic_from:
        raise ValueError(f"no critic stage to check (critic={algo.critic}, mode={algo.mode}, "
                         f"critic_from={algo.critic_from})")
    task = Task(cfg.task, cfg.cache_dir)
    model, tokenizer = instantiate(cfg.model, corpus=task.texts)
    engine = instantiate(cfg.hardware.engine)
    bc_dir = start_checkpoint(algo, task, engine, model, tokenizer, NullLogger(), cfg.seed, train=train)
    critic_dir = critic_checkpoint(algo, task, engine, tokenizer, NullLogger(), cfg.seed, bc_dir, train=train)
    return {"task": task.name, "seed": cfg.seed, "privileged": algo.privileged, "critic": algo.critic,
            **cached_unseen_health(algo, task, tokenizer, engine, cfg.seed, critic_dir, bc_dir)}


def main(argv: Sequence[str] | None = None) -> None:
    """python -m lmrl.algos.sweet_check [--train] RUN_DIR... [key=value...]: each finished run's critic (its
    config.yaml, with the dotted overrides) on held-out pairs, one JSON line a run."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--train", action="store_true", help="train (and cache) a missing BC or critic stage")
    parser.add_argument("items", nargs="+", help="run directories, then overrides such as algo.privileged=false")
    args = parser.parse_args(argv)
    runs = [i for i in args.items if "=" not in i]
    overrides = OmegaConf.from_dotlist([i for i in args.items if "=" in i])
    for run in runs:
        cfg = OmegaConf.merge(OmegaConf.load(Path(run) / "config.yaml"), overrides)
        print(json.dumps({"run": run, **check_config(cfg, args.train)}), flush=True)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    main()
