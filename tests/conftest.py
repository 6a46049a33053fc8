"""Shared fixtures: a character-level tokenizer for hand-computed token indices."""

from __future__ import annotations

import pytest


class CharTokenizer:
    """One token per character (id = code point): makes token indices computable by hand."""

    pad_token_id = 0
    eos_token_id = None

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict:
        return {"input_ids": [ord(c) for c in text]}


@pytest.fixture
def char_tokenizer() -> CharTokenizer:
    return CharTokenizer()


@pytest.fixture(autouse=True, scope="session")
def _records_outside_the_repo(tmp_path_factory):
    """Runs (in-process and CLI children, which inherit the variable) write their JSON records to a
    temporary directory, not results/records/."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LMRL_RECORDS", str(tmp_path_factory.mktemp("records")))
        yield


@pytest.fixture(scope="session")
def process_group():
    """In-process DeepSpeed runs join a one-process gloo group; DeepSpeed keeps the group it joined, so
    the group lives for the session and is left once at the end."""
    from lmrl.dist import shutdown

    yield
    shutdown()
