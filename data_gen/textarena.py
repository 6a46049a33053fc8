"""Datasets for TextArena's single-player games (`task=textarena`): a scripted player through `TextArenaEnv`.

Each move is, with probability `prob_expert`, the expert's (below), else a uniformly random legal move
(`TextArenaEnv.legal_actions()`), and with probability `prob_invalid` a reply the game rejects instead. The experts
read the game's hidden state, as LMRL-Gym's scripted data policies did:

- GuessTheNumber: the middle of the range the hints leave (binary search: at most 5 guesses for 1..20);
- TowerOfHanoi: the next move of a shortest solution from the current towers (breadth-first search);
- FrozenLake: the next step of a shortest route around the holes;
- Minesweeper: a cell without a mine (the first move: the board's centre, which TextArena keeps free of mines).

Every episode draws its game seed and its player's coin flips from an RNG seeded by `(env_id, seed, index)`, so the
dataset is deterministic and a smaller one is a prefix of a larger one. `attempts_per_task` k > 1 deals each run of
k consecutive episodes the same game (SWEET-RL compares attempts at one task).

CLI: `python -m data_gen.textarena --env-id GuessTheNumber-v0 --out PATH` writes JSONL and prints its statistics;
`--anchors` prints the normalization anchors of conf/task/textarena.yaml for a game instead: the recipe's dataset
average and the expert's mean return over the evaluation games.
"""

from __future__ import annotations

import argparse
import random
from collections import deque
from collections.abc import Iterator
from pathlib import Path

from omegaconf import OmegaConf

from lmrl.data.stats import dataset_stats, write_and_describe
from lmrl.envs.base import Episode
from lmrl.envs.textarena import EVAL_SEED_BASE, FROZEN_LAKE_STEPS, TextArenaEnv

CONFIG = Path(__file__).resolve().parents[1] / "conf" / "task" / "textarena.yaml"
# The recipe's size in conf/task/textarena.yaml, and the expert's share for a game without an entry there.
DEFAULT_EPISODES = 2000
DEFAULT_PROB_EXPERT = 0.5
# A reply every supported game rejects (no bracketed move in it).
INVALID_REPLY = "I am not sure.\n"


def guess_the_number_expert(game, rng: random.Random) -> str:
    """The middle of the numbers the hints so far leave possible."""
    low, high = game.min_number, game.max_number
    for guess, hint in game.state.game_state["guess_history"]:
        if hint == "higher":
            low = max(low, guess + 1)
        else:
            high = min(high, guess - 1)
    return f"[{(low + high) // 2}]\n"


def hanoi_solution_move(towers: dict[str, list[int]]) -> str | None:
    """The first move of a shortest sequence that stacks every disk on tower C (None when they are)."""
    names = sorted(towers)
    start = tuple(tuple(towers[n]) for n in names)
    disks = sorted((d for t in start for d in t), reverse=True)
    goal = tuple(tuple(disks) if n == "C" else () for n in names)
    first = {start: None}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        if state == goal:
            return first[state]
        for i, j in ((i, j) for i in range(len(names)) for j in range(len(names)) if i != j):
            if state[i] and (not state[j] or state[j][-1] > state[i][-1]):
                nxt = list(state)
                nxt[i], nxt[j] = state[i][:-1], state[j] + (state[i][-1],)
                nxt = tuple(nxt)
                if nxt not in first:
                    first[nxt] = first[state] or f"[{names[i]} {names[j]}]\n"
                    queue.append(nxt)
    return None


def tower_of_hanoi_expert(game, rng: random.Random) -> str:
    """The next move of a shortest solution."""
    return hanoi_solution_move(game.state.game_state["towers"]) or "[A C]\n"


def grid_route(size: int, start: tuple[int, int], goal: tuple[int, int], blocked: set) -> list[str] | None:
    """The directions of a shortest route from `start` to `goal` on a `size` x `size` grid that avoids the
    `blocked` cells (None when there is none)."""
    previous = {start: None}
    queue = deque([start])
    while queue:
        cell = queue.popleft()
        if cell == goal:
            route = []
            while previous[cell] is not None:
                cell, direction = previous[cell]
                route.append(direction)
            return route[::-1]
        for name, (dr, dc) in FROZEN_LAKE_STEPS.items():
            nxt = (cell[0] + dr, cell[1] + dc)
            if 0 <= nxt[0] < size and 0 <= nxt[1] < size and nxt not in previous and nxt not in blocked:
                previous[nxt] = (cell, name)
                queue.append(nxt)
    return None


def frozen_lake_expert(game, rng: random.Random) -> str:
    """The next step of a shortest route to the goal around the holes."""
    state = game.state.game_state
    holes = {(r, c) for r, row in enumerate(state["grid"]) for c, cell in enumerate(row) if cell == "H"}
    route = grid_route(game.size, tuple(state["player_pos"]), tuple(state["goal_pos"]), holes)
    return f"[{route[0]}]\n" if route else "[down]\n"


def minesweeper_expert(game, rng: random.Random) -> str:
    """A random unrevealed cell without a mine; the centre on the first move (before the mines are laid)."""
    if game.first_move:
        return f"[{game.rows // 2} {game.cols // 2}]\n"
    safe = [(r, c) for r in range(game.rows) for c in range(game.cols)
            if not game.revealed[r][c] and game.grid[r][c] != -1]
    r, c = rng.choice(safe)
    return f"[{r} {c}]\n"


