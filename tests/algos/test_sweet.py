"""SWEET-RL and group PG: the trajectory-pair objective's score, every ablation for one step, `debug=smoke`
end to end on PO maze and Wordle."""

import dataclasses
import json
import math
import random
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir

from lmrl.algos.base import ConfigError, typed_config
from lmrl.algos.ppo import Scored
from lmrl.algos.privileged import maze_oracle
from lmrl.algos.sweet import SweetConfig, fit_states, oracle_scorer
from lmrl.algos.sweet_critic import OracleScorer, task_moves, unseen_pairs
from lmrl.algos.sweet_data import LogRatio, TrajectoryPairs, context_sequences, split_turn
from lmrl.algos.turn_losses import bradley_terry_loss
from lmrl.data.packed import PackedSequences
from lmrl.data.tokenize import SegmentEncoder, TokenSequence, collate
from lmrl.dist import TorchEngine
from tests.device_check import DEVICE, device_check, report
from tests.e2e import ROOT, cli_env, run_cli
from tests.one_step import built, compose_train, one_step_and_turn, weights  # noqa: F401 (fixture)


def pairs_over(task, tokenizer, model, sample_turns: int, exact: bool,
               alternatives=None) -> tuple[TrajectoryPairs, torch.nn.Module]:
    """Two pairs over three of the task's episodes (windowed maze FO: one sequence per move)."""
    episodes = list(task.episodes())[:3]
    encode, offsets, seqs = SegmentEncoder(tokenizer), [0], []
    for ep in episodes:
        part = context_sequences(ep, None, encode, task.history_window, 128)
        seqs, offsets = seqs + part, offsets + [offsets[-1] + len(part)]
    items = TrajectoryPairs(PackedSequences.build(seqs), offsets, [(0, 1), (0, 2)], LogRatio(0.5, "mean"),
                            sample_turns, exact, 16, tokenizer.pad_token_id, seed=0, alternatives=alternatives)
    return items, model


def full_loss(items: TrajectoryPairs, model, reference) -> torch.Tensor:
    """The same Bradley-Terry loss computed the plain way: every turn of every trajectory differentiated."""
    scores, rule = [], LogRatio(1.0, "mean")
    for t in range(3):
        batch = collate([items.seqs[i] for i in range(items.traj_offsets[t], items.traj_offsets[t + 1])],
                        items.pad_id)
        inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
        scores.append(0.5 * (rule.sequence_scores(model(**inputs), batch)
                             - rule.sequence_scores(reference(**inputs), batch)).sum())
    return bradley_terry_loss(torch.stack([scores[0], scores[0]]), torch.stack([scores[1], scores[2]]))[0]


def test_exact_scores_give_the_plain_loss_and_its_gradient(built):
    task, model, tokenizer, _ = built
    torch.manual_seed(0)
    trained, reference = model, type(model)(model.config).eval()  # a reference that differs from the model
    items, _ = pairs_over(task, tokenizer, trained, sample_turns=2, exact=True)
    batch = items.collate([0, 1], step=0)
    loss, _ = items.loss(lambda **b: trained(**b), lambda **b: reference(**b), batch)
    plain = full_loss(items, trained, reference)
    assert loss.item() == pytest.approx(plain.item(), rel=1e-4)  # sums of ~100 turns, batched differently
    # all turns sampled: the gradient is the plain one too
    items_all, _ = pairs_over(task, tokenizer, trained, sample_turns=0, exact=True)
    grads = []
    for lossfn in (lambda: items_all.loss(lambda **b: trained(**b), lambda **b: reference(**b),
                                          items_all.collate([0, 1], step=0))[0], lambda: full_loss(items, trained, reference)):
        trained.zero_grad()
        lossfn().backward()
        grads.append(torch.cat([p.grad.flatten() for p in trained.parameters() if p.grad is not None]))
    # fp32 sums in another order (threads, batching): a few elements differ by ~3e-5; 1e-4 of the largest is the bar
    torch.testing.assert_close(grads[0], grads[1], atol=1e-4 * grads[1].abs().max().item(), rtol=1e-3)


def with_turn(seq: TokenSequence, turn: np.ndarray) -> TokenSequence:
    """(test helper) `seq` with its turn replaced by the tokens `turn`."""
    prefix, _ = split_turn(seq)
    return TokenSequence(np.concatenate([prefix, turn]).astype(np.int32),
                         np.concatenate([np.zeros(len(prefix), bool), np.ones(len(turn), bool)]),
                         np.zeros(len(prefix) + len(turn), np.float32), seq.done)


