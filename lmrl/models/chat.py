"""Chat-style completion with a local causal LM: what `algo=prompt` (local backend) and
`lmrl.serve` share.

Models with a chat template (SmolLM2-Instruct, most instruct models) get it; models without
one (our trained policies) get the messages' contents concatenated, each ending in a newline —
for a policy trained on task text, send the game history as the one user message and the
prompt is exactly what it was trained on.

`ChatModel` batches whole conversations (algo=prompt) and scores given replies (algo=prompt
choosing among a task's fixed actions); `generate` serves one request: `n`
choices of one prompt with a KV cache, cut at stop strings, token by token so a server can
stream them.  Any model with the sampler's calling convention works, value-guided ones included.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

import torch

from lmrl.models.factory import model_max_length
from lmrl.rollout.sampler import pick


def render(messages: Sequence[dict], tokenizer) -> str:
    """The prompt text of chat messages: the tokenizer's chat template with the generation prompt, or (no template) the
    messages' contents, each ending in a newline, concatenated."""
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
    return "".join(m["content"] if m["content"].endswith("\n") else m["content"] + "\n" for m in messages)


class PrefixCache:
    """The KV caches of recent prompts, so that a prompt which starts like one read before is read only from where
    they part.  A prompted policy's prompts share most of their tokens: the rules and example episodes open every
    one (on FO maze 867 of a turn's ~900 tokens), and a game's prompt grows by one turn a step until its history is
    cut.  Least recently used caches go first once their tokens pass `max_tokens` (0: keep none); a cache costs
    2 x layers x KV heads x head size values a token (SmolLM2-135M in fp32: 46 KB)."""

    def __init__(self, max_tokens: int):
        self.max_tokens = max_tokens
        self.entries: OrderedDict[tuple[int, ...], object] = OrderedDict()
        self.hits = self.reused = self.read = 0  # prompts that reused a cache, their tokens reused, tokens read

    def lookup(self, ids: Sequence[int]) -> tuple[int, object | None]:
        """The longest cached prefix of `ids` shorter than `ids` (its last token is read again for its logits),
        as (length, a copy of its cache cut to that length); (0, None) when none shares a token."""
        best, key = 0, None
        for entry in self.entries:
            n = min(len(entry), len(ids) - 1)
            same = next((i for i in range(n) if entry[i] != ids[i]), n)
            if same > best:
                best, key = same, entry
        if key is None:
            return 0, None
        self.entries.move_to_end(key)
        cache = copy.deepcopy(self.entries[key])
        if best < len(key):
            cache.crop(best - len(key))  # a negative count: the tokens to drop (what every transformers version takes)
        return best, cache

    def store(self, ids: Sequence[int], cache) -> None:
        """Keep a copy of the cache of the whole prompt `ids`, evicting the least recently used over budget."""
        if self.max_tokens <= 0 or len(ids) > self.max_tokens or not getattr(cache, "is_croppable", True):
            return
        self.entries[tuple(ids)] = copy.deepcopy(cache)
        self.entries.move_to_end(tuple(ids))
        while sum(map(len, self.entries)) > self.max_tokens:
            self.entries.popitem(last=False)

    def prefill(self, model: torch.nn.Module, ids: Sequence[int], device) -> tuple[torch.Tensor, object]:
        """Read the prompt `ids` from its longest cached prefix on: (the last position's logits [1, 1, vocab], the
        whole prompt's cache), the cache kept for later prompts."""
        start, cache = self.lookup(ids)
        out = model(input_ids=torch.tensor([list(ids[start:])], device=device), past_key_values=cache,
                    use_cache=True, logits_to_keep=1)
        self.hits += start > 0
        self.reused, self.read = self.reused + start, self.read + len(ids) - start
        self.store(ids, out.past_key_values)
        return out.logits, out.past_key_values


