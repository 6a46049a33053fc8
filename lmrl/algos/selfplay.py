"""Self-play on two-player text games (`algo=selfplay`, `task=tictactoe`, `task=kuhn` or `task=car_dealer_duel`):
SPIRAL's recipe.

Each round plays `episodes_per_round` games, the learner's seat alternating:

- a share `self_play_fraction` against the current policy itself: both seats are the learner and both are trained;
- the rest against one opponent drawn uniformly from a pool of past snapshots of the policy (the BC start and every
  `snapshot_every`-th round's weights, the newest `pool_size` kept), and of the scripted players `pool_scripted`
  names (none by default): only the learner's seat is trained.

Every recorded seat's game is an episode (`lmrl.rollout.two_player.play_games`).  Its advantage is role-conditioned
(`lmrl.algos.turn_losses.role_advantages`): R minus an exponential moving average of the returns of its seat, one
baseline per seat, so that the first mover's edge does not pass for skill.  The loss is PPO's clipped surrogate on
every token of the episode's moves with old log-probs from a teacher-forced pass, plus `kl_coef` x the k3 estimate of
KL to the frozen BC start (group PG's update with another baseline).

Every `rate_every` rounds (and before the first) the policy is rated on the game's Elo ladder (`lmrl.ladder.rate`:
matches against random play, a middle rung and a perfect or equilibrium player, anchored at random = 1000); the
ratings with their 95% intervals go to the logger, `<run>/elo.csv` and `<run>/elo.png`.  A general-sum game (Car
Dealer's duel, a learned seller against a learned buyer) has no ladder: the policy's mean return in each seat against
the task's scripted opponent goes to `<run>/seats.csv` and `<run>/seats.png` instead (`lmrl.ladder.seat_scores`).
The run's own evaluation is the task's protocol against `task.env.opponent`.
"""

from __future__ import annotations

import functools
import logging
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import torch
from omegaconf import OmegaConf

from lmrl.algos.base import ConfigError
from lmrl.algos.bc import lm_policy
from lmrl.algos.group_pg import GroupPGTrainer
from lmrl.algos.online import OnlineConfig
from lmrl.algos.sweet_critic import load_lm
from lmrl.algos.turn_losses import role_advantages
from lmrl.data.jsonl import write_episodes
from lmrl.data.tokenize import move_ends
from lmrl.dist import gather_lists, is_main, shard
import lmrl.envs.dialogue.car_dealer_game  # noqa: F401 - registers car_dealer (task=car_dealer_duel)
from lmrl.envs.base import Episode
from lmrl.envs.two_player import GAMES, SCRIPTED, scripted_player
from lmrl.rollout.two_player import play_games

log = logging.getLogger(__name__)

POOL_NAME = "opponent_pool"


