"""EvalRun: a durable eval. The agent is resolved once and frozen, so every case runs the same
version; each case (× repeat) runs as a child AgentRun under an id derived from the eval's id and
the case (eval_plan.py), at most `concurrency` at once; a case is scored when its run ends, in an
activity (or, asked with `inline_scoring`, in the workflow task when its evaluators are all cheap
pure built-ins: eval-inline-score-1.4.5), while the next case starts in its place (eval-pace-1.4.4).
A worker killed or a server restarted: the eval replays, a finished case keeps its result and
is never run again, a case in flight is awaited as the child run it is.

The budget covers every case, as a run's covers its children (machine/budget.py): each case
starts with its share of what is left; when nothing is left the eval pauses until a person raises
it (`eval.resume`), or fails the cases left, as `on_budget` says. Past MAX_STARTS_PER_RUN starts it
lets the cases in flight end and continues as new, carrying the results.

Determinism rules for this module: no I/O, no clocks, no randomness. Time comes from
`workflow.now()`; child ids from eval_plan.case_run_id.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any, NoReturn

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributeUpdate
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
    FailureError,
    TimeoutType,
    WorkflowAlreadyStartedError,
)
from temporalio.exceptions import TimeoutError as ActivityTimeout
from temporalio.workflow import ParentClosePolicy

from durable_agent_runner.evals.context import EvaluationResult, one_line
from durable_agent_runner.machine import eval_plan as plan
from durable_agent_runner.machine.budget import Ledger
from durable_agent_runner.machine.control import PAUSE_LIMIT
from durable_agent_runner.machine.texts import no_worker_serves
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows import versions
from durable_agent_runner.workflows.patches import (
    EVAL_BEAT_PATCH,
    EVAL_CANCEL_PATCH,
    EVAL_INLINE_PATCH,
    EVAL_PACE_PATCH,
)
from durable_agent_runner.workflows.types import evals as te

SCORE_ATTEMPT = timedelta(seconds=300)  # an LLM judge's model call included
# The scoring activity beats every 2 s (activities/model.heartbeating), as a model call does: a
# worker that died mid-scoring is noticed within 10 s (eval-score-beat-1.4.5), as a model call's.
SCORE_BEAT = timedelta(seconds=10)
SCORE_BEAT_BEFORE = timedelta(seconds=30)  # of evals started before the patch, and of ScoreRun
SCORE_RETRY = RetryPolicy(maximum_attempts=5, maximum_interval=timedelta(seconds=30))
RESOLVE_RETRY = RetryPolicy(maximum_attempts=5)
BUDGET_KINDS = ("TokenBudgetExceeded", "CostBudgetExceeded")


async def score(request: te.ScoreInput, summary: str, beat: timedelta = SCORE_BEAT_BEFORE) -> te.Scored:
    """The scoring activity's scores (an eval's case, or a live run's: score_run.py); a scoring
    that fails for good is one errored score, never the caller's failure. `beat`: its heartbeat
    timeout, how soon a dead worker's scoring is taken up again."""
    try:
        scored: te.Scored = await workflow.execute_activity(
            te.EVAL_SCORE_ACTIVITY,
            request,
            result_type=te.Scored,
            start_to_close_timeout=SCORE_ATTEMPT,
            heartbeat_timeout=beat,
            retry_policy=SCORE_RETRY,
            summary=summary,
        )
        return scored
    except ActivityError as err:
        why = err.cause.message if isinstance(err.cause, FailureError) else str(err)
        return te.Scored(scores=[EvaluationResult(name="scoring", error=one_line(f"scoring failed: {why}", 500))])


