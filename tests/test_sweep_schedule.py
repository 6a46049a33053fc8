"""The local sweep's order: RL cells start after the BC cell that publishes their stage, and a free worker takes
a cell of a stage no running cell has before one that would wait on that stage's lock.  Fake cells (each `one`
sleeps and logs when it starts and ends): what is checked is the order the scheduler imposes, not any timing."""

from __future__ import annotations

import threading
import time

import pytest

from launchers.sweep import Cell, next_cell, run_cells


def cells(*specs: tuple[str, str, str | None]) -> tuple[list[Cell], dict]:
    """(task, algo, stage) triples -> cells of seed 0, and each one's stage by name."""
    todo = [Cell(task, algo, 0, []) for task, algo, _ in specs]
    return todo, {c.name: stage for c, (_, _, stage) in zip(todo, specs)}


def run(todo, stage, waits_for, workers: int, seconds: float = 0.05) -> list[tuple[str, str]]:
    events, lock = [], threading.Lock()

    def one(cell: Cell) -> Cell:
        with lock:
            events.append(("start", cell.name))
        time.sleep(seconds)
        with lock:
            events.append(("end", cell.name))
        return cell

    ended = []
    run_cells(todo, stage, waits_for, workers, one, lambda c: ended.append(c.name))
    assert sorted(ended) == sorted(c.name for c in todo)  # every cell ran once and was reported
    return events


def test_rl_cells_start_after_the_bc_cell_that_publishes_their_stage():
    todo, stage = cells(("maze", "bc", "s"), ("maze", "mc", "s"), ("maze", "ilql", "s"), ("nav", "bc", "t"),
                        ("maze", "prompt", None))
    waits_for = {"maze__mc__s0": "maze__bc__s0", "maze__ilql__s0": "maze__bc__s0"}
    events = run(todo, stage, waits_for, workers=2)
    bc_end = events.index(("end", "maze__bc__s0"))
    for name in waits_for:
        assert events.index(("start", name)) > bc_end, events
    assert [e for e in events[:2]] == [("start", "maze__bc__s0"), ("start", "nav__bc__s0")]  # a free worker: the next BC


def test_a_worker_prefers_a_stage_no_running_cell_has():
    """The BC cell is done already (not in the sweep): its RL cells wait for nobody, but a second one of the stage
    would only wait on the lock while the first trains it, so the other task's cell goes first."""
    todo, stage = cells(("maze", "mc", "s"), ("maze", "ilql", "s"), ("nav", "mc", "t"))
    events = run(todo, stage, {}, workers=2)
    assert set(events[:2]) == {("start", "maze__mc__s0"), ("start", "nav__mc__s0")}, events
    # with nothing else to run, a cell of a busy stage still starts (the stage may be cached: then it runs at once)
    todo, stage = cells(("maze", "mc", "s"), ("maze", "ilql", "s"))
    events = run(todo, stage, {}, workers=2)
    assert {e for e in events[:2]} == {("start", "maze__mc__s0"), ("start", "maze__ilql__s0")}, events


def test_next_cell_waits_while_every_pending_cell_waits():
    todo, stage = cells(("maze", "mc", "s"))
    assert next_cell(todo, stage, {"maze__mc__s0": "maze__bc__s0"}, set(), {"s"}) is None
    assert next_cell(todo, stage, {"maze__mc__s0": "maze__bc__s0"}, {"maze__bc__s0"}, set()) is todo[0]


def test_a_wait_for_a_cell_outside_the_sweep_is_an_error_not_a_hang():
    todo, stage = cells(("maze", "mc", "s"))
    with pytest.raises(RuntimeError, match="wait for cells"):
        run(todo, stage, {"maze__mc__s0": "maze__bc__s0"}, workers=1)


def test_a_failing_cell_stops_the_sweep_with_its_error():
    todo, stage = cells(("maze", "bc", "s"), ("maze", "mc", "s"))

    def one(cell: Cell) -> Cell:
        raise OSError(f"disk full in {cell.name}")

    with pytest.raises(OSError, match="disk full in maze__bc__s0"):
        run_cells(todo, stage, {"maze__mc__s0": "maze__bc__s0"}, 1, one, lambda c: None)


def test_a_cell_with_an_invalid_bc_config_shares_no_stage_and_fails_in_its_own_run():
    """The sweep plans its order before any cell runs; a BC config the trainer rejects (lr -1) must not stop it
    there: the cell runs alone and its run fails into its record (tests/test_results_table.py)."""
    from launchers.sweep import bc_stage_of, compose_cfg

    good = compose_cfg(["task=maze_fo", "algo=bc"])
    assert bc_stage_of(good) is not None
    assert bc_stage_of(compose_cfg(["task=maze_fo", "algo=bc", "algo.lr=-1"])) is None
    assert bc_stage_of(compose_cfg(["task=maze_fo", "algo=mc"])) == bc_stage_of(good)  # its default stage is BC's
    assert bc_stage_of(compose_cfg(["task=maze_fo", "algo=mc", "algo.init_from=/elsewhere"])) is None
    assert bc_stage_of(compose_cfg(["task=maze_fo", "algo=filtered_bc"])) is None  # trains, publishes nothing


def test_submitit_local_submits_a_waiting_cell_once_its_bc_job_has_ended(tmp_path, monkeypatch):
    """submitit's local executor has no job dependencies (the Slurm one is tested on a real cluster:
    tests/test_slurm.py): the launcher waits for the BC cell's job before it submits the MC cell's.  A recording
    stand-in for the executor; the order of calls is what is checked."""
    import submitit

    import launchers.sweep as sweep_mod
    from launchers.sweep import Sweep, compose_cfg

    calls = []

    class Job:
        def __init__(self, name):
            self.name, self.job_id = name, f"id-{name}"

        def wait(self):
            calls.append(("wait", self.name))

        def result(self):
            return ""

    class Executor:
        def __init__(self, folder, cluster):
            pass

        def update_parameters(self, **params):
            calls.append(("params", params.get("slurm_additional_parameters")))

        def batch(self):
            import contextlib
            return contextlib.nullcontext()

        def submit(self, fn):
            name = next(a for a in fn.command if a.startswith("algo=")).removeprefix("algo=")
            calls.append(("submit", name))
            return Job(name)

    monkeypatch.setattr(submitit, "AutoExecutor", Executor)
    monkeypatch.setattr(sweep_mod, "find_record", lambda records, digest: {"status": "ok"})
    cells = [Cell("maze_fo", algo, 0, ["task=maze_fo", f"algo={algo}"], digest=algo) for algo in ("mc", "bc")]
    sweep = Sweep("t", {}, tmp_path, cells=cells, configs={c.name: compose_cfg(c.overrides) for c in cells})
    sweep_mod.run_submitit(sweep, tmp_path / "runs", "local", timeout_min=1, wandb_group=None)
    events = [c for c in calls if c[0] != "params"]
    assert events == [("submit", "bc"), ("wait", "bc"), ("submit", "mc")], calls
    assert [c.status for c in cells] == ["ok", "ok"]
