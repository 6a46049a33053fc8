"""The dialogue tasks and what their other party is made of.

Envs: twenty_questions.py (20 Questions), guess_city.py (Guess My City), car_dealer.py (Car Dealer),
with question_game.py (the rules 20Q and Guess My City share).  Knowledge: knowledge.py (20Q's objects),
cities.py, car_catalogue.py (catalogue, seller-line parser).  Oracle machinery: the 20Q parser, facts, rules
and sizes (twenty_questions_*.py), Guess My City's question and answer modules, words.py (stemming, content
words), encoder.py (MiniLM phrasing matcher), lm_oracle.py (`oracle=lm`), oracle_eval.py (held-out scoring).
The data files stay in `lmrl/envs/data/`.
"""
