"""TextArena's single-player games as lmrl tasks: `python -m lmrl.train task=textarena task.env_id=<game>`.

`TextArenaEnv` plays a game registered in TextArena (`textarena.make(env_id)`) behind the `TextEnv` contract:

- the game is built from TextArena's registry *without* its default wrappers, so the observation segments are the
  game's own messages (its prompt as is, every later message after a `[GAME]` tag, one per line) and an action
  reaches the game as written: `[5]`, `[A C]`, `[up]` (the brackets are the games' own action format);
- the agent's own move is not echoed back: it is already in the history as the action segment;
- `info["invalid"]` marks a move the game rejected (TextArena's `set_invalid_move`: a warning and one more try, or
  the end of the game on the second rejection in a row);
- the reward of a step is 0, plus `invalid_reward` for a rejected move, plus TextArena's final reward for player 0
  (`env.close()`) on the step that ends the game; so an episode's return is TextArena's reward when
  `invalid_reward` is 0. `info["success"]` is that reward reaching `success_reward` (1 is TextArena's win);
- the game draws its randomness from Python's `random` module, which TextArena seeds at every reset: each adapter
  keeps that state to itself (swapped in around every call into the game), so a game is a function of its
  `game_seed` however many adapters step in between (a batch of rollouts), and no other code's draws move.

`reset(seed, options={"game_seed": s})` starts the game TextArena deals for seed `s` (the task-defining information
group PG and SWEET-RL pin starts with); without options the seed is the game seed. The evaluation protocol is
`eval_games` fixed games. `legal_actions()` lists the legal moves of the games in `LEGAL_MOVES` (used by random-legal
players, the dataset generator and the prompted baseline's `decode=choose`); other games answer None.
"""

from __future__ import annotations

import contextlib
import random
from typing import Callable, Iterator

from lmrl.envs.base import History, StepResult, Text, TextEnv

# Evaluation games are dealt from these seeds (`eval_games` of them); dataset episodes draw seeds below it.
EVAL_SEED_BASE = 1 << 30
# Games `task=textarena` has a config entry for (conf/task/textarena.yaml: anchors, window, rules) and
# `data_gen.textarena` a scripted player for. TextArena's other single-player games run through the adapter too.
SUPPORTED_GAMES = ("GuessTheNumber-v0", "TowerOfHanoi-v0", "FrozenLake-v0", "Minesweeper-v0-small")


def require_textarena():
    """The `textarena` package, or an ImportError saying how to install it (the `interop` extra)."""
    try:
        import textarena
    except ImportError as e:  # pragma: no cover - the interop extra is installed in this project's environment
        raise ImportError("TextArena games need the `textarena` package: pip install 'lmrl[interop]'") from e
    return textarena


def make_game(env_id: str):
    """The TextArena game registered as `env_id`, without the wrappers `textarena.make` adds. Raises ValueError for
    an id TextArena does not know, RuntimeError (with TextArena's own error chained) for a game that cannot be built
    here, e.g. one that downloads NLTK corpora (Wordle, Hangman) or calls a hosted LM (TwentyQuestions)."""
    ta = require_textarena()
    from textarena.envs.registration import ENV_REGISTRY

    if env_id not in ENV_REGISTRY:
        raise ValueError(f"TextArena has no game {env_id!r}; games lmrl ships configs for: {list(SUPPORTED_GAMES)}")
    try:
        game = ta.make(env_id)
    except Exception as e:
        first = next((line.strip() for line in str(e).splitlines() if line.strip().strip("*")), "")
        raise RuntimeError(f"TextArena game {env_id} could not be built: {type(e).__name__}: {first}") from e
    while isinstance(game, ta.Wrapper):
        game = game.env
    return game


