"""algo=prompt (local and OpenAI-compatible backends), lmrl.serve over real HTTP, and model=smollm2 offline."""

from __future__ import annotations

import json

import pytest
import torch
from omegaconf import OmegaConf

from lmrl.algos.base import ConfigError, typed_config
from lmrl.algos.prompt import PromptConfig, PromptPolicy, parse_action, pick_examples
from lmrl.envs.base import Episode, Text
from lmrl.envs.maze import MazeEnv
from tests.e2e import Server, run_cli

MOVES = {"move up\n", "move down\n", "move left\n", "move right\n"}


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


@pytest.mark.parametrize("reply, action", [
    ("move up\nmove down", "move up\n"),
    ("\n\n  ACTION: move left  \nblah", "move left\n"),
    ("> `e 4`", "e 4\n"),
    ('"Is it a cat?"', "Is it a cat?\n"),
    ("", "\n"),
])
def test_parse_action_takes_the_first_line(reply, action):
    assert parse_action(reply) == action


def test_a_chat_reply_is_a_whole_turn_in_the_maze():
    """A reply ends at the model's end of sequence: `move up` is the maze's exact `move up\\n`."""
    env = MazeEnv()
    env.reset(options={"init_position": (2, 3)})
    result = env.step(parse_action("move up"))
    assert not result.info["invalid"] and result.reward == -1.0 and env.position == (1, 3)
    assert env.step(parse_action("move u")).info["invalid"]


def _ep(ret: float, name: str) -> Episode:
    return Episode([Text(f"obs {name}\n", False), Text(f"act {name}\n", True)], [0.0, ret], True, {})


def test_examples_are_seeded_draws_from_the_best_episodes():
    eps = [_ep(r, str(r)) for r in range(100)]
    picked = pick_examples(iter(eps), shots=3, pool_size=100, fraction=0.1, seed=1)
    assert len(picked) == 3 and all(ep.total_return >= 90 for ep in picked)
    assert picked == pick_examples(iter(eps), shots=3, pool_size=100, fraction=0.1, seed=1)


def test_prompt_formats():
    cfg = PromptConfig(shots=1)
    history = (Text("The goal is far.\n", False), Text("move up\n", True), Text("Still far.\n", False))
    policy = PromptPolicy(None, cfg, "Rules of the game.", [_ep(1.0, "x")], window=None)
    system, user = policy.messages(history)
    assert system["role"] == "system" and system["content"].startswith("Rules of the game.")
    assert "Example 1:\nobs x\nACTION: act x\n" in system["content"]
    assert user["content"] == "The game so far:\nThe goal is far.\nACTION: move up\nStill far.\n\nYour next action:"
    policy.window = 1  # the task's history window bounds both formats
    assert policy.messages(history)[1]["content"] == "The game so far:\nStill far.\n\nYour next action:"
    policy.cfg = PromptConfig(format="history")
    assert policy.messages(history) == [{"role": "user", "content": "Still far.\n"}]  # raw: the training prompt


def test_prompt_config_errors_name_the_problem():
    with pytest.raises(ConfigError, match="base_url"):
        typed_config(PromptConfig, OmegaConf.create({"backend": "openai"}))
    with pytest.raises(ConfigError, match="backend must be"):
        typed_config(PromptConfig, OmegaConf.create({"backend": "gpt4"}))


def test_prompt_local_backend_end_to_end(tmp_path, cache):
    """Wordle lists no actions in its task config but its env has legal_actions(): decode=auto chooses among them
    (the rollout's hook), a seeded `max_choices` of the 431 words a turn."""
    from lmrl.envs.wordle import ACTIONS

    run = tmp_path / "run"
    metrics = run_cli("lmrl.train", ["algo=prompt", "model=tiny", "debug=smoke", "task=wordle",
                                     "task.eval.max_starts=2", "algo.max_choices=16"], run, cache)
    assert metrics["algo"] == "prompt" and metrics["episodes"] == 2 and "normalized_score" in metrics
    assert metrics["policy"] == "prompt (choose)"
    rows = [json.loads(line) for line in (run / "prompt_replies.jsonl").read_text().splitlines()]
    assert rows and all(r["action"] in ACTIONS and len(r["scores"]) == 16 and set(r["scores"]) <= set(ACTIONS)
                        for r in rows)
    assert json.loads((run / "checkpoint" / "prompt.json").read_text())["rules"].startswith("Play Wordle")


