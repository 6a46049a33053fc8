"""LoRA adapters (`model.lora`, lmrl/models/lora.py): each trainer that supports them takes one step on a locally
saved pretrained GPT-2 (tiny: the one-step fixture's model, saved) on the torch engine and under a one-process
DeepSpeed ZeRO-2, and only the adapters (and value heads) move; the merged export and the adapters round-trip into
`lmrl.evaluate`'s loader; a checkpoint keeps what trains and resumes from it; bad settings fail at once."""

from __future__ import annotations

import json

import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from omegaconf import OmegaConf

from lmrl.algos.base import ConfigError, build_trainer
from lmrl.checkpoint import Checkpointer
from lmrl.dist import TorchEngine
from lmrl.task import Task
from lmrl.tracking import NullLogger
from tests.e2e import ROOT
from tests.one_step import SMALL, built  # noqa: F401 (fixture)

LORA = ["model=gpt2", "model.lora.r=4", "model.lora.alpha=8", "model.lora.target_modules=[c_attn]"]
TRAINERS = ["bc", "filtered_bc", "mc", "ilql", "ppo", "online_filtered_bc"]
RL = {"mc", "ilql", "ppo", "online_filtered_bc"}
FAST = ["task.eval.max_starts=1", "smoke.critic_episodes=2", "smoke.rerank=false", "smoke.steps=2"]
# Per trainer: MC/ILQL train two steps (their heads start at zero output weights: the first step moves only them),
# measure the critic on few held-out episodes, skip the reranker; BC steps far enough that its adapters matter.
EXTRA = {"mc": FAST, "ilql": FAST, "bc": ["algo.lr=0.05"]}
# Parameters that train fully beside the adapters: the value models' heads.
HEADS = ("q_heads.", "v_head.")


def compose_lora(start, *overrides: str):
    """The one-step config (tests/one_step.py) on `model=gpt2` from the saved tiny model, with LoRA."""
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        return compose("train", overrides=[*(o for o in SMALL if not o.startswith("model")), *LORA,
                                           f"model.path={start}", *overrides])


def build(algo: str, engine, built, run_dir, *overrides: str, checkpointer=None):
    """The trainer `lmrl.train` builds for `algo` with LoRA (RL algorithms start from the saved model)."""
    task, _, _, start = built
    cfg = compose_lora(start, f"algo={algo}", *([f"algo.init_from={start}"] if algo in RL else []), *overrides)
    task = Task(cfg.task, task.cache_dir)
    model, tokenizer = instantiate(cfg.model, corpus=task.texts)
    return build_trainer(cfg.algo, task=task, engine=engine, model=model, tokenizer=tokenizer, logger=NullLogger(),
                         seed=0, run_dir=run_dir, checkpointer=checkpointer)


def named(trainer) -> dict[str, torch.Tensor]:
    return {n: p.detach().float().clone() for n, p in trainer.engine.unwrap().named_parameters()}


def check_only_adapters_trained(trainer, before: dict) -> None:
    after = named(trainer)
    trained = {n for n in after if not torch.equal(after[n], before[n])}
    adapters = {n for n in after if ".lora_" in n or n.startswith(HEADS)}
    assert trained, "one step changed nothing"
    assert trained <= adapters, f"frozen weights moved: {sorted(trained - adapters)[:4]}"
    assert any(".lora_B." in n for n in trained), "no adapter moved"
    assert all(p.requires_grad == (n in adapters) for n, p in trainer.engine.unwrap().named_parameters())


def one_step(algo: str, engine, built, run_dir, checkpointer=None) -> tuple[object, dict]:
    """(trainer, its weights before) after one step (MC, ILQL: two) and one turn of each evaluation policy."""
    trainer = build(algo, engine, built, run_dir, *EXTRA.get(algo, []), checkpointer=checkpointer)
    before = named(trainer)
    trainer.fit()
    task = trainer.task
    history, _ = task.make_env().reset(seed=0)
    for name, policy in trainer.policies(task.cfg.eval, seed=0).items():
        assert isinstance(policy.act([history])[0], str), name
    return trainer, before


