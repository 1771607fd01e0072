"""How a turn's calls are carried out: each call's life is the call machine's (machine/call.py:
asked about as its approval says, decided, run the one way its tool runs, in doubt, resolved);
this module does each step it asks for (a hook, a wait for a person, the tool as a local or a
routed activity, a child run, whose usage counts here however it ends) and feeds back what
happened.

Determinism rules for this module, as for all of workflows/: no I/O, no clocks, no randomness,
no threads. Time comes from `workflow.now()`; activities are called by their declared names.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, ChildWorkflowError, FailureError
from temporalio.exceptions import TimeoutError as ActivityTimeout
from temporalio.workflow import ParentClosePolicy

from durable_agent_runner.machine import call as machine
from durable_agent_runner.machine import child, drafts, requests
from durable_agent_runner.machine.calls import (
    AttemptEnd,
    PlannedCall,
)
from durable_agent_runner.machine.rules import Stop
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows import versions
from durable_agent_runner.workflows.notify_steps import Notifier, Wait
from durable_agent_runner.workflows.steps import Steps, agent_queue

# How long a parent waits for a cancelled child's usage (signalled as the child ends).
CHILD_USAGE_WAIT = timedelta(seconds=30)


class CallSteps:
    """The calls of a turn, each carried out by `carry_out`; `TurnSteps` runs a turn's calls."""

    def __init__(self, steps: Steps, notifier: Notifier) -> None:
        self.steps, self.notifier = steps, notifier
        self.ahead_next: tuple[str, t.ModelCallInput] | None = None  # a call's id, the model call it makes after
        self.made_ahead: t.AheadReply | None = None  # what that call's activity brought back

    async def carry_out(self, agent: t.AgentSpec, planned: PlannedCall) -> t.ToolMessage:
        """One planned call, as the call machine decides (machine/call.py): its approval check, a
        person's decision, its run, a doubt and its resolution are each one step done here, and
        what happened is fed back, until the call has its message. Siblings run meanwhile."""
        doubted = self.steps.s.doubts.times(planned.call.call_id)  # a --live-tools fork carries its origin's
        moved = machine.start(planned, self.steps.s.turn, self._call_ctx(agent), doubted)
        before: machine.Stage | None = None
        while True:
            self._took(agent, moved, before)
            if moved.call.message is not None:
                return moved.call.message
            before = moved.call.stage
            happened = await self._do(agent, moved.call, moved.steps[0])
            moved = machine.advance(moved.call, happened, self._call_ctx(agent))

    def _call_ctx(self, agent: t.AgentSpec) -> machine.Ctx:
        s = self.steps.s
        return machine.Ctx(
            agent=agent,
            now=workflow.now(),
            run_id=workflow.info().workflow_id,
            always=s.approvals.always,
            forked_from=s.forked_from.run_id if s.forked_from is not None else None,
            patched=versions.patched,
        )

    def _took(self, agent: t.AgentSpec, moved: machine.Transition, before: machine.Stage | None) -> None:
        """A call's transition, carried into the run by the machine (machine/drafts.record: the
        books that status, queries and the update validators read, its events, what it does);
        what it leaves to tell Temporal is told here. The phase is refreshed only as a call starts
        or stops waiting for a person, as each refresh may write search attributes."""
        ahead = self.made_ahead.began_at if self.made_ahead is not None else None
        kept = drafts.record(self.steps.s, self.steps.tracker, agent, moved, before, workflow.now(), ahead)
        drafts.keep(kept.books, self.steps.s), drafts.keep(kept.tracker, self.steps.tracker)
        took = kept.took
        if took.said:
            workflow.set_current_details(self.steps.s.details())
        if took.phase is not None:
            self.steps.set_phase(*took.phase)

    async def _do(self, agent: t.AgentSpec, c: machine.Call, step: machine.Step) -> machine.Happened:
        """One step of a call, carried out; what happened, for the machine."""
        if isinstance(step, machine.CheckApproval):
            check = await self.steps.hook(agent, "approval", c.tool, call_id=c.call_id, arguments=step.arguments)
            return machine.Checked(call_id=c.call_id, result=check)
        if isinstance(step, machine.AskPerson):
            return await self._ask(agent, c, step)
        if isinstance(step, machine.AwaitOutside):
            return await self._await_outside(c, step)
        if isinstance(step, machine.RunTool):
            return await self._tool(agent, c, step)
        if isinstance(step, machine.StartChild):
            message = await self._child(agent, c.planned, step.args)
            return machine.Ran(call_id=c.call_id, content=message.content, is_error=message.is_error)
        raise self.steps.failure(step.message, step.error)

    async def _ask(self, agent: t.AgentSpec, c: machine.Call, step: machine.AskPerson) -> machine.Happened:
        """Waits for a person: a decision on the call (`client.py approve|reject`, the signal or the
        update), a resolution of the call in doubt (`client.py resolve`), or an answer to its
        question (`client.py answer`), each recorded at the door by the handlers; or for
        `step.timeout`. A cancel ends the wait like any other."""
        s = self.steps.s
        spec = agent.tool(c.tool)
        own = agent.notify.escalate_after if agent.notify is not None else None
        escalate = spec.escalate_after if spec is not None and spec.escalate_after is not None else own
        if step.about == "question":

            def answered() -> bool:
                return s.questions.answered(c.call_id) is not None

            summary = f"answer timeout for {c.tool} {c.call_id}"
            label = f"question-{c.turn}-{c.call_id}"
            if not await self._person(agent, c, step, "question", label, c.waits_for(), escalate, answered, summary):
                return machine.TimedOut(call_id=c.call_id)
            answer = s.questions.answered(c.call_id)
            assert answer is not None
            return machine.Answered(record=answer)
        if step.about == "approval":

            def decided() -> bool:
                return s.approvals.decided(c.call_id) is not None

            summary = f"approval timeout for {c.tool} {c.call_id}"
            label = f"approval-{c.turn}-{c.call_id}"
            if not await self._person(agent, c, step, "approval", label, c.waits_for(), escalate, decided, summary):
                return machine.TimedOut(call_id=c.call_id)
            record = s.approvals.decided(c.call_id)
            assert record is not None
            return machine.Decided(record=record)
        assert c.doubt is not None
        n = c.doubt.doubt

        def resolved() -> bool:
            return s.doubts.decided(c.call_id, n) is not None

        why, summary = f"ended without a result: {c.doubt.ended}", f"in-doubt limit for {c.tool} ({c.call_id})"
        label = f"doubt-{c.turn}-{c.call_id}-{n}"
        if not await self._person(agent, c, step, "doubt", label, why, escalate, resolved, summary):
            return machine.TimedOut(call_id=c.call_id)
        resolution = s.doubts.decided(c.call_id, n)
        assert resolution is not None
        return machine.Resolved(record=resolution)

    async def _person(
        self, agent: t.AgentSpec, c: machine.Call, step: machine.AskPerson, kind: t.WaitKind, label: str, why: str,
        escalate: float | None, done: Callable[[], bool], summary: str,
    ) -> bool:  # fmt: skip
        """One wait for a person, the same for an approval, a doubt and a question: the run's
        channels hear of it meanwhile (workflows/notify_steps.py), as `label` (unique in the run).
        True once `done`, False when `step.timeout` ran out first."""
        wait = Wait(kind, label, c.turn, why, c.call_id, c.tool, c.arguments, escalate, open=lambda: not done())
        try:
            async with self.notifier.notifying(agent, wait):
                await workflow.wait_condition(done, timeout=step.timeout, timeout_summary=summary)
        except TimeoutError:
            return False
        return True

    async def _await_outside(self, c: machine.Call, step: machine.AwaitOutside) -> machine.Happened:
        """The wait of a call completed from outside (`@tool(completes="outside")`,
        docs/outside-completion.md): its tool's activity started the work and returned; the run
        waits, durably, for the `complete_call` update (recorded at the door by the handler once
        its validator passed) or for the tool's timeout. Workflow state and one timer, not an
        activity: a restart replays it with nothing run again, and no task token leaves the
        worker. It notifies no one: it waits for a system (a call that times out to a person goes
        in doubt, which does)."""
        s = self.steps.s

        def completed() -> bool:
            return s.outside.completed(c.call_id) is not None

        try:
            await workflow.wait_condition(
                completed, timeout=step.timeout, timeout_summary=f"outside completion timeout for {c.tool} {c.call_id}"
            )
        except TimeoutError:
            if not completed():  # a completion taken in the same task as the timer's end counts
                return machine.TimedOut(call_id=c.call_id)
        record = s.outside.completed(c.call_id)
        assert record is not None
        return machine.Completed(record=record)

    async def _tool(self, agent: t.AgentSpec, c: machine.Call, step: machine.RunTool) -> machine.Ran | machine.Lost:
        """One run of the tool, the way it runs (`step.how`): `local`, in this workflow task on a
        worker holding the agent's version (on any other it says so, and the call runs routed);
        else routed to such a worker, with Temporal's retries (`step.attempts`). What the attempts
        came to: its result, or how they ended without one (the machine says what that means)."""
        spec = agent.tool(c.tool)
        assert spec is not None  # the plan answers unknown tools itself
        run = requests.tool_run(self.steps.s, agent, c, step, self.ahead_next)
        request, summary = run.request, run.summary
        try:
            result: t.ToolResult | None = None
            if step.how == "local":
                result = await self._local_tool(spec, request, step.activity_id, summary)
            if result is None:
                result = await workflow.execute_activity(
                    t.TOOL_CALL_ACTIVITY,
                    request,
                    result_type=t.ToolResult,
                    activity_id=step.activity_id,
                    task_queue=agent_queue(agent),
                    start_to_close_timeout=run.timeout,
                    heartbeat_timeout=run.heartbeat,
                    retry_policy=RetryPolicy(maximum_attempts=step.attempts),
                    summary=summary,
                )
                self.made_ahead = result.ahead if run.ahead else None
            return machine.Ran(call_id=c.call_id, content=result.output, is_error=result.is_error)
        except (ActivityError, ApplicationError) as err:  # a local activity's failure may come bare
            end, why, ended, started = _attempt_end(err)
            if step.how == "once" and end == "cancelled":  # the run called it off (a cancel, a sibling's failure)
                raise asyncio.CancelledError from err
            return machine.Lost(call_id=c.call_id, end=end, why=why, ended=ended, started_at=started)

    async def _local_tool(
        self, spec: t.ToolSpec, request: t.ToolCallInput, activity_id: str, summary: str
    ) -> t.ToolResult | None:
        """A cheap tool as a local activity, in this workflow task: one dispatch per turn. Its input
        is the routed call's; only a worker holding the agent's version (`request.agent_version`)
        runs it, and on any other it says so: None (run it routed)."""
        try:
            result: t.ToolResult = await workflow.execute_local_activity(
                t.TOOL_CALL_ACTIVITY,
                request,
                result_type=t.ToolResult,
                activity_id=activity_id,
                start_to_close_timeout=timedelta(seconds=spec.timeout_seconds),
                retry_policy=RetryPolicy(
                    maximum_attempts=spec.max_attempts, non_retryable_error_types=[t.TOOL_NOT_HERE]
                ),
                summary=f"{summary} (local)",
            )
            return result
        except (ActivityError, ApplicationError) as err:  # a local activity's failure may come bare
            cause = err.cause if isinstance(err, ActivityError) else err
            if isinstance(cause, ApplicationError) and cause.type == t.TOOL_NOT_HERE:
                return None
            raise

    async def _child(self, agent: t.AgentSpec, planned: PlannedCall, args: dict[str, object] | None) -> t.ToolMessage:
        """An agent run as a tool: a child run of the frozen member, with its own history,
        approvals and retries, as machine/child.py plans it. Its answer is the tool's result;
        its tokens count here too, however it ends."""
        s = self.steps.s
        c = child.plan(s, agent, planned, args, workflow.info().workflow_id, self.steps.ledger)
        if isinstance(c, Stop):
            raise self.steps.failure(c.message, c.error)
        if isinstance(c, t.ToolMessage):
            return c
        try:
            result: t.RunResult = await workflow.execute_child_workflow(
                t.WORKFLOW_NAME,
                c.input,
                id=c.child_id,
                result_type=t.RunResult,
                parent_close_policy=ParentClosePolicy.REQUEST_CANCEL,
                static_summary=c.summary,
            )
        except ChildWorkflowError as err:
            cause = err.cause
            why = cause.message if isinstance(cause, FailureError) else err.message
            return child.failed(s, c, why, await self._child_spent(c.child_id, cause), self.steps.ledger)
        return child.answered(s, c, result, self.steps.ledger)

    async def _child_spent(self, child_id: str, cause: BaseException | None) -> t.ChildUsage | None:
        """What a child that failed or was cancelled spent: a failure carries its ledger in its
        details; a cancelled child signals it as it ends (waited for, within a bound)."""
        if isinstance(cause, ApplicationError) and cause.details:
            return child.usage_in(cause.details[0])
        if isinstance(cause, CancelledError):
            try:
                await workflow.wait_condition(
                    lambda: child_id in self.steps.child_usage, timeout=CHILD_USAGE_WAIT, timeout_summary="child usage"
                )
            except TimeoutError:
                pass  # a child terminated, or of code before this: its usage is not known
            return self.steps.child_usage.pop(child_id, None)
        return None


