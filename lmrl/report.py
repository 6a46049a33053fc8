"""A directory of evaluation records -> the results table (CSV, Markdown, LaTeX) and a figure.

    python -m lmrl.report results/records/table2_small --name table2_small      # results/table2_small.*
    python -m lmrl.report <records dir> --name mine --out /tmp --wandb          # also a W&B artifact

Rows are task variants, columns algorithms; a cell is the mean normalized score over seeds ±
its standard error (sample std / sqrt(seeds); one seed: no error), with the paper's Table 2
number beside it.  A cell with no score says why: the run failed (with the error), or the
sweep has not run it yet.  When the directory holds a sweep's `plan.json`, only records of
the planned configs count (older budgets' records are ignored); otherwise the newest record
of each (task, algo, seed) does.  Cells the experiment marks stale (`sweep.stale`: records
that predate a change their config hash cannot see, such as a data file) keep their values
and say `[stale: <reason>]`.

Each cell also says where its records came from and whether its score can be read on the paper's
scale, as compact marks after the value (`MARKS`, explained under the table): `d` a seed ran from a
dirty tree, `c`/`p`/`m` its seeds mix commits, precisions or machines, `?` a seed does not record
its precision or machine, `<0` the score is below the task's anchor minimum (`ANCHORS`), `<start` it
ended more than two standard errors below the policy it started from.  The tidy CSV carries every
field; `<name>_measures.md` lists per cell the raw return ± stderr, success and invalid-turn rate,
the start's score and the provenance.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
from collections import Counter
from pathlib import Path

import pandas as pd
from omegaconf import OmegaConf

from lmrl import findings
from lmrl.records import is_dirty, load_records, skip_reason

ROOT = Path(__file__).resolve().parent.parent
EXPERIMENTS = ROOT / "conf" / "experiment"
PAPER_TABLE2 = ROOT / "results" / "paper_table2.csv"
TASKS = ["twenty_questions", "guess", "car_dealer", "maze_fo", "maze_po", "text_nav_fo", "text_nav_po", "wordle",
         "chess", "endgames"]
ALGOS = ["bc", "filtered_bc", "mc", "ilql", "ppo", "online_filtered_bc", "sweet", "group_pg", "archer", "prompt"]
ALGO_TITLES = {"bc": "BC", "filtered_bc": "%BC", "mc": "MC Return", "ilql": "ILQL", "ppo": "PPO",
               "online_filtered_bc": "Online %BC", "sweet": "SWEET-RL", "group_pg": "Group PG", "archer": "ArCHer",
               "prompt": "Prompted LM"}
TASK_CONF = ROOT / "conf" / "task"
# Where a task's anchor minimum (its normalization's `min`, the paper's for comparability) is not the worst
# return its rules allow: (the true minimum, why).  tests/test_results_table.py plays the all-invalid policy
# through each env to check the value.
TRUE_MINIMUM = {
    "maze_fo": (-401.0, "an invalid action costs -4 and does not end the episode: 100 of them, then -1"),
    "maze_po": (-401.0, "an invalid action costs -4 and does not end the episode: 100 of them, then -1"),
    "endgames": (-401.0, "an illegal move costs -1 and does not end the game, for up to 400 moves, then -1"),
}
# The marks after a cell's value, in this order, with what each means (the table's legend).
MARKS = {
    "d": "a seed ran from a tree with uncommitted changes (`+dirty`)",
    "c": "its seeds ran on different commits",
    "p": "its seeds trained in different precisions",
    "m": "its seeds ran on different machines (CPU model and bf16, or GPU)",
    "?": "a seed does not record its precision or machine (a record from before those fields)",
    "<0": "the score is below 0, the task's anchor minimum (see Anchors): not on the paper's scale",
    ">100": "the score is above 100, the task's anchor maximum",
    "<start": "ended more than two standard errors below the policy it started from (it unlearnt its start)",
}


def read_paper(path: Path = PAPER_TABLE2) -> pd.DataFrame:
    """The paper's Table 2, indexed by our task names, columns = our algorithm names (+ paper_task)."""
    return pd.read_csv(path, comment="#").set_index("task")


def read_plan(directory: Path) -> dict | None:
    path = directory / "plan.json"
    return json.loads(path.read_text()) if path.exists() else None


