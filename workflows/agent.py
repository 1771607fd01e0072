"""The durable agent loop: one agent run is one execution chain of the `AgentRun` workflow.

Each iteration calls the model in one activity, then runs the tools it asked for, one activity
per call, in parallel; a call that needs a person waits for their decision (a signal or update)
while its siblings run. What to do after a reply is decided by the pure `turn.decide`. Between
turns the run continues as new when Temporal suggests it, carrying its state (`state.Carry`).

Determinism rules for this module: no I/O, no clocks, no randomness, no threads. Time comes from
`workflow.now()`. Everything that touches the world is an activity called by name (names in
`workflows.types`), so renaming Python code never breaks runs in flight.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy, SearchAttributeKey
from temporalio.exceptions import ActivityError, ApplicationError, FailureError, TimeoutType
from temporalio.exceptions import TimeoutError as ActivityTimeout

with workflow.unsafe.imports_passed_through():
    # pydantic is heavy and deterministic; pass it through instead of re-importing per run.
    import pydantic

    import workflows.types as t
    from workflows.approvals import DecisionRefused, edited_note, rejection_text
    from workflows.state import RunState, excerpt
    from workflows.turn import BudgetSpent, FinalAnswer, RunTools, TurnLimitReached, decide, describe_call, json_object

SA_AGENT = SearchAttributeKey.for_keyword(t.SA_AGENT)
SA_PHASE = SearchAttributeKey.for_keyword(t.SA_PHASE)
SA_TURN = SearchAttributeKey.for_int(t.SA_TURN)
SA_TOKENS = SearchAttributeKey.for_int(t.SA_TOKENS)
SA_PENDING = SearchAttributeKey.for_int(t.SA_PENDING)
SA_VERSION = SearchAttributeKey.for_keyword(t.SA_VERSION)

RESOLVE_RETRY = RetryPolicy(maximum_attempts=5)
# The activity ends an attempt itself at the agent's model timeout, with a clear error; Temporal's
# own start-to-close is a backstop a little later (a worker stuck in a way the activity can't see).
MODEL_TIMEOUT_MARGIN = timedelta(seconds=15)
# Bugs and bad data in workflow code fail the run with their message, instead of failing the
# workflow task forever (a run only `terminate` could end). A fixed run can be reset.
RUN_FAILURE_TYPES: list[type[BaseException]] = [
    pydantic.ValidationError, TypeError, ValueError, KeyError, AttributeError, IndexError, AssertionError,
]  # fmt: skip
# The model activity heartbeats every 2 s (more often while streaming): a worker that dies
# mid-call is noticed within 10 s and the call moves to another worker.
MODEL_HEARTBEAT_TIMEOUT = timedelta(seconds=10)


def model_retry(agent: t.AgentSpec) -> RetryPolicy:
    """Temporal owns retries, within bounds: a non-retryable answer (bad request, auth, quota)
    fails at once; anything else is retried up to the agent's attempts (its time bound is the
    activity's schedule-to-close), each attempt visible in the UI."""
    return RetryPolicy(
        initial_interval=timedelta(seconds=1),
        maximum_interval=timedelta(seconds=60),
        maximum_attempts=agent.model_max_attempts or t.DEFAULT_MODEL_MAX_ATTEMPTS,
    )


