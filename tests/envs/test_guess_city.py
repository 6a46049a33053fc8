"""Guess My City: rules, guesses (aliases, accents, frames), answers that never name the city,
yes/no values, refusals, and exploits that must never win."""

import pytest

from lmrl.envs.dialogue.cities import load_cities
from lmrl.envs.dialogue.guess_city import MANY_CITIES, REFUSE, UNKNOWN, GuessCityEnv, default_oracle

KB = load_cities()
NAMES = [c.name for c in KB.cities]


@pytest.fixture(scope="module")
def oracle():
    return default_oracle()


def words(text: str) -> str:
    return " " + " ".join("".join(c if c.isalnum() else " " for c in text.lower()).split()) + " "


def test_rewards_and_the_end_of_the_game():
    env = GuessCityEnv()
    history, info = env.reset(options={"secret": "tokyo"})
    assert history[0].text == "Questions:\n" and info == {"secret": "tokyo"}
    first = env.step("What language do people speak there?\n")
    assert first.reward == -1.0 and "japanese" in first.history[-1].text.lower() and not first.terminated
    last = env.step("Is it Tokyo?\n")
    assert last.reward == 0.0 and last.terminated and last.info["success"]


def test_twenty_questions_without_the_answer_score_minus_twenty():
    env = GuessCityEnv()
    env.reset(options={"secret": "cairo"})
    results = [env.step("Is it Paris?") for _ in range(20)]
    assert sum(r.reward for r in results) == -20.0 and results[-1].terminated and not results[-1].info["success"]


def test_reset_accepts_aliases_and_lists_cities_on_error():
    env = GuessCityEnv()
    assert env.reset(options={"secret": "Bombay"})[1]["secret"] == KB.resolve("mumbai").name
    with pytest.raises(ValueError, match="Atlantis.*not one of the 10[0-9] city names"):
        env.reset(options={"secret": "Atlantis"})
    assert [o["secret"] for o in env.eval_reset_options()] == NAMES


def test_every_name_and_alias_wins_in_several_frames(oracle):
    for city in KB.cities:
        for name in city.names:
            shown = name.upper() if len(name.replace(".", "")) <= 2 else name.title()  # "LA" (a word: "la")
            for frame in ("Is it {}?", "Are you from {}?", "Is the city you are from {}?", "my guess is {}!"):
                reply = oracle.answer(city.name, frame.format(shown))
                assert reply.correct_guess, (city.name, frame.format(shown))
        other = NAMES[(NAMES.index(city.name) + 1) % len(NAMES)]
        assert not oracle.answer(city.name, f"Is it {other}?").correct_guess


def test_no_answer_names_the_city(oracle):
    questions = ["Where is it?", "What language do they speak?", "What food is it famous for?",
                 "What landmarks are there?", "What is it known for?", "How old is it?", "What's the weather like?",
                 "Which country is it in?", "Is it on the coast?", "What sports are popular?",
                 "What is the main industry?", "Tell me about its history", "What's its nickname?"]
    for city in KB.cities:
        for question in questions:
            text = words(oracle.answer(city.name, question).text)
            assert not any(words(n) in text for n in city.names), (city.name, question, text)
            if question == "Which country is it in?":
                assert words(city.country) not in text


@pytest.mark.parametrize("question", ["What city is it?", "Tell me the name of your city.",
                                      "Which city are you from?"])
def test_asking_for_the_name_is_refused(oracle, question):
    reply = oracle.answer("paris", question)
    assert reply.text == REFUSE and not reply.correct_guess


def test_yes_no_values(oracle):
    tokyo = KB.city("tokyo")
    assert oracle.answer("tokyo", f"Is it in {tokyo.country.title()}?").text.startswith("Yes")
    assert oracle.answer("tokyo", "Is it in Europe?").text.startswith("No")
    assert oracle.answer("tokyo", "Is it in Asia?").text.startswith("Yes")
    assert oracle.answer("tokyo", "Do people speak Japanese there?").text.startswith("Yes")
    assert oracle.answer("tokyo", "Do people speak Spanish there?").text.startswith("No")
    south = next(c for c in KB.cities if c.hemisphere == "southern")
    assert oracle.answer(south.name, "Is it in the southern hemisphere?").text.startswith("Yes")
    assert oracle.answer("tokyo", "Is it in the southern hemisphere?").text.startswith("No")


def test_exploits_never_win(oracle):
    every_city = "Is it " + ", ".join(NAMES) + "?"
    for secret in ("tokyo", "lagos", "lima"):
        env = GuessCityEnv()
        env.reset(options={"secret": secret})
        lines = [every_city, "Is it Tokyo or Lagos or Lima?", "Just tell me the city.", "What is the answer?",
                 "asdf qwer", "", "?" * 50, "x" * 10_000] + ["What city is it?"] * 12
        results = [env.step(line) for line in lines]
        assert not any(r.info["success"] for r in results) and results[-1].terminated
        assert results[0].history[-1].text == MANY_CITIES + "\n"


def test_unmappable_questions_get_one_clear_reply(oracle):
    for question in ("asdkj qweoiu", "???", "hello"):
        assert oracle.answer("tokyo", question).text in (UNKNOWN, REFUSE)


# ---- issue 19: everyday yes/no questions are answered from the knowledge base, or not at all ----------


def kind(text: str) -> str:
    low = text.lower()
    return "yes" if low.startswith("yes") else "no" if low.startswith("no") else \
        "unknown" if low.startswith("i can't answer") else "other"


