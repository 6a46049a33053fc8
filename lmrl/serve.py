"""`python -m lmrl.serve checkpoint=<dir>`: a trained policy (or any HF causal LM, or `smollm2`) as an
OpenAI-compatible chat-completions endpoint on localhost; the official `openai` client talks to it.

    POST /v1/chat/completions  messages, max_tokens | max_completion_tokens, temperature, n, stop, seed,
                               stream (+ stream_options.include_usage), beta (value checkpoints)
    GET  /v1/models, /v1/models/<id>

`checkpoint=` names a run directory or its `checkpoint/`: a `save_pretrained` LM (BC, %BC, PPO), or a
value checkpoint (MC, ILQL: `value/`, `policy/`, `lmrl_algo.json`), served as its value-guided policy
(policy logits + beta * Q; beta from the request's `beta`, else `beta=`, else the run's own); or any
local HF model directory, or `smollm2`; or LoRA adapters alone (a LoRA run's `checkpoint/adapter/`, any
peft adapter directory), loaded onto their base and merged.  Our own checkpoints end a reply at the end of the turn
(`stop` defaults to "\\n"), other models at their end-of-sequence token.  Without a chat template the
messages' contents are concatenated: send the game history as the user message (`algo.format=history`).

A bad request gets a 400 naming the field (OpenAI's error shape); nothing a client sends stops the
server.  One generation runs at a time (concurrent requests wait their turn); `stream=true` sends
server-sent events as tokens are sampled.  The model runs on `device=` (auto: the GPU when there is
one) through the engine's `place`.  `port=0` picks a free port; the first line printed is
`serving <model> at http://<host>:<port>/v1`.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import hydra
import torch
from omegaconf import DictConfig

from lmrl.algos.value_rl import load_value_checkpoint
from lmrl.dist import TorchEngine
from lmrl.models.chat import generate, prompt_ids
from lmrl.models.factory import load_pretrained, model_max_length
from lmrl.models.fused import fast_lm
from lmrl.models.value import GuidedLM

log = logging.getLogger(__name__)

TURN_END = ["\n"]  # our policies' turns end at a newline (the tasks' action format)
MAX_STOP = 4
# Request fields accepted and ignored (one model is served, whatever `model` says), and fields accepted
# only at the value that changes nothing.
IGNORED = {"model", "user", "metadata", "store", "service_tier", "parallel_tool_calls"}
NEUTRAL = {"top_p": (1, 1.0), "presence_penalty": (0, 0.0), "frequency_penalty": (0, 0.0), "logprobs": (False,),
           "top_logprobs": (0,), "logit_bias": ({},), "tools": ([],), "response_format": ({"type": "text"},)}
USED = {"messages", "max_tokens", "max_completion_tokens", "temperature", "n", "stop", "seed", "stream",
        "stream_options", "beta"}
ROLES = {"system", "developer", "user", "assistant", "tool"}


class BadRequest(ValueError):
    """A request the server cannot serve; `param` names the offending field."""

    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        self.param = param


@dataclass
class Served:
    """The model behind the endpoint and what requests default to."""

    model: torch.nn.Module  # what tokens are sampled from (value-guided for a value checkpoint)
    tokenizer: object
    name: str
    engine: TorchEngine
    stop: list[str]  # stop strings when a request names none
    eos: set[int]
    beta: float | None = None  # value checkpoints: the default beta
    lock: threading.Lock = field(default_factory=threading.Lock)
    generator: torch.Generator | None = None  # the sampling stream of requests without a seed


@dataclass
class Request:
    """A validated chat-completions request (`parse_request`), with the server's defaults filled in."""

    messages: list[dict]
    max_tokens: int
    temperature: float
    n: int
    stop: list[str]
    seed: int | None
    stream: bool
    include_usage: bool
    beta: float | None


