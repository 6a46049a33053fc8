"""`python -m lmrl.publish_stage RUN_DIR [RUN_DIR ...]`: offer finished BC runs as cached BC stages.

A BC run publishes its export as the BC stage of its config when it finishes (`BCTrainer.publish`); this does
the same for a run that finished before that existed, or whose stage cache was cleared, so RL runs with the same
task data, model, seed and `algo.bc` start from it instead of training the stage again.  The key is recomputed
from the run's saved config exactly as an RL run computes it (a fresh model and tokenizer of that config).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from hydra.utils import get_class, instantiate
from omegaconf import OmegaConf

from lmrl.algos.base import typed_config
from lmrl.algos.bc import BCConfig, BCTrainer, bc_stage_key, publish_stage, stage_path
from lmrl.task import Task
from lmrl.utils import seed_everything

log = logging.getLogger(__name__)


def publish_run(run_dir: Path) -> tuple[Path, bool]:
    """The stage path of a finished BC run, and whether this call cached it there (False: one was cached)."""
    run_dir = Path(run_dir)
    export, config = run_dir / "checkpoint", run_dir / "config.yaml"
    if not (run_dir / "metrics.json").exists() or not (export / "config.json").exists():
        raise ValueError(f"{run_dir} is not a finished run (no metrics.json or checkpoint/config.json)")
    cfg = OmegaConf.load(config)
    if get_class(cfg.algo._target_) is not BCTrainer:
        raise ValueError(f"{run_dir} is a {cfg.algo.name} run: only plain BC runs are BC stages")
    seed_everything(cfg.seed)
    task = Task(cfg.task, cfg.cache_dir)
    model, tokenizer = instantiate(cfg.model, corpus=task.texts)
    engine = instantiate(cfg.hardware.engine)
    key = bc_stage_key(typed_config(BCConfig, cfg.algo), task, model, tokenizer, cfg.seed, engine.precision)
    written = publish_stage(task, "bc", key, export, "BC stage")
    return stage_path(task, "bc", key), written is not None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lmrl.publish_stage", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="finished BC run directories (with metrics.json)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    for run in args.runs:
        try:
            path, written = publish_run(run)
        except ValueError as err:
            print(f"[lmrl] {err}", file=sys.stderr)
            return 2
        print(f"[lmrl] {run}: {'cached as' if written else 'a stage was already cached at'} {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
