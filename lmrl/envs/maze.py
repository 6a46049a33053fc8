"""Maze (fully and partially observed): LMRL-Gym's double-T maze, text for text.

Rules (faithful to the original): the only moves are the exact strings `move up\\n`,
`move down\\n`, `move left\\n` and `move right\\n`; a move into a wall leaves the agent in
place (-1); reaching the goal gives 0 and `Success`; anything else -- `move up` without its
newline included -- is an unparseable action (-4, no move).  After 100 non-terminal steps the
next call returns `Failure` (-1) whatever the action.  Coordinates print with their
digits spaced (`1, 1 0`), as the original's datasets do.

One deliberate change: the original wipes the visible history after an invalid action
(its env returns only the current observation).  We keep the history by default so a
PO agent can see its own mistake; `wipe_history_on_invalid=True` restores the original.
"""

from __future__ import annotations

import random
from collections import deque

from lmrl.envs.base import History, StepResult, Text, TextEnv

Cell = tuple[int, int]

DOUBLE_T_MAZE = (
    "#############",
    "#.....#.....#",
    "###.#####.###",
    "###.#####.###",
    "###.#####.###",
    "###.......###",
    "######.######",
    "######.######",
    "######.######",
    "#############",
)
GOAL: Cell = (8, 6)
# Direction name -> (d_row, d_col); "up" decreases the row.
MOVES: dict[str, Cell] = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
# The original checks walls in this order and names them with these phrases.
WALL_PHRASES = (("right", "to your right"), ("left", "to your left"), ("up", "above you"), ("down", "below you"))
# The original's action strings, matched exactly (no stripping, the newline is part of the action).
ACTION_DIRECTIONS: dict[str, str] = {f"move {d}\n": d for d in MOVES}
ACTIONS = tuple(ACTION_DIRECTIONS)


def free_cells(layout=DOUBLE_T_MAZE) -> list[Cell]:
    return [(r, c) for r, row in enumerate(layout) for c, ch in enumerate(row) if ch != "#"]


def start_cells(layout=DOUBLE_T_MAZE, goal: Cell = GOAL) -> list[Cell]:
    """The 25 non-goal free cells: the uniform start distribution and the eval protocol."""
    return [c for c in free_cells(layout) if c != goal]


def is_wall(cell: Cell, layout=DOUBLE_T_MAZE) -> bool:
    r, c = cell
    return not (0 <= r < len(layout) and 0 <= c < len(layout[r])) or layout[r][c] == "#"


def neighbour(cell: Cell, direction: str) -> Cell:
    dr, dc = MOVES[direction]
    return cell[0] + dr, cell[1] + dc


def spaced(n: int) -> str:
    """`10` -> `1 0`: the original writes every digit of a coordinate separately."""
    return " ".join(str(n))


def wall_sentence(cell: Cell, layout=DOUBLE_T_MAZE) -> str:
    walls = [phrase for d, phrase in WALL_PHRASES if is_wall(neighbour(cell, d), layout)]
    if not walls:
        return "There are no walls near you."
    if len(walls) == 1:
        return f"There is a wall {walls[0]}."
    return f"There are walls {', '.join(walls)}."


def describe(cell: Cell, goal: Cell, fully_observed: bool, layout=DOUBLE_T_MAZE) -> str:
    walls = wall_sentence(cell, layout)
    if not fully_observed:
        return walls + "\n"
    return (
        f"The goal is at position {spaced(goal[0])}, {spaced(goal[1])}. "
        f"Your current position is at position {spaced(cell[0])}, {spaced(cell[1])}. {walls}\n"
    )


def distances_to_goal(goal: Cell = GOAL, layout=DOUBLE_T_MAZE) -> dict[Cell, int]:
    """BFS distance (in moves) from every free cell to the goal."""
    dist = {goal: 0}
    queue = deque([goal])
    while queue:
        cell = queue.popleft()
        for d in MOVES:
            nxt = neighbour(cell, d)
            if not is_wall(nxt, layout) and nxt not in dist:
                dist[nxt] = dist[cell] + 1
                queue.append(nxt)
    return dist


