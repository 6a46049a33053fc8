"""Text-Nav (fully and partially observed): LMRL-Gym's TextWorld house, built once and cached.

The house (§3 of the task reference): eight rooms,

                garden
                  |
    backyard - kitchen - dining room - living room - bedroom
                                          |            |
                                        office  --  bathroom

a table with a bowl (bedroom), a table with the stale food and the fresh food (living
room), a table with a coffee cup and a plate (dining room), a closed chest holding the
utensils (office) and a closed fridge holding a fruit (kitchen).  Putting the stale food
into the fridge and closing it wins (reward 1, terminated); eating it loses (reward 0,
terminated).  There is no step penalty.  The original had no step limit (a bug); here
`max_steps` (default 20, the original's `play()`; its data used 15) counts every step,
invalid ones included, and reaching it truncates.

Games.  The start room is uniform over the eight rooms, so one game per start room is
compiled with TextWorld's GameMaker (same grammar seed, so every room reads the same in
all eight) into `${LMRL_CACHE:-.cache/lmrl}/text_nav/<hash>/`, the hash covering the
builder's source and options.  The directory is built under a temporary name and renamed
into place, so concurrent processes never see half a cache.  TextWorld runs a game in
process (Jericho's Z-machine, a private copy of `libfrotz.so` per interpreter; no
subprocess).  Each process keeps one interpreter per start room, started on first use
and shared by every env: an env owns only a Z-machine snapshot (~45 kB) that it restores
before each command, and a reset copies a cached initial snapshot without touching the
interpreter (so envs are cheap, but not thread-safe).  The game logic (facts, admissible
commands) is TextWorld's, updated from the Inform7 events the game prints, as
`textworld.start` does; admissible sets are memoized per logic state.  Texts are not:
Inform lists objects in the order they were moved, which the logic facts do not record.

Observation (every segment ends with a newline): TextWorld's feedback cleaned of the
banner, the `-= Room =-` headers, the end-of-game score/RESTART lines and the status bar,
one paragraph per line (blank lines dropped); FO then appends the inventory line
(`You are carrying nothing.` or `You are carrying: a stale food and a bowl.`, the game's
own text) at every step including the reset; then `\\nAdmissible commands: c1, c2\\n`,
the admissible commands in TextWorld's (alphabetical) order without those containing
`examine`, `look` or `inventory`, as the original.  The final observation of a won or lost
game has no command list.  PO drops the inventory line and each room's decorative first
sentence, the only text naming the room (the original fork's `hide_location` grammar
option; upstream TextWorld lacks it, so the known decoration lines are removed from the
feedback).  The room stays inferable from its objects and exits, as in the original.

FO reset from the bedroom, verbatim:

    Your objective is to put the stale food on the table in the living room into the fridge in the kitchen.
    You've entered a bedroom.
    You can see a table. You wonder idly who left that here. The table is usual. On the table you can make out a bowl.
    There are unblocked exits to the south and west.
    You are carrying nothing.

    Admissible commands: go south, go west, take bowl from table

PO reset from the bedroom, verbatim:

    Your objective is to put the stale food on the table in the living room into the fridge in the kitchen.
    You can see a table. You wonder idly who left that here. The table is usual. On the table you can make out a bowl.
    There are unblocked exits to the south and west.

    Admissible commands: go south, go west, take bowl from table

Action: a command and its newline.  The raw string never reaches the Inform parser (meta
verbs such as `quit`, `restore` or `undo` would end or rewind the game): one trailing
newline is stripped, the rest must be printable ASCII, is lower-cased and its spaces are
collapsed, and the result runs only if it is in TextWorld's full admissible set (the
listed commands plus look/examine/inventory).  Anything else leaves the game untouched
and answers `That command is not admissible here.` with the usual status lines (reward 0,
`invalid=True`, the step counts).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import os
import random
import re
import shutil
import tempfile
import warnings
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from lmrl.envs.base import History, StepResult, Text, TextEnv

ROOMS = ("bedroom", "office", "bathroom", "living room", "kitchen", "dining room", "garden", "backyard")
# (room, its exit, the room through it); the reverse exit is implied.
PASSAGES = (
    ("bedroom", "west", "living room"), ("living room", "west", "dining room"),
    ("dining room", "west", "kitchen"), ("kitchen", "north", "garden"),
    ("living room", "south", "office"), ("office", "east", "bathroom"),
    ("bedroom", "south", "bathroom"), ("kitchen", "west", "backyard"),
)
OPPOSITE = {"north": "south", "south": "north", "east": "west", "west": "east"}
OBJECTIVE = "Your objective is to put the stale food on the table in the living room into the fridge in the kitchen."
# The original's grammar flags (`make_game.compile_game`); the seed fixes every generated sentence.
GRAMMAR_FLAGS = {"include_adj": False, "only_last_action": True, "blend_instructions": True, "blend_descriptions": True}
GRAMMAR_SEED = 1234
# Jericho treats seed 0 as "unseeded"; any fixed non-zero value makes the interpreter deterministic.
FROTZ_SEED = 1
INVALID_REPLY = "That command is not admissible here.\n"
HIDDEN_FROM_LIST = ("examine", "look", "inventory")
_PRINTABLE_ASCII = re.compile(r"[ -~]*")
_DROPPED_LINES = re.compile(r"-= .* =-|You scored \d+ out of a possible \d+, in \d+ turns?\.|Would you like to RESTART.*")


def neighbours(room: str) -> dict[str, str]:
    """Exit direction -> room reached, for one room of the house."""
    out = {d: b for a, d, b in PASSAGES if a == room}
    out.update({OPPOSITE[d]: a for a, d, b in PASSAGES if b == room})
    return dict(sorted(out.items()))


def route(src: str, dst: str) -> list[str]:
    """The `go <direction>` commands of a shortest path (BFS, directions tried alphabetically)."""
    parent: dict[str, tuple[str, str] | None] = {src: None}
    queue = deque([src])
    while queue:
        room = queue.popleft()
        for direction, nxt in neighbours(room).items():
            if nxt not in parent:
                parent[nxt] = (room, f"go {direction}")
                queue.append(nxt)
    path, room = [], dst
    while parent[room] is not None:
        room, command = parent[room]
        path.append(command)
    return path[::-1]


def walkthrough(start_room: str) -> list[str]:
    """The optimal command sequence from `start_room` (6 to 9 commands, 7.625 on average)."""
    return (route(start_room, "living room") + ["take stale food from table"] + route("living room", "kitchen")
            + ["open fridge", "insert stale food into fridge", "close fridge"])


def build_house(start_room: str, grammar_seed: int = GRAMMAR_SEED):
    """The house as a TextWorld `Game`, the player in `start_room` (the original's `build_game`)."""
    import textworld
    from textworld.generator.game import Event, Quest

    options = textworld.GameOptions()
    for flag, value in GRAMMAR_FLAGS.items():
        setattr(options.grammar, flag, value)
    options.seeds = grammar_seed
    maker = textworld.GameMaker(options)
    rooms = {name: maker.new_room(name) for name in ROOMS}
    for a, direction, b in PASSAGES:
        maker.connect(getattr(rooms[a], direction), getattr(rooms[b], OPPOSITE[direction]))
    furniture = {"bedroom": ("s", "table"), "living room": ("s", "table"), "dining room": ("s", "table"),
                 "office": ("c", "chest"), "kitchen": ("c", "fridge")}
    holders = {}
    for room, (kind, name) in furniture.items():
        holders[room] = maker.new(type=kind, name=name)
        rooms[room].add(holders[room])
        if kind == "c":
            maker.add_fact("closed", holders[room])
    contents = {"living room": (("f", "stale food"), ("f", "fresh food")), "bedroom": (("o", "bowl"),),
                "dining room": (("o", "coffee cup"), ("o", "plate")), "office": (("o", "utensils"),),
                "kitchen": (("f", "fruit"),)}
    items = {name: maker.new(type=kind, name=name) for group in contents.values() for kind, name in group}
    for room, group in contents.items():
        for _, name in group:
            holders[room].add(items[name])
    maker.set_player(rooms[start_room])
    food, fridge = items["stale food"], holders["kitchen"]
    eaten = Event(conditions={maker.new_fact("eaten", food)})
    stored = Event(conditions={maker.new_fact("in", food, fridge), maker.new_fact("closed", fridge)})
    maker.quests = [Quest(win_events=[], fail_events=[eaten]), Quest(win_events=[stored], reward=1)]
    game = maker.build()
    game.objective = OBJECTIVE
    game.metadata = {"start_room": start_room, "walkthrough": walkthrough(start_room)}
    return game


def _compile_all(folder: Path, grammar_seed: int) -> None:
    import textworld
    from textworld.generator import compile_game

    for room in ROOMS:
        options = textworld.GameOptions()
        options.path = str(folder / f"{_slug(room)}.z8")
        options.force_recompile = True
        compile_game(build_house(room, grammar_seed), options)
    (folder / "manifest.json").write_text(json.dumps({"rooms": list(ROOMS), "grammar_seed": grammar_seed}))


def _slug(room: str) -> str:
    return room.replace(" ", "_")


@functools.cache
def builder_hash(grammar_seed: int) -> str:
    """Cache key: the builder's source, the house constants and options, and TextWorld's version."""
    import textworld

    parts = [inspect.getsource(f) for f in (neighbours, route, walkthrough, build_house, _compile_all)]
    parts += [repr((ROOMS, PASSAGES, OBJECTIVE, GRAMMAR_FLAGS, grammar_seed, textworld.__version__))]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def game_dir(cache_dir: str | os.PathLike | None = None, grammar_seed: int = GRAMMAR_SEED) -> Path:
    """`<cache_dir>/text_nav/<hash>/` (cache_dir defaults to `${LMRL_CACHE:-.cache/lmrl}`), holding
    the compiled games; built first if missing, under a temporary name renamed into place."""
    try:
        import textworld  # noqa: F401
    except ImportError as err:
        raise ImportError("Text-Nav needs Microsoft TextWorld: pip install 'lmrl[textnav]'") from err
    root = Path(cache_dir or os.environ.get("LMRL_CACHE", ".cache/lmrl")) / "text_nav"
    target = root / builder_hash(grammar_seed)
    if (target / "manifest.json").exists():
        return target
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".building-", dir=root))
    try:
        tmp.chmod(0o755)  # mkdtemp's 0700 would keep a shared cache private
        _compile_all(tmp, grammar_seed)
        os.rename(tmp, target)
    except OSError:
        if not (target / "manifest.json").exists():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # gone after a rename; another process won otherwise
    return target