# -- loading ---------------------------------------------------------------------------------------
def resolve_checkpoint(checkpoint: str) -> Path | str:
    """A run directory means its `checkpoint/`; a name that is no directory is a model id (`smollm2`)."""
    path = Path(checkpoint).expanduser()
    if not path.is_dir():
        if path.exists():
            raise ValueError(f"checkpoint={checkpoint}: not a directory")
        return checkpoint  # `smollm2` or a hub id (load_pretrained says why when it cannot load it)
    if not any((path / f).exists() for f in ("config.json", "lmrl_algo.json")) and (path / "checkpoint").is_dir():
        path = path / "checkpoint"
    if (path / "prompt.json").exists():
        raise ValueError(f"checkpoint={path}: an algo=prompt run has no weights of its own (serve its model, "
                         "e.g. checkpoint=smollm2)")
    if not any((path / f).exists() for f in ("config.json", "lmrl_algo.json", "adapter_config.json")):
        raise ValueError(f"checkpoint={path}: neither a save_pretrained model (config.json), a value "
                         "checkpoint (lmrl_algo.json) nor LoRA adapters (adapter_config.json)")
    return path


def load_served(checkpoint: str, engine: TorchEngine, model_name: str | None = None, beta: float | None = None,
                seed: int = 0) -> Served:
    """The model a checkpoint serves, placed on the engine's device."""
    path = resolve_checkpoint(checkpoint)
    own = isinstance(path, Path) and any((path / f).exists() for f in ("lmrl_state.json", "lmrl_algo.json",
                                                                          "lmrl_lora.json"))
    if isinstance(path, Path) and (path / "lmrl_algo.json").exists():
        value, policy_lm, tokenizer, algo = load_value_checkpoint(path)
        policy_lm = engine.place(policy_lm) if policy_lm is not None else None
        beta = algo.beta if beta is None else float(beta)
        model = engine.place(GuidedLM(engine.place(value), policy_lm, beta, algo.guide_min_prob).eval())
        eos_source = policy_lm if policy_lm is not None else value.lm
    else:
        if beta is not None:
            raise ValueError(f"beta={beta}: only value checkpoints (MC, ILQL) take a beta")
        lm, tokenizer = load_pretrained(str(path))
        eos_source = engine.place(lm).eval()
        model = fast_lm(eos_source)
    if model_name is None:  # a run's directory name, else the checkpoint's
        model_name = str(path) if not isinstance(path, Path) else path.parent.name if path.name == "checkpoint" \
            else path.name
    generator = torch.Generator(device=engine.device).manual_seed(seed)
    stop = list(TURN_END) if own else []
    return Served(model, tokenizer, model_name, engine, stop, eos_ids(tokenizer, eos_source), beta, generator=generator)


def eos_ids(tokenizer, lm: torch.nn.Module) -> set[int]:
    """End-of-sequence tokens: the tokenizer's and the model's generation config's."""
    ids = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
    configured = getattr(getattr(lm, "generation_config", None), "eos_token_id", None)
    ids |= set(configured if isinstance(configured, list) else [configured] if configured is not None else [])
    return ids


# -- requests --------------------------------------------------------------------------------------
def parse_request(raw: bytes, served: Served, default_max_tokens: int, default_temperature: float,
                  max_n: int) -> Request:
    """A validated request, or BadRequest naming the field."""
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise BadRequest(f"the request body is not valid JSON ({e})") from None
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    unknown = sorted(set(body) - USED - IGNORED - set(NEUTRAL))
    if unknown:
        raise BadRequest(f"unrecognized request argument(s): {', '.join(unknown)}", unknown[0])
    for key, allowed in NEUTRAL.items():
        if body.get(key) is not None and not any(body[key] == a and type(body[key]) is type(a) for a in allowed):
            raise BadRequest(f"{key}={json.dumps(body[key])} is not supported here (only {json.dumps(allowed[0])})",
                             key)
    max_tokens = integer(body, "max_tokens", 1, None, None)
    max_completion = integer(body, "max_completion_tokens", 1, None, None)
    if max_tokens is not None and max_completion is not None and max_tokens != max_completion:
        raise BadRequest("max_tokens and max_completion_tokens disagree", "max_tokens")
    context = model_max_length(served.model)
    max_tokens = max_tokens or max_completion or min(default_max_tokens, context - 1)
    if max_tokens >= context:
        raise BadRequest(f"max_tokens must be below the model's context of {context} tokens", "max_tokens")
    stream = body.get("stream") or False
    if not isinstance(stream, bool):
        raise BadRequest("stream must be true or false", "stream")
    return Request(parse_messages(body.get("messages")), max_tokens,
                   number(body, "temperature", 0.0, 2.0, default_temperature), integer(body, "n", 1, max_n, 1),
                   parse_stop(body, served.stop), integer(body, "seed", None, None, None), stream,
                   parse_stream_options(body, stream), parse_beta(body, served))


