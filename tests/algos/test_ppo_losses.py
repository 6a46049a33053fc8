"""PPO losses by hand on tiny tensors (binary fractions, so most checks are exact)."""

import math

import pytest
import torch

from lmrl.algos.ppo_losses import (
    AdaptiveKL,
    FixedKL,
    gae,
    kl_k3,
    kl_k3_loss,
    kl_penalized_rewards,
    policy_loss,
    value_loss,
    whiten,
)
from lmrl.algos.value_losses import bellman_targets, mc_returns
from lmrl.data.tokenize import NO_NEXT, next_decision_index
# The hand-made episode of test_value_losses.py: decisions at t=1 (->a), 2 (->b), 4 (->c); t=3 is the
# environment token "z", so 2's next state is 4.  Reward -1 on "b" (the end of utterance "ab").
from tests.algos.test_value_losses import DECIDE, NEXT, REWARDS

# 9 = garbage at the non-decision positions; it must never be used as a next-state value
VALUES = torch.tensor([[9.0, 0.5, 1.0, 9.0, 2.0]])

# A second row: decisions at t=0, 1, 3; t=2 an env token, t=4 padding (garbage reward/value 99 / 9).
DECIDE_2 = torch.tensor([[True, True, False, True, False]])
REWARDS_2 = torch.tensor([[0.0, 1.0, 99.0, 2.0, 99.0]])
VALUES_2 = torch.tensor([[0.5, 1.0, 9.0, 0.5, 9.0]])


def test_episode_fixture():
    assert NEXT.tolist() == [[1, 2, 4, 4, NO_NEXT]]
    assert next_decision_index(DECIDE_2).tolist() == [[1, 3, 3, NO_NEXT, NO_NEXT]]


def test_gae_by_hand_skips_env_tokens():
    # gamma = lam = 0.5 (gamma*lam = 0.25), episode over (tail 0):
    #   t=4: delta = 0 + 0.5*0 - 2 = -2;            A = -2;                    R = -2 + 2 = 0
    #   t=2: delta = -1 + 0.5*V[4] - 1 = -1;        A = -1 + 0.25*(-2) = -1.5;  R = -1.5 + 1 = -0.5
    #   t=1: delta = 0 + 0.5*V[2] - 0.5 = 0;        A = 0 + 0.25*(-1.5) = -0.375; R = -0.375 + 0.5 = 0.125
    values = VALUES.clone().requires_grad_()
    adv, ret = gae(REWARDS, values, DECIDE, NEXT, gamma=0.5, lam=0.5)
    assert adv.tolist() == [[0.0, -0.375, -1.5, 0.0, -2.0]]
    assert ret.tolist() == [[0.0, 0.125, -0.5, 0.0, 0.0]]
    assert not adv.requires_grad and not ret.requires_grad


def test_gae_batched_ignores_garbage_off_decisions():
    # row 1, tail 0, next = [1, 3, 3, -, -]:
    #   t=3: delta = 2 + 0 - 0.5 = 1.5;             A = 1.5;                    R = 2
    #   t=1: delta = 1 + 0.5*V[3] - 1 = 0.25;       A = 0.25 + 0.25*1.5 = 0.625; R = 1.625
    #   t=0: delta = 0 + 0.5*V[1] - 0.5 = 0;        A = 0.25*0.625 = 0.15625;   R = 0.65625
    decide = torch.cat([DECIDE, DECIDE_2])
    rewards = torch.cat([REWARDS, REWARDS_2])
    rewards[0, 3] = 77.0  # env-token reward of row 0: never read
    values = torch.cat([VALUES, VALUES_2])
    adv, ret = gae(rewards, values, decide, next_decision_index(decide), 0.5, 0.5, torch.tensor([0.0, 0.0]))
    assert adv.tolist() == [[0.0, -0.375, -1.5, 0.0, -2.0], [0.15625, 0.625, 0.0, 1.5, 0.0]]
    assert ret.tolist() == [[0.0, 0.125, -0.5, 0.0, 0.0], [0.65625, 1.625, 0.0, 2.0, 0.0]]


