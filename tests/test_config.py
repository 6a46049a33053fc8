"""Every (task, algo) pair composes and validates; bad names fail at compose time listing options."""

import itertools
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import MissingConfigException
from hydra.utils import get_class

from lmrl.algos.base import ConfigError, build_trainer, typed_config

CONF = Path(__file__).resolve().parents[1] / "conf"


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def compose_train(*overrides):
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        return compose("train", overrides=list(overrides))


@pytest.mark.parametrize("task, algo", list(itertools.product(options("task"), options("algo"))))
@pytest.mark.parametrize("debug", [None, "smoke"])
def test_every_pair_composes_and_validates(task, algo, debug):
    cfg = compose_train(f"task={task}", f"algo={algo}", *([f"debug={debug}"] if debug else []))
    assert cfg.task.name == task and cfg.algo.name == algo
    cls = get_class(cfg.algo._target_)
    typed = typed_config(cls.config_class, cfg.algo)
    assert typed.name == algo
    for key in ("min", "avg", "max"):
        assert key in cfg.task.normalization


@pytest.mark.parametrize("model", options("model"))
def test_models_and_hardware_compose(model):
    for hw in options("hardware"):
        cfg = compose_train(f"model={model}", f"hardware={hw}")
        assert cfg.model._target_.startswith("lmrl.models.") and cfg.hardware.engine._target_


@pytest.mark.parametrize("group", ["task", "algo", "model", "hardware", "logger", "debug", "oracle"])
def test_unknown_group_value_lists_valid_options(group):
    with pytest.raises(MissingConfigException) as err:
        compose_train(f"{group}=no_such_option")
    message = str(err.value)
    assert f"Available options in '{group}'" in message
    for opt in options(group):
        assert opt in message


def test_oracle_group_sets_the_dialogue_env_oracle(tmp_path):
    from lmrl.task import Task

    assert "oracle" not in compose_train("task=twenty_questions").task.env
    cfg = compose_train("task=twenty_questions", "oracle=lm", "task.env.oracle.model=/some/dir")
    assert cfg.task.env.oracle.kind == "lm" and cfg.task.env.oracle.model == "/some/dir"
    assert compose_train("task=twenty_questions", "oracle=smollm2").task.env.oracle.model == "smollm2"
    assert compose_train("task=twenty_questions", "oracle=kb").task.env.oracle == "kb"
    # the car dealer's buyer is replaced the same way
    assert Task(compose_train("task=car_dealer", "oracle=kb").task, tmp_path).make_env().lm is None
    assert compose_train("task=car_dealer", "oracle=smollm2").task.env.oracle.model == "smollm2"
    with pytest.raises(ValueError, match="task 'maze_fo' has no oracle to replace.*twenty_questions"):
        Task(compose_train("task=maze_fo", "oracle=kb").task, tmp_path).make_env()


def test_moves_per_sequence_only_for_windowed_tasks(tmp_path):
    from lmrl.task import Task

    assert Task(compose_train("task=maze_po", "task.moves_per_sequence=5").task, tmp_path).moves_per_sequence == 5
    # one move a sequence by default (BC); PO maze's value methods train ten (task_algo/maze_po_{mc,ilql}.yaml)
    assert Task(compose_train("task=maze_po", "algo=bc").task, tmp_path).moves_per_sequence == 1
    for algo in ("mc", "ilql"):
        assert Task(compose_train("task=maze_po", f"algo={algo}").task, tmp_path).moves_per_sequence == 10
    with pytest.raises(ValueError, match="task 'wordle': moves_per_sequence must be 1.*history_window=None"):
        Task(compose_train("task=wordle", "+task.moves_per_sequence=3").task, tmp_path)
    with pytest.raises(ValueError, match="moves_per_sequence must be 1"):
        Task(compose_train("task=maze_po", "task.moves_per_sequence=0").task, tmp_path)


def test_bad_algo_value_fails_before_training():
    cfg = compose_train("algo=filtered_bc", "algo.top_fraction=2.0")
    with pytest.raises(ConfigError, match="top_fraction"):
        build_trainer(cfg.algo, task=None, engine=None, model=None, tokenizer=None, logger=None)


def test_evaluate_config_composes():
    with initialize_config_dir(version_base="1.3", config_dir=str(CONF)):
        cfg = compose("evaluate", overrides=["checkpoint=/tmp/x", "task=maze_po"])
    assert cfg.task.history_window == 40


def test_the_local_rank_argument_launchers_append_is_dropped_before_hydra():
    """DeepSpeed's runner (without --no_local_rank) appends `--local_rank=N`; Hydra would stop on it."""
    import subprocess
    import sys

    from lmrl.train import drop_local_rank
    assert drop_local_rank(["train", "--local_rank=3", "task=maze_po"]) == ["train", "task=maze_po"]
    assert drop_local_rank(["train", "--local_rank", "0", "algo=bc"]) == ["train", "algo=bc"]
    assert drop_local_rank(["train", "task=maze_fo"]) == ["train", "task=maze_fo"]
    out = subprocess.run([sys.executable, "-m", "lmrl.train", "--local_rank=0", "task=maze_po", "--cfg", "job"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "maze_po" in out.stdout
