"""The Car Dealer generator: deterministic, replayable, graded sellers whose lines the parser reads
as meant, near Table 1's success rate; the expert's value is the normalization maximum."""

import random
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from data_gen import car_dealer as gen
from data_gen.car_dealer import PAPER_ROW, SellerMix, expert_returns, generate, write_price
from lmrl.data.stats import dataset_stats
from lmrl.envs.base import Text
from lmrl.envs.dialogue.car_catalogue import load_catalogue, parse_seller
from lmrl.envs.dialogue.car_dealer import CarDealerEnv

CONFIG = Path(__file__).resolve().parents[2] / "conf" / "task" / "car_dealer.yaml"
CAT = load_catalogue()


@pytest.fixture(scope="module")
def dataset():
    return list(generate(1500, seed=0))


def test_deterministic_and_prefix_stable():
    first = list(generate(60, seed=3))
    assert first == list(generate(60, seed=3)) and first[:20] == list(generate(20, seed=3))
    assert first != list(generate(60, seed=4))


def test_every_episode_replays_exactly(dataset):
    env = CarDealerEnv()
    for episode in dataset[:300]:
        history, _ = env.reset(seed=episode.info["env_seed"], options={"buyer": episode.info["buyer"]})
        turns, rewards = list(history), [0.0]
        for action in (t.text for t in episode.turns if t.is_action):
            result = env.step(action)
            turns += [Text(action, True), result.history[-1]]
            rewards += [result.reward, 0.0]
        assert (turns, rewards) == (episode.turns, episode.rewards)


def test_statistics_match_table_1_success_and_the_config(dataset):
    stats = dataset_stats(dataset)
    assert abs(stats["success_rate"] - PAPER_ROW["success_rate"]) < 0.05
    config = OmegaConf.load(CONFIG)
    assert abs(config.normalization.avg - stats["avg_return"]) < 0.04 and config.normalization.min == 0.0


def test_sellers_are_graded(dataset):
    by_kind = {}
    for episode in dataset:
        by_kind.setdefault(episode.info["seller"], []).append(episode)
    mean = {k: sum(e.total_return for e in v) / len(v) for k, v in by_kind.items()}
    assert mean["expert"] > mean["noisy"] + 0.2 > mean["random"] + 0.4
    assert len({t.text for e in dataset for t in e.turns if t.is_action}) > 1000


def test_the_expert_value_is_the_config_maximum():
    returns = expert_returns()
    assert len(returns) == 100 and abs(returns.mean() - OmegaConf.load(CONFIG).normalization.max) < 0.001


@pytest.mark.parametrize("bank, field", [
    (gen.GREET, "greeting"), (gen.OPENING, "asks_preferences"), (gen.OPENING, "asks_budget"),
    (gen.ASK_PREFERENCES, "asks_preferences"), (gen.ASK_BUDGET, "asks_budget"), (gen.PERSUADE, "persuasion"),
    (gen.RUDE, "rude"), (gen.ACCEPT, "accepts_offer"),
])
def test_every_template_is_read_as_meant(bank, field):
    for line in bank:
        assert getattr(parse_seller(line.format(p="$30,000")), field), line


def test_pitches_and_prices_are_read_with_their_car_and_price():
    rng = random.Random(0)
    for car in CAT.cars:
        for template in gen.PITCH + gen.PITCH_BARE:
            parsed = parse_seller(template.format(car=car.display, features="heated seats"))
            assert parsed.cars == (car.id,) and parsed.price is None, (template, car.id)
        for template in gen.PRICE + gen.CONCEDE:
            price = rng.randrange(10_000, 130_000, 100)
            line = template.format(p=write_price(rng, price))
            assert parse_seller(line).price == price, line
    for line in gen.SMALL_TALK:
        parsed = parse_seller(line)
        assert not (parsed.rude or parsed.accepts_offer or parsed.price or parsed.cars), line


def test_bad_mix_parameters_fail_before_any_episode():
    with pytest.raises(ValueError, match="p_slip must lie in"):
        generate(10, p_slip=2.0)
    with pytest.raises(TypeError, match="unknown seller mix parameter"):
        generate(10, p_wizard=0.5)
    with pytest.raises(ValueError, match="at most 1"):
        SellerMix(p_expert=0.7, p_noisy=0.7)


def test_attempts_per_task_meet_one_buyer():
    """SWEET-RL's recipe: each run of k consecutive conversations meets one buyer (profile and behaviour)."""
    episodes = list(generate(8, seed=3, attempts_per_task=4))
    seeds = [ep.info["env_seed"] for ep in episodes]
    assert len(set(seeds[:4])) == 1 and len(set(seeds[4:])) == 1 and seeds[0] != seeds[4]
    assert episodes[0].info["buyer"] == episodes[3].info["buyer"] != episodes[4].info["buyer"]
    with pytest.raises(ValueError, match="attempts_per_task"):
        generate(4, attempts_per_task=0)