def test_score_is_each_replys_log_likelihood_from_one_shared_prefill():
    """ChatModel.score (one prefill, its KV cache repeated per reply) equals a full forward of prompt + reply,
    the chat template's end of turn included."""
    from lmrl.models.chat import ChatModel, render
    from lmrl.models.factory import load_pretrained

    model, tokenizer = load_pretrained("smollm2")
    chat = ChatModel(model, tokenizer)
    conversations = [[{"role": "user", "content": "Which way? Reply with one of: move up, move left."}],
                     [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hi."}]]
    replies = ["move up", "move left", "hi"]
    scores = chat.score(conversations, replies)
    assert scores.shape == (2, 3) and tokenizer.eos_token == "<|im_end|>"
    with torch.no_grad():
        for i, conversation in enumerate(conversations):
            prompt = tokenizer(render(conversation, tokenizer), add_special_tokens=False)["input_ids"]
            for j, reply in enumerate(replies):
                reply_ids = chat.reply_ids(reply)
                assert reply_ids[-1] == tokenizer.eos_token_id
                logits = model(torch.tensor([prompt + reply_ids])).logits[0, len(prompt) - 1 : -1]
                expected = torch.log_softmax(logits.float(), -1).gather(-1, torch.tensor(reply_ids)[:, None]).sum()
                assert abs(float(scores[i, j]) - float(expected)) < 1e-3


def test_score_keeps_every_op_on_the_models_device():
    """ChatModel.score with the model on a second device (tests/device_check.py's virtual one: a GPU cannot run
    here) mixes no devices and gives the host's scores; a 1-layer Llama with SmolLM2's tokenizer and template."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from lmrl.models.chat import ChatModel
    from lmrl.models.factory import load_pretrained
    from tests.device_check import DEVICE, device_check, report

    _, tokenizer = load_pretrained("smollm2")
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32,
                                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2))
    conversation = [[{"role": "user", "content": "Which way?"}]]
    on_host = ChatModel(model, tokenizer).score(conversation, ["move up", "move left"])
    longer = [[{"role": "user", "content": "Which way? The wall is north."}]]
    on_host_longer = ChatModel(model, tokenizer).score(longer, ["move up", "move left"])
    with device_check() as violations:
        model.to(DEVICE)
        on_device = ChatModel(model, tokenizer).score(conversation, ["move up", "move left"])
        cached = ChatModel(model, tokenizer, cache_tokens=10_000)  # the prompt cache's copies and crops, on device
        cached.score(conversation, ["move up", "move left"])
        on_device_longer = cached.score(longer, ["move up", "move left"])
    assert not violations, report(violations)
    assert cached.prefixes.hits == 1
    assert torch.allclose(on_host, on_device) and torch.allclose(on_host_longer, on_device_longer, atol=1e-5)


def small_llama(layers: int = 2):
    """A 2-layer Llama (grouped KV heads, as SmolLM2) with SmolLM2's tokenizer and chat template."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from lmrl.models.factory import load_pretrained

    _, tokenizer = load_pretrained("smollm2")
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                                        num_hidden_layers=layers, num_attention_heads=4,
                                        num_key_value_heads=2)).eval(), tokenizer


