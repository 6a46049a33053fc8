"""The paper's findings, tested on a results table: agree, disagree or inconclusive.

Each claim of LMRL-Gym's Table 2 is a set of comparisons "A vs B on task T" (A, B: an algorithm, or
`best_offline_rl`, the better of MC and ILQL on that task).  The paper's own numbers give each
comparison a direction; ours agrees when our seeds put A and B apart in the same direction, by
Welch's t-test at the two-sided `alpha` (default 0.05) on the seeds' means and standard errors;
disagrees when they are apart the other way; and is inconclusive when they are not apart (within
noise, one seed, a cell with no current score — stale, failed or not run — or two cells of different
models, which compare the models rather than the methods).  A claim agrees when
more of its comparisons agree than disagree and at least half of them agree; disagrees when more
disagree than agree; else it is inconclusive.

Picking the better of MC and ILQL per task is a selection over two noisy cells: it favours
"offline RL wins" a little, as the paper's own "best offline RL" reading does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

BEST_OFFLINE = "best_offline_rl"
OFFLINE_RL = ("mc", "ilql")
TEXT_GAMES = ("maze_fo", "maze_po", "text_nav_fo", "text_nav_po", "wordle", "chess", "endgames")
DIALOGUE = ("twenty_questions", "guess", "car_dealer")
NAVIGATION = ("maze_fo", "maze_po", "text_nav_fo", "text_nav_po")
ALL_TASKS = DIALOGUE + TEXT_GAMES


@dataclass(frozen=True)
class Claim:
    text: str
    comparisons: tuple[tuple[str, str, str, str], ...]  # (task of A, algorithm A, task of B, algorithm B)


CLAIMS = (
    Claim("Offline RL (the better of MC and ILQL) beats BC on the text games",
          tuple((t, BEST_OFFLINE, t, "bc") for t in TEXT_GAMES)),
    Claim("ILQL beats MC on the maze and Text-Nav", tuple((t, "ilql", t, "mc") for t in NAVIGATION)),
    Claim("MC beats ILQL on the dialogue tasks", tuple((t, "mc", t, "ilql") for t in DIALOGUE)),
    Claim("Partial observation is harder than full (FO scores above PO)",
          tuple((f"{env}_fo", algo, f"{env}_po", algo) for env in ("maze", "text_nav") for algo in ("bc", "mc", "ilql"))),
    Claim("Online PPO vs offline RL (the paper: PPO ahead on some tasks, behind on others)",
          tuple((t, "ppo", t, BEST_OFFLINE) for t in ALL_TASKS)),
)


def _cell(cells: pd.DataFrame, task: str, algo: str, model: str = "") -> dict | None:
    """A current score of (task, algo): {'algo', 'mean', 'se', 'n', 'model'}, or None with no usable score.
    `best_offline_rl` picks among MC and ILQL the cells of `model` when there are any (what it is compared with)."""
    if algo == BEST_OFFLINE:
        found = [c for a in OFFLINE_RL if (c := _cell(cells, task, a)) is not None]
        found = [c for c in found if c["model"] == model] or found
        return max(found, key=lambda c: c["mean"]) if found else None
    row = cells[(cells["task"] == task) & (cells["algo"] == algo)]
    if row.empty:
        return None
    row = row.iloc[0]
    if row["status"] != "ok" or str(row.get("stale") or "") not in ("", "nan"):
        return None
    model = row.get("model")
    return {"algo": algo, "mean": float(row["normalized_mean"]), "se": float(row["normalized_stderr"]),
            "n": int(row["seeds"]), "model": "" if pd.isna(model) else str(model),
            "below_anchor": bool(row.get("mark_<0", False) == True)}  # noqa: E712 - NaN (no mark) is not True


def anchor_caveat(task_a: str, a: dict | None, task_b: str, b: dict | None) -> str:
    """What a comparison must say when a side scores below its task's anchor minimum (`lmrl.report`'s `<0` mark):
    there the normalized scale stretches past the paper's, so differences are not comparable with its."""
    below = [f"{t}/{c['algo']}" for t, c in ((task_a, a), (task_b, b)) if c is not None and c["below_anchor"]]
    return f"computed on cells below the anchor minimum ({', '.join(below)})" if below else ""


def _paper(paper: pd.DataFrame, task: str, algo: str) -> float:
    algos = OFFLINE_RL if algo == BEST_OFFLINE else (algo,)
    values = [float(paper.at[task, a]) for a in algos if task in paper.index and a in paper.columns]
    return max(values) if values else float("nan")


def welch(a: dict, b: dict) -> tuple[float, float]:
    """Welch's t statistic and its degrees of freedom from two cells' means, standard errors and seed counts."""
    va, vb = a["se"] ** 2, b["se"] ** 2
    se = math.sqrt(va + vb)
    if se == 0:  # every seed of both cells scored the same
        diff = a["mean"] - b["mean"]
        return (math.copysign(math.inf, diff) if diff else 0.0), math.inf
    df = (va + vb) ** 2 / (va ** 2 / (a["n"] - 1) + vb ** 2 / (b["n"] - 1))
    return (a["mean"] - b["mean"]) / se, df


