"""The durable agent loop: one agent run is one execution chain of the `AgentRun` workflow.

Each turn calls the model in one activity; `turn.decide` plans what follows (the final output,
tools to run, a handoff, a stop) and the methods of `steps.Steps` carry it out: tools in
parallel, one activity each; a call that needs a person waits for their decision (a signal or
update) while its siblings run; an agent used as a tool runs as a child workflow. Between turns
the run continues as new when Temporal suggests it, carrying its state (`types.Carry`).

Determinism rules for this module: no I/O, no clocks, no randomness, no threads. Time comes from
`workflow.now()`. Everything that touches the world is an activity called by name (names in
`workflows.types`), so renaming Python code never breaks runs in flight.
"""

from __future__ import annotations

import asyncio
from typing import Literal

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    # pydantic is heavy and deterministic; pass it through instead of re-importing per run.
    import pydantic

    import workflows.types as t
    from workflows.approvals import DecisionRefused
    from workflows.steps import SA_AGENT, SA_VERSION, Steps
    from workflows.turn import (
        HANDOFF_FILTERS,
        Done,
        Final,
        PlannedCall,
        Retry,
        RunTools,
        Stop,
        after_output,
        after_tools,
        decide,
        describe_call,
        tripwire,
    )

# Bugs and bad data in workflow code fail the run with their message, instead of failing the
# workflow task forever (a run only `terminate` could end). A fixed run can be reset.
RUN_FAILURE_TYPES: list[type[BaseException]] = [
    pydantic.ValidationError, TypeError, ValueError, KeyError, AttributeError, IndexError, AssertionError,
]  # fmt: skip


