"""The dry run's cost table: the arithmetic of lmrl/scaling.py checked by hand on one cell (ILQL on GPT-2
small) and a few PPO rounds, the token statistics run through the trainers' own tokenization, and the
printed table of `launchers.sweep --dry-run` on a small experiment (CPU, seconds)."""

from __future__ import annotations

import json

import pytest
from transformers import GPT2Config

from launchers import sizing, sweep
from lmrl import scaling
from lmrl.scaling import EpisodeTokens, Generation, Hardware, ModelShape, TaskTokens

# GPT-2 small: 12 layers, width 768, vocabulary 50,257, context 1,024.
#   wte 50,257 x 768 = 38,597,376; wpe 1,024 x 768 = 786,432
#   a block: 12 x 768^2 + 13 x 768 = 7,087,872; 12 blocks + final norm (1,536) = 85,056,000 (body)
#   params = 85,056,000 + 38,597,376 + 786,432 = 124,439,808 (the LM head is tied to wte)
GPT2 = ModelShape(params=124_439_808, body=85_056_000, d=768, vocab=50_257, layers=12, context=1024)
ZERO2_FP32 = Hardware(deepspeed=True, stage=2, precision="fp32", world=1)
GB = 1e9


def test_gpt2_shape_counted_on_meta_device():
    assert scaling.shape_of(GPT2Config()) == GPT2
    # the N of 6·N·tokens: body + LM head = 85,056,000 + 768 x 50,257 = 123,653,376 (wpe is a lookup)
    assert GPT2.lm == 123_653_376
    # Q head d -> d -> V: 768^2 + 768 + 768 x 50,257 + 50,257; V head d -> d -> 1: 768^2 + 768 + 768 + 1
    assert GPT2.q_head == 39_238_225 and GPT2.v_head == 591_361


def windowed_sample() -> TaskTokens:
    """Two episodes of two actions each (a windowed task: one sequence per action): sequences of 50 tokens,
    the first one's next-link state 40 tokens, the second none; standing for a 1,000-episode dataset."""
    eps = tuple(EpisodeTokens(ret, seqs=(50, 50), nexts=(40, 0), prompts=(30, 30), actions=(5, 5))
                for ret in (0.0, 1.0))
    return TaskTokens(eps, dataset_episodes=1000)