def test_gae_tail_value_bootstraps_after_last_decision():
    # row 0, tail 4: t=4: delta = 0 + 0.5*4 - 2 = 0, A = 0 (no next advantage), R = 2
    #                t=2: delta = -1 + 0.5*2 - 1 = -1, A = -1, R = 0;  t=1: delta = 0, A = 0.25*(-1) = -0.25, R = 0.25
    # row 1, tail 1: t=3: delta = 2 + 0.5*1 - 0.5 = 2, A = 2, R = 2.5
    #                t=1: delta = 0.25, A = 0.25 + 0.25*2 = 0.75, R = 1.75;  t=0: A = 0.25*0.75 = 0.1875, R = 0.6875
    decide = torch.cat([DECIDE, DECIDE_2])
    rewards, values = torch.cat([REWARDS, REWARDS_2]), torch.cat([VALUES, VALUES_2])
    adv, ret = gae(rewards, values, decide, next_decision_index(decide), 0.5, 0.5, torch.tensor([4.0, 1.0]))
    assert adv.tolist() == [[0.0, -0.25, -1.0, 0.0, 0.0], [0.1875, 0.75, 0.0, 2.0, 0.0]]
    assert ret.tolist() == [[0.0, 0.25, 0.0, 0.0, 2.0], [0.6875, 1.75, 0.0, 2.5, 0.0]]


def _random_episodes():
    torch.manual_seed(0)
    decide = torch.tensor(
        [[False, True, True, False, True, True, False], [True, False, True, True, False, False, False]]
    )
    rewards = torch.where(decide, torch.randn(decide.shape), 0.0)
    return decide, next_decision_index(decide), rewards, torch.randn(decide.shape), torch.tensor([0.0, 1.5])


def test_gae_lambda_one_is_mc_return_minus_value():
    decide, next_idx, rewards, values, tail = _random_episodes()
    adv, ret = gae(rewards, values, decide, next_idx, 0.9, 1.0, tail)
    mc = mc_returns(rewards, decide, next_idx, tail, 0.9)
    torch.testing.assert_close(adv, torch.where(decide, mc - values, 0.0))
    torch.testing.assert_close(ret, mc)


def test_gae_lambda_zero_is_td_error():
    decide, next_idx, rewards, values, tail = _random_episodes()
    adv, ret = gae(rewards, values, decide, next_idx, 0.9, 0.0, tail)
    td_target = bellman_targets(rewards, decide, next_idx, values, tail, 0.9)  # r + γ V(next decision)
    torch.testing.assert_close(adv, torch.where(decide, td_target - values, 0.0))
    torch.testing.assert_close(ret, td_target)


def test_kl_penalized_rewards():
    # kl_coef 0.25: t=1 log-ratio +0.5 -> 0 - 0.125; t=2 reward -1, log-ratio -1 -> -1 + 0.25; t=4 equal -> 0.
    # t=0 and t=3 (env token with a garbage reward 77) are not decisions -> 0.
    logp = torch.tensor([[-5.0, -1.0, -2.0, -7.0, -0.5]], requires_grad=True)
    ref_logp = torch.tensor([[0.0, -1.5, -1.0, 0.0, -0.5]], requires_grad=True)
    rewards = REWARDS.clone()
    rewards[0, 3] = 77.0
    out = kl_penalized_rewards(rewards, logp, ref_logp, DECIDE, kl_coef=0.25)
    assert out.tolist() == [[0.0, -0.125, -0.75, 0.0, 0.0]]
    assert not out.requires_grad


def test_kl_k3_by_hand():
    # t=1: lr = ref - logp = ln 2 -> 2 - 1 - ln 2;  t=2: lr = -ln 2 -> 0.5 - 1 + ln 2;  t=4: 0.
    # mean over the 3 decisions: (1 - ln 2 + ln 2 - 0.5) / 3 = 0.5 / 3.  Garbage at t=0, 3 is ignored.
    ln2 = math.log(2)
    logp = torch.tensor([[0.0, -ln2, 0.0, 50.0, -1.0]])
    ref_logp = torch.tensor([[-50.0, 0.0, -ln2, 0.0, -1.0]])
    assert kl_k3(logp, ref_logp, DECIDE).item() == pytest.approx(0.5 / 3)


def test_kl_k3_non_negative_and_zero_at_reference():
    torch.manual_seed(0)
    decide = torch.rand(4, 6) < 0.7
    logp, ref_logp = torch.randn(4, 6), torch.randn(4, 6)
    assert kl_k3(logp, ref_logp, decide).item() >= 0.0
    assert kl_k3(ref_logp, logp, decide).item() >= 0.0
    assert kl_k3(logp, logp.clone(), decide).item() == 0.0


