"""One shared prefill, many continuations: the repeated KV cache gives what separate passes give."""

import pytest
import torch

from lmrl.models.fused import fast_lm
from lmrl.models.value import ValueModel
from lmrl.rollout.candidates import continuation_logprobs, continue_prefixes, sample_candidates
from lmrl.rollout.sampler import newline_stop_mask, sample_turns
from tests.rollout.test_sampler import tiny

PROMPTS = ["The goal is at", "move", "There is a wall above you.\nmove"]
CONTINUATIONS = [" up\n", " left\n", "move down\n"]


@pytest.mark.parametrize("fused", [True, False])
def test_greedy_candidates_equal_separate_greedy_turns(fused):
    model, tok = tiny()
    model = fast_lm(model) if fused else model
    stop = newline_stop_mask(tok, len(tok))
    prompts = [tok(t)["input_ids"] for t in PROMPTS]
    rows = sample_candidates(model, prompts, 3, stop, tok.pad_token_id, 6, temperature=0)
    alone = sample_turns(model, prompts, stop, tok.pad_token_id, 6, temperature=0)
    assert rows == [[row] * 3 for row in alone]


def test_sampled_candidates_differ_and_stop_at_their_newline():
    model, tok = tiny()
    stop = newline_stop_mask(tok, len(tok))
    prompts = [tok(t)["input_ids"] for t in PROMPTS]
    rows = sample_candidates(model, prompts, 8, stop, tok.pad_token_id, 5, 1.0, torch.Generator().manual_seed(0))
    assert [len(r) for r in rows] == [8, 8, 8]
    assert all(len(c) == 5 or stop[c[-1]] for r in rows for c in r)
    assert any(len({tuple(c) for c in r}) > 1 for r in rows)


def teacher_forced(model, prefix: list[int], cont: list[int]) -> torch.Tensor:
    """log p of the continuation's tokens from one forward pass over prefix + continuation."""
    ids = torch.tensor([prefix + cont])
    logp = torch.log_softmax(model(ids, attention_mask=torch.ones_like(ids)).logits[0].float(), dim=-1)
    return torch.stack([logp[len(prefix) - 1 + j, t] for j, t in enumerate(cont)])


@pytest.mark.parametrize("fused", [True, False])
def test_continuation_logprobs_equal_a_full_forward(fused):
    model, tok = tiny()
    scorer = fast_lm(model) if fused else model
    prefixes = [tok(t)["input_ids"] for t in PROMPTS]
    conts = [tok(c)["input_ids"] for c in CONTINUATIONS]
    owner = [p for p in range(len(prefixes)) for _ in conts]  # every continuation after every prefix
    first, out, ids, mask = continue_prefixes(scorer, prefixes, owner, conts * len(prefixes), tok.pad_token_id)
    logp = continuation_logprobs(first, out.logits, ids)
    with torch.no_grad():
        for r, p in enumerate(owner):
            cont = conts[r % len(conts)]
            assert mask[r].sum() == len(cont)
            torch.testing.assert_close(logp[r, : len(cont)], teacher_forced(model, prefixes[p], cont), atol=1e-4, rtol=0)


def test_a_value_head_reads_each_continuation_after_its_prefix():
    model, tok = tiny()
    value = ValueModel(model, 0, True).eval()
    torch.nn.init.normal_(value.v_head.out.weight)
    prefixes = [tok(t)["input_ids"] for t in PROMPTS]
    cont = tok(CONTINUATIONS[0])["input_ids"]
    _, out, _, mask = continue_prefixes(value, prefixes, [0, 1, 2], [cont] * 3, tok.pad_token_id)
    with torch.no_grad():
        for r, p in enumerate(prefixes):
            ids = torch.tensor([p + cont])
            full = value(ids, torch.ones_like(ids)).v[0, -1]
            torch.testing.assert_close(out.v[r, len(cont) - 1], full, atol=1e-4, rtol=0)


@pytest.mark.parametrize("fused", [True, False])
def test_a_full_length_prefix_with_a_short_continuation_beside_a_long_one(fused):
    """Padding after a short continuation must not push positions past the model's: a prefix that leaves room for its
    own one-token continuation only, scored in one pass with a short prefix and a long continuation (Car Dealer)."""
    model, tok = tiny()
    scorer = fast_lm(model) if fused else model
    limit = model.config.n_positions
    short, long = tok(" up\n")["input_ids"][:1], tok("move down move left\n")["input_ids"]
    assert len(long) > 2
    full = (tok(PROMPTS[2])["input_ids"] * limit)[: limit - len(short)]
    prefixes, conts = [full, tok(PROMPTS[0])["input_ids"]], [short, long]
    first, out, ids, mask = continue_prefixes(scorer, prefixes, [0, 1], conts, tok.pad_token_id)
    logp = continuation_logprobs(first, out.logits, ids)
    with torch.no_grad():
        for r in range(2):
            torch.testing.assert_close(logp[r, : len(conts[r])], teacher_forced(model, prefixes[r], conts[r]),
                                       atol=1e-4, rtol=0)