def compare(cells: pd.DataFrame, paper: pd.DataFrame, comparison, alpha: float = 0.05) -> dict:
    """One comparison's row: both sides, the paper's difference, ours with its p-value, and the verdict."""
    from scipy import stats

    task_a, algo_a, task_b, algo_b = comparison
    a = _cell(cells, task_a, algo_a, (_cell(cells, task_b, algo_b) or {}).get("model", ""))
    b = _cell(cells, task_b, algo_b, (a or {}).get("model", ""))
    paper_diff = _paper(paper, task_a, algo_a) - _paper(paper, task_b, algo_b)
    row = {"task_a": task_a, "a": algo_a if algo_a != BEST_OFFLINE or a is None else f"{BEST_OFFLINE}={a['algo']}",
           "task_b": task_b, "b": algo_b if algo_b != BEST_OFFLINE or b is None else f"{BEST_OFFLINE}={b['algo']}",
           "paper_diff": paper_diff, "diff": float("nan"), "p": float("nan"),
           "caveat": anchor_caveat(task_a, a, task_b, b)}
    if a is None or b is None:
        missing = " and ".join(f"{t}/{x}" for t, x, c in ((task_a, algo_a, a), (task_b, algo_b, b)) if c is None)
        return {**row, "verdict": "inconclusive", "why": f"no current score for {missing}"}
    row["diff"] = a["mean"] - b["mean"]
    if a["model"] and b["model"] and a["model"] != b["model"]:
        return {**row, "verdict": "inconclusive", "why": f"different models ({a['model']} vs {b['model']})"}
    if a["n"] < 2 or b["n"] < 2:
        return {**row, "verdict": "inconclusive", "why": "one seed: no standard error"}
    t, df = welch(a, b)
    row["p"] = float(2 * stats.t.sf(abs(t), df)) if math.isfinite(t) else (0.0 if t else 1.0)
    if row["p"] >= alpha:
        return {**row, "verdict": "inconclusive", "why": f"within noise (p = {row['p']:.2f})"}
    if math.isnan(paper_diff) or paper_diff == 0:
        return {**row, "verdict": "inconclusive", "why": "the paper's numbers give no direction"}
    agree = (row["diff"] > 0) == (paper_diff > 0)
    return {**row, "verdict": "agree" if agree else "disagree", "why": f"p = {row['p']:.3f}"}


def claim_verdict(verdicts: list[str]) -> str:
    agree, disagree = verdicts.count("agree"), verdicts.count("disagree")
    if agree > disagree and 2 * agree >= len(verdicts):
        return "agree"
    return "disagree" if disagree > agree else "inconclusive"


def findings(cells: pd.DataFrame, paper: pd.DataFrame, alpha: float = 0.05,
             claims: tuple[Claim, ...] = CLAIMS) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(one row per claim, one row per comparison) for a report's tidy cells (`lmrl.report.aggregate`)."""
    details, summary = [], []
    for claim in claims:
        rows = [{"claim": claim.text, **compare(cells, paper, c, alpha)} for c in claim.comparisons]
        details.extend(rows)
        verdicts = [r["verdict"] for r in rows]
        summary.append({"claim": claim.text, "verdict": claim_verdict(verdicts),
                        "agree": verdicts.count("agree"), "disagree": verdicts.count("disagree"),
                        "inconclusive": verdicts.count("inconclusive")})
    return pd.DataFrame(summary), pd.DataFrame(details)


def _side(task: str, algo: str, names: dict) -> str:
    return f"{names.get(task, task)} {algo}"


def to_markdown(summary: pd.DataFrame, details: pd.DataFrame, names: dict, alpha: float = 0.05) -> str:
    """The findings section of a report: the claims' verdicts, then every comparison."""
    lines = ["## Findings: the paper's claims on this table", "",
             f"A comparison agrees when our seeds separate the two cells (Welch's t-test, p < {alpha:g}) in the "
             "direction of the paper's Table 2, disagrees when they separate the other way, and is inconclusive "
             "otherwise (within noise, one seed, a cell without a current score: stale, failed or not run, or cells of "
             "different models). "
             "A claim agrees when more comparisons agree than disagree and at least half agree; disagrees when more "
             "disagree than agree. `best_offline_rl` is the better of MC and ILQL on that task.", "",
             "| claim | verdict | agree | disagree | inconclusive |", "|---|---|---|---|---|"]
    lines += [f"| {r.claim} | **{r.verdict}** | {r.agree} | {r.disagree} | {r.inconclusive} |"
              for r in summary.itertuples(index=False)]
    lines += ["", "| claim | A | B | paper A − B | ours A − B | verdict |", "|---|---|---|---|---|---|"]
    for r in details.itertuples(index=False):
        ours = "—" if math.isnan(r.diff) else f"{round(r.diff, 1) + 0.0:+.1f}"  # + 0.0: no "-0.0"
        caveat = f"; {r.caveat}" if isinstance(getattr(r, "caveat", ""), str) and r.caveat else ""
        lines.append(f"| {r.claim} | {_side(r.task_a, r.a, names)} | {_side(r.task_b, r.b, names)} | "
                     f"{r.paper_diff:+.1f} | {ours} | {r.verdict}: {r.why}{caveat} |")
    return "\n".join(lines) + "\n"