@dataclass
class SelfPlayConfig(OnlineConfig):
    """`algo=selfplay`: `OnlineConfig` plus the self-play mix, the opponent pool, the role baselines' decay, PPO's clip,
    the KL weight and the rating schedule."""

    name: str = "selfplay"
    # Share of a round's games the policy plays against itself (both seats trained); the rest meet a pool snapshot.
    self_play_fraction: float = 0.5
    # Past snapshots kept as opponents (oldest dropped first), and how often (rounds) one is taken.
    pool_size: int = 8
    snapshot_every: int = 2
    # Scripted players of the game (`lmrl.envs.two_player.SCRIPTED`, e.g. [random]) drawn as pool opponents beside
    # the snapshots, each as likely as one snapshot ([] = the policy meets only itself and its past).
    pool_scripted: list[str] = field(default_factory=list)
    # Decay of each seat's moving-average baseline (SPIRAL: 0.95).
    baseline_decay: float = 0.95
    cliprange: float = 0.2
    # Weight of the k3 KL(pi || pi_BC) term (0 = none).
    kl_coef: float = 0.05
    # Whether the token that ends a move after its text (its end-of-move token) carries the episode's advantage;
    # false: it gets none, and only the KL term trains it (an empty move's one token keeps its advantage)
    # (docs/algorithms/self-play.md#kuhn-poker).
    move_end_advantage: bool = True
    # Sequences per no-grad pass when computing old log-probs (memory, not math).
    score_batch_size: int = 64
    # Rate the policy on the Elo ladder every this many rounds and before the first (0 = never), with this many
    # matches against each rung.
    rate_every: int = 5
    rating_games: int = 100

    def validate(self) -> list[str]:
        problems = super().validate()
        if not 0.0 <= self.self_play_fraction <= 1.0:
            problems.append(f"self_play_fraction must lie in [0, 1] (got {self.self_play_fraction})")
        if self.pool_size < 1 or self.snapshot_every < 1:
            problems.append(f"pool_size and snapshot_every must be >= 1 (got {self.pool_size}, {self.snapshot_every})")
        if not 0.0 <= self.baseline_decay < 1.0:
            problems.append(f"baseline_decay must lie in [0, 1) (got {self.baseline_decay})")
        if self.cliprange <= 0 or self.score_batch_size < 1 or self.kl_coef < 0:
            problems.append("cliprange must be > 0, score_batch_size >= 1 and kl_coef >= 0")
        if self.rate_every < 0 or self.rating_games < 1:
            problems.append(f"rate_every must be >= 0 and rating_games >= 1 (got {self.rate_every}, "
                            f"{self.rating_games})")
        return problems


class OpponentPool:
    """Frozen past weights of the policy, newest last: `add` keeps a CPU copy (dropping the oldest past `size`),
    `sample` draws one uniformly.  `state`/`load` carry it through a checkpoint."""

    def __init__(self, size: int):
        self.size = size
        self.snapshots: list[tuple[int, dict]] = []  # (round it was taken after, state dict)

    def __len__(self) -> int:
        return len(self.snapshots)

    def add(self, round_idx: int, model: torch.nn.Module) -> None:
        """Keep a copy of `model`'s weights as of `round_idx` (later training does not change it)."""
        state = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
        self.snapshots = (self.snapshots + [(round_idx, state)])[-self.size :]

    def sample(self, rng: random.Random) -> tuple[int, dict]:
        """One snapshot, uniformly: (its round, its weights)."""
        if not self.snapshots:
            raise IndexError("the opponent pool is empty")
        return self.snapshots[rng.randrange(len(self.snapshots))]

    def rounds(self) -> list[int]:
        """The rounds of the kept snapshots, oldest first."""
        return [r for r, _ in self.snapshots]

    def state(self) -> list[tuple[int, dict]]:
        """What a checkpoint saves: the (round, weights) pairs."""
        return self.snapshots

    def load(self, state: list[tuple[int, dict]]) -> None:
        """Take the snapshots of `state` (a checkpoint's), the newest `size` of them."""
        self.snapshots = [(int(r), s) for r, s in state][-self.size :]


