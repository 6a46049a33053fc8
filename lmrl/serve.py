"""`python -m lmrl.serve checkpoint=<dir>`: a trained policy (or any HF causal LM, or `smollm2`) as an
OpenAI-compatible chat-completions endpoint on localhost.

    POST /v1/chat/completions  {"model", "messages", "max_tokens", "temperature"} -> chat.completion
    GET  /v1/models

Other tools can play our tasks against it, and `algo=prompt algo.backend=openai
algo.base_url=http://127.0.0.1:<port>/v1` plays against it.  For a policy trained on task
text (no chat template) the messages' contents are concatenated: send the game history as
the user message (`algo.format=history`).  `port=0` picks a free port; the first line printed
is `serving <model> at http://<host>:<port>/v1`.  Requests are answered one at a time.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import hydra
from omegaconf import DictConfig

from lmrl.models.chat import ChatModel
from lmrl.models.factory import load_pretrained

log = logging.getLogger(__name__)


def make_handler(chat: ChatModel, model_name: str, default_max_tokens: int):
    class Handler(BaseHTTPRequestHandler):
        def _send(self, code: int, payload: dict) -> None:
            body = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _error(self, code: int, message: str) -> None:
            self._send(code, {"error": {"message": message, "type": "invalid_request_error"}})

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self._send(200, {"object": "list", "data": [{"id": model_name, "object": "model",
                                                             "owned_by": "lmrl"}]})
            else:
                self._error(404, f"no route {self.path}")

        def do_POST(self) -> None:  # noqa: N802
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                return self._error(404, f"no route {self.path}")
            try:
                request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                messages = request["messages"]
                if not isinstance(messages, list) or not all(isinstance(m, dict) and isinstance(m.get("content"), str)
                                                             for m in messages):
                    raise ValueError("messages must be a list of {role, content} objects")
                max_tokens = int(request.get("max_tokens") or default_max_tokens)
                temperature = float(request.get("temperature") or 0.0)
                if max_tokens < 1 or temperature < 0:
                    raise ValueError("max_tokens must be >= 1 and temperature >= 0")
            except (KeyError, ValueError, TypeError, json.JSONDecodeError) as e:
                return self._error(400, f"bad request: {e}")
            [text] = chat.complete([messages], max_tokens, temperature)
            self._send(200, {
                "id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion", "created": int(time.time()),
                "model": model_name,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": None, "completion_tokens": None, "total_tokens": None},
            })

        def log_message(self, fmt: str, *args) -> None:
            log.debug(fmt, *args)

    return Handler


def serve(checkpoint: str, host: str = "127.0.0.1", port: int = 8000, model_name: str | None = None,
          max_new_tokens: int = 32, seed: int = 0) -> None:
    model, tokenizer = load_pretrained(checkpoint)
    path = Path(str(checkpoint))
    name = model_name or (path.parent.name if path.name == "checkpoint" else path.name)  # a run's dir name
    server = ThreadingHTTPServer((host, port), make_handler(ChatModel(model, tokenizer, seed), name, max_new_tokens))
    print(f"serving {name} at http://{host}:{server.server_address[1]}/v1", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


@hydra.main(version_base="1.3", config_path="../conf", config_name="serve")
def main(cfg: DictConfig) -> None:
    serve(str(cfg.checkpoint), cfg.host, cfg.port, cfg.model_name, cfg.max_new_tokens, cfg.seed)


if __name__ == "__main__":
    main()
