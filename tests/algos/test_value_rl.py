"""Value-guided sampling is exact with KV caches; value models save and reload."""

import pytest
import torch

from lmrl.models.factory import build_tiny
from lmrl.models.value import GuidedLM, ValueModel
from lmrl.rollout.sampler import newline_stop_mask, sample_turns
from tests.rollout.test_sampler import assert_batched_greedy_matches_uncached, greedy_no_cache

CORPUS = ["The goal is at position 8, 6.\n", "move up\n", "move left\n", "There is a wall above you.\n"] * 20


def tiny(seed=0):
    torch.manual_seed(seed)
    model, tok = build_tiny(lambda: iter(CORPUS), vocab_size=300, n_layer=2, n_embd=32, n_head=2, n_positions=128)
    return model.eval(), tok


def value_model(n_q=2, keep_lm_head=False):
    lm, tok = tiny(seed=1)
    vm = ValueModel(lm, n_q=n_q, with_v=True, keep_lm_head=keep_lm_head).eval()
    for head in vm.q_heads:  # non-trivial Q values (heads start at zero)
        torch.nn.init.normal_(head.out.weight, std=0.5)
    return vm, tok


def test_guided_sampling_with_caches_matches_full_recompute():
    policy, tok = tiny(seed=0)
    vm, _ = value_model()
    assert_batched_greedy_matches_uncached(GuidedLM(vm, policy, beta=4.0).eval(), tok)


def test_guided_logits_are_policy_plus_beta_min_q():
    policy, tok = tiny(seed=0)
    vm, _ = value_model()
    ids = torch.tensor([tok("move up\n")["input_ids"]])
    attn = torch.ones_like(ids)
    out = GuidedLM(vm, policy, beta=2.0)(ids, attn)
    v = vm(ids, attn)
    expected = policy(ids, attention_mask=attn).logits + 2.0 * torch.minimum(v.qs[0], v.qs[1])
    assert torch.allclose(out.logits, expected, atol=1e-5)


def test_shared_trunk_uses_the_value_models_lm_head():
    vm, tok = value_model(n_q=1, keep_lm_head=True)
    ids = torch.tensor([tok("move up\n")["input_ids"]])
    attn = torch.ones_like(ids)
    out = GuidedLM(vm, None, beta=1.0)(ids, attn)
    v = vm(ids, attn)
    assert torch.allclose(out.logits, v.logits + v.qs[0], atol=1e-5)
    stop = newline_stop_mask(tok, len(tok))
    (row,) = sample_turns(GuidedLM(vm, None, 1.0), [ids[0].tolist()], stop, tok.pad_token_id, 5, temperature=0)
    assert row == greedy_no_cache(GuidedLM(vm, None, 1.0), ids[0].tolist(), stop.tolist(), 5)


def test_min_prob_keeps_guidance_inside_the_policy_support():
    policy, tok = tiny(seed=0)
    vm, _ = value_model()
    ids = torch.tensor([tok("move up\n")["input_ids"]])
    attn = torch.ones_like(ids)
    out = GuidedLM(vm, policy, beta=100.0, min_prob=0.004)(ids, attn).logits  # a huge beta cannot leave the support
    probs = policy(ids, attention_mask=attn).logits.softmax(-1)
    eligible = torch.isfinite(out)
    assert torch.equal(eligible, (probs >= 0.004) | (probs == probs.max(-1, keepdim=True).values))
    assert 0 < eligible.sum() < eligible.numel()


