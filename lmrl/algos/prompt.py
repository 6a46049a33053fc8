"""`algo=prompt`: a few-shot prompted LLM as the policy (the paper's GPT-4 column).

Nothing is trained.  Each turn the model gets the task's rules (`task.rules`), `shots`
complete example episodes from the task's dataset (high-return ones, chosen with the seed)
and the game so far (the task's history window: maze FO sees the current observation), and
replies; the first non-empty line of the reply is the action
(a leading `ACTION:`, `>`, quotes or backticks are stripped).  Every raw reply is kept
beside the action in `<run>/prompt_replies.jsonl`.

`decode=choose` (the default `auto` picks it for a task with a fixed action list, `task.actions`,
and the local backend) does not let the model write: it scores each of the task's actions as the
whole reply, log p(action, end of turn | prompt), and plays the most likely one (at temperature T
> 0 it samples from softmax(scores / T)); the scores are logged instead of a reply.  This measures
what the model knows of the game, not whether it can copy an action's exact spelling: SmolLM2-135M
writing freely never produced a valid maze move (-401 in every episode, 101 invalid replies).  It is evaluated with the same protocol
and normalization as every other algorithm.

Backends: `local` — the run's model (default `model=smollm2`) through its chat template;
`openai` — any OpenAI-compatible chat-completions endpoint (`base_url`, `model_name`, key
from the environment variable `api_key_env`), e.g. `python -m lmrl.serve`.

`format=history` sends only the task's history window as one user message (no rules, no
examples): that is how a served policy trained on task text (`lmrl.serve checkpoint=...`)
sees exactly its training prompt.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import re
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch

from lmrl.envs.base import Episode, History, history_window

_PREFIX = re.compile(r"^\s*(?:action\s*:|>)\s*", re.IGNORECASE)


@dataclass
class PromptConfig:
    name: str = "prompt"
    # local (the run's model) | openai (an OpenAI-compatible endpoint)
    backend: str = "local"
    # fewshot (rules + examples + the game so far) | history (the task's history window only)
    format: str = "fewshot"
    # Example episodes from the dataset in each prompt.
    shots: int = 2
    # The examples are drawn from the best `pool_fraction` of the first `pool_size` dataset episodes.
    pool_size: int = 2000
    pool_fraction: float = 0.2
    # Characters kept of each example and of the game so far (the end of the game is kept).
    example_chars: int = 1200
    history_chars: int = 3000
    # Tokens per reply; null = the task's eval.max_new_tokens.
    max_new_tokens: int | None = None
    # generate (write a reply, parse its first line) | choose (the most likely of task.actions) | auto
    # (choose where the task lists its actions and the backend is local, else generate)
    decode: str = "auto"
    # 0 = greedy.
    temperature: float = 0.0
    # Conversations per local generate() call / concurrent HTTP requests.
    batch_size: int = 8
    # openai backend
    base_url: str | None = None
    model_name: str = "default"
    api_key_env: str = "OPENAI_API_KEY"
    timeout: float = 120.0
    # Nothing is trained; accepted so overrides shared by every algorithm (debug=smoke) apply.
    steps: int = 0
    log_every: int = 25

    def validate(self) -> list[str]:
        problems = []
        if self.backend not in ("local", "openai"):
            problems.append(f"backend must be local or openai (got {self.backend!r})")
        if self.format not in ("fewshot", "history"):
            problems.append(f"format must be fewshot or history (got {self.format!r})")
        if self.decode not in ("auto", "generate", "choose"):
            problems.append(f"decode must be auto, generate or choose (got {self.decode!r})")
        if self.decode == "choose" and self.backend != "local":
            problems.append("decode=choose scores the actions with the model: it needs backend=local")
        if self.backend == "openai" and not self.base_url:
            problems.append("backend=openai needs base_url (e.g. http://127.0.0.1:8000/v1)")
        if self.shots < 0 or (self.max_new_tokens or 1) < 1 or self.batch_size < 1 or self.temperature < 0:
            problems.append("shots >= 0, max_new_tokens >= 1, batch_size >= 1 and temperature >= 0 required")
        if not 0 < self.pool_fraction <= 1:
            problems.append(f"pool_fraction must be in (0, 1] (got {self.pool_fraction})")
        return problems


def parse_action(reply: str) -> str:
    """The first non-empty line of a reply, without an `ACTION:`/`>` prefix or quotes, ending in a newline.

    A chat model's reply ends at its end-of-sequence token, which is the end of its turn, so the line
    is a whole action and gets the newline that the task's action text ends with (`move up` ->
    `move up\\n`, valid in the maze).  The original's GPT-4 baselines did the same: they took the
    reply's action, stripped it and appended `\\n` (maze/gpt4/gpt4_maze.py, gpt4_po_maze.py).  The
    backends return text only, so a reply cut off by the token budget right after an action cannot be
    told from a finished one; one cut inside the action stays invalid text (`move u`)."""
    line = next((ln for ln in reply.splitlines() if ln.strip()), "")
    line = _PREFIX.sub("", line).strip().strip("`\"'").strip()
    return line + "\n"


def render(turns: Sequence, mark_actions: bool = True) -> str:
    """A history as text; with `mark_actions`, the agent's turns are prefixed `ACTION: `."""
    return "".join(("ACTION: " if t.is_action and mark_actions else "") + t.text
                   + ("" if t.text.endswith("\n") else "\n") for t in turns)


