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


@pytest.mark.parametrize("given, expected", [(None, "NO"), ("YES", "YES")])
def test_importing_lmrl_turns_hub_kernels_off_unless_the_user_did(given, expected):
    """transformers 5.x kernelizes every loaded model at .train()/.eval() with code fetched from the Hub; lmrl
    defaults that off (no route to the Hub at run time) and leaves an explicit choice alone."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "USE_HUB_KERNELS"}
    if given:
        env["USE_HUB_KERNELS"] = given
    code = "import os, lmrl; print(os.environ['USE_HUB_KERNELS'])"
    seen = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert seen.strip() == expected


def test_loaded_models_are_not_kernelized_and_train_on_any_device(tmp_path):
    """A model from `from_pretrained` switches train/eval on a device the Hub kernels do not know (`meta`)."""
    import lmrl  # noqa: F401  (sets the default before the load)

    model, tok = build_tiny(lambda: iter(CORPUS), vocab_size=300, n_layer=1, n_embd=32, n_head=2, n_positions=64)
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    loaded, _ = load_pretrained(str(tmp_path))
    assert not getattr(loaded, "use_kernels", False)
    loaded.to("meta").train()
    loaded.eval()


def test_missing_pretrained_model_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(OSError, match="local directory"):
        load_pretrained(str(tmp_path / "nothing-here"))