def test_ilql_cell_by_hand():
    data = windowed_sample()
    algo = {"steps": 800, "batch_size": 64, "shared_trunk": False, "init_from": None,
            "bc": {"steps": 600, "batch_size": 64}}
    gen = Generation(batch_size=8, max_prompt=30, max_new_tokens=10)
    bc, ilql = scaling.stages("ILQLTrainer", GPT2, data, algo, ZERO2_FP32, gen)

    # data: 1,000 episodes x 2 sequences = 2,000 sequences; 1,000 x (50 + 50) = 100,000 tokens per epoch
    assert data.sequences == 2000 and data.tokens == 100_000
    # every sequence is 50 tokens, so a batch of 64 pads to 50: 800 steps x 64 x 50 = 2,560,000 tokens = 25.6 epochs
    assert ilql.data_tokens == 100_000 and ilql.epochs == pytest.approx(800 * 64 / 2000)
    assert bc.tokens == 600 * 64 * 50 == 1_920_000 and ilql.tokens == 2_560_000

    # BC stage: 6 x 123,653,376 x 1,920,000 = 1.42448689152e15
    assert bc.flops == {"train": pytest.approx(1.42448689152e15)}
    # value model forward per token: body + Q1 + Q2 + V = 85,056,000 + 2 x 39,238,225 + 591,361 = 164,123,811
    #   train  6 x 164,123,811 x 2,560,000 = 2.52094173696e15
    #   target 2 x 164,123,811 x 2,560,000 = 8.4031391232e14
    #   next_v 2 x 164,123,811 x 800 x 64 x E[max of 64 next lengths in {40, 1, 40, 1}] (= 40 - 39 / 2^64)
    #          = 2 x 164,123,811 x 2,048,000 = 6.72251129856e14
    assert ilql.flops["train"] == pytest.approx(2.52094173696e15)
    assert ilql.flops["target"] == pytest.approx(8.4031391232e14)
    assert ilql.flops["next_v"] == pytest.approx(6.72251129856e14)
    total = 1.42448689152e15 + 2.52094173696e15 + 8.4031391232e14 + 6.72251129856e14  # = 5.457993670656e15
    assert sum(sum(s.flops.values()) for s in (bc, ilql)) == pytest.approx(total)

    # GPU-hours: fp32 at the measured 0.14 x 69/205 = 4.712% of 798 TFLOP/s = 3.7603e13 FLOP/s -> 145.1 s
    assert scaling.gpu_hours(total, scaling.MEASURED_UTILISATION["fp32"]) == pytest.approx(145.15 / 3600, rel=1e-3)
    # at 40%: 3.192e14 FLOP/s -> 17.099 s
    assert scaling.gpu_hours(total, 0.40) == pytest.approx(17.099 / 3600, rel=1e-3)

    # memory, ZeRO-2 fp32 on 1 process (nothing to shard), ILQL stage: 124,439,808 + 79,067,811 = 203,507,619 trained
    #   weights 4 B = 814,030,476; grads 4 B = 814,030,476; AdamW m + v 8 B = 1,628,060,952
    #   frozen target (fp32 replica) = 814,030,476
    #   train step: activations 12 layers x 68 B (34 x 2, fp32) x 64 x 50 x 768 = 2,005,401,600
    #               logits: Q1, Q2 and the target's two, 4 x 64 x 50 x 50,257 x 4 B = 2,573,158,400
    #   eval: the BC policy joins the critic (124,439,808 x 4 B = 497,759,232) and both trunks hold a KV cache,
    #         2 x 2 x 12 x 8 x (30 + 10) x 768 x 4 B = 47,185,920 (together less than the train step)
    assert ilql.memory == pytest.approx({"weights": 814_030_476, "grads": 814_030_476, "optimizer": 1_628_060_952,
                                         "frozen": 814_030_476, "activations": 2_005_401_600,
                                         "logits": 2_573_158_400})
    assert ilql.phases["eval"] == {"kv_cache": 47_185_920, "bc_policy": 497_759_232}
    assert ilql.host == 124_439_808 * 4  # the frozen BC policy waits on the host
    # the cell's peak is the ILQL stage: 8,648,712,380 B; the BC stage needs 124,439,808 x 16 B + 2,005,401,600
    # + 2 logits tensors (1,286,579,200) = 5,283,017,728 B
    assert sum(bc.memory.values()) == pytest.approx(5_283_017_728)
    assert scaling.peak_stage([bc, ilql]) is ilql and sum(ilql.memory.values()) == pytest.approx(8_648_712_380)


