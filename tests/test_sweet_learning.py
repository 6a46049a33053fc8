"""Slow tier (issue 22): SWEET-RL on partially observed maze, from one BC stage, against its ablations.

- Critic quality: on held-out states (another seed of the dataset recipe, at most 20 per cell), the
  privileged critic's best of the four moves is BFS-optimal more often than always playing one move,
  than the critic without `c` and than MC's Q (the reranker's summed Q).
- Policy: 3 seeds, 25 starts x 16 episodes: SWEET-RL against BC, its `privileged=false` ablation and
  trajectory DPO; group PG against BC; the actor with the oracle critic (`critic=oracle`) against BC, which
  separates an actor that cannot use credit from a critic that gives none.
- FO maze (beyond the issue): a critic trained on equal-turn halves of its pairs learns the maze (the probe) where the
  paper's whole-pair critic does not.

Every number is measured in the test; the margins are the issue's.  Their 3-seed pilot on an H100
(docs/algorithms/turn-level.md) met all but SWEET-RL over its unprivileged ablation (+4.7 of +5) and the critic's.
Run alone, without pytest's timeout: many hours on a 2-core CPU; `LMRL_TEST_HARDWARE=gpu` trains and evaluates the
policy test's runs on a GPU (~45 min, one after another).
"""

from __future__ import annotations

import copy
import os

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from lmrl.algos import turn_probe
from lmrl.algos.base import build_trainer, typed_config
from lmrl.algos.privileged import task_info_for
from lmrl.algos.sweet import SweetConfig
from lmrl.algos.sweet_critic import SCORERS, critic_checkpoint
from lmrl.dist import TorchEngine
from lmrl.rollout.rerank import RerankPolicy
from lmrl.task import Task
from lmrl.tracking import NullLogger
from tests.e2e import ROOT, run_cli

SEEDS = (0, 1, 2)
EPISODES_PER_START = 16
# The margins, in normalized points (critic: agreement percentage points).
CRITIC_OVER_UNPRIVILEGED, CRITIC_OVER_MC = 15.0, 10.0
SWEET_OVER_BC, SWEET_OVER_UNPRIVILEGED, SWEET_OVER_TRAJECTORY_DPO, GROUP_PG_OVER_BC = 15.0, 5.0, 5.0, 10.0
TIMEOUT = 4 * 3600
# The policy test's CLI runs on this hardware config (e.g. gpu); the critic test runs in this process, on the CPU.
HARDWARE = [f"hardware={os.environ['LMRL_TEST_HARDWARE']}"] if os.environ.get("LMRL_TEST_HARDWARE") else []
# Extra overrides for the critic probe's two SWEET critics (the probe table of docs/algorithms/turn-level.md varies
# these), e.g.
# LMRL_CRITIC_OVERRIDES="algo.critic_stage.normalize=actions algo.critic_stage.pairing=all".
CRITIC_OVERRIDES = os.environ.get("LMRL_CRITIC_OVERRIDES", "").split()


@pytest.fixture(scope="module")
def bc_stage(tmp_path_factory):
    """The BC stage every method starts from (PO maze's stage: 600 steps of 16 sequences), and its cache."""
    root = tmp_path_factory.mktemp("sweet_po")
    run_cli("lmrl.train", ["task=maze_po", "algo=bc", "algo.batch_size=16", "task.eval.max_starts=1",
                           "task.eval.episodes_per_start=1", *HARDWARE], root / "bc", root / "cache", timeout=TIMEOUT)
    return root / "bc" / "checkpoint", root / "cache"


def composed(*overrides: str):
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        return compose("train", overrides=["task=maze_po", *overrides])


@pytest.mark.slow
def test_the_privileged_critic_knows_the_best_move(bc_stage):
    checkpoint, cache = bc_stage
    cfg = composed("algo=sweet", f"algo.init_from={checkpoint}", *CRITIC_OVERRIDES)
    task, engine = Task(cfg.task, cache), TorchEngine(device="cpu")
    model, tokenizer = instantiate(cfg.model, corpus=task.texts)
    info = task_info_for(typed_config(SweetConfig, cfg.algo).task_info, task.name)
    states = turn_probe.maze_states(task.heldout_episodes(200), info, task.make_env, per_cell=20)
    actions, agreement = list(task.cfg.actions), {}
    for name, privileged in (("privileged", True), ("unprivileged", False)):
        sweet = typed_config(SweetConfig, composed("algo=sweet", f"algo.init_from={checkpoint}", *CRITIC_OVERRIDES,
                                                   f"algo.privileged={str(privileged).lower()}").algo)
        critic = critic_checkpoint(sweet, task, engine, tokenizer, NullLogger(), 0, checkpoint)
        scorer = SCORERS[sweet.critic](critic, checkpoint, sweet.critic_stage.beta, engine)
        scores = turn_probe.critic_move_scores(scorer, tokenizer, states, actions, privileged, task.history_window,
                                               int(task.cfg.eval.max_input_tokens))
        agreement[name] = 100 * turn_probe.move_agreement(scores, states, actions)
    mc_cfg = composed("algo=mc", f"algo.init_from={checkpoint}")
    mc = build_trainer(mc_cfg.algo, task=task, engine=TorchEngine(device="cpu"), model=copy.deepcopy(model),
                       tokenizer=tokenizer, logger=NullLogger(), seed=0)
    mc.fit()
    reranker = RerankPolicy(mc.value.eval(), tokenizer, actions, task.history_window, int(task.cfg.eval.max_input_tokens))
    agreement["mc"] = 100 * turn_probe.move_agreement(turn_probe.reranker_move_scores(reranker, states,
                                                                                       task.history_window),
                                                      states, actions)
    floor = {move: round(100 * a, 1) for move, a in turn_probe.constant_move_agreement(states, actions).items()}
    print(f"best move BFS-optimal on {len(states)} held-out states (% by cell): {agreement}; always one move: {floor}")
    # A critic that learnt one global preference (PO maze: "down", 44%) knows nothing of where it is.
    assert agreement["privileged"] > max(floor.values())
    assert agreement["privileged"] >= agreement["unprivileged"] + CRITIC_OVER_UNPRIVILEGED
    assert agreement["privileged"] >= agreement["mc"] + CRITIC_OVER_MC