def render_messages(messages) -> str:
    """A single-player game's messages `(sender, text, type)` as one observation segment: the prompt as written, every
    other message after its sender's tag (`[GAME]`), each ending in one newline. The echoes of the player's moves
    (logged under the player's id or, by some games, the game's) are left out: they are the history's action
    segments."""
    from textarena.core import GAME_ID, ObservationType

    lines = []
    for sender, text, kind in messages:
        if kind == ObservationType.PLAYER_ACTION:
            continue
        text = str(text).strip("\n")
        if kind == ObservationType.PROMPT:
            lines.append(text)
        else:
            lines.append(f"[{'GAME' if sender == GAME_ID else f'Player {sender}'}] {text}")
    return "".join(line + "\n" for line in lines)


class TextArenaEnv(TextEnv):
    """A single-player TextArena game behind the `TextEnv` contract (see the module docstring).

    Args:
        env_id: a registered TextArena id, e.g. `GuessTheNumber-v0`.
        invalid_reward: added to the step of a move the game rejects (0 keeps TextArena's rewards as they are).
        success_reward: TextArena's final reward at or above which the episode counts as a success.
        max_steps: steps after which the adapter truncates an episode the game has not ended (reward 0).
        eval_games: games in the evaluation protocol, dealt from seeds `EVAL_SEED_BASE + i`.
    """

    def __init__(self, env_id: str = "GuessTheNumber-v0", invalid_reward: float = 0.0, success_reward: float = 1.0,
                 max_steps: int = 200, eval_games: int = 64):
        if max_steps < 1 or eval_games < 1:
            raise ValueError(f"max_steps and eval_games must be >= 1 (got {max_steps}, {eval_games})")
        self.env_id, self.max_steps, self.eval_games = env_id, int(max_steps), int(eval_games)
        self.invalid_reward, self.success_reward = float(invalid_reward), float(success_reward)
        self._rng = random.Random()
        self._game_random = random.Random(0)  # the state of `random` the game sees (see the module docstring)
        self.game = make_game(env_id)
        self.legal_moves = LEGAL_MOVES.get(type(self.game).__name__)
        self.game_seed, self.steps, self.done = 0, 0, True
        self.history: History = ()
        self._deal(0)  # a game for several players fails here, not in the first rollout
        self.done = True

    @contextlib.contextmanager
    def _game_rng(self) -> Iterator[None]:
        """Python's `random` holds this game's state while the block runs; the caller's is restored after."""
        outside = random.getstate()
        random.setstate(self._game_random.getstate())
        try:
            yield
        finally:
            self._game_random.setstate(random.getstate())
            random.setstate(outside)

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[History, dict]:
        """Deal the game of `options["game_seed"]`, else of `seed`, else of a seed drawn from the env's RNG.
        `info` holds `game_seed` and `env_id`."""
        options = dict(options or {})
        unknown = sorted(set(options) - {"game_seed"})
        if unknown:
            raise ValueError(f"TextArenaEnv.reset: unknown options {unknown} (the one option is game_seed)")
        if seed is not None:
            self._rng.seed(seed)
        if options.get("game_seed") is not None:
            self.game_seed = int(options["game_seed"])
        else:
            self.game_seed = int(seed) if seed is not None else self._rng.randrange(EVAL_SEED_BASE)
        self.history = (Text(self._deal(self.game_seed), False),)
        self.steps, self.done = 0, False
        return self.history, {"game_seed": self.game_seed, "env_id": self.env_id}

    def _deal(self, game_seed: int) -> str:
        """Reset the game with `game_seed`; its opening messages as one segment."""
        with self._game_rng():
            try:
                self.game.reset(num_players=1, seed=game_seed)
            except AssertionError as e:  # TextArena's states assert their player count
                raise ValueError(f"{self.env_id} is not a single-player game: {e}") from e
            _, messages = self.game.get_observation()
        return render_messages(messages) or "\n"

    def step(self, action: str) -> StepResult:
        """Send one move to the game: the observation is the game's reply, the reward as in the module docstring;
        the episode ends when the game does (terminated) or after `max_steps` steps (truncated)."""
        if self.done:
            raise RuntimeError("step() called on a finished episode; call reset() first")
        self.steps += 1
        with self._game_rng():
            finished, _ = self.game.step(action.strip())
            _, messages = self.game.get_observation()
            invalid = self._rejected(finished)
            rewards, game_info = self.game.close() if finished else (None, {})
        text = render_messages(messages)
        reward = self.invalid_reward if invalid else 0.0
        info = {"game_seed": self.game_seed, "invalid": invalid, "success": False}
        if finished:
            game_reward = float((rewards or {}).get(0, 0.0))
            reason = (game_info.get(0) or {}).get("reason")
            text += f"[GAME] {reason}\n" if reason else ""
            reward += game_reward
            info.update(success=game_reward >= self.success_reward, game_reward=game_reward, reason=reason)
        truncated = not finished and self.steps >= self.max_steps
        if truncated:
            text += f"[GAME] The game was stopped after {self.max_steps} moves.\n"
        self.done = finished or truncated
        self.history = self.history + (Text(action, True), Text(text or "[GAME]\n", False))
        return StepResult(self.history, reward, finished, truncated, info)

    def _rejected(self, finished: bool) -> bool:
        """Whether the game rejected the move just sent: a warning leaves the state's error count above 0 (a valid
        move resets it); a second rejection in a row ends the game with `invalid_move` in its game info."""
        state = self.game.state
        ended_invalid = finished and bool((getattr(state, "game_info", {}).get(0) or {}).get("invalid_move"))
        return getattr(state, "error_count", 0) > 0 or ended_invalid

    def eval_reset_options(self) -> list[dict]:
        """The evaluation protocol: `eval_games` fixed games, dealt from seeds no dataset episode uses."""
        return [{"game_seed": EVAL_SEED_BASE + i} for i in range(self.eval_games)]

    def legal_actions(self) -> list[str] | None:
        """The moves the game accepts now (each with its newline), for the games in `LEGAL_MOVES`; None otherwise."""
        if self.legal_moves is None or self.done:
            return None
        return self.legal_moves(self.game)


