"""What a generated turn hands the env: the text up to its first newline, ended by exactly one newline.

The original's policies stop generating at a newline and then end the text with exactly one
(dropping a trailing one and appending one), so a turn cut off at the token budget still reaches
the env with its newline; the maze env itself matches its four action strings exactly.
"""

import pytest
import torch

from lmrl.envs.maze import MazeEnv
from lmrl.rollout.policy import LMPolicy, end_turn
from tests.rollout.test_sampler import tiny


@pytest.mark.parametrize("generated, action", [
    ("move up\n", "move up\n"),  # stopped at its newline
    ("move up", "move up\n"),  # cut off at the token budget: the original appends the newline too
    ("move up\nmove down\n", "move up\n"),  # only the first line is the turn
    ("move u", "move u\n"),  # cut off mid-word: still invalid text
    ("", "\n"),
    ("\n", "\n"),
])
def test_end_turn(generated, action):
    assert end_turn(generated) == action


def forcing(ids: list[int]):
    """A logits hook that makes step k emit ids[k] (then anything)."""
    def hook(logits, step):
        if step < len(ids):
            logits = torch.full_like(logits, -1e4)
            logits[:, ids[step]] = 0.0
        return logits
    return hook


@pytest.mark.parametrize("generate, valid", [
    ("move left", True),  # cut off exactly at the token budget, before the newline
    ("move left\n", True),  # stopped by its newline
    ("move lef", False),  # cut off mid-word
])
def test_a_generated_turn_reaches_the_maze(generate, valid):
    """The budget is the forced text's length: the policy generates exactly `generate`."""
    model, tok = tiny()
    ids = tok(generate)["input_ids"]
    policy = LMPolicy(model, tok, history_window=1, max_input_tokens=64, max_new_tokens=len(ids),
                      logits_hook=forcing(ids))
    env = MazeEnv(fully_observed=True)
    history, _ = env.reset(options={"init_position": (1, 2)})
    [action] = policy.act([history])
    assert action == generate.removesuffix("\n") + "\n"
    result = env.step(action)
    assert result.info["invalid"] != valid and env.position == ((1, 1) if valid else (1, 2))
    assert result.reward == (-1.0 if valid else -4.0)