def test_kl_k3_loss_by_hand_and_its_gradient_pulls_towards_the_reference():
    # lr = ref - logp = ln 2 and -ln 2: (2 - 1 - ln 2 + 0.5 - 1 + ln 2) / 2 = 0.25; d/dlogp = (1 - e^lr) / n
    ln2 = math.log(2)
    logp = torch.tensor([-ln2, 0.0], requires_grad=True)
    ref_logp = torch.tensor([0.0, -ln2], requires_grad=True)
    loss = kl_k3_loss(logp, ref_logp)
    assert loss.item() == pytest.approx(0.25)
    loss.backward()
    # below the reference: pushed up; above it: pushed down; the reference gets no gradient
    assert logp.grad.tolist() == pytest.approx([(1 - 2) / 2, (1 - 0.5) / 2])
    assert ref_logp.grad is None
    # the masked estimator is this loss over the decisions, without a gradient
    assert kl_k3(logp[None], ref_logp[None], torch.ones(1, 2, dtype=torch.bool)).item() == pytest.approx(0.25)
    assert kl_k3(logp[None], ref_logp[None], torch.zeros(1, 2, dtype=torch.bool)).item() == 0.0


def test_whiten_by_hand():
    # masked entries [0, 0, 2, 2]: mean 1, population var 1 -> [-1, -1, 1, 1]; masked-out -> 0
    x = torch.tensor([[0.0, 100.0, 2.0], [2.0, 0.0, -100.0]])
    mask = torch.tensor([[True, False, True], [True, True, False]])
    assert whiten(x, mask, eps=0.0).tolist() == [[-1.0, 0.0, 1.0], [1.0, -1.0, 0.0]]
    torch.testing.assert_close(whiten(x, mask), torch.tensor([[-1.0, 0.0, 1.0], [1.0, -1.0, 0.0]]))


def test_whiten_statistics_only_over_mask():
    torch.manual_seed(0)
    x = 3.0 * torch.randn(3, 8) + 5.0
    mask = torch.rand(3, 8) < 0.6
    out = whiten(x, mask)
    assert out[mask].mean().item() == pytest.approx(0.0, abs=1e-6)
    assert out[mask].var(unbiased=False).item() == pytest.approx(1.0, abs=1e-5)
    assert (out[~mask] == 0).all()
    dirty = x.clone()
    dirty[~mask] = float("inf")  # even inf off the mask must not reach the statistics
    assert torch.equal(whiten(dirty, mask), out)


def _logps(ratios: list[float]) -> tuple[torch.Tensor, torch.Tensor]:
    """float64 (logp, old_logp) with exp(logp - old_logp) == ratios exactly (old = -0.25 keeps them exact)."""
    r = torch.tensor(ratios, dtype=torch.float64)
    old = torch.full_like(r, -0.25)
    logp = (torch.log(r) + old).requires_grad_()
    assert torch.exp(logp - old).tolist() == ratios
    return logp, old


def test_policy_loss_upper_clip_boundary():
    # cliprange 0.25 -> ratio clipped to [0.75, 1.25]; per entry max(-A·ρ, -A·clip(ρ)):
    #   ρ 1.125, A  2: inside           -> -2.25 (both terms)
    #   ρ 1.25,  A  1: at 1+c           -> -1.25 (both terms equal: not counted as clipped)
    #   ρ 1.5,   A  1: beyond, A > 0    -> max(-1.5, -1.25) = -1.25, clipped, no gradient
    #   ρ 1.5,   A -1: beyond, A < 0    -> max(1.5, 1.25) = 1.5, unclipped
    # mean: (-2.25 - 1.25 - 1.25 + 1.5) / 4 = -0.8125
    logp, old = _logps([1.125, 1.25, 1.5, 1.5])
    adv = torch.tensor([2.0, 1.0, 1.0, -1.0], dtype=torch.float64, requires_grad=True)
    loss, logs = policy_loss(logp, old, adv, cliprange=0.25)
    assert loss.item() == -0.8125
    assert logs["clipfrac"] == 0.25
    assert logs["ratio_mean"] == (1.125 + 1.25 + 1.5 + 1.5) / 4
    assert logs["approx_kl"] == pytest.approx(sum(0.5 * math.log(r) ** 2 for r in [1.125, 1.25, 1.5, 1.5]) / 4)
    loss.backward()
    # d/dlogp (-A·ρ) / n = -A·ρ / 4 where unclipped; the at-boundary entry sits on a kink and is not checked
    grad = logp.grad.tolist()
    assert (grad[0], grad[2], grad[3]) == (-2.25 / 4, 0.0, 1.5 / 4)
    assert adv.grad is None