def test_a_critic_normalized_over_the_moves_scores_each_turn_against_all_four(built):
    """`critic_stage.normalize=actions`: a turn's score is its mean log-prob's softmax over the maze's four moves
    (and the reply itself when it is none of them), computed here the plain way: each move's sequence scored
    alone."""
    task, model, tokenizer, _ = built
    torch.manual_seed(0)
    reference = type(model)(model.config).eval()
    moves = task_moves(task, tokenizer)
    assert len(moves) == 4
    items, _ = pairs_over(task, tokenizer, model, sample_turns=0, exact=True, alternatives=moves)
    batch = items.collate([0, 1], step=0)
    counts = torch.bincount(batch["grad"]["moves"]["owner"], minlength=batch["grad"]["input_ids"].shape[0])
    assert set(counts.tolist()) <= {4, 5} and 4 in counts.tolist()  # a recorded move is one of the four
    loss, _ = items.loss(lambda **b: model(**b), lambda **b: reference(**b), batch)

    rule, traj = LogRatio(1.0, "mean"), []
    for t in range(3):
        total = torch.zeros(())
        for i in range(items.traj_offsets[t], items.traj_offsets[t + 1]):
            seq = items.seqs[i]
            taken = seq.input_ids[int(seq.action_mask.nonzero()[0][0]):].tolist()
            options = moves + ([taken] if taken not in moves else [])
            rows = collate([with_turn(seq, torch.tensor(m).numpy()) for m in options], items.pad_id)
            inputs = {"input_ids": rows["input_ids"], "attention_mask": rows["attention_mask"]}
            k = options.index(taken)
            for lm, sign in ((model, 1.0), (reference, -1.0)):
                total = total + sign * 0.5 * torch.log_softmax(rule.sequence_scores(lm(**inputs), rows), 0)[k]
        traj.append(total)
    plain = bradley_terry_loss(torch.stack([traj[0], traj[0]]), torch.stack([traj[1], traj[2]]))[0]
    assert loss.item() == pytest.approx(plain.item(), rel=1e-4)
    # and its gradient: through the prefix's repeated KV cache as through each move's own sequence (fp32 sums in
    # another order: a few elements differ by ~3e-5 in the full suite, 1e-4 of the largest element is the bar)
    grads = []
    for value in (loss, plain):
        model.zero_grad()
        value.backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]))
    torch.testing.assert_close(grads[0], grads[1], atol=1e-4 * grads[1].abs().max().item(), rtol=1e-3)


def test_normalizing_over_moves_needs_a_task_with_moves_and_the_lm_critic(built):
    _, _, tokenizer, _ = built
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        cfg = compose("train", overrides=["task=wordle", "algo=sweet", "algo.critic_stage.normalize=actions"])
        head = compose("train", overrides=["algo=sweet", "algo.critic=head", "algo.critic_stage.normalize=actions"])
        bad = compose("train", overrides=["algo=sweet", "algo.critic_stage.normalize=moves"])
    with pytest.raises(ConfigError, match="critic=lm only"):
        typed_config(SweetConfig, head.algo)
    with pytest.raises(ConfigError, match=r"normalize must be one of \('none', 'actions'\) \(got moves\)"):
        typed_config(SweetConfig, bad.algo)
    wordle = SimpleNamespace(name="wordle", cfg=cfg.task)
    with pytest.raises(ValueError, match="wordle: critic_stage.normalize=actions needs a task with a fixed action"):
        task_moves(wordle, tokenizer)


ORACLE = ["algo.critic=oracle", "algo.task_info.maze_fo.oracle=tests.one_step.length_oracle"]


@pytest.mark.parametrize("flags", [[], ["algo.privileged=false"], ["algo.critic=head"], ORACLE,
                                   ["algo.mode=trajectory_dpo"], ["algo.critic_stage.normalize=actions"],
                                   ["algo.critic_stage.halves=true"]])
