"""The eval's plan, pure: which case runs (case × repeat) exist, under which ids, which to start
next, when to continue as new, and the tallies progress shows. EvalRun (eval_run.py) carries it out.

A case run's id is derived from the eval's id, the case's name and the repeat, never counted: an
eval that continues as new, or a worker that replays it, starts each case under the same id, and
a finished case (its result carried) is never started again.

No Temporal, no I/O, no clocks, no randomness.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any, cast

from pydantic import JsonValue

from durable_agent_runner.evals.cases import Case, Dataset
from durable_agent_runner.evals.context import EvaluationResult, EvaluatorContext, RunFacts, ToolCallFact
from durable_agent_runner.evals.evaluators import INLINE
from durable_agent_runner.evals.scoring import evaluate_case
from durable_agent_runner.machine import bounds
from durable_agent_runner.machine.texts import cost_words
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.types import evals as te

# Case runs started by one run of the eval before it continues as new (once those in flight end):
# each adds a child's start, its end and a scoring activity to the history (about 11 events; 5.4
# when it is scored in the workflow task, eval-inline-score-1.4.5), so 300 make 3,300 at most,
# below the 4,096 at which the server suggests continuing as new (it also does at 4 MB, which
# large answers reach first: the eval heeds both). While it drains, the places of the cases that
# end stay empty until the last one in flight ends (docs/benchmark.md, evals).
MAX_STARTS_PER_RUN = 300
MAX_STARTS_BEFORE_PACE = 100  # the bound of the evals started before eval-pace-1.4.4, which replay it
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class Slot:
    """One case run: the case, the repeat (1-based) and its run id."""

    case: Case
    repeat: int
    run_id: str


def case_run_id(eval_id: str, case: str, repeat: int) -> str:
    """`{eval id}.{case, made safe}-{hash}-{repeat}`: readable, and distinct for distinct names."""
    safe = _UNSAFE.sub("_", case).strip("_")[:60] or "case"
    digest = hashlib.sha256(case.encode()).hexdigest()[:6]
    return f"{eval_id}.{safe}-{digest}-{repeat}"


def slots(eval_id: str, dataset: Dataset, repeat: int) -> list[Slot]:
    """Every case run of the eval, case by case, each case's repeats together."""
    return [Slot(c, k, case_run_id(eval_id, c.name, k)) for c in dataset.cases for k in range(1, repeat + 1)]


def prompt_of(case: Case) -> str:
    """What the agent is asked: the case's input text, or its JSON value as JSON text."""
    if isinstance(case.inputs, str):
        return case.inputs
    return json.dumps(case.inputs, ensure_ascii=False)


def run_input(case: Case, spec: t.AgentSpec, share: t.Budget | None) -> t.RunInput:
    """The case run's input: its prompt to the frozen agent; or, for a case made from a recorded
    run (evals/from_run.py), that run's transcript before model call N, carried as a fork's is,
    so only the model is asked again, from call N on (no recorded tool or child run again)."""
    point = case.from_run
    if point is None:
        return t.RunInput(prompt=prompt_of(case), agent=spec.name, frozen=spec, budget=share)
    carry = t.Carry(
        agent=spec,
        messages=point.transcript(),
        turn=point.at_turn - 1,
        usage=t.Usage(),
        forked_from=t.ForkLink(run_id=point.run_id, turn=point.at_turn),
    )
    return t.RunInput(prompt="", agent=spec.name, carry=carry, budget=share)


def output_type(spec: t.AgentSpec, answered_by: str) -> tuple[dict[str, Any] | None, str | None]:
    """The typed output of the agent that answered (the run's own, or one of its team after a
    handoff): its JSON schema and type name, for MatchesSchema and IsInstance; (None, None): text."""
    agent = next((a for a in [spec, *spec.team] if a.name == answered_by), spec)
    return agent.output_schema, agent.output_name or None


def next_starts(
    all_slots: list[Slot], done: set[str], in_flight: set[str], concurrency: int, room: int, taken: int | None = None
) -> list[Slot]:
    """The case runs to start now: those neither done nor in flight, in order, up to the free
    places (`concurrency` less the `taken` ones: by default those in flight; the eval counts
    only the cases whose run goes on, not those being scored) and `room` (starts left in this
    run of the eval)."""
    free = min(concurrency - (len(in_flight) if taken is None else taken), room)
    if free <= 0:
        return []
    return list(islice(unstarted(all_slots, done, in_flight), free))


def unstarted(all_slots: list[Slot], done: Container[str], in_flight: Container[str]) -> Iterator[Slot]:
    """The case runs neither done nor in flight, in order."""
    return (s for s in all_slots if s.run_id not in done and s.run_id not in in_flight)