def test_policy_loss_lower_clip_boundary():
    #   ρ 0.875, A -2: inside           -> 1.75
    #   ρ 0.75,  A -1: at 1-c           -> 0.75 (both terms equal: not counted as clipped)
    #   ρ 0.5,   A -1: below, A < 0     -> max(0.5, 0.75) = 0.75, clipped, no gradient
    #   ρ 0.5,   A  1: below, A > 0     -> max(-0.5, -0.75) = -0.5, unclipped
    # mean: (1.75 + 0.75 + 0.75 - 0.5) / 4 = 0.6875
    logp, old = _logps([0.875, 0.75, 0.5, 0.5])
    adv = torch.tensor([-2.0, -1.0, -1.0, 1.0], dtype=torch.float64)
    loss, logs = policy_loss(logp, old, adv, cliprange=0.25)
    assert loss.item() == 0.6875
    assert logs["clipfrac"] == 0.25
    assert logs["ratio_mean"] == (0.875 + 0.75 + 0.5 + 0.5) / 4
    loss.backward()
    grad = logp.grad.tolist()
    assert (grad[0], grad[2], grad[3]) == (1.75 / 4, 0.0, -0.5 / 4)


def test_policy_loss_at_old_policy_is_minus_mean_advantage():
    # ρ = 1 everywhere: loss = -mean(A), gradient -A/n, nothing clipped, approx_kl 0
    logp = torch.tensor([-1.0, -2.0, -0.5], requires_grad=True)
    adv = torch.tensor([1.0, -2.0, 0.25])
    loss, logs = policy_loss(logp, logp.detach().clone(), adv, cliprange=0.2)
    assert loss.item() == pytest.approx(0.25)
    assert logs == {"clipfrac": 0.0, "ratio_mean": 1.0, "approx_kl": 0.0}
    loss.backward()
    torch.testing.assert_close(logp.grad, -adv / 3)


def test_value_loss_clip():
    # cliprange_value 0.5, V_old = 1 everywhere:
    #   V 2.5,  R 3:    moved +1.5 toward R -> V_clip 1.5: (0.5)² = 0.25 vs (1.5)² = 2.25 -> clipped, no gradient
    #   V 0,    R 3:    moved -1 away from R -> V_clip 0.5: 3² = 9 vs 2.5² = 6.25        -> unclipped
    #   V 1.25, R 2:    inside the clip range: 0.75² = 0.5625 both
    #   V 2,    R 1.25: overshoots R, V_clip 1.5: 0.75² = 0.5625 vs 0.25² = 0.0625      -> unclipped
    # loss = 0.5 · (2.25 + 9 + 0.5625 + 0.5625) / 4 = 1.546875
    values = torch.tensor([2.5, 0.0, 1.25, 2.0], requires_grad=True)
    old = torch.ones(4, requires_grad=True)
    returns = torch.tensor([3.0, 3.0, 2.0, 1.25], requires_grad=True)
    loss, logs = value_loss(values, old, returns, cliprange_value=0.5)
    assert loss.item() == 1.546875
    assert logs == {"vf_clipfrac": 0.25, "value_mean": 1.4375}
    loss.backward()
    # (V - R) / n where unclipped; 0 where the clipped term wins
    assert values.grad.tolist() == [0.0, -3.0 / 4, -0.75 / 4, 0.75 / 4]
    assert old.grad is None and returns.grad is None


def test_adaptive_kl():
    ctl = AdaptiveKL(1.0, target=2.0, horizon=64)
    ctl.update(2.25, n_steps=8)  # error 0.125 -> ·(1 + 0.125·8/64) = 1 + 1/64
    assert ctl.value == 1.015625
    ctl = AdaptiveKL(1.0, target=2.0, horizon=64)
    ctl.update(1.75, n_steps=8)  # error -0.125 -> 1 - 1/64
    assert ctl.value == 0.984375
    ctl = AdaptiveKL(0.5, target=2.0, horizon=100)
    ctl.update(100.0, n_steps=10)  # error 49 clipped to 0.2 -> 0.5 · 1.02
    assert ctl.value == pytest.approx(0.51)
    ctl.update(0.0, n_steps=10)  # error -1 clipped to -0.2 -> · 0.98
    assert ctl.value == pytest.approx(0.51 * 0.98)
    ctl = AdaptiveKL(0.5, target=2.0, horizon=100)
    ctl.update(2.0, n_steps=10)  # on target: unchanged
    assert ctl.value == 0.5


def test_fixed_kl_never_changes():
    ctl = FixedKL(0.125)
    for kl in (0.0, 1.0, 100.0):
        ctl.update(kl, n_steps=1000)
    assert ctl.value == 0.125