@dataclass(frozen=True)
class HouseState:
    """The hidden state that matters: where the player and the stale food are, what is open."""

    room: str
    food_holder: str  # "inventory", "eaten", "floor", "table", "chest" or "fridge"
    food_room: str | None  # the holder's room (None in the inventory or eaten)
    open: frozenset[str]  # open containers among {"chest", "fridge"}


@dataclass(frozen=True)
class _Moves:
    actions: list  # TextWorld `Action`s valid in a logic state
    commands: frozenset[str]  # their commands: the full admissible set
    listed: tuple[str, ...]  # the commands shown to the agent (sorted, no look/examine/inventory)


_MOVES_CACHE_SIZE = 4096  # per start-room game; ~4 kB an entry


class _RoomGame:
    """One compiled start-room game, shared by every env of the process: the logic, one
    interpreter, and the initial snapshot, text and inventory line."""

    def __init__(self, z8_path: Path):
        import jericho
        from textworld.generator.game import Game
        from textworld.generator.inform7 import Inform7Game

        self.game = Game.load(str(z8_path.with_suffix(".json")))
        self.inform7 = Inform7Game(self.game)
        self.names = {k: info.name for k, info in self.game.infos.items()}
        self.ids = {name: k for k, name in self.names.items()}
        self._moves: dict[frozenset, _Moves] = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "not fully supported": Jericho lacks bindings for TextWorld games
            self.frotz = jericho.FrotzEnv(str(z8_path), FROTZ_SEED)
        intro, _ = self.frotz.reset()
        inventory = self.command("tw-extra-infos inventory")[1]
        self.command("tw-trace-actions")  # print Inform7 action events, which drive the logic
        self.initial = (self.frotz.get_state(), self.game.world.state, inventory)
        self.intro = intro[intro.index(OBJECTIVE):]
        self.decorations = {info.desc.split("\n\n")[0].strip() for info in self.game.infos.values()
                            if info.type == "r"}

    def moves(self, state) -> _Moves:
        """The valid actions of a logic state and their commands, memoized (states recur a lot)."""
        key = frozenset(state.facts)
        if key not in self._moves:
            if len(self._moves) >= _MOVES_CACHE_SIZE:
                self._moves.clear()
            kb = self.game.kb
            actions = list(state.all_applicable_actions(kb.rules.values(), kb.types.constants_mapping))
            commands = self.inform7.gen_commands_from_actions(actions)
            listed = tuple(c for c in sorted(set(commands)) if not any(w in c for w in HIDDEN_FROM_LIST))
            self._moves[key] = _Moves(actions, frozenset(commands), listed)
        return self._moves[key]

    def command(self, text: str) -> tuple[str, str, list[str]]:
        """Run one command on the interpreter: (feedback, inventory line, Inform7 events)."""
        from textworld.envs.wrappers.tw_inform7 import (
            _detect_extra_infos,
            _detect_i7_events_debug_tags,
        )

        raw = self.frotz.step(text)[0]
        extra, raw = _detect_extra_infos(raw, ["inventory"])
        events, raw = _detect_i7_events_debug_tags(raw)
        return raw, " ".join((extra["inventory"] or "").split()), events


