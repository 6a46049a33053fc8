"""The dataset cache key follows the recipe and the code that generates it."""

import importlib

from omegaconf import OmegaConf

from lmrl.task import generator_sources, recipe_key


def test_key_changes_with_the_recipe_config():
    a = OmegaConf.create({"_target_": "data_gen.maze.generate", "episodes": 10, "seed": 0})
    b = OmegaConf.create({"_target_": "data_gen.maze.generate", "episodes": 10, "seed": 1})
    assert recipe_key(a) == recipe_key(OmegaConf.create(OmegaConf.to_container(a))) != recipe_key(b)


def test_key_ignores_the_number_of_generator_workers():
    # the same episodes for any `workers` (tests/data_gen/test_chess_gen.py), so one cache entry serves both
    one = OmegaConf.create({"_target_": "data_gen.endgames.generate", "episodes": 10, "seed": 0, "workers": 1})
    two = OmegaConf.merge(one, {"workers": 2})
    assert recipe_key(one) == recipe_key(two) != recipe_key(OmegaConf.merge(one, {"episodes": 11}))


def test_key_covers_the_env_module_and_word_list():
    files = {p.name for p in generator_sources(importlib.import_module("data_gen.wordle"))}
    assert {"wordle.py", "base.py", "wordle_words.txt"} <= files
    assert len([f for f in generator_sources(importlib.import_module("data_gen.wordle")) if f.name == "wordle.py"]) == 2


def test_key_covers_the_modules_behind_the_env():
    # the 20 Questions generator imports the env; the oracle's rules, facts and knowledge base loader sit behind it
    files = {p.name for p in generator_sources(importlib.import_module("data_gen.twenty_questions"))}
    assert {"twenty_questions_rules.py", "twenty_questions_facts.py", "knowledge.py", "words.py"} <= files
    files = {p.name for p in generator_sources(importlib.import_module("data_gen.guess_city"))}
    assert {"guess_city_questions.py", "cities.py", "words.py"} <= files