def pick_examples(episodes, shots: int, pool_size: int, fraction: float, seed: int) -> list[Episode]:
    """`shots` episodes drawn (seeded) from the best `fraction` of the first `pool_size`."""
    pool = sorted(itertools.islice(episodes, pool_size), key=lambda ep: -ep.total_return)
    top = pool[: max(shots, int(len(pool) * fraction))]
    return random.Random(seed).sample(top, min(shots, len(top)))


class OpenAIChat:
    """POST /chat/completions to an OpenAI-compatible endpoint (stdlib HTTP; no client package)."""

    def __init__(self, base_url: str, model_name: str, api_key_env: str, timeout: float, workers: int):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model_name, self.timeout, self.workers = model_name, timeout, workers
        self.key = os.environ.get(api_key_env, "")

    def one(self, messages: list[dict], max_new_tokens: int, temperature: float) -> str:
        body = json.dumps({"model": self.model_name, "messages": messages, "max_tokens": max_new_tokens,
                           "temperature": temperature}).encode()
        headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {self.key}"} if self.key else {})}
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as resp:
                return json.loads(resp.read())["choices"][0]["message"]["content"] or ""
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"{self.url} answered HTTP {e.code}: {e.read()[:500]!r}") from None
        except urllib.error.URLError as e:
            raise RuntimeError(f"cannot reach {self.url}: {e.reason}") from None

    def complete(self, conversations, max_new_tokens: int, temperature: float) -> list[str]:
        with ThreadPoolExecutor(self.workers) as pool:
            return list(pool.map(lambda m: self.one(m, max_new_tokens, temperature), conversations))


