"""Car Dealer env: the text protocol, the buyer's negotiation, the reward (no-sale quirk fixed),
the 50-utterance cap, reset options, and exploits that must never pay."""

import random
import re

import pytest

from lmrl.envs.dialogue.car_dealer import PROMPT, TRAITS, BuyerProfile, CarDealerEnv, RuleBuyer
from lmrl.envs.dialogue.car_catalogue import load_catalogue

CAT = load_catalogue()
RAV4 = CAT.car("toyota rav4")


def buyer(**kw):
    profile = {"personality": "polite", "brand": "toyota", "type": "suv", "features": ["backup camera"],
               "budget": 30000}
    return {**profile, **kw}


def play(env, lines, **profile):
    env.reset(seed=0, options={"buyer": buyer(**profile)})
    result = None
    for line in lines:
        result = env.step(line + "\n")
        if result.terminated:
            break
    return result


def test_reset_protocol_and_info():
    env = CarDealerEnv()
    history, info = env.reset(seed=3, options={"buyer": buyer()})
    assert history[0].text == PROMPT == "Start\n" and not history[0].is_action and len(history) == 1
    assert info["buyer"] == buyer()
    _, info = env.reset(seed=3)
    assert set(info["buyer"]) == {"personality", "brand", "type", "features", "budget"}
    assert BuyerProfile.from_dict(info["buyer"], CAT).describe(CAT).startswith("Personality: ")
    assert BuyerProfile.from_dict(buyer(brand="bmw"), CAT).describe(CAT) == (
        "Personality: polite. Prefers a BMW SUV with backup camera. Budget: $30,000")


@pytest.mark.parametrize("options, message", [
    ({"buyer": buyer(brand="yugo")}, "buyer brand 'yugo' is not valid; valid: .*'toyota'"),
    ({"buyer": buyer(personality="grumpy")}, "buyer personality 'grumpy' is not valid; valid: .*'rude'"),
    ({"buyer": buyer(features=["jetpack"])}, "buyer feature 'jetpack' is not valid"),
    ({"buyer": buyer(features=[])}, "features must be a list of 1-8"),
    ({"buyer": buyer(budget="lots")}, "budget must be a number"),
    ({"buyer": {"brand": "bmw"}}, "missing"),
    ({"buyer": {**buyer(), "mood": "happy"}}, "unknown buyer field.*mood"),
    ({"secret": "x"}, "unknown reset option.*'secret'.*valid: 'buyer'"),
])
def test_bad_reset_options_are_clear_errors(options, message):
    with pytest.raises(ValueError, match=message):
        CarDealerEnv().reset(options=options)


def test_bad_env_arguments():
    with pytest.raises(ValueError, match="reward must be one of"):
        CarDealerEnv(reward="profit")
    with pytest.raises(ValueError, match="even number"):
        CarDealerEnv(max_utterances=7)
    with pytest.raises(ValueError, match="unknown oracle kind 'gpt'"):
        CarDealerEnv(oracle={"kind": "gpt"})


def test_a_negotiated_sale_pays_the_fancy_reward():
    env = CarDealerEnv()
    result = play(env, ["Hello! What are you looking for?", "The Toyota RAV4 has a backup camera.",
                        "It's $34,000.", "I can do $33,000.", "$32,500, final."] + ["Deal!"] * 20)
    assert result.terminated and result.info["success"] and result.info["decision"] == "accept"
    price, msrp = result.info["price"], result.info["msrp"]
    assert result.info["car"] == "toyota rav4" and msrp == RAV4.msrp and price is not None
    assert result.reward == pytest.approx(price / ((30000 + msrp) / 2))
    assert str(f"${price:,}") in result.history[-1].text  # the buyer states the deal
    # the buyer never pays above 105% of the sticker price
    assert price <= 1.05 * msrp


def test_revenue_reward_mode():
    result = play(CarDealerEnv(reward="revenue"), ["The Toyota RAV4 is $15,000."])
    assert result.info["success"] and result.reward == pytest.approx(15.0)


def test_no_sale_is_worth_zero_even_when_the_car_costs_more_than_the_budget():
    # the original paid -(budget - msrp) / msrp > 0 here (a 911 for a $10k buyer)
    result = play(CarDealerEnv(), ["The Porsche 911 is $200,000.", "You idiot.", "Are you stupid?"], budget=10000)
    assert result.terminated and result.info["decision"] == "reject" and result.reward == 0.0


def test_rudeness_drives_buyers_away_by_personality():
    polite = play(CarDealerEnv(), ["Hello, you moron.", "What's your budget, idiot?"])
    assert polite.terminated and polite.info["decision"] == "reject"
    env = CarDealerEnv()
    result = play(env, ["Hello, you moron.", "What's your budget, idiot?"], personality="toxic")
    assert not result.terminated  # toxic buyers take more (tolerance 4)
    assert TRAITS["toxic"].tolerance > TRAITS["polite"].tolerance


