"""LoRA adapters (peft) on a pretrained causal LM: its weights freeze and rank-r adapters train.

`model.lora.r=16 model.lora.alpha=32 model.lora.target_modules=[c_attn]` turns it on for a pretrained model
(`model=gpt2`, `model=smollm2`).  The model factory wraps the loaded LM in `LoraLM` (a peft
`PeftModelForCausalLM`); an RL trainer wraps the trunk it loads from its BC stage the same way, with fresh adapters
(`lmrl.models.factory.with_lora`), so RL adapts the BC policy.  Value heads (MC / ILQL's Q and V, PPO's V) are new
modules and train fully.  Frozen companions stay exact without a second copy of the base: PPO's KL reference is the
trunk with its adapters switched off (`AdaptersOff`: the base *is* the BC policy RL started from), ILQL's Polyak
target shares the value model's frozen base and copies only what trains.

On disk, `LoraLM.save_pretrained(dir)` writes the merged weights (W + B A alpha / r) as a plain `save_pretrained`
model, which everything that loads a model reads as usual (RL stages, `lmrl.evaluate`, `lmrl.serve`,
`from_pretrained`), and the adapters alone in `dir/adapter/` (peft's layout, plus `lmrl_lora.json` naming the base
they apply to), which `load_pretrained` loads onto that base, merged or not (`load_adapter`).  Training checkpoints
hold only what trains: the engines leave frozen parameters out (`lmrl.dist.trainable_state`).

peft is imported here only: code elsewhere asks `lora_settings` of a model, which needs no import.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

try:
    from peft import LoraConfig, PeftModel, PeftModelForCausalLM
except ImportError as e:  # an install without the extra still runs everything but LoRA
    raise ImportError("model.lora needs peft: pip install 'lmrl[interop]'") from e

# The adapter layout's file naming the base model (beside peft's adapter_config.json).
BASE_FILE = "lmrl_lora.json"
ADAPTER_DIR = "adapter"


@dataclass(frozen=True)
class LoraSettings:
    """`model.lora`: rank `r` (0 = off), scaling `alpha` (updates scale by alpha / r), `dropout` on the adapters'
    input, and the `target_modules` to adapt (None = peft's default for the architecture: GPT-2's `c_attn`,
    Llama's `q_proj` and `v_proj`)."""

    r: int = 0
    alpha: float = 16.0
    dropout: float = 0.0
    target_modules: tuple[str, ...] | None = None

    @classmethod
    def from_config(cls, node: Mapping) -> "LoraSettings":
        """Settings from a config node (`model.lora`); a `ValueError` naming the key for a bad value."""
        node = dict(node)
        unknown = set(node) - {"r", "alpha", "dropout", "target_modules"}
        if unknown:
            raise ValueError(f"model.lora: unknown keys {sorted(unknown)} (valid: r, alpha, dropout, target_modules)")
        r, alpha, dropout = node.get("r", 0), node.get("alpha", 16.0), node.get("dropout", 0.0)
        targets = node.get("target_modules")
        if isinstance(r, bool) or not isinstance(r, int) or r < 0:
            raise ValueError(f"model.lora.r must be an integer >= 0 (0 = off), got {r!r}")
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not alpha > 0:
            raise ValueError(f"model.lora.alpha must be > 0, got {alpha!r}")
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
            raise ValueError(f"model.lora.dropout must be in [0, 1), got {dropout!r}")
        if targets is not None:
            if isinstance(targets, str) or not all(isinstance(t, str) and t for t in targets) or not len(targets):
                raise ValueError(f"model.lora.target_modules must be a non-empty list of module names or null, "
                                 f"got {targets!r}")
            targets = tuple(targets)
        return cls(r, float(alpha), float(dropout), targets)

    @property
    def enabled(self) -> bool:
        """Whether adapters are trained (r > 0)."""
        return self.r > 0

    def peft_config(self) -> LoraConfig:
        """peft's config for these settings (a causal LM, no trained biases)."""
        targets = list(self.target_modules) if self.target_modules is not None else None
        return LoraConfig(r=self.r, lora_alpha=self.alpha, lora_dropout=self.dropout, target_modules=targets,
                          bias="none", task_type="CAUSAL_LM")

    def as_dict(self) -> dict:
        """Plain values (a stage's cache key, `lmrl_lora.json`)."""
        out = asdict(self)
        out["target_modules"] = list(self.target_modules) if self.target_modules is not None else None
        return out


class LoraLM(PeftModelForCausalLM):
    """A causal LM with LoRA adapters: `lm`'s own weights frozen, the adapters trainable.  `base` says where `lm`
    comes from (`{"path": ..., "dtype": ..., "gguf_file": ...}`, what `load_pretrained` takes), written beside the
    adapters so they can be loaded without this run.  It forwards, samples and trains like the LM it wraps;
    `save_pretrained` writes the merged model and the adapters (module docstring)."""

    def __init__(self, lm: nn.Module, settings: LoraSettings, base: dict):
        if not settings.enabled:
            raise ValueError("LoraLM needs model.lora.r > 0")
        lm.requires_grad_(False)
        try:
            super().__init__(lm, settings.peft_config())
        except ValueError as e:  # e.g. target modules the architecture does not have
            raise ValueError(f"model.lora={settings.as_dict()}: {e}") from e
        self.lora_settings, self.lora_base = settings, dict(base)
        check_untied(self.get_base_model())

    def merged_state_dict(self) -> dict[str, torch.Tensor]:
        """The wrapped LM's state dict with every adapter folded into its layer's weight (W + delta), under the
        LM's own key names: a plain model's weights.  Nothing is modified (the adapters keep training)."""
        lm = self.get_base_model()
        adapted = {name: module for name, module in lm.named_modules()
                   if hasattr(module, "base_layer") and hasattr(module, "get_delta_weight")}
        state = {}
        with torch.no_grad():
            for key, value in lm.state_dict().items():
                if ".lora_" in key:
                    continue  # the adapters' own tensors: folded in below
                state[key.replace(".base_layer.", ".")] = value.detach()
            for name, module in adapted.items():
                weight = module.base_layer.weight.detach()
                for adapter in module.active_adapters:
                    weight = weight + module.get_delta_weight(adapter).to(weight.dtype)
                state[f"{name}.weight"] = weight
        return state

    def save_pretrained(self, save_directory, **kwargs) -> None:
        """The merged model as a `save_pretrained` directory, and the adapters in its `adapter/` (peft's layout and
        `lmrl_lora.json`, the base they apply to and the settings)."""
        directory = Path(save_directory)
        self.get_base_model().save_pretrained(directory, state_dict=self.merged_state_dict(), **kwargs)
        save_adapter(self, directory / ADAPTER_DIR)


def check_untied(lm: nn.Module) -> None:
    """Refuse adapters on a weight another module shares (GPT-2's token embeddings and LM head): the merged export
    would fold the update into both, while training applies it to one."""
    names: dict[int, list[str]] = {}
    for name, param in lm.named_parameters(remove_duplicate=False):
        names.setdefault(id(param), []).append(name)
    for name, module in lm.named_modules():
        weight = getattr(getattr(module, "base_layer", None), "weight", None)
        if weight is not None and len(names.get(id(weight), [])) > 1:
            raise ValueError(f"model.lora.target_modules: {name} shares its weight with "
                             f"{[n for n in names[id(weight)] if not n.startswith(name + '.')]} (tied embeddings); "
                             "adapt other modules")


def save_adapter(model: LoraLM, directory: Path) -> None:
    """The adapters alone (peft's `adapter_config.json` and `adapter_model.safetensors`) and `lmrl_lora.json`."""
    PeftModelForCausalLM.save_pretrained(model, str(directory))
    (directory / BASE_FILE).write_text(json.dumps({"base": model.lora_base, "lora": model.lora_settings.as_dict()},
                                                  indent=2))


def adapter_base(directory: str | Path) -> dict:
    """What an adapter directory's base model is (`load_pretrained`'s arguments: `path`, `dtype`, `gguf_file`):
    `lmrl_lora.json`'s, else peft's `base_model_name_or_path`."""
    directory = Path(directory)
    if (directory / BASE_FILE).exists():
        base = json.loads((directory / BASE_FILE).read_text())["base"]
    else:
        base = {"path": json.loads((directory / "adapter_config.json").read_text()).get("base_model_name_or_path")}
    if not base.get("path"):
        raise ValueError(f"{directory}: the adapters do not name their base model ({BASE_FILE} or adapter_config.json)")
    return base


def load_adapter(lm: nn.Module, directory: str | Path, merge: bool = True) -> nn.Module:
    """The adapters in `directory` applied to their base `lm` (loaded from `adapter_base`), and with `merge` folded
    into its weights (a plain model, as fast as the base); without, a peft model that runs them beside the base."""
    model = PeftModel.from_pretrained(lm, str(directory)).eval()
    return model.merge_and_unload() if merge else model


class AdaptersOff(nn.Module):
    """`lm` (a `LoraLM`) run with its adapters switched off: the model it adapts, with no copy of its weights.
    PPO's KL reference: its trunk's base is the BC policy RL started from.  `lm` is not a submodule, so moving or
    freezing this module leaves the trained model alone."""

    def __init__(self, lm: LoraLM):
        super().__init__()
        self.__dict__["lm"] = lm  # not registered: no parameters of its own

    def forward(self, **inputs):
        """The base model's forward (the LM's outputs, adapters off)."""
        with self.lm.disable_adapter():
            return self.lm(**inputs)