class SelfPlayTrainer(GroupPGTrainer):
    """Self-play with role-conditioned advantages and an opponent pool (see the module docstring)."""

    config_class = SelfPlayConfig

    def __init__(self, cfg: SelfPlayConfig, task, *args, **kwargs):
        game = task.cfg.env.get("game")
        if game not in GAMES:  # before the BC stage is trained
            raise ConfigError(f"algo=selfplay plays a two-player game: task=tictactoe, task=kuhn or "
                              f"task=car_dealer_duel, not task={task.name}")
        unknown = set(cfg.pool_scripted) - set(SCRIPTED[game])
        if unknown:
            raise ConfigError(f"pool_scripted: {sorted(unknown)} are not {game} players; choose among "
                              f"{sorted(SCRIPTED[game])}")
        # The game as the task's env builds it: its settings beside `game` and `opponent` (Car Dealer's
        # max_utterances and view_lines) go to the game's constructor.
        settings = {k: v for k, v in OmegaConf.to_container(task.cfg.env, resolve=True).items()
                    if k not in ("_target_", "game", "opponent")}
        self.game_name, self.make_game = game, functools.partial(GAMES[game], **settings)
        # A zero-sum game's policy is rated on its Elo ladder; a general-sum one's (Car Dealer's duel) is scored in
        # each seat against the task's scripted opponent (`lmrl.ladder.seat_scores`).
        self.zero_sum = GAMES[game].zero_sum
        super().__init__(cfg, task, *args, **kwargs)

    def setup_models(self, bc_dir: Path) -> None:
        """The policy LM (dropout off), the frozen BC reference with `kl_coef` > 0, a frozen LM that plays the pool's
        snapshots, and the pool holding the start."""
        self.engine.setup(load_lm(bc_dir), self.optim_config())
        self.reference = self.engine.prepare_frozen(load_lm(bc_dir)) if self.cfg.kl_coef > 0 else None
        self.opponent_lm = load_lm(bc_dir).eval().to(self.engine.device)
        self.pool = OpponentPool(self.cfg.pool_size)
        self.pool.add(0, self.opponent_lm)
        self.baselines = torch.zeros(2)
        self.ratings: list[dict] = []

    def opponent_policy(self, state: dict):
        """A sampling policy over the frozen opponent LM holding `state`."""
        self.opponent_lm.load_state_dict(state)
        eval_cfg = OmegaConf.merge(self.task.cfg.eval, {"temperature": self.cfg.temperature})
        return lm_policy(self.opponent_lm, self.tokenizer, self.task, eval_cfg, self.seed + 1)

    def collect(self, round_idx: int) -> list[Episode]:
        """The round's games (module docstring): learner seats alternate; the self-play games first."""
        if self.cfg.rate_every and not self.ratings:
            self.rate(0)
        rng = random.Random(f"{self.seed}/selfplay/{round_idx}")
        n = self.cfg.episodes_per_round
        n_self = round(n * self.cfg.self_play_fraction)
        learner = self.rollout_policy
        pick = rng.randrange(len(self.pool) + len(self.cfg.pool_scripted))
        if pick < len(self.pool):
            opp_round, state = self.pool.snapshots[pick]
            opponent, opp_name = (self.opponent_policy(state) if n_self < n else None), f"round_{opp_round}"
        else:
            opp_name = self.cfg.pool_scripted[pick - len(self.pool)]
            opponent = scripted_player(self.game_name, opp_name, random.Random(f"{self.seed}/{round_idx}/opponent"))
        seats, record, info = [], [], []
        for g in range(n):
            if g < n_self:
                seats.append((learner, learner))
                record.append((True, True))
                info.append({"opponent": "self"})
            else:
                seat = g % 2
                seats.append((learner, opponent) if seat == 0 else (opponent, learner))
                record.append((seat == 0, seat == 1))
                info.append({"opponent": opp_name})
        seeds = [rng.randrange(2**31) for _ in range(n)]
        games = gather_lists(play_games(self.make_game, shard(seats), shard(seeds), shard(record), shard(info)))
        episodes = [ep for rec in games for ep in rec.episodes if ep is not None]
        if self.run_dir is not None and is_main():
            write_episodes(self.run_dir / "rollouts" / f"round_{round_idx:03d}.jsonl", episodes)
        return episodes

    def update(self, episodes: list[Episode], round_idx: int) -> dict:
        """Role-conditioned advantages over the round's episodes, PPO's minibatch loop, then the pool and the
        rating schedule."""
        returns = torch.tensor([ep.total_return for ep in episodes], dtype=torch.float32)
        roles = torch.tensor([int(ep.info["seat"]) for ep in episodes], dtype=torch.long)
        adv, self.baselines = role_advantages(returns, roles, self.baselines, self.cfg.baseline_decay)
        pool_eps = [ep for ep in episodes if ep.info.get("opponent") != "self"]
        logs = {"baseline_seat0": float(self.baselines[0]), "baseline_seat1": float(self.baselines[1]),
                "invalid_rate": sum(ep.invalid_turns > 0 for ep in episodes) / max(len(episodes), 1),
                "pool_size": len(self.pool),
                "score_vs_pool": (sum((ep.total_return > 0) + 0.5 * (ep.total_return == 0) for ep in pool_eps)
                                  / len(pool_eps)) if pool_eps else float("nan")}
        logs.update(self.learn_from(episodes, adv.tolist(), round_idx))
        done = round_idx + 1
        if done % self.cfg.snapshot_every == 0:
            self.pool.add(done, self.policy_lm())
        if self.cfg.rate_every and (done % self.cfg.rate_every == 0 or done == self.cfg.rounds):
            keys = ("rating", "low", "high") if self.zero_sum else ("seat0", "seat1")
            logs.update({f"{'elo' if self.zero_sum else 'score'}_{k}": v for k, v in self.rate(done).items()
                         if k in keys})
        return logs

    def token_advantages(self, seq, logp: torch.Tensor, advantage: float) -> torch.Tensor:
        """The episode's advantage on every decision, or, with `move_end_advantage` false, on all but the tokens that
        end a move after its text (`move_ends`), which get 0."""
        adv = torch.full_like(logp, advantage)
        if not self.cfg.move_end_advantage:
            adv[torch.from_numpy(move_ends(seq.action_mask)).to(adv.device)] = 0.0
        return adv

    def rate(self, rounds_done: int) -> dict:
        """The current policy's rating on the game's ladder (`lmrl.ladder.rate`), kept for `elo.csv`; for a
        general-sum game its mean return in each seat against the task's scripted opponent, kept for `seats.csv`."""
        if not self.zero_sum:
            return self.score_seats(rounds_done)
        from lmrl.ladder import rate

        table = rate({"policy": self.rollout_policy}, self.game_name, games=self.cfg.rating_games, seed=self.seed)
        row = table.set_index("player").loc["policy"]
        out = {"round": rounds_done, "rating": float(row["rating"]), "low": float(row["low"]),
               "high": float(row["high"]), "games": int(row["games"])}
        self.ratings.append(out)
        self.logger.log({f"elo/{k}": v for k, v in out.items() if k != "round"}, step=rounds_done)
        log.info("round %d: Elo %.0f [%.0f, %.0f] on the %s ladder", rounds_done, out["rating"], out["low"],
                 out["high"], self.game_name)
        return out

    def score_seats(self, rounds_done: int) -> dict:
        """The current policy's mean return (standard error) in each seat against `task.env.opponent`,
        `rating_games` games a seat (`lmrl.ladder.seat_scores`)."""
        from lmrl.ladder import seat_scores

        opponent = self.task.cfg.env.get("opponent", "expert")
        out = {"round": rounds_done, **seat_scores(self.rollout_policy, self.game_name, opponent,
                                                   games=self.cfg.rating_games, seed=self.seed,
                                                   make_game=self.make_game)}
        self.ratings.append(out)
        self.logger.log({f"seats/{k}": v for k, v in out.items() if k != "round"}, step=rounds_done)
        log.info("round %d: seat 0 %.3f +- %.3f, seat 1 %.3f +- %.3f against %s", rounds_done, out["seat0"],
                 out["seat0_se"], out["seat1"], out["seat1_se"], opponent)
        return out

    def trainer_state(self) -> dict:
        """The online state plus the seat baselines and the ratings so far (the pool goes beside it)."""
        return {**super().trainer_state(), "baselines": self.baselines.tolist(), "ratings": self.ratings}

    def checkpoint_files(self) -> dict:
        """The opponent pool, saved in the checkpoint as `opponent_pool.pt`."""
        return {POOL_NAME: self.pool.state()}

    def load_round_state(self, state: dict) -> None:
        """A resumed run's baselines, ratings and opponent pool, as they were at its checkpoint."""
        self.baselines = torch.tensor(state["baselines"], dtype=torch.float32)
        self.ratings = list(state["ratings"])
        self.pool.load(torch.load(self.checkpointer.latest() / f"{POOL_NAME}.pt", map_location="cpu", weights_only=False))

    def write_curve(self) -> None:
        """rounds.csv/png, and elo.csv/png: the rating (95% interval) against rounds of training."""
        super().write_curve()
        if self.run_dir is None or not self.ratings or not is_main():
            return
        import pandas as pd

        frame = pd.DataFrame(self.ratings)
        if not self.zero_sum:
            frame.to_csv(self.run_dir / "seats.csv", index=False)
            plot_seats(frame, self.run_dir / "seats.png", f"{self.task.name} selfplay (seed {self.seed}): each seat "
                       f"against {self.task.cfg.env.get('opponent', 'expert')}")
            return
        frame.to_csv(self.run_dir / "elo.csv", index=False)
        plot_elo(frame, self.run_dir / "elo.png", f"{self.task.name} selfplay (seed {self.seed}): Elo on the ladder")

    def fit(self) -> dict:
        """The online loop, then the start's and the last rating in the metrics."""
        metrics = super().fit()
        if self.ratings and not self.zero_sum:
            for seat in (0, 1):
                metrics.update({f"seat{seat}_start": self.ratings[0][f"seat{seat}"],
                                f"seat{seat}_final": self.ratings[-1][f"seat{seat}"],
                                f"seat{seat}_final_se": self.ratings[-1][f"seat{seat}_se"]})
        elif self.ratings:
            metrics.update(elo_start=self.ratings[0]["rating"], elo_final=self.ratings[-1]["rating"],
                           elo_final_low=self.ratings[-1]["low"], elo_final_high=self.ratings[-1]["high"])
        return metrics