def optimal_directions(cell: Cell, goal: Cell = GOAL, layout=DOUBLE_T_MAZE) -> list[str]:
    """Every direction that shortens the BFS distance to the goal (ties kept, in MOVES order)."""
    dist = distances_to_goal(goal, layout)
    return [
        d for d in MOVES if not is_wall(neighbour(cell, d), layout) and dist[neighbour(cell, d)] == dist[cell] - 1
    ]


def parse_action(action: str) -> str | None:
    """`move left\\n` -> `left`; anything but the four exact action strings -> None.

    As in the original, which looks the text up in its action table: a reply without its
    newline (e.g. generation cut off at the token budget) is an invalid action."""
    return ACTION_DIRECTIONS.get(action)


class MazeEnv(TextEnv):
    """The double-T maze.  `fully_observed` picks the FO or PO observation text."""

    def __init__(self, fully_observed: bool = True, max_steps: int = 100, wipe_history_on_invalid: bool = False):
        self.fully_observed = fully_observed
        self.max_steps = max_steps
        self.wipe_history_on_invalid = wipe_history_on_invalid
        self.layout, self.goal = DOUBLE_T_MAZE, GOAL
        self._starts = start_cells(self.layout, self.goal)
        self._rng = random.Random()
        self.position: Cell = self._starts[0]
        self.num_steps = 0
        self.done = True
        self.history: History = ()

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[History, dict]:
        """Start at `options["init_position"]` (a free non-goal cell, as `[row, col]`), else at a random one drawn from
        the env's RNG (`seed` reseeds it). `info` holds the start, the goal and the position."""
        if seed is not None:
            self._rng.seed(seed)
        options = options or {}
        if options.get("init_position") is not None:
            start = tuple(int(x) for x in options["init_position"])
            if start not in self._starts:
                raise ValueError(f"init_position {start} is not a free non-goal cell; choose one of {self._starts}")
        else:
            start = self._rng.choice(self._starts)
        self.position, self.num_steps, self.done = start, 0, False
        self.history = (Text(self._observe(), False),)
        return self.history, {"start": list(start), "goal": list(self.goal), "position": list(start)}

    def step(self, action: str) -> StepResult:
        """One move: -1 for a valid move (into a wall: no move), -4 and no move for any other text, 0 and `Success` on
        reaching the goal; the call after `max_steps` steps ends the episode with `Failure` (-1, truncated)."""
        if self.done:
            raise RuntimeError("step() called on a finished episode; call reset() first")
        if self.num_steps >= self.max_steps:
            return self._finish(action, "Failure\n", -1.0, terminated=False, truncated=True)
        direction = parse_action(action)
        if direction is not None:
            nxt = neighbour(self.position, direction)
            if not is_wall(nxt, self.layout):
                self.position = nxt
        if self.position == self.goal:
            return self._finish(action, "Success\n", 0.0, terminated=True, truncated=False)
        self.num_steps += 1
        reward = -1.0 if direction is not None else -4.0
        obs = Text(self._observe(), False)
        if direction is None and self.wipe_history_on_invalid:
            self.history = (obs,)
        else:
            self.history = self.history + (Text(action, True), obs)
        return StepResult(self.history, reward, False, False, self._info(invalid=direction is None))

    def eval_reset_options(self) -> list[dict]:
        """The evaluation's start states: every free non-goal cell (25 in the double-T maze)."""
        return [{"init_position": cell} for cell in self._starts]

    def legal_actions(self) -> list[str]:
        """The four move strings."""
        return list(ACTIONS)

    def _observe(self) -> str:
        return describe(self.position, self.goal, self.fully_observed, self.layout)

    def _finish(self, action: str, text: str, reward: float, terminated: bool, truncated: bool) -> StepResult:
        self.done = True
        self.history = self.history + (Text(action, True), Text(text, False))
        info = self._info(invalid=parse_action(action) is None)
        return StepResult(self.history, reward, terminated, truncated, info)

    def _info(self, invalid: bool) -> dict:
        return {"position": list(self.position), "success": self.position == self.goal, "invalid": invalid}