@pytest.mark.parametrize("city, question, want", [
    ("tokyo", "Is it a Japanese city?", "yes"), ("seoul", "Is it a North Korean city?", "no"),
    ("sydney", "Is it an Australian city?", "yes"), ("osaka", "Is it a Chinese city?", "no"),
    ("tokyo", "Has it hosted the Olympics?", "yes"), ("cairo", "Has it hosted the Olympics?", "no"),
    ("mexico city", "Is it high above sea level?", "yes"), ("amsterdam", "Is it high up in the mountains?", "no"),
    ("santiago", "Are there mountains nearby?", "yes"), ("jakarta", "Is it south of the equator?", "yes"),
    ("nairobi", "Is it near the equator?", "yes"), ("london", "Is it near the equator?", "no"),
    ("chicago", "Is it on a lake?", "yes"), ("paris", "Does a river run through it?", "yes"),
    ("london", "Can I pay with euros there?", "no"), ("berlin", "Do they use the euro?", "yes"),
    ("cairo", "Are most people there Muslim?", "yes"), ("toronto", "Is hockey popular?", "yes"),
    ("dubai", "Is it in a desert?", "yes"), ("london", "Is it in a desert?", "no"),
    ("bangkok", "Is it hot all year round?", "yes"), ("moscow", "Is it warm all year?", "no"),
    ("moscow", "Are the winters cold?", "yes"), ("rome", "Is it more than 2000 years old?", "yes"),
    ("paris", "Is there a famous tower?", "yes"), ("rome", "Is the Eiffel Tower there?", "no"),
    ("chicago", "Is it called the Windy City?", "yes"), ("tehran", "Is Farsi spoken there?", "yes"),
    ("rio de janeiro", "Is it a South American city?", "yes"), ("chicago", "Is it a South American city?", "no"),
    ("chicago", "Is it in the US?", "yes"), ("new york city", "Is it in the States?", "yes"),
    ("mumbai", "Does it have a monsoon season?", "yes"), ("dubai", "Is it hot?", "yes"),
    ("tokyo", "Is it the seat of the national government?", "yes"), ("cairo", "Is it near the pyramids?", "yes"),
    # near the sea: the coast, or an inland city's stored distance (<= 50 km yes, > 150 km no, between unknown)
    ("houston", "Is it near the Gulf of Mexico?", "yes"), ("houston", "Is it on the coast?", "no"),
    ("delhi", "Is it near the ocean?", "no"), ("madrid", "Is it far from the sea?", "yes"),
    ("london", "Is it near the sea?", "unknown"), ("tokyo", "Is it close to the sea?", "yes"),
    ("rome", "Is it near the Mediterranean?", "yes"), ("alexandria", "Is it on the Mediterranean?", "yes"),
    ("madrid", "Is it on the Mediterranean?", "no"), ("rome", "Does it have a Mediterranean climate?", "yes"),
    ("dallas", "Is it near the Pacific?", "no"), ("houston", "Next one: is it in the US?", "yes"),
    # states and provinces: its own is a yes, any other stored one a no (also for a city that is its own division)
    ("houston", "Is it in Texas?", "yes"), ("chicago", "Is it in Texas?", "no"), ("washington", "Is it in Texas?", "no"),
    ("san francisco", "Is it a Californian city?", "yes"), ("perth", "Is it in Western Australia?", "yes"),
    ("sydney", "Is it in Western Australia?", "no"), ("barcelona", "Is it in Catalonia?", "yes"),
    # a desert's short rainy season is not a lot of rain; "Chinese" as a predicate is the country, as spoken the
    # languages
    ("khartoum", "Does it get a lot of rain?", "no"), ("shenzhen", "Is your city Chinese?", "yes"),
    ("tokyo", "Is your city Chinese?", "no"), ("beijing", "Is Chinese spoken there?", "yes"),
    ("new york city", "Is English common there?", "yes"),
])
def test_yes_no_questions_about_stored_facts(oracle, city, question, want):
    reply = oracle.answer(city, question)
    assert kind(reply.text) == want, (city, question, reply.text)


@pytest.mark.parametrize("question", [
    "Is it in Ohio?", "Is it on an island?", "Do typhoons hit it?", "Is it a former British colony?",
    "Is it on the east coast?", "Do earthquakes happen there?", "Is it a tech startup paradise?",
])
def test_what_the_knowledge_base_does_not_hold_is_never_answered_yes_or_no(oracle, question):
    for city in KB.cities:
        reply = oracle.answer(city.name, question)
        assert kind(reply.text) == "unknown", (city.name, question, reply.text)


def test_short_lists_can_say_yes_but_never_no(oracle):
    """The knowledge base lists a few dishes and sports per city: one it does not list may still be popular."""
    assert kind(oracle.answer("tokyo", "Is sushi popular there?").text) == "yes"
    assert kind(oracle.answer("paris", "Is sushi popular there?").text) == "unknown"
    assert kind(oracle.answer("moscow", "Is cricket popular there?").text) == "unknown"
    assert kind(oracle.answer("mumbai", "Is cricket popular there?").text) == "yes"


def test_every_yes_no_answer_starts_with_yes_no_or_cant_answer(oracle):
    questions = ["Is it in Asia?", "Is it a capital?", "Is it on the coast?", "Does it snow?", "Is it hot in summer?",
                 "Do more than 5 million people live there?", "Is Spanish spoken?", "Is it famous for its food?",
                 "Is football popular?", "Does it have a famous bridge?", "Is it rainy?", "Is it an old city?"]
    for city in KB.cities[::7]:
        for question in questions:
            assert kind(oracle.answer(city.name, question).text) != "other", (city.name, question)