def test_every_variant_trains_one_step_and_acts_on_the_device(flags, built, tmp_path):
    """Each ablation's critic stage, candidates and actor step, with the model on a second (virtual) device:
    no op mixes devices (tests/test_devices.py runs the default variant the same way)."""
    with device_check() as violations:
        trainer, metrics, before = one_step_and_turn("sweet", TorchEngine(device=str(DEVICE)), built, tmp_path, *flags)
    assert not violations, f"{flags}: ops mixing devices:\n{report(violations)}"
    assert torch.isfinite(torch.tensor(metrics["train_loss"]))
    assert any(not torch.equal(a, b) for a, b in zip(weights(trainer), before))
    if flags in ([], ["algo.privileged=false"], ["algo.critic=head"], ["algo.critic_stage.normalize=actions"],
                 ["algo.critic_stage.halves=true"]):
        # the trained critic, checked on pairs its stage never drew (maze FO: a windowed task, a quarter of 8)
        assert metrics["sweet/critic_unseen_pairs"] == 2 and 0 <= metrics["sweet/critic_unseen_pair_accuracy"] <= 1
        assert math.isfinite(metrics["sweet/critic_unseen_bt_loss"])
        assert 0 <= metrics["sweet/critic_unseen_half_pair_accuracy"] <= 1  # the pairs cut after half their turns


def test_candidates_are_scored_in_chunks_of_whole_states_with_the_same_scores(built):
    """The scorers run at most SCORE_ROWS candidate rows a pass (memory): chunks never split a state's rows, and
    chunked scores equal one pass over all rows."""
    from lmrl.algos.sweet_critic import chunked_scores, continuation_scores, owner_chunks
    from lmrl.models.fused import fast_lm

    assert owner_chunks([0, 0, 0, 1, 1, 2, 2, 2, 2, 3], 4) == [(range(0, 1), range(0, 3)), (range(1, 2), range(3, 5)),
                                                              (range(2, 3), range(5, 9)), (range(3, 4), range(9, 10))]
    assert owner_chunks([0, 0, 0, 0, 0, 0, 1, 2], 4) == [(range(0, 1), range(0, 6)), (range(1, 3), range(6, 8))]
    with pytest.raises(ValueError, match="grouped"):
        owner_chunks([0, 1, 0], 4)
    task, model, tokenizer, _ = built
    encode, pad = SegmentEncoder(tokenizer), tokenizer.pad_token_id
    episodes = list(task.episodes())[:5]
    prefixes = [[t for seg in ep.turns[:3] for t in encode(seg.text)] for ep in episodes]  # unequal lengths
    replies = ["move up\n", "move down\n", "move left\n", "go\n"]
    owner = [p for p in range(5) for _ in replies[: 1 + p % 4]]
    conts = [list(encode(replies[r])) for p in range(5) for r in range(1 + p % 4)]
    lm = fast_lm(model.eval())

    def mean_logp(pre, own, cont, pad_id):
        logp, mask = continuation_scores(lm, pre, own, cont, pad_id)
        return ((logp * mask).sum(1) / mask.sum(1)).tolist()

    whole = chunked_scores(mean_logp, prefixes, owner, conts, pad, max_rows=len(owner))
    assert len(owner_chunks(owner, 3)) > 2
    assert np.allclose(chunked_scores(mean_logp, prefixes, owner, conts, pad, max_rows=3), whole, atol=1e-5)


def test_unseen_pairs_come_from_tasks_the_critic_never_drew_when_there_are_any():
    keys = ["a", "a", "a", "b", "b", "c", "c"]
    every = [(0, 1), (0, 2), (3, 4), (5, 6)]
    pairs, fresh = unseen_pairs(every, [(0, 1)], keys, 10, random.Random(0))
    assert fresh and sorted(pairs) == [(3, 4), (5, 6)]  # not (0, 2): task "a" was drawn
    pairs, fresh = unseen_pairs(every, every[:1] + every[2:], keys, 10, random.Random(0))
    assert not fresh and pairs == [(0, 2)]  # every task drawn: the pairs that were not
    assert unseen_pairs(every, every, keys, 10, random.Random(0)) == ([], False)
    assert len(unseen_pairs(every, [], keys, 1, random.Random(0))[0]) == 1


def test_first_turns_cut_an_episode_right_after_its_kth_agent_turn():
    from lmrl.algos.sweet_critic import first_turns
    from lmrl.envs.base import Episode, Text

    turns = [Text("hi", False), Text("a1", True), Text("r1", False), Text("a2", True), Text("r2", False),
             Text("a3", True), Text("sold", False)]
    ep = Episode(turns, [0, 0, 0, 0, 0, 0, 1.0], True, {"buyer": 1})
    one = first_turns(ep, 1)  # the first agent turn, and nothing after it (no verdict)
    assert [t.text for t in one.turns] == ["hi", "a1"] and one.rewards == [0, 0] and not one.done
    assert one.info == ep.info and first_turns(ep, None) is ep and first_turns(ep, 3) is ep
    assert [t.text for t in first_turns(ep, 2).turns] == ["hi", "a1", "r1", "a2"]


