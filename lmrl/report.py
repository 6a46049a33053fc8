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
"""

from __future__ import annotations

import argparse
import json
import math
from collections import Counter
from pathlib import Path

import pandas as pd
from omegaconf import OmegaConf

from lmrl import findings
from lmrl.records import load_records, skip_reason

ROOT = Path(__file__).resolve().parent.parent
EXPERIMENTS = ROOT / "conf" / "experiment"
PAPER_TABLE2 = ROOT / "results" / "paper_table2.csv"
TASKS = ["twenty_questions", "guess", "car_dealer", "maze_fo", "maze_po", "text_nav_fo", "text_nav_po", "wordle",
         "chess", "endgames"]
ALGOS = ["bc", "filtered_bc", "mc", "ilql", "ppo", "online_filtered_bc", "sweet", "group_pg", "prompt"]
ALGO_TITLES = {"bc": "BC", "filtered_bc": "%BC", "mc": "MC Return", "ilql": "ILQL", "ppo": "PPO",
               "online_filtered_bc": "Online %BC", "sweet": "SWEET-RL", "group_pg": "Group PG", "prompt": "Prompted LM"}


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
                           success_rate=ok["success_rate"].astype(float).mean(),
                           episodes=int(ok["episodes"].sum()), wall_seconds=ok["wall_seconds"].astype(float).sum(),
                           model="/".join(sorted(set(ok["model"].astype(str)))) if "model" in ok else "",
                           status="ok", note=f"{len(failed)} seed(s) failed" if len(failed) else "")
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
            rows.append(row)
    return pd.DataFrame(rows)


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
    table.columns = [ALGO_TITLES.get(a, a) for a in table.columns]
    table.index.name = "task"
    return table


def provenance(df: pd.DataFrame) -> str:
    ok = df[df["status"] == "ok"]
    if ok.empty:
        return "no successful records"
    hosts = ", ".join(f"{h} ({int(c)} CPUs)" for h, c in ok[["host", "cpus"]].drop_duplicates().itertuples(index=False)) \
        if {"host", "cpus"} <= set(ok.columns) else "?"
    commits = sorted({str(c)[:12] for c in ok.get("git_commit", pd.Series(dtype=str)).dropna()})
    # `precision=auto` trains in bf16 on a CPU with native bf16 and in fp32 elsewhere: the same config, other numerics
    precisions = ok.get("precision", pd.Series(index=ok.index, dtype=object)).fillna("not recorded")
    counts = ", ".join(f"{p} {n}" for p, n in precisions.value_counts().sort_index().items())
    return (f"{len(ok)} runs, {ok['wall_seconds'].astype(float).sum() / 3600:.2f} h of run time in all "
            f"(sum over runs), machine: {hosts}, precision (runs): {counts}, "
            f"models: {', '.join(sorted(set(map(str, ok['model']))))}, git: {', '.join(commits)}")


def to_markdown(table: pd.DataFrame, title: str, notes: list[str]) -> str:
    cols = [table.index.name or "", *table.columns]
    lines = [f"# {title}", "", *[f"{n}" for n in notes], "",
             "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for idx, row in table.iterrows():
        lines.append("| " + " | ".join([str(idx), *(str(v).replace("|", "/") for v in row)]) + " |")
    return "\n".join(lines) + "\n"


def to_latex(table: pd.DataFrame, caption: str) -> str:
    esc = table.map(lambda s: str(s).replace("±", r"$\pm$").replace("%", r"\%").replace("_", r"\_")
                    .replace("&", r"\&").replace("#", r"\#"))
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
    df = select_records(load_records(records_dir), plan)
    cells = aggregate(df, plan, paper, stale_marks(plan))
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {ext: out_dir / f"{name}.{ext}" for ext in ("csv", "md", "tex", "png")}
    paths["findings"] = out_dir / f"{name}_findings.csv"
    cells.to_csv(paths["csv"], index=False, float_format="%.6g")
    table = wide(cells, paper)
    seeds = sorted({int(s) for s in df.loc[df["status"] == "ok", "seed"]}) if len(df) else []
    notes = [f"Normalized scores (0 = minimum return, 50 = dataset average, 100 = maximum): mean ± standard error "
             f"over seeds (seeds {seeds}), the paper's Table 2 value in parentheses.",
             "", f"Records: `{records_dir}` — {provenance(df)}.",
             *(["", "Cells marked `[stale: <reason>]` keep the values of records that predate a change their config "
                    "hash does not capture (the experiment's `sweep.stale`) until they are re-run."]
               if (cells["stale"] != "").any() else []),
             "", "Built by `python -m lmrl.report` from the records (not edited by hand)."]
    claims, comparisons = findings.findings(cells, paper)
    comparisons.to_csv(paths["findings"], index=False, float_format="%.6g")
    names = {t: paper.at[t, "paper_task"] for t in paper.index}
    paths["md"].write_text(to_markdown(table, f"{name}: LMRL-Gym Table 2, ours vs the paper", notes) + "\n"
                           + findings.to_markdown(claims, comparisons, names))
    paths["tex"].write_text(to_latex(table, f"{name}: normalized scores, mean $\\pm$ stderr over seeds "
                                           "(the paper's value in parentheses)."))
    figure(cells, paper, paths["png"], f"{name}: normalized scores")
    return paths


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
