"""MC / ILQL losses by hand on tiny tensors (binary fractions, so most checks are exact)."""

import math

import pytest
import torch
from torch import nn

from lmrl.algos.value_losses import (
    bellman_targets,
    cql_loss,
    expectile_loss,
    gather_tokens,
    ilql_loss,
    lambda_targets,
    mc_loss,
    mc_returns,
    polyak_update,
    q_loss,
)
from lmrl.data.tokenize import NO_NEXT, next_decision_index

# The hand-made episode of tests/data/test_tokenize.py: tokens x y a b z c at 0..5 ("ab" reward -1,
# env "z", "c" reward 0).  Per-step (L=5): decisions at t=1 (->a), 2 (->b), 4 (->c); 2's next state is 4.
DECIDE = torch.tensor([[False, True, True, False, True]])
NEXT = next_decision_index(DECIDE)
REWARDS = torch.tensor([[0.0, 0.0, -1.0, 0.0, 0.0]])


def test_episode_fixture_matches_tokenize():
    assert NEXT.tolist() == [[1, 2, 4, 4, NO_NEXT]]


def test_gather_tokens():
    values = torch.tensor([[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]])  # [1, 2, 3]
    assert gather_tokens(values, torch.tensor([[2, 0]])).tolist() == [[3.0, 4.0]]


def test_mc_returns_per_token_discount_across_env_turn():
    # gamma 0.5, terminal (tail 0): G[4] = 0 + 0.5*0 = 0; G[2] = -1 + 0.5*G[4] = -1; G[1] = 0 + 0.5*G[2] = -0.5
    g = mc_returns(REWARDS, DECIDE, NEXT, torch.tensor([0.0]), 0.5)
    assert g.tolist() == [[0.0, -0.5, -1.0, 0.0, 0.0]]  # non-decision positions (0 and env token 3) stay 0
    # tail 2 (the next chunk's return): G[4] = 0 + 0.5*2 = 1; G[2] = -1 + 0.5*1 = -0.5; G[1] = 0.5*(-0.5) = -0.25
    g = mc_returns(REWARDS, DECIDE, NEXT, torch.tensor([2.0]), 0.5)
    assert g.tolist() == [[0.0, -0.25, -0.5, 0.0, 1.0]]


def test_mc_returns_batched_ignores_rewards_off_decisions():
    # row 1: a windowed chunk "z c" + 3 pads, decision at t=0 only, reward 4 on "c", tail 1:
    #   G[0] = 4 + 0.5*1 = 4.5.  Garbage rewards at non-decision / pad positions must not leak in.
    decide = torch.cat([DECIDE, torch.tensor([[True, False, False, False, False]])])
    rewards = torch.cat([REWARDS, torch.tensor([[4.0, 99.0, 99.0, 99.0, 99.0]])])
    rewards[0, 3] = 77.0  # env-token position of row 0
    g = mc_returns(rewards, decide, next_decision_index(decide), torch.tensor([0.0, 1.0]), 0.5)
    assert g.tolist() == [[0.0, -0.5, -1.0, 0.0, 0.0], [4.5, 0.0, 0.0, 0.0, 0.0]]


def test_bellman_targets_skip_env_tokens_done_and_bootstrap():
    # gamma 0.5; v[0] and v[3] (env token) are garbage and must never be used as a next-state value
    v = torch.tensor([[9.0, 0.25, 0.5, 7.0, 0.75]], requires_grad=True)
    # y[1] = 0 + 0.5*v[2] = 0.25; y[2] = -1 + 0.5*v[4] = -0.625 (z skipped); y[4] = 0 + 0.5*v_final
    done = bellman_targets(REWARDS, DECIDE, NEXT, v, torch.tensor([0.0]), 0.5)
    assert done.tolist() == [[0.0, 0.25, -0.625, 0.0, 0.0]]
    boot = bellman_targets(REWARDS, DECIDE, NEXT, v, torch.tensor([1.5]), 0.5)
    assert boot.tolist() == [[0.0, 0.25, -0.625, 0.0, 0.75]]
    assert not boot.requires_grad


