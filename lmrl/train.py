"""`python -m lmrl.train task=... algo=... model=... hardware=...`: build, fit, evaluate, save.

The same command runs in one process or under a launcher (`torchrun`, `deepspeed`, Slurm
tasks): every process trains its share, rank 0 alone writes metrics, logs and exports, and
evaluates the exported policy after the others have left the process group.

Checkpoints go to `<run>/checkpoints/` every `checkpoint.every_steps` optimizer steps
(`every_rounds` rounds for online algorithms).  `resume=true` continues the newest unfinished
run beside this one (same task and algorithm); `resume=<run dir>` continues that run.
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
import time
from datetime import datetime
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from lmrl.algos.base import ConfigError, build_trainer
from lmrl.checkpoint import Checkpointer
from lmrl.dist import (barrier, broadcast_object, exit_worker, init_distributed, is_main, main_first, shutdown,
                       world_size)
from lmrl.algos.bc import stage_path
from lmrl.evaluation import cache_start_metrics, evaluate_policies, load_policies, start_cache, start_metrics, write_run
from lmrl.records import HASH_FREE, config_hash, find_record, make_record, without_cache_dirs, write_record
from lmrl.task import Task
from lmrl.tracking import NullLogger, RunLog
from lmrl.utils import seed_everything, summary_line

log = logging.getLogger(__name__)


def run_name(cfg: DictConfig) -> str:
    """The run's name in the logger: `{task}__{algo}__{seed}__{time}`."""
    return f"{cfg.task.name}__{cfg.algo.name}__{cfg.seed}__{datetime.now():%Y%m%d-%H%M%S}"


def resumable(directory: Path) -> bool:
    """A run that checkpointed and did not finish."""
    return (directory / "checkpoints" / "latest").exists() and not (directory / "metrics.json").exists()


def resolve_run_dir(cfg: DictConfig, hydra_dir: Path) -> tuple[Path, bool]:
    """(run directory, resuming?).  Decided on rank 0; every process gets the same answer."""
    if not is_main():
        return broadcast_object(None)
    if cfg.resume in (False, None, "false"):
        answer = (hydra_dir, False)
    elif cfg.resume in (True, "true"):
        siblings = [d for d in hydra_dir.parent.iterdir() if d.is_dir() and d != hydra_dir and resumable(d)]
        if not siblings:
            raise ConfigError(f"resume=true: no unfinished run with a checkpoint in {hydra_dir.parent} "
                              "(give the run directory: resume=<dir>)")
        answer = (max(siblings, key=lambda d: (d / "checkpoints" / "latest").stat().st_mtime), True)
    else:
        path = Path(str(cfg.resume)).expanduser()
        if not (path / "checkpoints" / "latest").exists():
            raise ConfigError(f"resume={path}: no checkpoints/latest there (is it a run directory?)")
        answer = (path, True)
    if answer[1]:
        check_same_config(answer[0], cfg)
    return broadcast_object(answer)


def check_same_config(run_dir: Path, cfg: DictConfig) -> None:
    """Refuse to resume a run whose saved config computes something else.  Same rule as the records: keys that
    do not change the result (HASH_FREE: where things are written, logging, the sweep's timeout ...; cache
    paths; an option added later at its neutral value) may differ, e.g. a sweep re-launched with a longer
    `sweep.timeout_min` resumes its killed cells instead of failing them."""
    saved_path = run_dir / "config.yaml"
    if not saved_path.exists():
        return
    saved = OmegaConf.to_container(OmegaConf.load(saved_path), resolve=True)
    now = OmegaConf.to_container(cfg, resolve=True)
    if config_hash(saved) == config_hash(now):
        return
    saved, now = without_cache_dirs(saved), without_cache_dirs(now)
    diff = sorted(k for k in set(saved) | set(now) if k not in HASH_FREE and saved.get(k) != now.get(k))
    raise ConfigError(f"cannot resume {run_dir}: its config differs in {diff} (resume with the same overrides)")


def checkpointer_for(cfg: DictConfig, run_dir: Path, started: float | None = None) -> Checkpointer:
    """The run's checkpointer under `<run>/checkpoints/`: every `checkpoint.every_rounds` rounds for online algorithms
    (their config has `rounds`), else every `checkpoint.every_steps` optimizer steps, keeping `checkpoint.keep`."""
    every = cfg.checkpoint.every_rounds if "rounds" in cfg.algo else cfg.checkpoint.every_steps
    return Checkpointer(run_dir / "checkpoints", every, cfg.checkpoint.keep, started)


def build_logger(cfg: DictConfig, run_dir: Path, checkpointer: Checkpointer):
    """The configured logger on rank 0 (a silent one elsewhere), teed into `<run>/log.jsonl`."""
    if not is_main():
        return NullLogger()
    logger = RunLog(run_dir / "log.jsonl", instantiate(cfg.logger))
    latest = checkpointer.latest()
    previous_id = json.loads((latest / "trainer_state.json").read_text()).get("wandb_id") if latest else None
    logger.start(run_dir=run_dir, config=OmegaConf.to_container(cfg, resolve=True), name=run_name(cfg),
                 run_id=previous_id)
    return logger


def parameter_counts(model) -> dict:
    """`model/parameters` and `model/trainable` of the run's model (empty without a local model)."""
    if model is None:
        return {}
    return {"model/parameters": sum(p.numel() for p in model.parameters()),
            "model/trainable": sum(p.numel() for p in model.parameters() if p.requires_grad)}


