"""Self-play's pieces, checked by hand: role-conditioned advantages, the opponent pool, the two-seat rollout, and the
trainer end to end on debug=smoke."""

import json
import random
import signal
import subprocess
import time

import pandas as pd
import pytest
import torch

from lmrl.algos.selfplay import OpponentPool, SelfPlayConfig
from lmrl.algos.turn_losses import role_advantages
from lmrl.envs.base import Text
from lmrl.envs.two_player import (
    KuhnPoker, TicTacToe, VersusEnv, minimax_tictactoe, random_legal, win_or_block,
)
from lmrl.rollout.two_player import play_games
from tests.e2e import ROOT, cli_command, cli_env, run_cli


# -- role-conditioned advantages -------------------------------------------------------------------------------
def test_role_advantages_by_hand():
    """Seat 0's returns 1 and 0 (mean 0.5) move its baseline 0.2 to 0.5*0.2 + 0.5*0.5 = 0.35; seat 1's -1 and 1 (mean
    0) move -0.4 to -0.2; each advantage is the return minus its own seat's moved baseline."""
    returns = torch.tensor([1.0, -1.0, 0.0, 1.0])
    roles = torch.tensor([0, 1, 0, 1])
    adv, moved = role_advantages(returns, roles, torch.tensor([0.2, -0.4]), decay=0.5)
    assert moved.tolist() == pytest.approx([0.35, -0.2])
    assert adv.tolist() == pytest.approx([0.65, -0.8, -0.35, 1.2])


def test_a_role_absent_from_the_batch_keeps_its_baseline():
    adv, moved = role_advantages(torch.tensor([1.0, 1.0]), torch.tensor([0, 0]), torch.tensor([0.0, 0.7]), 0.9)
    assert moved.tolist() == pytest.approx([0.1, 0.7])
    assert adv.tolist() == pytest.approx([0.9, 0.9])


def test_the_seat_baseline_removes_the_first_movers_edge():
    """X wins 60% of its games and O 20% (the rest drawn): after many rounds each seat's baseline sits at its own
    mean return, so an X win and an O win earn nearly the same advantage although X's games pay more on average."""
    rng, baselines = random.Random(0), torch.zeros(2)
    for _ in range(300):
        x = [1.0 if rng.random() < 0.6 else (-1.0 if rng.random() < 0.5 else 0.0) for _ in range(64)]
        o = [-r for r in x]
        _, baselines = role_advantages(torch.tensor(x + o), torch.tensor([0] * 64 + [1] * 64), baselines, 0.95)
    # X's mean return is 0.6 - 0.2 = 0.4, O's -0.4
    assert baselines[0] == pytest.approx(0.4, abs=0.1) and baselines[1] == pytest.approx(-0.4, abs=0.1)
    adv, _ = role_advantages(torch.tensor([1.0, 1.0]), torch.tensor([0, 1]), baselines, 0.95)
    assert adv[1] > adv[0] + 0.6  # an O win beats its seat's odds by far more than an X win does


# -- opponent pool -------------------------------------------------------------------------------------------
def test_the_pool_keeps_frozen_copies_of_the_newest_snapshots():
    model = torch.nn.Linear(2, 1)
    pool = OpponentPool(size=3)
    for r in range(5):
        with torch.no_grad():
            model.weight.fill_(float(r))
        pool.add(r, model)
    assert pool.rounds() == [2, 3, 4]  # the oldest dropped
    with torch.no_grad():
        model.weight.fill_(99.0)  # training after a snapshot does not reach it
    assert [s["weight"].max().item() for _, s in pool.snapshots] == [2.0, 3.0, 4.0]
    restored = OpponentPool(size=3)
    restored.load(pool.state())
    assert restored.rounds() == [2, 3, 4]


def test_the_pool_samples_every_snapshot_uniformly():
    model, pool = torch.nn.Linear(1, 1), OpponentPool(size=4)
    for r in range(4):
        pool.add(r, model)
    rng = random.Random(0)
    counts = [0] * 4
    for _ in range(4000):
        counts[pool.sample(rng)[0]] += 1
    assert all(900 < c < 1100 for c in counts), counts
    with pytest.raises(IndexError, match="empty"):
        OpponentPool(2).sample(rng)