def test_batch_tokens_steps_are_the_trainers_buckets():
    data = windowed_sample()  # 2,000 sequences of 50 tokens
    gen = Generation(batch_size=8, max_prompt=30, max_new_tokens=10)
    # a 500-token budget holds 10 sequences of 50, none padded: 600 steps x 500 tokens, 600 x 10 / 2,000 = 3 epochs;
    # a process's activations are those of its 10 x 50 (2 processes: 5 x 50)
    algo = {"steps": 600, "batch_size": 64, "batch_tokens": 500}
    [bc] = scaling.stages("BCTrainer", GPT2, data, algo, ZERO2_FP32, gen)
    assert bc.tokens == 600 * 500 and bc.epochs == pytest.approx(3.0)
    assert bc.phases["train"]["activations"] == 12 * 68 * 500 * 768
    two = scaling.offline_step(data.lengths, algo, world=2)
    assert (two.tokens, two.sequences, two.micro_tokens) == (500, 10, 250)
    # the batch_size step it replaces: 64 x 50 tokens, 64 sequences
    [plain] = scaling.stages("BCTrainer", GPT2, data, {**algo, "batch_tokens": None}, ZERO2_FP32, gen)
    assert plain.tokens == 600 * 64 * 50 and plain.epochs == pytest.approx(600 * 64 / 2000)

    # lengths 10 .. 100: each batch stays within the budget (a sorted window packs neighbours), its fill near 1,
    # and it holds about budget / mean length sequences (the trainers' own cut: lmrl/algos/bc.py token_batches)
    mixed = [10 * k for k in range(1, 11)] * 20
    step = scaling.offline_step(mixed, {"batch_tokens": 2000}, world=1)
    assert 0.85 * 2000 < step.tokens <= 2000 and 2000 / 55 * 0.85 < step.sequences < 2000 / 55
    assert step.micro_tokens <= 2000
    # MC and ILQL batch the same way
    value = {**algo, "shared_trunk": False, "init_from": "a/bc", "bc": algo}
    [mc] = scaling.stages("MCTrainer", GPT2, data, value, ZERO2_FP32, gen)
    assert mc.tokens == 600 * 500 and mc.epochs == pytest.approx(3.0)


# Two online rounds of 4 episodes from a given BC checkpoint, minibatches of 4, scoring passes of 8.
ROUNDS = {"rounds": 2, "episodes_per_round": 4, "batch_size": 4, "epochs": 1, "max_steps_per_round": 0,
          "score_batch_size": 8, "bc_weight": 0.0, "kl_coef": 0.05, "init_from": "a/bc/checkpoint"}


def online_stage(trainer: str, hw: Hardware = ZERO2_FP32, **changes) -> scaling.Stage:
    """The one stage of an online cell on windowed_sample's data (ROUNDS with `changes`)."""
    [stage] = scaling.stages(trainer, GPT2, windowed_sample(), {**ROUNDS, **changes}, hw, Generation(8, 30, 10))
    return stage


def test_ppo_rounds_by_hand():
    ppo = online_stage("PPOTrainer")
    # a round: 4 episodes x 2 sequences = 8; 2 steps of 4 -> 4 steps x 4 x 50 = 800 trained tokens; 2 x 8 x 50 scored
    assert ppo.tokens == 800
    # rollouts: per episode the body takes (30 + 30) prompt + (5 + 5) action - 2 last tokens = 68 tokens, the head 10
    #   8 episodes x (2 x 85,056,000 x 68 + 2 x 38,597,376 x 10) = 98,716,508,160
    # train 6 x (123,653,376 + 591,361) x 800; score (policy + value) 2 x 124,244,737 x 800;
    # reference 2 x 123,653,376 x 800
    assert ppo.flops == pytest.approx({"rollout": 98_716_508_160, "train": 596_374_737_600,
                                       "score": 198_791_579_200, "reference": 197_845_401_600})
    assert ppo.data_tokens == 2 * 4 * 100 and ppo.epochs is None
    # every process scores the whole round: 8 processes score 8x
    wide = online_stage("PPOTrainer", Hardware(True, 2, "fp32", 8))
    assert wide.flops["score"] == pytest.approx(8 * ppo.flops["score"])


def test_group_pg_rounds_by_hand():
    group = online_stage("GroupPGTrainer")
    # PPO's rounds (test_ppo_rounds_by_hand): 800 trained tokens, 2 x 8 x 50 scored, the same rollouts; the LM alone
    # (123,653,376) trains and scores: train 6 x 123,653,376 x 800; score and reference 2 x 123,653,376 x 800
    assert group.tokens == 800
    assert group.flops == pytest.approx({"rollout": 98_716_508_160, "train": 593_536_204_800,
                                         "score": 197_845_401_600, "reference": 197_845_401_600})
    # the policy's state (no value head: 124,439,808 x 16 B) beside the frozen BC stage (x 4 B)
    assert group.static["weights"] == 124_439_808 * 4 and group.static["frozen"] == 124_439_808 * 4
    # without the KL term no reference runs or waits on the device
    plain = online_stage("GroupPGTrainer", kl_coef=0.0)
    assert "reference" not in plain.flops and "frozen" not in plain.static
    assert plain.flops["train"] == group.flops["train"]


