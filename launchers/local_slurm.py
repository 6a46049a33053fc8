"""A one-node Slurm cluster on this machine: what `make test-slurm` runs the Slurm launchers against.

    python -m launchers.local_slurm up       # install (Debian, root) and start; prints `export SLURM_CONF=...`
    python -m launchers.local_slurm status
    python -m launchers.local_slurm down     # stop the daemons this module started

Debian's `slurmctld`, `slurmd`, `slurm-client` and `munge`, all as root, one node named after
this host with all its cores, one partition `debug`.  No cgroups (`proctrack/linuxproc`,
`task/none`) and no accounting database (submitit then reads a job's end from its result file).
Its files, state and logs live in `LMRL_SLURM_DIR` (default /tmp/lmrl-slurm), its daemons listen on
ports 16817/16818, so a site's real Slurm is never touched: a command reaches this cluster only
with `SLURM_CONF=<dir>/slurm.conf`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
BINARIES = ("/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged", "sbatch", "srun", "sinfo")
PORTS = (16817, 16818)


def state_dir() -> Path:
    return Path(os.environ.get("LMRL_SLURM_DIR", "/tmp/lmrl-slurm"))


def conf_path(directory: Path | None = None) -> Path:
    return (directory or state_dir()) / "slurm.conf"


def missing_binaries() -> list[str]:
    return [b for b in BINARIES if shutil.which(b) is None]


def install() -> str | None:
    """Install the Debian packages when something is missing; the reason when that cannot be done."""
    if not missing_binaries():
        return None
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        missing = ", ".join(missing_binaries())
        return f"Slurm is not installed ({missing} missing) and installing it needs root and apt-get"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *PACKAGES]):
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            return f"{' '.join(cmd)} failed: {proc.stderr.strip()[-300:]}"
    return None if not missing_binaries() else f"still missing after apt-get: {', '.join(missing_binaries())}"


def memory_mb() -> int:
    """What the node offers jobs: 90% of the machine's memory."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 9 // 10 // 1024
    return 1024


def write_config(directory: Path) -> Path:
    host, cpus = socket.gethostname(), os.cpu_count() or 1
    for sub in ("state", "spool", "log"):
        (directory / sub).mkdir(parents=True, exist_ok=True)
    lines = [
        "ClusterName=lmrl",
        f"SlurmctldHost={host}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        f"SlurmctldPort={PORTS[0]}",
        f"SlurmdPort={PORTS[1]}",
        f"StateSaveLocation={directory / 'state'}",
        f"SlurmdSpoolDir={directory / 'spool'}",
        f"SlurmctldPidFile={directory / 'slurmctld.pid'}",
        f"SlurmdPidFile={directory / 'slurmd.pid'}",
        f"SlurmctldLogFile={directory / 'log' / 'slurmctld.log'}",
        f"SlurmdLogFile={directory / 'log' / 'slurmd.log'}",
        # no cgroups: jobs are plain process trees (what works in a container)
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "SchedulerType=sched/backfill",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "MpiDefault=none",
        "ReturnToService=2",
        f"NodeName={host} CPUs={cpus} RealMemory={memory_mb()} State=UNKNOWN",
        "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
    ]
    path = conf_path(directory)
    path.write_text("\n".join(lines) + "\n")
    return path


def alive(pid_file: Path) -> int | None:
    """The pid in `pid_file` when that process runs and is the daemon the file is named after."""
    try:
        pid = int(pid_file.read_text().strip())
        stat = Path(f"/proc/{pid}/stat").read_text()  # "pid (name) state ..."
        name, state = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 1:].split()[0]
    except (OSError, ValueError, IndexError):
        return None
    return pid if name == pid_file.stem and state != "Z" else None  # not a zombie, not a reused pid