def test_halved_pairs_cut_both_sides_after_the_same_turn(built):
    """The held-out check's `unseen_half_*`: each pair's two trajectories keep the same number of turns (half the
    shorter one's), so neither the outcome nor the length can order them; c is replayed from the whole episode."""
    from lmrl.algos.privileged import task_info_for
    from lmrl.algos.sweet_critic import trajectory_items

    task, _, tokenizer, _ = built
    cfg = compose_train("algo=sweet")
    info = task_info_for(typed_config(SweetConfig, cfg.algo).task_info, task.name)
    eps = list(task.episodes())
    pairs = [(a, b) for a in range(6) for b in range(6) if eps[a].total_return > eps[b].total_return][:4]
    assert pairs
    whole, half = (trajectory_items(task, info, tokenizer, 128, True, LogRatio(0.1), 0, 0, False, 16, 0, pairs=pairs,
                                    halves=h) for h in (False, True))
    turns = lambda items, t: int(items.traj_offsets[t + 1] - items.traj_offsets[t])  # noqa: E731 (maze FO: a turn a sequence)
    for (a, b), (wa, wb), (ha, hb) in zip(pairs, whole.pairs, half.pairs):
        assert (turns(whole, wa), turns(whole, wb)) == (eps[a].num_actions, eps[b].num_actions)
        assert turns(half, ha) == turns(half, hb) == max(1, min(eps[a].num_actions, eps[b].num_actions) // 2)


def test_a_critic_option_at_its_neutral_value_keeps_the_cached_critics_key():
    from lmrl.algos.sweet_critic import CriticConfig, stage_key

    assert "halves" not in stage_key(CriticConfig()) and stage_key(CriticConfig(halves=True))["halves"] is True


def test_states_are_trimmed_from_their_oldest_history_so_the_longest_candidate_fits():
    """Car Dealer: a prompt cut for max_new_tokens, and a re-encoded candidate one token longer (end_turn's newline),
    overflowed the model's 512 positions; the history gives way, c never does."""
    c, window = [7] * 30, list(range(100, 570))  # c, then the critic's history (470)
    prompt = list(range(1000, 1464))  # the actor's prompt, cut at 512 - 48
    (fitted,), (prefix,) = fit_states([(prompt, c, window, None)], [49], 512)
    assert fitted == prompt[1:] and len(fitted) + 49 == 512
    assert prefix[:30] == c and prefix[30:] == window[-433:] and len(prefix) + 49 == 512
    short = ([1, 2, 3], [], [1, 2, 3], None)  # unprivileged (no c), room to spare: unchanged
    assert fit_states([short], [5], 512) == ([[1, 2, 3]], [[1, 2, 3]])
    with pytest.raises(ValueError, match="c is 500 tokens"):
        fit_states([(prompt, [7] * 500, window, None)], [49], 512)


def test_the_oracle_critic_credits_the_shortest_way_at_the_true_position(built):
    """+1 a move that shortens the way to the goal (8, 6), 0 another move (a wall included), -1 no move; read
    from the true position, whatever the prefix says."""
    _, _, tokenizer, _ = built
    encode = SegmentEncoder(tokenizer)
    replies = ["move up\n", "move down\n", "move left\n", "move right\n", "move down", "fly\n"]
    conts = [list(encode(r)) for r in replies]
    scorer = OracleScorer(maze_oracle, tokenizer)
    at = {(7, 6): [0.0, 1.0, 0.0, 0.0, -1.0, -1.0],  # just above the goal: down
          (5, 3): [0.0, 0.0, 0.0, 1.0, -1.0, -1.0],  # the left end of the T's bar: right, toward the stem
          (1, 1): [0.0, 0.0, 0.0, 1.0, -1.0, -1.0]}  # the top left dead end: right
    for cell, credit in at.items():
        assert scorer.scores([[0]], [0] * len(conts), conts, tokenizer.pad_token_id,
                             [{"start": [1, 1], "position": list(cell)}]) == credit, cell
    with pytest.raises(ValueError, match="true state"):
        scorer.scores([[0]], [0], conts[:1], tokenizer.pad_token_id)


def hand_bc_nll(model, batch: dict) -> float:
    """(test helper) BC's loss the long way: -log p of every agent token after the first, weighted by its
    sequence's weight, over the weighted count (the anchor batch's `norm`)."""
    logp = torch.log_softmax(model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits, -1)
    total = 0.0
    for b in range(batch["input_ids"].shape[0]):
        for t in range(1, batch["input_ids"].shape[1]):
            if batch["action_mask"][b, t] and batch["attention_mask"][b, t]:
                total -= float(batch["weights"][b]) * logp[b, t - 1, batch["input_ids"][b, t]].item()
    return total / batch["norm"]


def test_the_bc_anchor_adds_bc_coef_times_the_datasets_nll_to_the_pairs_loss(built, tmp_path):
    """bc_coef > 0: each pair batch carries `batch_size` dataset sequences, and the loss is the pairs' objective
    + bc_coef x their BC loss (computed by hand here); bc_coef = 0 (the default): no anchor, the pairs' loss alone."""
    trainer, _, _ = one_step_and_turn("sweet", TorchEngine(device="cpu"), built, tmp_path, *ORACLE, "algo.bc_coef=0.5")
    assert len(trainer.anchor) > 0
    batch = next(trainer.batches(trainer.seqs, start=3))
    anchor = batch["anchor"]
    assert anchor["input_ids"].shape[0] == trainer.cfg.batch_size and anchor["action_mask"].any()
    model = trainer.engine.unwrap()
    with torch.no_grad():
        loss, logs = trainer.loss(batch)
        pairs, _ = trainer.seqs.loss(trainer.engine.forward, trainer.reference,
                                     {k: v for k, v in batch.items() if k != "anchor"})
        nll = hand_bc_nll(model, anchor)
    assert float(logs["bc"]) == pytest.approx(nll, rel=1e-5) and nll > 0
    assert loss.item() == pytest.approx(pairs.item() + 0.5 * nll, rel=1e-5)
    plain, _, _ = one_step_and_turn("sweet", TorchEngine(device="cpu"), built, tmp_path / "plain", *ORACLE)
    assert plain.anchor is None and "anchor" not in next(plain.batches(plain.seqs))


def test_the_bc_anchor_holds_the_data_against_a_critic_that_prefers_other_text(built, tmp_path):
    """A planted critic that prefers the longest candidate (never a maze move) draws the actor away from the
    data: after the same 20 steps on the same pairs, the dataset's NLL is lower with the anchor than without."""
    nll = {}
    for coef in (0.0, 1.0):
        trainer, _, _ = one_step_and_turn("sweet", TorchEngine(device="cpu"), built, tmp_path / str(coef), *ORACLE,
                                          f"algo.bc_coef={coef}", "smoke.steps=20", "algo.lr=3e-3",
                                          "algo.warmup_steps=0", "algo.nll_coef=1.0")
        probe = trainer.anchor if trainer.anchor is not None else trainer.anchor_sequences()
        batch = collate([probe[j] for j in range(min(32, len(probe)))], trainer.tokenizer.pad_token_id)
        decisions = batch["action_mask"][:, 1:] & batch["attention_mask"][:, 1:].bool()
        batch["norm"] = float((batch["weights"][:, None] * decisions).sum())
        with torch.no_grad():
            nll[coef] = hand_bc_nll(trainer.engine.unwrap(), batch)
    assert nll[1.0] < nll[0.0]


def test_the_oracle_critic_needs_the_true_state_and_a_task_with_an_oracle(built):
    _, _, tokenizer, _ = built
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        cfg = typed_config(SweetConfig, compose("train", overrides=["algo=sweet", "algo.critic=oracle"]).algo)
    assert cfg.validate() == []
    assert isinstance(oracle_scorer(cfg.task_info, "maze_po", tokenizer), OracleScorer)
    with pytest.raises(ValueError, match=r"wordle has no oracle.*\['maze_fo', 'maze_po'\]"):
        oracle_scorer(cfg.task_info, "wordle", tokenizer)
    problems = dataclasses.replace(cfg, privileged=False).validate()
    assert any("privileged=false has no meaning" in p for p in problems)


def test_group_pg_pins_k_rollouts_per_start_and_gives_each_episode_its_group_advantage(built, tmp_path):
    """Starts: k copies of one task's reset options per group, each with its own seed.  Update: every decision
    token of episode i carries A_i = (R_i - mean) / std of its group; an episode at its group's mean is left out."""
    trainer, _, before = one_step_and_turn("group_pg", TorchEngine(device="cpu"), built, tmp_path,
                                           "smoke.episodes_per_round=4", "algo.k=2")
    assert any(not torch.equal(a, b) for a, b in zip(weights(trainer), before))  # the update ran
    options, seeds = trainer.start_states(0)
    assert options[0] == options[1] and options[2] == options[3] and options[0] != options[2]
    assert len(set(seeds)) == 4
    task = trainer.task
    eps = list(task.episodes())[:3]
    same = lambda ep, r: dataclasses.replace(ep, info={**ep.info, "start": [1, 1]}, rewards=[0.0] * (len(ep.rewards) - 1) + [r])  # noqa: E731
    group = [same(eps[0], 1.0), same(eps[1], 3.0), same(eps[2], 2.0)]  # mean 2: A = -1.22, +1.22, 0
    captured = []
    trainer.optimize = lambda samples, round_idx: captured.extend(samples) or {}
    logs = trainer.update(group, 0)
    assert logs["groups"] == 1 and logs["episodes_with_signal"] == 2
    n0, n1 = (len(trainer.link_sequences(ep)) for ep in group[:2])
    assert len(captured) == n0 + n1  # the episode at the mean adds no sequence
    a = 1 / math.sqrt(2 / 3)
    for sample, sign in zip(captured, [-1] * n0 + [1] * n1):
        assert sample.advantages.shape == sample.old_logp.shape
        torch.testing.assert_close(sample.advantages, torch.full_like(sample.old_logp, sign * a), atol=1e-5, rtol=0)


def test_the_critic_stage_pairing_reaches_its_pairs(built, tmp_path):
    """`critic_stage.pairing=all` gives the critic every better-worse pair of a start, so many more distinct
    chosen trajectories than `best` (one per start) from the same dataset."""
    chosen = {}
    for pairing in ("best", "all"):
        trainer, _, _ = one_step_and_turn("sweet", TorchEngine(device="cpu"), built, tmp_path / pairing,
                                          "algo.mode=trajectory_dpo", f"algo.critic_stage.pairing={pairing}",
                                          "smoke.steps=1", "algo.batch_size=64")
        chosen[pairing] = {trainer.seqs.pairs[j][0] for j in range(len(trainer.seqs))}
        assert len(trainer.seqs) > 0
    assert len(chosen["all"]) > len(chosen["best"])


def test_group_pg_kl_term_is_zero_at_the_reference_and_pulls_back_after_a_step(built, tmp_path):
    """kl_coef > 0: the round's reference log-probs are the BC stage's; at the first minibatch the policy is the
    reference (KL 0, the loss is the clipped surrogate alone); once the policy has moved, the KL is > 0."""
    trainer, _, _ = one_step_and_turn("group_pg", TorchEngine(device="cpu"), built, tmp_path,
                                      "smoke.episodes_per_round=4", "algo.k=2", "algo.kl_coef=0.5")
    assert trainer.reference is not None
    episodes = [dataclasses.replace(ep, info={**ep.info, "start": [1, 1]},
                                    rewards=[0.0] * (len(ep.rewards) - 1) + [r])
                for ep, r in zip(list(trainer.task.episodes())[:2], [0.0, 1.0])]
    seqs = [s for ep in episodes for s in trainer.link_sequences(ep)]
    old, ref = trainer.old_logprobs(seqs)
    moved = any(not torch.allclose(o, r) for o, r in zip(old, ref))
    assert moved  # one_step_and_turn took an optimizer step away from the BC stage
    mb = [Scored(s, r, r.new_zeros(0), torch.ones_like(r), r.new_zeros(0), r) for s, r in zip(seqs, ref)]
    trainer.engine.train()
    loss, logs = trainer.minibatch_loss(mb)
    assert logs["kl"] > 0.0
    assert loss.item() == pytest.approx(logs["pg_loss"] + 0.5 * logs["kl"], rel=1e-5)
    at_ref = [Scored(s, o, o.new_zeros(0), torch.ones_like(o), o.new_zeros(0), o) for s, o in zip(seqs, old)]
    _, logs = trainer.minibatch_loss(at_ref)
    assert logs["kl"] == pytest.approx(0.0, abs=1e-6)


# debug=smoke shrunk further for the fast tier (`make test-slow` runs plain debug=smoke on every task):
# 4 steps of 4 (pairs, sequences), one evaluation episode, group PG rounds of one group of 2 episodes.
FAST = ["debug=smoke", "smoke.steps=4", "smoke.batch_size=4", "smoke.episodes_per_round=2", "task.eval.max_starts=1"]
# Group PG's maze rollouts stop at 20 moves (SWEET-RL replays the dataset's episodes of up to 100: it keeps 100).
FAST_PAIR = {("maze_po", "group_pg"): ["task.env.max_steps=20"],
             # the actor's learning curve (curve.csv, as BC's): a point every 2 of its 4 steps
             ("wordle", "sweet"): ["++algo.curve_points=2", "++algo.curve_episodes_per_start=1"]}


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One cache for the smoke runs: a task's dataset and BC stage are built once, for both algorithms."""
    return tmp_path_factory.mktemp("cache")


def check_a_finished_runs_critic(run, metrics: dict, cache) -> None:
    """`python -m lmrl.algos.sweet_check RUN_DIR`: the run's own held-out check (kept beside its critic); with
    `algo.privileged=false` only after `--train` has trained that critic (no actor)."""
    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "lmrl.algos.sweet_check", *args], cwd=ROOT, env=cli_env(cache),
                              capture_output=True, text=True, timeout=300)

    proc = cli(str(run))
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.splitlines()[-1])
    assert got["unseen_pair_accuracy"] == metrics["sweet/critic_unseen_pair_accuracy"] and got["privileged"]
    proc = cli(str(run), "algo.privileged=false")
    assert proc.returncode != 0 and "no cached SWEET critic" in proc.stderr
    proc = cli("--train", str(run), "algo.privileged=false")
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.splitlines()[-1])
    assert not got["privileged"] and got["unseen_pairs"] == 8 and 0 <= got["unseen_pair_accuracy"] <= 1


