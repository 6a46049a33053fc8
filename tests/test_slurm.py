"""Slurm: the topology and thread share read from Slurm's variables (fast tier, no cluster), and a real
one-node cluster (marker `slurm`, `make test-slurm`): a 2-task srun ZeRO-2 run, the Hydra
`launcher=slurm` multirun and `launchers.sweep --launcher slurm`, each through real sbatch/srun."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lmrl.dist import first_host, in_slurm_step, slurm_master, topology
from lmrl.threads import default_threads, local_processes, tasks_on_node
from tests.e2e import ROOT, cli_env

SRUN_TASK = {"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "SLURM_PROCID": "1", "SLURM_LOCALID": "1",
             "SLURM_NTASKS": "2", "SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_TASKS_PER_NODE": "2", "SLURM_NODEID": "0",
             "SLURM_JOB_NODELIST": "gpu[07-09,12]", "SLURM_STEP_NODELIST": "gpu[07-08]"}
LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "LOCAL_SIZE", "MASTER_ADDR", "MASTER_PORT",
               "OMP_NUM_THREADS", "SLURM_CPUS_PER_TASK")


@pytest.fixture
def slurm_env(monkeypatch):
    """This process as one task of a 2-task srun step (no torchrun variables, no thread setting)."""
    for key in LAUNCH_VARS:
        monkeypatch.delenv(key, raising=False)
    for key, value in SRUN_TASK.items():
        monkeypatch.setenv(key, value)
    return monkeypatch


@pytest.mark.parametrize("nodelist, host", [
    ("vm", "vm"), ("gpu[07-09,12]", "gpu07"), ("gpu[07-09,12],cpu01", "gpu07"), ("a1,b[2-3]", "a1"),
    ("rack[1-2]-n[01-04]", "rack1-n01"), ("node[003]", "node003"),
])
def test_first_host_of_a_slurm_node_list(nodelist, host):
    assert first_host(nodelist) == host


def test_an_srun_task_reads_its_rank_and_master_from_slurm(slurm_env):
    assert in_slurm_step() and topology() == (1, 2, 1)
    host, port = slurm_master()
    assert host == "gpu07" and 20000 <= port < 32000  # the step's first node; the same port on every task
    slurm_env.setenv("SLURM_STEP_ID", "1")
    assert slurm_master()[1] != port  # a second srun in the same job gets its own port
    slurm_env.setenv("WORLD_SIZE", "8")  # torchrun inside a Slurm job: torchrun's variables win
    assert topology()[1] == 8


def test_an_sbatch_script_is_one_process(slurm_env):
    """The batch script sees SLURM_PROCID=0 and the job's SLURM_NTASKS but is no step: no group to wait for."""
    slurm_env.delenv("SLURM_STEP_ID")
    slurm_env.delenv("SLURM_STEP_NUM_TASKS")
    slurm_env.setenv("SLURM_PROCID", "0")
    assert not in_slurm_step() and topology() == (0, 1, 0) and slurm_master() is None