def stale_marks(plan: dict | None, experiments: Path = EXPERIMENTS) -> dict:
    """The experiment's `sweep.stale`: `{task: reason}` or `{task: {algo: reason}}`.  Marks are added after the
    runs, so the experiment's config as it is now wins over the copy in the plan (used when there is no config)."""
    if plan is None:
        return {}
    path = experiments / f"{plan.get('experiment')}.yaml"
    if path.exists():
        stale = OmegaConf.select(OmegaConf.load(path), "sweep.stale")
        return OmegaConf.to_container(stale) if stale is not None else {}
    return plan["spec"].get("stale") or {}


def stale_reason(stale: dict, task: str, algo: str) -> str:
    """Why the (task, algo) cell's records are stale, or "" when they are not."""
    mark = stale.get(task) or ""
    return str(mark.get(algo) or "") if isinstance(mark, dict) else str(mark)


OLDER_CONFIG = "older configuration, not re-run yet"


def select_records(records: list[dict], plan: dict | None) -> pd.DataFrame:
    """One row per (task, algo, seed): the planned config's record if there is a plan, else the newest;
    a successful record wins over a failed one of the same config.  A planned (task, algo) cell with no record of
    its planned configs keeps its newest older-config records, flagged `older` (the table marks them stale), so a
    table whose plan changed shows what was measured until the cell re-runs; older records never mix into a cell
    that has a planned one."""
    df = pd.DataFrame(records)
    if df.empty:
        return pd.DataFrame(columns=["task", "algo", "seed", "status", "config_hash", "normalized_score", "older"])
    df = df.assign(older=False)
    if plan is not None:
        planned = {c["digest"] for c in plan["cells"]}
        current = df["config_hash"].isin(planned)
        cells = {(c["task"], c["algo"]) for c in plan["cells"]}
        have = set(zip(df.loc[current, "task"], df.loc[current, "algo"]))
        keep = [(t, a) in cells and (t, a) not in have for t, a in zip(df["task"], df["algo"])]
        df = df[current | pd.Series(keep, index=df.index)].assign(older=lambda d: ~d["config_hash"].isin(planned))
    df = df.assign(_ok=(df["status"] == "ok").astype(int), _t=df.get("finished", pd.Series("", index=df.index)))
    df = df.sort_values(["_ok", "_t"]).groupby(["task", "algo", "seed"], as_index=False).tail(1)
    return df.drop(columns=["_ok", "_t"]).reset_index(drop=True)


def stderr(values: pd.Series) -> float:
    n = len(values)
    return float(values.std(ddof=1) / math.sqrt(n)) if n > 1 else float("nan")


def aggregate(df: pd.DataFrame, plan: dict | None, paper: pd.DataFrame, stale: dict | None = None) -> pd.DataFrame:
    """Tidy table: one row per (task, algo) cell with mean ± stderr over seeds, the paper's value, a note, and
    why its records are stale (`stale`, empty when current)."""
    tasks = plan["spec"]["tasks"] if plan else sorted(set(df["task"]), key=order(TASKS))
    algos = plan["spec"]["algos"] if plan else sorted(set(df["algo"]), key=order(ALGOS))
    algos = sorted(algos, key=order(ALGOS))
    planned_seeds = Counter((c["task"], c["algo"]) for c in plan["cells"]) if plan else None
    rows = []
    for task in tasks:
        for algo in algos:
            cell = df[(df["task"] == task) & (df["algo"] == algo)]
            ok = cell[cell["status"] == "ok"]
            failed = cell[cell["status"] == "failed"]
            row = {"task": task, "algo": algo, "seeds": len(ok),
                   "planned_seeds": planned_seeds[(task, algo)] if plan else len(ok),
                   "paper": paper.at[task, algo] if task in paper.index and algo in paper.columns else float("nan")}
            if len(ok):
                scores = ok["normalized_score"].astype(float)
                row.update(normalized_mean=scores.mean(), normalized_stderr=stderr(scores),
                           return_mean=ok["return_mean"].astype(float).mean(),
                           return_stderr=stderr(ok["return_mean"].astype(float)),
                           success_rate=ok["success_rate"].astype(float).mean(),
                           invalid_rate=column(ok, "invalid_rate").mean(),
                           episodes=int(ok["episodes"].sum()), wall_seconds=ok["wall_seconds"].astype(float).sum(),
                           model="/".join(sorted(set(ok["model"].astype(str)))) if "model" in ok else "",
                           policy="/".join(sorted(set(ok["policy"].dropna().astype(str)))) if "policy" in ok else "",
                           status="ok", note=f"{len(failed)} seed(s) failed" if len(failed) else "")
                row.update(cell_provenance(ok))
                row.update(start_of_cell(ok))
            elif len(failed):
                row.update(status="failed", note="failed: " + str(failed.iloc[-1]["error"]).splitlines()[-1][:160])
            elif plan and (reason := skip_reason(plan["spec"], task, algo)) is not None:
                row.update(status="not run", note=f"not run: {reason}")
            elif plan and (task, algo) not in planned_seeds:
                row.update(status="not planned", note="not in this experiment")
            else:
                row.update(status="not run", note="not run yet")
            row["stale"] = stale_reason(stale or {}, task, algo) if len(cell) else ""
            if len(cell) and cell["older"].any() and not row["stale"]:
                row["stale"] = OLDER_CONFIG
            row.update(anchor_check(task, row))
            row.update({f"mark_{m}": bool(row.get(f"mark_{m}", False)) for m in MARKS})
            row["marks"] = " ".join(m for m in MARKS if row[f"mark_{m}"])
            rows.append(row)
    return pd.DataFrame(rows)


