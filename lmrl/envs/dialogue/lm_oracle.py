"""`oracle=lm`: any Hugging Face language model as the dialogue tasks' oracle, with the
original prompt formats.

LMRL-Gym simulated the other party with fine-tuned FLAN-T5-XL (20 Questions, Guess My City)
and GPT-2-XL (Car Dealer).  Users who have such weights (or any causal / seq2seq model)
can plug them in here; the default knowledge-grounded oracles need none.

What stays rule-based under `oracle=lm`: deciding whether a question is a correct guess
(the knowledge base's robust name matching, which the original's check got wrong for
cities) and, for Guess My City, removing the city's name from the model's answer.  So an
LM oracle can be wrong about facts but cannot be talked into a win.

Prompts (reference §6–§7, verbatim):

- 20Q: `Answer the question about the object truthfully.\\nobject: ({variants joined by ', '})\\n`
  `question: {question}\\nanswer (yes or no): `; greedy, 4 new tokens; the lowercased output
  matching `^(yes|no)` gives `Yes.`/`No.`, anything else `No.` (as the original).
- Guess My City: `Answer the question about the city truthfully.\\n    object: {city},{country}\\n`
  `    question: {question}\\n    answer: ` (with the original's 4-space indentation); the
  answer's first line is the reply (the original then collapsed it to Yes./No.; we keep it).

A chat model (one whose tokenizer has a chat template, like SmolLM2-Instruct) gets the same
prompt as the user message of its chat template, unless `chat: false`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from pathlib import Path

from lmrl.models.resolve import LMSpec, resolve_model

_YES_NO = re.compile(r"^\W*(yes|no)\b")


def lm_spec_from_config(spec) -> LMSpec | None:
    """Read a dialogue env's `oracle` setting: None, "kb" or `{kind: kb}` -> None (the rule-based
    partner); `{kind: lm, model: ..., ...}` -> its `LMSpec`.  Anything else is a clear error."""
    if spec is None or (isinstance(spec, str) and spec in ("kb", "rules")):
        return None
    if not hasattr(spec, "get"):
        raise ValueError(f"oracle must be 'kb', a mapping with kind kb|lm, or an oracle object; got {spec!r}")
    options = dict(spec)
    kind = options.pop("kind", "kb")
    if kind == "kb":
        if options:
            raise ValueError(f"oracle kind 'kb' takes no options, got {sorted(options)}")
        return None
    if kind != "lm":
        raise ValueError(f"unknown oracle kind {kind!r}; valid: 'kb', 'lm'")
    try:
        return LMSpec(**options)
    except TypeError as err:
        raise ValueError(f"bad oracle options {sorted(options)}: {err}; valid: model, gguf_file, max_new_tokens, "
                         "chat, dtype") from None


@functools.lru_cache(maxsize=2)
def load_generator(spec: LMSpec) -> "TextGenerator":
    return TextGenerator(spec)


class TextGenerator:
    """Greedy batched generation with a causal or encoder-decoder model, one line per prompt."""

    def __init__(self, spec: LMSpec):
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

        path, gguf = resolve_model(spec)
        kwargs = {"gguf_file": gguf} if gguf else {}
        if not gguf and not Path(path).exists():
            kwargs["local_files_only"] = True
        config = AutoConfig.from_pretrained(path, **kwargs)
        self.seq2seq = bool(getattr(config, "is_encoder_decoder", False))
        loader = AutoModelForSeq2SeqLM if self.seq2seq else AutoModelForCausalLM
        self.tokenizer = AutoTokenizer.from_pretrained(path, **kwargs)
        self.model = loader.from_pretrained(path, dtype=getattr(torch, spec.dtype), **kwargs).eval()
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.tokenizer.padding_side = "left"
        has_template = bool(getattr(self.tokenizer, "chat_template", None))
        self.chat = has_template if spec.chat is None else bool(spec.chat and has_template)
        self._torch = torch

    def generate(self, prompts: Sequence[str], max_new_tokens: int, max_input_tokens: int = 896) -> list[str]:
        if not prompts:
            return []
        texts = [self._format(p) for p in prompts]
        batch = self.tokenizer(texts, return_tensors="pt", padding=True, truncation=True,
                               max_length=max_input_tokens, add_special_tokens=not self.chat)
        with self._torch.inference_mode():
            out = self.model.generate(**batch, max_new_tokens=max_new_tokens, do_sample=False,
                                      pad_token_id=self.tokenizer.pad_token_id)
        new = out if self.seq2seq else out[:, batch["input_ids"].shape[1]:]
        return [t.strip().split("\n")[0].strip() for t in self.tokenizer.batch_decode(new, skip_special_tokens=True)]

    def _format(self, prompt: str) -> str:
        if not self.chat:
            return prompt
        return self.tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                                  add_generation_prompt=True)


class LMQuestionOracle:
    """An LM answers; the knowledge-grounded oracle `rules` detects guesses (module docstring).

    `task` is "twenty_questions" or "guess_city"; the interface is the rule oracles' one."""

    def __init__(self, rules, task: str, spec: LMSpec, generator: TextGenerator | None = None):
        if task not in ("twenty_questions", "guess_city"):
            raise ValueError(f"task must be twenty_questions or guess_city, got {task!r}")
        self.rules, self.task, self.spec = rules, task, spec
        self.kb = rules.kb
        self.generator = generator or load_generator(spec)
        self.max_new_tokens = spec.max_new_tokens or (4 if task == "twenty_questions" else 48)
        self._answers: dict[tuple[str, str], str] = {}

    def prefetch(self, questions: Sequence[str]) -> None:
        """Parse the questions with the rule-based oracle (which decides guesses)."""
        self.rules.prefetch(questions)

    def parse(self, question: str):
        """The rule-based oracle's reading of the question."""
        return self.rules.parse(question)

    def _prompt(self, secret: str, question: str) -> str:
        if self.task == "twenty_questions":
            variants = ", ".join(self.kb.object(secret).variants)
            return (f"Answer the question about the object truthfully.\nobject: ({variants})\n"
                    f"question: {question}\nanswer (yes or no): ")
        city = self.kb.city(secret)
        return (f"Answer the question about the city truthfully.\n    object: {city.name},{city.country}\n"
                f"    question: {question}\n    answer: ")

    def answer_batch(self, secrets: Sequence[str], questions: Sequence[str]) -> list:
        """The replies to each (secret, question) pair: a correct guess as the rule-based oracle answers it, every other
        question answered by the language model in one batched generation (cached per pair)."""
        rule_replies = self.rules.answer_batch(secrets, questions)
        todo = [(s, q) for (s, q), r in zip(zip(secrets, questions), rule_replies)
                if not r.correct_guess and (s, q) not in self._answers]
        todo = list(dict.fromkeys(todo))
        outputs = self.generator.generate([self._prompt(s, q) for s, q in todo], self.max_new_tokens) if todo else []
        for key, text in zip(todo, outputs):
            self._answers[key] = self._finish(key[0], text)
        return [r if r.correct_guess else type(r)(self._answers[(s, q)], False, r.parse)
                for s, q, r in zip(secrets, questions, rule_replies)]

    def answer(self, secret: str, question: str):
        """`answer_batch` for one question."""
        return self.answer_batch([secret], [question])[0]

    def _finish(self, secret: str, text: str) -> str:
        if self.task == "twenty_questions":
            found = _YES_NO.match(text.lower())
            return "Yes." if found and found.group(1) == "yes" else "No."
        return self.kb.city(secret).redact(text) or "I don't know."