WORKER_SHUTDOWN = "WorkerShutdown"  # the failure sdk-core reports for an activity its stopping worker gave up on


def _attempt_end(err: ActivityError | ApplicationError) -> tuple[AttemptEnd, str, str, datetime | None]:
    """How a tool activity ended without a result: a timeout (the worker died or hung, its
    heartbeat stopped), called off by its worker, or an error; the failure's message; how it
    ended, in words; and when its last attempt began, as its first heartbeat said (None when it
    never beat)."""
    failure = err.cause if isinstance(err, ActivityError) else err
    why = failure.message if isinstance(failure, FailureError) else str(err)
    if isinstance(failure, ActivityTimeout):
        kind = failure.type.name.lower().replace("_", "-") if failure.type is not None else "a"
        details = failure.last_heartbeat_details
        began = details[0].get("started_at") if details and isinstance(details[0], dict) else None
        started = None
        if isinstance(began, str):
            with contextlib.suppress(ValueError):
                started = datetime.fromisoformat(began[:40])
        return "timeout", why, f"{kind} timeout", started
    if isinstance(failure, CancelledError):
        return "cancelled", why, f"called off by its worker: {why}", None
    if isinstance(failure, ApplicationError) and failure.type == WORKER_SHUTDOWN:
        return "shutdown", why, "its worker shut down before it finished", None
    return "error", why, why, None