def column(df: pd.DataFrame, name: str) -> pd.Series:
    """A numeric column of records (NaN where a record predates the field)."""
    return pd.to_numeric(df[name], errors="coerce") if name in df else pd.Series(math.nan, index=df.index)


def machine_of(rec) -> str:
    """A record's machine: its GPU, else its CPU model with `bf16` when it computes bf16 natively; "not recorded"
    for records from before those fields."""
    gpu, cpu = rec.get("gpu"), rec.get("cpu_model")
    if isinstance(gpu, str) and gpu:
        return gpu
    if isinstance(cpu, str) and cpu:
        return cpu + (" (bf16)" if rec.get("cpu_bf16") is True else " (no bf16)")
    return NOT_RECORDED


NOT_RECORDED = "not recorded"


def commits_of(recs: list[dict]) -> set[str]:
    """The commits records name (a `+dirty` suffix of older records dropped: `is_dirty` reads it)."""
    return {str(r["git_commit"]).removesuffix("+dirty") for r in recs if isinstance(r.get("git_commit"), str)}


def cell_provenance(ok: pd.DataFrame) -> dict:
    """Where a cell's seeds came from: commits, dirty seeds, precisions, machines, torch versions, launchers
    (each `;`-joined), and the marks they raise."""
    recs = ok.to_dict("records")
    commits = sorted(commits_of(recs))
    dirty = [is_dirty(r) for r in recs]
    precisions = sorted({r["precision"] if isinstance(r.get("precision"), str) else NOT_RECORDED for r in recs})
    machines = sorted({machine_of(r) for r in recs})
    diffs = sorted({str(r["git_diff"]) for r in recs if isinstance(r.get("git_diff"), str)})

    def joined(key: str) -> str:
        return ";".join(sorted({str(r[key]) for r in recs if isinstance(r.get(key), str)}))

    known = [p for p in precisions if p != NOT_RECORDED], [m for m in machines if m != NOT_RECORDED]
    return {"commits": ";".join(commits), "dirty_seeds": sum(bool(d) for d in dirty), "git_diffs": ";".join(diffs),
            "precisions": ";".join(precisions), "machines": ";".join(machines), "torch": joined("torch"),
            "launchers": joined("launcher"),
            "mark_d": any(bool(d) for d in dirty), "mark_c": len(commits) > 1, "mark_p": len(known[0]) > 1,
            "mark_m": len(known[1]) > 1, "mark_?": NOT_RECORDED in precisions or NOT_RECORDED in machines}


def start_of_cell(ok: pd.DataFrame) -> dict:
    """The score of the policy a cell's seeds started from (`start_normalized`: from the record, or from the BC
    cell of the same stage, `start_source`), and whether the cell ended more than two standard errors below it:
    over seeds, the paired differences' mean and standard error; one seed, the two evaluations' episode-level
    standard errors."""
    starts = column(ok, "start_normalized")
    if starts.isna().all():
        return {}
    have = ok[starts.notna()]
    starts = starts[starts.notna()]
    diffs = have["normalized_score"].astype(float) - starts
    if len(diffs) > 1:
        se = stderr(diffs)
    else:
        rec = have.iloc[0]
        se = math.hypot(normalized_se(rec, "return_stderr", "return_mean"),
                        normalized_se(rec, "start_return_stderr", "start_return_mean"))
    sources = sorted(set(have["start_source"].fillna("record"))) if "start_source" in have else ["record"]
    return {"start_normalized": float(starts.mean()), "start_seeds": len(starts), "start_source": ";".join(sources),
            "start_diff": float(diffs.mean()), "start_diff_stderr": se,
            "mark_<start": bool(diffs.mean() < -2 * se) if not math.isnan(se) else False}


