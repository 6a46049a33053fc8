"""The regression gate: re-run a few cheap cells from a clean tree and compare them with committed expectations.

    make reproduce-check            # = python -m launchers.reproduce_check
    make reproduce-check UPDATE=1   # rewrite this machine kind's expectations (commit the diff it shows)

The cells are `conf/experiment/reproduce_check.yaml`'s (FO maze BC, filtered BC and MC at small budgets, fp32),
run by the sweep into a fresh records directory and cache (no cached stage or dataset from another tree is
reused).  `results/reproduce_check.json` holds, per machine kind (CPU model and the kernels torch dispatches to,
or the GPU; torch's version; threads; precision), what each cell measured and the commit that measured it:

- on a kind it has, every measure must be bit-exact and every cell's config hash the same: any change to what the
  code computes for these cells fails the gate, until `UPDATE=1` records the new values (a commit shows the diff);
- on another kind, each cell's normalized score must lie within `tolerance` of every stored kind's: three
  standard errors of the difference of two independent evaluations of that cell (floating-point sums in another
  order change which episodes are sampled, not what the policy learnt).

Exit status 0: the gate holds; 1: it does not (the table says which cell and measure); 2: no expectations yet.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXPECTATIONS = ROOT / "results" / "reproduce_check.json"
EXPERIMENT = "reproduce_check"
# The measures compared, per cell.
MEASURES = ("normalized_score", "return_mean", "return_stderr", "success_rate", "invalid_rate", "episodes")
# Across machine kinds, a cell's normalized score may differ by this many standard errors of the difference of two
# independent evaluations (sqrt(2) x the cell's own standard error), and at least TOLERANCE_FLOOR points.  The same
# code with torch's AVX2 kernels instead of AVX-512 (ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2, one thread,
# 2026-12-06) gave BC and filtered BC bit-identical and moved MC by 1.4 points, against tolerances of ~20.
TOLERANCE_SES = 3.0
TOLERANCE_FLOOR = 2.0


def machine_kind(threads: int) -> dict:
    """What makes two runs of the same code bit-identical: the device (CPU model and the kernel level torch
    dispatches to, or the GPU), torch's version, the thread count and the precision (pinned to fp32 by the
    experiment)."""
    import torch

    from lmrl.records import machine

    found = machine()
    device = found["gpu"] or f"{found['cpu_model']} ({torch.backends.cpu.get_cpu_capability()})"
    return {"device": device, "torch": found["torch"], "threads": threads, "precision": "fp32"}


def kind_key(kind: dict) -> str:
    return f"{kind['device']} | torch {kind['torch']} | {kind['threads']} threads | {kind['precision']}"


def run_cells(workdir: Path, extra: list[str]) -> list[dict]:
    """The experiment's cells, run by the sweep into `workdir` (records and cache); their records."""
    from launchers import sweep
    from lmrl.records import load_records

    records = workdir / "records"
    code = sweep.main([f"experiment={EXPERIMENT}", f"records.dir={records}", f"cache_dir={workdir / 'cache'}",
                       *extra, "--runs-dir", str(workdir / "runs")])
    found = [r for r in load_records(records) if r.get("status") == "ok"] if records.is_dir() else []
    if code != 0 or not found:
        logs = sorted((records / "logs").glob("*.log")) if records.is_dir() else []
        raise SystemExit(f"reproduce-check: the cells did not all run (sweep exit {code}); logs: "
                         + ", ".join(map(str, logs)))
    return found


def observed(records: list[dict]) -> dict:
    """{cell name: its measures and config hash} from the runs' records."""
    return {f"{r['task']}/{r['algo']}/s{r['seed']}": {"config_hash": r["config_hash"],
                                                       **{k: r.get(k) for k in MEASURES}} for r in records}


def tolerance(cell: dict, task: str) -> float:
    """How far another machine kind's normalized score of `cell` may lie from it (`TOLERANCE_SES`)."""
    from lmrl.report import normalized_se

    se = normalized_se({"task": task, **cell}, "return_stderr", "return_mean")
    return max(TOLERANCE_FLOOR, TOLERANCE_SES * math.sqrt(2) * se) if math.isfinite(se) else TOLERANCE_FLOOR