METHODS = {
    "sweet": ["algo=sweet"],
    # the actor with right credit (BFS at the true position): if this fails, the actor is at fault, not the critic
    "sweet_oracle": ["algo=sweet", "algo.critic=oracle"],
    "sweet_unprivileged": ["algo=sweet", "algo.privileged=false"],
    "trajectory_dpo": ["algo=sweet", "algo.mode=trajectory_dpo"],
    "group_pg": ["algo=group_pg"],
}


@pytest.mark.slow
def test_sweet_beats_bc_and_its_ablations_and_group_pg_beats_bc(bc_stage, tmp_path):
    checkpoint, cache = bc_stage
    scores: dict[str, list[float]] = {name: [] for name in ["bc", *METHODS]}
    eval_budget = [f"task.eval.episodes_per_start={EPISODES_PER_START}", *HARDWARE]
    for seed in SEEDS:
        bc = run_cli("lmrl.evaluate", ["task=maze_po", f"checkpoint={checkpoint}", f"seed={seed}", *eval_budget],
                     tmp_path / f"bc_{seed}", cache, timeout=TIMEOUT)
        scores["bc"].append(bc["normalized_score"])
        for name, overrides in METHODS.items():
            run = run_cli("lmrl.train", ["task=maze_po", *overrides, f"algo.init_from={checkpoint}", f"seed={seed}",
                                         *eval_budget], tmp_path / f"{name}_{seed}", cache, timeout=TIMEOUT)
            scores[name].append(run["normalized_score"])
    mean = {name: sum(v) / len(v) for name, v in scores.items()}
    print("normalized score per seed:", {k: [round(x, 1) for x in v] for k, v in scores.items()})
    print("mean over seeds:", {k: round(v, 1) for k, v in mean.items()})
    assert mean["sweet_oracle"] >= mean["bc"] + SWEET_OVER_BC
    assert mean["sweet"] >= mean["bc"] + SWEET_OVER_BC
    assert mean["sweet"] >= mean["sweet_unprivileged"] + SWEET_OVER_UNPRIVILEGED
    assert mean["sweet"] >= mean["trajectory_dpo"] + SWEET_OVER_TRAJECTORY_DPO
    assert mean["group_pg"] >= mean["bc"] + GROUP_PG_OVER_BC


# The FO maze's halves critic against the whole-pair one (docs/results.md: probe 86.8 /
# 79.6 / 83.0 against 32.0 / 60.0 / 24.0 on seeds 0-2; always "move down" 44.0).  Margins below the smallest seen.
HALVES_OVER_FLOOR, HALVES_OVER_WHOLE = 20.0, 15.0
FO_STAGE = ["task=maze_fo", "algo=sweet", "algo.bc.steps=600", "algo.bc.batch_size=64"]
FO_HALVES = ["algo.critic_stage.halves=true", "algo.critic_stage.beta=1.0", "algo.critic_stage.steps=600"]


@pytest.mark.slow
def test_a_critic_on_equal_turn_halves_learns_the_fully_observed_maze(tmp_path):
    """On whole trajectory pairs a maze critic can order every pair by counting turns (each costs the same), and its
    best move is BFS-optimal at about the rate of always playing one move; on pairs cut after the same number of
    turns only where each side has got to orders them, and the critic learns the maze (a BC stage at the table's FO
    maze budget, seed 0; ~3 min on one core)."""
    from lmrl.algos.sweet_check import probe_config

    def probe(*overrides: str) -> dict:
        with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
            cfg = compose("train", overrides=[*FO_STAGE, f"cache_dir={tmp_path}", *overrides])
        return probe_config(cfg, train=True)

    whole, halves = probe(), probe(*FO_HALVES)
    floor = max(whole["floor"].values())
    print(f"FO maze critic probe: whole pairs {whole['bfs_agreement']}, halves {halves['bfs_agreement']}, "
          f"always one move {floor}")
    assert halves["bfs_agreement"] >= floor + HALVES_OVER_FLOOR
    assert halves["bfs_agreement"] >= whole["bfs_agreement"] + HALVES_OVER_WHOLE