def test_lambda_targets_by_hand_and_their_two_ends():
    # gamma 0.5, lambda 0.5, v as above, bootstrap v_final 1.5, the next chunk's realized return tail 2:
    # y[4] = 0 + 0.5*(0.5*1.5 + 0.5*2) = 0.875;  y[2] = -1 + 0.5*(0.5*v[4] + 0.5*y[4]) = -1 + 0.5*(0.375 + 0.4375)
    # = -0.59375;  y[1] = 0 + 0.5*(0.5*v[2] + 0.5*y[2]) = 0.5*(0.25 - 0.296875) = -0.0234375
    v = torch.tensor([[9.0, 0.25, 0.5, 7.0, 0.75]], requires_grad=True)
    v_final, tail = torch.tensor([1.5]), torch.tensor([2.0])
    y = lambda_targets(REWARDS, DECIDE, NEXT, v, v_final, tail, 0.5, 0.5)
    assert y.tolist() == [[0.0, -0.0234375, -0.59375, 0.0, 0.875]] and not y.requires_grad
    # lambda 0: the one-step targets; lambda 1: the realized returns (V unused)
    assert torch.equal(lambda_targets(REWARDS, DECIDE, NEXT, v, v_final, tail, 0.5, 0.0),
                       bellman_targets(REWARDS, DECIDE, NEXT, v, v_final, 0.5))
    assert torch.equal(lambda_targets(REWARDS, DECIDE, NEXT, v, v_final, tail, 0.5, 1.0),
                       mc_returns(REWARDS, DECIDE, NEXT, tail, 0.5))


def test_ilql_loss_with_td_lambda_regresses_q_on_lambda_targets():
    q = torch.zeros(1, 5, 3)
    tokens = torch.zeros(1, 5, dtype=torch.long)
    v = torch.tensor([[9.0, 0.25, 0.5, 7.0, 0.75]])
    args = (q, q, v, v, v, tokens, REWARDS, DECIDE, NEXT, torch.tensor([1.5]), 0.5, 0.7, 0.0)
    _, one_step = ilql_loss(*args)
    _, lam = ilql_loss(*args, tail=torch.tensor([2.0]), td_lambda=0.5)
    # Q is 0 everywhere, so its loss is the mean of y^2 / 2 over the 3 decisions
    expected = (0.0234375 ** 2 + 0.59375 ** 2 + 0.875 ** 2) / 2 / 3
    assert lam["q1_loss"].item() == pytest.approx(expected) and one_step["q1_loss"].item() != pytest.approx(expected)
    with pytest.raises(ValueError, match="tail"):
        ilql_loss(*args, td_lambda=0.5)


def test_expectile_weights_both_sides_of_tau():
    v = torch.tensor([[1.0, 1.0, 5.0]], requires_grad=True)
    target = torch.tensor([[3.0, 0.0, -100.0]])
    decide = torch.tensor([[True, True, False]])
    # t0: target above v -> w = tau = 0.7, 0.7 * 0.5*(1-3)^2 = 1.4
    # t1: target below v -> w = 1-tau = 0.3, 0.3 * 0.5*(1-0)^2 = 0.15;  (1.4 + 0.15) / n=2 = 0.775
    loss = expectile_loss(v, target, decide, tau=0.7)
    assert loss.item() == pytest.approx(0.775)
    loss.backward()
    # dL/dv = w (v - target) / n: 0.7*(-2)/2 = -0.7; 0.3*1/2 = 0.15; padding 0
    torch.testing.assert_close(v.grad, torch.tensor([[-0.7, 0.15, 0.0]]))


def test_q_loss():
    # 0.5*(2-1)^2 + 0.5*(0-3)^2 = 0.5 + 4.5 = 5, / n=2 = 2.5; the 9 vs 0 position is not a decision
    q = torch.tensor([[2.0, 0.0, 9.0]])
    assert q_loss(q, torch.tensor([[1.0, 3.0, 0.0]]), torch.tensor([[True, True, False]])).item() == 2.5


def test_cql_is_cross_entropy_with_q_as_logits():
    ln2 = math.log(2)
    q_all = torch.tensor([[[ln2, 0.0, 0.0], [1.0, 1.0, 1.0], [100.0, -100.0, 0.0]]])  # vocab 3
    tokens = torch.tensor([[1, 2, 1]])
    decide = torch.tensor([[True, True, False]])
    # t0: logsumexp = ln(2 + 1 + 1) = ln 4, minus Q[1] = 0 -> ln 4
    # t1: logsumexp = ln(3e) = 1 + ln 3, minus Q[2] = 1 -> ln 3;  (ln 4 + ln 3) / 2 = ln(12) / 2
    assert cql_loss(q_all, tokens, decide).item() == pytest.approx(math.log(12) / 2)


