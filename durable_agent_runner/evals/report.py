"""An eval's report and its comparison with a baseline, pure: from the eval's status (its case
results) to rows, aggregates, a case-by-case diff, a CI gate, and JSON or Markdown.

    report(status, link)          one row per case run; per-case spread over repeats; per-evaluator
                                  mean and pass rate; pass rate, p50/p95 latency, tokens, cost
    compare(report, baseline)     each case regressed, improved, same, new or gone, by how much;
                                  the change in cost and latency
    gate(report, diff, ...)       the lines that fail a CI job, each naming its cases
    markdown(report, diff)        what a pull request comment or a terminal shows
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from durable_agent_runner.machine.texts import cost_words
from durable_agent_runner.workflows.types import evals as te

EPSILON = 1e-9  # a change smaller than this is no change (floats summed in another order)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Row(_Model):
    """One case run: its scores, pass/fail, reasons, turns, tokens, USD, latency, and its run."""

    case: str
    repeat: int
    run_id: str
    link: str = ""
    end: te.CaseEnd
    passed: bool
    scores: dict[str, bool | float | str | None] = Field(default_factory=dict)  # None: errored
    reasons: dict[str, str] = Field(default_factory=dict)  # a score's reason, or its error
    error: str | None = None
    turns: int = 0
    tokens: int = 0
    usd: float = 0.0
    unpriced: int = 0  # its model calls whose cost `usd` lacks
    seconds: float = 0.0


class CaseSummary(_Model):
    """A case over its repeats: how often it passed, and each score's mean and spread."""

    case: str
    runs: int
    passed: int
    pass_rate: float
    means: dict[str, float] = Field(default_factory=dict)  # assertions count 1 for a pass
    spread: dict[str, float] = Field(default_factory=dict)  # max - min over the repeats
    usd: float = 0.0
    seconds: float = 0.0  # mean latency


class EvaluatorSummary(_Model):
    name: str
    runs: int  # case runs that gave it a value
    errors: int
    mean: float | None = None  # of its numeric values (an assertion's pass counts 1)
    pass_rate: float | None = None  # its assertions only


class Report(_Model):
    eval_id: str
    dataset: str
    agent: str
    agent_version: str = ""
    phase: te.EvalPhase
    total: int
    done: int
    passed: int
    pass_rate: float
    tokens: int
    usd: float
    unpriced: int = 0  # model calls of its case runs whose cost `usd` lacks (no price for the model)
    p50_seconds: float
    p95_seconds: float
    repeat: int = 1
    rows: list[Row]
    cases: list[CaseSummary]
    evaluators: list[EvaluatorSummary]


def _value(v: bool | float | str | None) -> float | None:
    if isinstance(v, bool):
        return 1.0 if v else 0.0
    return float(v) if isinstance(v, int | float) else None


