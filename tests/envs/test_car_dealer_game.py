"""Car Dealer's duel (`lmrl.envs.dialogue.car_dealer_game`): the buyer-line parser against the rule buyer's own
lines, deals and returns worked by hand, forfeits, the cap, what each side sees, agreement with the rule buyer's own
decisions, fuzzing, the one-seat env, seat scores and the duel's dataset."""

import random

import pytest

from data_gen.car_dealer import generate_duel
from lmrl.envs.dialogue.car_dealer import LINES
from lmrl.envs.dialogue.car_dealer_game import CarDealerGame, CarDealerVersusEnv, parse_buyer
from lmrl.envs.two_player import play, scripted_player
from tests.envs.test_env_fuzz import ALPHABETS, fuzz_corpus

FILL = {"car": "Toyota RAV4", "price": "$29,500", "offer": "$28,000", "ask": "$31,000", "b": "$30,000",
        "want": "a Toyota SUV", "features": "sunroof"}


def kind(text: str) -> str:
    b = parse_buyer(text)
    return "accept" if b.accepts else "reject" if b.rejects else "offer" if b.offer is not None else "talk"


def test_every_rule_buyer_line_reads_as_meant():
    """Each of the rule buyer's lines, filled in: its decisions are decisions, its counters offers (at the offered
    amount), and nothing else decides; a budget is no offer except the terse `{b}.` that no text tells from one."""
    for (situation, style), options in LINES.items():
        for option in options:
            text = option.format(**FILL)
            got = kind(text)
            if situation == "accept":
                assert got == "accept", text
            elif situation in ("leave", "insulted"):
                assert got == "reject", text
            elif situation in ("counter", "too_expensive"):
                assert got == "offer" and parse_buyer(text).offer == 28_000, text
            elif situation == "budget" and option != "{b}.":
                assert got == "talk", text
            elif situation != "budget":
                assert got == "talk", text


def fresh(seed: int = 3) -> CarDealerGame:
    game = CarDealerGame()
    game.reset(seed)
    return game


def pick_car(game: CarDealerGame, liked: bool):
    """A catalogue car of the buyer's brand and type (or of neither)."""
    p = game.profile
    for car in game.catalogue.cars:
        match = car.brand == p.brand and p.type in car.types
        neither = car.brand != p.brand and p.type not in car.types
        if (liked and match) or (not liked and neither):
            return car
    pytest.skip("no such car for this profile")


def test_seller_accepting_the_buyers_offer_sells_at_it_by_hand():
    game = fresh()
    car = pick_car(game, liked=False)
    game.step(f"The {car.display} is ${car.msrp:,}.\n")
    game.step("I could do $20,000.\n")
    assert (game.ask, game.offer) == (car.msrp, 20_000)
    result = game.step("Deal!\n")
    scale = (game.profile.budget + car.msrp) / 2
    value = min(game.profile.budget * 0.9, 1.05 * car.msrp)  # neither its brand nor its type
    assert result.done and game.sale == (car.id, 20_000)
    assert game.returns() == pytest.approx((20_000 / scale, (value - 20_000) / scale))
    assert "Sold: the" in game.observation(0) and game.observation(1).endswith("\n")


def test_buyer_accepting_buys_at_the_sellers_ask_whatever_it_names():
    game = fresh()
    car = pick_car(game, liked=True)
    game.step(f"Take a look at the {car.display}. It's yours for $40,000.\n")
    game.step("How much lower can you go?\n")
    game.step("I can take $2,000 off.\n")
    assert game.ask == 38_000
    result = game.step("Deal. I'll take it for $1,000.\n")
    scale = (game.profile.budget + car.msrp) / 2
    value = min(game.profile.budget * 1.1, 1.05 * car.msrp)  # its brand and its type
    assert result.done and not result.info["invalid"] and game.sale == (car.id, 38_000)
    assert game.returns() == pytest.approx((38_000 / scale, (value - 38_000) / scale))


def test_naming_another_car_drops_the_ask_and_the_offer():
    game = fresh()
    first, second = game.catalogue.cars[0], game.catalogue.cars[1]
    game.step(f"The {first.display} is $30,000.\n")
    game.step("How about $25,000?\n")
    game.step(f"Or the {second.display}.\n")
    assert (game.car.id, game.ask, game.offer) == (second.id, None, None)
    game.step("Hm.\n")
    assert not game.step("Deal!\n").done  # no offer stands for this car