def probe_a_finished_runs_critic(run, cache) -> None:
    """`python -m lmrl.algos.sweet_check --probe RUN_DIR`: the maze critic's best move against BFS at held-out
    states, beside the floor of always one move; a task without BFS moves is refused by name."""
    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "lmrl.algos.sweet_check", "--probe", *args], cwd=ROOT,
                              env=cli_env(cache), capture_output=True, text=True, timeout=300)

    proc = cli(str(run))
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.splitlines()[-1])
    assert got["task"] == "maze_po" and got["privileged"] and got["states"] > 0
    assert 0 <= got["bfs_agreement"] <= 100 and set(got["floor"]) == set(got["mean_score"]) == {
        "move up", "move down", "move left", "move right"}
    proc = cli(str(run), "task.name=wordle")
    assert proc.returncode != 0 and "needs the maze's BFS moves" in proc.stderr


@pytest.mark.parametrize("task", ["maze_po", "wordle"])
@pytest.mark.parametrize("algo", ["sweet", "group_pg"])
def test_smoke_end_to_end(task, algo, cache, tmp_path):
    overrides = [f"task={task}", f"algo={algo}", *FAST, *FAST_PAIR.get((task, algo), [])]
    metrics = run_cli("lmrl.train", overrides, tmp_path / "run", cache)
    assert metrics["algo"] == algo and metrics["episodes"] == 1
    if algo == "sweet":
        assert torch.isfinite(torch.tensor(metrics["train_loss"]))
        assert metrics["sweet/pairs"] > 0 and metrics["train_steps"] == 4
        assert list((cache / "sweet_critic" / task).glob("*/config.json"))  # the cached critic stage
        if task == "wordle":
            curve = (tmp_path / "run" / "curve.csv").read_text().splitlines()
            assert [row.split(",")[0] for row in curve[1:]] == ["2", "4"] and "normalized_score" in curve[0]
            check_a_finished_runs_critic(tmp_path / "run", metrics, cache)
        else:
            probe_a_finished_runs_critic(tmp_path / "run", cache)
    else:
        rounds = (tmp_path / "run" / "rounds.csv").read_text().splitlines()
        assert len(rounds) == 3 and "groups" in rounds[0]
    assert (tmp_path / "run" / "checkpoint" / "model.safetensors").exists()
    assert len(list((cache / "bc" / task).glob("*/config.json"))) == 1  # both algorithms start from one BC stage
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["task"] == task
