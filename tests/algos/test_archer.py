"""ArCHer's parts checked by hand: the critic's TD loss and its targets, the turn advantage, the actor's loss and its
gradient, transitions cut from an episode, the replay buffer, the critic's pooling, the actor's log-probs against a
direct computation, and the target critic's Polyak step."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from lmrl.algos.archer import (
    ArcherConfig, ArcherModel, ArcherTrainer, ReplayBuffer, Transition, TurnCritic, discounted_returns,
    final_critic_health, joined, right_padded, turn_value_fit,
)
from lmrl.algos.turn_losses import archer_actor_loss, archer_advantages, archer_critic_loss
from lmrl.dist import OptimConfig, TorchEngine
from lmrl.envs.base import Episode, Text

T = torch.tensor


def test_critic_loss_by_hand():
    q1, q2 = T([1.0, 2.0], requires_grad=True), T([0.5, 1.0], requires_grad=True)
    v1, v2 = T([0.0, 1.0], requires_grad=True), T([1.0, 0.0], requires_grad=True)
    # Q targets: r + gamma (1 - done) V_tgt(s'): [1 + 0.5 * 2, -1] = [2, -1] for Q1, [1 + 0.5 * 1, -1] for Q2
    loss, logs = archer_critic_loss(q1, q2, v1, v2, target_v1_next=T([2.0, 3.0]), target_v2_next=T([1.0, 1.0]),
                                    target_q1_pi=T([0.5, 0.5]), target_q2_pi=T([1.0, 2.0]), rewards=T([1.0, -1.0]),
                                    dones=T([False, True]), gamma=0.5)
    # (1 + 9) / 2 + (1 + 4) / 2 + (0.25 + 0.25) / 2 + (0 + 4) / 2
    assert loss.item() == pytest.approx(5.0 + 2.5 + 0.25 + 2.0)
    assert logs["q_target_mean"] == pytest.approx(0.5) and logs["q_loss"] == pytest.approx(3.75)
    loss.backward()
    assert q1.grad.tolist() == pytest.approx([-1.0, 3.0])  # 2 (q - target) / B
    assert v2.grad.tolist() == pytest.approx([0.0, -2.0])


def test_targets_carry_no_gradient():
    tv = T([1.0, 1.0], requires_grad=True)
    q = T([0.0, 0.0], requires_grad=True)
    loss, _ = archer_critic_loss(q, q, q, q, tv, tv, tv, tv, T([0.0, 0.0]), T([False, False]), 1.0)
    loss.backward()
    assert tv.grad is None and q.grad is not None


def test_advantage_is_min_q_minus_min_v():
    a = archer_advantages(T([1.0, 2.0]), T([0.5, 3.0]), T([0.0, 1.0]), T([1.0, -1.0]))
    assert a.tolist() == pytest.approx([0.5 - 0.0, 2.0 - (-1.0)])


def test_actor_loss_and_gradient_by_hand():
    logp = T([-2.0, -1.0], requires_grad=True)
    loss = archer_actor_loss(logp, T([0.5, 3.0]))
    assert loss.item() == pytest.approx(-(0.5 * -2.0 + 3.0 * -1.0) / 2)
    loss.backward()
    assert logp.grad.tolist() == pytest.approx([-0.25, -1.5])  # -A / B: a positive advantage raises log pi


def test_transitions_cut_at_actions_with_rewards_up_to_the_next_one():
    turns = [Text("o0\n", False), Text("a1\n", True), Text("o1\n", False), Text("a2\n", True), Text("o2\n", False)]
    ep = Episode(turns=turns, rewards=[0.0, -1.0, 0.5, 0.0, 10.0], done=True, info={})
    policy = SimpleNamespace(prompt_ids=lambda history: [len(history)], encode=lambda text: [ord(text[1])])
    stub = SimpleNamespace(rollout_policy=policy)
    first, second = ArcherTrainer.transitions(stub, [ep])
    assert first == Transition(state=[1], action=[ord("1")], reward=-0.5, next_state=[3], done=False)
    assert second == Transition(state=[3], action=[ord("2")], reward=10.0, next_state=[5], done=True)
    cut = Episode(turns=turns, rewards=[0.0] * 5, done=False, info={})  # the step limit: no terminal state
    assert not ArcherTrainer.transitions(stub, [cut])[-1].done


def test_discounted_returns_by_hand():
    # G_2 = 10, G_1 = -0.5 + 0.5 * 10 = 4.5, G_0 = 1 + 0.5 * 4.5 = 3.25
    assert discounted_returns([1.0, -0.5, 10.0], gamma=0.5) == [3.25, 4.5, 10.0]
    assert discounted_returns([], gamma=0.9) == []


def test_critic_fit_ranks_states_by_their_mean_return():
    # states 7 and 8 repeat: their mean returns (-2 and -6) and values rank the three states alike, while the single
    # turns do not (the turn at state 8 with return -1 is valued below one with return -3)
    values, returns = T([-1.0, -1.0, -5.0, -5.0, -9.0]), T([-1.0, -3.0, -1.0, -11.0, -12.0])
    fit = turn_value_fit(values, returns, states=[7, 7, 8, 8, 9])
    assert fit["critic/spearman_states"] == pytest.approx(1.0)
    assert fit["critic/spearman"] < 1.0
    assert fit["critic/value_bias"] == pytest.approx((0 + 2 - 4 + 6 + 3) / 5)
    assert fit["critic/value_rmse"] == pytest.approx(((0 + 4 + 16 + 36 + 9) / 5) ** 0.5)
    assert fit["critic/fitted"] == 1.0
    assert turn_value_fit(-values, returns, states=[7, 7, 8, 8, 9])["critic/fitted"] == 0.0


def test_the_record_gets_the_critics_fit_over_the_last_rounds():
    """The run's critic/* are the last 5 rounds' means (a NaN correlation, from rollouts of one return, left out), and
    it fits when that mean per-state correlation reaches 0.5."""
    rounds = [{"round": 0, "critic/spearman_states": -0.9, "critic/value_bias": 9.0}]  # before the last 5: ignored
    rounds += [{"round": r, "critic/spearman_states": rho, "critic/value_bias": bias}
               for r, (rho, bias) in enumerate([(0.4, 0.1), (0.6, -0.1), (float("nan"), 0.3), (0.7, 0.0), (0.5, 0.2)], 1)]
    health = final_critic_health(rounds)
    assert health["critic/spearman_states"] == pytest.approx(0.55)  # (0.4 + 0.6 + 0.7 + 0.5) / 4
    assert health["critic/value_bias"] == pytest.approx(0.1)
    assert health["critic/fitted"] == 1.0 and "critic/spearman" not in health
    rounds[-1]["critic/spearman_states"] = 0.2
    assert final_critic_health(rounds)["critic/fitted"] == 0.0  # 0.475
    assert final_critic_health([{"round": 0}]) == {}


def test_replay_buffer_keeps_the_last_transitions_and_draws_reproducibly():
    buf = ReplayBuffer(3)
    buf.extend([Transition([i], [i], 0.0, [i], False) for i in range(5)])
    assert len(buf) == 3 and [t.state[0] for t in buf.items] == [2, 3, 4]
    draw = lambda: [t.state[0] for t in buf.sample(8, torch.Generator().manual_seed(1))]  # noqa: E731
    assert draw() == draw() and set(draw()) <= {2, 3, 4}


def tiny_trainer(tau: float = 0.1):
    """A trainer holding the parts the update uses: a 1-layer GPT-2 actor, a critic on another, the target."""
    cfg = GPT2Config(vocab_size=20, n_positions=32, n_embd=8, n_layer=1, n_head=2, resid_pdrop=0.0, embd_pdrop=0.0,
                     attn_pdrop=0.0)
    torch.manual_seed(0)
    critic = TurnCritic(GPT2LMHeadModel(cfg).transformer, 8)
    engine = TorchEngine(device="cpu")
    target = engine.prepare_frozen(TurnCritic(GPT2LMHeadModel(cfg).transformer, 8))
    engine.setup(ArcherModel(GPT2LMHeadModel(cfg), critic), OptimConfig(lr=0.1, total_steps=10))
    stub = SimpleNamespace(engine=engine, tokenizer=SimpleNamespace(pad_token_id=0), max_length=32, target=target,
                           cfg=ArcherConfig(tau=tau))
    stub.action_token_logprobs = lambda *args, **kw: ArcherTrainer.action_token_logprobs(stub, *args, **kw)
    return stub


def test_actor_logprobs_are_the_sum_over_the_action_tokens_only():
    t = tiny_trainer()
    states, actions = [[1, 2, 3], [4, 5]], [[6, 7], [8]]
    got = ArcherTrainer.action_logprob_sums(t, states, actions)
    lm = t.engine.unwrap().lm
    for i, (s, a) in enumerate(zip(states, actions)):
        logp = torch.log_softmax(lm(torch.tensor([s + a])).logits[0].float(), dim=-1)
        want = sum(logp[len(s) - 1 + k, tok] for k, tok in enumerate(a))
        assert got[i].item() == pytest.approx(want.item(), abs=1e-5)


def test_reference_logprobs_score_the_same_action_tokens():
    """The KL term's reference log-probs come from the same rows and positions as the actor's: a reference that is
    the actor itself gives the actor's log-probs, so k3 is 0."""
    t = tiny_trainer()
    states, actions = [[1, 2, 3], [4, 5]], [[6, 7], [8]]
    logp, scored = ArcherTrainer.action_token_logprobs(t, states, actions)
    ref, ref_scored = ArcherTrainer.action_token_logprobs(t, states, actions, t.engine.unwrap().lm)
    assert torch.equal(scored, ref_scored) and scored.sum().item() == 3
    assert torch.allclose(logp[scored], ref[scored])
    assert ArcherTrainer.action_logprob_sums(t, states, actions).shape == (2,)