@pytest.fixture(scope="module")
def torch_runs(built, tmp_path_factory):
    """`run(algo)`: that trainer's `one_step` on the torch engine, made once for every test that looks at it (ILQL
    checkpoints after each step)."""
    runs = {}

    def run(algo: str):
        if algo not in runs:
            run_dir = tmp_path_factory.mktemp(algo)
            checkpointer = Checkpointer(run_dir / "checkpoints", every=1) if algo == "ilql" else None
            runs[algo] = one_step(algo, TorchEngine(device="cpu"), built, run_dir, checkpointer)
        return runs[algo]

    return run


@pytest.mark.parametrize("algo", TRAINERS)
def test_one_step_trains_only_the_adapters_and_heads(algo, torch_runs):
    check_only_adapters_trained(*torch_runs(algo))


@pytest.mark.parametrize("algo", TRAINERS)
def test_one_step_under_zero2(algo, built, tmp_path, process_group):
    """ZeRO-2 (one process, gloo): the same; ILQL also checkpoints, leaving the frozen base out, and a fresh
    trainer resumes from it."""
    from lmrl.deepspeed_engine import DeepSpeedEngine

    checkpointer = Checkpointer(tmp_path / "checkpoints", every=1) if algo == "ilql" else None
    trainer, before = one_step(algo, DeepSpeedEngine(stage=2), built, tmp_path, checkpointer)
    check_only_adapters_trained(trainer, before)
    if checkpointer is None:
        return
    saved = torch.load(checkpointer.latest() / "deepspeed" / "mp_rank_00_model_states.pt", weights_only=False)
    tied = {n for n in saved["module"] if n.endswith("lm_head.weight")}  # the output embedding, tied to the input's
    assert all(".lora_" in k or k.startswith(HEADS) for k in set(saved["module"]) - tied), sorted(saved["module"])[:4]
    again = build("ilql", DeepSpeedEngine(stage=2), built, tmp_path, *EXTRA["ilql"], checkpointer=checkpointer)
    again.restore()
    for a, b in zip(named(trainer).values(), named(again).values()):
        assert torch.equal(a, b)


def test_ppo_reference_is_the_base_with_adapters_off(torch_runs, built):
    """The KL reference shares the trunk's weights and ignores its adapters: after a step that moved them, the
    reference still gives the start's logits, and the policy no longer does."""
    from transformers import AutoModelForCausalLM

    trainer, _ = torch_runs("ppo")
    start = AutoModelForCausalLM.from_pretrained(built[3]).eval()
    ids = torch.tensor([built[2]("move up\n")["input_ids"]])
    with torch.no_grad():
        ref, policy = trainer.reference(input_ids=ids).logits, trainer.model.lm(input_ids=ids).logits
        assert torch.allclose(ref, start(input_ids=ids).logits, atol=1e-5)
        assert not torch.allclose(policy, ref, atol=1e-6)
    assert not list(trainer.reference.parameters())  # no copy of the weights


def test_export_is_the_merged_model_and_the_adapters_load_merged_or_not(torch_runs, built, tmp_path):
    """`save` writes the merged model (a plain save_pretrained dir) and `adapter/`; the evaluation loader reads
    both, and the three give the trained model's logits."""
    from lmrl.evaluation import load_policies
    from lmrl.models.factory import load_pretrained
    from lmrl.models.fused import fusable
    from lmrl.serve import TURN_END, load_served

    trainer, _ = torch_runs("bc")
    trainer.save(tmp_path / "export")
    adapter = tmp_path / "export" / "adapter"
    assert (tmp_path / "export" / "config.json").exists() and (adapter / "adapter_model.safetensors").exists()
    assert json.loads((adapter / "lmrl_lora.json").read_text())["base"]["path"] == str(built[3].resolve())
    live = trainer.engine.unwrap().eval()
    ids = torch.tensor([built[2]("move up\nmove left\n")["input_ids"]])
    with torch.no_grad():
        want = live(input_ids=ids).logits
        merged, _ = load_pretrained(str(tmp_path / "export"))
        unmerged, _ = load_pretrained(str(adapter), merge_lora=False)
        folded, _ = load_pretrained(str(adapter))
        with live.disable_adapter():
            assert not torch.allclose(live(input_ids=ids).logits, want, atol=1e-4)  # the adapters matter
        for model in (merged, unmerged, folded):
            assert torch.allclose(model.eval()(input_ids=ids).logits, want, atol=1e-4)
    assert hasattr(unmerged, "disable_adapter") and not hasattr(folded, "disable_adapter")
    # sampling never takes the fused GPT-2 path past the adapters (it reads the base weights alone)
    assert fusable(merged) and not fusable(live) and not fusable(unmerged)
    served = load_served(str(adapter), TorchEngine(device="cpu"))
    assert served.stop == TURN_END and not hasattr(served.model, "disable_adapter")
    task = trainer.task
    history, _ = task.make_env().reset(seed=0)
    for directory in (tmp_path / "export", adapter):
        _, policies = load_policies(directory, task, task.cfg.eval, seed=0)
        assert isinstance(policies["sample"].act([history])[0], str)


