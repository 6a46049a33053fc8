"""`oracle=lm`: Hugging Face models (causal and seq2seq) as the dialogue oracles, loaded from
locally saved tiny models (random weights: these tests check the plumbing and the original
prompt formats, not answer quality; the SmolLM2 comparison is in docs/benchmarks.md)."""

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, T5Config, T5ForConditionalGeneration

from lmrl.envs.base import BatchedEnv
from lmrl.envs.dialogue.lm_oracle import LMQuestionOracle, TextGenerator
from lmrl.envs.dialogue.twenty_questions import TwentyQuestionsEnv, default_oracle
from lmrl.models.factory import train_tokenizer
from lmrl.models.resolve import LMSpec

CORPUS = ["Answer the question about the object truthfully.", "object: (dog, puppy)", "question: Is it alive?",
          "answer (yes or no): yes", "no", "Yes.", "No."] * 20


@pytest.fixture(scope="module")
def tiny_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("lm")
    tokenizer = train_tokenizer(CORPUS, 300)
    torch.manual_seed(0)
    causal = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_layer=1, n_embd=32, n_head=2, n_positions=256,
                                        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id))
    seq2seq = T5ForConditionalGeneration(T5Config(vocab_size=len(tokenizer), d_model=32, d_ff=64, d_kv=8, num_layers=1,
                                                  num_heads=2, decoder_start_token_id=tokenizer.pad_token_id,
                                                  eos_token_id=tokenizer.eos_token_id,
                                                  pad_token_id=tokenizer.pad_token_id))
    dirs = {}
    for name, model in (("causal", causal), ("seq2seq", seq2seq)):
        model.save_pretrained(root / name)
        tokenizer.save_pretrained(root / name)
        dirs[name] = str(root / name)
    return dirs


class Recording(TextGenerator):
    """The real generator, remembering the prompts it was given."""

    def __init__(self, spec):
        super().__init__(spec)
        self.prompts = []

    def generate(self, prompts, max_new_tokens, max_input_tokens=896):
        self.prompts += list(prompts)
        return super().generate(prompts, max_new_tokens, max_input_tokens)


@pytest.mark.parametrize("kind", ["causal", "seq2seq"])
def test_a_saved_model_answers_in_the_original_format(tiny_dirs, kind):
    generator = Recording(LMSpec(model=tiny_dirs[kind]))
    assert generator.seq2seq == (kind == "seq2seq")
    oracle = LMQuestionOracle(default_oracle(), "twenty_questions", LMSpec(model=tiny_dirs[kind]), generator)
    env = TwentyQuestionsEnv(oracle=oracle)
    env.reset(options={"secret": "dog"})
    for question in ["Is it alive?", "Does it have fur?", "What is it?"]:
        assert env.step(question + "\n").history[-1].text in ("Yes.\n", "No.\n")
    assert generator.prompts[0] == ("Answer the question about the object truthfully.\nobject: (dog, puppy, doggy)\n"
                                    "question: Is it alive?\nanswer (yes or no): ")
    result = env.step("Is it a puppy?\n")  # the guess check stays rule-based: the LM cannot refuse a win
    assert result.info["success"] and result.reward == 0.0 and len(generator.prompts) == 3


def test_the_lm_answer_is_reduced_to_yes_or_no_as_in_the_original(tiny_dirs):
    oracle = LMQuestionOracle(default_oracle(), "twenty_questions", LMSpec(model=tiny_dirs["causal"]))
    assert [oracle._finish("dog", t) for t in ["yes", "Yes, it is", " no.", "maybe", "", "yesterday"]] == \
        ["Yes.", "Yes.", "No.", "No.", "No.", "No."]


def test_batched_rollouts_answer_with_one_generate_call(tiny_dirs):
    generator = Recording(LMSpec(model=tiny_dirs["causal"]))
    calls = []
    original = generator.generate
    generator.generate = lambda prompts, *a, **k: calls.append(len(prompts)) or original(prompts, *a, **k)
    oracle = LMQuestionOracle(default_oracle(), "twenty_questions", LMSpec(model=tiny_dirs["causal"]), generator)
    batch = BatchedEnv(lambda: TwentyQuestionsEnv(oracle=oracle), 4)
    batch.reset_all([{"secret": s} for s in ("dog", "cat", "piano", "apple")], [None] * 4)
    batch.step(["Is it alive?\n", "Is it alive?\n", "Is it made of wood?\n", "Is it an apple?\n"])
    assert calls == [3]  # three non-guess questions in one call; the correct guess needs no LM
    assert batch.episodes[3].done and batch.episodes[3].info["success"]


