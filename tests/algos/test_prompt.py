"""algo=prompt: the chooser over each state's legal actions, the parser that drops echoed cues, and the prompted
cells of table2_small (k = 2 example episodes, at least 32 episodes or every start state).  CPU, no model."""

from __future__ import annotations

import json
import zlib

import pytest
import torch
from omegaconf import OmegaConf

from lmrl.algos.base import ConfigError, typed_config
from lmrl.algos.prompt import PromptConfig, PromptPolicy, lists_legal_actions, parse_action
from lmrl.envs.base import Episode, Text
from lmrl.envs.wordle import ACTIONS as WORDS
from lmrl.rollout.evaluate import run_episodes

RULES = "Play the game well. Reply with exactly one of the commands listed in the observation."


def crc(reply: str) -> float:
    """A preference known in advance and spread over the actions: a reply's CRC, scaled."""
    return zlib.crc32(reply.encode()) / 2**32


class PlantedScorer:
    """A backend whose log-likelihoods are known: reply r scores `prefer(r)` in every conversation.  It keeps
    every call's replies and writes nothing (`complete` is an error: the chooser must not generate)."""

    def __init__(self, prefer=crc):
        self.prefer, self.calls = prefer, []

    def score(self, conversations, replies):
        self.calls.append(list(replies))
        return torch.tensor([[self.prefer(r) for r in replies]] * len(conversations))

    def complete(self, conversations, max_new_tokens, temperature):
        raise AssertionError("the chooser generated a reply")


class Writer:
    """A backend that writes the planted reply to every conversation and counts them."""

    def __init__(self, reply: str):
        self.reply, self.asked = reply, 0

    def complete(self, conversations, max_new_tokens, temperature):
        self.asked += len(conversations)
        return [self.reply] * len(conversations)


def policy(backend, choose=True, **cfg) -> PromptPolicy:
    return PromptPolicy(backend, PromptConfig(**cfg), RULES, [], window=None, choose=choose)


def legality_checked(make_env, played: list, legal_seen: set):
    """An env factory whose envs fail on an action outside `legal_actions()` and record every action played and
    every legal action they offered."""
    def make():
        env = make_env()
        step = env.step

        def checked(action):
            legal = env.legal_actions()
            assert action in legal, f"{action!r} is not legal here: {legal[:8]}"
            played.append(action)
            legal_seen.update(a.strip() for a in legal)
            return step(action)

        env.step = checked
        return env

    return make


def text_nav():
    pytest.importorskip("textworld")
    from lmrl.envs.text_nav import TextNavEnv

    return lambda: TextNavEnv(max_steps=6), [{"start_room": "bedroom"}, {"start_room": "kitchen"}]


def wordle():
    from lmrl.envs.wordle import WordleEnv

    return WordleEnv, [{"secret": "slate"}, {"secret": "house"}]


def chess():
    from lmrl.envs.chess import ChessEnv

    return lambda: ChessEnv(random_opponent=True, max_moves=6), [{}, {}]


@pytest.mark.parametrize("game", [text_nav, wordle, chess], ids=["text_nav", "wordle", "chess"])
def test_the_chooser_plays_only_legal_actions(game, tmp_path):
    """Through the rollout's hook (`wants_legal_actions`): every action is one of its state's legal actions and
    the most preferred of those scored; only legal actions are scored, at most `max_choices` of them a state."""
    make_env, options = game()
    played, legal_seen, scorer = [], set(), PlantedScorer()
    chooser = policy(scorer, max_choices=40, choice_batch=16)
    chooser.log_path = tmp_path / "choices.jsonl"
    episodes = run_episodes(chooser, legality_checked(make_env, played, legal_seen), options, [0, 1])
    assert all(ep.done for ep in episodes) and len(played) == sum(ep.num_actions for ep in episodes)
    rows = [json.loads(line) for line in chooser.log_path.read_text().splitlines()]
    scored = [row for row in rows if len(row["scores"]) > 1]  # a lone legal action is played unscored
    assert scored and all(row["action"] == max(row["scores"], key=row["scores"].get) for row in scored)
    assert all(1 <= len(row["scores"]) <= 40 for row in rows)
    assert all(list(row["scores"].values()) == [None] for row in rows if row not in scored)
    assert {a.strip() for call in scorer.calls for a in call} <= legal_seen


def test_the_most_likely_action_wins_across_score_batches(tmp_path):
    """The chooser plays argmax log p(action | prompt) of the state's legal actions, whatever their order and
    however they are split into score batches; the log holds every action's score."""
    legal = [f"go {d}\n" for d in ("north", "south", "east", "west", "up", "down", "in")]
    history = (Text("You are in a hall.\n", False),)
    for favourite in legal:
        scorer = PlantedScorer(lambda r, f=favourite: 0.0 if r == f.strip() else -1.0 - len(r) / 10)
        log = tmp_path / f"{favourite.strip()}.jsonl"
        chooser = policy(scorer, choice_batch=3)
        chooser.log_path = log
        assert chooser.act([history], legal=[legal]) == [favourite]
        assert [len(c) for c in scorer.calls] == [3, 3, 1]
        row = json.loads(log.read_text())
        assert set(row["scores"]) == set(legal) and max(row["scores"], key=row["scores"].get) == favourite