def test_group_pg_step_cap():
    # 16 episodes x 2 sequences = 32 a round: 8 steps of 4 uncapped; a cap below that trains fewer steps
    cost = {cap: online_stage("GroupPGTrainer", episodes_per_round=16, max_steps_per_round=cap)
            for cap in (1, 2, 4, 8, 16, 0)}
    train = [cost[cap].flops["train"] for cap in (1, 2, 4, 8)]
    assert train == pytest.approx([6 * GPT2.lm * 2 * cap * 4 * 50 for cap in (1, 2, 4, 8)])
    assert cost[16].flops["train"] == cost[0].flops["train"] == train[-1]  # at or past 8 steps: the whole round
    # the cap bounds the update only: every round's sequences are still scored
    assert len({c.flops["score"] for c in cost.values()}) == 1


def test_archer_rounds_by_hand():
    """ArCHer on windowed_sample's turns (all 30 prompt + 5 action tokens): 2 rounds of 3 steps of 4 transitions, the
    first round critic-only, then the actor on every other step."""
    archer = online_stage("ArcherTrainer", updates_per_round=3, warmup_rounds=1, actor_every=2)
    # 6 steps; actor steps (2 - 1) x ceil(3 / 2) = 2; a step pads 4 states to 30 tokens (120), 4 pairs to 35 (140)
    #   rollout: PPO's (test_ppo_rounds_by_hand), 98,716,508,160
    #   critic_fit: 2 rounds x 2 x 85,056,000 x 8 turns x 30 = 81,653,760,000
    #   sample: 6 x 4 x (2 x 85,056,000 x (30 + 4) + 2 x 768 x 50,257 x 5) = 24 x 6,169,781,760 = 148,074,762,240
    #   target: 6 x 2 x 85,056,000 x (120 + 140) = 265,374,720,000; critic: 6 x 6 x 85,056,000 x 140
    #   actor: 2 x (2 x 85,056,000 + 6 x 123,653,376) x 140; reference (kl_coef 0.05): 2 x 2 x 123,653,376 x 140
    assert archer.flops == pytest.approx({"rollout": 98_716_508_160, "critic_fit": 81_653_760_000,
                                          "sample": 148_074_762_240, "target": 265_374_720_000,
                                          "critic": 428_682_240_000, "actor": 255_369_031_680,
                                          "reference": 69_245_890_560})
    assert archer.tokens == (6 + 2) * 140
    # trained: the policy and the critic's trunk; frozen: the target trunk and the BC stage (fp32)
    assert archer.static["weights"] == (124_439_808 + 85_056_000) * 4
    assert archer.static["frozen"] == (85_056_000 + 124_439_808) * 4
    plain = online_stage("ArcherTrainer", updates_per_round=3, warmup_rounds=2, actor_every=1, kl_coef=0.0)
    assert plain.flops["actor"] == 0 and "reference" not in plain.flops and plain.static["frozen"] == 85_056_000 * 4


def sweet_algo(**changes) -> dict:
    """SWEET-RL on windowed_sample's 2,000 turns: 10 actor steps of 2 pairs, 4 candidates a turn (2 pairs kept), half
    the turns; the critic 5 steps of 2 trajectory pairs, one turn of each trajectory with gradients."""
    algo = {"mode": "turn", "critic": "lm", "critic_from": None, "steps": 10, "batch_size": 2, "candidates": 4,
            "pairs_per_turn": 2, "turn_fraction": 0.5, "sample_turns": 1, "exact_scores": False,
            "score_batch_size": 8, "init_from": None, "bc": {"steps": 600, "batch_size": 64},
            "critic_stage": {"steps": 5, "batch_size": 2, "sample_turns": 1, "exact_scores": False, "kl_coef": 0.0}}
    return {**algo, **changes}