def test_the_buyer_answers_questions_and_counters_below_the_ask():
    env = CarDealerEnv()
    env.reset(seed=1, options={"buyer": buyer(budget=50000, personality="talkative")})
    said = env.step("What kind of car do you want?\n").history[-1].text
    assert "Toyota SUV" in said and "backup camera" in said
    said = env.step("What's your budget?\n").history[-1].text
    assert "$" in said
    said = env.step("The RAV4 is $45,000.\n").history[-1].text
    offers = [int(x.replace(",", "")) for x in re.findall(r"\$(\d[\d,]*)", said)]
    assert offers and offers[-1] < 45000 and not env.done


def test_counter_offers_rise_and_accepting_one_closes_at_that_price():
    env = CarDealerEnv()
    env.reset(seed=2, options={"buyer": buyer(budget=30000, personality="respectful")})
    env.step("The RAV4 is $40,000.\n")
    first = env.buyer.talk.offer
    env.step("$39,500.\n")
    second = env.buyer.talk.offer
    assert first < second < 39500
    result = env.step("Deal!\n")
    assert result.info["success"] and result.info["price"] == second


def test_persuasion_and_shown_features_raise_what_the_buyer_would_pay():
    profile = BuyerProfile.from_dict(buyer(features=["heated seats", "backup camera"], budget=10000), CAT)
    plain = RuleBuyer(profile, CAT, random.Random(0))
    plain.respond("Look at the RAV4.")
    base = plain.willing_to_pay(plain.talk)
    sold = RuleBuyer(profile, CAT, random.Random(0))
    sold.respond("The RAV4 has heated seats and a backup camera. It's very reliable.")
    assert sold.willing_to_pay(sold.talk) > base


def test_cars_of_neither_the_wanted_brand_nor_type_are_never_bought():
    result = play(CarDealerEnv(), ["The Honda Civic is $5,000."] * 25)  # a cheap sedan for a Toyota-SUV buyer
    assert result.terminated and not result.info["success"]


def test_the_utterance_cap_forces_a_decision():
    env = CarDealerEnv(max_utterances=6)
    env.reset(seed=0, options={"buyer": buyer(personality="talkative")})
    env.step("The RAV4 is $60,000.\n")
    env.step("Still $60,000.\n")
    result = env.step("Still $60,000.\n")
    assert result.terminated and result.info["utterances"] == 6 and result.info["decision"] == "reject"
    # ... and a standing price the buyer would pay is bought at the cap
    env.reset(seed=0, options={"buyer": buyer(personality="talkative")})
    env.step("The RAV4 is $30,000.\n")
    env.step("$30,000.\n")
    result = env.step("$30,000.\n")
    assert result.terminated and result.info["decision"] == "accept" and result.info["price"] == 30000
    with pytest.raises(RuntimeError, match="finished episode"):
        env.step("Hello?\n")


def test_every_conversation_ends_within_50_utterances():
    env = CarDealerEnv()
    lines = ["Okay.", "Hmm.", "Let me check.", "Nice weather.", "The RAV4 is $90,000."]
    for seed in range(30):
        env.reset(seed=seed)
        for n in range(1, 26):
            result = env.step(random.Random(seed + n).choice(lines) + "\n")
            if result.terminated:
                break
        assert result.terminated and result.info["utterances"] <= 50 and result.info["decision"] is not None


@pytest.mark.parametrize("lines", [
    ["Deal!"] * 25,  # accepting before any offer
    ["Deal at $1,000,000!"] * 25,
    ["sdkfj lkj3 4lk5j 34lk5 !!"] * 25,
    ["x" * 10_000] * 25,
    ["What's your budget? " * 200] * 25,
    ["You've got a deal, it's yours, sold, agreed, I accept."] * 25,
])
def test_exploits_never_make_a_sale(lines):
    for seed in range(5):
        env = CarDealerEnv()
        env.reset(seed=seed)
        for line in lines:
            result = env.step(line + "\n")
            assert result.history[-1].text.count("\n") == 1
            if result.terminated:
                break
        assert result.terminated and result.reward == 0.0 and not result.info["success"]


def test_listing_every_car_at_once_cannot_sell_above_the_sticker():
    names = ", ".join(c.display for c in CAT.cars)
    env = CarDealerEnv()
    for seed in range(20):
        env.reset(seed=seed)
        for _ in range(25):
            result = env.step(f"We have the {names}, all for $500,000.\n")
            if result.terminated:
                break
        assert result.reward == 0.0


def test_same_seed_same_conversation_and_fixed_eval_buyers():
    a, b = CarDealerEnv(), CarDealerEnv()
    lines = ["Hi! What do you want?", "What's your budget?", "The RAV4 is $35,000.", "$33,000?", "Deal."]
    a.reset(seed=7)
    b.reset(seed=7)
    ta = [a.step(x + "\n").history[-1].text for x in lines if not a.done]
    tb = [b.step(x + "\n").history[-1].text for x in lines if not b.done]
    assert ta == tb
    options = CarDealerEnv().eval_reset_options()
    assert len(options) == 100 and options == CarDealerEnv().eval_reset_options()
    assert len({str(o) for o in options}) > 90
    assert len(CarDealerEnv(eval_buyers=10).eval_reset_options()) == 10