# -- legal moves of the supported games, read from the game's state ---------------------------------------------

def guess_the_number_moves(game) -> list[str]:
    """Every number of the range not guessed yet."""
    return [f"[{n}]\n" for n in range(game.min_number, game.max_number + 1) if n not in game.guessed_numbers]


def tower_of_hanoi_moves(game) -> list[str]:
    """Every move of a top disk onto an empty tower or a larger disk."""
    towers = game.state.game_state["towers"]
    return [f"[{a} {b}]\n" for a in towers for b in towers
            if a != b and towers[a] and (not towers[b] or towers[b][-1] > towers[a][-1])]


FROZEN_LAKE_STEPS = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}


def frozen_lake_moves(game) -> list[str]:
    """Every direction that stays on the grid (walking off it is rejected; a hole is a legal, losing move)."""
    row, col = game.state.game_state["player_pos"]
    return [f"[{name}]\n" for name, (dr, dc) in FROZEN_LAKE_STEPS.items()
            if 0 <= row + dr < game.size and 0 <= col + dc < game.size]


def minesweeper_moves(game) -> list[str]:
    """Every cell not revealed yet (a mine is a legal move that the game answers as a rejected one)."""
    return [f"[{r} {c}]\n" for r in range(game.rows) for c in range(game.cols) if not game.revealed[r][c]]


# By the game's class name, so every registered variant (`-hardcore`, `-medium`, board sizes) shares its entry.
LEGAL_MOVES: dict[str, Callable[[object], list[str]]] = {
    "GuessTheNumberEnv": guess_the_number_moves,
    "TowerOfHanoiEnv": tower_of_hanoi_moves,
    "FrozenLakeEnv": frozen_lake_moves,
    "MinesweeperEnv": minesweeper_moves,
}