def plot_seats(frame, path: Path, title: str, labels: Sequence[str] = ("seller (seat 0)", "buyer (seat 1)")) -> None:
    """Each seat's mean return (+-2 standard errors shaded) against rounds of training, one panel a seat and one line
    per seed where `frame` has a `seed` column."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    groups = list(frame.groupby("seed")) if "seed" in frame else [(None, frame)]
    for seat, (ax, label) in enumerate(zip(axes, labels)):
        for seed, rows in groups:
            mean, se = rows[f"seat{seat}"], rows[f"seat{seat}_se"]
            line, = ax.plot(rows["round"], mean, marker="o", markersize=3,
                            label="policy" if seed is None else f"seed {seed}")
            ax.fill_between(rows["round"], mean - 2 * se, mean + 2 * se, alpha=0.15, color=line.get_color())
        ax.axhline(0, color="grey", linestyle=":", linewidth=1)
        ax.set_xlabel("rounds of self-play")
        ax.set_ylabel("mean return")
        ax.set_title(label, fontsize=9)
        ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_elo(frame, path: Path, title: str, rounds=None) -> None:
    """Rating against rounds with its 95% interval shaded, one line per seed where `frame` has a `seed` column;
    random play's 1000 marked.  With `rounds` (`collect_rounds`), a second panel: the share of each training round's
    episodes with an invalid move, per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if rounds is None or rounds.empty:
        fig, ax = plt.subplots(figsize=(6, 3.5))
    else:
        fig, (ax, right) = plt.subplots(1, 2, figsize=(10, 3.5))
        for seed, rows in rounds.groupby("seed"):
            right.plot(rows["round"], 100 * rows["invalid_rate"], marker=".", markersize=3, label=f"seed {seed}")
        right.set_xlabel("rounds of self-play")
        right.set_ylabel("% of the round's episodes")
        right.set_title("training rounds: episodes with an invalid move (sampled)", fontsize=9)
        right.legend(fontsize=8)
    groups = list(frame.groupby("seed")) if "seed" in frame else [(None, frame)]
    for seed, rows in groups:
        label = "policy" if seed is None else f"seed {seed}"
        line, = ax.plot(rows["round"], rows["rating"], marker="o", markersize=3, label=label)
        ax.fill_between(rows["round"], rows["low"], rows["high"], alpha=0.15 if len(groups) > 1 else 0.25,
                        color=line.get_color(), label="95% bootstrap interval" if seed is None else None)
    ax.axhline(1000, color="grey", linestyle=":", linewidth=1, label="random play (1000)")
    ax.set_xlabel("rounds of self-play")
    ax.set_ylabel("Elo")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def record_and_run(path: Path) -> tuple[dict, Path]:
    """A run's JSON record and the run directory it names."""
    import json

    record = json.loads(Path(path).read_text())
    return record, Path(record.get("run_dir") or ".")