def test_checkpoint_keeps_what_trains_and_resumes(torch_runs, built, tmp_path):
    """ILQL: the engine's state holds the adapters and heads only, the Polyak target's file its own adapters and
    heads (it shares the base); a fresh trainer restored from them has the same trained weights and target."""
    trainer, _ = torch_runs("ilql")
    checkpointer = trainer.checkpointer
    latest = checkpointer.latest()
    saved = torch.load(latest / "engine.pt", weights_only=False)["model"]
    target = torch.load(latest / "target.pt", weights_only=False)
    for keys in (saved, target):
        assert keys and all(".lora_" in k or k.startswith(HEADS) for k in keys), sorted(keys)[:4]
    base = trainer.value.lm.get_base_model().transformer.wte.weight
    assert trainer.target.module.lm.get_base_model().transformer.wte.weight is base  # shared, not copied
    again = build("ilql", TorchEngine(device="cpu"), built, tmp_path, *EXTRA["ilql"], checkpointer=checkpointer)
    again.restore()
    for a, b in zip(named(trainer).values(), named(again).values()):
        assert torch.equal(a, b)
    for a, b in zip(trainer.target.parameters(), again.target.parameters()):
        assert torch.equal(a, b)


def test_a_lora_bc_stage_is_cached_apart_from_a_full_one(torch_runs):
    """RL runs reuse a BC stage by its key: a LoRA stage's names its adapters, a full fine-tuning stage's is as
    before LoRA existed."""
    from lmrl.algos.bc import bc_stage_key

    trainer, _ = torch_runs("bc")
    lora = trainer.engine.unwrap()
    key = bc_stage_key(trainer.cfg, trainer.task, lora, trainer.tokenizer, 0, "fp32")
    plain = bc_stage_key(trainer.cfg, trainer.task, lora.get_base_model(), trainer.tokenizer, 0, "fp32")
    assert key["lora"] == {"r": 4, "alpha": 8.0, "dropout": 0.0, "target_modules": ["c_attn"]}
    assert "lora" not in plain and {k: v for k, v in key.items() if k != "lora"} == plain


def test_bad_settings_and_unsupported_uses_fail_at_once(built, tmp_path):
    from lmrl.models.factory import build_tiny, load_pretrained

    start = built[3]
    for lora, message in [({"r": -1}, "r must be"), ({"r": 4, "alpha": 0}, "alpha"), ({"r": 4, "dropout": 1.0},
                          "dropout"), ({"r": 4, "target_modules": "c_attn"}, "target_modules"),
                          ({"r": 4, "rank": 3}, "unknown keys"), ({"r": 4, "target_modules": ["nope"]}, "nope"),
                          ({"r": 4, "target_modules": ["lm_head"]}, "tied")]:
        with pytest.raises(ValueError, match=message):
            load_pretrained(str(start), lora=lora)
    with pytest.raises(ValueError, match="from scratch"):
        build_tiny(lambda: iter(["move up\n"] * 20), vocab_size=300, n_layer=1, n_embd=32, n_head=2, lora={"r": 4})
    with pytest.raises(ConfigError, match="does not train LoRA"):
        build("group_pg", TorchEngine(device="cpu"), built, tmp_path, f"algo.init_from={start}")


def test_lora_off_leaves_the_config_hash_alone():
    """The `lora` node at its defaults is left out of the config hash (NEUTRAL_DEFAULTS): records made before it
    existed still match; turning it on changes the hash."""
    from lmrl.records import config_hash

    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        cfg = compose("train", overrides=["model=gpt2"])
        on = compose("train", overrides=["model=gpt2", "model.lora.r=8"])
    without = OmegaConf.to_container(cfg, resolve=True)
    del without["model"]["lora"]
    assert config_hash(cfg) == config_hash(without) != config_hash(on)