def percentile(values: list[float], p: float) -> float:
    """The p-th percentile (0-100), nearest rank; 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(math.ceil(p / 100 * len(ordered)), 1)
    return ordered[rank - 1]


def _row(r: te.CaseResult, link: Callable[[str], str] | None) -> Row:
    scores: dict[str, bool | float | str | None] = {}
    reasons: dict[str, str] = {}
    for s in r.scores:
        scores[s.name] = s.value
        why = s.error or s.reason
        if why:
            reasons[s.name] = why
    return Row(
        case=r.case,
        repeat=r.repeat,
        run_id=r.run_id,
        link=link(r.run_id) if link else "",
        end=r.end,
        passed=r.passed,
        scores=scores,
        reasons=reasons,
        error=r.error,
        turns=r.turns,
        tokens=r.usage.total_tokens,
        usd=round(r.usage.cost_usd, 8),
        unpriced=r.usage.unpriced,
        seconds=r.seconds,
    )


def _case_summary(case: str, rows: list[Row]) -> CaseSummary:
    names = list(dict.fromkeys(n for r in rows for n in r.scores))
    means, spread = {}, {}
    for n in names:
        values = [v for r in rows if (v := _value(r.scores.get(n))) is not None]
        if values:
            means[n] = round(statistics.fmean(values), 6)
            spread[n] = round(max(values) - min(values), 6)
    good = sum(r.passed for r in rows)
    return CaseSummary(
        case=case,
        runs=len(rows),
        passed=good,
        pass_rate=round(good / len(rows), 6),
        means=means,
        spread=spread,
        usd=round(sum(r.usd for r in rows), 8),
        seconds=round(statistics.fmean(r.seconds for r in rows), 3),
    )


def _evaluator_summary(name: str, results: list[te.EvaluationResult]) -> EvaluatorSummary:
    errors = sum(1 for s in results if s.error is not None)
    values = [v for s in results if (v := _value(s.value)) is not None]
    bools = [s.value for s in results if isinstance(s.value, bool)]
    return EvaluatorSummary(
        name=name,
        runs=len(results) - errors,
        errors=errors,
        mean=round(statistics.fmean(values), 6) if values else None,
        pass_rate=round(sum(bools) / len(bools), 6) if bools else None,
    )


def report(status: te.EvalStatus, link: Callable[[str], str] | None = None) -> Report:
    """The report of an eval, finished or not (what has finished so far)."""
    results = sorted(status.results, key=lambda r: (r.case, r.repeat))
    rows = [_row(r, link) for r in results]
    by_case: dict[str, list[Row]] = {}
    for row in rows:
        by_case.setdefault(row.case, []).append(row)
    by_name: dict[str, list[te.EvaluationResult]] = {}
    for r in results:
        for s in r.scores:
            by_name.setdefault(s.name, []).append(s)
    seconds = [r.seconds for r in rows if r.end == "completed"]
    good = sum(r.passed for r in rows)
    return Report(
        eval_id=status.eval_id,
        dataset=status.dataset,
        agent=status.agent,
        agent_version=status.agent_version,
        phase=status.phase,
        total=status.total,
        done=len(rows),
        passed=good,
        pass_rate=round(good / len(rows), 6) if rows else 0.0,
        tokens=sum(r.tokens for r in rows),
        usd=round(sum(r.usd for r in rows), 8),
        unpriced=sum(r.unpriced for r in rows),
        p50_seconds=percentile(seconds, 50),
        p95_seconds=percentile(seconds, 95),
        repeat=status.repeat,
        rows=rows,
        cases=[_case_summary(c, rs) for c, rs in by_case.items()],
        evaluators=[_evaluator_summary(n, rs) for n, rs in by_name.items()],
    )


# --------------------------------------------------------------------------------- baselines

Change = Literal["regressed", "improved", "same", "new", "gone"]


class CaseDiff(_Model):
    case: str
    change: Change
    pass_rate: float | None = None  # now (None: gone)
    baseline_pass_rate: float | None = None  # then (None: new)
    scores: dict[str, float] = Field(default_factory=dict)  # each evaluator's mean, now minus then
    usd: float = 0.0  # now minus then
    seconds: float = 0.0  # mean latency, now minus then


class Diff(_Model):
    eval_id: str
    baseline: str
    cases: list[CaseDiff]
    regressed: list[str]
    improved: list[str]
    pass_rate: float  # now minus then
    usd: float  # total, now minus then
    p50_seconds: float
    p95_seconds: float
    note: str = ""  # what makes the two hard to compare: another dataset, no case in common


def _case_diff(now: CaseSummary | None, then: CaseSummary | None, name: str) -> CaseDiff:
    if now is None or then is None:
        kept = now or then
        assert kept is not None
        return CaseDiff(
            case=name,
            change="new" if then is None else "gone",
            pass_rate=now.pass_rate if now else None,
            baseline_pass_rate=then.pass_rate if then else None,
        )
    deltas = {n: round(now.means[n] - then.means[n], 6) for n in now.means if n in then.means}
    dropped = now.pass_rate < then.pass_rate - EPSILON or any(d < -EPSILON for d in deltas.values())
    rose = now.pass_rate > then.pass_rate + EPSILON or any(d > EPSILON for d in deltas.values())
    change: Change = "regressed" if dropped else "improved" if rose else "same"
    return CaseDiff(
        case=name,
        change=change,
        pass_rate=now.pass_rate,
        baseline_pass_rate=then.pass_rate,
        scores=deltas,
        usd=round(now.usd - then.usd, 8),
        seconds=round(now.seconds - then.seconds, 3),
    )


def compare(now: Report, then: Report) -> Diff:
    """`now` against the baseline `then`, case by case (a case regressed when its pass rate or any
    evaluator's mean fell, whatever else rose)."""
    a = {c.case: c for c in now.cases}
    b = {c.case: c for c in then.cases}
    names = [*a, *(n for n in b if n not in a)]
    cases = [_case_diff(a.get(n), b.get(n), n) for n in names]
    notes = []
    if then.dataset != now.dataset:
        notes.append(f"the baseline ran dataset {then.dataset!r}, this eval {now.dataset!r}")
    if a and b and not a.keys() & b.keys():
        notes.append("no case in common: each is new or gone, and none can regress")
    return Diff(
        eval_id=now.eval_id,
        baseline=then.eval_id,
        cases=cases,
        regressed=[c.case for c in cases if c.change == "regressed"],
        improved=[c.case for c in cases if c.change == "improved"],
        pass_rate=round(now.pass_rate - then.pass_rate, 6),
        usd=round(now.usd - then.usd, 8),
        p50_seconds=round(now.p50_seconds - then.p50_seconds, 3),
        p95_seconds=round(now.p95_seconds - then.p95_seconds, 3),
        note="; ".join(notes),
    )


def _names(cases: list[str], limit: int = 20) -> str:
    shown = ", ".join(cases[:limit])
    return shown + (f" and {len(cases) - limit} more" if len(cases) > limit else "")


def gate(
    now: Report, diff: Diff | None = None, *, fail_on_regression: bool = False, min_pass_rate: float | None = None
) -> list[str]:
    """Why a CI job fails, one line each naming the cases (empty: it passes)."""
    failures = []
    if now.done < now.total:
        failures.append(f"the eval finished {now.done} of {now.total} case runs")
    if fail_on_regression and diff is not None and diff.regressed:
        failures.append(f"{len(diff.regressed)} case(s) regressed against {diff.baseline}: {_names(diff.regressed)}")
    if min_pass_rate is not None and now.pass_rate < min_pass_rate - EPSILON:
        failing = list(dict.fromkeys(r.case for r in now.rows if not r.passed))
        failures.append(f"pass rate {now.pass_rate:.1%} is below {min_pass_rate:.1%}; failing: {_names(failing)}")
    return failures


# --------------------------------------------------------------------------------- rendering


def _cell(v: bool | float | str | None) -> str:
    if v is None:
        return "error"
    if isinstance(v, bool):
        return "✔" if v else "✘"
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)[:40]


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _md_row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def markdown(now: Report, diff: Diff | None = None) -> str:
    """The report (and its diff) as Markdown: a summary, the evaluators, one row per case run."""
    lines = [
        f"## Eval {now.eval_id}: {now.dataset} on {now.agent}"
        + (f" ({now.agent_version})" if now.agent_version else ""),
        "",
        f"{now.phase} · {now.done}/{now.total} done · {now.passed} passed ({now.pass_rate:.1%}) · "
        f"{now.tokens:,} tokens · {cost_words(now.usd, now.unpriced)} · "
        f"p50 {now.p50_seconds:.2f}s · p95 {now.p95_seconds:.2f}s",
        "",
    ]
    if not now.evaluators:  # none scored yet, or the dataset has none: an empty table reads as a broken one
        lines.append("No scores (a case with no evaluators passes when its run answers).")
    else:
        lines += ["| evaluator | mean | pass rate | errors |", "| --- | --- | --- | --- |"]
    for e in now.evaluators:
        mean = "-" if e.mean is None else f"{e.mean:.3f}"
        rate = "-" if e.pass_rate is None else f"{e.pass_rate:.1%}"
        lines.append(f"| {_md(e.name)} | {mean} | {rate} | {e.errors} |")
    names = list(dict.fromkeys(n for r in now.rows for n in r.scores))
    head = ["case", "#", "result", *map(_md, names), "turns", "tokens", "USD", "s", "run"]
    lines += ["", _md_row(head), "| --- " * len(head) + "|"]
    for r in now.rows:
        result = "pass" if r.passed else r.end if r.end != "completed" else "fail"
        scores = [_cell(r.scores.get(n)) if n in r.scores else "" for n in names]
        run = f"[{r.run_id}]({r.link})" if r.link else r.run_id
        cells = [_md(r.case), str(r.repeat), result, *scores, str(r.turns), str(r.tokens), f"{r.usd:.4f}"]
        lines.append(_md_row([*cells, f"{r.seconds:.2f}", _md(run)]))
    failing = [r for r in now.rows if not r.passed and (r.error or r.reasons)]
    if failing:
        lines += ["", "Why cases failed:"]
        for r in failing[:50]:
            why = r.error or "; ".join(f"{k}: {v}" for k, v in r.reasons.items())
            lines.append(f"- {_md(r.case)} #{r.repeat}: {_md(why)[:300]}")
    if now.repeat > 1:
        lines += ["", "| case | passed | spread |", "| --- | --- | --- |"]
        for c in now.cases:
            spread = ", ".join(f"{k} ±{v:.3g}" for k, v in c.spread.items() if v) or "none"
            lines.append(f"| {_md(c.case)} | {c.passed}/{c.runs} | {spread} |")
    if diff is not None:
        lines += ["", diff_markdown(diff)]
    return "\n".join(lines)


def diff_markdown(diff: Diff) -> str:
    lines = [
        f"### Against {diff.baseline}",
        "",
        f"pass rate {diff.pass_rate:+.1%} · cost {diff.usd:+.4f} USD · p50 {diff.p50_seconds:+.2f}s · "
        f"p95 {diff.p95_seconds:+.2f}s · {len(diff.regressed)} regressed · {len(diff.improved)} improved",
    ]
    if diff.note:
        lines += ["", f"Note: {diff.note}."]
    moved = [c for c in diff.cases if c.change != "same"]
    if moved:
        lines += ["", "| case | change | pass rate | scores | USD | s |", "| --- | --- | --- | --- | --- | --- |"]
        for c in moved:
            then = "-" if c.baseline_pass_rate is None else f"{c.baseline_pass_rate:.0%}"
            now = "-" if c.pass_rate is None else f"{c.pass_rate:.0%}"
            scores = ", ".join(f"{k} {v:+.3g}" for k, v in c.scores.items() if abs(v) > EPSILON) or "-"
            cells = f"{then} → {now} | {_md(scores)} | {c.usd:+.4f} | {c.seconds:+.2f}"
            lines.append(f"| {_md(c.case)} | {c.change} | {cells} |")
    return "\n".join(lines)