def test_absurd_asks_and_offers_do_not_stand():
    game = fresh()
    car = pick_car(game, liked=True)
    game.step(f"The {car.display} is ${3 * car.msrp:,}.\n")
    assert game.ask is None
    assert game.step("Deal, I'll take it for $5,000.\n").info["invalid"]  # no ask stands
    game = fresh()
    game.step(f"The {car.display} is ${car.msrp:,}.\n")
    game.step("Can you knock $900,000 off?\n")
    game.step("Sure, I'll take $900,000 off.\n")
    assert game.ask is None
    game = fresh()
    game.step(f"The {car.display} is ${car.msrp:,}.\n")
    game.step(f"How about ${5 * car.msrp:,}?\n")
    assert game.offer is None and not game.step("Deal!\n").done


def test_rejection_and_the_cap_end_without_a_deal():
    game = fresh()
    game.step("Hello!\n")
    result = game.step("Sorry, I'm going to pass.\n")
    assert result.done and game.returns() == (0.0, 0.0) and game.sale is None
    assert game.observation(0).endswith("Game over. No deal.\n")
    game = CarDealerGame(max_utterances=4)
    game.reset(0)
    for line in ("Hi.\n", "Hello.\n", "Nice weather.\n"):
        assert not game.step(line).done
    assert game.step("Okay.\n").done and game.returns() == (0.0, 0.0)
    with pytest.raises(ValueError, match="even number"):
        CarDealerGame(max_utterances=5)


def test_invalid_moves_forfeit_for_the_mover_only():
    game = fresh()
    result = game.step("  \n \n")
    assert result.info["invalid"] and result.done and game.returns() == (-1.0, 0.0) and game.forfeited_by == 0
    game = fresh()
    game.step("Hello!\n")
    result = game.step("Deal, I'll take it for $30,000.\n")  # nothing was priced
    assert result.info["invalid"] and game.returns() == (0.0, -1.0)
    assert "You made an invalid move" in game.observation(1)


def test_each_side_sees_the_talk_and_its_role_last():
    game = fresh()
    game.step("Hello! What are you looking for?\n")
    seller, buyer = game.observation(0), game.observation(1)
    assert seller == "Start\nHello! What are you looking for?\nRole: seller.\n"
    assert buyer.startswith("Start\nHello! What are you looking for?\nRole: buyer. Personality: ")
    assert f"Budget: ${game.profile.budget:,}" in buyer and "Budget" not in seller


def test_the_view_keeps_the_latest_lines_and_the_role():
    game = CarDealerGame(view_lines=3)
    game.reset(1)
    for k in range(5):
        game.step(f"Line {k}.\n")
    assert game.observation(0) == "(earlier lines not shown)\nLine 2.\nLine 3.\nLine 4.\nRole: seller.\n"
    assert game.observation(1).startswith("(earlier lines not shown)\nLine 2.\n")
    everything = CarDealerGame(view_lines=None)
    everything.reset(1)
    for k in range(5):
        everything.step(f"Line {k}.\n")
    assert everything.observation(0).startswith("Start\nLine 0.\n")
    with pytest.raises(ValueError, match="view_lines"):
        CarDealerGame(view_lines=0)


def test_the_games_deals_agree_with_the_rule_buyers_own_decisions():
    """The dataset's sellers against the rule buyer: the deal the text makes under the game's rules is the one the
    rule buyer decided from its hidden state (asked for the last word when the seller closed the deal), in 300
    games of 300."""
    game, agree, sales = CarDealerGame(), 0, 0
    for i in range(300):
        player = scripted_player("car_dealer", "mix", random.Random(i))
        play(game, [player, player], seed=i)
        buyer = game.scratch["rule_buyer"]
        if buyer.decided is None and len(game.lines) % 2:
            buyer.respond(game.lines[-1], last_chance=len(game.lines) + 1 >= game.max_length)
        decided = buyer.decided
        rule = (decided.car, decided.price) if decided is not None and decided.decision == "accept" else None
        agree += rule == game.sale
        sales += game.sale is not None
    assert agree == 300 and 100 < sales < 250


