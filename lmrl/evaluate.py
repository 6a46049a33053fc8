"""`python -m lmrl.evaluate checkpoint=<dir> task=...`: score a saved policy with the task's protocol."""

from __future__ import annotations

import time
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from omegaconf import DictConfig

from lmrl.models.factory import load_pretrained
from lmrl.rollout.policy import LMPolicy
from lmrl.task import Task
from lmrl.train import evaluate, write_run
from lmrl.utils import seed_everything, summary_line


@hydra.main(version_base="1.3", config_path="../conf", config_name="evaluate")
def main(cfg: DictConfig) -> dict:
    start = time.perf_counter()
    seed_everything(cfg.seed)
    task = Task(cfg.task, cfg.cache_dir)
    model, tokenizer = load_pretrained(str(Path(cfg.checkpoint).expanduser()))
    engine = instantiate(cfg.hardware.engine)
    engine.setup(model, None)
    ev = cfg.task.eval
    policy = LMPolicy(engine.unwrap(), tokenizer, task.history_window, ev.max_input_tokens, ev.max_new_tokens,
                      ev.temperature, ev.batch_size, cfg.seed)
    metrics, _ = evaluate(task, policy, ev, cfg.seed)
    metrics = {"task": task.name, "algo": cfg.algo.name, "checkpoint": str(cfg.checkpoint), "seed": cfg.seed,
               **metrics, "wall_seconds": time.perf_counter() - start}
    write_run(Path(HydraConfig.get().runtime.output_dir), cfg, metrics)
    print(summary_line(metrics))
    return metrics


if __name__ == "__main__":
    main()