@functools.lru_cache(maxsize=None)
def task_config(task: str):
    """conf/task/<task>.yaml with the task files its `defaults` list names merged in (PO maze: FO maze's), None for
    an unknown task."""
    path = TASK_CONF / f"{task}.yaml"
    if not path.exists():
        return None
    raw = OmegaConf.load(path)
    defaults = list(raw.pop("defaults", None) or [])
    parts = [raw if d == "_self_" else task_config(str(d)) for d in defaults]
    return OmegaConf.merge(*parts, *([] if "_self_" in defaults else [raw]))


def anchors(task: str) -> dict | None:
    """The task's normalization anchors {min, avg, max}, None for an unknown task."""
    cfg = task_config(task)
    norm = cfg.get("normalization") if cfg is not None else None
    return {k: float(norm[k]) for k in ("min", "avg", "max")} if norm is not None else None


def normalized_se(rec, se_key: str, mean_key: str) -> float:
    """A return's standard error in normalized points: the normalization's slope at the return times its stderr
    (NaN when the record lacks either)."""
    norm = anchors(rec["task"])
    se, mean = rec.get(se_key), rec.get(mean_key)
    if norm is None or se is None or mean is None or pd.isna(se) or pd.isna(mean):
        return math.nan
    slope = 50.0 / (norm["avg"] - norm["min"]) if mean < norm["avg"] else 50.0 / (norm["max"] - norm["avg"])
    return float(se) * slope


def anchor_check(task: str, row: dict) -> dict:
    """`mark_<0`/`mark_>100` for a score outside [0, 100], with the reason in `anchor_note`."""
    if row.get("status") != "ok":
        return {}
    mean, norm = row["normalized_mean"], anchors(task)
    if mean < 0:
        truth = TRUE_MINIMUM.get(task)
        why = (f"mean return {row['return_mean']:.1f} is below the anchor minimum {norm['min']:g}"
               if norm else "below the anchor minimum")
        if truth:
            why += f" (the true minimum is {truth[0]:g}: {truth[1]})"
        return {"mark_<0": True, "anchor_note": why}
    if mean > 100:
        return {"mark_>100": True, "anchor_note": f"mean return {row['return_mean']:.2f} is above the anchor "
                                                  f"maximum {norm['max']:g}" if norm else "above the anchor maximum"}
    return {}


def order(names: list[str]):
    return lambda x: (names.index(x) if x in names else len(names), x)


def fmt_cell(row) -> str:
    mark = f" [stale: {row['stale']}]" if row.get("stale") else ""
    if row["status"] != "ok":
        return row["note"] + mark
    se = row["normalized_stderr"]
    text = f"{row['normalized_mean']:.1f}" + ("" if math.isnan(se) else f" ± {se:.1f}")
    if not math.isnan(row["paper"]):
        text += f" ({row['paper']:g})"
    if row["seeds"] < row["planned_seeds"]:
        text += f" [{row['seeds']}/{row['planned_seeds']} seeds]"
    if isinstance(row.get("marks"), str) and row["marks"]:
        text += f" [{row['marks']}]"
    return text + mark


def wide(cells: pd.DataFrame, paper: pd.DataFrame) -> pd.DataFrame:
    """Rows = task variants (the paper's names), columns = algorithms; `ours ± se (paper)` cells."""
    table = cells.assign(text=cells.apply(fmt_cell, axis=1)).pivot(index="task", columns="algo", values="text")
    table = table.reindex(index=list(dict.fromkeys(cells["task"])), columns=list(dict.fromkeys(cells["algo"])))
    # The median, not the mean: scores are not clipped, and one task far below its minimum (illegal chess moves
    # cost more than the normalization's minimum) would swamp a mean.
    ok = cells[cells["status"] == "ok"]
    summary = {}
    for algo in table.columns:
        sub = ok[ok["algo"] == algo]
        stale = int((sub["stale"] != "").sum())
        paper_median = sub["paper"].median()  # NaN for a method the paper does not have
        summary[algo] = (f"{sub['normalized_mean'].median():.1f}"
                         + ("" if math.isnan(paper_median) else f" ({paper_median:.1f})") + f", {len(sub)} tasks"
                         + (f" ({stale} stale)" if stale else "") if len(sub) else "—")
    table.loc["median over tasks with a score"] = summary
    table.index = [paper.at[t, "paper_task"] if t in paper.index else t for t in table.index]
    table.columns = [column_title(a, ok) for a in table.columns]
    table.index.name = "task"
    return table