def score_context(request: te.ScoreInput, tool_calls: Sequence[ToolCallFact] = ()) -> EvaluatorContext:
    """What each evaluator of a finished case sees: the case, its answer and its run's facts."""
    case, usage = request.case, request.usage
    facts = RunFacts(
        turns=request.turns,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        usd=usage.cost_usd,
        seconds=request.seconds,
        tool_calls=list(tool_calls),
    )
    return EvaluatorContext(
        case_name=case.name,
        inputs=case.inputs,
        output=request.output,
        output_json=request.output_json,
        expected_output=case.expected_output,
        metadata=case.metadata,
        facts=facts,
        output_schema=request.output_schema,
        output_type_name=request.output_type_name,
    )


def scores(
    request: te.ScoreInput, ctx: EvaluatorContext, judge_replies: Mapping[int, str] | None = None
) -> list[EvaluationResult]:
    """Every score of a finished case, wherever it is scored: the dataset's evaluators, then the
    case's own, each on `ctx` (`judge_replies`: the judges' replies, by evaluator index)."""
    dataset = Dataset(name="eval", cases=[], evaluators=request.evaluators)
    return evaluate_case(request.case, dataset, ctx, judge_replies)


def inline_scores(request: te.ScoreInput) -> te.Scored | None:
    """The case's scores, when each evaluator it runs is a pure, cheap built-in (evaluators.INLINE):
    the eval scores it in the workflow task that learns its run ended, with no activity, as the
    scoring activity would (an evaluator's bad arguments are its errored score there too). None:
    some evaluator needs the scoring activity (a judge, a transcript, a team's own code)."""
    if not all(spec.name in INLINE for spec in [*request.evaluators, *request.case.evaluators]):
        return None
    return te.Scored(scores=scores(request, score_context(request)))


def passed(result_scores: list[EvaluationResult], end: te.CaseEnd) -> bool:
    """A case passes when its run answered and no assertion failed or errored."""
    if end != "completed":
        return False
    return all(r.error is None and r.value is not False for r in result_scores)


def output_json(text: str) -> JsonValue:
    """The answer parsed when it is a JSON object or array (typed output), else None. Within the
    bounds: an answer nested a million levels deep is text, not a RecursionError in the eval."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{":
        return None
    try:
        return cast(JsonValue, bounds.parse_json(stripped))
    except bounds.OutsideDataError:
        return None


@dataclass(frozen=True)
class Tally:
    done: int
    passed: int
    failed: int
    usage: te.Usage

    def plus(self, r: te.CaseResult) -> Tally:
        return Tally(self.done + 1, self.passed + r.passed, self.failed + (not r.passed), self.usage + r.usage)


def tally(results: Iterable[te.CaseResult]) -> Tally:
    total = Tally(0, 0, 0, te.Usage())
    for r in results:
        total = total.plus(r)
    return total


class Results:
    """The eval's finished case runs by run id, in the order they ended, with their tally kept as
    each is added: progress costs the same at case 2,000 as at case 1 (a tally from scratch at
    every end made a large eval's workflow tasks quadratic in its cases). The sums are the same,
    to the bit, as a tally from scratch in that order."""

    def __init__(self, results: Iterable[te.CaseResult] = ()) -> None:
        self._by_id: dict[str, te.CaseResult] = {}
        self.tally = tally(())
        for r in results:
            self.add(r)

    def add(self, r: te.CaseResult) -> None:
        known = r.run_id in self._by_id
        self._by_id[r.run_id] = r
        # A case ends once (EvalRun starts each once); were one added again, count from scratch.
        self.tally = tally(self._by_id.values()) if known else self.tally.plus(r)

    def __contains__(self, run_id: object) -> bool:
        return run_id in self._by_id

    def __len__(self) -> int:
        return len(self._by_id)

    def ids(self) -> set[str]:
        return set(self._by_id)

    def all(self) -> list[te.CaseResult]:
        return list(self._by_id.values())


def summary_line(t: Tally, total: int) -> str:
    """The eval's summary for the Web UI: `12/50 done · 10 passed · 2 failed`."""
    spent = cost_words(t.usage.cost_usd, t.usage.unpriced)
    return f"{t.done}/{total} done · {t.passed} passed · {t.failed} failed · {spent}"


def should_drain(started_here: int, suggested: bool, most: int | None = None) -> bool:
    """Whether this run of the eval stops starting cases, to continue as new once those in flight
    end: the server suggests it, or it started `most` (MAX_STARTS_PER_RUN)."""
    return suggested or started_here >= (MAX_STARTS_PER_RUN if most is None else most)


def budget_failed(slot: Slot, why: str) -> te.CaseResult:
    """A case never started because the eval's budget was spent (on_budget "fail")."""
    return te.CaseResult(case=slot.case.name, repeat=slot.repeat, run_id=slot.run_id, end="budget", error=why)
