"""PPO's round bookkeeping: GAE runs over each episode's decisions across its sequences."""

import torch

import math

import pytest

from lmrl.algos.ppo import PPOConfig, PPOTrainer, explained_variance
from lmrl.algos.ppo_losses import FixedKL, gae
from lmrl.data.tokenize import next_decision_index


def trainer(**cfg) -> PPOTrainer:
    t = PPOTrainer.__new__(PPOTrainer)  # only the round arithmetic: no models, no env
    t.cfg, t.kl, t.value_initialized = PPOConfig(**cfg), FixedKL(cfg.get("kl_coef", 0.0)), True
    return t


def link(logp, ref, values, rewards):
    return {"logp": torch.tensor(logp), "ref_logp": torch.tensor(ref), "values": torch.tensor(values),
            "rewards": torch.tensor(rewards)}


def test_advantages_chain_an_episodes_sequences_into_one_stream():
    # episode 0: two windowed sequences (2 decisions, then 1); episode 1: one sequence of 2 decisions
    ep0 = [link([0.0, 0.0], [0.0, 0.0], [1.0, 2.0], [0.0, -1.0]), link([0.0], [0.0], [0.5], [-1.0])]
    ep1 = [link([0.0, 0.0], [0.0, 0.0], [3.0, 0.25], [0.0, 0.0])]
    out, logs = trainer(gamma=0.5, lam=0.5, whiten_advantages=False).advantages([ep0, ep1])
    # the same numbers as a single stream per episode: the value after sequence 1's last decision
    # is the first value of sequence 2, not 0
    stream = torch.tensor([[1.0, 2.0, 0.5]]), torch.tensor([[0.0, -1.0, -1.0]])
    valid = torch.ones(1, 3, dtype=torch.bool)
    adv, ret = gae(stream[1], stream[0], valid, next_decision_index(valid), 0.5, 0.5)
    got = torch.cat([out[0][0]["advantages"], out[0][1]["advantages"]])
    torch.testing.assert_close(got, adv[0])
    torch.testing.assert_close(torch.cat([out[0][0]["returns"], out[0][1]["returns"]]), ret[0])
    # by hand, last decision: delta = -1 + 0.5 * 0 - 0.5 = -1.5
    assert out[0][1]["advantages"].tolist() == [-1.5]
    assert [len(x["advantages"]) for x in out[0]] == [2, 1] and len(out[1][0]["advantages"]) == 2
    assert logs["kl"] == 0.0
    # the critic's health before the update: targets -1, -1, -1.5 (gamma 0.5, lam 0.5) against values 1, 2, 0.5
    # and 0, 0 against 3, 0.25
    assert logs["explained_variance"] == pytest.approx(explained_variance(
        torch.tensor([1.0, 2.0, 0.5, 3.0, 0.25]), torch.cat([ret[0], out[1][0]["returns"]]),
        torch.ones(5, dtype=torch.bool)))


def test_kl_penalty_enters_the_rewards():
    ep = [link([-1.0], [-2.0], [0.0], [0.0])]  # log pi - log pi_ref = 1
    out, _ = trainer(gamma=1.0, lam=1.0, kl_coef=0.5, whiten_advantages=False).advantages([ep])
    assert out[0][0]["advantages"].tolist() == [-0.5]


def test_first_round_sets_the_value_bias_to_the_mean_return():
    t = trainer(gamma=1.0, lam=1.0, whiten_advantages=False)
    t.value_initialized = False

    class Head(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.out = torch.nn.Linear(2, 1)

    t.model = type("M", (), {"v_head": Head()})()
    ep = [link([0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, -2.0])]  # MC returns -2, -2
    out, logs = t.advantages([ep])
    assert t.model.v_head.out.bias.item() == -2.0 and logs["old_value_mean"] == -2.0
    assert out[0][0]["advantages"].tolist() == [0.0, 0.0]  # V already equals the return


def test_round_step_budget():
    assert trainer(batch_size=4, epochs=2).train_steps(9) == 6
    assert trainer(batch_size=4, epochs=2, max_steps_per_round=3).train_steps(9) == 3


def test_explained_variance_by_hand():
    targets, valid = torch.tensor([[1.0, 3.0, 0.0]]), torch.tensor([[True, True, False]])
    assert explained_variance(targets, targets, valid) == 1.0  # a value that predicts its targets
    assert explained_variance(torch.full((1, 3), 2.0), targets, valid) == 0.0  # their mean: nothing explained
    # values 2, 2 off by -1, +1 explain nothing; 0, 2: residuals 1, 1 -> variance 0 of 1 -> 1.0; 3, 1: -3
    assert explained_variance(torch.tensor([[0.0, 2.0, 9.0]]), targets, valid) == 1.0
    assert explained_variance(torch.tensor([[3.0, 1.0, 9.0]]), targets, valid) == pytest.approx(-3.0)
    assert math.isnan(explained_variance(targets, torch.ones(1, 3), valid))  # targets that do not vary


def test_value_lr_gives_the_value_head_its_own_learning_rate():
    from lmrl.dist import TorchEngine, param_groups
    from lmrl.models.value import MLPHead

    model = torch.nn.ModuleDict({"lm": torch.nn.Linear(4, 4), "v_head": MLPHead(4, 1)})
    t = trainer(lr=1e-5, value_lr=1e-3)
    optim = t.optim_config()
    assert optim.lr == 1e-5 and optim.group_lrs == (("v_head.", 1e-3),)
    engine = TorchEngine(device="cpu")
    engine.setup(model, optim)
    lrs = {id(p): g["initial_lr"] for g in engine.optimizer.param_groups for p in g["params"]}  # before warm-up
    assert {lrs[id(p)] for p in model["v_head"].parameters()} == {1e-3}
    assert {lrs[id(p)] for p in model["lm"].parameters()} == {1e-5}
    # weight decay still skips biases, in both lr groups; every parameter is in exactly one group
    groups = param_groups(model, 0.1, optim.group_lrs)
    assert [(g.get("lr"), g["weight_decay"], len(g["params"])) for g in groups] == [
        (None, 0.1, 1), (1e-3, 0.1, 2), (None, 0.0, 1), (1e-3, 0.0, 2)]
    assert trainer(lr=1e-5).optim_config().group_lrs == ()  # null: one rate, the original's
    assert "value_lr must be > 0" in " ".join(PPOConfig(value_lr=0.0).validate())
