"""Evaluation shared by the entrypoints `lmrl.train` and `lmrl.evaluate`: a task's protocol over named
policies, the policies of a run's exported `checkpoint/`, and a run's metrics and config on disk."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from lmrl.algos.bc import lm_policy
from lmrl.algos.value_rl import load_value_checkpoint, value_policies
from lmrl.envs.base import history_to_str
from lmrl.models.factory import load_pretrained
from lmrl.rollout.evaluate import protocol, run_episodes
from lmrl.scoring import summarize
from lmrl.task import Task
from lmrl.utils import atomic_write_text

log = logging.getLogger(__name__)

# A start's summary in an RL run's metrics and record: the same measures as the run's own, prefixed `start_`.
START_KEYS = ("normalized_score", "return_mean", "return_stderr", "success_rate", "invalid_rate", "episodes")


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


def eval_key(task: Task, seed: int) -> str:
    """What a policy's evaluation depends on besides its weights: the task's config (env, protocol, eval budgets,
    normalization; cache paths left out) and the seed."""
    from lmrl.records import without_cache_dirs

    data = {"task": without_cache_dirs(OmegaConf.to_container(task.cfg, resolve=True)), "seed": seed}
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:12]


def start_cache(start_dir: Path, task: Task, seed: int) -> Path:
    """Where the evaluation of the weights in `start_dir` (a cached BC stage, or `init_from`) is kept: beside
    them, one file per task config and seed, so every RL cell of a stage shares one evaluation."""
    return Path(start_dir) / "evals" / f"{eval_key(task, seed)}.json"


def cache_start_metrics(path: Path, metrics: dict) -> None:
    """Keep an evaluation's summary as its start's (a BC run: its weights are its config's stage); a start
    directory that cannot be written (read-only `init_from`) just goes without."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps({k: metrics[k] for k in START_KEYS if k in metrics}, indent=2) + "\n")
    except OSError as err:
        log.warning("could not cache the start's evaluation in %s: %s", path, err)


def start_metrics(start_dir: Path, task: Task, eval_cfg, seed: int, engine=None) -> dict:
    """`start_<measure>` (`start_name`) of the policy an RL run started from, sampled exactly as a BC run's policy is
    (the same protocol and seed): read from the stage's cache, else evaluated once and cached there.  A cell that ends
    below its start has unlearnt it (the report marks it)."""
    path = start_cache(start_dir, task, seed)
    if path.exists():
        summary = json.loads(path.read_text())
        log.info("the start's evaluation (cached in %s): normalized %.1f", path, summary["normalized_score"])
    else:
        _, policies = load_policies(Path(start_dir), task, eval_cfg, seed, engine=engine)
        summary, _ = evaluate(task, next(iter(policies.values())), eval_cfg, seed)
        cache_start_metrics(path, summary)
        log.info("the start's evaluation: normalized %.1f (cached in %s)", summary["normalized_score"], path)
    return {start_name(k): summary[k] for k in START_KEYS if k in summary}


def start_name(key: str) -> str:
    """A start measure's name in metrics and records: `start_normalized`, `start_return_mean`, ..."""
    return "start_normalized" if key == "normalized_score" else f"start_{key}"


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
    """Write a run's `metrics.json` and its resolved `config.yaml` into `run_dir`."""
    (run_dir / "metrics.json").write_text(json.dumps(metrics, indent=2))
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
