"""BENCH-ONLY workflow: a stripped mirror of `workflows.agent.AgentRun` (no approvals, budgets,
continue-as-new or run events) whose model call can be the product's activity, a regular
activity given the transcript inline, or a local activity, whose tool calls can be local, and
whose per-phase search-attribute upserts can be switched off. It exists to
measure those choices without touching product code; the product never runs it.

Determinism rules as in `workflows/`: no I/O, clocks or randomness here.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    import pydantic  # noqa: F401

    from bench.variant_types import INLINE_MODEL_ACTIVITY, VARIANT_WORKFLOW, InlineModelCall, VariantInput
    from durable_agent_runner.machine.calls import RunTools, after_tools
    from durable_agent_runner.machine.rules import Final, decide
    from durable_agent_runner.workflows import types as t

MODEL_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=60))


@workflow.defn(name=VARIANT_WORKFLOW, sandboxed=False)  # as AgentRun
class AgentRunVariant:
    def __init__(self) -> None:
        self._agent: t.AgentSpec | None = None
        self._messages: list[t.Message] = []

    @workflow.run
    async def run(self, input: VariantInput) -> t.RunResult:
        run = input.run
        agent: t.AgentSpec = await workflow.execute_activity(
            t.RESOLVE_AGENT_ACTIVITY,
            t.ResolveAgentInput(agent=run.agent, max_turns=run.max_turns, model=run.model),
            result_type=t.AgentSpec,
            start_to_close_timeout=timedelta(seconds=30),
        )
        self._agent = agent
        self._messages.append(t.UserMessage(content=run.prompt))
        turn = 0
        while True:
            turn += 1
            self._phase(input, "calling_model", turn)
            reply = await self._model(input, agent, turn)
            self._messages.append(reply.message)
            step = decide(agent, turn, reply)
            if isinstance(step, Final):
                self._phase(input, "completed", turn)
                return t.RunResult(
                    run_id=workflow.info().workflow_id,
                    agent=agent.name,
                    output=step.output,
                    turns=turn,
                    usage=t.Usage(),
                )
            if not isinstance(step, RunTools):
                raise ApplicationError(f"bench variant stopped: {step.error}", non_retryable=True)
            self._phase(input, "running_tools", turn)
            runs = [p.call for p in step.calls if p.action == "tool"]
            results = await asyncio.gather(*(self._tool(input, agent, turn, call) for call in runs))
            self._messages.extend(after_tools(step, {m.call_id: m for m in results}))

    async def _model(self, input: VariantInput, agent: t.AgentSpec, turn: int) -> t.ModelReply:
        timeout = timedelta(seconds=agent.model_timeout_seconds)
        call = InlineModelCall(agent=agent, messages=self._messages, model=agent.model or "demo", turn=turn)
        if input.model == "local":
            reply: t.ModelReply = await workflow.execute_local_activity(
                INLINE_MODEL_ACTIVITY, call, result_type=t.ModelReply, start_to_close_timeout=timeout,
                retry_policy=MODEL_RETRY, summary=f"model turn {turn}",
            )  # fmt: skip
            return reply
        if input.model == "inline":
            reply = await workflow.execute_activity(
                INLINE_MODEL_ACTIVITY, call, result_type=t.ModelReply, activity_id=f"model-{turn}",
                start_to_close_timeout=timeout, retry_policy=MODEL_RETRY, summary=f"model turn {turn}",
            )  # fmt: skip
            return reply
        reply = await workflow.execute_activity(
            t.MODEL_CALL_ACTIVITY,
            t.ModelCallInput(agent=agent.name, model=agent.model, turn=turn, transcript_len=len(self._messages)),
            result_type=t.ModelReply, activity_id=f"model-{turn}", start_to_close_timeout=timeout,
            heartbeat_timeout=timedelta(seconds=30), retry_policy=MODEL_RETRY, summary=f"model turn {turn}",
        )  # fmt: skip
        return reply

    async def _tool(self, input: VariantInput, agent: t.AgentSpec, turn: int, call: t.ToolCall) -> t.ToolMessage:
        run_id = workflow.info().workflow_id
        arg = t.ToolCallInput(
            call_id=call.call_id, tool=call.name, arguments=call.arguments, idempotency_key=f"{run_id}:{call.call_id}",
            turn=turn, agent=agent.name,
        )  # fmt: skip
        options = {"result_type": t.ToolResult, "start_to_close_timeout": timedelta(seconds=300)}
        if input.tools == "local":
            result = await workflow.execute_local_activity(t.TOOL_CALL_ACTIVITY, arg, **options)  # type: ignore[call-overload]
        else:
            result = await workflow.execute_activity(
                t.TOOL_CALL_ACTIVITY,
                arg,
                heartbeat_timeout=timedelta(seconds=30),
                **options,  # type: ignore[call-overload]
            )
        return t.ToolMessage(call_id=call.call_id, name=call.name, content=result.output, is_error=result.is_error)

    def _phase(self, input: VariantInput, phase: str, turn: int) -> None:
        if input.upsert_phase:
            workflow.set_current_details(f"**{phase}** · turn {turn}")
            workflow.upsert_search_attributes([t.SA_PHASE.value_set(phase), t.SA_TURN.value_set(turn)])

    @workflow.query(name=t.MODEL_CONTEXT_QUERY)
    def model_context(self, query: t.ModelContextQuery) -> t.ModelContext:
        """What the product's model activity reads (one page: bench transcripts are small)."""
        if self._agent is None:
            raise ApplicationError("not resolved yet")
        return t.ModelContext(agent=self._agent, messages=self._messages[query.start : query.upto])
