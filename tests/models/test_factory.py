"""The tiny from-scratch model and tokenizer, and pretrained loading from a local directory."""

import pytest
import torch

from lmrl.models.factory import build_tiny, load_pretrained, model_max_length, train_tokenizer

CORPUS = ["The goal is at position 8, 6.\n", "move up\n", "move left\n", "There are walls above you, below you.\n"] * 20


def test_tokenizer_isolates_newlines_and_round_trips():
    tok = train_tokenizer(iter(CORPUS), vocab_size=300)
    for text in CORPUS[:4]:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert tok.decode(ids) == text
        assert tok.decode(ids[-1:]) == "\n"  # the newline is a token of its own
        assert all("\n" not in tok.decode([i]) for i in ids[:-1])
    assert tok.pad_token_id != tok.eos_token_id


def test_build_tiny_matches_its_tokenizer():
    model, tok = build_tiny(lambda: iter(CORPUS), vocab_size=300, n_layer=1, n_embd=32, n_head=2, n_positions=64)
    assert model.get_output_embeddings().weight.shape[0] == len(tok)
    assert model_max_length(model) == 64


def test_pretrained_loads_offline_from_a_saved_directory(tmp_path):
    model, tok = build_tiny(lambda: iter(CORPUS), vocab_size=300, n_layer=1, n_embd=32, n_head=2, n_positions=64)
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    loaded, loaded_tok = load_pretrained(str(tmp_path))
    ids = torch.tensor([tok("move up\n")["input_ids"]])
    model.eval(), loaded.eval()
    assert torch.allclose(model(ids).logits, loaded(ids).logits, atol=1e-6)
    assert loaded_tok("move up\n")["input_ids"] == tok("move up\n")["input_ids"]


def test_missing_pretrained_model_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(OSError, match="local directory"):
        load_pretrained(str(tmp_path / "nothing-here"))