def test_prefix_cache_reads_only_what_is_new_and_scores_as_a_whole_prefill():
    """A game's prompts (one system message, a history growing a turn a step, then cut, as a prompted policy's) score
    the same with the prompt cache as without it, and with it each prompt after the first is read only from where
    it parts from an earlier one."""
    from lmrl.models.chat import ChatModel, render

    model, tokenizer = small_llama()
    system = {"role": "system", "content": "Rules of the maze, then two example games. " * 20}
    turns = [f"You are at ({i}, {i + 1}). Walls: north, east.\nACTION: move up\n" for i in range(12)]
    games = [[system, {"role": "user", "content": "".join(turns[:k])[-400:] + "Your next action:"}]
             for k in range(1, 12)]
    replies = ["move up", "move down", "move left", "move right"]
    whole = ChatModel(model, tokenizer)
    cached = ChatModel(model, tokenizer, cache_tokens=100_000)
    a = torch.cat([whole.score([g], replies) for g in games])
    b = torch.cat([cached.score([g], replies) for g in games])
    assert torch.allclose(a, b, atol=1e-4), (a - b).abs().max()
    lengths = [len(tokenizer(render(g, tokenizer), add_special_tokens=False)["input_ids"]) for g in games]
    prefixes = cached.prefixes
    assert whole.prefixes.hits == whole.prefixes.reused == 0 and whole.prefixes.read == sum(lengths)
    assert prefixes.hits == len(games) - 1 and prefixes.reused + prefixes.read == sum(lengths)
    system_tokens = len(tokenizer(render([system], tokenizer), add_special_tokens=False)["input_ids"])
    assert prefixes.reused >= (len(games) - 1) * (system_tokens - 8)  # the system message is read once


def test_prefix_cache_keeps_its_token_budget_and_never_skips_a_prompts_last_token():
    """Least recently used caches go once the kept tokens pass the budget; a prompt read before in full is read
    again from its last token (whose logits the scores need), and gives the same scores."""
    from lmrl.models.chat import ChatModel

    model, tokenizer = small_llama(layers=1)
    chat = ChatModel(model, tokenizer, cache_tokens=120)
    prompts = [[{"role": "user", "content": f"Game {i}: " + "north wall, east door. " * 6}] for i in range(5)]
    first = torch.cat([chat.score([p], ["move up", "move left"]) for p in prompts])
    assert sum(map(len, chat.prefixes.entries)) <= 120 and 1 <= len(chat.prefixes.entries) < 5
    before = chat.prefixes.read
    again = chat.score([prompts[-1]], ["move up", "move left"])
    assert chat.prefixes.read == before + 1  # only its last token
    assert torch.allclose(again, first[-1:], atol=1e-5)
    off = ChatModel(model, tokenizer, cache_tokens=0)
    off.score([prompts[0]], ["move up"])
    assert not off.prefixes.entries


def test_prompt_config_rejects_a_negative_cache_budget():
    with pytest.raises(ConfigError, match="cache_tokens"):
        typed_config(PromptConfig, OmegaConf.create({"name": "prompt", "cache_tokens": -1}))


def test_choose_plays_the_most_likely_action_and_logs_the_scores(tmp_path):
    class Scorer:  # log p of each reply: "move left" most likely
        def score(self, conversations, replies):
            assert replies == ["move up", "move left"]
            return torch.tensor([[-3.0, -0.5]] * len(conversations))

    log = tmp_path / "replies.jsonl"
    policy = PromptPolicy(Scorer(), PromptConfig(), "Rules.", [], window=1, log_path=log,
                          choices=["move up\n", "move left\n"])
    history = (Text("You are at 1, 1.\n", False),)
    assert policy.act([history, history]) == ["move left\n", "move left\n"]
    row = json.loads(log.read_text().splitlines()[0])
    assert row["scores"] == {"move up\n": -3.0, "move left\n": -0.5} and row["action"] == "move left\n"
    policy.cfg = PromptConfig(temperature=1.0)  # sampled: both actions appear, the likely one more often
    picks = policy.act([history] * 400)
    assert 0.8 < picks.count("move left\n") / 400 < 0.98 and "move up\n" in picks