def test_critic_pools_the_last_real_token_whatever_the_padding():
    critic = tiny_trainer().engine.unwrap().critic
    ids, mask = right_padded([[1, 2, 3], [4]], pad_id=0)
    alone = critic.encode(*right_padded([[4]], pad_id=0))
    assert torch.allclose(critic.encode(ids, mask)[1], alone[0], atol=1e-5)
    q1, q2, v1, v2 = critic(ids, mask, *right_padded([[5], [6, 7]], pad_id=0))
    assert q1.shape == q2.shape == v1.shape == v2.shape == (2,)
    assert critic(ids, mask)[:2] == (None, None)


def test_target_critic_moves_tau_of_the_way_to_the_critic():
    t = tiny_trainer(tau=0.25)
    critic, target = t.engine.unwrap().critic, t.target
    before = [p.detach().clone() for p in target.parameters()]
    ArcherTrainer.after_step(t)
    for b, p, c in zip(before, target.parameters(), critic.parameters(), strict=True):
        assert torch.allclose(p, 0.75 * b + 0.25 * c)


@pytest.mark.parametrize("fields, message", [
    ({"gamma": 1.5}, "gamma must be in [0, 1]"), ({"tau": 0.0}, "tau in (0, 1]"),
    ({"critic_lr": 0.0}, "critic_lr must be > 0"), ({"updates_per_round": 0}, "updates_per_round must be >= 1"),
    ({"warmup_rounds": -1}, "warmup_rounds and offline_episodes must be >= 0"),
    ({"kl_coef": -0.1}, "kl_coef must be >= 0"), ({"actor_every": 0}, "actor_every must be >= 1"),
    ({"critic_input": "both"}, "critic_input must be one of joint"),
])
def test_bad_configs_are_refused(fields, message):
    assert any(message in p for p in ArcherConfig(**fields).validate())


