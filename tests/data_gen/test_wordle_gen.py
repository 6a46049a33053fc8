"""The Wordle generator: deterministic, replayable, tuned to Table 1."""

from pathlib import Path

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from data_gen.wordle import (
    DEFAULT_EPISODES,
    DEFAULT_PROB_SMART,
    PAPER_WORDLE_ROW,
    generate,
    main,
)
from lmrl.data.jsonl import read_episodes
from lmrl.data.stats import dataset_stats
from lmrl.envs.base import Episode, Text
from lmrl.envs.wordle import (
    WORDS,
    WordleEnv,
    consistent_words,
    optimal_value,
)
from tests.helpers import replay

CONFIG = Path(__file__).resolve().parents[2] / "conf" / "task" / "wordle.yaml"
ACTION_TEXTS = {" ".join(w) + "\n" for w in WORDS}


@pytest.fixture(scope="module")
def dataset() -> list[Episode]:
    return list(generate(10_000, seed=0))


def observations(episode: Episode) -> list[tuple[str, str]]:
    return [(a.text[::2], f.text[::2]) for a, f in zip(episode.turns[1::2], episode.turns[2::2])]


def test_deterministic_and_prefix_stable():
    first = list(generate(300, seed=3))
    assert first == list(generate(300, seed=3))
    assert first[:100] == list(generate(100, seed=3))
    assert first != list(generate(300, seed=4))


def test_every_episode_replays_exactly(dataset):
    for episode in dataset[:2000]:
        assert replay(WordleEnv(), {"secret": episode.info["secret"]}, episode) == (episode.turns, episode.rewards)


def test_episode_shape(dataset):
    for ep in dataset:
        assert ep.done and ep.turns[0] == Text("Wordle:\n", False) and len(ep.turns) % 2 == 1
        assert [t.is_action for t in ep.turns] == [False] + [True, False] * ep.num_actions
        assert all(t.text in ACTION_TEXTS for t in ep.turns[1::2])  # the policy only says list words
        assert all(r == 0.0 for t, r in zip(ep.turns, ep.rewards) if not t.is_action)
        assert ep.success == (ep.turns[-1].text == "g g g g g\n")
        assert 1 <= ep.num_actions <= 6 and (ep.success or ep.num_actions == 6)
        assert ep.total_return == (-(ep.num_actions - 1) if ep.success else -6.0)
    assert {ep.info["secret"] for ep in dataset} == set(WORDS)


def test_smart_guesses_are_consistent_and_random_ones_need_not_be():
    for ep in generate(100, seed=1, prob_smart=1.0):
        seen = observations(ep)
        for k, (guess, _) in enumerate(seen):
            assert guess in consistent_words(seen[:k])
    dumb = list(generate(100, seed=1, prob_smart=0.0))
    inconsistent = sum(
        guess not in consistent_words(observations(ep)[:k])
        for ep in dumb
        for k, (guess, _) in enumerate(observations(ep))
    )
    assert inconsistent > 250
    assert dataset_stats(dumb)["avg_return"] < -5.5


def test_statistics_near_table_1(dataset):
    stats = dataset_stats(dataset)
    assert abs(stats["avg_return"] - PAPER_WORDLE_ROW["avg_return"]) <= 0.06
    assert abs(stats["avg_length"] - PAPER_WORDLE_ROW["avg_length"]) <= 0.06
    assert abs(stats["success_rate"] - PAPER_WORDLE_ROW["success_rate"]) <= 0.03
    assert abs(stats["std_return"] - PAPER_WORDLE_ROW["std_return"]) <= 0.1


def test_bad_parameters_are_rejected_before_iteration():
    with pytest.raises(ValueError, match="prob_smart"):
        generate(1, prob_smart=1.5)
    with pytest.raises(ValueError, match="episodes"):
        generate(-1)
    with pytest.raises(TypeError):
        generate(1, prob_smrt=0.3)


def test_config_matches_the_module_and_instantiates():
    cfg = OmegaConf.load(CONFIG)
    recipe = cfg.data.recipe
    assert recipe.prob_smart == DEFAULT_PROB_SMART and recipe.episodes == DEFAULT_EPISODES
    assert OmegaConf.to_container(cfg.data.paper_stats) == pytest.approx(PAPER_WORDLE_ROW)
    assert cfg.history_window is None and cfg.actions is None and cfg.eval.episodes_per_start == 1
    assert cfg.normalization.max == pytest.approx(optimal_value(), abs=1e-4)
    recipe.episodes = 5
    assert list(instantiate(recipe)) == list(generate(5, seed=0))
    env = instantiate(cfg.env)
    assert isinstance(env, WordleEnv) and env.invalid_reward == -1.0


def test_cli_writes_jsonl_and_prints_stats(tmp_path, capsys):
    out = tmp_path / "wordle.jsonl"
    main(["--episodes", "40", "--seed", "5", "--out", str(out)])
    assert read_episodes(out) == list(generate(40, seed=5))
    printed = capsys.readouterr().out
    assert "avg_return" in printed and "paper" in printed and "episodes/s" in printed and "-4.12" in printed


def test_cli_optimal_prints_the_normalization_max(capsys):
    main(["--optimal"])
    printed = capsys.readouterr().out
    assert f"mean return {optimal_value():.4f}" in printed and "431 secrets" in printed