@workflow.defn(name=t.WORKFLOW_NAME, failure_exception_types=RUN_FAILURE_TYPES)
class AgentRun(Steps):
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
        else:
            s.agent = input.frozen or await self._resolve(input)
            s.messages.append(t.UserMessage(content=input.prompt))
            workflow.upsert_search_attributes([SA_AGENT.value_set(s.agent.name), SA_VERSION.value_set(s.agent.version)])
        first = s.agent
        assert first is not None
        guard_input = input.carry is None and bool(first.input_guardrails)
        turns_here = 0

        while True:
            if turns_here >= first.continue_as_new_after or workflow.info().is_continue_as_new_suggested():
                await workflow.wait_condition(workflow.all_handlers_finished)
                self._set_phase("continuing", f"turn {s.turn}: continuing as new to keep history small")
                carry = s.to_carry(workflow.info().run_id)
                # The prompt travels once, as the carried transcript's first message.
                workflow.continue_as_new(t.RunInput(prompt="", agent=first.name, carry=carry, capture=input.capture))
            s.turn += 1
            turns_here += 1
            agent = s.agent_now
            if guard_input:
                guard_input = False
                reply = await self._first_call_guarded(agent, input)
            else:
                reply = await self._call_model(agent, input.capture)
            if workflow.patched("run-unique-call-ids"):
                s.claim_call_ids(reply.message)
            s.messages.append(reply.message)
            s.add_usage(agent.name, reply.usage)
            calls = ", ".join(describe_call(c, 60) for c in reply.message.tool_calls)
            self._event("model_finished", text=reply.message.content or "", detail=calls, usage=reply.usage)
            step = decide(
                agent,
                s.turn,
                reply,
                limits=first,
                tokens_used=s.usage.total_tokens,
                always=s.approvals.always,
            )
            if isinstance(step, Stop):
                raise self._failure(step.message, step.error)
            if isinstance(step, RunTools):
                await self._run_tools(agent, step)
                if step.handoff is not None:
                    await self._hand_off(agent, step.handoff)
                continue
            outcome = await self._check_output(agent, step)
            if isinstance(outcome, Retry):
                s.messages.append(t.UserMessage(content=outcome.feedback))
                self._event("output_refused", text=outcome.feedback)
                continue
            if isinstance(outcome, Stop):
                raise self._failure(outcome.message, outcome.error)
            s.output = outcome.output
            self._event("final", text=outcome.output)
            self._set_phase("completed", f"final answer from {agent.name} after {s.turn} turn(s)")
            return t.RunResult(
                run_id=workflow.info().workflow_id,
                agent=agent.name,
                output=outcome.output,
                output_object=outcome.output_object,
                turns=s.turn,
                usage=s.usage,
                usage_by_agent=s.usage_by_agent,
                handoffs=s.handoffs,
            )

    def _agent_now(self) -> t.AgentSpec | None:
        return self._s.agent_now if self._s.agent is not None else None

    async def _run_tools(self, agent: t.AgentSpec, step: RunTools) -> None:
        runs = [p for p in step.calls if p.action in ("tool", "child")]
        names = ", ".join(describe_call(p.call, 60) for p in runs) or "no runnable calls"
        self._set_phase("running_tools", f"turn {self._s.turn}: running {names}")
        results = {m.call_id: m for m in await asyncio.gather(*(self._carry_out(agent, p) for p in runs))}
        messages = after_tools(step, results)
        for m in messages:
            if m.call_id not in results:  # answered without running anything
                self._event("tool_finished", call_id=m.call_id, tool=m.name, text=m.content)
        self._s.messages.extend(messages)

    async def _hand_off(self, agent: t.AgentSpec, planned: PlannedCall) -> None:
        """The next turn runs `planned.target`, frozen at the start like every agent this run
        can reach, with the conversation so far (through the handoff's input filter, if any)."""
        s = self._s
        assert s.agent is not None
        target = s.agent.member(planned.target)
        spec = next((h for h in agent.handoffs if h.agent == planned.target), None)
        if target is None or spec is None:  # impossible by construction: resolve froze them all
            raise self._failure(f"cannot hand off to '{planned.target}': not part of this run", "UnknownAgent")
        if spec.input_filter in HANDOFF_FILTERS:
            s.replace_messages(HANDOFF_FILTERS[spec.input_filter](s.messages))
        elif spec.input_filter:
            name = spec.input_filter.removeprefix("hook:")
            filtered = await self._hook(agent, "input_filter", name, transcript_len=len(s.messages))
            if filtered.messages is None:
                raise self._failure(f"handoff filter '{name}' returned no messages", "AgentHookFailed")
            s.replace_messages(filtered.messages)
        record = t.HandoffRecord(
            from_agent=agent.name, to_agent=target.name, turn=s.turn, at=workflow.now(), call_id=planned.call.call_id
        )
        s.handoffs.append(record)
        s.current = target.name
        self._event("handoff", detail=f"{agent.name} → {target.name}", call_id=record.call_id)
        workflow.upsert_search_attributes([SA_AGENT.value_set(target.name), SA_VERSION.value_set(target.version)])
        self._set_phase("running_tools", f"turn {s.turn}: {agent.name} handed off to {target.name}")

    async def _first_call_guarded(self, agent: t.AgentSpec, input: t.RunInput) -> t.ModelReply:
        """The first model call, with the agent's input guardrails running alongside it (as the
        Agents SDK does). A tripwire ends the run before any tool runs, and cancels the call."""
        model = asyncio.create_task(self._call_model(agent, input.capture))
        guards = asyncio.create_task(self._guardrails(agent, "input", input.prompt))
        await workflow.wait([model, guards], return_when=asyncio.FIRST_COMPLETED)
        if model.done() and model.exception() is not None:
            guards.cancel()
            return await model  # raises the model call's failure
        stop = await guards  # a reply that came first still waits: no tool runs before the verdict
        if stop is not None:
            model.cancel()
            raise self._failure(stop.message, stop.error)
        return await model

    async def _guardrails(self, agent: t.AgentSpec, kind: Literal["input", "output"], text: str) -> Stop | None:
        names = agent.input_guardrails if kind == "input" else agent.output_guardrails
        if not names:
            return None
        hook: t.HookKind = "input_guardrail" if kind == "input" else "output_guardrail"
        results = await asyncio.gather(*(self._hook(agent, hook, name, text=text) for name in names))
        for name, result in zip(names, results, strict=True):
            verdict = "tripped" if result.tripwire else "passed"
            self._event("guardrail", detail=f"{kind} guardrail {name}: {verdict}")
        return tripwire(kind, list(zip(names, results, strict=True)))

    async def _check_output(self, agent: t.AgentSpec, final: Final) -> Done | Retry | Stop:
        """The candidate final output, through the agent's output type and output guardrails."""
        s = self._s
        check = None
        if agent.output_schema is not None:
            check = await self._hook(agent, "output_type", agent.output_name or "output", text=final.output)
            if check.invalid is not None:
                s.refusals[agent.name] = s.refusals.get(agent.name, 0) + 1
        outcome = after_output(agent, final.output, check, s.refusals.get(agent.name, 0))
        if isinstance(outcome, Done):
            stop = await self._guardrails(agent, "output", outcome.output)
            return stop or outcome
        return outcome

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
            self._s.approvals.check(decision, self._agent_now())
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
            self._s.approvals.check(decision, self._agent_now())
        except DecisionRefused as refused:
            raise ApplicationError(str(refused), type=refused.kind, non_retryable=True) from None

    def _decide(self, decision: t.ApprovalDecision) -> t.DecisionReceipt:
        record = self._s.approvals.apply(decision, workflow.now())
        self._record_decision(record)
        return t.DecisionReceipt(call_id=decision.call_id, approved=record.approved, recorded_at=record.at)

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
