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
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, FailureError, TimeoutType
from temporalio.exceptions import TimeoutError as ActivityTimeout
from temporalio.workflow import ActivityHandle

from durable_agent_runner.machine import eval_plan as plan
from durable_agent_runner.machine.budget import Ledger
from durable_agent_runner.machine.control import PAUSE_LIMIT
from durable_agent_runner.machine.texts import no_worker_serves
from durable_agent_runner.workflows import eval_cases as cases
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows import versions
from durable_agent_runner.workflows.eval_cases import SCORE_BEAT, SCORE_BEAT_BEFORE
from durable_agent_runner.workflows.patches import (
    EVAL_BEAT_PATCH,
    EVAL_CANCEL_PATCH,
    EVAL_INLINE_PATCH,
    EVAL_LANES_PATCH,
    EVAL_PACE_PATCH,
)
from durable_agent_runner.workflows.types import evals as te

RESOLVE_RETRY = RetryPolicy(maximum_attempts=5)


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
        self._started_here = 0  # cases started by this run of the eval (it continues as new past `most`)
        self._lanes_active = 0
        self._tasks: set[asyncio.Task[None]] = set()
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
        # Each place a lane, whose every command answers one event (the module's docstring).
        lanes = versions.patched_2x(EVAL_LANES_PATCH)
        most = plan.MAX_STARTS_PER_RUN if self._paced else plan.MAX_STARTS_BEFORE_PACE
        self._started_at = self._started_at or workflow.now()
        spec = self._spec = self._spec or await self._resolve(input)
        if self._ledger is None and (input.budget_usd is not None or input.budget_tokens is not None):
            on = input.on_budget or spec.on_budget
            budget = t.Budget(usd=input.budget_usd, tokens=input.budget_tokens, on_budget=on)
            self._ledger = Ledger(budget, shared=True)
        all_slots = plan.slots(eval_id, input.dataset, input.repeat)
        self._details(len(all_slots))
        if lanes:
            await self._lanes(input, spec, all_slots, most)
            if len(self._results) < len(all_slots):  # drained: the cases left go on in a new run of the eval
                await self._continue_as_new(input)
        while len(self._results) < len(all_slots) or self._running:  # the loop before lanes
            draining = self._draining(most)
            if draining and not self._running:
                await self._continue_as_new(input)
            if not draining:
                room = most - self._started_here
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
                    self._keep(asyncio.create_task(self._case(input, spec, slot, share)))
                    self._started_here += 1
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
                for slot in list(plan.unstarted(all_slots, self._results, self._running)):
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
        """One case, as the loop before lanes ran it: its run, then its scores, then its row."""
        began = workflow.now()
        result, error = await cases.child(input, spec, slot, share)
        r = cases.ran(slot, began, spec, result, error)
        if self._paced:  # its place and its budget's share are free: the loop starts the next case
            self._ran(r)
        now = self._scores_now(input, spec, r)
        got = now if isinstance(now, te.Scored) else await cases.score(now, cases.summary(slot), self._beat)
        self._record(cases.case_result(r, got))

    def _scores_now(self, input: te.EvalInput, spec: t.AgentSpec, r: cases.Ran) -> te.Scored | te.ScoreInput:
        """The ended case's scores when they need no activity (no answer to score; inline
        scoring's built-ins), else the scoring activity's request."""
        if r.end != "completed":
            return te.Scored()
        request = cases.score_request(input, spec, r)
        inline = plan.inline_scores(request) if self._inline else None
        return inline if inline is not None else request

    def _ran(self, r: cases.Ran) -> None:
        """A case's run has ended: while it is scored, its place and its budget's share are free."""
        self._ended[r.slot.run_id] = r.usage
        if self._ledger is not None:
            self._ledger.release(r.slot.run_id)

    def _record(self, done: te.CaseResult) -> None:
        if self._ledger is not None:
            self._ledger.release(done.run_id)
        self._running.pop(done.run_id, None)
        self._ended.pop(done.run_id, None)
        self._results.add(done)
        self._details(len(self._input.dataset.cases) * self._input.repeat)

    # ---------------------------------------------------------------------------- lanes

    async def _lanes(self, input: te.EvalInput, spec: t.AgentSpec, all_slots: list[plan.Slot], most: int) -> None:
        """Until every case has a result or this run of the eval drains: up to `concurrency` lanes
        run the cases; once none runs and nothing is in flight, the budget decides whether more
        start (a person's raise after a pause), or the rest fail."""
        while len(self._results) < len(all_slots) and not self._draining(most):
            if not await self._may_start(all_slots):  # nothing is in flight here: the rest failed
                break
            count = min(input.concurrency, sum(1 for s in all_slots if s.run_id not in self._results))
            if self._ledger is not None:
                self._ledger.expect(count)  # the cases started together share what is left
            self._lanes_active = count
            for _ in range(count):
                self._keep(asyncio.create_task(self._lane(input, spec, all_slots, most)))
            await workflow.wait_condition(lambda: not self._lanes_active and not self._running)

    async def _lane(self, input: te.EvalInput, spec: t.AgentSpec, all_slots: list[plan.Slot], most: int) -> None:
        """Cases one after another, while one is left to start, the eval is not draining and the
        budget allows. When a case's run ends, its scoring and the next case start in that step."""
        try:
            while True:
                slot = next(plan.unstarted(all_slots, self._results, self._running), None)
                if slot is None or self._draining(most):
                    return
                if self._ledger is not None and self._ledger.stop(self._used(), "before the next case", first=True):
                    return  # spent: once nothing is in flight, the loop pauses the eval or fails the rest
                share = self._ledger.grant(slot.run_id, self._used()) if self._ledger is not None else None
                self._running[slot.run_id] = slot
                self._started_here += 1
                began = workflow.now()
                result, error = await cases.child(input, spec, slot, share)
                r = cases.ran(slot, began, spec, result, error)
                self._ran(r)
                self._score(input, spec, r)
        finally:
            self._lanes_active -= 1

    def _score(self, input: te.EvalInput, spec: t.AgentSpec, r: cases.Ran) -> None:
        """The ended case's scoring, scheduled now (or computed now: inline, or nothing to score);
        its row is recorded when its scores are in."""
        now = self._scores_now(input, spec, r)
        if isinstance(now, te.Scored):
            self._record(cases.case_result(r, now))
            return
        handle = cases.start_score(now, cases.summary(r.slot), self._beat)
        self._keep(asyncio.create_task(self._recorded(r, handle)))

    async def _recorded(self, r: cases.Ran, handle: ActivityHandle[te.Scored]) -> None:
        self._record(cases.case_result(r, await cases.scored(handle)))

    def _keep(self, task: asyncio.Task[None]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _draining(self, most: int) -> bool:
        return plan.should_drain(self._started_here, workflow.info().is_continue_as_new_suggested(), most)

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
