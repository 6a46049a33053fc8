"""Turn-level credit by hand: turns, SWEET-RL's advantages, Bradley–Terry, DPO, the pairings, and the
group-relative baseline."""

import math
import random

import pytest
import torch

from lmrl.algos.turn_losses import (
    bradley_terry_loss, candidate_pairs, dpo_loss, exact_value, group_advantages, group_logsumexp, group_sums, mean_nll,
    log_softmax_by_group, ratio_advantages, reverse_kl, sequence_logprob_sums, sum_scale, trajectory_pairs, turn_ends, turn_index, turn_means,
    turn_starts, turn_sums,
)

# Row 0: a turn at t=1,2 and one at t=4 (t=3 an env token, t=0 the prompt).  Row 1: one turn at t=0,1,2.
DECIDE = torch.tensor([[False, True, True, False, True], [True, True, True, False, False]])
LOGP = torch.tensor([[9.0, -1.0, -3.0, 9.0, -0.5], [-2.0, -2.0, -5.0, 9.0, 9.0]])  # 9 = garbage off decisions


def test_turns_are_runs_of_decisions_numbered_row_major():
    assert turn_starts(DECIDE).tolist() == [[False, True, False, False, True], [True, False, False, False, False]]
    assert turn_ends(DECIDE).tolist() == [[False, False, True, False, True], [False, False, True, False, False]]
    assert turn_index(DECIDE).tolist() == [[-1, 0, 0, -1, 1], [2, 2, 2, -1, -1]]
    assert turn_sums(LOGP, DECIDE).tolist() == [-4.0, -0.5, -9.0]
    assert turn_means(LOGP, DECIDE).tolist() == [-2.0, -0.5, -3.0]


def test_sweet_advantage_is_beta_times_the_mean_log_ratio_of_each_turn():
    ref = torch.tensor([[0.0, -2.0, -2.0, 0.0, -1.0], [-3.0, -3.0, -3.0, 0.0, 0.0]])
    # turn 0: mean(-1,-3) - mean(-2,-2) = 0;  turn 1: -0.5 + 1 = 0.5;  turn 2: -3 + 3 = 0
    assert ratio_advantages(LOGP, ref, DECIDE, beta=0.5).tolist() == [0.0, 0.25, 0.0]


def test_bradley_terry_on_a_hand_made_pair():
    chosen, rejected = torch.tensor([1.0], requires_grad=True), torch.tensor([-1.0], requires_grad=True)
    loss, logs = bradley_terry_loss(chosen, rejected)
    assert loss.item() == pytest.approx(math.log(1 + math.exp(-2.0)))  # -log sigmoid(2) = 0.126928
    loss.backward()
    sig = 1 / (1 + math.exp(2.0))  # d/ds+ = -sigmoid(-2)
    assert chosen.grad.item() == pytest.approx(-sig) and rejected.grad.item() == pytest.approx(sig)
    assert logs["pair_accuracy"].item() == 1.0 and logs["margin"].item() == 2.0


def test_dpo_with_known_log_probs():
    # beta 0.1: chosen reward 0.1 * (-1 - (-1.5)) = 0.05, rejected 0.1 * (-2 - (-1.5)) = -0.05, margin 0.1
    logp_c = torch.tensor([-1.0], requires_grad=True)
    loss, logs = dpo_loss(logp_c, torch.tensor([-2.0]), torch.tensor([-1.5]), torch.tensor([-1.5]), beta=0.1)
    assert loss.item() == pytest.approx(math.log(1 + math.exp(-0.1)))  # 0.644397
    assert logs["chosen_reward"].item() == pytest.approx(0.05) and logs["rejected_reward"].item() == pytest.approx(-0.05)
    loss.backward()
    assert logp_c.grad.item() == pytest.approx(-0.1 / (1 + math.exp(0.1)))  # -beta * sigmoid(-margin)


def test_sums_and_nll_over_decisions_only():
    assert sequence_logprob_sums(LOGP, DECIDE).tolist() == [-4.5, -9.0]
    assert mean_nll(LOGP, DECIDE).item() == pytest.approx(13.5 / 6)


def test_exact_value_carries_the_estimates_gradient():
    x = torch.tensor(2.0, requires_grad=True)
    y = exact_value(torch.tensor(10.0), 3 * x)
    assert y.item() == 10.0
    y.backward()
    assert x.grad.item() == 3.0
    assert sum_scale(10, 4) == 2.5 and sum_scale(3, 3) == 1.0


