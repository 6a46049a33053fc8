"""Evaluation shared by the entrypoints `lmrl.train` and `lmrl.evaluate`: a task's protocol over named
policies, the policies of a run's exported `checkpoint/`, and a run's metrics and config on disk."""

from __future__ import annotations

import json
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from lmrl.algos.bc import lm_policy
from lmrl.algos.value_rl import load_value_checkpoint, value_policies
from lmrl.envs.base import history_to_str
from lmrl.models.factory import load_pretrained
from lmrl.rollout.evaluate import protocol, run_episodes
from lmrl.scoring import summarize
from lmrl.task import Task


def evaluate(task: Task, policy, eval_cfg, seed: int) -> tuple[dict, list]:
    """The task's protocol (every start state x N sampled episodes) -> summary metrics."""
    options, seeds = protocol(task.make_env, eval_cfg.episodes_per_start, seed, eval_cfg.get("max_starts"))
    episodes = run_episodes(policy, task.make_env, options, seeds)
    return summarize(episodes, task.normalization), episodes


def evaluate_policies(task: Task, policies: dict, eval_cfg, seed: int, logger=None) -> dict:
    """Every named policy through the protocol; the first is the headline (its metrics at the top level).
    With a logger, a few transcripts per policy go to it as a table."""
    results, rows = {}, []
    for name, policy in policies.items():
        results[name], episodes = evaluate(task, policy, eval_cfg, seed)
        rows += [[name, i, ep.total_return, bool(ep.success), history_to_str(ep.turns)] for i, ep in
                 enumerate(episodes[:8])]
    if logger is not None:
        logger.table("eval/transcripts", ["policy", "episode", "return", "success", "transcript"], rows)
    headline = next(iter(results))
    return {**results[headline], "policy": headline, "policies": results}


def load_policies(checkpoint: Path, task: Task, eval_cfg, seed: int, betas: list[float] | None = None,
                  rerank: bool | None = None, engine=None,
                  rerank_temperature: float | None = None) -> tuple[str | None, dict]:
    """(algorithm name or None, {policy name: policy}) for a run's exported `checkpoint/`, with the
    models on `engine`'s device (`engine.place`; the host without an engine).  `rerank` and
    `rerank_temperature` replace a value checkpoint's own settings when given."""
    place = engine.place if engine is not None else (lambda module: module)
    if (checkpoint / "lmrl_algo.json").exists():
        value, policy_lm, tokenizer, algo = load_value_checkpoint(checkpoint)
        if rerank is not None:
            algo.rerank = bool(rerank)
        if rerank_temperature is not None:
            algo.rerank_temperature = float(rerank_temperature)
            if problems := algo.validate():
                raise ValueError(f"rerank_temperature={rerank_temperature}: {'; '.join(problems)}")
        policy_lm = place(policy_lm) if policy_lm is not None else None
        return algo.name, value_policies(place(value), policy_lm, tokenizer, task, algo, eval_cfg, seed, betas)
    model, tokenizer = load_pretrained(str(checkpoint))
    return None, {"sample": lm_policy(place(model), tokenizer, task, eval_cfg, seed)}


def write_run(run_dir: Path, cfg: DictConfig, metrics: dict) -> None:
    (run_dir / "metrics.json").write_text(json.dumps(metrics, indent=2))
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
