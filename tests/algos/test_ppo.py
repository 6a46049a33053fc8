"""PPO's round bookkeeping: GAE runs over each episode's decisions across its sequences."""

import torch

from lmrl.algos.ppo import PPOConfig, PPOTrainer
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