def column_title(algo: str, ok: pd.DataFrame) -> str:
    """An algorithm's column header; the prompted column also names its model(s) and prompting, and that the
    parenthesised values are the paper's GPT-4 (a model of another scale entirely)."""
    title = ALGO_TITLES.get(algo, algo)
    if algo != "prompt":
        return title
    sub = ok[ok["algo"] == algo]
    models = sorted({m for v in sub.get("model", []) for m in str(v).split("/") if m and m != "nan"})
    policies = sorted({p for v in sub.get("policy", []) for p in str(v).split("/") if p and p != "nan"})
    return (f"{title}: {', '.join(models) or '?'}" + (f", {', '.join(policies)}" if policies else "")
            + " (paper: GPT-4)")


def provenance(df: pd.DataFrame) -> str:
    """One line on where the table's records came from: counts of commits, dirty runs, precisions, machines."""
    ok = df[df["status"] == "ok"]
    if ok.empty:
        return "no successful records"
    recs = ok.to_dict("records")
    commits = commits_of(recs)
    dirty = sum(bool(is_dirty(r)) for r in recs)

    def counts(values) -> str:
        return ", ".join(f"{v} {n}" for v, n in sorted(Counter(values).items()))

    # `precision=auto` trains in bf16 on a CPU with native bf16 and in fp32 elsewhere: the same config, other numerics
    precisions = counts(r["precision"] if isinstance(r.get("precision"), str) else NOT_RECORDED for r in recs)
    return (f"{len(ok)} runs, {ok['wall_seconds'].astype(float).sum() / 3600:.2f} h of run time in all "
            f"(sum over runs), {len(commits)} commits, {dirty} runs from a dirty tree; precision (runs): {precisions}; "
            f"machine (runs): {counts(machine_of(r) for r in recs)}; "
            f"models: {', '.join(sorted(set(map(str, ok['model']))))}")


def anchor_lines(tasks: list[str], paper: pd.DataFrame) -> list[str]:
    """The header's table of each task's anchors (0, 50 and 100 on the normalized scale) and true minimum."""
    lines = ["| task | return at 0 (min) | 50 (dataset avg) | 100 (max) | true minimum |", "|---|---|---|---|---|"]
    for task in tasks:
        norm = anchors(task)
        if norm is None:
            continue
        truth = TRUE_MINIMUM.get(task)
        worst = f"{truth[0]:g}: {truth[1]}" if truth else "the anchor minimum"
        name = paper.at[task, "paper_task"] if task in paper.index else task
        lines.append(f"| {name} | {norm['min']:g} | {norm['avg']:g} | {norm['max']:g} | {worst} |")
    return lines


