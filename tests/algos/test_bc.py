"""BC loss by hand, the %BC filter, and typed-config validation."""

import math
from pathlib import Path

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


def test_top_fraction_keeps_ties_at_the_worst_return_unless_told_not_to():
    # 2 of 10 beat the worst return: the 70th percentile is the worst return, and >= keeps all ten (the original)
    eps = [_ep(-20.0)] * 8 + [_ep(-5.0), _ep(-3.0)]
    assert len(top_fraction(eps, 0.3)) == 10
    assert sorted(e.total_return for e in top_fraction(eps, 0.3, drop_worst=True)) == [-5.0, -3.0]
    assert top_fraction([_ep(-20.0)] * 4, 0.3, drop_worst=True) == []
    # with enough episodes above the worst, the percentile is above it and the option changes nothing
    spread = [_ep(r) for r in range(10)]
    assert top_fraction(spread, 0.3, drop_worst=True) == top_fraction(spread, 0.3)


def test_top_fraction_can_cap_the_ties_at_the_threshold():
    # PO maze's round: most fail at -101 (the step limit, valid moves only), one worse (invalid replies), two win: the
    # 70th percentile is -101, >= keeps 9 of 10, and drop_worst only drops the -104 (below the threshold anyway)
    eps = [_ep(-104.0)] + [_ep(-101.0)] * 7 + [_ep(-30.0), _ep(-20.0)]
    assert len(top_fraction(eps, 0.3)) == len(top_fraction(eps, 0.3, drop_worst=True)) == 9
    assert sorted(e.total_return for e in top_fraction(eps, 0.3, cap_ties=True)) == [-30.0, -20.0]
    # ties that keep no more than the fraction stay (3 of 10 above the threshold 6.3), and so do ties at the best
    # return (8 of 10 solved alike; a round where all fail alike): nothing better is there to imitate
    spread = [_ep(r) for r in range(10)]
    assert top_fraction(spread, 0.3, cap_ties=True) == top_fraction(spread, 0.3)
    assert len(top_fraction([_ep(0.0)] * 2 + [_ep(7.0)] * 8, 0.3, cap_ties=True)) == 8
    assert len(top_fraction([_ep(-101.0)] * 4, 0.3, cap_ties=True)) == 4


def test_typed_config_accepts_and_rejects():
    cfg = typed_config(FilteredBCConfig, OmegaConf.create({"_target_": "x", "lr": 3e-4, "top_fraction": 0.3}))
    assert isinstance(cfg, FilteredBCConfig) and cfg.lr == 3e-4 and cfg.steps == BCConfig.steps
    with pytest.raises(ConfigError, match="top_fraction"):
        typed_config(FilteredBCConfig, OmegaConf.create({"top_fraction": 1.5}))
    with pytest.raises(ConfigError, match="lr"):
        typed_config(BCConfig, OmegaConf.create({"lr": "fast"}))
    with pytest.raises(ConfigError, match="no_such_key"):
        typed_config(BCConfig, OmegaConf.create({"no_such_key": 1}))


def test_token_batches_bucket_lengths_within_the_budget():
    import numpy as np

    from lmrl.algos.bc import token_batches

    rng = np.random.default_rng(0)
    lengths = rng.integers(10, 200, size=2000)
    order = torch.randperm(2000, generator=torch.Generator().manual_seed(1)).tolist()
    batches = token_batches(order, lengths, 4096, torch.Generator().manual_seed(2))
    assert sorted(i for b in batches for i in b) == list(range(2000))  # every sequence once per epoch
    padded = [len(b) * max(lengths[b]) for b in batches]
    assert max(padded) <= 4096
    # neighbours in length: padding is a few percent, where random batches of the same count pad ~40%
    assert sum(lengths) / sum(padded) > 0.9
    assert token_batches(order, lengths, 4096, torch.Generator().manual_seed(2)) == batches
    assert token_batches([0, 1], np.array([5000, 10]), 4096, torch.Generator()) in ([[1], [0]], [[0], [1]])