def test_scores_normalized_over_the_playable_moves_by_hand():
    """Turn 0's moves scored -1, -2, -3; turn 1's -0.5, -0.5 (scores interleaved, `group` says whose)."""
    scores, group = torch.tensor([-1.0, -0.5, -2.0, -0.5, -3.0]), torch.tensor([0, 1, 0, 1, 0])
    z = math.log(math.exp(-1) + math.exp(-2) + math.exp(-3))
    expected = torch.tensor([-1.0 - z, math.log(0.5), -2.0 - z, math.log(0.5), -3.0 - z])
    torch.testing.assert_close(log_softmax_by_group(scores, group, 2), expected)
    # a constant added to every move of one turn (a critic lowering every move at once) changes nothing
    shift = torch.tensor([-7.0, 3.0])
    torch.testing.assert_close(log_softmax_by_group(scores + shift[group], group, 2), expected)
    # stable far from 0, and a softmax's gradient: d log p(move 0) / d score_j = [j = 0] - p(j), within its turn
    torch.testing.assert_close(group_logsumexp(torch.tensor([1000.0, 1000.0]), torch.tensor([0, 0]), 1),
                               torch.tensor([1000.0 + math.log(2)]))
    scores.requires_grad_()
    log_softmax_by_group(scores, group, 2)[0].backward()
    p = torch.softmax(torch.tensor([-1.0, -2.0, -3.0]), 0)
    torch.testing.assert_close(scores.grad, torch.tensor([1 - p[0].item(), 0.0, -p[1].item(), 0.0, -p[2].item()]))


def test_reverse_kl_by_hand():
    # pi = (1/2, 1/2), pi_ref = (1/4, 3/4): KL = 1/2 ln 2 + 1/2 ln(2/3) = 1/2 ln(4/3); a second row equal to its ref: 0
    logits = torch.tensor([[0.0, 0.0], [1.0, 2.0]], requires_grad=True)
    ref = torch.tensor([[0.0, math.log(3.0)], [1.0, 2.0]])
    kl = reverse_kl(logits, ref)
    assert kl.item() == pytest.approx(0.25 * math.log(4 / 3))
    kl.backward()
    assert logits.grad[1].abs().max().item() < 1e-7  # at the reference the KL is flat
    assert reverse_kl(torch.zeros(0, 2), torch.zeros(0, 2)).item() == 0.0


def test_trajectory_pairs_best_attempt_against_every_strictly_worse_one():
    returns = [-5.0, -3.0, -3.0, -9.0, -1.0, -1.0, -7.0]
    tasks = ["a", "a", "a", "a", "b", "b", "c"]
    # task a: best -3 (attempts 1 and 2 take turns), worse: 0 and 3; task b: a tie, no pair; task c: one attempt
    assert trajectory_pairs(returns, tasks) == [(1, 0), (2, 3)]


def test_trajectory_pairs_all_every_attempt_against_every_strictly_worse_one():
    returns = [-5.0, -3.0, -3.0, -9.0, -1.0, -1.0, -7.0]
    tasks = ["a", "a", "a", "a", "b", "b", "c"]
    # task a: -3 (1, 2) > -5 (0) > -9 (3); ties and single attempts give nothing
    assert sorted(trajectory_pairs(returns, tasks, "all")) == [(0, 3), (1, 0), (1, 3), (2, 0), (2, 3)]
    with pytest.raises(ValueError, match="pairing must be one of"):
        trajectory_pairs(returns, tasks, "top")


def test_candidate_pairs_top_half_against_bottom_half():
    pairs = candidate_pairs([3.0, 1.0, 2.0, 0.0], n_pairs=10, rng=random.Random(0))
    assert sorted(pairs) == [(0, 1), (0, 3), (2, 1), (2, 3)]  # ranks: 0, 2 on top; 1, 3 below
    assert len(candidate_pairs([3.0, 1.0, 2.0, 0.0], n_pairs=2, rng=random.Random(0))) == 2
    assert candidate_pairs([1.0, 1.0], n_pairs=4, rng=random.Random(0)) == []  # a tie is no preference
    assert candidate_pairs([1.0], n_pairs=4, rng=random.Random(0)) == []


def test_group_advantages_by_hand():
    returns = torch.tensor([1.0, 3.0, 5.0, 5.0, -2.0, 0.0, 5.0])
    groups = torch.tensor([0, 0, 1, 1, 2, 2, 2])
    # group 0: mean 2, std 1; group 1: no spread; group 2: mean 1, centered (-3, -1, 4), std sqrt(26/3)
    std2 = math.sqrt(26 / 3)
    expected = [-1.0, 1.0, 0.0, 0.0, -3 / std2, -1 / std2, 4 / std2]
    assert group_advantages(returns, groups, normalize=True, eps=0.0).tolist() == pytest.approx(expected)
    assert group_advantages(returns, groups, normalize=False).tolist() == [-1.0, 1.0, 0.0, 0.0, -3.0, -1.0, 4.0]
    assert group_sums(returns, groups, 3).tolist() == [4.0, 10.0, 3.0]


def test_losses_are_fp32_from_a_low_precision_forward():
    loss, _ = dpo_loss(*(torch.tensor([v], dtype=torch.bfloat16) for v in (-1.0, -2.0, -1.5, -1.5)), beta=0.1)
    assert loss.dtype == torch.float32
    assert turn_means(LOGP.bfloat16(), DECIDE).dtype == torch.float32