def compare(expected: dict, got: dict, key: str) -> tuple[bool, list[str]]:
    """(holds, report lines): bit-exact against `key`'s entry when the file has it, else within `tolerance` of
    each stored kind."""
    kinds = expected.get("kinds") or {}
    lines, ok = [], True
    if key in kinds:
        want = kinds[key]["cells"]
        lines.append(f"machine kind: {key} (expectations from {kinds[key].get('commit', '?')[:12]}): bit-exact")
        for cell in sorted(set(want) | set(got)):
            if cell not in got or cell not in want:
                ok = False
                lines.append(f"  {cell}: {'missing from this run' if cell not in got else 'not in the expectations'}")
                continue
            for measure in ("config_hash", *MEASURES):
                a, b = want[cell].get(measure), got[cell].get(measure)
                if a != b:
                    ok = False
                    lines.append(f"  {cell} {measure}: expected {a!r}, got {b!r}")
            if all(want[cell].get(m) == got[cell].get(m) for m in ("config_hash", *MEASURES)):
                lines.append(f"  {cell}: identical (normalized {got[cell]['normalized_score']:.4f})")
        return ok, lines
    if not kinds:
        return False, ["no expectations yet: run `make reproduce-check UPDATE=1` and commit results/reproduce_check.json"]
    lines.append(f"machine kind: {key}: not in the expectations (kinds: {'; '.join(kinds)}); normalized scores "
                 f"within {TOLERANCE_SES:g} standard errors of each kind's")
    for name, entry in kinds.items():
        for cell in sorted(entry["cells"]):
            if cell not in got:
                ok = False
                lines.append(f"  {cell}: missing from this run")
                continue
            diff = got[cell]["normalized_score"] - entry["cells"][cell]["normalized_score"]
            allowed = tolerance(entry["cells"][cell], cell.split("/")[0])
            good = abs(diff) <= allowed
            ok &= good
            lines.append(f"  {cell} vs {name}: {got[cell]['normalized_score']:.2f} vs "
                         f"{entry['cells'][cell]['normalized_score']:.2f} ({diff:+.2f}, allowed ±{allowed:.1f}) "
                         + ("ok" if good else "OUT OF TOLERANCE"))
    return ok, lines


def update(expected: dict, got: dict, kind: dict, commit: str | None) -> dict:
    """The expectations with this kind's entry replaced by this run's values."""
    kinds = dict(expected.get("kinds") or {})
    kinds[kind_key(kind)] = {"machine": kind, "commit": commit, "cells": got}
    return {**expected, "kinds": dict(sorted(kinds.items()))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--update", action="store_true", help="rewrite this machine kind's expectations")
    parser.add_argument("--expectations", type=Path, default=EXPECTATIONS)
    parser.add_argument("--keep", action="store_true", help="keep the runs' directory (printed)")
    parser.add_argument("overrides", nargs="*", help="extra overrides for the cells, e.g. records.allow_dirty=true")
    args = parser.parse_args(argv)

    from lmrl.records import git_state
    from lmrl.threads import worker_threads

    expected = json.loads(args.expectations.read_text()) if args.expectations.exists() else {}
    (ROOT / "outputs").mkdir(exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="reproduce_check_", dir=ROOT / "outputs"))
    try:
        got = observed(run_cells(workdir, args.overrides))
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    kind = machine_kind(worker_threads(1))
    key = kind_key(kind)
    if args.update:
        state = git_state()
        if state["git_dirty"]:
            print("reproduce-check: expectations come from a clean tree only (commit first)", file=sys.stderr)
            return 1
        args.expectations.write_text(json.dumps(update(expected, got, kind, state["git_commit"]), indent=2) + "\n")
        print(f"wrote {args.expectations} for {key}: commit it (git diff shows what changed)")
        return 0
    ok, lines = compare(expected, got, key)
    print("\n".join(lines))
    if not expected.get("kinds"):
        return 2
    print("reproduce-check: " + ("the gate holds" if ok else
                                 "FAILED: these cells no longer compute what they did. If the change is intended, "
                                 "run `make reproduce-check UPDATE=1` and commit results/reproduce_check.json"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