def test_headline_rerank_puts_the_reranker_first_and_needs_an_action_list():
    """`headline: rerank` makes the reranker the run's headline (first policy) even with `rerank: false`; a task
    without an action list is refused with the fix; an unknown headline is a config error."""
    from omegaconf import OmegaConf

    from lmrl.algos.value_rl import ValueRLConfig, value_policies
    from lmrl.rollout.rerank import RerankPolicy

    vm, tok = value_model(n_q=1)
    policy, _ = tiny(seed=0)
    eval_cfg = OmegaConf.create({"max_input_tokens": 64, "max_new_tokens": 4, "temperature": 1.0, "batch_size": 8})

    class MazeLike:
        name, history_window = "maze_fo", 1
        cfg = OmegaConf.create({"actions": ["move up\n", "move left\n"], "history_window": 1})

    class NoActions(MazeLike):
        name = "text_nav_fo"
        cfg = OmegaConf.create({"actions": None, "history_window": 1})

    cfg = ValueRLConfig(beta=8.0, eval_betas=[0.5], rerank=False, headline="rerank")
    policies = value_policies(vm, policy, tok, MazeLike(), cfg, eval_cfg, 0)
    assert list(policies) == ["rerank", "beta=8", "beta=0.5"] and isinstance(policies["rerank"], RerankPolicy)
    guided = value_policies(vm, policy, tok, MazeLike(), ValueRLConfig(beta=8.0, rerank=False), eval_cfg, 0)
    assert list(guided) == ["beta=8"]
    with pytest.raises(ValueError, match="action list.*headline=guided"):
        value_policies(vm, policy, tok, NoActions(), cfg, eval_cfg, 0)
    assert any("headline must be one of guided, rerank" in p for p in ValueRLConfig(headline="best").validate())
    sampled = value_policies(vm, policy, tok, MazeLike(), ValueRLConfig(rerank_temperature=0.5, headline="rerank"),
                             eval_cfg, 0)
    assert list(sampled)[0] == "rerank T=0.5" and sampled["rerank T=0.5"].temperature == 0.5
    assert any("rerank_temperature must be >= 0" in p for p in ValueRLConfig(rerank_temperature=-1).validate())


def test_sampled_reranker_follows_softmax_of_scores_and_argmax_at_zero(monkeypatch):
    """Temperature 0 takes the argmax; T > 0 samples each move with probability softmax(scores / T) (checked on
    fixed scores over 4,000 draws), reproducibly from the seed."""
    from lmrl.rollout.rerank import RerankPolicy

    vm, tok = value_model(n_q=2)
    actions = ["move up\n", "move left\n", "move down\n"]
    fixed = torch.tensor([[0.0, -1.0, -3.0]]).repeat(4000, 1)
    monkeypatch.setattr(RerankPolicy, "scores", lambda self, prompts: fixed[: len(prompts)])
    history = [tok("There is a wall above you.\n")["input_ids"]]
    monkeypatch.setattr("lmrl.rollout.rerank.prompt_ids", lambda h, *a: h)
    greedy = RerankPolicy(vm, tok, actions, 1, 64)
    assert set(greedy.act(history * 50)) == {"move up\n"}
    sampler = RerankPolicy(vm, tok, actions, 1, 64, seed=3, temperature=1.0)
    picks = sampler.act(history * 4000)
    freq = torch.tensor([picks.count(a) / 4000 for a in actions])
    assert torch.allclose(freq, torch.softmax(fixed[0], 0), atol=0.03), freq
    assert RerankPolicy(vm, tok, actions, 1, 64, seed=3, temperature=1.0).act(history * 4000) == picks
    with pytest.raises(ValueError, match="temperature must be >= 0"):
        RerankPolicy(vm, tok, actions, 1, 64, temperature=-0.1)


def test_reranker_scores_the_same_in_vocab_sized_chunks(monkeypatch):
    """Rows per reranking forward are capped by the vocabulary (GPT-2's made 100 maze rows 2 GB a Q head): the
    chunked scores equal one forward's, Q heads min'ed per taken token."""
    import lmrl.rollout.rerank as rerank

    vm, tok = value_model(n_q=2)
    reranker = rerank.RerankPolicy(vm, tok, ["move up\n", "move left\n"], 1, 64)
    prompts = [tok("The goal is at position 8, 6.\n")["input_ids"], tok("There is a wall above you.\n")["input_ids"]]
    whole = reranker.scores(prompts)
    calls = []
    original = rerank.RerankPolicy._score_rows
    monkeypatch.setattr(rerank.RerankPolicy, "_score_rows", lambda self, rows: calls.append(len(rows)) or original(self, rows))
    monkeypatch.setattr(rerank, "LOGIT_ELEMENTS", 1)  # one row per forward
    chunked = reranker.scores(prompts)
    assert calls == [1, 1, 1, 1] and torch.allclose(chunked, whole, atol=1e-5) and whole.shape == (2, 2)
