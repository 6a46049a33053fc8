"""Batched KV-cache sampling: left padding changes nothing, rows stop at their newline."""

import torch

from lmrl.models.factory import build_tiny
from lmrl.rollout.policy import end_turn
from lmrl.rollout.sampler import newline_stop_mask, sample_turns

CORPUS = ["The goal is at position 8, 6.\n", "move up\n", "move left\n", "There is a wall above you.\n"] * 20


def tiny():
    torch.manual_seed(0)
    model, tok = build_tiny(lambda: iter(CORPUS), vocab_size=300, n_layer=2, n_embd=32, n_head=2, n_positions=128)
    return model.eval(), tok


def greedy_no_cache(model, prompt, stop, steps):
    """Greedy decoding that recomputes the whole prefix every token: the reference for cached sampling."""
    ids, out = list(prompt), []
    for _ in range(steps):
        x = torch.tensor([ids])
        nxt = int(model(x, attention_mask=torch.ones_like(x)).logits[0, -1].argmax())
        out.append(nxt)
        ids.append(nxt)
        if stop[nxt]:
            break
    return out


def assert_batched_greedy_matches_uncached(model, tok):
    """Left-padded prompts of different lengths, greedy with the KV cache == one by one without it."""
    stop = newline_stop_mask(tok, len(tok))
    prompts = [tok(t)["input_ids"] for t in ["The goal is", "move", "There is a wall above you.\nmove"]]
    batched = sample_turns(model, prompts, stop, tok.pad_token_id, max_new_tokens=6, temperature=0)
    for prompt, row in zip(prompts, batched):
        assert row == greedy_no_cache(model, prompt, stop.tolist(), 6)


def test_batched_cached_greedy_equals_one_by_one_uncached():
    model, tok = tiny()
    assert_batched_greedy_matches_uncached(model, tok)


def test_rows_stop_at_their_stop_token():
    model, tok = tiny()
    stop = newline_stop_mask(tok, len(tok))
    newline = tok("\n")["input_ids"][0]
    assert stop[newline] and stop[tok.eos_token_id] and stop.sum() >= 2
    # bias the model to emit a newline as its 3rd token for every row
    calls = []

    def hook(logits, step):
        calls.append(step)
        if step == 2:
            logits = logits.clone()
            logits[:, newline] = 1e4
        return logits

    rows = sample_turns(model, [[1, 2, 3], [4]], stop, tok.pad_token_id, 10, temperature=1.0,
                        generator=torch.Generator().manual_seed(0), logits_hook=hook)
    for row in rows:
        assert len(row) <= 3 and stop[row[-1]]
    assert max(calls) <= 2


def test_end_turn_keeps_exactly_one_newline():
    assert end_turn("move up\nmove down\n") == "move up\n"
    assert end_turn("move up") == "move up\n"
    assert end_turn("") == "\n"


def test_policy_prompt_leaves_room_for_the_turn():
    from lmrl.envs.base import Text
    from lmrl.rollout.policy import LMPolicy

    model, tok = tiny()  # 128 positions
    policy = LMPolicy(model, tok, history_window=None, max_input_tokens=1000, max_new_tokens=8)
    long_history = tuple(Text("There is a wall above you.\n", False) for _ in range(100))
    assert len(policy.prompt_ids(long_history)) == 120
    (action,) = policy.act([long_history])  # would index past the position table without the cap
    assert action.endswith("\n")