# Outside temporalio's sandbox, as AgentRun (workflows/agent.py says why); tests replay it inside.
@workflow.defn(name=te.EVAL_WORKFLOW, sandboxed=False)
class EvalRun:
    @workflow.init
    def __init__(self, input: te.EvalInput) -> None:
        versions.started_on_2_0()  # before any command: 2.0's path, or a 1.x eval's patches (workflows/versions.py)
        carry = input.carry or te.EvalCarry()
        self._input = input
        self._results = plan.Results(carry.results)
        self._running: dict[str, plan.Slot] = {}  # cases in flight: their run, then their scoring
        self._ended: dict[str, t.Usage] = {}  # of those, being scored (patched): what their run spent
        self._paced = False  # a case's place is free when its run ends (EVAL_PACE_PATCH)
        self._inline = False  # cheap pure evaluators score in the workflow task (inline_scoring)
        self._beat = SCORE_BEAT_BEFORE  # the scoring activity's heartbeat timeout (EVAL_BEAT_PATCH)
        self._spec: t.AgentSpec | None = carry.frozen
        self._ledger: Ledger | None = Ledger(carry.budget, shared=True) if carry.budget else None
        self._started_at = carry.started_at
        self._phase: te.EvalPhase = "running"
        self._why = ""
        self._raised_by: str | None = None

    # ------------------------------------------------------------------------------ the run

    @workflow.run
    async def run(self, input: te.EvalInput) -> te.EvalResult:
        eval_id = workflow.info().workflow_id
        # The next case starts when a case's run ends, beside its scoring, not once it is scored;
        # and a run of the eval starts up to 300 cases before it continues as new, not 100.
        self._paced = versions.patched(EVAL_PACE_PATCH)
        # Asked: a case whose evaluators are all cheap pure built-ins is scored here, with no activity.
        self._inline = input.inline_scoring and versions.patched(EVAL_INLINE_PATCH)
        # A worker killed mid-scoring is noticed in 10 s, not 30.
        self._beat = SCORE_BEAT if versions.patched(EVAL_BEAT_PATCH) else SCORE_BEAT_BEFORE
        most = plan.MAX_STARTS_PER_RUN if self._paced else plan.MAX_STARTS_BEFORE_PACE
        self._started_at = self._started_at or workflow.now()
        spec = self._spec = self._spec or await self._resolve(input)
        if self._ledger is None and (input.budget_usd is not None or input.budget_tokens is not None):
            on = input.on_budget or spec.on_budget
            budget = t.Budget(usd=input.budget_usd, tokens=input.budget_tokens, on_budget=on)
            self._ledger = Ledger(budget, shared=True)
        all_slots = plan.slots(eval_id, input.dataset, input.repeat)
        self._details(len(all_slots))
        started = 0
        tasks: set[asyncio.Task[None]] = set()
        while len(self._results) < len(all_slots) or self._running:
            draining = plan.should_drain(started, workflow.info().is_continue_as_new_suggested(), most)
            if draining and not self._running:
                await self._continue_as_new(input)
            if not draining:
                room = most - started
                taken = len(self._running) - len(self._ended)  # being scored takes no place
                starts = plan.next_starts(
                    all_slots, self._results.ids(), set(self._running), input.concurrency, room, taken
                )
                if self._ledger is not None:
                    self._ledger.expect(len(starts))  # the cases started together share what is left
                for slot in starts:
                    if not await self._may_start(all_slots):
                        break
                    share = self._ledger.grant(slot.run_id, self._used()) if self._ledger is not None else None
                    self._running[slot.run_id] = slot
                    task = asyncio.create_task(self._case(input, spec, slot, share))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                    started += 1
            if len(self._results) < len(all_slots) or self._running:
                await self._next_end()
        self._phase = "completed"
        self._details(len(all_slots))
        return te.EvalResult(status=self.status())

    async def _next_end(self) -> None:
        """Until one more case has a result, or (patched) one more case's run has ended. Bounded
        by the case runs' own bounds (max turns, timeouts, approvals' and pauses' limits)."""
        count = self._progress()
        await workflow.wait_condition(lambda: self._progress() != count)

    def _progress(self) -> tuple[int, int]:
        return len(self._results), len(self._ended)

    def _resumed(self) -> bool:
        return self._raised_by is not None

    async def _resolve(self, input: te.EvalInput) -> t.AgentSpec:
        """The agent, frozen once for every case, by a worker that serves it."""
        queue = t.agent_task_queue(workflow.info().task_queue, input.agent)
        request = t.ResolveAgentInput(agent=input.agent, model=input.model)
        try:
            spec: t.AgentSpec = await workflow.execute_activity(
                t.RESOLVE_AGENT_ACTIVITY,
                request,
                result_type=t.AgentSpec,
                task_queue=queue,
                schedule_to_start_timeout=timedelta(seconds=input.agent_wait_seconds),
                start_to_close_timeout=timedelta(seconds=t.RESOLVE_SECONDS),
                heartbeat_timeout=timedelta(seconds=10),
                retry_policy=RESOLVE_RETRY,
                summary=f"resolve agent {input.agent} for the eval",
            )
        except ActivityError as err:
            if isinstance(err.cause, CancelledError) and versions.patched(EVAL_CANCEL_PATCH):
                raise asyncio.CancelledError from err  # the eval was cancelled: it ends cancelled
            if isinstance(err.cause, ActivityTimeout) and err.cause.type == TimeoutType.SCHEDULE_TO_START:
                why = no_worker_serves(input.agent, queue, input.agent_wait_seconds)
                raise ApplicationError(why, type="UnknownAgent") from None
            why = err.cause.message if isinstance(err.cause, FailureError) else str(err)
            raise ApplicationError(f"agent '{input.agent}' could not be resolved: {why}", type="UnknownAgent") from None
        workflow.upsert_search_attributes([t.SA_AGENT.value_set(spec.name), t.SA_VERSION.value_set(spec.version)])
        return spec

    # --------------------------------------------------------------------------- the budget

    def _used(self) -> t.Usage:
        """What the cases spent: those with a result, and the runs of those being scored."""
        used = self._results.tally.usage
        for usage in self._ended.values():
            used = used + usage
        return used

    async def _may_start(self, all_slots: list[plan.Slot]) -> bool:
        """Whether the next case may start: something is left of the budget, or a person raised
        it while the eval paused; on_budget "fail" ends the cases left as failed ("budget")."""
        ledger = self._ledger
        while ledger is not None:
            stop = ledger.stop(self._used(), "before the next case", first=True)
            if stop is None:
                return True
            if self._running:  # the cases in flight give back what they did not spend as they end
                return False
            if not ledger.pauses(stop):
                for slot in all_slots:
                    if slot.run_id not in self._results and slot.run_id not in self._running:
                        self._results.add(plan.budget_failed(slot, stop.message))
                self._details(len(all_slots))
                return False
            await self._pause(stop.message, len(all_slots))
        return True

    async def _pause(self, why: str, total: int) -> None:
        self._phase, self._why, self._raised_by = "paused", why, None
        workflow.upsert_search_attributes([t.SA_PHASE.value_set(t.Phase.PAUSED)])
        self._details(total)
        try:
            await workflow.wait_condition(self._resumed, timeout=PAUSE_LIMIT, timeout_summary="eval pause limit")
        except TimeoutError:
            self._ledger = Ledger(t.Budget(usd=0.0, tokens=0, on_budget="fail"), shared=True)  # fail the rest
        self._phase, self._why, self._raised_by = "running", "", None
        workflow.upsert_search_attributes([t.SA_PHASE.value_unset()])
        self._details(total)

    @workflow.update(name=te.EVAL_RESUME_UPDATE)
    def resume(self, raised: t.BudgetRaise) -> t.BudgetStatus:
        assert self._ledger is not None
        self._ledger.raised(raised)
        self._raised_by = "a person"
        return self._ledger.status(self._used())

    @resume.validator
    def _check_resume(self, raised: t.BudgetRaise) -> None:
        if self._ledger is None or self._phase != "paused":
            raise ValueError("this eval is not paused on its budget: nothing to raise")
        refused = self._ledger.refuse_raise(raised)
        if refused:
            raise ValueError(refused)

    # ---------------------------------------------------------------------------- one case

    async def _case(self, input: te.EvalInput, spec: t.AgentSpec, slot: plan.Slot, share: t.Budget | None) -> None:
        began = workflow.now()
        result, error = await self._child(input, spec, slot, share)
        end: te.CaseEnd = "completed"
        usage, output, turns, answered_by = t.Usage(), "", 0, spec.name
        if isinstance(result, t.RunResult):
            usage, output, turns, answered_by = result.usage, result.output, result.turns, result.agent
        else:
            end, usage = result
        if self._paced:  # its place and its budget's share are free: the loop starts the next case
            self._ended[slot.run_id] = usage
            if self._ledger is not None:
                self._ledger.release(slot.run_id)
        scored = te.Scored()
        if end == "completed":
            typed = plan.output_type(spec, answered_by)
            scored = await self._score(
                input, slot, output, turns, usage, (workflow.now() - began).total_seconds(), typed
            )
        seconds = (workflow.now() - began).total_seconds()
        done = te.CaseResult(
            case=slot.case.name,
            repeat=slot.repeat,
            run_id=slot.run_id,
            end=end,
            error=error,
            output=output[: te.MAX_OUTPUT_CHARS],
            scores=scored.scores,
            passed=plan.passed(scored.scores, end),
            turns=turns,
            usage=usage + scored.usage,
            seconds=round(seconds, 3),
            started_at=began,
        )
        if self._ledger is not None:
            self._ledger.release(slot.run_id)
        self._running.pop(slot.run_id, None)
        self._ended.pop(slot.run_id, None)
        self._results.add(done)
        self._details(len(self._input.dataset.cases) * self._input.repeat)

    async def _child(
        self, input: te.EvalInput, spec: t.AgentSpec, slot: plan.Slot, share: t.Budget | None
    ) -> tuple[t.RunResult | tuple[te.CaseEnd, t.Usage], str | None]:
        """The case's run: its result, or how it ended without one, what it spent and why."""
        name = slot.case.name
        try:
            result: t.RunResult = await workflow.execute_child_workflow(
                t.WORKFLOW_NAME,
                plan.run_input(slot.case, spec, share),
                id=slot.run_id,
                result_type=t.RunResult,
                parent_close_policy=ParentClosePolicy.REQUEST_CANCEL,
                static_summary=f"eval case {name[:80]} #{slot.repeat}",
            )
            return result, None
        except WorkflowAlreadyStartedError:
            why = f"a run with id {slot.run_id} exists that this eval did not start"
            return ("failed", t.Usage()), why
        except ChildWorkflowError as err:
            cause = err.cause
            why = cause.message if isinstance(cause, FailureError) else err.message
            if isinstance(cause, CancelledError):
                return ("cancelled", t.Usage()), "cancelled"
            kind = (cause.type if isinstance(cause, ApplicationError) else None) or type(cause).__name__
            usage = t.Usage()
            if isinstance(cause, ApplicationError) and cause.details:
                try:
                    for part in t.ChildUsage.model_validate(cause.details[0]).usage_by_agent.values():
                        usage = usage + part
                except ValueError:
                    pass  # a failure raised elsewhere: what it spent is not known
            end: te.CaseEnd = "budget" if kind in BUDGET_KINDS else "failed"
            return (end, usage), one_line(f"{kind}: {why}", 500)

    async def _score(
        self,
        input: te.EvalInput,
        slot: plan.Slot,
        output: str,
        turns: int,
        usage: t.Usage,
        seconds: float,
        typed: tuple[dict[str, Any] | None, str | None],
    ) -> te.Scored:
        """The case's scores: from the scoring activity (scoring that fails is one errored score), or
        computed here when each of its evaluators is a cheap pure built-in (plan.inline_scores)."""
        request = te.ScoreInput(
            case=slot.case,
            evaluators=input.dataset.evaluators,
            run_id=slot.run_id,
            output=output,
            output_json=plan.output_json(output),
            turns=turns,
            usage=usage,
            seconds=round(seconds, 3),
            judge_model=input.model,
            output_schema=typed[0],
            output_type_name=typed[1],
        )
        inline = plan.inline_scores(request) if self._inline else None
        return (
            inline
            if inline is not None
            else await score(request, f"score case {slot.case.name[:80]} #{slot.repeat}", self._beat)
        )

    # ------------------------------------------------------------------------------ views

    def _details(self, total: int) -> None:
        """The Web UI's current details and the eval's counters as search attributes."""
        line = plan.summary_line(self._results.tally, total)
        workflow.set_current_details(f"{self._phase}: {line}" + (f" · {self._why}" if self._why else ""))
        used = self._used()
        updates: list[SearchAttributeUpdate[Any]] = [
            t.SA_TOKENS.value_set(used.total_tokens),
            t.SA_COST.value_set(round(used.cost_usd, 6)),
        ]
        if self._phase == "completed":
            updates.append(t.SA_PHASE.value_set(t.Phase.COMPLETED))
        workflow.upsert_search_attributes(updates)

    @workflow.query(name=te.EVAL_STATUS_QUERY)
    def status(self) -> te.EvalStatus:
        results = self._results.all()
        tally = self._results.tally
        i = self._input
        return te.EvalStatus(
            eval_id=workflow.info().workflow_id,
            dataset=i.dataset.name,
            agent=i.agent,
            agent_version=self._spec.version if self._spec else "",
            phase=self._phase,
            why=self._why,
            total=len(i.dataset.cases) * i.repeat,
            done=tally.done,
            passed=tally.passed,
            failed=tally.failed,
            running=sorted(r for r in self._running if r not in self._ended),
            scoring=sorted(self._ended),
            usage=self._used(),
            budget=self._ledger.status(self._used()) if self._ledger is not None else None,
            baseline=i.baseline,
            concurrency=i.concurrency,
            repeat=i.repeat,
            started_at=self._started_at,
            results=results,
        )

    async def _continue_as_new(self, input: te.EvalInput) -> NoReturn:
        await workflow.wait_condition(workflow.all_handlers_finished)
        carry = te.EvalCarry(
            results=self._results.all(),
            budget=self._ledger.budget if self._ledger is not None else None,
            agent_version=self._spec.version if self._spec else "",
            started_at=self._started_at,
            frozen=self._spec,
        )
        workflow.continue_as_new(input.model_copy(update={"carry": carry}))
