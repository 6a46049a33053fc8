"""`python -m lmrl.evaluate checkpoint=<dir> task=...`: score a saved policy with the task's protocol.

`<dir>` is a run's `checkpoint/`: a `save_pretrained` LM (BC, filtered BC), or a value-based
run's layout (MC, ILQL: value trunk + heads, BC policy), whose policies are evaluated at the
run's betas or at `betas=[...]`, plus the reranker where the task has an action list."""

from __future__ import annotations

import time
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from omegaconf import DictConfig

from lmrl.algos.bc import lm_policy
from lmrl.algos.value_rl import load_value_checkpoint, value_policies
from lmrl.models.factory import load_pretrained
from lmrl.task import Task
from lmrl.train import evaluate_policies, write_run
from lmrl.utils import seed_everything, summary_line


@hydra.main(version_base="1.3", config_path="../conf", config_name="evaluate")
def main(cfg: DictConfig) -> dict:
    start = time.perf_counter()
    seed_everything(cfg.seed)
    task = Task(cfg.task, cfg.cache_dir)
    checkpoint, ev = Path(cfg.checkpoint).expanduser(), cfg.task.eval
    if (checkpoint / "lmrl_algo.json").exists():
        value, policy_lm, tokenizer, algo = load_value_checkpoint(checkpoint)
        if cfg.rerank is not None:
            algo.rerank = bool(cfg.rerank)
        betas = list(cfg.betas) if cfg.betas else None
        policies = value_policies(value, policy_lm, tokenizer, task, algo, ev, cfg.seed, betas)
        name = algo.name
    else:
        model, tokenizer = load_pretrained(str(checkpoint))
        engine = instantiate(cfg.hardware.engine)
        engine.setup(model, None)
        policies = {"sample": lm_policy(engine.unwrap(), tokenizer, task, ev, cfg.seed)}
        name = cfg.algo.name
    metrics = evaluate_policies(task, policies, ev, cfg.seed)
    metrics = {"task": task.name, "algo": name, "checkpoint": str(cfg.checkpoint), "seed": cfg.seed,
               **metrics, "wall_seconds": time.perf_counter() - start}
    write_run(Path(HydraConfig.get().runtime.output_dir), cfg, metrics)
    print(summary_line(metrics))
    return metrics


if __name__ == "__main__":
    main()