def sweet_cell(**changes) -> dict[str, scaling.Stage]:
    cell = scaling.stages("SweetTrainer", GPT2, windowed_sample(), sweet_algo(**changes), ZERO2_FP32,
                          Generation(8, 30, 10))
    return {s.name: s for s in cell}


def test_sweet_cell_by_hand():
    stages = sweet_cell()
    assert list(stages) == ["bc_stage", "sweet_critic", "sweet_candidates", "sweet"]
    critic, candidates, actor = stages["sweet_critic"], stages["sweet_candidates"], stages["sweet"]
    # critic: 2 pairs x 2 trajectories x 1 sampled turn = 4 sequences of 50 a step: 5 x 4 x 50 = 1,000 tokens through
    # the critic LM (6 x 123,653,376 x 1,000); the reference scores those 20 sequences once (2 x 123,653,376 x 1,000)
    assert critic.tokens == 1000 and critic.epochs == pytest.approx(20 / 2000)
    assert critic.flops == pytest.approx({"train": 741_920_256_000, "reference": 247_306_752_000})
    # candidates at min(half of 2,000 turns, ceil(1.25 x 10 x 2 / 2) = 13) turns, 8 a pass: a prompt of 30, 4 turns of 5
    #   sampling: 2 x 85,056,000 x (30 + 4 x 4) + 2 x 768 x 50,257 x 4 x 5 = 9,369,047,040 a turn, x 13
    #   critic and reference: 2 x (2 x 85,056,000 x 30 + 2 x 768 x 50,257 + 2 x 123,653,376 x 4 x 5) a turn, x 13
    assert candidates.tokens == 0
    assert candidates.flops == pytest.approx({"sample": 121_797_611_520, "critic": 263_293_934_592})
    # the sampler, the critic and its reference placed whole (fp32): 3 x 124,439,808 x 4 B; a pass of 32 rows:
    # KV 2 x 12 x 32 x (30 + 10) x 768 x 4 B, continuation logits 3 x 32 x 5 x 50,257 x 4 B
    assert candidates.memory == pytest.approx({"weights": 0, "grads": 0, "optimizer": 0, "frozen": 1_493_277_696,
                                               "kv_cache": 94_371_840, "logits": 96_493_440})
    # actor: 10 steps x 2 pairs x 2 sequences of 30 + 5 = 1,400 tokens through the actor and its reference
    assert actor.tokens == 1400
    assert actor.flops == pytest.approx({"train": 1_038_688_358_400, "reference": 346_229_452_800})
    # its data: 13 turns x 2 pairs x 2 sequences of 35 tokens, 20 of the 26 pairs used
    assert actor.data_tokens == 1820 and actor.epochs == pytest.approx(20 / 26)


def test_sweet_stages_follow_the_critic_and_the_start():
    full = sweet_cell()
    # the oracle critic: no critic stage, no critic model scores or waits beside the sampler
    oracle = sweet_cell(critic="oracle")
    assert list(oracle) == ["bc_stage", "sweet_candidates", "sweet"]
    assert "critic" not in oracle["sweet_candidates"].flops
    assert oracle["sweet_candidates"].static["frozen"] == 124_439_808 * 4
    # a given critic is not trained, but still scores the candidates
    given = sweet_cell(critic_from="a/critic")
    assert "sweet_critic" not in given and given["sweet_candidates"].flops == full["sweet_candidates"].flops
    # the value-head critic: trunk + V head, no LM head, no reference
    head = sweet_cell(critic="head")["sweet_critic"]
    assert head.flops == pytest.approx({"train": 6 * (GPT2.body + GPT2.v_head) * 1000}) and "frozen" not in head.static
    # init_from: the BC stage is not trained
    assert list(sweet_cell(init_from="a/bc/checkpoint")) == ["sweet_critic", "sweet_candidates", "sweet"]


