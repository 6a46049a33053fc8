"""Chess and endgame dataset generators: deterministic, replayable, worker-independent, in the env's
text format; the endgame training starts avoid the evaluation set; the configs point at them."""

import re
from pathlib import Path

import chess
import pytest
from hydra import compose, initialize_config_dir

from data_gen import chess as chess_gen
from data_gen import endgames
from lmrl.data.jsonl import read_episodes
from lmrl.data.stats import dataset_stats
from lmrl.envs.base import Episode
from lmrl.envs.chess import (
    ChessEnv,
    eval_position_keys,
    find_stockfish,
    get_engine,
    load_eval_positions,
    position_key,
)
from tests.helpers import replay

try:
    find_stockfish()
except FileNotFoundError:
    pytest.skip("Stockfish not installed (`make install`)", allow_module_level=True)

CONF = Path(__file__).resolve().parents[2] / "conf"
SPACED_MOVE = re.compile(r"^(\S )*\S\n$")


@pytest.fixture(scope="module")
def endgame_data() -> list[Episode]:
    return list(endgames.generate(24, seed=5))


@pytest.fixture(scope="module")
def chess_data() -> list[Episode]:
    return list(chess_gen.generate(6, seed=1))


def test_chess_episodes_replay_exactly(chess_data):
    for episode in chess_data:
        assert episode.info["start_fen"] == chess.STARTING_FEN
        assert replay(ChessEnv(start="standard"), {"fen": episode.info["start_fen"]}, episode) == (episode.turns, episode.rewards)


def test_endgame_episodes_replay_exactly(endgame_data):
    for episode in endgame_data:
        assert replay(ChessEnv(start="endgame"), {"fen": episode.info["start_fen"]}, episode) == (episode.turns, episode.rewards)


def reply_leading_to(board: chess.Board, observation: str) -> chess.Move:
    """The opponent move that turns `board` into the position `observation` shows."""
    for move in board.legal_moves:
        board.push(move)
        hit = " ".join(board.fen()) + "\n" == observation
        board.pop()
        if hit:
            return move
    raise AssertionError(f"no reply leads to {observation!r}")


def test_text_format_and_rewards(chess_data, endgame_data):
    """Walk each episode on our own board: spaced canonical SAN actions, spaced FEN observations,
    -1 exactly for the texts python-chess rejects, +1 only for the agent's mate."""
    for episode in chess_data + endgame_data:
        assert episode.done and [t.is_action for t in episode.turns] == [k % 2 == 1 for k in range(len(episode.turns))]
        assert all(r == 0.0 for t, r in zip(episode.turns, episode.rewards) if not t.is_action)
        board = chess.Board(episode.info["start_fen"])
        for k in range(1, len(episode.turns), 2):
            obs, action, reward = episode.turns[k - 1].text, episode.turns[k].text, episode.rewards[k]
            assert obs == " ".join(board.fen()) + "\n" and SPACED_MOVE.match(action), repr(action)
            san = action.replace(" ", "").strip()
            try:
                move = board.parse_san(san)
            except ValueError:
                assert reward == -1.0 and episode.turns[k + 1].text == obs
                continue
            assert board.san(move) == san  # canonical SAN, as env.legal_actions() writes it
            board.push(move)
            if board.is_game_over():
                assert reward == (1.0 if board.is_checkmate() else 0.0) and k == len(episode.turns) - 2
            else:
                board.push(reply_leading_to(board, episode.turns[k + 1].text))
                assert reward == (-1.0 if board.is_checkmate() else 0.0)
        assert episode.success == (episode.rewards[-2] == 1.0 and board.is_checkmate())


def test_deterministic_prefix_stable_and_seeded(endgame_data):
    again = list(endgames.generate(24, seed=5))
    assert again == endgame_data
    assert list(endgames.generate(6, seed=5)) == endgame_data[:6]
    assert list(endgames.generate(6, seed=6)) != endgame_data[:6]


def test_workers_give_the_same_dataset(endgame_data):
    assert list(endgames.generate(24, seed=5, workers=2)) == endgame_data


def test_chess_workers_and_determinism(chess_data):
    assert list(chess_gen.generate(6, seed=1, workers=2)) == chess_data


def test_agents_of_several_strengths(endgame_data, chess_data):
    for data in (endgame_data, chess_data):
        labels = {ep.info["agent"] for ep in data}
        assert labels <= {"strong", "weak"}
        assert all(ep.info["nodes"] >= 20 and 0 <= ep.info["random_move"] <= 1 for ep in data)
    assert len({ep.info["agent"] for ep in endgame_data}) == 2


