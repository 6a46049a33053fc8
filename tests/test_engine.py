"""The plain-torch engine's step: fused AdamW, the non-finite guard without host syncs, fp16 loss
scaling, and the opt-in `torch.compile`."""

from __future__ import annotations

import pytest
import torch

from lmrl.dist import OptimConfig, TorchEngine, native_bf16, resolve_precision


def linear_engine(**kwargs) -> TorchEngine:
    torch.manual_seed(0)
    engine = TorchEngine(device="cpu", **kwargs)
    engine.setup(torch.nn.Linear(4, 2), OptimConfig(lr=0.1, total_steps=10))
    return engine


def one_step(engine: TorchEngine, scale: float) -> dict:
    x = torch.ones(3, 4)
    loss = (engine.forward(input=x) * scale).float().pow(2).mean()
    engine.backward(loss)
    return engine.step()


def weights(engine: TorchEngine) -> list[torch.Tensor]:
    return [p.detach().clone() for p in engine.model.parameters()]


def test_optimizer_is_fused_on_cpu():
    assert linear_engine().optimizer.defaults["fused"] is True


def test_a_nonfinite_step_is_skipped_on_the_device_and_counted():
    engine = linear_engine()
    before = weights(engine)
    stats = one_step(engine, float("nan"))
    assert torch.is_tensor(stats["grad_norm"]) and not torch.isfinite(stats["grad_norm"])
    assert all(torch.equal(a, b) for a, b in zip(weights(engine), before)), "a NaN step reached the weights"
    assert engine.optimizer.state[engine.model.weight]["step"].item() == 0  # the moments were left alone too
    assert engine.check_steps() == 1
    one_step(engine, 1.0)
    assert not all(torch.equal(a, b) for a, b in zip(weights(engine), before)), "a finite step must still train"
    assert engine.check_steps() == 1


def test_bc_trainer_stops_at_the_next_check_after_a_skipped_step():
    from lmrl.algos.bc import BCTrainer

    trainer = BCTrainer.__new__(BCTrainer)
    trainer.engine, trainer.checkpointer = linear_engine(), None
    trainer.cfg = type("Cfg", (), {"name": "bc"})()
    trainer.check_steps(torch.tensor(1.0), 3, {})  # nothing skipped: nothing happens
    one_step(trainer.engine, float("inf"))
    with pytest.raises(FloatingPointError, match=r"gradient in 1 step\(s\) up to step 4"):
        trainer.check_steps(torch.tensor(1.0), 4, {})


def test_fp16_overflow_is_skipped_by_the_scaler_not_counted_as_an_error():
    engine = linear_engine(precision="fp16")
    before, scale = weights(engine), engine.scaler.get_scale()
    one_step(engine, 1e6)  # loss ~1e12 x 2^16 overflows fp16 gradients
    assert all(torch.equal(a, b) for a, b in zip(weights(engine), before))
    assert engine.scaler.get_scale() == scale / 2 and engine.check_steps() == 0


@pytest.mark.slow
def test_compiled_engine_matches_eager():
    """`hardware.engine.compile=true`: the same losses as eager over a few steps (compiling on a CPU
    takes ~30 s, hence the slow tier)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    def run(compile: bool) -> list[float]:
        torch.manual_seed(0)
        model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64, n_positions=32,
                                           bos_token_id=0, eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0,
                                           attn_pdrop=0.0))  # dropout draws differ between the two
        engine = TorchEngine(device="cpu", compile=compile)
        engine.setup(model, OptimConfig(lr=1e-2, total_steps=10))
        losses = []
        for length in (12, 16, 12):  # varying lengths: dynamic shapes, no recompile per length
            ids = torch.arange(2 * length).view(2, length) % 64
            loss = engine.forward(input_ids=ids, labels=ids).loss
            engine.backward(loss)
            engine.step()
            losses.append(loss.item())
        return losses

    assert run(True) == pytest.approx(run(False), rel=1e-4)


def test_auto_precision_is_bf16_only_where_the_cpu_computes_it(tmp_path):
    with_bf16, without = tmp_path / "with", tmp_path / "without"
    with_bf16.write_text("flags\t\t: fpu sse avx512f avx512_bf16 amx_tile\n")
    without.write_text("flags\t\t: fpu sse avx2 avx512f\n")
    cpu = torch.device("cpu")
    assert native_bf16(cpu, with_bf16) and not native_bf16(cpu, without)
    assert not native_bf16(cpu, tmp_path / "absent")  # no flags to read: fp32
    assert resolve_precision("fp16", cpu) == "fp16" and resolve_precision("fp32", cpu) == "fp32"
    engine = TorchEngine(device="cpu", precision="auto")
    assert engine.precision == ("bf16" if native_bf16(cpu) else "fp32")
    with pytest.raises(ValueError, match="fp32, bf16, fp16 or auto"):
        TorchEngine(device="cpu", precision="half")