def test_trajectory_dpo_by_hand():
    stages = sweet_cell(mode="trajectory_dpo", exact_scores=True)
    assert list(stages) == ["bc_stage", "trajectory_dpo"]  # no critic, no candidates
    dpo = stages["trajectory_dpo"]
    # 10 steps x 2 pairs x 2 trajectories: 1 sampled turn each with gradients (4 x 50 tokens a step), the other one
    # forward (exact scores); the reference scores both once: 10 x 8 sequences of 50
    assert dpo.tokens == 2000
    assert dpo.flops == pytest.approx({"train": 6 * GPT2.lm * 2000, "rest": 2 * GPT2.lm * 2000,
                                       "reference": 2 * GPT2.lm * 4000})
    # the reference's cache: a sequence is scored once, at most the dataset's 2,000
    long = sweet_cell(mode="trajectory_dpo", exact_scores=True, steps=1000)["trajectory_dpo"]
    assert long.flops["reference"] == pytest.approx(2 * GPT2.lm * 2000 * 50)


def test_zero_sharding_and_precision():
    params = 1_000
    assert scaling.model_state(params, Hardware(True, 2, "bf16", 8)) == {
        "weights": 2_000, "grads": 2_000 / 8, "optimizer": 12_000 / 8, "host": 0}
    assert scaling.model_state(params, Hardware(True, 3, "bf16", 8))["weights"] == 2_000 / 8
    assert scaling.model_state(params, Hardware(True, 1, "fp32", 4)) == {
        "weights": 4_000, "grads": 4_000, "optimizer": 8_000 / 4, "host": 0}
    # plain torch: bf16 is autocast over fp32 weights; DDP keeps a second copy of the gradients in its buckets
    assert scaling.model_state(params, Hardware(False, 0, "bf16", 2)) == {
        "weights": 4_000, "grads": 8_000, "optimizer": 8_000, "host": 0}
    assert scaling.model_state(params, Hardware(True, 3, "bf16", 2, offload_optimizer=True))["host"] == 12_000 / 2
    assert scaling.frozen_bytes(params, Hardware(True, 3, "bf16", 4)) == 500
    assert scaling.frozen_bytes(params, Hardware(True, 2, "bf16", 4)) == 4_000  # a whole fp32 replica


def test_padding_expectation_and_filtering():
    # two draws from {1, 2}: max is 1 with probability 1/4 -> 1 x 1/4 + 2 x 3/4 = 1.75
    assert scaling.expected_max([1, 2], 2) == pytest.approx(1.75)
    assert scaling.expected_max([7, 7, 7], 5) == pytest.approx(7)
    # 8 processes share a batch of 16: each pads its 2 sequences to their longest
    assert scaling.step_tokens([1, 2], 16, world=8) == pytest.approx(16 * 1.75)
    eps = tuple(EpisodeTokens(float(r), (r + 1,), (0,), (1,), (1,)) for r in range(4))
    # the top half by return: the 50th percentile of 0..3 is 1.5, so returns 2 and 3 stay
    top = TaskTokens(eps, 400).top(0.5)
    assert [e.ret for e in top.sample] == [2.0, 3.0] and top.dataset_episodes == 200 and top.tokens == 200 * 3.5