def test_illegal_text_is_penalized_and_repeats_the_position():
    data = list(endgames.generate(4, seed=0, illegal_frac=1.0, illegal_max=0.5))
    seen = 0
    for ep in data:
        for k in range(1, len(ep.turns) - 1, 2):
            if ep.rewards[k] == -1.0 and ep.turns[k + 1].text == ep.turns[k - 1].text:
                seen += 1
    assert seen >= 3


def test_endgame_training_starts_avoid_the_eval_set():
    keys = eval_position_keys()
    starts = endgames.training_positions(3000, seed=0)
    assert not {position_key(chess.Board(f)) for f in starts} & keys
    assert all(sorted(p.symbol() for p in chess.Board(f).piece_map().values()) == ["K", "Q", "k"] for f in starts)
    episodes = list(endgames.generate(3, seed=0))
    assert [ep.info["start_fen"] for ep in episodes] == starts[:3]


def test_bad_parameters_fail_before_iteration():
    with pytest.raises(TypeError, match="strong_frac"):
        chess_gen.generate(1, noise=0.3)
    with pytest.raises(ValueError, match="probabilities"):
        endgames.generate(1, strong_frac=1.5)
    with pytest.raises(ValueError, match="nodes"):
        chess_gen.generate(1, strong_nodes_low=3000, strong_nodes_high=10)
    with pytest.raises(ValueError, match="workers"):
        endgames.generate(1, workers=0)
    with pytest.raises(ValueError, match="depth"):
        chess_gen.generate(1, opponent={"limit": {"mate": 2}})


def test_eval_set_builder_reproduces_the_committed_file():
    engine_name = get_engine(None, endgames.EVAL_ENGINE_OPTIONS, slot="analysis").id["name"]
    if engine_name != "Stockfish 15.1":
        pytest.skip(f"the committed set was built with Stockfish 15.1, not {engine_name}")
    fens, examined = endgames.build_eval_set(4, seed=0)
    assert fens == list(load_eval_positions()[:4]) and examined >= 4
    for fen in fens:
        assert endgames.is_tricky(chess.Board(fen))


def test_endgames_cli_writes_jsonl(tmp_path, capsys):
    out = tmp_path / "endgames.jsonl"
    endgames.main(["--episodes", "3", "--seed", "2", "--out", str(out)])
    assert read_episodes(out) == list(endgames.generate(3, seed=2))
    printed = capsys.readouterr().out
    assert "avg_return" in printed and "0.586" in printed


def test_chess_cli_writes_jsonl(tmp_path, capsys, chess_data):
    out = tmp_path / "chess.jsonl"
    chess_gen.main(["--episodes", "2", "--seed", "1", "--out", str(out)])
    assert read_episodes(out) == chess_data[:2]
    printed = capsys.readouterr().out
    assert "avg_return" in printed and "625000" in printed


@pytest.mark.parametrize("task, target", [("chess", "data_gen.chess.generate"), ("endgames", "data_gen.endgames.generate")])
def test_config_recipe_uses_the_env_opponent(task, target):
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        cfg = compose("train", overrides=[f"task={task}", "debug=smoke"])
    recipe = cfg.task.data.recipe
    assert recipe._target_ == target and recipe.episodes == 200 and recipe.workers == 2
    assert recipe.opponent == cfg.task.env.opponent and cfg.task.env.opponent.limit == {"depth": 1}
    assert cfg.task.history_window == 1 and cfg.task.eval.max_new_tokens >= 10


@pytest.mark.slow
@pytest.mark.parametrize(
    "module, n, success, avg_return",
    [(chess_gen, 400, 0.60, 0.21), (endgames, 600, 0.59, 0.586)],
)
def test_dataset_matches_table_1(module, n, success, avg_return):
    stats = dataset_stats(module.generate(n, seed=0, workers=2))
    assert abs(stats["success_rate"] - success) <= 0.06
    assert abs(stats["avg_return"] - avg_return) <= 0.12


def test_endgame_attempts_per_task_start_from_one_position():
    """SWEET-RL's recipe: each run of k consecutive games starts from one position."""
    starts = [ep.info["start_fen"] for ep in endgames.generate(4, seed=5, attempts_per_task=2)]
    assert starts[0] == starts[1] != starts[2] == starts[3]
    with pytest.raises(ValueError, match="attempts_per_task"):
        endgames.generate(4, attempts_per_task=1.5)