class PromptPolicy:
    def __init__(self, backend, cfg: PromptConfig, rules: str, examples: list[Episode], window: int | None,
                 log_path: Path | None = None, choices: Sequence[str] = (), seed: int = 0):
        self.backend, self.cfg, self.rules, self.window, self.log_path = backend, cfg, rules, window, log_path
        self.examples = [render(ep.turns)[-cfg.example_chars:] for ep in examples]
        # decode=choose: the task's actions, each scored as the whole reply
        self.choices, self.rng = list(choices), random.Random(seed)

    def messages(self, history: History) -> list[dict]:
        if self.cfg.format == "history":
            return [{"role": "user", "content": render(history_window(history, self.window), mark_actions=False)}]
        shots = "".join(f"Example {i + 1}:\n{text}\n" for i, text in enumerate(self.examples))
        system = (f"{self.rules.strip()}\nReply with your next action only: one line, no explanation."
                  + (f"\n\nExamples of games (the agent's turns start with ACTION:):\n\n{shots}" if shots else ""))
        game = render(history_window(history, self.window))[-self.cfg.history_chars:]  # the task's window
        return [{"role": "system", "content": system},
                {"role": "user", "content": f"The game so far:\n{game}\nYour next action:"}]

    def act(self, histories: Sequence[History]) -> list[str]:
        conversations = [self.messages(h) for h in histories]
        if self.choices:
            return self.choose(histories, conversations)
        replies: list[str] = []
        for i in range(0, len(conversations), self.cfg.batch_size):
            replies += self.backend.complete(conversations[i : i + self.cfg.batch_size], self.cfg.max_new_tokens,
                                             self.cfg.temperature)
        actions = [parse_action(r) for r in replies]
        if self.log_path is not None:
            with open(self.log_path, "a") as f:
                for h, r, a in zip(histories, replies, actions):
                    f.write(json.dumps({"last_observation": h[-1].text if h else "", "reply": r, "action": a}) + "\n")
        return actions

    def choose(self, histories: Sequence[History], conversations: list) -> list[str]:
        """The most likely action of `self.choices` (sampled from softmax(scores / T) at T > 0)."""
        scores = self.backend.score(conversations, [c.strip() for c in self.choices])
        if self.cfg.temperature > 0:
            weights = torch.softmax(scores / self.cfg.temperature, dim=-1).tolist()
            picks = [self.rng.choices(range(len(self.choices)), w)[0] for w in weights]
        else:
            picks = scores.argmax(-1).tolist()
        actions = [self.choices[i] for i in picks]
        if self.log_path is not None:
            with open(self.log_path, "a") as f:
                for h, row, a in zip(histories, scores.tolist(), actions):
                    f.write(json.dumps({"last_observation": h[-1].text if h else "",
                                        "scores": dict(zip(self.choices, row)), "action": a}) + "\n")
        return actions


class PromptTrainer:
    """Trains nothing: `fit` picks the examples; `policies` is the prompted policy."""

    config_class = PromptConfig

    def __init__(self, cfg: PromptConfig, task, engine, model, tokenizer, logger, seed: int = 0, run_dir=None,
                 checkpointer=None):
        self.cfg, self.task, self.engine, self.model, self.tokenizer = cfg, task, engine, model, tokenizer
        self.seed, self.run_dir = seed, Path(run_dir) if run_dir is not None else None
        if cfg.backend == "local" and model is None:
            raise ValueError("algo=prompt with backend=local needs a model (model=smollm2 or a path), not model=none")
        self.rules = str(task.cfg.get("rules") or f"You are playing the text task {task.name}.")
        self.examples: list[Episode] = []

    def fit(self) -> dict:
        if self.cfg.format == "fewshot" and self.cfg.shots:
            self.examples = pick_examples(self.task.episodes(), self.cfg.shots, self.cfg.pool_size,
                                          self.cfg.pool_fraction, self.seed)
        return {"train_steps": 0, "prompt_examples": len(self.examples)}

    def save(self, directory: Path) -> None:
        """The prompt's parts (the model itself is not copied)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "prompt.json").write_text(json.dumps({
            "config": self.cfg.__dict__, "rules": self.rules,
            "examples": [render(ep.turns) for ep in self.examples]}, indent=1))

    def backend(self):
        if self.cfg.backend == "openai":
            return OpenAIChat(self.cfg.base_url, self.cfg.model_name, self.cfg.api_key_env, self.cfg.timeout,
                              self.cfg.batch_size)
        from lmrl.models.chat import ChatModel

        return ChatModel(self.engine.place(self.model), self.tokenizer, self.seed)

    def policies(self, eval_cfg, seed: int) -> dict:
        if self.cfg.max_new_tokens is None:
            self.cfg.max_new_tokens = int(eval_cfg.max_new_tokens)
        log_path = self.run_dir / "prompt_replies.jsonl" if self.run_dir is not None else None
        actions = list(self.task.cfg.get("actions") or [])
        choose = self.cfg.decode == "choose" or (self.cfg.decode == "auto" and actions and self.cfg.backend == "local")
        if choose and not actions:
            raise ValueError(f"algo.decode=choose needs a task with a fixed action list (task.actions); {self.task.name} "
                             "has none: use algo.decode=generate")
        policy = PromptPolicy(self.backend(), self.cfg, self.rules, self.examples, self.task.history_window,
                              log_path, choices=actions if choose else (), seed=seed)
        return {"prompt (choose)" if choose else "prompt": policy}