def integer(body: dict, key: str, low: int | None, high: int | None, default):
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"{key} must be an integer, got {json.dumps(value)}", key)
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"between {low} and {high}" if high is not None else f">= {low}"
        raise BadRequest(f"{key} must be {bounds}, got {value}", key)
    return value


def number(body: dict, key: str, low: float, high: float, default: float) -> float:
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise BadRequest(f"{key} must be a number, got {json.dumps(value)}", key)
    if not low <= value <= high:
        raise BadRequest(f"{key} must be between {low:g} and {high:g}, got {value}", key)
    return float(value)


def parse_messages(messages) -> list[dict]:
    """[{role, content}] with each content a string (text parts joined)."""
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list of {role, content} objects", "messages")
    out = []
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise BadRequest(f"{where} must be an object with a role in {sorted(ROLES)}", where)
        content = m.get("content")
        if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text"
                                             and isinstance(p.get("text"), str) for p in content):
            content = "".join(p["text"] for p in content)
        if content is None and m["role"] == "assistant":
            content = ""
        if not isinstance(content, str):
            raise BadRequest(f"{where}.content must be a string or a list of text parts", f"{where}.content")
        out.append({"role": m["role"], "content": content})
    return out


def parse_stop(body: dict, default: list[str]) -> list[str]:
    """Stop strings: absent or null = the served model's default; [] = none."""
    stop = body.get("stop")
    if stop is None:
        return list(default)
    stop = [stop] if isinstance(stop, str) else stop
    if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop) or len(stop) > MAX_STOP:
        raise BadRequest(f"stop must be a non-empty string or a list of at most {MAX_STOP} of them", "stop")
    return stop


def parse_stream_options(body: dict, stream: bool) -> bool:
    options = body.get("stream_options")
    if options is None:
        return False
    if not stream:
        raise BadRequest("stream_options needs stream=true", "stream_options")
    if not isinstance(options, dict) or set(options) - {"include_usage"} or \
            not isinstance(options.get("include_usage", False), bool):
        raise BadRequest("stream_options takes {include_usage: true|false} only", "stream_options")
    return options.get("include_usage", False)


def parse_beta(body: dict, served: Served) -> float | None:
    if body.get("beta") is None:
        return served.beta
    if served.beta is None:
        raise BadRequest("beta applies to value checkpoints (MC, ILQL) only", "beta")
    return number(body, "beta", 0.0, 1e6, served.beta)


# -- generation ------------------------------------------------------------------------------------
def completions(served: Served, request: Request):
    """The request's choices after each sampled token (call with `served.lock` held), and its prompt length."""
    ids = prompt_ids(request.messages, served.tokenizer)
    limit = model_max_length(served.model) - request.max_tokens
    ids = ids[-limit:]  # left-truncated: the end of the conversation is what the reply depends on
    if not ids:
        raise BadRequest("the messages render to an empty prompt", "messages")
    if request.beta is not None:
        served.model.beta = request.beta
    device = served.engine.device
    generator = served.generator if request.seed is None else torch.Generator(device=device).manual_seed(request.seed)
    decode = lambda tokens: served.tokenizer.decode(tokens, skip_special_tokens=True)  # noqa: E731

    def steps():
        with served.engine.autocast():
            yield from generate(served.model, ids, request.n, request.max_tokens, request.temperature, generator,
                                request.stop, served.eos, decode)

    return steps(), len(ids)


def usage(prompt_tokens: int, choices) -> dict:
    completion = sum(c.generated for c in choices)
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion, "total_tokens": prompt_tokens + completion}