_GAMES: dict[Path, _RoomGame] = {}


def _room_game(folder: Path, room: str) -> _RoomGame:
    path = (folder / f"{_slug(room)}.z8").resolve()
    if path not in _GAMES:
        _GAMES[path] = _RoomGame(path)
    return _GAMES[path]


def clean_feedback(raw: str) -> str:
    """One paragraph per line, without headers, the status bar and the end-of-game prompts."""
    lines = raw.split("\n")
    if lines and lines[-1].startswith(">"):
        lines.pop()  # the prompt and the status bar (`>   -= Kitchen =-0/7`)
    kept = [line.strip() for line in lines if line.strip() and not _DROPPED_LINES.fullmatch(line.strip())]
    return "".join(line + "\n" for line in kept)


def normalize_command(action: str) -> str | None:
    """`  Go  West\\n` -> `go west`; None unless printable ASCII (after one trailing newline)."""
    body = action.removesuffix("\n")
    if len(body) > 200 or not _PRINTABLE_ASCII.fullmatch(body):
        return None
    return " ".join(body.split()).lower()


class TextNavEnv(TextEnv):
    """The TextWorld house.  `fully_observed` picks the FO or PO text; the compiled games
    live in `<cache_dir>/text_nav/<hash>/`, `cache_dir` defaulting to `${LMRL_CACHE:-.cache/lmrl}`."""

    def __init__(self, fully_observed: bool = True, max_steps: int = 20,
                 cache_dir: str | os.PathLike | None = None, grammar_seed: int = GRAMMAR_SEED):
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        self.fully_observed = fully_observed
        self.max_steps = max_steps
        self.folder = game_dir(cache_dir, grammar_seed)
        self._rng = random.Random()
        self.start_room = ROOMS[0]
        self.num_steps = 0
        self.done = True
        self.history: History = ()
        self._game: _RoomGame | None = None

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[History, dict]:
        """Start in `options["start_room"]` (one of the eight rooms), else in a random room from the env's RNG."""
        if seed is not None:
            self._rng.seed(seed)
        options = options or {}
        room = options.get("start_room")
        if room is None:
            room = self._rng.choice(ROOMS)
        elif room not in ROOMS:
            raise ValueError(f"start_room {room!r} is not a room; choose one of {list(ROOMS)}")
        self.start_room, self.num_steps, self.done = room, 0, False
        self._game = _room_game(self.folder, room)
        self._snapshot, state, self._inventory = self._game.initial
        self._state = state.copy()
        self._moves = self._game.moves(self._state)
        self.history = (Text(self._render(clean_feedback(self._game.intro), final=False), False),)
        return self.history, {"start_room": room, "room": room}

    def step(self, action: str) -> StepResult:
        """One command: 1 and terminated when the stale food is in the closed fridge, 0 otherwise (eating it ends the
        episode too); a command the game does not admit gets a fixed reply and changes nothing. Every call counts
        towards `max_steps`, whose last call truncates."""
        if self.done:
            raise RuntimeError("step() called on a finished episode; call reset() first")
        self.num_steps += 1
        command = normalize_command(action)
        invalid = command not in self._moves.commands
        raw = "" if invalid else self._execute(command)
        feedback = INVALID_REPLY if invalid else clean_feedback(raw)
        won, lost = "*** The End ***" in raw, "*** You lost! ***" in raw
        terminated = won or lost
        truncated = not terminated and self.num_steps >= self.max_steps
        self.done = terminated or truncated
        obs = Text(self._render(feedback, final=terminated), False)
        self.history = self.history + (Text(action, True), obs)
        info = {"room": self.state().room, "success": won, "failed": lost, "invalid": invalid}
        return StepResult(self.history, 1.0 if won else 0.0, terminated, truncated, info)

    def eval_reset_options(self) -> list[dict]:
        """The evaluation's start states: each of the eight rooms."""
        return [{"start_room": room} for room in ROOMS]

    def legal_actions(self) -> list[str]:
        """The commands the game admits in the current state (empty once the episode is over)."""
        return [] if self.done else [c + "\n" for c in self._moves.listed]

    def admissible_commands(self) -> list[str]:
        """TextWorld's full admissible set now, look/examine/inventory included (no newlines)."""
        return sorted(self._moves.commands)

    def state(self) -> HouseState:
        """The hidden state read from the game logic's facts."""
        names, facts = self._game.names, list(self._state.facts)
        where = {f.arguments[0].name: f for f in facts if f.name in ("at", "on", "in") and len(f.arguments) == 2}
        room = names[where["P"].arguments[1].name]
        opened = frozenset(names[f.arguments[0].name] for f in facts if f.name == "open")
        food = self._game.ids["stale food"]
        if food not in where:
            return HouseState(room, "eaten", None, opened)
        holder = where[food].arguments[1]
        if holder.name == "I":
            return HouseState(room, "inventory", None, opened)
        if holder.type == "r":
            return HouseState(room, "floor", names[holder.name], opened)
        return HouseState(room, names[holder.name], names[where[holder.name].arguments[1].name], opened)

    def _execute(self, command: str) -> str:
        game = self._game
        game.frotz.set_state(self._snapshot)
        raw, inventory, events = game.command(command)
        self._snapshot = game.frotz.get_state()
        self._inventory = inventory or self._inventory
        for event in events:  # as TextWorld's StateTracking: the printed events drive the logic
            action = game.inform7.detect_action(event, self._moves.actions)
            if action is not None:
                self._state.apply(action)
                self._moves = game.moves(self._state)
        return raw

    def _render(self, feedback: str, final: bool) -> str:
        if not self.fully_observed:
            feedback = "".join(line + "\n" for line in feedback.splitlines() if line not in self._game.decorations)
        text = feedback + (self._inventory + "\n" if self.fully_observed else "")
        if not final:
            text += "\nAdmissible commands: " + ", ".join(self._moves.listed) + "\n"
        return text
