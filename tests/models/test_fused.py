import copy

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

from lmrl.models.fused import FastCausalLM, StackedGPT2, fast_lm, fusable
from lmrl.models.value import GuidedLM, ValueModel
from lmrl.rollout.sampler import left_pad


def gpt2(seed=0, **kw):
    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=50, n_layer=2, n_embd=32, n_head=4, n_positions=64, bos_token_id=0, eos_token_id=0, **kw)
    return GPT2LMHeadModel(cfg).eval()


def prefill_and_decode(model, steps=3):
    """Left-padded prompts, then `steps` single-token steps on the cache: logits of real positions."""
    ids, attn = left_pad([[1, 2, 3, 4, 5], [7, 8], [9]], 0)
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=ids, attention_mask=attn, position_ids=pos, use_cache=True)
    logits = [out.logits[attn.bool()]]
    past, nxt = out.past_key_values, pos[:, -1:] + 1
    for step in range(steps):
        tok = torch.tensor([[10 + step], [20 + step], [30 + step]])
        attn = torch.cat([attn, torch.ones(3, 1, dtype=torch.long)], dim=1)
        out = model(input_ids=tok, attention_mask=attn, position_ids=nxt, past_key_values=past, use_cache=True)
        logits.append(out.logits[:, -1])
        past, nxt = out.past_key_values, nxt + 1
    return torch.cat(logits)


@pytest.mark.parametrize("activation", ["gelu_new", "relu"])
@torch.no_grad()
def test_fast_lm_matches_hugging_face_with_left_padding_and_cache(activation):
    model = gpt2(activation_function=activation)
    torch.testing.assert_close(prefill_and_decode(FastCausalLM(model)), prefill_and_decode(model), atol=1e-5, rtol=1e-5)


@torch.no_grad()
def test_stacked_trunks_equal_separate_runs():
    a, b = gpt2(0), gpt2(1)
    ids, attn = left_pad([[1, 2, 3], [4]], 0)
    hidden, _ = StackedGPT2([a, b])(ids, attn)
    for k, lm in enumerate([a, b]):
        ref = lm.transformer(input_ids=ids, attention_mask=attn,
                             position_ids=(attn.cumsum(-1) - 1).clamp(min=0)).last_hidden_state
        torch.testing.assert_close(hidden[k][attn.bool()], ref[attn.bool()], atol=1e-5, rtol=1e-5)


@torch.no_grad()
def test_fused_guided_lm_equals_the_two_hugging_face_forwards():
    policy = gpt2(0)
    value = ValueModel(copy.deepcopy(policy), 2, True)
    for p in value.parameters():
        p.normal_(0, 0.1)
    guided = GuidedLM(value, policy, beta=4.0, min_prob=1e-3)
    assert guided.fused is not None
    fused = prefill_and_decode(guided)
    guided.fused = None
    plain = prefill_and_decode(guided)
    assert torch.equal(torch.isfinite(fused), torch.isfinite(plain))
    finite = torch.isfinite(plain)
    torch.testing.assert_close(fused[finite], plain[finite], atol=1e-4, rtol=1e-4)


def test_fast_lm_follows_training_updates():
    model = gpt2().train()
    fast = FastCausalLM(model)
    ids = torch.tensor([[1, 2, 3]])
    before = fast(ids).logits.detach().clone()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    model(input_ids=ids, labels=ids).loss.backward()
    opt.step()
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(fast(ids).logits, model(input_ids=ids).logits, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(before, fast(ids).logits)


def test_other_architectures_fall_back_to_hugging_face():
    llama = LlamaForCausalLM(LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                         num_attention_heads=4, num_key_value_heads=4))
    assert not fusable(llama) and fast_lm(llama) is llama
    deeper = GPT2LMHeadModel(GPT2Config(vocab_size=50, n_layer=3, n_embd=32, n_head=4, n_positions=64))
    assert not fusable(gpt2(), deeper)  # trunks must share one shape to stack
    value = ValueModel(copy.deepcopy(llama), 1, False)
    assert GuidedLM(value, llama, beta=1.0).fused is None
