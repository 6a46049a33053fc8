"""`python -m lmrl.serve` driven by the official `openai` client: stop, n, max_tokens, temperature, seed,
usage, streaming, a value checkpoint served from its run directory, bad requests, two clients at once."""

from __future__ import annotations

import http.client
import json
import threading
from urllib.parse import urlparse

import openai
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from tests.e2e import Server, run_cli

# A maze FO observation from the task's dataset: the BC policy answers it with a move.
OBS = ("The goal is at position 8, 6. Your current position is at position 1, 5. "
       "There are walls to your right, above you, below you.\n")
MOVES = {"move up", "move down", "move left", "move right"}


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def runs(tmp_path_factory, cache):
    """A BC run (100 steps: it answers in moves) and an ILQL run (a value checkpoint: value/ + policy/)."""
    root = tmp_path_factory.mktemp("runs")
    common = ["task=maze_fo", "debug=smoke", "task.eval.max_starts=1"]
    run_cli("lmrl.train", ["algo=bc", "smoke.steps=100", *common], root / "bc", cache)
    run_cli("lmrl.train", ["algo=ilql", "smoke.steps=20", *common], root / "ilql", cache)
    return root


@pytest.fixture(scope="module")
def bc(runs, cache):
    server = Server(runs / "bc" / "checkpoint", cache)
    yield server
    server.close()


@pytest.fixture(scope="module")
def client(bc):
    return openai.OpenAI(base_url=bc.url, api_key="unused", max_retries=0, timeout=120)


def ask(client, **kwargs):
    return client.chat.completions.create(model="bc", messages=[{"role": "user", "content": OBS}], **kwargs)


def test_stop_defaults_to_the_end_of_the_turn_and_is_honoured(client):
    turn = ask(client, temperature=0)
    assert turn.choices[0].message.content in MOVES and turn.choices[0].finish_reason == "stop"
    free = ask(client, temperature=0, stop=[], max_tokens=12)  # no stop: the policy plays on past its turn
    assert "\n" in free.choices[0].message.content and free.choices[0].finish_reason == "length"
    assert free.choices[0].message.content.startswith(turn.choices[0].message.content + "\n")
    word = ask(client, temperature=0, stop=" ")
    assert word.choices[0].message.content == "move" and word.choices[0].finish_reason == "stop"
    cut = ask(client, temperature=0, max_tokens=1)
    assert cut.choices[0].finish_reason == "length" and cut.usage.completion_tokens == 1


def test_n_seed_temperature_and_usage(client, runs):
    tokenizer = AutoTokenizer.from_pretrained(runs / "bc" / "checkpoint")
    greedy = ask(client, temperature=0, n=3)
    assert [c.index for c in greedy.choices] == [0, 1, 2]
    assert len({c.message.content for c in greedy.choices}) == 1  # greedy: the same turn thrice
    content = greedy.choices[0].message.content
    # usage: the prompt's tokens; per choice the turn's tokens and its newline
    assert greedy.usage.prompt_tokens == len(tokenizer(OBS, add_special_tokens=False)["input_ids"])
    assert greedy.usage.completion_tokens == 3 * len(tokenizer(content + "\n", add_special_tokens=False)["input_ids"])
    assert greedy.usage.total_tokens == greedy.usage.prompt_tokens + greedy.usage.completion_tokens
    hot = [ask(client, temperature=2.0, n=4, seed=s, stop=[], max_tokens=8) for s in (0, 0, 1)]
    texts = [[c.message.content for c in r.choices] for r in hot]
    assert texts[0] == texts[1] and texts[0] != texts[2]  # a seed reproduces its draw; another seed differs
    assert len(set(texts[0])) > 1  # the n choices are separate draws


def read_stream(stream) -> tuple[dict, dict, object]:
    text, finish, usage = {}, {}, None
    for chunk in stream:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            text[choice.index] = text.get(choice.index, "") + (choice.delta.content or "")
            if choice.finish_reason:
                finish[choice.index] = choice.finish_reason
    return text, finish, usage


def test_streaming_sends_the_same_completion_as_events(client):
    kwargs = {"temperature": 1.5, "n": 2, "seed": 7, "max_tokens": 10, "stop": ["\n", "ve d"]}
    whole = ask(client, **kwargs)
    text, finish, usage = read_stream(ask(client, stream=True, stream_options={"include_usage": True}, **kwargs))
    assert text == {c.index: c.message.content for c in whole.choices}
    assert finish == {c.index: c.finish_reason for c in whole.choices}
    assert usage.completion_tokens == whole.usage.completion_tokens and usage.prompt_tokens == whole.usage.prompt_tokens
    greedy = ask(client, temperature=0).choices[0].message.content
    assert read_stream(ask(client, stream=True, temperature=0))[0] == {0: greedy}


