"""`python -m lmrl.evaluate checkpoint=<dir> task=...`: score a saved policy with the task's protocol.

`<dir>` is a run's `checkpoint/`: a `save_pretrained` LM (BC, filtered BC), or a value-based
run's layout (MC, ILQL: value trunk + heads, BC policy), whose policies are evaluated at the
run's betas or at `betas=[...]`, plus the reranker where the task has an action list (at the run's temperature,
or at `rerank_temperature=T`)."""

from __future__ import annotations

import time
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from omegaconf import DictConfig

from lmrl.evaluation import evaluate_policies, load_policies, write_run
from lmrl.records import config_hash, make_record, write_record
from lmrl.task import Task
from lmrl.utils import seed_everything, summary_line


@hydra.main(version_base="1.3", config_path="../conf", config_name="evaluate")
def main(cfg: DictConfig) -> dict:
    """`python -m lmrl.evaluate checkpoint=<dir> task=<task>`: load the checkpoint's policies (`load_policies`), run the
    task's evaluation protocol, and write `metrics.json`, the config and (with `records.dir`) a record. Returns the
    metrics."""
    start = time.perf_counter()
    seed_everything(cfg.seed)
    task = Task(cfg.task, cfg.cache_dir)
    checkpoint, ev = Path(cfg.checkpoint).expanduser(), cfg.task.eval
    name, policies = load_policies(checkpoint, task, ev, cfg.seed, list(cfg.betas) if cfg.betas else None,
                                   cfg.rerank, engine=instantiate(cfg.hardware.engine),
                                   rerank_temperature=cfg.rerank_temperature)
    name = name or cfg.algo.name
    metrics = evaluate_policies(task, policies, ev, cfg.seed)
    metrics = {"task": task.name, "algo": name, "checkpoint": str(cfg.checkpoint), "seed": cfg.seed,
               **metrics, "wall_seconds": time.perf_counter() - start}
    write_run(Path(HydraConfig.get().runtime.output_dir), cfg, metrics)
    if cfg.records.dir:
        write_record(cfg.records.dir, make_record(metrics, config_hash(cfg), metrics["wall_seconds"],
                                                  checkpoint=str(checkpoint)))
    print(summary_line(metrics))
    return metrics


if __name__ == "__main__":
    main()
