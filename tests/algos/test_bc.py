"""BC loss by hand, the %BC filter, and typed-config validation."""

import math

import pytest
import torch
from omegaconf import OmegaConf

from lmrl.algos.base import ConfigError, typed_config
from lmrl.algos.bc import BCConfig, FilteredBCConfig, bc_loss, top_fraction
from lmrl.envs.base import Episode, Text


def test_bc_loss_counts_only_agent_tokens():
    # vocab 2; uniform logits -> NLL log 2 everywhere; a confident wrong logit on an env token must not count
    logits = torch.zeros(1, 4, 2)
    logits[0, 0] = torch.tensor([10.0, -10.0])  # predicts token 1 (an env token, label 1): huge loss if counted
    input_ids = torch.tensor([[0, 1, 0, 1]])
    action_mask = torch.tensor([[0, 0, 1, 1]])
    attention = torch.ones(1, 4, dtype=torch.long)
    assert bc_loss(logits, input_ids, action_mask, attention).item() == pytest.approx(math.log(2))


def test_bc_loss_ignores_padding():
    logits = torch.zeros(1, 3, 2)
    logits[0, 1] = torch.tensor([-10.0, 10.0])
    input_ids = torch.tensor([[0, 1, 0]])
    action_mask = torch.tensor([[1, 1, 1]])
    attention = torch.tensor([[1, 1, 0]])  # position 2 is padding
    assert bc_loss(logits, input_ids, action_mask, attention).item() == pytest.approx(math.log(2))


def _ep(ret):
    return Episode([Text("o", False), Text("a", True)], [0.0, ret], True, {})


def test_top_fraction_uses_the_percentile_threshold():
    eps = [_ep(r) for r in range(10)]  # returns 0..9
    kept = top_fraction(eps, 0.2)
    assert sorted(e.total_return for e in kept) == [8.0, 9.0]
    assert len(top_fraction(eps, 1.0)) == 10


def test_typed_config_accepts_and_rejects():
    cfg = typed_config(FilteredBCConfig, OmegaConf.create({"_target_": "x", "lr": 3e-4, "top_fraction": 0.3}))
    assert isinstance(cfg, FilteredBCConfig) and cfg.lr == 3e-4 and cfg.steps == BCConfig.steps
    with pytest.raises(ConfigError, match="top_fraction"):
        typed_config(FilteredBCConfig, OmegaConf.create({"top_fraction": 1.5}))
    with pytest.raises(ConfigError, match="lr"):
        typed_config(BCConfig, OmegaConf.create({"lr": "fast"}))
    with pytest.raises(ConfigError, match="no_such_key"):
        typed_config(BCConfig, OmegaConf.create({"no_such_key": 1}))