def _ilql_inputs():
    """L=3, decisions at t=0 and t=2 (t=1 is garbage), vocab 2, reward 1 on the last action token."""
    decide = torch.tensor([[True, False, True]])
    return dict(
        q1_all=torch.tensor([[[1.5, 1.5], [50.0, -50.0], [1.0, 1.0]]], requires_grad=True),
        q2_all=torch.tensor([[[0.0, 0.0], [-50.0, 50.0], [3.0, 3.0]]], requires_grad=True),
        v=torch.tensor([[0.5, 9.0, 1.0]], requires_grad=True),
        target_q1_taken=torch.tensor([[1.0, 99.0, 2.0]], requires_grad=True),
        target_q2_taken=torch.tensor([[2.0, -99.0, 0.0]], requires_grad=True),
        tokens=torch.tensor([[0, 1, 1]]),
        step_rewards=torch.tensor([[0.0, 0.0, 1.0]]),
        decide=decide,
        next_idx=next_decision_index(decide),  # [2, 2, NO_NEXT]
        v_final=torch.tensor([2.0], requires_grad=True),  # not done: bootstrap from the next chunk
        gamma=0.5,
        tau=0.75,
        cql_weight=0.5,
    )


def test_ilql_loss_by_hand_and_stop_gradients():
    x = _ilql_inputs()
    loss, logs = ilql_loss(**x)
    # y[0] = 0 + 0.5*v[2] = 0.5;  y[2] = 1 + 0.5*v_final = 2
    # Q1 taken [1.5, 1]: (0.5*1^2 + 0.5*1^2) / 2 = 0.5;  Q2 taken [0, 3]: (0.5*0.25 + 0.5*1) / 2 = 0.3125
    # q_hat = min(target Q1, target Q2) = [1, 0]; V = [0.5, 1]
    #   t0: 1 >= 0.5 -> 0.75 * 0.5*0.25 = 0.09375;  t2: 0 < 1 -> 0.25 * 0.5*1 = 0.125;  / 2 = 0.109375
    # CQL: every decision row is uniform over 2 tokens -> ln 2 per head; cql_loss = 2 ln 2, weighted 0.5
    assert logs["q1_loss"] == 0.5 and logs["q2_loss"] == 0.3125 and logs["v_loss"] == 0.109375
    assert logs["cql_loss"] == pytest.approx(2 * math.log(2))
    assert loss.item() == pytest.approx(0.5 + 0.3125 + 0.109375 + math.log(2))
    assert loss.item() == pytest.approx(
        logs["q1_loss"] + logs["q2_loss"] + logs["v_loss"] + x["cql_weight"] * logs["cql_loss"]
    )
    # q_mean = (1.5 + 1 + 0 + 3) / 4; v_mean = (0.5 + 1) / 2; target_mean = (0.5 + 2) / 2
    assert (logs["q_mean"], logs["v_mean"], logs["target_mean"]) == (1.375, 0.75, 1.25)

    loss.backward()
    for name in ("target_q1_taken", "target_q2_taken", "v_final"):
        assert x[name].grad is None, name
    # V gets only the expectile gradient w (V - q_hat) / n: 0.75*(0.5-1)/2 = -0.1875, 0.25*(1-0)/2 = 0.125.
    # v[2] is also the bootstrap of y[0]; a leak through the target would add Q-loss terms here.
    torch.testing.assert_close(x["v"].grad, torch.tensor([[-0.1875, 0.0, 0.125]]))
    # Q1 row t0: (Q - y)/n = 0.5 on the taken token, plus 0.5 * (softmax - onehot)/n = ±0.125 from CQL
    torch.testing.assert_close(x["q1_all"].grad[0, 0], torch.tensor([0.5 - 0.125, 0.125]))
    assert x["q1_all"].grad[0, 1].abs().sum() == 0 and x["q2_all"].grad[0, 1].abs().sum() == 0


def test_value_max_bounds_both_bootstrapped_targets():
    """value_max=0.75: y = [0.5, 2] -> [0.5, 0.75] and q_hat = [1, 0] -> [0.75, 0]; nothing else changes."""
    x = _ilql_inputs()
    _, logs = ilql_loss(**x, value_max=0.75)
    # Q1 taken [1.5, 1]: (0.5*1^2 + 0.5*0.25^2) / 2;  Q2 taken [0, 3]: (0.5*0.5^2 + 0.5*2.25^2) / 2
    assert logs["q1_loss"] == pytest.approx((0.5 + 0.5 * 0.0625) / 2)
    assert logs["q2_loss"] == pytest.approx((0.5 * 0.25 + 0.5 * 2.25 ** 2) / 2)
    # V = [0.5, 1] against [0.75, 0]: t0 0.75 * 0.5*0.0625, t2 0.25 * 0.5*1; / 2
    assert logs["v_loss"] == pytest.approx((0.75 * 0.5 * 0.0625 + 0.25 * 0.5) / 2)
    assert logs["target_mean"] == pytest.approx((0.5 + 0.75) / 2)
    assert ilql_loss(**x, value_max=None)[0].item() == ilql_loss(**x)[0].item()