def test_episode_tokens_use_the_trainers_windows_and_truncation():
    # observation 10 tokens, action 2, observation 10, action 2, observation 10
    turns = [[10, False], [2, True], [10, False], [2, True], [10, False]]
    fo = sizing.episode_tokens(-1.0, turns, window=1, context=1024, max_prompt=100)
    # one sequence per action (window 1: the last observation, then the action); the first's next state is the
    # next link's observation; prompts are the window
    assert fo == EpisodeTokens(-1.0, seqs=(12, 12), nexts=(10, 0), prompts=(10, 10), actions=(2, 2))
    # two moves a sequence (`task.moves_per_sequence=2`): one sequence, the window, then both actions: 10 + 2 + 10 + 2
    assert sizing.episode_tokens(-1.0, turns, window=1, context=1024, max_prompt=100, moves=2).seqs == (24,)
    whole = sizing.episode_tokens(-1.0, turns, window=None, context=20, max_prompt=15)
    # one sequence of 34 tokens, left-truncated to the context (20); the second prompt (22) to 15
    assert whole == EpisodeTokens(-1.0, seqs=(20,), nexts=(0,), prompts=(10, 15), actions=(2, 2))


def test_chars_per_token_fallback_counts_segments():
    count, label = sizing.segment_counter({"_target_": "lmrl.models.factory.load_pretrained", "path": "no/such-model",
                                           "name": "x"}, "wordle", [])
    # 1.688 chars/token on Wordle: "s l a t e\n" (10 characters) -> round(5.92) = 6; an empty segment has none
    assert label == "1.688 chars/token" and count("s l a t e\n") == 6 and count("") == 0 and count("a") == 1
    assert sizing.chars_per_token(["abcd", "ef"], len) == 1.0


def run_dry(capsys, args: list[str]) -> str:
    assert sweep.main(args) == 0
    return capsys.readouterr().out