# By the game's class name, as `lmrl.envs.textarena.LEGAL_MOVES`.
EXPERTS = {
    "GuessTheNumberEnv": guess_the_number_expert,
    "TowerOfHanoiEnv": tower_of_hanoi_expert,
    "FrozenLakeEnv": frozen_lake_expert,
    "MinesweeperEnv": minesweeper_expert,
}


def play_episode(env: TextArenaEnv, rng: random.Random, game_seed: int, prob_expert: float,
                 prob_invalid: float) -> Episode:
    """One game dealt from `game_seed` played by the mixture player, recorded segment by segment."""
    expert = EXPERTS[type(env.game).__name__]
    history, info = env.reset(options={"game_seed": game_seed})
    rewards, done, result = [0.0], False, None
    while not done:
        if rng.random() < prob_invalid:
            action = INVALID_REPLY
        elif rng.random() < prob_expert:
            action = expert(env.game, rng)
        else:
            action = rng.choice(env.legal_actions())
        result = env.step(action)
        rewards += [result.reward, 0.0]
        done = result.terminated or result.truncated
    info = {**info, "success": bool(result.info["success"]), "game_reward": result.info.get("game_reward", 0.0)}
    return Episode(list(result.history), rewards, True, info)


def generate(episodes: int = DEFAULT_EPISODES, seed: int = 0, env_id: str = "GuessTheNumber-v0",
             prob_expert: float = DEFAULT_PROB_EXPERT, prob_invalid: float = 0.0, attempts_per_task: int = 1,
             invalid_reward: float = 0.0, max_steps: int = 200) -> Iterator[Episode]:
    """`episodes` mixture-player games of `env_id`, deterministic in `seed` (see the module docstring); the env's
    `invalid_reward` and `max_steps` as the task's. Parameters are checked here, before the first episode is asked
    for, so a bad config fails at once."""
    for name, p in (("prob_expert", prob_expert), ("prob_invalid", prob_invalid)):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"{name} must lie in [0, 1], got {p}")
    if int(episodes) != episodes or episodes < 0:
        raise ValueError(f"episodes must be a non-negative integer, got {episodes}")
    if int(attempts_per_task) != attempts_per_task or attempts_per_task < 1:
        raise ValueError(f"attempts_per_task must be a positive integer, got {attempts_per_task}")
    env = TextArenaEnv(env_id, invalid_reward=invalid_reward, max_steps=max_steps)
    if type(env.game).__name__ not in EXPERTS:
        raise ValueError(f"data_gen.textarena has no scripted player for {env_id} ({type(env.game).__name__}); "
                         f"games it plays: {sorted(EXPERTS)} (give task.data.path=<your JSONL> for another game)")
    return _episodes(env, int(episodes), seed, float(prob_expert), float(prob_invalid), int(attempts_per_task))


def _episodes(env: TextArenaEnv, episodes: int, seed: int, prob_expert: float, prob_invalid: float,
              attempts: int) -> Iterator[Episode]:
    for index in range(episodes):
        deal = random.Random(f"lmrl-textarena:{env.env_id}:{seed}:{index - index % attempts}")
        rng = random.Random(f"lmrl-textarena-player:{env.env_id}:{seed}:{index}")
        yield play_episode(env, rng, deal.randrange(EVAL_SEED_BASE), prob_expert, prob_invalid)


def expert_return(env_id: str, games: int = 64) -> float:
    """The expert's mean return over the first `games` evaluation games (the normalization maximum)."""
    env = TextArenaEnv(env_id, eval_games=games)
    rng, total = random.Random(0), 0.0
    for options in env.eval_reset_options():
        total += play_episode(env, rng, options["game_seed"], 1.0, 0.0).total_return
    return total / games


def config_prob_expert(env_id: str) -> float:
    """The game's `prob_expert` in conf/task/textarena.yaml (DEFAULT_PROB_EXPERT for a game without an entry)."""
    games = OmegaConf.load(CONFIG).games
    return float(games[env_id].prob_expert) if env_id in games else DEFAULT_PROB_EXPERT


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Generate a TextArena game's dataset as episode JSONL.")
    parser.add_argument("--env-id", default="GuessTheNumber-v0")
    parser.add_argument("--episodes", type=int, default=DEFAULT_EPISODES)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--prob-expert", type=float, help="default: the game's in conf/task/textarena.yaml")
    parser.add_argument("--prob-invalid", type=float, default=0.0)
    parser.add_argument("--out", help="output JSONL path (required unless --anchors)")
    parser.add_argument("--anchors", action="store_true", help="print the game's normalization anchors and exit")
    args = parser.parse_args(argv)
    if args.prob_expert is None:
        args.prob_expert = config_prob_expert(args.env_id)

    def episodes() -> Iterator[Episode]:
        return generate(args.episodes, args.seed, args.env_id, args.prob_expert, args.prob_invalid)

    if args.anchors:
        stats = dataset_stats(episodes())
        print(f"{args.env_id}: min 0.0 (TextArena's lowest reward), avg {stats['avg_return']:.4f} (the dataset's "
              f"mean return), max {expert_return(args.env_id):.4f} (the expert's mean over 64 evaluation games)")
        return
    if not args.out:
        parser.error("--out is required unless --anchors is given")
    write_and_describe(args.out, episodes)


if __name__ == "__main__":
    main()