def test_env_config_builds_an_lm_oracle_and_rejects_bad_options(tiny_dirs):
    env = TwentyQuestionsEnv(oracle={"kind": "lm", "model": tiny_dirs["causal"], "max_new_tokens": 2})
    assert isinstance(env.oracle, LMQuestionOracle) and env.oracle.max_new_tokens == 2
    with pytest.raises(ValueError, match="unknown oracle kind 'gpt'; valid: 'kb', 'lm'"):
        TwentyQuestionsEnv(oracle={"kind": "gpt"})
    with pytest.raises(ValueError, match="bad oracle options.*temperature"):
        TwentyQuestionsEnv(oracle={"kind": "lm", "model": tiny_dirs["causal"], "temperature": 0.7})


def test_city_prompt_is_the_original_and_answers_are_redacted(tiny_dirs):
    from lmrl.envs.dialogue.guess_city import GuessCityEnv
    from lmrl.envs.dialogue.guess_city import default_oracle as city_oracle

    generator = Recording(LMSpec(model=tiny_dirs["causal"]))
    oracle = LMQuestionOracle(city_oracle(), "guess_city", LMSpec(model=tiny_dirs["causal"]), generator)
    env = GuessCityEnv(oracle=oracle)
    env.reset(options={"secret": "tokyo"})
    reply = env.step("What food is it famous for?\n").history[-1].text
    assert reply.endswith("\n") and reply.count("\n") == 1
    assert generator.prompts == ["Answer the question about the city truthfully.\n    object: tokyo,japan\n"
                                 "    question: What food is it famous for?\n    answer: "]
    assert "tokyo" not in oracle._finish("tokyo", "Tokyo is in Japan; people in tokyo love sushi.").lower()
    assert env.step("Is it Tokyo?\n").info["success"]


def test_car_dealer_lm_buyer_uses_the_original_prompt_and_decision_format(tiny_dirs):
    from lmrl.envs.dialogue.car_dealer import CarDealerEnv, LMBuyer

    generator = Recording(LMSpec(model=tiny_dirs["causal"]))
    env = CarDealerEnv(oracle=LMBuyer(LMSpec(model=tiny_dirs["causal"], max_new_tokens=6), generator),
                       max_utterances=4)
    profile = {"personality": "rude", "brand": "bmw", "type": "suv", "features": ["backup camera", "sunroof"],
               "budget": 50000}
    env.reset(options={"buyer": profile})
    first = env.step("Hello! Looking for a car?\n")
    assert generator.prompts[0] == ("Start\nPersonality: rude. Prefers a BMW SUV with backup camera, sunroof. "
                                    "Budget: $50,000\nHello! Looking for a car?\n")
    assert first.history[-1].text.count("\n") == 1 and not first.terminated
    buyer_line = first.history[-1].text
    last = env.step("The X5 is $60,000.\n")  # utterance 4 = the cap: the buyer is asked for its decision
    assert generator.prompts[1] == generator.prompts[0] + buyer_line + "The X5 is $60,000.\nOutput: Decision="
    # a random tiny model writes no readable decision: no sale, reward 0 (as the original)
    assert last.terminated and last.reward == 0.0 and last.info["decision"] == "reject"


class Scripted:
    """A stand-in generator replaying fixed model outputs (the output format is under test, not a model)."""

    def __init__(self, outputs):
        self.outputs = list(outputs)

    def generate(self, prompts, max_new_tokens, max_input_tokens=896):
        return [self.outputs.pop(0) for _ in prompts]


def test_car_dealer_lm_buyer_decisions_are_read_from_the_output_line():
    from lmrl.envs.dialogue.car_dealer import CarDealerEnv, LMBuyer

    spec = LMSpec(model="unused")
    env = CarDealerEnv(oracle=LMBuyer(spec, Scripted(["Too pricey.",
                                                      "Fine. Output: Decision=Accept MSRP=$65,200 Buy Price=$58,000"])))
    env.reset(options={"buyer": {"personality": "polite", "brand": "bmw", "type": "suv", "features": ["sunroof"],
                                 "budget": 50000}})
    assert env.step("The X5 is $60,000.\n").history[-1].text == "Too pricey.\n"
    result = env.step("$58,000 then.\n")
    assert result.terminated and result.history[-1].text == "Fine.\n" and result.info["price"] == 58000
    assert result.reward == pytest.approx(58000 / ((50000 + 65200) / 2))
    env = CarDealerEnv(oracle=LMBuyer(spec, Scripted(["No thanks. Output: Decision=Reject MSRP=$65,200"])))
    env.reset(options={"buyer": {"personality": "polite", "brand": "bmw", "type": "suv", "features": ["sunroof"],
                                 "budget": 50000}})
    result = env.step("The X5 is $90,000.\n")
    assert result.terminated and result.reward == 0.0 and result.info["decision"] == "reject"