def test_decode_choose_needs_an_action_list_and_a_local_model():
    with pytest.raises(ConfigError, match="backend=local"):
        typed_config(PromptConfig, OmegaConf.create({"decode": "choose", "backend": "openai",
                                                     "base_url": "http://x"}))
    with pytest.raises(ConfigError, match="decode must be"):
        typed_config(PromptConfig, OmegaConf.create({"decode": "beam"}))


def test_prompt_chooses_the_mazes_moves_end_to_end(tmp_path, cache):
    """decode=auto on the maze (a fixed action list): every action is one of the four moves, so no reply is
    invalid, and the log holds each move's score."""
    run = tmp_path / "run"
    metrics = run_cli("lmrl.train", ["algo=prompt", "model=tiny", "debug=smoke", "task=maze_fo",
                                     "task.eval.max_starts=1"], run, cache)
    assert metrics["policy"] == "prompt (choose)" and metrics["return_mean"] >= -101
    rows = [json.loads(line) for line in (run / "prompt_replies.jsonl").read_text().splitlines()]
    assert rows and all(r["action"] in MOVES and set(r["scores"]) == MOVES for r in rows)


def test_serve_a_trained_policy_and_play_it_over_http(tmp_path, cache):
    bc = run_cli("lmrl.train", ["task=maze_fo", "algo=bc", "debug=smoke", "smoke.steps=100",
                                "task.eval.max_starts=2"], tmp_path / "bc", cache)
    server = Server(tmp_path / "bc" / "checkpoint", cache)
    try:
        import urllib.request

        models = json.loads(urllib.request.urlopen(server.url + "/models", timeout=30).read())
        assert models["data"][0]["id"] == "bc"
        run = tmp_path / "prompt"
        metrics = run_cli("lmrl.train", ["algo=prompt", "model=none", "algo.backend=openai",
                                         f"algo.base_url={server.url}", "algo.format=history", "task=maze_fo",
                                         "debug=smoke", "task.eval.max_starts=2"], run, cache)
    finally:
        server.close()
    assert metrics["episodes"] == 2 and "normalized_score" in metrics
    actions = [json.loads(line)["action"] for line in (run / "prompt_replies.jsonl").read_text().splitlines()]
    # the served policy answers with the moves it was trained on (an untrained one would not)
    assert sum(a in MOVES for a in actions) / len(actions) > 0.9, actions[:10]
    assert bc["return_mean"] > -401  # and it is the BC checkpoint: not every move invalid


def test_smollm2_loads_offline_and_saves_like_any_model(tmp_path):
    from transformers import AutoModelForCausalLM

    from lmrl.models.factory import load_pretrained

    model, tokenizer = load_pretrained("smollm2")
    assert type(model).__name__ == "LlamaForCausalLM" and len(tokenizer) == 49152
    model.save_pretrained(tmp_path)  # the GGUF markers are dropped: the dequantized weights save normally
    tokenizer.save_pretrained(tmp_path)
    again = AutoModelForCausalLM.from_pretrained(tmp_path, local_files_only=True)
    ids = tokenizer("The capital of France is", return_tensors="pt").input_ids
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, again(ids).logits, atol=1e-4)
        assert tokenizer.decode(again(ids).logits[0, -1].argmax()).strip() == "Paris"


@pytest.mark.slow
def test_bc_from_smollm2_runs_end_to_end(tmp_path, cache):
    run = tmp_path / "run"
    metrics = run_cli("lmrl.train", ["task=maze_fo", "algo=bc", "model=smollm2", "debug=smoke", "smoke.steps=4",
                                     "smoke.batch_size=4", "task.eval.max_starts=1"], run, cache, timeout=1800)
    assert metrics["model"] == "smollm2" and metrics["episodes"] == 1
    assert json.loads((run / "checkpoint" / "config.json").read_text())["model_type"] == "llama"
