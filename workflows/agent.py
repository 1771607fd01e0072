"""The durable agent loop: one agent run is one execution of the `AgentRun` workflow.

Each iteration calls the model in one activity, then runs the tools it asked for, one activity
per call, in parallel. What to do after a reply is decided by the pure `turn.decide`.

Determinism rules for this module: no I/O, no clocks, no randomness, no threads. Time comes from
`workflow.now()`, ids from `workflow.uuid4()`. Everything that touches the world is an activity
called by name (names in `workflows.types`), so renaming Python code never breaks runs in flight.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributeKey
from temporalio.exceptions import ActivityError, ApplicationError, FailureError

with workflow.unsafe.imports_passed_through():
    # pydantic is heavy and deterministic; pass it through instead of re-importing per run.
    import pydantic  # noqa: F401

    import workflows.types as t
    from workflows.turn import FinalAnswer, RunTools, TurnLimitReached, decide, describe_call

SA_AGENT = SearchAttributeKey.for_keyword(t.SA_AGENT)
SA_PHASE = SearchAttributeKey.for_keyword(t.SA_PHASE)
SA_TURN = SearchAttributeKey.for_int(t.SA_TURN)
SA_TOKENS = SearchAttributeKey.for_int(t.SA_TOKENS)

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
        spec = agent.tool(call.name)
        assert spec is not None  # decide() answered unknown tools already
        run_id = workflow.info().workflow_id
        try:
            result = await workflow.execute_activity(
                t.TOOL_CALL_ACTIVITY,
                t.ToolCallInput(
                    call_id=call.call_id,
                    tool=call.name,
                    arguments=call.arguments,
                    idempotency_key=f"{run_id}:{call.call_id}",
                    turn=self._turn,
                ),
                result_type=t.ToolResult,
                activity_id=f"tool-{self._turn}-{call.call_id}",
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
        return t.ToolMessage(call_id=call.call_id, name=call.name, content=result.output, is_error=result.is_error)

    def _set_phase(self, phase: str, step: str) -> None:
        self._phase = phase
        self._last_step = step
        workflow.set_current_details(f"**{phase}** · turn {self._turn}\n\n{step}")
        workflow.upsert_search_attributes(
            [
                SA_PHASE.value_set(phase),
                SA_TURN.value_set(self._turn),
                SA_TOKENS.value_set(self._usage.total_tokens),
            ]
        )

    # -------------------------------------------------------------------------------- queries

    @workflow.query(name=t.STATUS_QUERY)
    def status(self) -> t.RunStatus:
        return t.RunStatus(
            run_id=workflow.info().workflow_id,
            agent=self._agent.name if self._agent else None,
            status="running" if self._phase not in ("completed", "failed") else self._phase,
            phase=self._phase,
            turn=self._turn,
            max_turns=self._max_turns,
            usage=self._usage,
            last_step=self._last_step,
            output=self._output,
            error=self._error,
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
