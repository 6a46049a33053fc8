"""No op mixes devices: one training step and one evaluation turn of every algorithm with the
model on a second device (the virtual device of `tests/device_check.py`: `meta` with real data).

A GPU cannot run here; this proves placement on CPU.  Every trainer is built as `lmrl.train`
builds it, trains one optimizer step (online algorithms: one round of two short episodes and
one update), and then each of its evaluation policies plays one turn — so the losses, the
samplers, the value-guided decoding, the reranker, rollouts and the rollout -> update hand-off
all run with the model's tensors on the device.
"""

from __future__ import annotations

import pytest
import torch

from lmrl.dist import TorchEngine
from tests.device_check import DEVICE, device_check, report, swapping_parameters
from tests.one_step import ALGOS, built, one_step_and_turn  # noqa: F401 (fixture)


@pytest.mark.parametrize("algo", ALGOS)
def test_torch_engine_keeps_every_op_on_the_device(algo, built, tmp_path):
    with device_check() as violations:
        engine = TorchEngine(device=str(DEVICE))
        one_step_and_turn(algo, engine, built, tmp_path)
    assert not violations, f"{algo}: ops mixing devices:\n{report(violations)}"


@pytest.fixture
def deepspeed_on_the_device(monkeypatch, process_group):
    """DeepSpeed's CPU accelerator names the virtual device, so ZeRO-2 places the model (and its own
    buffers) there."""
    from lmrl.deepspeed_engine import _deepspeed

    deepspeed = _deepspeed()
    accelerator = deepspeed.accelerator.get_accelerator()
    monkeypatch.setattr(accelerator, "device_name", lambda device_index=None: str(DEVICE))
    monkeypatch.setattr(accelerator, "current_device_name", lambda: str(DEVICE))
    initialize = deepspeed.initialize

    def placed_first(model=None, **kwargs):
        """The model on the device before DeepSpeed keys its maps by (weakly referenced) parameters;
        its own `.to(device)` is then a no-op."""
        model.to(DEVICE)
        with swapping_parameters(False):
            return initialize(model=model, **kwargs)

    monkeypatch.setattr(deepspeed, "initialize", placed_first)


@pytest.mark.parametrize("algo", ALGOS)
def test_zero2_keeps_every_op_on_the_device(algo, built, tmp_path, deepspeed_on_the_device):
    from lmrl.deepspeed_engine import DeepSpeedEngine

    with device_check() as violations:
        engine = DeepSpeedEngine(stage=2)
        assert engine.device == DEVICE
        one_step_and_turn(algo, engine, built, tmp_path)
    assert not violations, f"{algo} (ZeRO-2): ops mixing devices:\n{report(violations)}"


def test_ppo_value_head_lr_and_health_under_zero2(built, tmp_path, deepspeed_on_the_device):
    """`algo.value_lr`: the value head's parameter groups reach DeepSpeed's optimizer with their own rate, on the
    device; the run reports the head's explained variance."""
    from lmrl.deepspeed_engine import DeepSpeedEngine

    with device_check() as violations:
        engine = DeepSpeedEngine(stage=2)
        trainer, metrics, _ = one_step_and_turn("ppo", engine, built, tmp_path, "algo.value_lr=0.5")
    assert not violations, f"ppo (ZeRO-2, value_lr): ops mixing devices:\n{report(violations)}"
    # ZeRO keeps flat partitions per group, so the groups are told apart by their rates
    assert {g["initial_lr"] for g in engine.optimizer.param_groups} == {0.5, trainer.cfg.lr}
    assert "critic/explained_variance" in metrics


def test_the_check_catches_what_a_gpu_would_refuse():
    """Each line mixes devices the way the bugs found on an H100 did; the check must flag every one,
    and leave correct code alone."""
    from lmrl.algos.value_losses import gather_tokens
    from lmrl.rollout.sampler import pick

    with device_check() as violations:
        table = torch.randn(5, 3, device=DEVICE)
        host_ids = torch.tensor([[0, 2, 1]])
        gather_tokens(table[None], host_ids)  # a host index into device values (MC, PPO)
        torch.nn.functional.embedding(host_ids, table)  # a host batch into a device model (ILQL's target)
        table[torch.tensor([True, False, True, False, True])]  # a host mask
        pick(table, 1.0, torch.Generator().manual_seed(0))  # a host generator for device logits
        flagged = len(violations)
        gather_tokens(table[None], host_ids.to(DEVICE))
        pick(table, 1.0, torch.Generator(device=DEVICE).manual_seed(0))
        table * torch.tensor(2.0)  # a 0-dim host scalar is fine on a GPU too
        model, host_model = torch.nn.Linear(3, 2).to(DEVICE), torch.nn.Linear(3, 2)
        model.load_state_dict(host_model.state_dict())  # host weights copied in: a transfer, as on a GPU
        assert model.weight.device == DEVICE and torch.equal(model.weight.cpu(), host_model.weight)
    assert flagged == 4, report(violations)
    assert len(violations) == 4, report(violations)
    assert "gather" in violations[0].op and "multinomial" in violations[3].op
    assert violations[0].where.startswith("lmrl/algos/value_losses.py")