def collect_curves(records: Sequence[Path]):
    """The curves of finished self-play runs, from their records (`records.dir`): one row per rating point (Elo, or
    each seat's score in a general-sum game), with the game, the seed, and the commit (`+dirty` for a dirty tree),
    precision and machine the record names, so a curve says which code and machine produced it."""
    import pandas as pd

    from lmrl.report import machine_of

    frames = []
    for path in records:
        record, run = record_and_run(path)
        curve = next((run / name for name in ("elo.csv", "seats.csv") if (run / name).is_file()), None)
        if record.get("algo") != "selfplay" or curve is None:
            raise ValueError(f"{path}: not the record of a finished self-play run with an elo.csv or seats.csv "
                             f"({run})")
        frame = pd.read_csv(curve)
        commit = str(record.get("git_commit") or "?")[:7] + ("+dirty" if record.get("git_dirty") else "")
        frame.insert(0, "game", record["task"])
        frame = frame.assign(seed=record["seed"], commit=commit, precision=record.get("precision") or "?",
                             machine=machine_of(record))
        frames.append(frame.round({c: 1 if c in ("rating", "low", "high") else 4 for c in frame.columns
                                   if c in ("rating", "low", "high") or c.startswith("seat")}))
    games = {str(f["game"].iloc[0]) for f in frames}
    kinds = {"rating" in f for f in frames}
    if len(games) > 1 or len(kinds) > 1:
        raise ValueError(f"the records are of several games or kinds of curve ({sorted(games)}): one at a time")
    return pd.concat(frames, ignore_index=True).sort_values(["seed", "round"], kind="stable")