def test_threads_are_the_task_share_of_its_cores(slurm_env):
    cores = len(os.sched_getaffinity(0))
    assert local_processes() == 2 and default_threads() == max(1, cores // 2)  # 2 tasks share the node
    slurm_env.setenv("SLURM_CPUS_PER_TASK", "1")
    assert local_processes() == 1 and default_threads() == 1  # --cpus-per-task is the task's own share
    slurm_env.setenv("OMP_NUM_THREADS", "3")
    assert default_threads() == 3  # a launcher's or the user's explicit setting wins
    assert tasks_on_node("2(x3),1", 3) == 1 and tasks_on_node("4(x2)", 1) == 4


@pytest.mark.parametrize("local, gpus, tasks", [
    ([], 1, 1),  # a GPU partition by default: one task per GPU
    (["+local.slurm.gpus_per_node=8"], 8, 8),
    (["+local.slurm.gpus_per_node=0", "+local.slurm.tasks_per_node=2"], 0, 2),  # a CPU-only partition
])
def test_launcher_slurm_tasks_follow_gpus_unless_set(local, gpus, tasks):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("train", overrides=["launcher=slurm", *local], return_hydra_config=True)
    assert (cfg.hydra.launcher.gpus_per_node, cfg.hydra.launcher.tasks_per_node) == (gpus, tasks)
    assert not any("OMP_NUM_THREADS" in line for line in cfg.hydra.launcher.setup)  # tasks size their own threads


# -- a real cluster ----------------------------------------------------------------------------------
SMALL = ["task=maze_fo", "algo=bc", "debug=smoke", "smoke.steps=4", "task.eval.max_starts=1"]


@pytest.fixture(scope="module")
def cluster():
    """The local one-node cluster (started here unless it already runs); skipped with the reason when it
    cannot start (not root, no apt-get, daemons that do not come up)."""
    from launchers import local_slurm

    env, message = local_slurm.up()
    print(message)
    if env is None:
        pytest.skip(f"no local Slurm cluster: {message}")
    yield env["SLURM_CONF"]
    if "already up" not in message:
        local_slurm.down()


def run(cmd: list[str], cache: Path, slurm_conf: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = cli_env(cache, SLURM_CONF=slurm_conf)
    for key in ("OMP_NUM_THREADS", "SLURM_CPUS_PER_TASK"):
        env.pop(key, None)  # each task sizes its own threads from what Slurm granted it
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(cmd)}:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    return proc


@pytest.mark.slurm
def test_srun_tasks_see_their_rank_master_and_threads(cluster, tmp_path):
    probe = ("import json, torch; from lmrl.dist import topology, slurm_master; from lmrl.threads import set_threads; "
             "print(json.dumps([topology(), slurm_master(), set_threads(), torch.get_num_threads()]))")
    two = run(["srun", "-n", "2", sys.executable, "-c", probe], tmp_path, cluster)
    rows = sorted(json.loads(line) for line in two.stdout.splitlines())
    assert [r[0] for r in rows] == [[0, 2, 0], [1, 2, 1]] and rows[0][1] == rows[1][1]
    assert all(r[2] == r[3] == 1 for r in rows)  # two tasks on 2 cores: one thread each
    one = run(["srun", "-n", "1", "-c", "2", sys.executable, "-c", probe], tmp_path, cluster)
    # One task granted both cores uses both: of the cores slurmd may use (it inherits this process's affinity, so a
    # shell pinned to one core, e.g. `taskset -c 0 bash .ci/run`, leaves the task one).
    assert json.loads(one.stdout)[2] == min(2, len(os.sched_getaffinity(0)))
    batch = tmp_path / "batch.out"  # the batch script itself (SLURM_NTASKS=2, no step) is one process
    run(["sbatch", "--wait", "-n", "2", "-o", str(batch), "--wrap", f"{sys.executable} -c '{probe}'"], tmp_path,
        cluster)
    assert json.loads(batch.read_text().strip().splitlines()[-1])[0] == [0, 1, 0]


@pytest.mark.slurm
def test_srun_two_tasks_zero2_smoke_writes_one_metrics(cluster, tmp_path):
    run_dir = tmp_path / "run"
    run(["srun", "-n", "2", sys.executable, "-m", "lmrl.train", "hardware=zero2", *SMALL, f"hydra.run.dir={run_dir}"],
        tmp_path, cluster)
    [metrics] = [json.loads(p.read_text()) for p in tmp_path.rglob("metrics.json")]
    assert metrics["world_size"] == 2 and metrics["hardware"] == "zero2" and metrics["episodes"] == 1


@pytest.mark.slurm
def test_hydra_launcher_slurm_multirun_finishes_its_jobs(cluster, tmp_path):
    sweep = tmp_path / "sweep"
    run([sys.executable, "-m", "lmrl.train", "--multirun", "launcher=slurm", *SMALL, "seed=0,1",
         "hydra.launcher.gpus_per_node=0", "hydra.launcher.tasks_per_node=1", "hydra.launcher.cpus_per_task=1",
         "hydra.launcher.mem_gb=1", f"hydra.sweep.dir={sweep}"], tmp_path, cluster)
    metrics = [json.loads(p.read_text()) for p in sorted(sweep.glob("*/metrics.json"))]
    assert [m["seed"] for m in metrics] == [0, 1] and all(m["episodes"] == 1 for m in metrics)
    scripts = list(sweep.glob(".submitit/*/*_submission.sh"))
    assert scripts and all("#SBATCH --cpus-per-task=1" in s.read_text() for s in scripts)  # real sbatch jobs


@pytest.mark.slurm
def test_sweep_slurm_launcher_finishes_a_two_cell_experiment(cluster, tmp_path):
    """A BC cell and the MC cell that starts from its stage: the MC job depends on the BC job (afterany), so it
    reuses the stage the BC run published instead of training it beside that run."""
    records = tmp_path / "records"
    # experiment=sweep_check: the two cells at smoke budgets (~1 min of training). table2_small's own FO maze cells
    # train 600 + 300 steps, which ran past this test's limit on a 2-core AVX2 machine.
    proc = run([sys.executable, "-m", "launchers.sweep", "experiment=sweep_check", f"records.dir={records}",
                "+sweep.slurm.gpus_per_node=0", "+sweep.slurm.cpus_per_task=1", "+sweep.slurm.mem_gb=1",
                "--launcher", "slurm", "--runs-dir", str(tmp_path / "runs")], tmp_path, cluster)
    assert "2 cells run, 0 failed" in proc.stdout
    cells = {c["algo"]: c for c in (json.loads(p.read_text()) for p in records.glob("maze_fo__*.json"))}
    assert set(cells) == {"bc", "mc"} and all(c["status"] == "ok" for c in cells.values())
    scripts = {p: p.read_text() for p in (records / "submitit").glob("*_submission.sh")}
    waiting = [p for p, text in scripts.items() if "--dependency=afterany:" in text]
    assert len(scripts) == 2 and len(waiting) == 1, scripts
    job = waiting[0].name.removesuffix("_submission.sh")
    mc_log = "".join(p.read_text() for p in (records / "submitit").glob(f"{job}_*log.*"))
    assert "task=maze_fo algo=mc" in mc_log and "reusing the cached BC stage" in mc_log, mc_log[-3000:]