def test_losses_and_targets_are_fp32_from_a_low_precision_forward():
    """Under bf16 autocast the heads return bf16; losses, TD targets and their logs are computed in fp32
    (these inputs are exact in bf16, so the result equals the fp32 one exactly)."""
    x = _ilql_inputs()
    low = {k: v.detach().to(torch.bfloat16) if torch.is_tensor(v) and v.is_floating_point() and k != "step_rewards"
           else v for k, v in x.items()}
    loss, logs = ilql_loss(**low)
    assert loss.dtype == torch.float32
    assert loss.item() == pytest.approx(ilql_loss(**x)[0].item(), rel=0, abs=0)
    y = bellman_targets(low["step_rewards"], low["decide"], low["next_idx"], low["v"], low["v_final"], 0.5)
    assert y.dtype == torch.float32 and gather_tokens(low["q1_all"], low["tokens"]).dtype == torch.float32
    q_all = low["q1_all"]
    mc, _ = mc_loss(q_all, low["tokens"], low["step_rewards"], low["decide"], low["next_idx"], torch.tensor([0.0]),
                    gamma=0.5, cql_weight=0.5)
    assert mc.dtype == torch.float32


def test_mc_loss_by_hand():
    # episode, gamma 0.5, terminal: G = [., -0.5, -1, ., 0]; vocab 2, uniform Q rows (CQL ln 2 each)
    q_all = torch.tensor([[[7.0, 7.0], [0.0, 0.0], [-1.0, -1.0], [5.0, -5.0], [1.0, 1.0]]])
    tokens = torch.tensor([[1, 0, 1, 0, 1]])
    loss, logs = mc_loss(q_all, tokens, REWARDS, DECIDE, NEXT, torch.tensor([0.0]), gamma=0.5, cql_weight=0.5)
    # Q taken at t=1,2,4: [0, -1, 1] -> 0.5*(0.5)^2 + 0 + 0.5*1^2 = 0.625, / n=3
    assert logs["q_loss"] == pytest.approx(0.625 / 3)
    assert logs["cql_loss"] == pytest.approx(math.log(2))
    assert loss.item() == pytest.approx(0.625 / 3 + 0.5 * math.log(2))
    assert logs["q_mean"] == pytest.approx(0.0) and logs["target_mean"] == pytest.approx(-0.5)


def test_padding_and_non_decisions_never_contribute():
    torch.manual_seed(0)
    b, length, vocab = 2, 6, 3
    decide = torch.tensor([[False, True, True, False, True, False], [True, True, False, False, False, False]])
    next_idx = next_decision_index(decide)
    tokens = torch.randint(vocab, (b, length))
    base = dict(
        q1_all=torch.randn(b, length, vocab), q2_all=torch.randn(b, length, vocab), v=torch.randn(b, length),
        target_q1_taken=torch.randn(b, length), target_q2_taken=torch.randn(b, length),
        step_rewards=torch.where(decide, torch.randn(b, length), 0.0),
    )
    off = ~decide
    garbage = {k: t.clone() for k, t in base.items()}
    for k, t in garbage.items():
        t[off] = 1e3 * torch.randn_like(t[off])
    garbage_tokens = torch.where(decide, tokens, torch.randint(vocab, (b, length)))
    common = dict(decide=decide, next_idx=next_idx, v_final=torch.tensor([0.0, 0.7]), gamma=0.9, tau=0.7,
                  cql_weight=0.3)
    clean, clean_logs = ilql_loss(**base, tokens=tokens, **common)
    dirty, dirty_logs = ilql_loss(**garbage, tokens=garbage_tokens, **common)
    as_floats = lambda logs: {k: float(v) for k, v in logs.items()}  # noqa: E731 (logs are device tensors)
    assert dirty.item() == pytest.approx(clean.item()) and as_floats(dirty_logs) == pytest.approx(as_floats(clean_logs))

    tail = torch.tensor([0.0, 1.3])
    mc_clean, _ = mc_loss(base["q1_all"], tokens, base["step_rewards"], decide, next_idx, tail, 0.9, 0.3)
    mc_dirty, _ = mc_loss(garbage["q1_all"], garbage_tokens, garbage["step_rewards"], decide, next_idx, tail, 0.9, 0.3)
    assert mc_dirty.item() == pytest.approx(mc_clean.item())


