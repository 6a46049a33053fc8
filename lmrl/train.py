"""`python -m lmrl.train task=... algo=... model=... hardware=...`: build, fit, evaluate, save."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from lmrl.algos.base import build_trainer
from lmrl.rollout.evaluate import protocol, run_episodes
from lmrl.scoring import summarize
from lmrl.task import Task
from lmrl.utils import seed_everything, summary_line

log = logging.getLogger(__name__)


def evaluate(task: Task, policy, eval_cfg, seed: int) -> tuple[dict, list]:
    """The task's protocol (every start state x N sampled episodes) -> summary metrics."""
    options, seeds = protocol(task.make_env, eval_cfg.episodes_per_start, seed, eval_cfg.get("max_starts"))
    episodes = run_episodes(policy, task.make_env, options, seeds)
    return summarize(episodes, task.normalization), episodes


def evaluate_policies(task: Task, policies: dict, eval_cfg, seed: int) -> dict:
    """Every named policy through the protocol; the first is the headline (its metrics at the top level)."""
    results = {name: evaluate(task, policy, eval_cfg, seed)[0] for name, policy in policies.items()}
    headline = next(iter(results))
    return {**results[headline], "policy": headline, "policies": results}


def write_run(run_dir: Path, cfg: DictConfig, metrics: dict) -> None:
    (run_dir / "metrics.json").write_text(json.dumps(metrics, indent=2))
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))


@hydra.main(version_base="1.3", config_path="../conf", config_name="train")
def main(cfg: DictConfig) -> dict:
    start = time.perf_counter()
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    seed_everything(cfg.seed)
    task = Task(cfg.task, cfg.cache_dir)
    task.dataset_path()  # build (or reuse) the dataset before anything is trained on it
    model, tokenizer = instantiate(cfg.model, corpus=task.texts)
    engine = instantiate(cfg.hardware.engine)
    logger = instantiate(cfg.logger)
    trainer = build_trainer(cfg.algo, task=task, engine=engine, model=model, tokenizer=tokenizer, logger=logger,
                            seed=cfg.seed, run_dir=run_dir)
    train_metrics = trainer.fit()
    trainer.save(run_dir / "checkpoint")
    metrics = evaluate_policies(task, trainer.policies(cfg.task.eval, cfg.seed), cfg.task.eval, cfg.seed)
    logger.log({f"eval/{k}": v for k, v in metrics.items() if k != "policies"})
    logger.finish()
    metrics = {"task": task.name, "algo": cfg.algo.name, "model": cfg.model.name, "seed": cfg.seed, **metrics,
               **train_metrics, "wall_seconds": time.perf_counter() - start, "run_dir": str(run_dir)}
    write_run(run_dir, cfg, metrics)
    print(summary_line(metrics))
    return metrics


if __name__ == "__main__":
    main()