def test_token_batches_give_every_process_a_share():
    """Under data parallelism each of `world` processes trains an interleaved share of a batch: a sequence
    longer than the budget, or a window's last one, must not make a batch of fewer rows than processes."""
    import numpy as np

    from lmrl.algos.bc import token_batches

    rng = np.random.default_rng(3)
    lengths = rng.integers(10, 600, size=501)
    order = torch.randperm(501, generator=torch.Generator().manual_seed(1)).tolist()
    assert min(len(b) for b in token_batches(order, lengths, 512, torch.Generator().manual_seed(2))) == 1
    for world in (2, 3):
        batches = token_batches(order, lengths, 512, torch.Generator().manual_seed(2), min_rows=world)
        assert sorted(i for b in batches for i in b) == list(range(501))
        assert min(len(b) for b in batches) >= world
        # past the budget only where a long sequence forced it (at most `world` rows) or where a window's
        # short last batch joined the one before (one a window: windows of 64 batches' worth of sequences)
        windows = -(-501 // (64 * max(1, 512 // int(np.mean(lengths)))))
        over = [b for b in batches if len(b) * max(lengths[b]) > 512 and len(b) > world]
        assert len(over) <= windows


def test_token_budget_epochs_resume_at_any_batch():
    """A resumed run starting at batch k sees the batches an uninterrupted run saw from k on, across
    several epochs (40 batches of a ~10-batch epoch)."""
    import itertools

    from lmrl.algos.bc import BCTrainer
    from lmrl.data.tokenize import TokenSequence

    trainer = BCTrainer.__new__(BCTrainer)
    trainer.cfg, trainer.seed = BCConfig(batch_size=4, batch_tokens=64), 3
    trainer.collate = lambda seqs: {"lengths": [len(s) for s in seqs]}  # the lengths stand in for the tensors
    seqs = [TokenSequence(torch.zeros(n).numpy(), torch.zeros(n).bool().numpy(), torch.zeros(n).numpy(), True)
            for n in [3, 9, 17, 30, 5, 12, 8, 21, 2, 14] * 3]
    full = list(itertools.islice(trainer.batches(seqs), 40))
    for k in (1, 7, 19, 33):
        assert list(itertools.islice(trainer.batches(seqs, start=k), 40 - k)) == full[k:]


def test_a_cached_stage_is_built_once_and_its_partial_checkpoints_removed(tmp_path):
    from types import SimpleNamespace

    from lmrl.algos.bc import cached_stage

    task, built = SimpleNamespace(cache_dir=tmp_path, name="maze_fo"), []

    def build(partial, tmp):
        built.append(tmp)
        (partial / "checkpoints").mkdir(parents=True)
        tmp.mkdir()
        (tmp / "config.json").write_text("{}")

    first = cached_stage(task, "bc", {"seed": 0}, "BC stage", build)
    assert cached_stage(task, "bc", {"seed": 0}, "BC stage", build) == first and len(built) == 1
    assert (first / "config.json").exists() and first.parent == tmp_path / "bc" / "maze_fo"
    assert not first.with_name(first.name + ".partial").exists() and not built[0].exists()
    assert cached_stage(task, "bc", {"seed": 1}, "BC stage", build) != first and len(built) == 2  # another key
    # build=None (a check of a finished run's stages): the cached stage, or an error naming where it is missing
    assert cached_stage(task, "bc", {"seed": 0}, "BC stage", None) == first
    with pytest.raises(FileNotFoundError, match="no cached BC stage at .*bc/maze_fo"):
        cached_stage(task, "bc", {"seed": 2}, "BC stage", None)


def test_a_stage_cached_on_the_same_bytes_under_another_dataset_name_is_reused(tmp_path):
    """A generator edit that changes no episode renames the dataset file (its key hashes the generator's code): a
    BC stage trained on the old file is reused for the new one when the bytes are equal, and only then."""
    import shutil

    from hydra import compose, initialize_config_dir

    from lmrl.algos.bc import cached_stage, stage_path
    from lmrl.task import Task

    with initialize_config_dir(version_base="1.3", config_dir=str(Path(__file__).parents[2] / "conf")):
        cfg = compose("train", overrides=["task=maze_fo", "task.data.recipe.episodes=20"])
    task = Task(cfg.task, tmp_path)
    data = task.dataset_path()
    old = data.with_name("000000000000-00000000.jsonl")  # the same episodes under an older generator's name
    shutil.copy(data, old)
    other = data.with_name("111111111111-11111111.jsonl")  # as long, other bytes
    other.write_bytes(data.read_bytes()[::-1])
    assert task.dataset_aliases() == [old.name]

    built = []

    def build(partial, tmp):
        built.append(tmp)
        tmp.mkdir(parents=True)
        (tmp / "config.json").write_text("{}")

    key = {"data": data.name, "seed": 0}
    for name in (old.name, other.name):
        stage = stage_path(task, "bc", {**key, "data": name})
        stage.mkdir(parents=True)
        (stage / "config.json").write_text("{}")
    assert cached_stage(task, "bc", key, "BC stage", build) == stage_path(task, "bc", {**key, "data": old.name})
    assert not built
    old.write_bytes(data.read_bytes().replace(b"move", b"mvoe"))  # the old file changed: its stage no longer applies
    old.touch()
    assert task.dataset_aliases() == []
    assert cached_stage(task, "bc", key, "BC stage", build) == stage_path(task, "bc", key) and len(built) == 1


def test_merged_sequences_are_drawn_in_proportion_to_their_counts():
    """`dedup_batches: draw`: when one batch does not hold every merged sequence, a batch's sequences are drawn
    in proportion to their counts (the full data's distribution) and count once each; a batch that holds them all,
    equal weights, or `weight` mode keep the shuffled distinct sequences with their count weights."""
    import types
    from collections import Counter

    import numpy as np

    from lmrl.algos.base import OptimFields
    from lmrl.algos.bc import BCTrainer
    from lmrl.data.packed import PackedSequences
    from lmrl.data.tokenize import TokenSequence

    def seq(token):
        return TokenSequence(np.array([1, token], np.int32), np.array([False, True]), np.zeros(2, np.float32), True)

    data = PackedSequences.build([seq(5)] * 90 + [seq(6)] * 9 + [seq(7)], dedup=True)
    assert list(data.weight) == [90, 9, 1]

    def trainer(batch_size, mode="draw"):
        fake = types.SimpleNamespace(cfg=OptimFields(batch_size=batch_size, dedup_batches=mode), seed=0)
        fake.draws_by_weight = lambda s: BCTrainer.draws_by_weight(fake, s)
        return fake

    small = trainer(1)
    assert BCTrainer.draws_by_weight(small, data)
    drawn = Counter(i for e in range(300) for batch in BCTrainer.epoch_plan(small, data, e) for i in batch)
    assert abs(drawn[0] / 900 - 0.9) < 0.03 and abs(drawn[1] / 900 - 0.09) < 0.03
    assert not BCTrainer.draws_by_weight(trainer(3), data)  # one batch holds all three: exact weighted sum
    assert not BCTrainer.draws_by_weight(trainer(1, "weight"), data)
    assert not BCTrainer.draws_by_weight(small, PackedSequences.build([seq(5), seq(6)], dedup=True))  # equal
    assert sorted(BCTrainer.epoch_plan(trainer(1, "weight"), data, 0)) == [[0], [1], [2]]


def test_a_published_stage_never_waits_for_or_replaces_another(tmp_path):
    """`publish_stage` (a finished BC run offering its export as the BC stage): it writes the stage when none is
    cached, leaves a cached one alone, and skips instead of waiting while another process holds the stage's lock
    (that process is training the stage: up to hours)."""
    from hydra import compose, initialize_config_dir

    from lmrl.algos.bc import publish_stage, stage_lock, stage_path
    from lmrl.task import Task
    from lmrl.utils import file_lock

    with initialize_config_dir(version_base="1.3", config_dir=str(Path(__file__).parents[2] / "conf")):
        cfg = compose("train", overrides=["task=maze_fo", "task.data.recipe.episodes=20"])
    task = Task(cfg.task, tmp_path)
    export = tmp_path / "export"
    export.mkdir()
    (export / "config.json").write_text('{"run": 1}')
    key = {"data": task.dataset_path().name, "seed": 0}
    path = stage_path(task, "bc", key)
    with file_lock(stage_lock(task, "bc", path)):  # a stage being trained
        assert publish_stage(task, "bc", key, export, "BC stage") is None and not path.exists()
    path.with_name(path.name + ".partial").mkdir(parents=True)  # a killed build's checkpoints
    assert publish_stage(task, "bc", key, export, "BC stage") == path
    assert (path / "config.json").read_text() == '{"run": 1}' and not path.with_name(path.name + ".partial").exists()
    (export / "config.json").write_text('{"run": 2}')
    assert publish_stage(task, "bc", key, export, "BC stage") is None
    assert (path / "config.json").read_text() == '{"run": 1}' and sorted(p.name for p in path.parent.iterdir()) == [path.name]
