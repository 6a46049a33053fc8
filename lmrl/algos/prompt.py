"""`algo=prompt`: a few-shot prompted LLM as the policy (the paper's GPT-4 column).

Nothing is trained.  Each turn the model gets the task's rules (`task.rules`), `shots` (k, default 2)
complete example episodes from the task's dataset (high-return ones, chosen with the seed) and the game so
far (the task's history window: maze FO sees the current observation), and either chooses or writes its action.

`decode=choose` (the default `auto` picks it wherever the legal actions are known and the backend is local)
does not let the model write: it scores each legal action as the whole reply, log p(action, end of turn |
prompt), and plays the most likely one (at temperature T > 0 it samples from softmax(scores / T)); the scores
are logged instead of a reply.  The legal actions of a state are the env's `legal_actions()` (Text-Nav's
listed commands, Wordle's word list, chess's legal moves; the rollout passes them to a policy with
`wants_legal_actions`), else the task's fixed list `task.actions` (the maze).  A set larger than `max_choices`
(Wordle: 431 words) is cut to a seeded sample of `max_choices` of them (seeded by the run's seed and the game so
far, so a state always gets the same sample) plus every legal action played in the prompt's examples; replies
are scored `choice_batch` at a time, sharing the prompt's prefill; a lone legal action is played unscored.
This measures what the model knows of the game, not whether it can copy an action's exact spelling:
SmolLM2-135M writing freely never produced a valid maze move (-401 in every episode, 101 invalid replies) and
echoed the prompt's cues on the other tasks.

`decode=generate` (tasks without legal actions: the dialogues) lets the model write: the action is the first
line of its reply that is not an echo of the prompt (`parse_action`): a leading `ACTION:`/`Your move:`-like cue,
`>`, quotes and backticks are stripped, and lines that are cues (`Your next action:`, `Example 1:`, any line
ending in a colon), that repeat a non-action line of the prompt (the rules, an observation) or quote a long
stretch of its rules are skipped.  Every raw reply is kept beside the action in `<run>/prompt_replies.jsonl`.
At temperature 0 identical prompts in a batch (the same start played several times, every game's first turn)
are answered once.  It is evaluated with the same protocol and normalization as every other algorithm.

Backends: `local` — the run's model (default `model=smollm2`) through its chat template;
`openai` — any OpenAI-compatible chat-completions endpoint (`base_url`, `model_name`, key
from the environment variable `api_key_env`), e.g. `python -m lmrl.serve`.

`format=history` sends only the task's history window as one user message (no rules, no
examples, no echo filter): that is how a served policy trained on task text (`lmrl.serve checkpoint=...`)
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
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch
from hydra.utils import get_class

from lmrl.envs.base import Episode, History, TextEnv, history_window

# A cue the model may put before its action: `ACTION:`, `Your next action:`, `Move:`, `Guess:`, `>`.
_PREFIX = re.compile(r"^\s*(?:(?:your\s+)?(?:next\s+)?(?:action|move|guess|question|command|reply)\s*:|>)\s*",
                     re.IGNORECASE)
# A line of the prompt echoed from this many characters on is an echo even when it is only part of a line.
ECHO_CHARS = 24


@dataclass
class PromptConfig:
    """`algo=prompt`: the backend (the run's local model, or an OpenAI-compatible endpoint), the prompt's format and
    examples, and how a reply becomes an action (`decode`)."""

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
    # generate (write a reply, parse its first line that is no echo) | choose (the most likely legal action:
    # env.legal_actions() or task.actions) | auto (choose where those are known and the backend is local)
    decode: str = "auto"
    # Legal sets larger than this are cut to a seeded sample of this many plus the examples' actions; null = all.
    max_choices: int | None = 64
    # Replies scored per forward (the prompt's KV cache is repeated once per reply: memory grows with it).
    choice_batch: int = 64
    cache_tokens: int = 16384
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
        if (self.max_choices is not None and self.max_choices < 1) or self.choice_batch < 1:
            problems.append("max_choices (or null) and choice_batch must be >= 1")
        if self.cache_tokens < 0:
            problems.append(f"cache_tokens must be >= 0 (0: no prompt cache), got {self.cache_tokens}")
        if not 0 < self.pool_fraction <= 1:
            problems.append(f"pool_fraction must be in (0, 1] (got {self.pool_fraction})")
        return problems


def parse_action(reply: str, prompt: Sequence[dict] = ()) -> str:
    """The reply's first line that is not an echo of `prompt` (its messages), without a cue prefix (`ACTION:`,
    `Your move:`, `>`) or quotes, ending in a newline; the first non-empty line when every line is an echo.

    An echo (see `is_echo`) is a line the model copied from the prompt instead of acting: a cue, a non-action
    line of the prompt (rules, observations), or a long stretch of the rules.  A chat model's reply ends at its
    end-of-sequence token, which is the end of its turn, so the line is a whole action and gets the newline
    that the task's action text ends with (`move up` -> `move up\\n`, valid in the maze).  The original's GPT-4
    baselines did the same: they took the reply's action, stripped it and appended `\\n`
    (maze/gpt4/gpt4_maze.py, gpt4_po_maze.py).  The backends return text only, so a reply cut off by the token
    budget right after an action cannot be told from a finished one; one cut inside the action stays invalid
    text (`move u`)."""
    lines = [clean_line(ln) for ln in reply.splitlines() if ln.strip()]
    echoes, actions = prompt_lines(prompt)
    line = next((ln for ln in lines if not is_echo(ln, echoes, actions)), lines[0] if lines else "")
    return line + "\n"


def clean_line(line: str) -> str:
    return _PREFIX.sub("", line).strip().strip("`\"'").strip()


def prompt_lines(messages: Sequence[dict]) -> tuple[set[str], set[str]]:
    """(the prompt's non-action lines, its agent turns), case-folded: a `render`ed history marks agent turns
    `ACTION: `, so every other line (rules, cues, observations) is the environment's or the prompt's own."""
    echoes, actions = set(), set()
    for message in messages:
        for line in message["content"].splitlines():
            if line.startswith("ACTION: "):
                actions.add(clean_line(line).casefold())
            elif line.strip():
                echoes.add(line.strip().casefold())
    return echoes, actions


def is_echo(line: str, echoes: set[str], actions: set[str]) -> bool:
    """Whether a reply's line (`clean_line`d) is no action: empty (a bare `ACTION:` cue), a lead-in ending in a
    colon (`Example 1:`, `Here is my move:`), or not an agent turn of the prompt while being one of its other
    lines or (from `ECHO_CHARS` characters) part of one."""
    key = line.casefold()
    if not key or key.endswith(":"):
        return True
    if key in actions:
        return False
    return key in echoes or (len(key) >= ECHO_CHARS and any(key in e for e in echoes))


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
        """The endpoint's reply to one conversation; `RuntimeError` naming the URL when it cannot be reached or answers
        an HTTP error."""
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
        """The replies to every conversation, `workers` requests at a time, in order."""
        with ThreadPoolExecutor(self.workers) as pool:
            return list(pool.map(lambda m: self.one(m, max_new_tokens, temperature), conversations))


class PromptPolicy:
    """The prompted model as a policy: `act(histories, legal)` chooses among each state's legal actions where
    `choose` is on and they are known (`legal[i]`, else the task's `choices`), and writes a reply elsewhere."""

    def __init__(self, backend, cfg: PromptConfig, rules: str, examples: list[Episode], window: int | None,
                 log_path: Path | None = None, choices: Sequence[str] = (), seed: int = 0, choose: bool = False):
        self.backend, self.cfg, self.rules, self.window, self.log_path = backend, cfg, rules, window, log_path
        self.examples = [render(ep.turns)[-cfg.example_chars:] for ep in examples]
        self.example_actions = {t.text for ep in examples for t in ep.turns if t.is_action}
        # choose: score the legal actions (the rollout passes each env's, `wants_legal_actions`), else `choices`
        self.choose_mode = choose or bool(choices)
        self.wants_legal_actions = self.choose_mode
        self.choices, self.seed, self.rng = list(choices), seed, random.Random(seed)

    def messages(self, history: History) -> list[dict]:
        """The chat messages for one history: with `format=fewshot` a system message (rules, then the examples) and the
        game so far, cut to `history_chars`; with `format=history` the task's history window alone."""
        if self.cfg.format == "history":
            return [{"role": "user", "content": render(history_window(history, self.window), mark_actions=False)}]
        shots = "".join(f"Example {i + 1}:\n{text}\n" for i, text in enumerate(self.examples))
        system = (f"{self.rules.strip()}\nReply with your next action only: one line, no explanation."
                  + (f"\n\nExamples of games (the agent's turns start with ACTION:):\n\n{shots}" if shots else ""))
        game = render(history_window(history, self.window))[-self.cfg.history_chars:]  # the task's window
        return [{"role": "system", "content": system},
                {"role": "user", "content": f"The game so far:\n{game}\nYour next action:"}]

    def act(self, histories: Sequence[History], legal: Sequence[Sequence[str] | None] | None = None) -> list[str]:
        """One action per history; `legal[i]`: the legal actions of history i's state (None: not known)."""
        options = [self.options(h, legal[i] if legal is not None else None) for i, h in enumerate(histories)]
        if self.cfg.decode == "choose" and not all(options):
            raise ValueError("algo.decode=choose needs the legal actions of every state (env.legal_actions() or "
                             "task.actions): use algo.decode=auto or generate")
        # At temperature 0 a prompt's answer depends on the prompt (and its options) only: each is asked once.
        keys = [json.dumps([self.messages(h), opts]) if self.cfg.temperature == 0 else str(i)
                for i, (h, opts) in enumerate(zip(histories, options))]
        first = {k: i for i, k in reversed(list(enumerate(keys)))}
        unique = sorted(first.values())
        chosen = [i for i in unique if options[i]]
        written = [i for i in unique if not options[i]]
        answers = dict(zip(chosen, self.choose([histories[i] for i in chosen], [options[i] for i in chosen])))
        answers.update(zip(written, self.generate([histories[i] for i in written])))
        return [answers[first[k]] for k in keys]

    def options(self, history: History, legal: Sequence[str] | None) -> list[str]:
        """The actions scored in this state (empty: the model writes): the legal ones, or the task's list; more
        than `max_choices` are cut to a sample seeded by the seed and the game so far, plus the examples' ones."""
        if not self.choose_mode:
            return []
        actions = list(legal) if legal is not None else list(self.choices)
        cap = self.cfg.max_choices
        if cap is None or len(actions) <= cap:
            return actions
        state = zlib.crc32(render(history, mark_actions=False).encode())
        keep = set(random.Random(f"{self.seed}:{state}").sample(actions, cap)) | self.example_actions
        return [a for a in actions if a in keep]

    def generate(self, histories: Sequence[History]) -> list[str]:
        """`decode=generate`: one reply per history from the backend, each parsed into an action (`parse_action`) and
        logged."""
        conversations = [self.messages(h) for h in histories]
        replies: list[str] = []
        for i in range(0, len(conversations), self.cfg.batch_size):
            replies += self.backend.complete(conversations[i : i + self.cfg.batch_size], self.cfg.max_new_tokens,
                                             self.cfg.temperature)
        # format=history is a trained policy's own prompt: its lines are not cues to drop
        prompts = conversations if self.cfg.format == "fewshot" else [()] * len(replies)
        actions = [parse_action(r, c) for r, c in zip(replies, prompts)]
        self.log([{"last_observation": h[-1].text if h else "", "reply": r, "action": a}
                  for h, r, a in zip(histories, replies, actions)])
        return actions

    def choose(self, histories: Sequence[History], options: Sequence[list[str]]) -> list[str]:
        """The most likely of each state's options (sampled from softmax(scores / T) at T > 0); a state with one
        option plays it unscored (its score is logged as null)."""
        actions, rows = [], []
        for history, opts in zip(histories, options):
            if len(opts) == 1:
                actions.append(opts[0])
                rows.append({"last_observation": history[-1].text if history else "", "scores": {opts[0]: None},
                             "action": opts[0]})
                continue
            conversation, replies = [self.messages(history)], [a.strip() for a in opts]
            scores = torch.cat([self.backend.score(conversation, replies[j : j + self.cfg.choice_batch])[0]
                                for j in range(0, len(replies), self.cfg.choice_batch)])
            if self.cfg.temperature > 0:
                pick = self.rng.choices(range(len(opts)), torch.softmax(scores / self.cfg.temperature, -1).tolist())[0]
            else:
                pick = int(scores.argmax())
            actions.append(opts[pick])
            rows.append({"last_observation": history[-1].text if history else "",
                         "scores": dict(zip(opts, scores.tolist())), "action": opts[pick]})
        self.log(rows)
        return actions

    def log(self, rows: list[dict]) -> None:
        """Append rows to `prompt_replies.jsonl` in the run directory (when there is one)."""
        if self.log_path is not None and rows:
            with open(self.log_path, "a") as f:
                f.writelines(json.dumps(row) + "\n" for row in rows)


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
        """Pick the few-shot examples from the dataset (none with `format=history`); nothing is trained."""
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
        """The chat model that answers: `OpenAIChat` for `backend=openai`, else a `ChatModel` over the run's model."""
        if self.cfg.backend == "openai":
            return OpenAIChat(self.cfg.base_url, self.cfg.model_name, self.cfg.api_key_env, self.cfg.timeout,
                              self.cfg.batch_size)
        from lmrl.models.chat import ChatModel

        return ChatModel(self.engine.place(self.model), self.tokenizer, self.seed, cache_tokens=self.cfg.cache_tokens)

    def policies(self, eval_cfg, seed: int) -> dict:
        """The prompted policy: `prompt (choose)` when it picks the most likely legal action (`decode=choose`, or `auto`
        with a known action set and the local backend), else `prompt`, which parses a generated reply. Raises
        `ValueError` for `decode=choose` on a task that lists no legal actions."""
        if self.cfg.max_new_tokens is None:
            self.cfg.max_new_tokens = int(eval_cfg.max_new_tokens)
        log_path = self.run_dir / "prompt_replies.jsonl" if self.run_dir is not None else None
        actions = list(self.task.cfg.get("actions") or [])
        known = bool(actions) or lists_legal_actions(self.task)
        choose = self.cfg.decode == "choose" or (self.cfg.decode == "auto" and known and self.cfg.backend == "local")
        if choose and not known:
            raise ValueError(f"algo.decode=choose needs the legal actions (env.legal_actions() or task.actions); "
                             f"{self.task.name} lists none: use algo.decode=generate")
        policy = PromptPolicy(self.backend(), self.cfg, self.rules, self.examples, self.task.history_window,
                              log_path, choices=actions if choose else (), seed=seed, choose=choose)
        return {"prompt (choose)" if choose else "prompt": policy}


def lists_legal_actions(task) -> bool:
    """Whether the task's env class implements `legal_actions()` (the base class's answers None)."""
    return get_class(task.cfg.env._target_).legal_actions is not TextEnv.legal_actions
