"""Acceptance: the knowledge-grounded oracles answer their held-out question sets (written
before the oracles were tuned, see tests/envs/heldout/README.md) with >= 95% accuracy."""

import json

import pytest

from lmrl.envs.oracle_eval import HELDOUT_DIR, load_heldout, score_guess_city, score_twenty_questions
from lmrl.envs.twenty_questions import PHRASINGS_PATH, default_oracle

ACCURACY = 0.95


@pytest.mark.parametrize("name", ["twenty_questions", "twenty_questions_independent"])
def test_twenty_questions_heldout_accuracy(name):
    items = load_heldout(name)
    assert len(items) >= 200 and len({i["question"] for i in items}) >= 200
    score = score_twenty_questions(default_oracle(), items)
    assert score.accuracy >= ACCURACY, "\n".join(score.failures)


def test_no_heldout_question_is_an_example_phrasing():
    phrasings = json.loads(PHRASINGS_PATH.read_text())
    examples = {q.lower().strip() for group in ("twenty_questions", "twenty_questions_categories")
                for texts in phrasings[group].values() for q in texts}
    # (the independent set's author never saw the phrasings, so overlaps there are coincidences)
    held = {i["question"].lower().strip() for i in load_heldout("twenty_questions")}
    assert not examples & held


def test_the_heldout_file_is_what_its_builder_writes():
    import importlib.util

    spec = importlib.util.spec_from_file_location("build", HELDOUT_DIR / "build_twenty_questions.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    assert build.build() == load_heldout("twenty_questions")


def test_guess_my_city_heldout_accuracy():
    from lmrl.envs.guess_city import default_oracle as city_oracle

    items = load_heldout("guess_my_city")
    assert len(items) >= 200 and len({i["question"] for i in items}) >= 200
    score = score_guess_city(city_oracle(), items)
    assert score.accuracy >= ACCURACY, "\n".join(score.failures)


def test_car_dealer_parser_heldout_accuracy():
    from lmrl.envs.car_catalogue import load_catalogue, parse_seller
    from lmrl.envs.oracle_eval import score_car_dealer

    items = load_heldout("car_dealer")
    assert len(items) >= 200 and len({i["utterance"] for i in items}) >= 200
    catalogue = load_catalogue()
    ids = {c.id for c in catalogue.cars}
    assert all(car in ids for i in items for car in i["expect"].get("cars", [])), "held-out names a car not sold"
    score = score_car_dealer(parse_seller, catalogue, items)
    assert score.accuracy >= ACCURACY, "\n".join(score.failures)