def munge_works() -> bool:
    try:
        token = subprocess.run(["munge", "-n"], capture_output=True, timeout=10)
        return token.returncode == 0 and subprocess.run(["unmunge"], input=token.stdout, capture_output=True,
                                                        timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def start_munge(directory: Path) -> str | None:
    """munged as the `munge` user (it refuses root), unless one already answers."""
    if munge_works():
        return None
    run_dir = Path("/run/munge")
    run_dir.mkdir(parents=True, exist_ok=True)
    shutil.chown(run_dir, "munge", "munge")
    if not Path("/etc/munge/munge.key").exists():
        subprocess.run(["runuser", "-u", "munge", "--", "mungekey", "--create"], capture_output=True)
    proc = subprocess.run(["runuser", "-u", "munge", "--", "/usr/sbin/munged"], capture_output=True, text=True)
    (directory / "munged.started").write_text("1")
    for _ in range(50):
        if munge_works():
            return None
        time.sleep(0.1)
    return f"munged did not start: {proc.stderr.strip()[-300:]}"


def node_state(env: dict) -> str:
    proc = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True, timeout=20)
    return proc.stdout.strip() if proc.returncode == 0 else ""


def slurm_env(directory: Path | None = None) -> dict:
    """This process's environment pointed at the local cluster."""
    return dict(os.environ, SLURM_CONF=str(conf_path(directory)))


def up(timeout: float = 60.0) -> tuple[dict | None, str]:
    """Start the cluster (or find it running): (environment with SLURM_CONF, a line saying what happened);
    (None, the reason) when it cannot start."""
    directory = state_dir()
    reason = install()
    if reason:
        return None, reason
    if os.geteuid() != 0:
        return None, "the local Slurm cluster runs its daemons as root"
    directory.mkdir(parents=True, exist_ok=True)
    env = slurm_env(directory)
    if alive(directory / "slurmctld.pid") and alive(directory / "slurmd.pid") and node_state(env) == "idle":
        return env, f"Slurm already up (SLURM_CONF={conf_path(directory)})"
    down()
    shutil.rmtree(directory / "state", ignore_errors=True)  # a fresh controller: job ids start at 1
    write_config(directory)
    start = time.perf_counter()
    reason = start_munge(directory)
    if reason:
        return None, reason
    for daemon in ("slurmctld", "slurmd"):
        proc = subprocess.run([f"/usr/sbin/{daemon}", "-f", str(conf_path(directory))], env=env, capture_output=True,
                              text=True)
        if proc.returncode != 0:
            return None, f"{daemon} did not start: {proc.stderr.strip()[-300:]}"
    state = ""
    while time.perf_counter() - start < timeout:
        state = node_state(env)
        if state == "idle":
            return env, f"Slurm up in {time.perf_counter() - start:.1f} s (SLURM_CONF={conf_path(directory)})"
        time.sleep(0.5)
    log = (directory / "log" / "slurmd.log")
    tail = log.read_text(errors="replace").strip().splitlines()[-3:] if log.exists() else []
    return None, f"the node did not become idle in {timeout:.0f} s (state {state!r}): {' | '.join(tail)}"


def down() -> None:
    """Stop the daemons started from this directory (by their pid files), and munged if `up` started it."""
    directory = state_dir()
    pid_files = [directory / "slurmd.pid", directory / "slurmctld.pid"]
    if (directory / "munged.started").exists():
        pid_files.append(Path("/run/munge/munged.pid"))
        (directory / "munged.started").unlink()
    for pid_file in pid_files:
        pid = alive(pid_file)
        if pid is None:
            continue
        os.kill(pid, signal.SIGTERM)
        for _ in range(100):
            if alive(pid_file) != pid:
                break
            time.sleep(0.1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["up", "down", "status"])
    args = parser.parse_args(argv)
    if args.action == "down":
        down()
        return 0
    if args.action == "status":
        state = node_state(slurm_env()) if conf_path().exists() and not missing_binaries() else ""
        print(f"node {state}" if state else "not running")
        return 0 if state else 1
    env, message = up()
    print(message)
    if env is not None:
        print(f"export SLURM_CONF={env['SLURM_CONF']}")
    return 0 if env is not None else 1


if __name__ == "__main__":
    sys.exit(main())