def test_joint_critic_reads_the_action_after_its_state():
    """joint: V from the state's last token equals the state alone; Q's action encoding is the hidden state at the
    action's last token of one pass over [state; action], whatever the padding; a pair over the trunk's length keeps
    the action and the state's last tokens."""
    critic = tiny_trainer().engine.unwrap().critic
    assert critic.joint
    states, actions = right_padded([[1, 2, 3], [4]], pad_id=0), right_padded([[5], [6, 7]], pad_id=0)
    q1, _, v1, _ = critic(*states, *actions)
    _, _, v_alone, _ = critic(*right_padded([[4]], pad_id=0))
    assert v1[1].item() == pytest.approx(v_alone[0].item(), abs=1e-5)
    h = critic.hidden(torch.tensor([[4, 6, 7]]), torch.ones(1, 3, dtype=torch.long))[0]
    want = critic.q1(torch.cat([h[0], h[2]]))
    assert q1[1].item() == pytest.approx(want.item(), abs=1e-5)
    ids, mask, state_last = joined(*right_padded([list(range(1, 31))], 0), *right_padded([[9, 9, 9, 9]], 0), 32)
    assert ids[0].tolist() == list(range(3, 31)) + [9, 9, 9, 9] and state_last.tolist() == [27]


def test_joint_critic_fits_action_values_that_swap_between_states():
    """Which action is better flips between two states (Q = +-1): the joint critic fits all four pairs."""
    critic = tiny_trainer().engine.unwrap().critic
    states, actions = right_padded([[1, 2], [1, 2], [3, 4], [3, 4]], 0), right_padded([[5], [6], [5], [6]], 0)
    target = T([1.0, -1.0, -1.0, 1.0])
    opt = torch.optim.Adam(critic.parameters(), lr=3e-3)
    for _ in range(300):
        q1, _, _, _ = critic(*states, *actions)
        loss = (q1 - target).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.05