@workflow.defn(name=t.WORKFLOW_NAME, failure_exception_types=RUN_FAILURE_TYPES)
class AgentRun:
    def __init__(self) -> None:
        self._s = RunState()

    # ------------------------------------------------------------------------------- the loop

    @workflow.run
    async def run(self, input: t.RunInput) -> t.RunResult:
        try:
            return await self._loop(input)
        except asyncio.CancelledError:
            self._end("cancelled", "cancelled: " + (self._s.last_step or "while starting"))
            raise

    async def _loop(self, input: t.RunInput) -> t.RunResult:
        s = self._s
        if input.carry is not None:
            s.from_carry(input.carry)
            agent = input.carry.agent
        else:
            agent = await self._resolve(input)
            s.agent = agent
            s.messages.append(t.UserMessage(content=input.prompt))
            workflow.upsert_search_attributes([SA_AGENT.value_set(agent.name), SA_VERSION.value_set(agent.version)])
        turns_here = 0

        while True:
            if turns_here >= agent.continue_as_new_after or workflow.info().is_continue_as_new_suggested():
                await workflow.wait_condition(workflow.all_handlers_finished)
                self._set_phase("continuing", f"turn {s.turn}: continuing as new to keep history small")
                carry = self._carry()
                # The prompt travels once, as the carried transcript's first message.
                workflow.continue_as_new(t.RunInput(prompt="", agent=agent.name, carry=carry, capture=input.capture))
            s.turn += 1
            turns_here += 1
            reply = await self._call_model(agent, input.capture)
            if workflow.patched("run-unique-call-ids"):
                s.claim_call_ids(reply.message)
            s.messages.append(reply.message)
            s.add_usage(agent.name, reply.usage)
            calls = ", ".join(describe_call(c, 60) for c in reply.message.tool_calls)
            self._event("model_finished", text=reply.message.content or "", detail=calls, usage=reply.usage)
            step = decide(agent, s.turn, reply, tokens_used=s.usage.total_tokens)
            if isinstance(step, FinalAnswer):
                s.output = step.output
                self._event("final", text=step.output)
                self._set_phase("completed", f"final answer after {s.turn} turn(s)")
                return t.RunResult(
                    run_id=workflow.info().workflow_id,
                    agent=agent.name,
                    output=step.output,
                    turns=s.turn,
                    usage=s.usage,
                    usage_by_agent=s.usage_by_agent,
                )
            if isinstance(step, TurnLimitReached | BudgetSpent):
                kind = "MaxTurnsExceeded" if isinstance(step, TurnLimitReached) else "TokenBudgetExceeded"
                raise self._failure(step.message, kind)
            await self._run_tools(agent, step)

    def _carry(self) -> t.Carry:
        return self._s.to_carry(workflow.info().run_id)

    async def _resolve(self, input: t.RunInput) -> t.AgentSpec:
        """Freeze the agent's definition into history: later edits never touch this run."""
        # Only a worker that serves the agent polls its queue: a run never lands on one that lacks it.
        queue = t.agent_task_queue(workflow.info().task_queue, input.agent)
        try:
            spec: t.AgentSpec = await workflow.execute_activity(
                t.RESOLVE_AGENT_ACTIVITY,
                t.ResolveAgentInput(agent=input.agent, max_turns=input.max_turns, model=input.model),
                result_type=t.AgentSpec,
                task_queue=queue,
                schedule_to_start_timeout=timedelta(seconds=input.agent_wait_seconds),
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=RESOLVE_RETRY,
                summary=f"resolve agent {input.agent}",
            )
            return spec
        except ActivityError as err:
            if isinstance(err.cause, ActivityTimeout) and err.cause.type == TimeoutType.SCHEDULE_TO_START:
                message = (
                    f"no worker serves agent '{input.agent}': nothing polled task queue {queue} "
                    f"for {input.agent_wait_seconds:g}s (start a worker with --tools for that agent)"
                )
                raise self._failure(message, "UnknownAgent") from err
            raise self._failed_activity(err, "ResolveAgentFailed", "") from err

    def _failure(self, message: str, kind: str) -> ApplicationError:
        """Ends the run: recorded for status and watchers, then raised as a non-retryable error."""
        self._s.error = message
        self._end("failed", message)
        return ApplicationError(message, type=kind, non_retryable=True)

    def _end(self, phase: t.Phase, message: str) -> None:
        """The run is over: nothing waits any more, and the UI, status and watchers say how it ended."""
        self._s.approvals.abandon()
        self._event("failed" if phase == "failed" else "cancelled", text=message)
        self._set_phase(phase, message)

    def _failed_activity(self, err: ActivityError, default_type: str, context: str) -> ApplicationError:
        """The run's failure, carrying the cause's own message and type to the client. A call that
        ran out of time is reported with the last error it got (the provider's own words)."""
        cause = err.cause
        message = cause.message if isinstance(cause, FailureError) else err.message
        kind = cause.type if isinstance(cause, ApplicationError) and cause.type else default_type
        if isinstance(cause, ActivityTimeout):
            last = cause.cause if isinstance(cause.cause, FailureError) else None
            kind = last.type if isinstance(last, ApplicationError) and last.type else default_type
            what = cause.type.name.lower().replace("_", "-") if cause.type is not None else "timeout"
            message = f"gave up after the {what} timeout" + (f"; last error: {last.message}" if last else "")
        return self._failure(f"{context}{message}", kind)

    async def _call_model(self, agent: t.AgentSpec, capture: bool) -> t.ModelReply:
        s = self._s
        model = agent.model or "the worker's default model"
        self._set_phase("calling_model", f"turn {s.turn}: calling {model}")
        self._event("model_started", detail=model)
        n = len(s.messages)
        try:
            reply: t.ModelReply = await workflow.execute_activity(
                t.MODEL_CALL_ACTIVITY,
                t.ModelCallInput(
                    agent=agent.name,
                    model=agent.model,
                    turn=s.turn,
                    transcript_len=len(s.messages),
                    capture=capture,
                    digest=s.digest(),
                ),
                result_type=t.ModelReply,
                activity_id=f"model-{s.turn}",
                start_to_close_timeout=timedelta(seconds=agent.model_timeout_seconds) + MODEL_TIMEOUT_MARGIN,
                schedule_to_close_timeout=timedelta(seconds=agent.model_retry_seconds or t.DEFAULT_MODEL_RETRY_SECONDS),
                heartbeat_timeout=MODEL_HEARTBEAT_TIMEOUT,
                retry_policy=model_retry(agent),
                summary=f"turn {s.turn} · model {model} · {n} message{'' if n == 1 else 's'}",
            )
            return reply
        except ActivityError as err:
            raise self._failed_activity(err, "ModelCallFailed", f"model call failed on turn {s.turn}: ") from err

    async def _run_tools(self, agent: t.AgentSpec, step: RunTools) -> None:
        names = ", ".join(describe_call(c, 60) for c in step.run) or "no runnable calls"
        self._set_phase("running_tools", f"turn {self._s.turn}: running {names}")
        results = await asyncio.gather(*(self._run_tool(agent, call) for call in step.run))
        for answered in step.answered:
            self._event("tool_finished", call_id=answered.call_id, tool=answered.name, text=answered.content)
        by_id = {m.call_id: m for m in [*results, *step.answered]}
        self._s.messages.extend(by_id[call_id] for call_id in step.order)

    async def _run_tool(self, agent: t.AgentSpec, call: t.ToolCall) -> t.ToolMessage:
        """One call: validated and checked against the approval policy by the tool activity,
        then, if a person must decide, run (or not) after their decision."""
        s = self._s
        spec = agent.tool(call.name)
        assert spec is not None  # decide() answered unknown tools already
        self._event("tool_started", call_id=call.call_id, tool=call.name, detail=describe_call(call))
        record: t.ApprovalRecord | None = None
        if spec.approval != "never" and call.name in s.approvals.always:
            record = s.approvals.auto_approve(call.call_id, call.name, s.turn, workflow.now())
        check = spec.approval != "never" and record is None
        message = await self._tool_activity(agent, spec, call, call.arguments, check, "")
        if message is None:
            record = await self._await_decision(agent, call)
            if not record.approved:
                message = t.ToolMessage(
                    call_id=call.call_id, name=call.name, content=rejection_text(record), is_error=True
                )
            else:
                edited = record.arguments is not None
                arguments = json.dumps(record.arguments, ensure_ascii=False) if edited else call.arguments
                message = await self._tool_activity(agent, spec, call, arguments, False, "-approved")
                assert message is not None
                if record.arguments is not None:
                    message.content = edited_note(record) + message.content
        message.approval = record
        self._event("tool_finished", call_id=call.call_id, tool=call.name, text=excerpt(message.content))
        return message

    async def _await_decision(self, agent: t.AgentSpec, call: t.ToolCall) -> t.ApprovalRecord:
        approvals = self._s.approvals
        self._event("approval_requested", call_id=call.call_id, tool=call.name, detail=describe_call(call))
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

    async def _tool_activity(
        self, agent: t.AgentSpec, spec: t.ToolSpec, call: t.ToolCall, arguments: str, check: bool, suffix: str
    ) -> t.ToolMessage | None:
        """Runs the tool activity; None means the policy wants a person's decision first."""
        s = self._s
        run_id = workflow.info().workflow_id
        args = json_object(arguments)
        try:
            result = await workflow.execute_activity(
                t.TOOL_CALL_ACTIVITY,
                t.ToolCallInput(
                    call_id=call.call_id,
                    tool=call.name,
                    arguments="" if args is not None else arguments,
                    args=args,
                    idempotency_key=f"{run_id}:{call.call_id}",
                    turn=s.turn,
                    agent=agent.name,
                    check_approval=check,
                ),
                result_type=t.ToolResult,
                activity_id=f"tool-{s.turn}-{call.call_id}{suffix}",
                # Runs recorded before routing (no version) keep using the run's own queue.
                task_queue=t.agent_task_queue(workflow.info().task_queue, agent.name, agent.version)
                if agent.version
                else None,
                start_to_close_timeout=timedelta(seconds=spec.timeout_seconds),
                heartbeat_timeout=timedelta(seconds=spec.heartbeat_seconds),
                retry_policy=RetryPolicy(maximum_attempts=spec.max_attempts),
                summary=(
                    f"turn {s.turn} · check approval: {describe_call(call)}"
                    if check
                    else f"turn {s.turn} · tool: {describe_call(call)}" + (" (approved)" if suffix else "")
                ),
            )
        except ActivityError as err:
            # Retries are spent: the run goes on and the model learns the tool is unavailable.
            cause = err.cause.message if isinstance(err.cause, FailureError) else err.message
            return t.ToolMessage(
                call_id=call.call_id,
                name=call.name,
                content=f"error: tool '{call.name}' failed after {spec.max_attempts} attempt(s): {cause}",
                is_error=True,
            )
        if result.needs_approval:
            s.approvals.request(call.call_id, call.name, result.arguments or {}, s.turn, workflow.now())
            return None
        return t.ToolMessage(call_id=call.call_id, name=call.name, content=result.output, is_error=result.is_error)

    # ------------------------------------------------------------------------------ approvals

    @workflow.signal(
        name=t.APPROVAL_SIGNAL,
        description='Decide on a pending tool call: {"call_id": "call_…", "approve": true, "by": "you"}; '
        'reject with {"call_id": …, "approve": false, "reason": "…"}; edit with "arguments": {…}; '
        '"always": true approves later calls of that tool. The pending calls are in the current details.',
    )
    def approval_signal(self, body: RawValue) -> None:
        """For `temporal workflow signal` and the Web UI. A body that does not parse, or a refused
        decision, is ignored and kept in the status so the sender can see why (the SDK would
        otherwise drop an undecodable signal with only a worker log line); a repeated one counts once."""
        try:
            decision = workflow.payload_converter().from_payload(body.payload, t.ApprovalDecision)
            self._s.approvals.check(decision, self._s.agent)
        except DecisionRefused as refused:
            return self._ignore(str(refused))
        except Exception as bad:  # any undecodable body: the converter's errors vary by payload
            return self._ignore(f"approval signal body is not a decision: {str(bad)[:300]}")
        if self._s.done:
            return self._ignore(f"call {decision.call_id}: the run has ended")
        self._decide(decision)

    def _ignore(self, reason: str) -> None:
        workflow.logger.warning("approval signal ignored: %s", reason)
        self._s.approvals.ignore(reason)

    @workflow.update(
        name=t.APPROVAL_UPDATE,
        description="Like the approval signal, but a bad decision is refused before anything is recorded.",
    )
    def approval_update(self, decision: t.ApprovalDecision) -> t.DecisionReceipt:
        return self._decide(decision)

    @approval_update.validator
    def _validate_approval(self, decision: t.ApprovalDecision) -> None:
        try:
            self._s.approvals.check(decision, self._s.agent)
        except DecisionRefused as refused:
            raise ApplicationError(str(refused), type=refused.kind, non_retryable=True) from None

    def _decide(self, decision: t.ApprovalDecision) -> t.DecisionReceipt:
        record = self._s.approvals.apply(decision, workflow.now())
        self._record_decision(record)
        return t.DecisionReceipt(call_id=decision.call_id, approved=record.approved, recorded_at=record.at)

    def _record_decision(self, record: t.ApprovalRecord) -> None:
        verdict = "approved" if record.approved else f"rejected: {record.reason}"
        detail = f"{verdict} by {record.by}" + (" (arguments edited)" if record.arguments is not None else "")
        self._s.last_step = f"turn {self._s.turn}: {record.tool} {record.call_id} {detail}"
        self._event("approval_decided", call_id=record.call_id, tool=record.tool, detail=detail)

    def _refresh_phase(self) -> None:
        s = self._s
        if s.approvals.pending:
            calls = ", ".join(f"{p.tool} ({p.call_id})" for p in s.approvals.pending.values())
            self._set_phase("awaiting_approval", f"turn {s.turn}: waiting for approval of {calls}")
        elif s.phase == "awaiting_approval":
            self._set_phase("running_tools", f"turn {s.turn}: running approved tools")

    # ------------------------------------------------------------------- visibility helpers

    def _event(self, kind: t.EventKind, **fields: object) -> None:
        self._s.event(workflow.now(), kind, **fields)

    def _set_phase(self, phase: t.Phase, step: str) -> None:
        s = self._s
        s.phase = phase
        s.last_step = step
        workflow.set_current_details(s.details())
        workflow.upsert_search_attributes(
            [
                SA_PHASE.value_set(phase),
                SA_TURN.value_set(s.turn),
                SA_TOKENS.value_set(s.usage.total_tokens),
                SA_PENDING.value_set(len(s.approvals.pending)),
            ]
        )

    # -------------------------------------------------------------------------------- queries

    @workflow.query(name=t.STATUS_QUERY, description="Phase, turn, token usage, pending approvals and decisions.")
    def status(self) -> t.RunStatus:
        return self._s.status(workflow.info().workflow_id)

    @workflow.query(name=t.TRANSCRIPT_QUERY, description='The conversation so far: {} for all, or {"start": N}.')
    def transcript(self, query: t.TranscriptQuery) -> t.Transcript:
        return t.Transcript(agent=self._s.agent, messages=self._s.messages[query.start :])

    @workflow.query(name=t.EVENTS_QUERY, description='The run\'s numbered steps for watchers: {"since": N}.')
    def events(self, query: t.EventsQuery) -> t.EventsPage:
        return self._s.events_page(query)

    @workflow.query(name=t.MODEL_CONTEXT_QUERY, description="Internal: read by the model-call activity.")
    def model_context(self, query: t.ModelContextQuery) -> t.ModelContext:
        try:
            return self._s.model_context(query)
        except ValueError as err:
            raise ApplicationError(str(err)) from None