def test_config_validation_names_the_keys():
    problems = SelfPlayConfig(self_play_fraction=1.5, pool_size=0, baseline_decay=1.0, rating_games=0).validate()
    text = "; ".join(problems)
    for key in ("self_play_fraction", "pool_size", "baseline_decay", "rating_games"):
        assert key in text


def test_move_end_advantage_false_leaves_each_moves_last_token_to_the_kl_term():
    """Moves ("check", "\\n"), ("bet", "call", "\\n") and ("\\n",) after observations: with the option off, the
    episode's advantage sits on every decision but the first two moves' end-of-move tokens (an empty move's "\\n" is
    its only decision, and keeps it); on (the default), on all six."""
    from types import SimpleNamespace

    import numpy as np

    from lmrl.algos.selfplay import SelfPlayTrainer
    from lmrl.data.tokenize import TokenSequence

    mask = np.array([0, 0, 1, 1, 0, 1, 1, 1, 0, 1], dtype=bool)
    seq = TokenSequence(np.arange(10, dtype=np.int32), mask, np.zeros(10, np.float32), True)
    logp = torch.zeros(int(mask[1:].sum()))
    on = SelfPlayTrainer.token_advantages(SimpleNamespace(cfg=SelfPlayConfig()), seq, logp, -0.5)
    off = SelfPlayTrainer.token_advantages(SimpleNamespace(cfg=SelfPlayConfig(move_end_advantage=False)), seq, logp,
                                           -0.5)
    assert on.tolist() == [-0.5] * 6
    assert off.tolist() == [-0.5, 0.0, -0.5, -0.5, 0.0, -0.5]


# -- two-seat rollout ----------------------------------------------------------------------------------------
class FirstLegal:
    """A batched 'LM' policy that answers the first legal move it can read off a tic-tac-toe observation, and counts
    its calls."""

    def __init__(self):
        self.calls = []

    def act(self, histories):
        self.calls.append(len(histories))
        out = []
        for (obs,) in histories:
            rows = [line.split() for line in obs.text.splitlines()[2:5]]
            cell = next(3 * r + c for r in range(3) for c in range(3) if rows[r][c] == ".")
            out.append(f"mark {cell // 3 + 1} {cell % 3 + 1}\n")
        return out


def test_a_recorded_seat_is_the_episode_versus_env_records():
    """minimax in seat 0 against win-or-block: the seat-0 episode of `play_games` is, segment for segment and reward
    for reward, what `VersusEnv` records for an agent playing minimax against the same opponent and seed."""
    for seed in range(4):
        [record] = play_games(TicTacToe, [(minimax_tictactoe, win_or_block(random.Random(seed)))], [seed])
        env = VersusEnv(TicTacToe(), win_or_block(random.Random(seed)))
        history, _ = env.reset(seed=seed, options={"seat": 0})
        rewards = [0.0]
        while not env.game.done:
            result = env.step(minimax_tictactoe(env.game))
            rewards += [result.reward, 0.0]
        episode = record.episodes[0]
        assert episode.turns == list(result.history) and episode.rewards == rewards
        assert episode.info["seat"] == 0 and episode.total_return == record.returns[0] >= 0  # minimax never loses
        assert record.episodes[1].total_return == record.returns[1] == -record.returns[0]


def test_the_games_of_one_policy_are_answered_in_one_batch():
    policy = FirstLegal()
    records = play_games(TicTacToe, [(policy, policy)] * 5 + [(policy, random_legal(random.Random(1)))] * 3,
                         list(range(8)))
    # turn by turn: every game's mover is the policy, except seat 1 of the last three games
    assert policy.calls[0] == 8 and max(policy.calls) == 8
    # first-legal against itself: X takes 1 1, 1 3, 2 2 and 3 1, the anti-diagonal, on its fourth move
    assert all(r.returns == (1.0, -1.0) for r in records[:5])
    assert all(ep.turns[1] == Text("mark 1 1\n", True) for r in records for ep in r.episodes[:1])


def test_a_forfeit_ends_the_game_and_a_seat_that_never_moved_has_no_episode():
    records = play_games(TicTacToe, [(lambda g: "pass\n", minimax_tictactoe)], [0], record=[(True, True)])
    [record] = records
    assert record.returns == (-1.0, 1.0) and record.forfeited_by == 0
    assert record.episodes[1] is None
    episode = record.episodes[0]
    assert episode.invalid_turns == 1 and episode.info["invalid"] and episode.total_return == -1.0


