"""The durable agent loop: one agent run is one execution of the `AgentRun` workflow.

Each iteration calls the model in one activity, then runs the tools it asked for, one activity
per call, in parallel. What to do after a reply is decided by the pure `turn.decide`.

Determinism rules for this module: no I/O, no clocks, no randomness, no threads. Time comes from
`workflow.now()`, ids from `workflow.uuid4()`. Everything that touches the world is an activity
called by name (names in `workflows.types`), so renaming Python code never breaks runs in flight.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributeKey
from temporalio.exceptions import ActivityError, ApplicationError, FailureError

with workflow.unsafe.imports_passed_through():
    # pydantic is heavy and deterministic; pass it through instead of re-importing per run.
    import pydantic  # noqa: F401

    import workflows.types as t
    from workflows.approvals import Approvals, DecisionRefused, edited_note, rejection_text
    from workflows.turn import FinalAnswer, RunTools, TurnLimitReached, decide, describe_call

SA_AGENT = SearchAttributeKey.for_keyword(t.SA_AGENT)
SA_PHASE = SearchAttributeKey.for_keyword(t.SA_PHASE)
SA_TURN = SearchAttributeKey.for_int(t.SA_TURN)
SA_TOKENS = SearchAttributeKey.for_int(t.SA_TOKENS)
SA_PENDING = SearchAttributeKey.for_int(t.SA_PENDING)

# Temporal owns retries. Model calls retry until the provider answers: a non-retryable answer
# (bad request, auth, quota) fails at once, everything else waits it out, visible in the UI.
MODEL_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=60))
RESOLVE_RETRY = RetryPolicy(maximum_attempts=5)


@workflow.defn(name=t.WORKFLOW_NAME)
class AgentRun:
    def __init__(self) -> None:
        self._agent: t.AgentSpec | None = None
        self._max_turns: int | None = None
        self._messages: list[t.Message] = []
        self._turn = 0
        self._usage = t.Usage()
        self._phase = "starting"
        self._last_step = "starting"
        self._output: str | None = None
        self._error: str | None = None
        self._approvals = Approvals()

    # ------------------------------------------------------------------------------- the loop

    @workflow.run
    async def run(self, input: t.RunInput) -> t.RunResult:
        agent = await self._resolve(input)
        self._agent = agent
        self._max_turns = agent.max_turns
        workflow.upsert_search_attributes([SA_AGENT.value_set(agent.name)])
        self._messages.append(t.UserMessage(content=input.prompt))

        while True:
            self._turn += 1
            reply = await self._call_model(agent)
            self._messages.append(reply.message)
            self._usage = self._usage + reply.usage
            step = decide(agent, self._turn, reply)
            if isinstance(step, FinalAnswer):
                self._output = step.output
                self._set_phase("completed", f"final answer after {self._turn} turn(s)")
                return t.RunResult(
                    run_id=workflow.info().workflow_id,
                    agent=agent.name,
                    output=step.output,
                    turns=self._turn,
                    usage=self._usage,
                )
            if isinstance(step, TurnLimitReached):
                self._error = step.message
                self._set_phase("failed", step.message)
                raise ApplicationError(step.message, type="MaxTurnsExceeded", non_retryable=True)
            await self._run_tools(agent, step)

    async def _resolve(self, input: t.RunInput) -> t.AgentSpec:
        """Freeze the agent's definition into history: later edits never touch this run."""
        try:
            spec: t.AgentSpec = await workflow.execute_activity(
                t.RESOLVE_AGENT_ACTIVITY,
                t.ResolveAgentInput(agent=input.agent, max_turns=input.max_turns, model=input.model),
                result_type=t.AgentSpec,
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=RESOLVE_RETRY,
                summary=f"resolve agent {input.agent}",
            )
            return spec
        except ActivityError as err:
            raise self._fail(err, "ResolveAgentFailed", "") from err

    def _fail(self, err: ActivityError, default_type: str, context: str) -> ApplicationError:
        """The run's failure, carrying the cause's own message and type to the client."""
        cause = err.cause
        message = f"{context}{cause.message if isinstance(cause, FailureError) else err.message}"
        kind = cause.type if isinstance(cause, ApplicationError) and cause.type else default_type
        self._error = message
        self._set_phase("failed", message)
        return ApplicationError(message, type=kind, non_retryable=True)

    async def _call_model(self, agent: t.AgentSpec) -> t.ModelReply:
        model = agent.model or "the worker's default model"
        self._set_phase("calling_model", f"turn {self._turn}: calling {model}")
        try:
            reply: t.ModelReply = await workflow.execute_activity(
                t.MODEL_CALL_ACTIVITY,
                t.ModelCallInput(
                    agent=agent.name, model=agent.model, turn=self._turn, transcript_len=len(self._messages)
                ),
                result_type=t.ModelReply,
                activity_id=f"model-{self._turn}",
                start_to_close_timeout=timedelta(seconds=agent.model_timeout_seconds),
                heartbeat_timeout=timedelta(seconds=30),
                retry_policy=MODEL_RETRY,
                summary=f"model: {model} turn {self._turn}",
            )
            return reply
        except ActivityError as err:
            raise self._fail(err, "ModelCallFailed", f"model call failed on turn {self._turn}: ") from err

    async def _run_tools(self, agent: t.AgentSpec, step: RunTools) -> None:
        names = ", ".join(describe_call(c, 60) for c in step.run) or "no runnable calls"
        self._set_phase("running_tools", f"turn {self._turn}: running {names}")
        results = await asyncio.gather(*(self._run_tool(agent, call) for call in step.run))
        by_id = {m.call_id: m for m in [*results, *step.answered]}
        self._messages.extend(by_id[call_id] for call_id in step.order)

    async def _run_tool(self, agent: t.AgentSpec, call: t.ToolCall) -> t.ToolMessage:
        """One call: validated and checked against the approval policy by the tool activity,
        then, if a person must decide, run (or not) after their decision."""
        spec = agent.tool(call.name)
        assert spec is not None  # decide() answered unknown tools already
        record: t.ApprovalRecord | None = None
        if spec.approval != "never" and call.name in self._approvals.always:
            record = self._approvals.auto_approve(call.call_id, call.name, self._turn, workflow.now())
        check = spec.approval != "never" and record is None
        message = await self._tool_activity(agent, spec, call, call.arguments, check, "")
        if message is not None:
            return message
        record = await self._await_decision(agent, call)
        if not record.approved:
            return t.ToolMessage(
                call_id=call.call_id, name=call.name, content=rejection_text(record), is_error=True, approval=record
            )
        arguments = json.dumps(record.arguments) if record.arguments is not None else call.arguments
        result = await self._tool_activity(agent, spec, call, arguments, False, "-approved")
        assert result is not None
        note = edited_note(record) if record.arguments is not None else ""
        return result.model_copy(update={"content": note + result.content, "approval": record})

    async def _await_decision(self, agent: t.AgentSpec, call: t.ToolCall) -> t.ApprovalRecord:
        self._refresh_phase()
        timeout = agent.approval_timeout_seconds
        try:
            await workflow.wait_condition(
                lambda: self._approvals.decided(call.call_id) is not None,
                timeout=timedelta(seconds=timeout) if timeout else None,
                timeout_summary=f"approval timeout for {call.name} {call.call_id}",
            )
        except TimeoutError:
            if agent.approval_timeout_outcome == "fail":
                message = f"no decision on {describe_call(call)} ({call.call_id}) within {timeout:g}s"
                self._error = message
                self._set_phase("failed", message)
                raise ApplicationError(message, type="ApprovalTimedOut", non_retryable=True) from None
            timed_out = t.ApprovalDecision(
                call_id=call.call_id, approve=False, by="timeout", reason=agent.approval_timeout_reason
            )
            self._approvals.apply(timed_out, workflow.now(), automatic=True)
        record = self._approvals.decided(call.call_id)
        assert record is not None
        self._refresh_phase()
        return record

    async def _tool_activity(
        self, agent: t.AgentSpec, spec: t.ToolSpec, call: t.ToolCall, arguments: str, check: bool, suffix: str
    ) -> t.ToolMessage | None:
        """Runs the tool activity; None means the policy wants a person's decision first."""
        run_id = workflow.info().workflow_id
        try:
            result = await workflow.execute_activity(
                t.TOOL_CALL_ACTIVITY,
                t.ToolCallInput(
                    call_id=call.call_id,
                    tool=call.name,
                    arguments=arguments,
                    idempotency_key=f"{run_id}:{call.call_id}",
                    turn=self._turn,
                    agent=agent.name,
                    check_approval=check,
                ),
                result_type=t.ToolResult,
                activity_id=f"tool-{self._turn}-{call.call_id}{suffix}",
                start_to_close_timeout=timedelta(seconds=spec.timeout_seconds),
                heartbeat_timeout=timedelta(seconds=spec.heartbeat_seconds),
                retry_policy=RetryPolicy(maximum_attempts=spec.max_attempts),
                summary=f"tool: {describe_call(call)}",
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
            self._approvals.request(call.call_id, call.name, result.arguments or {}, self._turn, workflow.now())
            return None
        return t.ToolMessage(call_id=call.call_id, name=call.name, content=result.output, is_error=result.is_error)

    # ------------------------------------------------------------------------------ approvals

    @workflow.signal(name=t.APPROVAL_SIGNAL)
    def approval_signal(self, decision: t.ApprovalDecision) -> None:
        """For `temporal workflow signal` and the Web UI. A refused decision is ignored, and
        kept in the status so the sender can see why; a repeated one counts once."""
        try:
            self._approvals.check(decision, self._agent)
        except DecisionRefused as refused:
            workflow.logger.warning("approval signal ignored: %s", refused)
            self._approvals.ignored.append(str(refused))
            return
        self._decide(decision)

    @workflow.update(name=t.APPROVAL_UPDATE)
    def approval_update(self, decision: t.ApprovalDecision) -> t.DecisionReceipt:
        return self._decide(decision)

    @approval_update.validator
    def _validate_approval(self, decision: t.ApprovalDecision) -> None:
        try:
            self._approvals.check(decision, self._agent)
        except DecisionRefused as refused:
            raise ApplicationError(str(refused), type=refused.kind, non_retryable=True) from None

    def _decide(self, decision: t.ApprovalDecision) -> t.DecisionReceipt:
        record = self._approvals.apply(decision, workflow.now())
        verdict = "approved" if record.approved else "rejected"
        self._last_step = f"turn {self._turn}: {record.tool} {decision.call_id} {verdict} by {record.by}"
        return t.DecisionReceipt(call_id=decision.call_id, approved=record.approved, recorded_at=record.at)

    def _refresh_phase(self) -> None:
        waiting = len(self._approvals.pending)
        if waiting:
            calls = ", ".join(f"{p.tool} ({p.call_id})" for p in self._approvals.pending.values())
            self._set_phase("awaiting_approval", f"turn {self._turn}: waiting for approval of {calls}")
        elif self._phase == "awaiting_approval":
            self._set_phase("running_tools", f"turn {self._turn}: running approved tools")

    def _set_phase(self, phase: str, step: str) -> None:
        self._phase = phase
        self._last_step = step
        workflow.set_current_details(f"**{phase}** · turn {self._turn}\n\n{step}")
        workflow.upsert_search_attributes(
            [
                SA_PHASE.value_set(phase),
                SA_TURN.value_set(self._turn),
                SA_TOKENS.value_set(self._usage.total_tokens),
                SA_PENDING.value_set(len(self._approvals.pending)),
            ]
        )

    # -------------------------------------------------------------------------------- queries

    @workflow.query(name=t.STATUS_QUERY)
    def status(self) -> t.RunStatus:
        status = self._phase if self._phase in ("completed", "failed", "awaiting_approval") else "running"
        return t.RunStatus(
            run_id=workflow.info().workflow_id,
            agent=self._agent.name if self._agent else None,
            status=status,
            phase=self._phase,
            turn=self._turn,
            max_turns=self._max_turns,
            usage=self._usage,
            last_step=self._last_step,
            output=self._output,
            error=self._error,
            pending_approvals=list(self._approvals.pending.values()),
            decisions=self._approvals.decisions,
            ignored_signals=self._approvals.ignored,
        )

    @workflow.query(name=t.TRANSCRIPT_QUERY)
    def transcript(self, query: t.TranscriptQuery) -> t.Transcript:
        return t.Transcript(agent=self._agent, messages=self._messages[query.start :])

    @workflow.query(name=t.MODEL_CONTEXT_QUERY)
    def model_context(self, query: t.ModelContextQuery) -> t.ModelContext:
        """What the model activity sends: the agent and messages[start:upto], paged by size."""
        if self._agent is None or query.upto > len(self._messages):
            raise ApplicationError(f"transcript has {len(self._messages)} messages, asked for {query.upto}")
        page: list[t.Message] = []
        size = 0
        index = query.start
        while index < query.upto:
            message = self._messages[index]
            size += len(message.model_dump_json())
            if page and size > query.max_bytes:
                break
            page.append(message)
            index += 1
        return t.ModelContext(agent=self._agent, messages=page, next_start=index if index < query.upto else None)