def greedy_turn(lm_dir, prompt: str, new_tokens: int = 8) -> str:
    """The plain LM's greedy turn through Hugging Face's own generate (an independent implementation)."""
    tokenizer, lm = AutoTokenizer.from_pretrained(lm_dir), AutoModelForCausalLM.from_pretrained(lm_dir)
    ids = torch.tensor([tokenizer(prompt, add_special_tokens=False)["input_ids"]])
    out = lm.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens, do_sample=False,
                      pad_token_id=tokenizer.pad_token_id)
    return tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True).split("\n")[0]


def test_a_value_checkpoint_is_served_from_its_run_directory(runs, cache, client):
    server = Server(runs / "ilql", cache)  # the run directory: its checkpoint/ holds value/, policy/, lmrl_algo.json
    try:
        ilql = openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=120)
        assert [m.id for m in ilql.models.list()] == ["ilql"]
        messages = [{"role": "user", "content": OBS}]
        guided = ilql.chat.completions.create(model="ilql", messages=messages, temperature=0, n=2)
        assert guided.choices[0].finish_reason in ("stop", "length") and guided.usage.completion_tokens > 0
        assert "\n" not in guided.choices[0].message.content  # its turn ends at the newline
        # beta=0 leaves the policy's own logits: the greedy turn of its BC policy, as transformers generates it
        plain = ilql.chat.completions.create(model="ilql", messages=messages, temperature=0, extra_body={"beta": 0})
        assert plain.choices[0].message.content == greedy_turn(runs / "ilql" / "checkpoint" / "policy", OBS)
        with pytest.raises(openai.BadRequestError) as bad:
            ilql.chat.completions.create(model="ilql", messages=messages, extra_body={"beta": -1})
        assert bad.value.param == "beta"
    finally:
        server.close()
    with pytest.raises(openai.BadRequestError) as bad:  # a plain LM has no beta
        ask(client, extra_body={"beta": 1.0})
    assert bad.value.param == "beta" and "value checkpoints" in bad.value.message


@pytest.mark.parametrize("kwargs, param", [
    ({"n": 0}, "n"), ({"n": 99}, "n"), ({"temperature": -1}, "temperature"), ({"temperature": 3}, "temperature"),
    ({"max_tokens": 0}, "max_tokens"), ({"max_tokens": 10**6}, "max_tokens"), ({"stop": list("abcde")}, "stop"),
    ({"top_p": 0.5}, "top_p"), ({"extra_body": {"frobnicate": 1}}, "frobnicate"),
    ({"extra_body": {"seed": "x"}}, "seed"), ({"extra_body": {"stream": "yes"}}, "stream"),
    ({"messages": []}, "messages"), ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0]"),
    ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
    ({"stream_options": {"include_usage": True}}, "stream_options"),
])
def test_bad_requests_get_a_400_naming_the_field(client, kwargs, param):
    kwargs = {"messages": [{"role": "user", "content": OBS}], **kwargs}
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model="bc", **kwargs)
    assert bad.value.status_code == 400 and bad.value.param == param, bad.value.message


def raw(url: str, method: str, path: str, body: bytes = b"", headers: dict | None = None) -> tuple[int, dict]:
    parsed = urlparse(url)
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=60)
    conn.request(method, parsed.path + path, body=body, headers=headers or {})
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, json.loads(data) if data.startswith(b"{") else {}


def test_malformed_http_gets_errors_and_the_server_lives_on(bc, client):
    assert raw(bc.url, "POST", "/chat/completions", b"{not json")[0] == 400
    status, payload = raw(bc.url, "POST", "/chat/completions", b"[1, 2]")
    assert status == 400 and "JSON object" in payload["error"]["message"]
    assert raw(bc.url, "POST", "/chat/completions", b"{}", {"Content-Length": "many"})[0] == 400
    assert raw(bc.url, "POST", "/chat/completions", b"{}", {"Content-Length": str(2 << 20)})[0] == 413  # by its length
    assert raw(bc.url, "POST", "/embeddings", b"{}")[0] == 404
    assert raw(bc.url, "GET", "/models/bc")[1]["id"] == "bc"
    assert bc.proc.poll() is None and ask(client, temperature=0).choices[0].message.content in MOVES


def test_two_clients_at_once_get_what_each_asked_for(bc):
    """Two clients (one streaming) send seeded requests at the same time; each gets what it gets alone."""
    def request(seed: int, stream: bool):
        c = openai.OpenAI(base_url=bc.url, api_key="unused", max_retries=0, timeout=120)
        reply = ask(c, temperature=1.5, n=2, seed=seed, max_tokens=8, stop=[], stream=stream)
        return read_stream(reply)[0] if stream else {ch.index: ch.message.content for ch in reply.choices}

    alone = {seed: request(seed, False) for seed in range(4)}
    together, errors = {}, []

    def worker(seeds, stream):
        try:
            for seed in seeds:
                together[seed] = request(seed, stream)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=([0, 1], True)),
               threading.Thread(target=worker, args=([2, 3], False))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors and together == alone