def checkpoint_policies(trainer, engine, checkpoint: Path, task: Task, eval_cfg, seed: int) -> dict:
    """The policies to evaluate: the trainer's in-memory ones, or, when the engine keeps parameters
    in slices (ZeRO-3), the exported checkpoint reloaded whole (what `lmrl.evaluate` would load)."""
    if not engine.sharded:
        return trainer.policies(eval_cfg, seed)
    return load_policies(checkpoint, task, eval_cfg, seed, engine=engine)[1]


def reusable_record(cfg: DictConfig, digest: str) -> dict | None:
    """With `records.reuse=true`, the record of an earlier run of exactly this config (sweeps resume with it)."""
    if not (cfg.records.dir and cfg.records.reuse):
        return None
    found = find_record(cfg.records.dir, digest)
    if found:
        print(f"[lmrl] reusing record {found['task']}/{found['algo']}/seed {found['seed']} ({digest}): "
              f"normalized={found['normalized_score']:.1f}")
    return found


def start_of(trainer, task: Task, cfg: DictConfig, engine, metrics: dict) -> dict:
    """An RL run (its trainer has a `start_dir`): the policy it started from, evaluated as this run was (once per
    stage: `lmrl.evaluation.start_metrics`), as `start_*` metrics.  A BC run leaves its own evaluation in the stage
    it publishes, for the RL runs that start there.  `records.start=false` skips both."""
    if not cfg.records.get("start", True):
        return {}
    if getattr(trainer, "stage_key", None) is not None:
        stage = stage_path(task, "bc", trainer.stage_key)
        if (stage / "config.json").exists():
            cache_start_metrics(start_cache(stage, task, cfg.seed), metrics)
        return {}
    start_dir = getattr(trainer, "start_dir", None)
    return start_metrics(start_dir, task, cfg.task.eval, cfg.seed, engine) if start_dir is not None else {}


def run(cfg: DictConfig, hydra_dir: Path) -> dict:
    """One training run from a composed config: reuse a matching record (`records.reuse`), else build the task, dataset,
    model, engine and trainer, fit, export to `<run>/checkpoint/` (and publish a BC run's export as its stage), evaluate
    on rank 0, and write `metrics.json`, the config and a record. Returns the metrics; every other process exits after
    training."""
    start = time.perf_counter()
    digest = config_hash(cfg)
    if (found := reusable_record(cfg, digest)) is not None:
        shutil.rmtree(hydra_dir, ignore_errors=True)  # the empty run dir Hydra made for this invocation
        return found
    init_distributed()  # several processes: join the group (gloo on CPU, nccl on GPUs)
    run_dir, resuming = resolve_run_dir(cfg, hydra_dir)
    if is_main():
        run_dir.mkdir(parents=True, exist_ok=True)
        if not resuming:
            (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
    seed_everything(cfg.seed)
    task = Task(cfg.task, cfg.cache_dir)
    with main_first():
        task.dataset_path()  # build (or reuse) the dataset before anything is trained on it
    model, tokenizer = instantiate(cfg.model, corpus=task.texts)
    counts = parameter_counts(model)
    engine = instantiate(cfg.hardware.engine)
    checkpointer = checkpointer_for(cfg, run_dir, start)
    logger = build_logger(cfg, run_dir, checkpointer)
    logger.log(counts, step=None)
    trainer = build_trainer(cfg.algo, task=task, engine=engine, model=model, tokenizer=tokenizer, logger=logger,
                            seed=cfg.seed, run_dir=run_dir, checkpointer=checkpointer)
    train_metrics = trainer.fit()
    export = run_dir / "checkpoint"
    with engine.gathered():  # whole weights for the export (ZeRO-3), written by rank 0
        if is_main():
            trainer.save(export)
            if hasattr(trainer, "publish"):  # a BC run's weights are its config's BC stage: RL runs reuse them
                trainer.publish(export)
    barrier()
    world = world_size()
    shutdown()  # the other processes are done; rank 0 evaluates alone
    if not is_main():
        if hydra_dir != run_dir:  # this process's own (unused) Hydra output directory
            shutil.rmtree(hydra_dir, ignore_errors=True)
        exit_worker()
    policies = checkpoint_policies(trainer, engine, export, task, cfg.task.eval, cfg.seed)
    metrics = evaluate_policies(task, policies, cfg.task.eval, cfg.seed, logger)
    logger.log({f"eval/{k}": v for k, v in metrics.items() if k != "policies"}, step=None)
    logger.finish()
    metrics = {"task": task.name, "algo": cfg.algo.name, "model": cfg.model.name, "hardware": cfg.hardware.name,
               "precision": engine.precision, "world_size": world, "seed": cfg.seed, **metrics, **train_metrics,
               **counts, **start_of(trainer, task, cfg, engine, metrics), "wall_seconds": checkpointer.elapsed(),
               "run_dir": str(run_dir)}
    write_run(run_dir, cfg, metrics)
    if cfg.records.dir:
        write_record(cfg.records.dir, make_record(metrics, digest, metrics["wall_seconds"]))
    print(summary_line(metrics))
    return metrics


@hydra.main(version_base="1.3", config_path="../conf", config_name="train")
def main(cfg: DictConfig) -> dict:
    """`python -m lmrl.train`: Hydra composes `conf/train.yaml` with the command line's overrides, then `run`."""
    return run(cfg, Path(HydraConfig.get().runtime.output_dir))


def drop_local_rank(argv: list[str]) -> list[str]:
    """`argv` without the `--local_rank=N` (or `--local_rank N`) that DeepSpeed's and older torch launchers append:
    Hydra would reject it, and the rank is read from `LOCAL_RANK` anyway (`lmrl.dist`), which those launchers set."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--local_rank":
            skip = True
        elif not arg.startswith("--local_rank="):
            out.append(arg)
    return out


if __name__ == "__main__":
    sys.argv = drop_local_rank(sys.argv)
    main()