def collect_rounds(records: Sequence[Path]):
    """Each run's training rounds (`rounds.csv`): the seed, the round, the share of its episodes with an invalid move
    and the KL to the BC start, one row a round; runs without a `rounds.csv` are left out."""
    import pandas as pd

    frames = []
    for path in records:
        record, run = record_and_run(path)
        rounds = run / "rounds.csv"
        if rounds.is_file():
            frame = pd.read_csv(rounds).reindex(columns=["round", "invalid_rate", "kl"])
            frames.append(frame.assign(seed=record["seed"]).round({"invalid_rate": 4, "kl": 4}))
    if not frames:
        return pd.DataFrame(columns=["seed", "round", "invalid_rate", "kl"])
    frame = pd.concat(frames, ignore_index=True)[["seed", "round", "invalid_rate", "kl"]]
    return frame.sort_values(["seed", "round"], kind="stable", ignore_index=True)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m lmrl.algos.selfplay curves RECORD.json... --out results/curves/kuhn_selfplay`: the runs' Elo curves in
    one CSV and one plot (`<out>.csv`, `<out>.png`); for a zero-sum game, each training round's invalid-move share and
    KL too (`<out>_rounds.csv`, the plot's second panel)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m lmrl.algos.selfplay", description=main.__doc__)
    parser.add_argument("command", choices=["curves"])
    parser.add_argument("records", nargs="+", type=Path, help="the runs' records (records.dir/<task>__selfplay__*.json)")
    parser.add_argument("--out", type=Path, required=True, help="the output path without its extension")
    args = parser.parse_args(argv)
    frame = collect_curves(args.records)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(args.out.with_suffix(".csv"), index=False)
    seeds = ", ".join(str(int(s)) for s in sorted(frame["seed"].unique()))
    if "rating" in frame:
        rounds = collect_rounds(args.records)
        if not rounds.empty:
            rounds.to_csv(args.out.with_name(args.out.name + "_rounds.csv"), index=False)
        plot_elo(frame, args.out.with_suffix(".png"),
                 f"{frame['game'].iloc[0]} selfplay, seeds {seeds}: Elo on the ladder", rounds)
    else:
        plot_seats(frame, args.out.with_suffix(".png"),
                   f"{frame['game'].iloc[0]} selfplay, seeds {seeds}: each seat against the scripted side")
    print(frame.to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