def test_dry_run_prints_costs_and_caches_the_sample(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LMRL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    records = tmp_path / "records"
    args = ["experiment=table2_small", f"records.dir={records}", "task.data.recipe.episodes=30", "--dry-run",
            "--plan-sample", "12", "--only", "task=maze_fo", "algo=bc,ilql,ppo,online_filtered_bc", "seed=0"]
    out = run_dry(capsys, args)
    lines = out.splitlines()
    header = next(ln for ln in lines if ln.startswith("task "))
    assert header.split()[:5] == ["task", "algo", "cells", "N", "tok/epoch"]
    rows = {ln.split()[1]: ln.split() for ln in lines if ln.startswith("maze_fo ")}
    assert set(rows) == {"bc", "ilql", "ppo", "online_filtered_bc"}
    # the tiny GPT-2: 2 x (12 x 128^2 + 13 x 128) + 256 (final norm) + 2 x 512 x 128 (wte, wpe) = 527,872
    assert rows["bc"][3] == "528k"
    assert next(ln for ln in lines if ln.startswith("total")).split()[1] == "4"
    assert "maze_fo BPE-512 trained on the sample" in " ".join(out.split())  # the notes wrap lines
    assert not (records / "plan.json").exists()
    [cached] = (tmp_path / "cache" / "plan" / "maze_fo").glob("*.json")
    assert len(json.loads(cached.read_text())["episodes"]) == 12

    # a second dry run reads the cached statistics: no dataset sample is made again
    monkeypatch.setattr(sizing, "sample_episodes", lambda *a: pytest.fail("the sample was not cached"))
    assert run_dry(capsys, args) == out


def test_dry_run_costs_the_turn_level_methods(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LMRL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = run_dry(capsys, ["experiment=table2_small", f"records.dir={tmp_path}", "task.data.recipe.episodes=30",
                           "sweep.skip=null", "--dry-run", "--plan-sample", "12", "--only", "task=maze_po",
                           "algo=sweet,group_pg,archer", "seed=0"])
    rows = {ln.split()[1]: ln.split() for ln in out.splitlines() if ln.startswith("maze_po ")}
    assert set(rows) == {"sweet", "group_pg", "archer"} and "no cost layout" not in out
    assert all(float(r[7]) > 0 for r in rows.values())  # PFLOP


def test_totals_count_a_shared_bc_stage_once(tmp_path, monkeypatch):
    monkeypatch.setenv("LMRL_CACHE", str(tmp_path / "cache"))
    plan = sweep.plan("table2_small", [f"records.dir={tmp_path}", "task.data.recipe.episodes=20"],
                      {"task": {"maze_fo"}, "algo": {"bc", "filtered_bc", "ilql", "ppo"}, "seed": {"0"}})
    args = sweep_args(["--plan-sample", "10"])
    costs = {c.algo: c for c in sizing.sweep_costs(plan, "local", 10)}
    # ILQL and PPO of one (task, seed) train the same BC stage once: the total counts it once
    bc_stage = costs["ppo"].bc_stage
    assert costs["bc"].bc_stage is None and costs["ilql"].bc_stage.flops == pytest.approx(bc_stage.flops)
    total = sizing.totals(list(costs.values()), plan, args)
    assert total["flops"] == pytest.approx(sum(c.flops for c in costs.values()) - sum(bc_stage.flops.values()))
    assert total["tokens"] == pytest.approx(sum(s.tokens for c in costs.values() for s in c.stages) - bc_stage.tokens)


def sweep_args(argv: list[str]):
    import argparse

    parser = argparse.ArgumentParser()
    sizing.add_arguments(parser)
    return parser.parse_args(argv)


def test_paper_scale_cell_without_downloads(tmp_path, monkeypatch, capsys):
    """table2's GPT-2 cells are costed offline: GPT-2's published shape, and its tokenizer or the ratio."""
    monkeypatch.setenv("LMRL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = run_dry(capsys, ["experiment=table2", f"records.dir={tmp_path}", "--dry-run", "--plan-sample", "8",
                           "--only", "task=wordle", "algo=bc", "seed=0"])
    row = next(ln for ln in out.splitlines() if ln.startswith("wordle "))
    assert row.split()[3] == "124M" and "ZeRO-2 fp32 x1 process(es)" in out


def test_a_cell_that_cannot_be_costed_says_why(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LMRL_CACHE", str(tmp_path / "cache"))

    def broken(*args):
        raise RuntimeError("the generator is broken")

    monkeypatch.setattr(sizing, "sample_episodes", broken)
    out = run_dry(capsys, ["experiment=table2_small", f"records.dir={tmp_path}", "--dry-run", "--only",
                           "task=maze_fo", "algo=bc", "seed=0"])
    assert "maze_fo/bc/s0" in out  # the plan is still listed
    assert "n/a maze_fo/bc: RuntimeError: the generator is broken" in out


def test_the_sample_cache_key_follows_how_tokens_are_counted(tmp_path, monkeypatch):
    monkeypatch.setenv("LMRL_CACHE", str(tmp_path))
    monkeypatch.setattr(sizing, "on_this_machine", lambda path: False)  # GPT-2's tokenizer counted by its ratio
    cfg = sweep.compose_cfg(["task=wordle", "model=gpt2"])
    before = sizing.profile_path(cfg, 8)
    # a re-measured ratio is a new cache entry, not stale counts
    monkeypatch.setitem(sizing.CHARS_PER_TOKEN, "wordle", 2.0)
    assert sizing.profile_path(cfg, 8) != before
    assert sizing.profile_path(cfg, 9) != sizing.profile_path(cfg, 8)  # a different sample size too


def test_the_sweep_check_experiment_chains_its_mc_cell_to_the_bc_cell(tmp_path, monkeypatch, capsys):
    """experiment=sweep_check (what the Slurm test launches): the MC cell's BC stage is the BC cell's run, so the
    launcher orders it after that cell; a drift between the two budgets would train the stage twice."""
    monkeypatch.setenv("LMRL_CACHE", str(tmp_path / "cache"))
    out = run_dry(capsys, ["experiment=sweep_check", f"records.dir={tmp_path}", "--dry-run"])
    assert "2 cells, 0 with a record" in out
    [mc] = [line for line in out.splitlines() if "maze_fo/mc/s0" in line and "algo.bc.steps" in line]
    assert mc.rstrip().endswith("(after maze_fo/bc/s0: its BC stage)")