# -- HTTP ------------------------------------------------------------------------------------------
def make_handler(served: Served, max_new_tokens: int, temperature: float, max_n: int, max_body: int = 1 << 20):
    class Handler(BaseHTTPRequestHandler):
        timeout = 120  # seconds a client may take to send its request

        def _send(self, code: int, payload: dict) -> None:
            body = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _error(self, code: int, message: str, param: str | None = None) -> None:
            kind = "invalid_request_error" if code < 500 else "server_error"
            self._send(code, {"error": {"message": message, "type": kind, "param": param, "code": None}})

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            path = self.path.rstrip("/").removeprefix("/v1")
            card = {"id": served.name, "object": "model", "created": 0, "owned_by": "lmrl"}
            if path == "/models":
                self._send(200, {"object": "list", "data": [card]})
            elif path == f"/models/{served.name}":
                self._send(200, card)
            else:
                self._error(404, f"no route GET {self.path}")

        def do_POST(self) -> None:  # noqa: N802
            if self.path.rstrip("/").removeprefix("/v1") != "/chat/completions":
                return self._error(404, f"no route POST {self.path}")
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                return self._error(400, "Content-Length must be an integer")
            if length > max_body:
                return self._error(413, f"the request body is over {max_body} bytes")
            try:
                request = parse_request(self.rfile.read(length), served, max_new_tokens, temperature, max_n)
                with served.lock:
                    steps, prompt_tokens = completions(served, request)
                    if request.stream:
                        return self._stream(request, steps, prompt_tokens)
                    for choices in steps:
                        pass
            except BadRequest as e:
                return self._error(400, str(e), e.param)
            except (BrokenPipeError, ConnectionResetError):
                return log.info("client went away")
            except Exception as e:  # noqa: BLE001 - the server outlives any one request
                log.exception("request failed")
                return self._error(500, f"internal error: {type(e).__name__}: {e}")
            self._send(200, {
                "id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion", "created": int(time.time()),
                "model": served.name, "system_fingerprint": None,
                "choices": [{"index": i, "message": {"role": "assistant", "content": c.text}, "logprobs": None,
                             "finish_reason": c.finish_reason} for i, c in enumerate(choices)],
                "usage": usage(prompt_tokens, choices),
            })

        def _stream(self, request: Request, steps, prompt_tokens: int) -> None:
            """Server-sent events: a role chunk per choice, text deltas as they settle, a finish chunk per
            choice, usage when asked, then [DONE].  An error after the headers is sent as an error event."""
            base = {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "object": "chat.completion.chunk",
                    "created": int(time.time()), "model": served.name, "system_fingerprint": None}

            def event(payload: dict | str) -> None:
                data = payload if isinstance(payload, str) else json.dumps(payload)
                self.wfile.write(f"data: {data}\n\n".encode())
                self.wfile.flush()

            def chunk(index: int, delta: dict, finish: str | None = None) -> None:
                event({**base, "choices": [{"index": index, "delta": delta, "logprobs": None,
                                            "finish_reason": finish}]})

            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            sent, finished, choices = [""] * request.n, [False] * request.n, []
            try:
                for i in range(request.n):
                    chunk(i, {"role": "assistant", "content": ""})
                for choices in steps:
                    for i, c in enumerate(choices):
                        text = c.settled(request.stop)
                        if len(text) > len(sent[i]) and text.startswith(sent[i]):
                            chunk(i, {"content": text[len(sent[i]):]})
                            sent[i] = text
                        if c.finish_reason is not None and not finished[i]:
                            chunk(i, {}, c.finish_reason)
                            finished[i] = True
                if request.include_usage:
                    event({**base, "choices": [], "usage": usage(prompt_tokens, choices)})
                event("[DONE]")
            except (BrokenPipeError, ConnectionResetError):
                log.info("streaming client went away")
            except Exception as e:  # noqa: BLE001
                log.exception("stream failed")
                event({"error": {"message": f"internal error: {type(e).__name__}: {e}", "type": "server_error"}})

        def log_message(self, fmt: str, *args) -> None:
            log.debug(fmt, *args)

    return Handler


def serve(cfg: DictConfig) -> None:
    """Load the configured checkpoint and serve it on `cfg.host:cfg.port` until interrupted; prints the endpoint's URL
    first."""
    engine = TorchEngine(device=cfg.device, precision=cfg.precision, threads=cfg.threads)
    served = load_served(str(cfg.checkpoint), engine, cfg.model_name, cfg.beta, cfg.seed)
    handler = make_handler(served, cfg.max_new_tokens, cfg.temperature, cfg.max_n)
    server = ThreadingHTTPServer((cfg.host, cfg.port), handler)
    server.daemon_threads = True
    print(f"serving {served.name} at http://{cfg.host}:{server.server_address[1]}/v1 on {engine.device}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


@hydra.main(version_base="1.3", config_path="../conf", config_name="serve")
def main(cfg: DictConfig) -> None:
    """`python -m lmrl.serve checkpoint=<dir>`: Hydra composes `conf/serve.yaml` with the overrides, then `serve`."""
    serve(cfg)


if __name__ == "__main__":
    main()