def test_bench_measures_both_modes_in_this_process():
    """`python -m lmrl.bench lora`'s measurement on a tiny shape: LoRA trains a small share and keeps a small
    optimizer state; both report speed and memory."""
    from lmrl.bench.lora import child

    shape = {"vocab_size": 64, "n_positions": 16, "n_layer": 1, "n_embd": 32, "n_head": 2}
    full, lora = (child(mode, steps=1, batch=1, length=8, shape=shape) for mode in ("full", "lora"))
    assert full["trainable_parameters"] == full["parameters"] and full["trainable_share"] == 1.0
    assert lora["trainable_parameters"] == 16 * (32 + 96)  # one block's c_attn: A [16 x 32] and B [96 x 16]
    assert lora["optimizer_state_gb"] < full["optimizer_state_gb"] / 5
    assert all(r["tokens_per_s"] > 0 and r["peak_rss_gb"] > 0 for r in (full, lora))


# The slow test's stand-in for a pretrained model: the tiny GPT-2 shape with embeddings initialised at a scale a
# pretrained model's have (GPT-2's default 0.02 gives logits too flat for a frozen head to ever be confident).
STAND_IN = {"n_layer": 2, "n_embd": 128, "n_head": 4, "initializer_range": 0.1}
# LoRA BC must beat the model it starts from by this many normalized points (both measured in the test).
LORA_BC_MARGIN = 100.0


@pytest.mark.slow
def test_lora_bc_on_maze_fo_beats_the_model_it_starts_from(tmp_path):
    """A saved model (random weights: no pretrained one can be downloaded) scored by `lmrl.evaluate`, then LoRA BC
    on maze FO from it (adapters on every linear layer; embeddings, norms and head frozen) scored by its run and, from
    its `checkpoint/adapter/`, by `lmrl.evaluate` again."""
    from transformers import GPT2LMHeadModel

    from lmrl.models.factory import build_tiny
    from tests.e2e import run_cli

    cache, start = tmp_path / "cache", tmp_path / "start"
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        task = Task(compose("train", overrides=["task=maze_fo"]).task, cache)
    tiny, tokenizer = build_tiny(task.texts, n_layer=STAND_IN["n_layer"], n_embd=STAND_IN["n_embd"],
                                 n_head=STAND_IN["n_head"])
    tiny.config.initializer_range = STAND_IN["initializer_range"]
    torch.manual_seed(0)
    GPT2LMHeadModel(tiny.config).save_pretrained(start)
    tokenizer.save_pretrained(start)
    eps = "task.eval.episodes_per_start=2"
    before = run_cli("lmrl.evaluate", [f"checkpoint={start}", "task=maze_fo", eps], tmp_path / "before", cache)
    lora = ["model=gpt2", f"model.path={start}", "model.lora.r=16", "model.lora.alpha=32",
            "model.lora.target_modules=[c_attn,c_proj,c_fc]"]
    run = run_cli("lmrl.train", ["task=maze_fo", "algo=bc", "algo.steps=150", "algo.lr=1e-2", eps, *lora],
                  tmp_path / "bc", cache, timeout=1200)
    adapter = run_cli("lmrl.evaluate", [f"checkpoint={tmp_path / 'bc' / 'checkpoint' / 'adapter'}", "task=maze_fo",
                                        eps], tmp_path / "after", cache)
    print(f"LoRA BC {run['normalized_score']:.1f} (from its adapters {adapter['normalized_score']:.1f}) vs its start "
          f"{before['normalized_score']:.1f}; {run['model/trainable']} of {run['model/parameters']} parameters trained")
    assert run["model/trainable"] < run["model/parameters"] / 5
    assert run["normalized_score"] >= before["normalized_score"] + LORA_BC_MARGIN
    assert adapter["normalized_score"] >= before["normalized_score"] + LORA_BC_MARGIN


def test_the_python_example_of_the_lora_page_runs():
    import re

    page = (ROOT / "docs" / "interop" / "lora.md").read_text()
    blocks = re.findall(r"^```python\n(.*?)^```", page, re.S | re.M)
    assert blocks
    for block in blocks:
        exec(compile(block, "docs/interop/lora.md", "exec"), {})  # noqa: S102 - the page's own example
