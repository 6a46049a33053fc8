"""The Twenty Questions generator: deterministic, replayable, graded guessers, near Table 1."""

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from data_gen.twenty_questions import PAPER_ROW, GuesserMix, expert_returns, generate, phrasebook
from lmrl.data.stats import dataset_stats
from lmrl.envs.dialogue.twenty_questions import UNKNOWN, TwentyQuestionsEnv, default_oracle
from tests.helpers import replay

CONFIG = Path(__file__).resolve().parents[2] / "conf" / "task" / "twenty_questions.yaml"


@pytest.fixture(scope="module")
def dataset():
    return list(generate(3000, seed=0))


def test_deterministic_and_prefix_stable():
    first = list(generate(120, seed=3))
    assert first == list(generate(120, seed=3)) and first[:40] == list(generate(40, seed=3))
    assert first != list(generate(120, seed=4))


def test_every_episode_replays_exactly(dataset):
    env = TwentyQuestionsEnv()
    for episode in dataset[:500]:
        assert replay(env, {"secret": episode.info["secret"]}, episode) == (episode.turns, episode.rewards)


def test_statistics_are_near_table_1_and_match_the_config(dataset):
    stats = dataset_stats(dataset)
    assert abs(stats["success_rate"] - PAPER_ROW["success_rate"]) < 0.05
    assert abs(stats["avg_return"] - PAPER_ROW["avg_return"]) < 0.6
    config = OmegaConf.load(CONFIG)
    assert abs(config.normalization.avg - stats["avg_return"]) < 0.3
    assert config.normalization.min == -20.0


def test_guessers_are_graded(dataset):
    by_kind = {}
    for episode in dataset:
        by_kind.setdefault(episode.info["guesser"], []).append(episode)
    mean = {k: sum(e.total_return for e in v) / len(v) for k, v in by_kind.items()}
    success = {k: sum(e.success for e in v) / len(v) for k, v in by_kind.items()}
    assert mean["expert"] > mean["noisy"] + 3 > mean["random"] + 6
    assert success["expert"] == 1.0 and success["random"] < 0.1


def test_questions_are_varied_and_all_understood(dataset):
    questions = {t.text for e in dataset for t in e.turns if t.is_action}
    assert len(questions) > 1000
    answers = {t.text for e in dataset for t in e.turns[2::2]}
    assert answers == {"Yes.\n", "No.\n", UNKNOWN + "\n"}
    book, oracle = phrasebook(), default_oracle()
    for episode in dataset[:300]:  # "I can't answer that." only where the knowledge base is unsure of the answer
        for question, answer in zip(episode.turns[1::2], episode.turns[2::2]):
            if answer.text == UNKNOWN + "\n":
                attribute = oracle.parse(question.text.strip()).target
                assert book.kb.value(episode.info["secret"], attribute) is None, (question.text, episode.info["secret"])


def test_every_attribute_has_a_wording_the_oracle_reads_back():
    book = phrasebook()
    assert set(book.questions) == set(book.kb.attribute_ids) and all(book.questions.values())


def test_the_expert_never_asks_what_the_knowledge_base_is_unsure_of(dataset):
    for episode in dataset:
        if episode.info["guesser"] == "expert":
            assert UNKNOWN + "\n" not in {t.text for t in episode.turns[2::2]}


def test_the_expert_value_is_the_config_maximum():
    returns = expert_returns()
    assert len(returns) == len(phrasebook().kb.objects)
    assert returns.min() >= -12 and abs(returns.mean() - OmegaConf.load(CONFIG).normalization.max) < 0.01


def test_bad_mix_parameters_fail_before_any_episode():
    with pytest.raises(ValueError, match="p_expert must lie in"):
        generate(10, p_expert=1.5)
    with pytest.raises(TypeError, match="unknown guesser mix parameter.*p_expert"):
        generate(10, p_wizard=0.5)
    with pytest.raises(ValueError, match="at most 1"):
        GuesserMix(p_expert=0.6, p_noisy=0.6)