def test_fuzzed_lines_never_raise_and_keep_the_rules():
    strings = fuzz_corpus(["", "\n", " ", "Deal!", "deal", "No deal", "$5", "I'll take it for $1\n"],
                          {"Hello!\n", "The Toyota RAV4 is $30,000.\n", "How about $25,000?\n"}, ALPHABETS, 1500)
    rng = random.Random(0)
    for text in strings:
        game = fresh(rng.randrange(1000))
        for _ in range(rng.randrange(6)):
            if game.done:
                break
            game.step(rng.choice(["Hello!\n", "The Toyota RAV4 is $30,000.\n", "How about $25,000?\n"]))
        if game.done:
            continue
        mover = game.current_player()
        result = game.step(text)
        returns = game.returns()
        if result.info["invalid"]:
            assert result.done and returns[mover] == -1.0 and returns[1 - mover] == 0.0
        assert all(-4.0 <= r <= 4.0 for r in returns) and game.observation(mover).endswith("\n")


def test_one_seat_env_against_the_scripted_side():
    env = CarDealerVersusEnv(opponent="expert")
    assert env.legal_actions() is None and env.eval_reset_options() == [{"seat": 0}, {"seat": 1}]
    history, info = env.reset(seed=5, options={"seat": 1})
    assert info == {"seat": 1} and history[0].text.count("\n") >= 3  # the expert seller spoke first
    result = env.step("No deal.\n")
    assert result.terminated and result.reward == 0.0
    with pytest.raises(ValueError, match="car_dealer"):
        CarDealerVersusEnv(game="kuhn")


def test_the_expert_seller_never_sells_below_its_floor():
    """Without a floor the expert, written to sell to the rule buyer, takes any offer that stops rising: a buyer
    repeating a lowball gets the car.  With the floor it concedes down to it and holds."""

    def lowball(game):
        return "How about $5,000?\n"

    def play_lowball(floor):
        sales = []
        for seed in range(20):
            game = CarDealerGame(seller_floor=floor)
            play(game, [scripted_player("car_dealer", "expert", random.Random(seed)), lowball], seed=seed)
            sales.append(game.sale and game.sale[1])
        return sales

    assert all(price is None for price in play_lowball(0.9))
    assert sum(price == 5000 for price in play_lowball(None)) >= 15
    for seed in range(40):  # against the rule buyer every sale is at the floor or above
        game = CarDealerGame()
        player = scripted_player("car_dealer", "expert", random.Random(seed))
        play(game, [player, player], seed=seed)
        assert game.sale is None or game.sale[1] >= 0.9 * game.car.msrp
    with pytest.raises(ValueError, match="seller_floor"):
        CarDealerGame(seller_floor=0)


def test_seat_scores_and_no_ladder_for_a_general_sum_game():
    from lmrl.ladder import players_for, seat_scores

    expert = scripted_player("car_dealer", "expert", random.Random(0))
    scores = seat_scores(expert, "car_dealer", "expert", games=40, seed=0)
    assert scores["seat0"] > 0.6 and abs(scores["seat1"]) < 0.2 and 0 < scores["seat0_se"] < 0.1
    assert scores["seat0_positive"] > 0.7
    with pytest.raises(ValueError, match="general-sum"):
        players_for("car_dealer", 0)


def test_duel_dataset_is_deterministic_both_sides_and_a_prefix():
    small, large = list(generate_duel(7, seed=1)), list(generate_duel(10, seed=1))
    assert all(t.text.count("\n") <= 1 + 12 + 1 for e in large for t in e.turns[:-1] if not t.is_action)
    whole = list(generate_duel(10, seed=1, view_lines=None))
    assert [e.total_return for e in whole] == [e.total_return for e in large]
    assert len(small) == 7 and [e.info["seat"] for e in large] == [0, 1] * 5
    assert [e.turns for e in small] == [e.turns for e in large[:7]]
    assert large[1].turns[-1].text.count("Role: buyer.") == 1 and "Role: seller." in large[0].turns[-1].text
    with pytest.raises(ValueError, match="unknown car_dealer player"):
        generate_duel(2, opponent="nobody")