class ChatModel:
    """Batched completions (greedy at temperature 0, else sampling), prompts left-truncated to fit.  `score` reads
    each prompt from the longest prefix it shares with a recent one (`PrefixCache`, `cache_tokens` tokens of KV
    cache kept; 0 reads every prompt whole)."""

    def __init__(self, model: torch.nn.Module, tokenizer, seed: int = 0, cache_tokens: int = 0):
        self.model, self.tokenizer = model.eval(), tokenizer
        self.chat = bool(getattr(tokenizer, "chat_template", None))
        self.seed = seed
        self.prefixes = PrefixCache(cache_tokens)
        self.lock = threading.Lock()  # one generation at a time (the server is threaded)

    def complete(self, conversations: Sequence[Sequence[dict]], max_new_tokens: int = 32,
                 temperature: float = 0.0) -> list[str]:
        """One completion per conversation: prompts rendered by the chat template (or concatenated), left-truncated to
        leave room for `max_new_tokens`, generated in one batch, greedy at temperature 0."""
        if not conversations:
            return []
        tok = self.tokenizer
        tok.padding_side, tok.truncation_side = "left", "left"
        texts = [render(c, tok) for c in conversations]
        limit = max(1, model_max_length(self.model) - max_new_tokens)
        batch = tok(texts, return_tensors="pt", padding=True, truncation=True, max_length=limit,
                    add_special_tokens=not self.chat)
        device = next(self.model.parameters()).device
        batch = {k: v.to(device) for k, v in batch.items() if k in ("input_ids", "attention_mask")}
        sample = temperature > 0
        with self.lock, torch.inference_mode():
            torch.manual_seed(self.seed)
            out = self.model.generate(**batch, max_new_tokens=max_new_tokens, do_sample=sample,
                                      temperature=temperature if sample else None, top_k=0 if sample else None,
                                      top_p=None, pad_token_id=tok.pad_token_id)
        new = out[:, batch["input_ids"].shape[1]:]
        return tok.batch_decode(new, skip_special_tokens=True)

    def reply_ids(self, reply: str) -> list[int]:
        """A whole reply's tokens: its text, then the end of the turn where the model has a chat template."""
        ids = self.tokenizer(reply, add_special_tokens=False)["input_ids"]
        eos = self.tokenizer.eos_token_id
        return ids + ([eos] if self.chat and eos is not None else [])

    def score(self, conversations: Sequence[Sequence[dict]], replies: Sequence[str]) -> torch.Tensor:
        """log p(reply | conversation) of every reply to every conversation, [conversations, replies]: each
        prompt is read once (from where it parts from a cached one) and its KV cache shared by the replies, so a turn
        costs about one prefill of what is new in its prompt."""
        tok = self.tokenizer
        conts = [self.reply_ids(r) for r in replies]
        if not all(conts):
            raise ValueError(f"every reply needs at least one token: {list(replies)!r}")
        device = next(self.model.parameters()).device
        longest = max(map(len, conts))
        cont = torch.tensor([c + [c[-1]] * (longest - len(c)) for c in conts], device=device)
        valid = torch.tensor([[i < len(c) for i in range(longest)] for c in conts], device=device)
        limit = max(1, model_max_length(self.model) - longest)
        scores = []
        with self.lock, torch.inference_mode():
            for conversation in conversations:
                ids = tok(render(conversation, tok), add_special_tokens=not self.chat)["input_ids"][-limit:]
                last, cache = self.prefixes.prefill(self.model, ids, device)
                cache.batch_repeat_interleave(len(conts))
                rest = self.model(input_ids=cont, past_key_values=cache, use_cache=False).logits
                logits = torch.cat([last[:, -1:].expand(len(conts), -1, -1), rest[:, :-1]], dim=1)
                logp = torch.log_softmax(logits.float(), dim=-1).gather(-1, cont[..., None])[..., 0]
                scores.append((logp * valid).sum(-1))
        return torch.stack(scores).cpu()


def prompt_ids(messages: Sequence[dict], tokenizer) -> list[int]:
    """The prompt's tokens: the chat template's text, or (no template) each message's content tokenized
    on its own and concatenated — per-segment tokenization, as our policies were trained."""
    if getattr(tokenizer, "chat_template", None):
        return tokenizer(render(messages, tokenizer), add_special_tokens=False)["input_ids"]
    return [t for m in messages for t in tokenizer(render([m], tokenizer), add_special_tokens=False)["input_ids"]]


@dataclass
class Choice:
    """One completion: its tokens, its text cut before the first stop string, and why it ended."""

    tokens: list[int] = field(default_factory=list)
    text: str = ""
    generated: int = 0  # tokens sampled, the end-of-sequence token included
    finish_reason: str | None = None  # "stop" (a stop string or end of sequence) | "length"

    def add(self, token: int, eos: set[int], stop: Sequence[str], decode: Callable[[list[int]], str]) -> None:
        """Append a sampled token: an end-of-sequence token ends the choice, a stop string cuts the text and ends it."""
        self.generated += 1
        if token in eos:
            self.finish_reason = "stop"
            return
        self.tokens.append(token)
        self.text = decode(self.tokens)
        cuts = [i for i in (self.text.find(s) for s in stop) if i >= 0]
        if cuts:
            self.text, self.finish_reason = self.text[:min(cuts)], "stop"

    def settled(self, stop: Sequence[str]) -> str:
        """The text no later token can change: without a tail that may still grow into a stop string
        or is half of a multi-byte character."""
        if self.finish_reason is not None:
            return self.text
        text = self.text.rstrip("\ufffd")
        hold = max((k for s in stop for k in range(1, len(s)) if text.endswith(s[:k])), default=0)
        return text[:len(text) - hold]


@torch.no_grad()
def generate(model: torch.nn.Module, prompt: Sequence[int], n: int, max_tokens: int, temperature: float,
             generator: torch.Generator | None, stop: Sequence[str], eos: set[int],
             decode: Callable[[list[int]], str]) -> Iterator[list[Choice]]:
    """`n` completions of one prompt, sampled together; yields the choices after every token (the last
    yield has each one's `finish_reason`).  Temperature 0 is greedy."""
    device = next(model.parameters()).device
    ids = torch.tensor([list(prompt)] * n, dtype=torch.long, device=device)
    attn = torch.ones_like(ids)
    positions = torch.arange(ids.shape[1], device=device).expand(n, -1)
    out = model(input_ids=ids, attention_mask=attn, position_ids=positions, use_cache=True, logits_to_keep=1)
    choices = [Choice() for _ in range(n)]
    for step in range(max_tokens):
        tokens = pick(out.logits[:, -1], temperature, generator)
        for choice, token in zip(choices, tokens.tolist()):
            if choice.finish_reason is None:
                choice.add(token, eos, stop, decode)
                if choice.finish_reason is None and step == max_tokens - 1:
                    choice.finish_reason = "length"
        yield choices
        if all(c.finish_reason is not None for c in choices):
            return
        attn = torch.cat([attn, torch.ones_like(attn[:, :1])], dim=-1)
        out = model(input_ids=tokens[:, None], attention_mask=attn, position_ids=positions[:, -1:] + step + 1,
                    past_key_values=out.past_key_values, use_cache=True, logits_to_keep=1)