def test_large_legal_sets_are_a_seeded_sample_plus_the_examples_actions():
    """Wordle's 431 words cut to `max_choices`: the same sample for the same game, another for another game,
    with every legal word the examples played; an example's illegal text is never offered."""
    example = Episode([Text("Wordle:\n", False), Text("s l a t e\n", True), Text("b b b b b\n", False),
                       Text("x x x x x\n", True)], [0.0, -1.0, 0.0, -1.0], True, {})
    chooser = PromptPolicy(PlantedScorer(), PromptConfig(max_choices=10), RULES, [example], window=None, choose=True)
    one = (Text("Wordle:\n", False),)
    two = one + (Text("c r a n e\n", True), Text("b y b b g\n", False))
    first, again, other = chooser.options(one, WORDS), chooser.options(one, WORDS), chooser.options(two, WORDS)
    assert first == again and first != other
    assert "s l a t e\n" in first and "s l a t e\n" in other and "x x x x x\n" not in first
    assert 10 <= len(first) <= 11 and set(first) <= set(WORDS)
    chooser.cfg = PromptConfig(max_choices=None)
    assert chooser.options(one, WORDS) == list(WORDS)


def test_a_lone_legal_action_is_played_without_the_model():
    scorer = PlantedScorer()
    assert policy(scorer).act([(Text("A dead end.\n", False),)], legal=[["go east\n"]]) == ["go east\n"]
    assert scorer.calls == []


def test_identical_greedy_prompts_are_answered_once():
    """At temperature 0 the same state played by several episodes costs one scoring (one generation); sampled
    turns are each drawn."""
    history, legal = (Text("You are in a hall.\n", False),), ["go north\n", "go south\n"]
    scorer = PlantedScorer()
    assert len(set(policy(scorer).act([history] * 5, legal=[legal] * 5))) == 1 and len(scorer.calls) == 1
    scorer = PlantedScorer()
    policy(scorer, temperature=1.0).act([history] * 5, legal=[legal] * 5)
    assert len(scorer.calls) == 5
    writer = Writer("go north")
    assert policy(writer, choose=False).act([history] * 5) == ["go north\n"] * 5 and writer.asked == 1


def test_states_without_legal_actions_are_written_or_refused():
    """decode=auto writes where a state's legal actions are unknown; decode=choose refuses; a task's env class
    says whether it lists legal actions (Wordle's does, 20 Questions' does not)."""
    history = (Text("Is it an animal?\n", False),)
    assert policy(Writer("ACTION: Is it alive?")).act([history], legal=[None]) == ["Is it alive?\n"]
    with pytest.raises(ValueError, match="legal actions"):
        policy(Writer("x"), decode="choose").act([history], legal=[None])
    task = lambda target: OmegaConf.create({"cfg": {"env": {"_target_": target}}})  # noqa: E731
    assert lists_legal_actions(task("lmrl.envs.wordle.WordleEnv"))
    assert not lists_legal_actions(task("lmrl.envs.dialogue.twenty_questions.TwentyQuestionsEnv"))
    with pytest.raises(ConfigError, match="max_choices"):
        typed_config(PromptConfig, OmegaConf.create({"max_choices": 0}))


GAME = (Text("You are in the kitchen. You see a fridge.\n", False), Text("open fridge\n", True),
        Text("You open the fridge.\n", False))


@pytest.mark.parametrize("reply, action", [
    ("Your next action:\ngo west", "go west\n"),  # the prompt's cue, then the action
    ("ACTION:\nclose fridge", "close fridge\n"),  # a bare cue
    ("The game so far:\nYou open the fridge.\ngo east", "go east\n"),  # the cue and an observation line
    (f"{RULES}\ntake stale food", "take stale food\n"),  # the rules
    ("Reply with exactly one of the commands\ngo south", "go south\n"),  # a long stretch of the rules
    ("Example 1:\nHere is my move:\n`insert stale food into fridge`", "insert stale food into fridge\n"),
    ("Your move: go north", "go north\n"),  # a cue before the action on its line
    ("open fridge", "open fridge\n"),  # an agent turn of the prompt is an action, not an echo
    ("You open the fridge.", "You open the fridge.\n"),  # every line an echo: the first line stays
    ("", "\n"),
])
def test_the_parser_skips_echoed_cues(reply, action):
    messages = PromptPolicy(None, PromptConfig(), RULES, [], window=None).messages(GAME)
    assert parse_action(reply, messages) == action


def test_a_served_policy_gets_no_echo_filter():
    """format=history: the prompt is a trained policy's own text, and repeating an observation's line is its
    action (no cue was given to echo)."""
    writer = Writer("You open the fridge.\nopen fridge")
    prompt = policy(writer, choose=False, format="history")
    assert prompt.act([GAME]) == ["You open the fridge.\n"]
    assert policy(writer, choose=False).act([GAME]) == ["open fridge\n"]


def test_table2_small_prompted_cells_use_two_shots_and_32_episodes():
    """Every prompted cell of table2_small (the skipped chess games included): k = 2 example episodes, and at
    least 32 evaluation episodes or every start state of its task."""
    from hydra.utils import instantiate

    from launchers.sweep import plan
    from lmrl.rollout.evaluate import protocol

    sweep = plan("table2_small", ["sweep.skip=null"], {"algo": {"prompt"}})
    assert sorted(c.task for c in sweep.cells) == sorted(sweep.spec["tasks"])
    for cell in sweep.cells:
        cfg = sweep.configs[cell.name]
        assert cfg.algo.shots == 2 and cfg.algo.decode == "auto", cell.name
        ev = cfg.task.eval
        env_cfg = OmegaConf.to_container(cfg.task.env, resolve=True)
        options, _ = protocol(lambda: instantiate(env_cfg), ev.episodes_per_start, 0, ev.max_starts)
        every = len(instantiate(env_cfg).eval_reset_options())
        assert len(options) >= min(32, every) and len({json.dumps(o) for o in options}) == min(every, 32), cell.name
