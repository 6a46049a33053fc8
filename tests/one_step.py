"""Every trainer built as `lmrl.train` builds it, on a tiny model and a small maze dataset, for one
optimizer step (online algorithms: one round of two short episodes and one update) and one
evaluation turn of each of its policies.  Shared by the device and precision tests."""

from __future__ import annotations

import copy
import dataclasses

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from lmrl.algos.base import build_trainer
from lmrl.task import Task
from lmrl.tracking import NullLogger
from lmrl.utils import seed_everything
from tests.e2e import ROOT

ALGOS = ["bc", "filtered_bc", "mc", "ilql", "ppo", "online_filtered_bc", "prompt", "sweet", "group_pg", "archer",
         "selfplay"]
# The RL algorithms start from the saved tiny model instead of training a BC stage.
RL = {"mc", "ilql", "ppo", "online_filtered_bc", "sweet", "group_pg", "archer", "selfplay"}
# SWEET-RL's critic replays the dataset's episodes (up to 100 moves) through the task's env.
# group PG's KL term is on by default (kl_coef 0.05): the device tests also run its reference model
# ArCHer's one round trains its actor too (no critic-only warm-up).
# Self-play plays a two-player game (tic-tac-toe: its text is in the tiny byte-level vocabulary too), rating the
# policy once after its round (a 2-game match against each rung) with an opponent pool of one snapshot.
ALGO_OVERRIDES = {"sweet": ["task.env.max_steps=100"], "archer": ["algo.warmup_rounds=0"],
                  "selfplay": ["smoke.rate_every=1", "smoke.rating_games=2", "algo.snapshot_every=1"]}
# The task of each algorithm's one-off checks (here and in the GPU tier) where it is not the maze.
TASKS = {"selfplay": "tictactoe"}
SMALL = ["debug=smoke", "smoke.steps=1", "smoke.batch_size=4", "smoke.rounds=1",
         "smoke.episodes_per_round=2", "smoke.max_steps_per_round=1", "smoke.rerank=true", "model=tiny",
         "model.n_layer=1", "model.n_embd=32", "model.n_head=2",
         "task.data.recipe.episodes=60"]


def compose_train(*overrides: str, task: str = "maze_fo"):
    # a maze episode stops after 3 moves; a two-player game ends by its own rules (at most 9 tic-tac-toe moves)
    limit = ["task.env.max_steps=3"] if task == "maze_fo" else []
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        return compose("train", overrides=[f"task={task}", *SMALL, *limit, *overrides])


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The task, a tiny model with its tokenizer, and that model saved as the RL algorithms' start."""
    cache = tmp_path_factory.mktemp("cache")
    cfg = compose_train()
    task = Task(cfg.task, cache)
    seed_everything(0)  # the same random tiny model whichever tests ran first
    model, tokenizer = instantiate(cfg.model, corpus=task.texts)
    start = tmp_path_factory.mktemp("start")
    model.save_pretrained(start)
    tokenizer.save_pretrained(start)
    return task, model, tokenizer, start


def weights(trainer) -> list:
    """The trained model's parameters, copied to the host."""
    return [p.detach().float().cpu().clone() for p in trainer.engine.unwrap().parameters()]


def one_step_and_turn(algo: str, engine, built, run_dir, *overrides: str) -> tuple[object, dict, list]:
    """(the trainer, its fit() metrics, its weights before fit) after one step (or what `overrides`
    set) and one turn of each evaluation policy."""
    task, model, tokenizer, start = built
    cfg = compose_train(f"algo={algo}", *([f"algo.init_from={start}"] if algo in RL else []),
                        *ALGO_OVERRIDES.get(algo, []), *overrides, task=TASKS.get(algo, "maze_fo"))
    task = Task(cfg.task, task.cache_dir)  # with this algorithm's task overrides (same recipe: same dataset)
    seed_everything(0)  # as lmrl.train does: what the step draws does not depend on the tests run before it
    trainer = build_trainer(cfg.algo, task=task, engine=engine, model=copy.deepcopy(model), tokenizer=tokenizer,
                            logger=NullLogger(), seed=0, run_dir=run_dir, checkpointer=None)
    if algo == "group_pg":
        spread_returns(trainer)
    before = weights(trainer) if algo != "prompt" else []
    metrics = trainer.fit()
    history, _ = task.make_env().reset(seed=0)
    for name, policy in trainer.policies(cfg.task.eval, seed=0).items():
        [action] = policy.act([history])
        assert isinstance(action, str), name
    return trainer, metrics, before


def length_oracle(state: dict, action: str) -> float:
    """A maze oracle for a random tiny model, whose every candidate is no move (the maze oracle would tie them all
    at -1, leaving no pair): credit by the reply's length, read at the true position like the real one."""
    assert len(state["position"]) == 2
    return float(len(action))


def spread_returns(trainer) -> None:
    """A random tiny model's episodes all score alike (every turn is an invalid action), and a group whose
    returns are equal teaches a group-relative update nothing: each round's first episode gets one more
    point, so its group has a spread and the update (loss, rollout -> update hand-off) runs."""
    collect = trainer.collect

    def spread(round_idx: int):
        first, *rest = collect(round_idx)
        return [dataclasses.replace(first, rewards=[*first.rewards[:-1], first.rewards[-1] + 1.0]), *rest]

    trainer.collect = spread