def measures_markdown(cells: pd.DataFrame, names: dict, title: str) -> str:
    """The companion table: per cell the raw return ± stderr over seeds, success and invalid-turn rates, the
    start's score, the marks and where the records came from."""
    lines = [f"# {title}", "",
             "Per cell: the mean over seeds of each seed's raw return (± standard error over seeds), success rate and "
             "invalid-turn rate (the share of agent turns the env flagged invalid: unparseable or illegal; `—` for "
             "records from before the field), the normalized score with its marks, the start's "
             "normalized score (the policy an RL cell trained from; `bc cell`: its stage's BC cell, for records from "
             "before `start_normalized`), and the records' commits, precisions and machines. Built by "
             "`python -m lmrl.report`.", "",
             "| task | algorithm | seeds | return | success | invalid | normalized | start | marks | commits | "
             "precision | machine |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]

    def listed(value) -> str:
        return str(value or "").replace(";", ", ")

    def num(value, fmt: str) -> str:
        return "—" if value is None or pd.isna(value) else format(value, fmt)

    for r in cells[cells["status"] == "ok"].to_dict("records"):
        se = r.get("return_stderr")
        ret = num(r["return_mean"], ".3g") + ("" if se is None or pd.isna(se) else f" ± {se:.2g}")
        start = num(r.get("start_normalized"), ".1f")
        if start != "—" and str(r.get("start_source")) not in ("record", "nan"):
            start += f" ({r['start_source']})"
        commits = ", ".join(c[:8] for c in str(r.get("commits") or "").split(";") if c) or "—"
        lines.append(f"| {names.get(r['task'], r['task'])} | {ALGO_TITLES.get(r['algo'], r['algo'])} | {r['seeds']} | "
                     f"{ret} | {num(r['success_rate'], '.2f')} | {num(r.get('invalid_rate'), '.3f')} | "
                     f"{r['normalized_mean']:.1f} | {start} | {r.get('marks') or ''} | {commits} | "
                     f"{listed(r.get('precisions'))} | {listed(r.get('machines'))} |")
    return "\n".join(lines) + "\n"


def to_markdown(table: pd.DataFrame, title: str, notes: list[str]) -> str:
    cols = [table.index.name or "", *table.columns]
    lines = [f"# {title}", "", *[f"{n}" for n in notes], "",
             "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for idx, row in table.iterrows():
        lines.append("| " + " | ".join([str(idx), *(str(v).replace("|", "/") for v in row)]) + " |")
    return "\n".join(lines) + "\n"


def to_latex(table: pd.DataFrame, caption: str) -> str:
    esc = table.map(lambda s: str(s).replace("±", r"$\pm$").replace("%", r"\%").replace("_", r"\_")
                    .replace("&", r"\&").replace("#", r"\#").replace("<", r"$<$").replace(">", r"$>$"))
    esc.columns = [c.replace("%", r"\%") for c in esc.columns]
    esc.index = [str(i).replace("_", r"\_") for i in esc.index]
    esc.index.name = "Task"
    body = esc.to_latex(escape=False, column_format="l" + "p{2.1cm}" * len(esc.columns))
    return ("\\begin{table}[t]\n\\centering\n\\scriptsize\n" + body
            + f"\\caption{{{caption}}}\n\\end{{table}}\n")


def figure(cells: pd.DataFrame, paper: pd.DataFrame, path: Path, title: str) -> None:
    """Two heatmaps on one 0-100 colour scale: ours (mean over seeds) and the paper's Table 2."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    tasks = list(dict.fromkeys(cells["task"]))
    algos = list(dict.fromkeys(cells["algo"]))
    ours = np.full((len(tasks), len(algos)), np.nan)
    labels = [["" for _ in algos] for _ in tasks]
    for row in cells.itertuples(index=False):
        i, j = tasks.index(row.task), algos.index(row.algo)
        if row.status == "ok":
            ours[i, j] = row.normalized_mean
            se = row.normalized_stderr
            labels[i][j] = f"{row.normalized_mean:.0f}" + ("" if math.isnan(se) else f"\n±{se:.0f}")
        else:
            labels[i][j] = {"failed": "failed", "not run": "not run"}.get(row.status, "—")
        flags = [m for m in ("<0", ">100", "<start") if m in str(getattr(row, "marks", "") or "").split()]
        if flags:
            labels[i][j] += "\n" + " ".join(flags)
        if row.stale:
            labels[i][j] += "\nstale"
    theirs = np.array([[paper.at[t, a] if t in paper.index and a in paper.columns else np.nan for a in algos]
                       for t in tasks], dtype=float)
    names = [paper.at[t, "paper_task"] if t in paper.index else t for t in tasks]
    fig, axes = plt.subplots(1, 2, figsize=(15, 6.5), constrained_layout=True)
    cmap = plt.get_cmap("RdYlGn").with_extremes(bad="#d9d9d9")
    for ax, data, text, panel in ((axes[0], ours, labels, "ours (mean ± stderr over seeds)"),
                                  (axes[1], theirs, None, "paper, Table 2")):
        image = ax.imshow(np.ma.masked_invalid(np.clip(data, -20, 120)), cmap=cmap, vmin=0, vmax=100, aspect="auto")
        ax.set_xticks(range(len(algos)), [ALGO_TITLES.get(a, a) for a in algos], rotation=30, ha="right")
        ax.set_yticks(range(len(tasks)), names)
        ax.set_title(panel)
        for i in range(len(tasks)):
            for j in range(len(algos)):
                label = text[i][j] if text is not None else ("" if np.isnan(data[i, j]) else f"{data[i, j]:g}")
                ax.text(j, i, label, ha="center", va="center", fontsize=8)
    for row in cells[cells["stale"] != ""].itertuples(index=False):  # hatch the stale cells of our panel
        axes[0].add_patch(plt.Rectangle((algos.index(row.algo) - 0.5, tasks.index(row.task) - 0.5), 1, 1,
                                        fill=False, hatch="//", edgecolor="0.45", linewidth=0))
    fig.colorbar(image, ax=axes, shrink=0.8, label="normalized score (0 = min, 50 = dataset avg, 100 = max)")
    stale = cells[cells["stale"] != ""].drop_duplicates(["task", "stale"])
    if len(stale):
        names_of = dict(zip(tasks, names))
        fig.supxlabel("hatched = stale, values kept from older records: " + "; ".join(
            f"{names_of[r.task]}: {r.stale}" for r in stale.itertuples(index=False)), fontsize=8, wrap=True)
    fig.suptitle(title)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def build(records_dir: Path, name: str, out_dir: Path, paper_path: Path = PAPER_TABLE2) -> dict[str, Path]:
    """Write <out>/<name>.csv (tidy cells), .md (the table, then the paper's findings tested on it), .tex, .png and
    <name>_findings.csv (one row per comparison); returns their paths."""
    records_dir = Path(records_dir)
    if not records_dir.is_dir():
        raise SystemExit(f"{records_dir}: no such records directory (run the sweep first)")
    paper = read_paper(paper_path)
    plan = read_plan(records_dir)
    df = fill_starts(select_records(load_records(records_dir), plan), plan)
    cells = aggregate(df, plan, paper, stale_marks(plan))
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {ext: out_dir / f"{name}.{ext}" for ext in ("csv", "md", "tex", "png")}
    paths["findings"] = out_dir / f"{name}_findings.csv"
    paths["measures"] = out_dir / f"{name}_measures.md"
    cells.to_csv(paths["csv"], index=False, float_format="%.6g")
    table = wide(cells, paper)
    seeds = sorted({int(s) for s in df.loc[df["status"] == "ok", "seed"]}) if len(df) else []
    names = {t: paper.at[t, "paper_task"] for t in paper.index}
    used = [m for m in MARKS if cells.get(f"mark_{m}", pd.Series(dtype=bool)).fillna(False).astype(bool).any()]
    notes = [f"Normalized scores (0 = the task's anchor minimum, 50 = dataset average, 100 = maximum; Anchors below): "
             f"mean ± standard error over seeds (seeds {seeds}), the paper's Table 2 value in parentheses.",
             "", f"Records: `{records_dir}` — {provenance(df)}. Per cell commits, precisions and machines: "
                 f"`{paths['csv'].name}` and `{paths['measures'].name}` (with raw returns, success and invalid rates).",
             *(["", "Marks after a value: " + "; ".join(f"`{m}` {MARKS[m]}" for m in used) + "."] if used else []),
             *(["", "Cells marked `[stale: <reason>]` keep the values of records that predate a change their config "
                    "hash does not capture (the experiment's `sweep.stale`) until they are re-run" + stale_cost(cells)
                    + "."] if (cells["stale"] != "").any() else []),
             "", "Built by `python -m lmrl.report` from the records (not edited by hand)."]
    anchor_table = ["## Anchors", "", "The returns each task's normalized scale is anchored at (conf/task/*.yaml "
                    "`normalization`, the paper's where it gives them, for comparability) and, where the anchor "
                    "minimum is not the worst return the rules allow, the true minimum: a policy that plays invalid "
                    "turns scores below 0 there.", "",
                    *anchor_lines(list(dict.fromkeys(cells["task"])), paper), ""]
    claims, comparisons = findings.findings(cells, paper)
    comparisons.to_csv(paths["findings"], index=False, float_format="%.6g")
    paths["md"].write_text(to_markdown(table, f"{name}: LMRL-Gym Table 2, ours vs the paper", notes) + "\n"
                           + "\n".join(anchor_table) + "\n" + findings.to_markdown(claims, comparisons, names))
    paths["measures"].write_text(measures_markdown(cells, names, f"{name}: the measures behind each cell"))
    paths["tex"].write_text(to_latex(table, f"{name}: normalized scores, mean $\\pm$ stderr over seeds "
                                           "(the paper's value in parentheses)."))
    figure(cells, paper, paths["png"], f"{name}: normalized scores")
    return paths


def stale_cost(cells: pd.DataFrame) -> str:
    """What re-running the stale cells costs, from their records' run times (the same budgets re-run)."""
    stale = cells[(cells["stale"] != "") & (cells["status"] == "ok")]
    if stale.empty or "wall_seconds" not in stale:
        return ""
    hours = stale["wall_seconds"].astype(float).sum() / 3600
    return (f": re-running the {len(stale)} stale cells ({int(stale['seeds'].sum())} runs) costs about {hours:.1f} h "
            "of run time, what their records took (plus their BC stage where it changed)")


def fill_starts(df: pd.DataFrame, plan: dict | None) -> pd.DataFrame:
    """Records from before `start_normalized`: an RL cell's start is the BC cell of its stage (the plan's `stage`,
    `launchers.sizing.bc_stage_of`: the same task, seed, data, model and BC config), with `start_source` "bc cell"
    (its precision may differ where the machines did)."""
    if plan is None or df.empty or not any("stage" in c for c in plan["cells"]):
        return df
    stage_of = {c["digest"]: c.get("stage") for c in plan["cells"]}
    df = df.copy()
    for key in ("start_normalized", "start_return_mean", "start_return_stderr", "start_source"):
        if key not in df:
            df[key] = math.nan if key != "start_source" else None
    ok_bc = df[(df["algo"] == "bc") & (df["status"] == "ok")]
    bc_by_stage = {stage_of[r["config_hash"]]: r for r in ok_bc.to_dict("records") if stage_of.get(r["config_hash"])}
    for i, rec in df.iterrows():
        if rec["algo"] == "bc" or rec["status"] != "ok" or not pd.isna(rec["start_normalized"]):
            continue
        bc = bc_by_stage.get(stage_of.get(rec["config_hash"]))
        if bc is not None:
            df.loc[i, ["start_normalized", "start_return_mean", "start_return_stderr", "start_source"]] = [
                bc["normalized_score"], bc["return_mean"], bc["return_stderr"], "bc cell"]
    return df


def log_to_wandb(paths: dict[str, Path], name: str, project: str = "lmrl", group: str | None = None) -> None:
    """The table as a W&B Table and every output file in one artifact (offline unless WANDB_MODE=online)."""
    import os

    import wandb

    run = wandb.init(project=project, group=group or name, job_type="report", name=f"{name}-report",
                     mode=os.environ.get("WANDB_MODE", "offline"))
    run.log({"table": wandb.Table(dataframe=pd.read_csv(paths["csv"])), "figure": wandb.Image(str(paths["png"]))})
    artifact = wandb.Artifact(name=f"{name}-table", type="results")
    for path in paths.values():
        artifact.add_file(str(path))
    run.log_artifact(artifact)
    run.finish()
    wandb.teardown()  # stop this process's W&B service: child processes started later must not share it
    os.environ.pop("WANDB_SERVICE", None)


def main(argv: list[str] | None = None) -> int:
    """`python -m lmrl.report <records dir>`: build the results table from a directory of records (`build`), print it,
    and log it to W&B when asked (or when the sweep's runs logged there). Returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("records", type=Path, help="a directory of JSON records (a sweep's records.dir)")
    parser.add_argument("--name", help="output name (default: the directory's name)")
    parser.add_argument("--out", type=Path, default=ROOT / "results", help="output directory (default: results/)")
    parser.add_argument("--paper", type=Path, default=PAPER_TABLE2, help="the paper's Table 2 as CSV")
    parser.add_argument("--wandb", action=argparse.BooleanOptionalAction, default=None,
                        help="log the table and files as a W&B artifact (default: when the sweep's runs logged to W&B)")
    parser.add_argument("--group", help="W&B group (default: the name, which is the sweep's group)")
    args = parser.parse_args(argv)
    name = args.name or args.records.name
    paths = build(args.records, name, args.out, args.paper)
    print(paths["md"].read_text())
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    plan = read_plan(args.records) or {}
    if args.wandb or (args.wandb is None and plan.get("spec", {}).get("wandb")):
        log_to_wandb(paths, name, group=args.group or plan.get("experiment"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
