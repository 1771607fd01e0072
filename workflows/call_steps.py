"""How a turn's calls are carried out: each asked about as its approval says, then run the one way
its tool runs (`calls.runs`): with the model's reply, as a local activity, as a routed activity on
the agent's version queue, or as a child run, whose usage counts here however it ends.

Determinism rules for this module, as for all of workflows/: no I/O, no clocks, no randomness,
no threads. Time comes from `workflow.now()`; activities are called by their declared names.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from datetime import datetime, timedelta

import pydantic
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, ChildWorkflowError, FailureError
from temporalio.exceptions import TimeoutError as ActivityTimeout
from temporalio.workflow import ParentClosePolicy

from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.approvals import edited_note, rejection_text
from durable_agent_runner.workflows.bounds import json_object
from durable_agent_runner.workflows.calls import (
    AttemptEnd,
    PlannedCall,
    Runs,
    asks_first,
    attempt_ended,
    attempts,
    checked,
    describe_call,
    resolved,
    runs,
)
from durable_agent_runner.workflows.patches import FORK_ONCE_PATCH, IN_DOUBT_PATCH
from durable_agent_runner.workflows.state import excerpt
from durable_agent_runner.workflows.steps import (
    MODEL_HEARTBEAT_TIMEOUT,
    MODEL_TIMEOUT_MARGIN,
    Steps,
    agent_queue,
)

# How long a parent waits for a cancelled child's usage (signalled as the child ends).
CHILD_USAGE_WAIT = timedelta(seconds=30)
# How long a call in doubt waits for a person when the agent sets no approval timeout; then the run fails.
DOUBT_LIMIT = timedelta(days=30)


class CallSteps(Steps):
    """The calls of a turn; `Handlers` and `AgentRun` build on it."""

    def __init__(self) -> None:
        super().__init__()
        self._ahead_next: tuple[str, t.ModelCallInput] | None = None  # a call's id, the model call it makes after
        self._made_ahead: t.AheadReply | None = None  # what that call's activity brought back

    async def _carry_out(self, agent: t.AgentSpec, planned: PlannedCall) -> t.ToolMessage:
        """One planned call: asked about if its approval says so, then run the one way its tool
        runs (`calls.runs`). Siblings run meanwhile."""
        s, call = self._s, planned.call
        self._event(t.EventKind.TOOL_STARTED, call_id=call.call_id, tool=call.name, detail=describe_call(call))
        record: t.ApprovalRecord | None = None
        if planned.approval == "auto":
            record = s.approvals.auto_approve(call.call_id, call.name, s.turn, workflow.now())
        elif planned.approval == "check":
            self._doing(call.call_id, "checking", call)  # neither approved nor started: status says so
            check = await self._hook(agent, "approval", call.name, call_id=call.call_id, arguments=call.arguments)
            verdict = checked(planned, check)
            if isinstance(verdict, t.ToolMessage):
                return self._finished(verdict, None)
            if verdict == "ask":
                self._doing(call.call_id, None)
                s.approvals.request(call.call_id, call.name, check.arguments or {}, s.turn, workflow.now())
                record = await self._await_decision(agent, call)
                if not record.approved:
                    message = t.ToolMessage(
                        call_id=call.call_id, name=call.name, content=rejection_text(record), is_error=True
                    )
                    return self._finished(message, record)
        edited = record is not None and record.arguments is not None
        arguments = json.dumps(record.arguments, ensure_ascii=False) if record and edited else call.arguments
        how = runs(planned, agent, arguments)
        if how != "with_reply":
            self._doing(call.call_id, "running", call)
        if how == "child":
            message = await self._child(agent, planned, arguments)
        elif how == "with_reply":  # the model activity ran it with the reply: no dispatch of its own
            assert planned.ran is not None
            message = t.ToolMessage(
                call_id=call.call_id, name=call.name, content=planned.ran.output, is_error=planned.ran.is_error
            )
        else:
            if how == "once" and not workflow.patched(IN_DOUBT_PATCH):
                how = "activity"  # a history recorded before calls could be in doubt (none had `once`)
            ask = asks_first(planned, how, record is not None) and workflow.patched(FORK_ONCE_PATCH)
            message = await self._tool(agent, planned, arguments, how, ask)
        if record is not None and edited:
            message.content = edited_note(record) + message.content
        return self._finished(message, record)

    def _finished(self, message: t.ToolMessage, record: t.ApprovalRecord | None) -> t.ToolMessage:
        self._doing(message.call_id, None)
        message.approval = record
        at = self._made_ahead.began_at if self._made_ahead is not None else None  # its activity went on
        self._event(
            t.EventKind.TOOL_FINISHED, at, call_id=message.call_id, tool=message.name, text=excerpt(message.content)
        )
        return message

    async def _await_decision(self, agent: t.AgentSpec, call: t.ToolCall) -> t.ApprovalRecord:
        approvals = self._s.approvals
        self._event(t.EventKind.APPROVAL_REQUESTED, call_id=call.call_id, tool=call.name, detail=describe_call(call))
        self._refresh_phase()
        timeout = agent.approval_timeout_seconds
        try:
            await workflow.wait_condition(
                lambda: approvals.decided(call.call_id) is not None,
                timeout=timedelta(seconds=timeout) if timeout else None,
                timeout_summary=f"approval timeout for {call.name} {call.call_id}",
            )
        except TimeoutError:
            if agent.approval_timeout_outcome == "fail":
                message = f"no decision on {describe_call(call)} ({call.call_id}) within {timeout:g}s"
                raise self._failure(message, "ApprovalTimedOut") from None
            timed_out = t.ApprovalDecision(
                call_id=call.call_id, approve=False, by="timeout", reason=agent.approval_timeout_reason
            )
            self._record_decision(approvals.apply(timed_out, workflow.now(), automatic=True))
        record = approvals.decided(call.call_id)
        assert record is not None
        self._refresh_phase()
        return record

    async def _tool(
        self, agent: t.AgentSpec, planned: PlannedCall, arguments: str, how: Runs, ask: bool = False
    ) -> t.ToolMessage:
        """The tool activity: `local`, in this workflow task on a worker holding the agent's
        version (on any other it says so, and the call runs routed); else routed to such a worker.
        Once its retries are spent the run goes on and the model learns the tool failed; a `once`
        call's lost attempt waits for a person instead (`_in_doubt`), who may have it run again.
        `ask`: a person decides before it runs at all, as for a call in doubt (`calls.asks_first`)."""
        s, call = self._s, planned.call
        spec = agent.tool(call.name)
        assert spec is not None  # decide() answers unknown tools itself
        args = json_object(arguments)
        then = None
        if self._ahead_next is not None and self._ahead_next[0] == call.call_id and how == "activity":
            if arguments == call.arguments:  # as the model asked: no person changed them
                then = t.CallAhead(
                    upto=len(s.messages), call=self._ahead_next[1], tool_timeout_seconds=spec.timeout_seconds
                )
        request = t.ToolCallInput(
            call_id=call.call_id,
            tool=call.name,
            arguments="" if args is not None else arguments,
            args=args,
            idempotency_key=t.idempotency_key(workflow.info().workflow_id, call.call_id),
            turn=s.turn,
            agent=agent.name,
            then=then,
        )
        activity_id = f"tool-{s.turn}-{call.call_id}"
        summary = f"turn {s.turn} · tool: {describe_call(call)}"
        timeout, beat = timedelta(seconds=spec.timeout_seconds), timedelta(seconds=spec.heartbeat_seconds)
        if then is not None:  # the tool keeps its own bound inside; the model call beats every 2 s
            timeout += timedelta(seconds=agent.model_timeout_seconds) + MODEL_TIMEOUT_MARGIN
            beat = max(beat, MODEL_HEARTBEAT_TIMEOUT)
            summary += f" · then model {agent.model or 'default'}"
        if ask:
            step = resolved(planned, await self._in_doubt(agent, self._ran_in_origin(call, args, arguments, request)))
            if step != "rerun":
                return step
        while True:
            asked = workflow.now()
            try:
                result: t.ToolResult | None = None
                if how == "local":
                    result = await self._local_tool(agent, spec, request, activity_id, summary)
                if result is None:
                    result = await workflow.execute_activity(
                        t.TOOL_CALL_ACTIVITY,
                        request,
                        result_type=t.ToolResult,
                        activity_id=activity_id,
                        task_queue=agent_queue(agent),
                        start_to_close_timeout=timeout,
                        heartbeat_timeout=beat,
                        retry_policy=RetryPolicy(maximum_attempts=attempts(how, spec)),
                        summary=summary,
                    )
                    self._made_ahead = result.ahead if then is not None else None
                return t.ToolMessage(
                    call_id=call.call_id, name=call.name, content=result.output, is_error=result.is_error
                )
            except (ActivityError, ApplicationError) as err:  # a local activity's failure may come bare
                end, why, ended_how, started = _attempt_end(err)
                if how == "once" and end == "cancelled":  # the run called it off (a cancel, a sibling's failure)
                    raise asyncio.CancelledError from err
                message = attempt_ended(planned, how, end, why, attempts(how, spec))
                if message is not None:
                    return message
            ended = t.InDoubtCall(
                call_id=call.call_id,
                tool=call.name,
                arguments=args if args is not None else arguments,
                turn=s.turn,
                doubt=s.doubts.times(call.call_id) + 1,
                scheduled_at=asked,
                started_at=started,
                ended_at=workflow.now(),
                ended=ended_how,
                idempotency_key=request.idempotency_key,
            )
            step = resolved(planned, await self._in_doubt(agent, ended))
            if step != "rerun":
                return step
            activity_id = f"tool-{s.turn}-{call.call_id}-rerun-{ended.doubt}"  # the key stays the call's

    def _ran_in_origin(
        self, call: t.ToolCall, args: dict[str, object] | None, arguments: str, request: t.ToolCallInput
    ) -> t.InDoubtCall:
        """A live fork's once call, before it runs: it ran in the run the fork was taken from."""
        s, now = self._s, workflow.now()
        origin = s.forked_from.run_id if s.forked_from is not None else "the run this fork was taken from"
        return t.InDoubtCall(
            call_id=call.call_id,
            tool=call.name,
            arguments=args if args is not None else arguments,
            turn=s.turn,
            doubt=s.doubts.times(call.call_id) + 1,
            scheduled_at=now,
            ended_at=now,
            ended=f"not run in this fork: it ran in {origin}; a --live-tools fork runs a once call again only "
            "when a person says so",
            idempotency_key=request.idempotency_key,
            fork_of=origin,
        )

    async def _in_doubt(self, agent: t.AgentSpec, doubt: t.InDoubtCall) -> t.CallResolution:
        """Waits for a person to resolve a call in doubt (`client.py resolve`, or the signal):
        as long as the agent's approval timeout, else DOUBT_LIMIT; then the run fails, never
        guessing. A cancel ends the wait like any other."""
        s = self._s
        s.doubts.mark(doubt)
        what = f"{doubt.tool} ({doubt.call_id})"
        why = doubt.ended if doubt.fork_of else f"ended without a result: {doubt.ended}"
        self._event(t.EventKind.CALL_IN_DOUBT, call_id=doubt.call_id, tool=doubt.tool, detail=why)
        self._refresh_phase()
        timeout = agent.approval_timeout_seconds
        limit = timedelta(seconds=timeout) if timeout else DOUBT_LIMIT
        try:
            await workflow.wait_condition(
                lambda: s.doubts.decided(doubt.call_id, doubt.doubt) is not None,
                timeout=limit,
                timeout_summary=f"in-doubt limit for {what}",
            )
        except TimeoutError:
            message = f"{what} stayed in doubt for {limit.total_seconds():g}s: no one resolved it"
            raise self._failure(message, "CallInDoubt") from None
        record = s.doubts.decided(doubt.call_id, doubt.doubt)
        assert record is not None
        self._refresh_phase()
        return record

    async def _local_tool(
        self, agent: t.AgentSpec, spec: t.ToolSpec, request: t.ToolCallInput, activity_id: str, summary: str
    ) -> t.ToolResult | None:
        """A cheap tool as a local activity, in this workflow task: one dispatch per turn. Only a
        worker holding the agent's exact version runs it; on any other, None (run it routed)."""
        try:
            result: t.ToolResult = await workflow.execute_local_activity(
                t.TOOL_CALL_ACTIVITY,
                request.model_copy(update={"local_version": agent.version}),
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

    async def _child(self, agent: t.AgentSpec, planned: PlannedCall, arguments: str) -> t.ToolMessage:
        """An agent run as a tool: a child run of the frozen member, with its own history,
        approvals and retries. Its answer is the tool's result; its tokens count here too."""
        s, call = self._s, planned.call
        assert s.agent is not None
        member = s.agent.member(planned.target)
        if member is None:  # impossible by construction: resolve froze every reachable agent
            raise self._failure(f"agent '{planned.target}' is not part of this run", "UnknownAgent")
        args = json_object(arguments) or {}
        prompt = args.get("input")
        if not isinstance(prompt, str) or not prompt.strip():
            content = f"error: tool '{call.name}' needs a non-empty string argument 'input'"
            return t.ToolMessage(call_id=call.call_id, name=call.name, content=content, is_error=True)
        team = [a for a in [s.agent.model_copy(update={"team": []}), *s.agent.team] if a.name != member.name]
        child_id = f"{workflow.info().workflow_id}.{call.call_id}"
        # Its budget: its share of what this run has left, held here until it ends (workflows/budget.py).
        share = self._ledger.grant(child_id, s.usage) if self._ledger is not None else None
        try:
            result: t.RunResult = await workflow.execute_child_workflow(
                t.WORKFLOW_NAME,
                t.RunInput(
                    prompt=prompt, agent=member.name, frozen=member.model_copy(update={"team": team}), budget=share
                ),
                id=child_id,
                result_type=t.RunResult,
                parent_close_policy=ParentClosePolicy.REQUEST_CANCEL,
                static_summary=f"{member.name} for {agent.name}: {prompt[:100]}",
            )
        except ChildWorkflowError as err:
            cause = err.cause
            why = cause.message if isinstance(cause, FailureError) else err.message
            await self._count_child(child_id, cause)
            self._released(child_id)
            content = f"error: agent '{member.name}' (run {child_id}) failed: {why}"
            return t.ToolMessage(call_id=call.call_id, name=call.name, content=content, is_error=True)
        for name, usage in (result.usage_by_agent or {member.name: result.usage}).items():
            s.add_usage(name, usage)
        self._released(child_id)
        return t.ToolMessage(call_id=call.call_id, name=call.name, content=result.output)

    def _released(self, child_id: str) -> None:
        """The child ended and its usage counts here: its share is no longer held."""
        if self._ledger is not None:
            self._ledger.release(child_id)

    async def _count_child(self, child_id: str, cause: BaseException | None) -> None:
        """A child that failed or was cancelled spent tokens too: a failure carries its ledger in
        its details; a cancelled child signals it as it ends (waited for, within a bound)."""
        ledger: t.ChildUsage | None = None
        if isinstance(cause, ApplicationError) and cause.details:
            try:
                ledger = t.ChildUsage.model_validate(cause.details[0])
            except pydantic.ValidationError:
                ledger = None  # a failure raised elsewhere (not the run's own): nothing counted
        elif isinstance(cause, CancelledError):
            try:
                await workflow.wait_condition(
                    lambda: child_id in self._child_usage, timeout=CHILD_USAGE_WAIT, timeout_summary="child usage"
                )
            except TimeoutError:
                pass  # a child terminated, or of code before this: its usage is not known
            ledger = self._child_usage.pop(child_id, None)
        for name, usage in (ledger.usage_by_agent if ledger is not None else {}).items():
            self._s.add_usage(name, usage)


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