def test_kuhn_records_both_seats_with_opposite_returns():
    rng = random.Random(3)
    records = play_games(KuhnPoker, [(random_legal(rng), random_legal(rng))] * 20, list(range(20)),
                         info=[{"opponent": "self"}] * 20)
    for r in records:
        a, b = r.episodes
        assert a.total_return == -b.total_return == r.returns[0] and a.info["opponent"] == "self"
        assert "Your card:" in a.turns[0].text and a.info["seat"] == 0 and b.info["seat"] == 1
    with pytest.raises(ValueError, match="one entry per game"):
        play_games(KuhnPoker, [(random_legal(rng), random_legal(rng))], [0, 1])


# -- the trainer end to end -------------------------------------------------------------------------------------
def test_a_killed_selfplay_run_resumes_with_its_pool_baselines_and_ratings(tmp_path):
    """Kuhn poker, debug=smoke, 3 rounds with a checkpoint after each and `random` in the pool: killed once its first
    checkpoint is written, the resumed run finishes every round; the Elo curve has the start's rating and each
    round's, the rollouts meet only the pool's opponents, and the checkpoint holds the pool."""
    cache, run = tmp_path / "cache", tmp_path / "run"
    args = ["task=kuhn", "algo=selfplay", "debug=smoke", "algo.rounds=3", "algo.pool_scripted=[random]",
            "checkpoint.every_steps=1"]
    proc = subprocess.Popen(cli_command("lmrl.train", args, run), cwd=ROOT, env=cli_env(cache),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    latest, deadline = run / "checkpoints" / "latest", time.time() + 300
    while not latest.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert latest.exists() and not (run / "metrics.json").exists()
    metrics = run_cli("lmrl.train", args, run, cache)
    assert metrics["algo"] == "selfplay" and "elo_start" in metrics and "elo_final" in metrics
    elo = (run / "elo.csv").read_text().splitlines()
    assert elo[0] == "round,rating,low,high,games" and [int(r.split(",")[0]) for r in elo[1:]] == [0, 1, 2, 3]
    assert (run / "rounds.csv").read_text().count("\n") == 4 and (run / "elo.png").stat().st_size > 0
    opponents = {json.loads(line)["info"]["opponent"] for r in range(3)
                 for line in (run / "rollouts" / f"round_{r:03d}.jsonl").read_text().splitlines()}
    assert opponents <= {"self", "random", "round_0", "round_2"} and "self" in opponents
    pool = torch.load(run / "checkpoints" / (run / "checkpoints" / "latest").read_text().strip() / "opponent_pool.pt",
                      weights_only=False)
    assert [r for r, _ in pool] == [0, 2]  # the start and the snapshot after round 2 (snapshot_every 2)


def test_pool_scripted_names_must_be_the_games_players(tmp_path):
    result = subprocess.run(cli_command("lmrl.train", ["task=tictactoe", "algo=selfplay", "debug=smoke",
                                                       "algo.pool_scripted=[always_bet]"], tmp_path),
                            cwd=ROOT, env=cli_env(tmp_path / "cache"), capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert "pool_scripted: ['always_bet'] are not tictactoe players; choose among" in result.stderr


def test_curves_gathers_each_runs_ratings_with_its_provenance(tmp_path):
    """`python -m lmrl.algos.selfplay curves`: every run's elo.csv in one table, each row naming its seed, commit
    (dirty marked), precision and machine, and one plot; a record of another algorithm is refused."""
    from lmrl.algos.selfplay import main

    records = []
    for seed, dirty in ((0, False), (1, True)):
        run = tmp_path / f"run{seed}"
        run.mkdir()
        (run / "elo.csv").write_text("round,rating,low,high,games\n0,1000.04,950,1050,10\n5,1100,1040,1160,10\n")
        record = tmp_path / f"kuhn__selfplay__s{seed}.json"
        record.write_text(json.dumps({"task": "kuhn", "algo": "selfplay", "seed": seed, "run_dir": str(run),
                                      "git_commit": "0123456789abcdef", "git_dirty": dirty, "precision": "fp32",
                                      "cpu_model": "AMD EPYC", "cpu_bf16": False, "gpu": None}))
        records.append(str(record))
    out = tmp_path / "curves" / "kuhn_selfplay"
    assert main(["curves", *records, "--out", str(out)]) == 0
    frame = pd.read_csv(out.with_suffix(".csv"))
    assert list(frame.columns) == ["game", "round", "rating", "low", "high", "games", "seed", "commit", "precision",
                                   "machine"]
    assert frame["seed"].tolist() == [0, 0, 1, 1] and frame["rating"].tolist()[0] == 1000.0
    assert frame["commit"].tolist() == ["0123456"] * 2 + ["0123456+dirty"] * 2
    assert set(frame["machine"]) == {"AMD EPYC (no bf16)"} and out.with_suffix(".png").stat().st_size > 1000
    # no run has a rounds.csv: no per-round file
    assert not (tmp_path / "curves" / "kuhn_selfplay_rounds.csv").exists()
    # seed 1's training rounds: their invalid share and KL, one row a round (seed 0 has none and is left out)
    (tmp_path / "run1" / "rounds.csv").write_text("round,return_mean,invalid_rate,kl\n0,0.1,0.0,0.02\n1,0.0,0.41234,9.3\n")
    assert main(["curves", *records, "--out", str(out)]) == 0
    rounds = pd.read_csv(tmp_path / "curves" / "kuhn_selfplay_rounds.csv")
    assert rounds.to_dict("list") == {"seed": [1, 1], "round": [0, 1], "invalid_rate": [0.0, 0.4123], "kl": [0.02, 9.3]}
    other = tmp_path / "bc.json"
    other.write_text(json.dumps({"task": "kuhn", "algo": "bc", "seed": 0, "run_dir": str(tmp_path / "run0")}))
    with pytest.raises(ValueError, match="not the record of a finished self-play run"):
        main(["curves", str(other), "--out", str(out)])


# -- curves across runs ------------------------------------------------------------------------------------------
def plant_run(tmp_path, name: str, task: str, seed: int, curve: str, rows: list[dict]):
    run = tmp_path / name
    run.mkdir()
    pd.DataFrame(rows).to_csv(run / curve, index=False)
    record = {"algo": "selfplay", "task": task, "seed": seed, "run_dir": str(run), "git_commit": "abcdef0123",
              "git_dirty": seed == 1, "precision": "fp32", "cpu_model": "Some CPU", "cpu_bf16": False}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(record))
    return path


def test_curves_gather_elo_or_seat_scores_with_provenance(tmp_path):
    from lmrl.algos.selfplay import collect_curves, main

    seats = [plant_run(tmp_path, f"cd{s}", "car_dealer_duel", s, "seats.csv",
                       [{"round": r, "seat0": 0.1 * r + s, "seat0_se": 0.01, "seat0_positive": 0.5, "seat1": -0.1,
                         "seat1_se": 0.02, "seat1_positive": 0.1} for r in (0, 4)]) for s in (1, 0)]
    frame = collect_curves(seats)
    assert list(frame["seed"]) == [0, 0, 1, 1] and list(frame["round"]) == [0, 4, 0, 4]
    assert list(frame["commit"]) == ["abcdef0"] * 2 + ["abcdef0+dirty"] * 2
    assert set(frame["machine"]) == {"Some CPU (no bf16)"} and frame["seat0"].iloc[1] == pytest.approx(0.4)
    assert main(["curves", *map(str, seats), "--out", str(tmp_path / "out" / "cd")]) == 0
    assert (tmp_path / "out" / "cd.png").stat().st_size > 10_000 and (tmp_path / "out" / "cd.csv").is_file()
    elo = plant_run(tmp_path, "ttt", "tictactoe", 0, "elo.csv",
                    [{"round": 0, "rating": 900.0, "low": 850.0, "high": 950.0, "games": 300}])
    assert collect_curves([elo])["rating"].tolist() == [900.0]
    with pytest.raises(ValueError, match="one at a time"):
        collect_curves([elo, seats[0]])
    (tmp_path / "cd0" / "seats.csv").unlink()
    with pytest.raises(ValueError, match="not the record of a finished self-play run"):
        collect_curves([seats[1]])