def test_losses_normalize_by_at_least_one_decision():
    none = torch.zeros(1, 3, dtype=torch.bool)
    assert q_loss(torch.ones(1, 3), torch.zeros(1, 3), none).item() == 0.0
    assert cql_loss(torch.zeros(1, 3, 2), torch.zeros(1, 3, dtype=torch.long), none).item() == 0.0


def test_polyak_update_weights_the_online_net():
    target, online = nn.Linear(2, 1), nn.Linear(2, 1)
    with torch.no_grad():
        target.weight.copy_(torch.tensor([[0.0, 4.0]]))
        target.bias.fill_(8.0)
        online.weight.copy_(torch.tensor([[4.0, 0.0]]))
        online.bias.fill_(0.0)
    polyak_update(target.parameters(), online.parameters(), alpha=0.25)
    # 0.25 * online + 0.75 * target: weight [0.25*4, 0.75*4] = [1, 3]; bias 0.75 * 8 = 6
    assert target.weight.tolist() == [[1.0, 3.0]] and target.bias.tolist() == [6.0]
    assert online.weight.tolist() == [[4.0, 0.0]] and online.bias.tolist() == [0.0]
    assert target.weight.grad is None


def test_weights_equal_repeating_the_sequences():
    """A merged sequence of weight w counts as w copies: ILQL's loss is identical, MC's gradient too (its
    merged tail is the mean, which moves the squared error's value by a constant, not its gradient)."""
    torch.manual_seed(1)
    b, length, vocab = 2, 5, 3
    decide = torch.tensor([[False, True, True, False, True], [True, True, False, False, False]])
    nxt = next_decision_index(decide)
    tokens, rewards = torch.randint(vocab, (b, length)), torch.randn(b, length)
    q1, q2, v = torch.randn(b, length, vocab), torch.randn(b, length, vocab), torch.randn(b, length)
    tq1, tq2, v_final = torch.randn(b, length), torch.randn(b, length), torch.tensor([0.0, 0.4])
    rep = torch.tensor([0, 0, 0, 1])  # row 0 three times, row 1 once
    common = dict(gamma=0.9, tau=0.7, cql_weight=0.3)
    merged, _ = ilql_loss(q1, q2, v, tq1, tq2, tokens, rewards, decide, nxt, v_final, **common,
                          weights=torch.tensor([3.0, 1.0]))
    repeated, _ = ilql_loss(q1[rep], q2[rep], v[rep], tq1[rep], tq2[rep], tokens[rep], rewards[rep], decide[rep],
                            nxt[rep], v_final[rep], **common)
    assert merged.item() == pytest.approx(repeated.item(), rel=1e-6)

    tails = torch.tensor([-1.0, -2.0, -6.0, 0.5])  # row 0's copies have different tails: the merged one is -3
    q_merged = q1.clone().requires_grad_(True)
    mc_loss(q_merged, tokens, rewards, decide, nxt, torch.tensor([-3.0, 0.5]), 0.9, 0.3, torch.tensor([3.0, 1.0]))[
        0].backward()
    q_repeated = q1.clone().requires_grad_(True)
    mc_loss(q_repeated[rep], tokens[rep], rewards[rep], decide[rep], nxt[rep], tails, 0.9, 0.3)[0].backward()
    torch.testing.assert_close(q_merged.grad, q_repeated.grad)


def test_bc_loss_weights_equal_repeating_the_sequences():
    from lmrl.algos.bc import bc_loss

    torch.manual_seed(2)
    logits, ids = torch.randn(2, 4, 5), torch.randint(5, (2, 4))
    action, attention = torch.tensor([[0, 1, 1, 1], [0, 0, 1, 1]]), torch.ones(2, 4, dtype=torch.long)
    rep = torch.tensor([0, 1, 1])
    merged = bc_loss(logits, ids, action, attention, torch.tensor([1.0, 2.0]))
    assert merged.item() == pytest.approx(bc_loss(logits[rep], ids[rep], action[rep], attention[rep]).item(), rel=1e-6)
