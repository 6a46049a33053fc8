"""The trl example (examples/trl_grpo_maze.py, run by the command of docs/interop/trl.md): trl's GRPOTrainer trains
a tiny GPT-2 on the maze through its Gymnasium env, one whole multi-turn episode per completion.

The page's command runs in this process (trl imports once, ~7 s of CPU; its 4 GRPO steps take ~3 s), and a rollout
is checked against a replay of its moves in a fresh env: the completion is exactly the episode's text, the model's
tokens are unmasked and the env's masked, and the reward is the episode's return.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
from pathlib import Path
from types import SimpleNamespace

import gymnasium
import pytest
import torch

from lmrl.envs.base import history_to_str

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "trl_grpo_maze.py"
PAGE = ROOT / "docs" / "interop" / "trl.md"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("trl_grpo_maze", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def documented_arguments() -> list[str]:
    """The arguments of the one command in trl.md's bash block."""
    blocks = re.findall(r"^```bash\n(.*?)^```", PAGE.read_text(), re.S | re.M)
    lines = [line for block in blocks for line in block.splitlines() if line.strip() and not line.startswith("#")]
    assert len(lines) == 1, lines
    argv = shlex.split(lines[0])
    assert argv[:2] == ["python", "examples/trl_grpo_maze.py"], argv
    return argv[2:]


def test_the_documented_command_trains_the_maze_with_grpo(example, tmp_path, capsys):
    argv = documented_arguments()
    argv[argv.index("--out") + 1] = str(tmp_path)
    example.main(argv)
    summary = json.loads((tmp_path / "summary.json").read_text())
    steps = [row for row in summary["log_history"] if "reward" in row]
    assert len(steps) == int(argv[argv.index("--steps") + 1])
    assert summary["prompts"] == [[5, 5], [5, 6], [5, 7], [6, 6], [7, 6]]  # the cells 4 moves can reach the goal from
    # returns of 4-move episodes: -5 (no goal: 4 moves and the Failure call) up to 0 (the goal on the first move)
    assert all(-5.0 <= row["reward"] <= 0.0 for row in steps)
    assert any(row["reward_std"] > 0 for row in steps), "no group had different returns: GRPO learned nothing"
    assert summary["changed"], "the weights did not move"
    assert "step 1: mean return" in capsys.readouterr().out


def replay(example, env: gymnasium.Env, options: dict, ids: list[int], mask: list[int], tokenizer):
    """Split a completion into the model's turns (unmasked runs) and replay them in `env`; the env's history."""
    turns, run = [], []
    for token, keep in zip(ids, mask):
        if keep:
            run.append(token)
        elif run:
            turns.append(tokenizer.decode(run))
            run = []
    _, info = env.reset(options=options)
    total = 0.0
    for turn in turns:
        _, reward, terminated, truncated, info = env.step(turn if turn.endswith("\n") else turn + "\n")
        total += reward
    assert terminated or truncated
    return info["history"], total, turns


@pytest.mark.parametrize("free", [False, True])
def test_a_rollout_is_whole_episodes_with_the_env_text_masked(example, free):
    torch.manual_seed(0)
    env = gymnasium.make(example.ENV_ID, overrides=["task.env.max_steps=4"])
    prompts = example.start_prompts(env, max_distance=4)
    model, tokenizer = example.tiny_model(example.env_corpus(env, episodes=5))
    rollout = example.make_rollout(env, prompts, tokenizer, free=free)
    batch = list(prompts)[:2] * 2
    out = rollout(batch, SimpleNamespace(model=model))
    assert len(out["completion_ids"]) == len(batch) == len(out["env_return"])
    fresh = gymnasium.make(example.ENV_ID, overrides=["task.env.max_steps=4"])
    fields = ("prompt_ids", "completion_ids", "env_mask", "logprobs", "env_return")
    for prompt, prompt_ids, ids, mask, logprobs, ret in zip(batch, *(out[k] for k in fields), strict=True):
        assert prompt_ids == tokenizer(prompt)["input_ids"] and len(ids) == len(mask) == len(logprobs)
        assert ids[-1] == tokenizer.eos_token_id and mask[-1] == 0
        history, total, turns = replay(example, fresh, prompts[prompt], ids, mask, tokenizer)
        assert tokenizer.decode(ids[:-1]) == history_to_str(history[1:])  # the episode after the first observation
        assert ret == total and 1 <= len(turns) <= 5  # 4 moves and the call that ends the episode, or fewer
        if not free:
            assert set(turns) <= {"move up\n", "move down\n", "move left\n", "move right\n"}
        assert all(lp < 0 for lp, keep in zip(logprobs, mask) if keep)
