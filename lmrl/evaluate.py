"""`python -m lmrl.evaluate checkpoint=<dir> task=...`: score a saved policy with the task's protocol.

`<dir>` is a run's `checkpoint/`: a `save_pretrained` LM (BC, filtered BC), or a value-based
run's layout (MC, ILQL: value trunk + heads, BC policy), whose policies are evaluated at the
run's betas or at `betas=[...]`, plus the reranker where the task has an action list (at the run's temperature,
or at `rerank_temperature=T`).  On a two-player game, `rating=true` also rates the headline policy on the game's Elo
ladder (`lmrl.ladder`), with `+rating_with.<name>=<dir>` putting other checkpoints in the same ladder."""

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
    out_dir = Path(HydraConfig.get().runtime.output_dir)
    if cfg.rating:
        metrics["elo"] = rate_checkpoints(task, {name: next(iter(policies.values()))}, cfg, out_dir)
    write_run(out_dir, cfg, metrics)
    if cfg.records.dir:
        write_record(cfg.records.dir, make_record(metrics, config_hash(cfg), metrics["wall_seconds"],
                                                  checkpoint=str(checkpoint)))
    print(summary_line(metrics))
    return metrics


def rate_checkpoints(task: Task, policies: dict, cfg: DictConfig, out_dir: Path) -> dict:
    """`rating=true`: the policies (and `rating_with`'s checkpoints) rated on the task's game ladder
    (`lmrl.ladder.rate`); prints the table, writes `rating.csv` and `rating.md` to `out_dir`, and returns each
    player's rating and 95% interval."""
    from lmrl.ladder import rate

    from lmrl.elo import format_table
    from lmrl.envs.two_player import GAMES

    game = cfg.task.env.get("game") or (task.name if task.name in GAMES else None)  # task=chess: its own ladder
    if game not in GAMES:
        raise ValueError(f"rating=true rates players of a two-player game (task=tictactoe, kuhn or chess), not "
                         f"task={task.name}")
    actors = dict(policies)
    for other, directory in (cfg.rating_with or {}).items():
        _, loaded = load_policies(Path(directory).expanduser(), task, cfg.task.eval, cfg.seed)
        actors[str(other)] = next(iter(loaded.values()))
    table = rate(actors, game, games=cfg.rating_games, seed=cfg.seed)
    text = format_table(table)
    print(text, end="")
    out_dir.mkdir(parents=True, exist_ok=True)
    table.to_csv(out_dir / "rating.csv")
    (out_dir / "rating.md").write_text(text)
    rows = table.set_index("player")
    return {p: {k: float(rows.loc[p, k]) for k in ("rating", "low", "high")} for p in actors}


if __name__ == "__main__":
    main()
