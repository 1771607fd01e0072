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
from datetime import timedelta
from typing import Literal, NoReturn

import pydantic
from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ActivityError, ApplicationError, FailureError

import workflows.types as t
from workflows import edits, memory
from workflows.approvals import DecisionRefused
from workflows.session import Refused, SessionState
from workflows.steps import SA_AGENT, SA_VERSION, UNIQUE_CALL_IDS_PATCH, Steps, model_call_bounds
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
    taken,
    tripwire,
    with_reply,
    without_dropped,
)

# Bugs and bad data in workflow code fail the run with their message, instead of failing the
# workflow task forever (a run only `terminate` could end). A fixed run can be reset.
RUN_FAILURE_TYPES: list[type[BaseException]] = [
    pydantic.ValidationError, TypeError, ValueError, KeyError, AttributeError, IndexError, AssertionError,
]  # fmt: skip


# A paused run waits this long for a resume, then fails (its state stays forkable).
PAUSE_LIMIT = timedelta(days=30)
# A session continues as new between messages once its history passes either bound, far below
# Temporal's own limits, so no execution of a days-long conversation grows large.
SESSION_HISTORY_BYTES = 1_000_000
SESSION_HISTORY_EVENTS = 2_000


# Outside temporalio's sandbox: it checked nothing here (every module of workflows/ was passed
# through, so clocks, randomness and the environment were the real ones) and cost a turn about
# 1 ms of worker CPU. Determinism is checked where it can be: workflows/ruff.toml bans clocks,
# randomness, I/O and threads in this package, and the tests replay every run they make and every
# checked-in history in temporalio's sandbox with nothing of ours passed through
# (tests/helpers.py: STRICT_SANDBOX), which fails on any of them at run time.
@workflow.defn(name=t.WORKFLOW_NAME, failure_exception_types=RUN_FAILURE_TYPES, sandboxed=False)
class AgentRun(Steps):
    @workflow.init
    def __init__(self, input: t.RunInput) -> None:
        # State exists before any handler runs: a message may arrive with the start itself.
        super().__init__()
        if input.carry is not None:
            self._s.from_carry(input.carry)
        else:
            self._s.breakpoints = input.breakpoints
            self._s.session = SessionState() if input.session else None
        self._turns_here = 0

    # ------------------------------------------------------------------------------- the loop

    @workflow.run
    async def run(self, input: t.RunInput) -> t.RunResult:
        self._begin()
        try:
            if self._s.session is None:
                return await self._single(input)
            return await self._conversation(input)
        except asyncio.CancelledError:
            self._end("cancelled", "cancelled: " + (self._s.last_step or "while starting"))
            raise

    async def _start(self, input: t.RunInput) -> t.AgentSpec:
        s = self._s
        if input.carry is None:
            s.agent = input.frozen or await self._resolve(input)
            self._search(SA_AGENT.value_set(s.agent.name), SA_VERSION.value_set(s.agent.version))
        assert s.agent is not None
        return s.agent

    async def _single(self, input: t.RunInput) -> t.RunResult:
        """One prompt, one answer: the run ends with it."""
        s = self._s
        if input.carry is None:
            first = await self._start(input)
            s.messages.append(t.UserMessage(content=input.prompt))
        else:
            first = await self._start(input)
        guard = input.prompt if input.carry is None and first.input_guardrails else None
        done = await self._answer(input, guard)
        s.output = done.output
        self._event("final", text=done.output)
        self._set_phase("completed", f"final answer from {s.agent_now.name} after {s.turn} turn(s)")
        return self._result(done.output, done.output_object)

    def _result(self, output: str, output_object: object, **session: object) -> t.RunResult:
        s = self._s
        return t.RunResult.model_validate(
            {
                "run_id": workflow.info().workflow_id,
                "agent": s.agent_now.name,
                "output": output,
                "output_object": output_object,
                "turns": s.turn,
                "usage": s.usage,
                "usage_by_agent": s.usage_by_agent,
                "handoffs": s.handoffs,
                **session,
            }
        )

    async def _answer(self, input: t.RunInput, guard: str | None) -> Done:
        """Turns until the agent in charge gives a final output: model call, tools, handoffs,
        output checks. `guard`: the input its input guardrails check alongside the first call."""
        s = self._s
        first = s.agent
        assert first is not None
        session = s.session
        base = session.current.first_turn - 1 if session is not None and session.current is not None else 0
        calls = s.turn - base  # model calls this answer has made (in earlier executions too)
        while True:
            if self._should_continue(first):
                await self._continue_as_new(input)
            await self._before_model(s.agent_now, s.turn + 1)
            s.turn += 1
            self._turns_here += 1
            agent = s.agent_now
            if session is not None:
                if calls and first.mid_turn == "steer":
                    self._steer(session)
                await self._fit_memory(agent, first.memory)
            calls += 1
            s.mark()
            if guard is not None:  # no tool runs before the input guardrails' verdict
                reply = await self._first_call_guarded(agent, guard, input.capture)
                guard = None
            else:
                ahead = None
                if self._pause_requested() is None:
                    ahead = with_reply(
                        agent,
                        s.turn - base,
                        limits=first,
                        tokens_used=s.usage.total_tokens,
                        cost_used=s.usage.cost_usd,
                        breakpoints=s.breakpoints,
                    )
                reply = await self._call_model(agent, input.capture, ahead)
            asked = [c.call_id for c in reply.message.tool_calls]
            if self._patched(UNIQUE_CALL_IDS_PATCH):
                s.claim_call_ids(reply.message)
            self._ran_with_reply = taken(asked, reply)
            s.messages.append(reply.message)
            s.add_usage(agent.name, reply.usage)
            s.last_input_tokens = reply.usage.input_tokens
            names = ", ".join(describe_call(c, 60) for c in reply.message.tool_calls)
            self._event("model_finished", text=reply.message.content or "", detail=names, usage=reply.usage)
            step = decide(
                agent,
                s.turn - base,
                reply,
                limits=first,
                tokens_used=s.usage.total_tokens,
                always=s.approvals.always,
                cost_used=s.usage.cost_usd,
            )
            if isinstance(step, Stop):
                raise self._failure(step.message, step.error)
            if isinstance(step, RunTools):
                why = edits.before_tools(s.breakpoints, reply.message.tool_calls) or self._pause_requested()
                if why is not None:
                    await self._pause("before_tools", s.turn, why)
                    agent, edited = s.agent_now, s.messages[-1]
                    assert isinstance(edited, t.AssistantMessage)
                    replan = decide(
                        agent, s.turn - base, t.ModelReply(message=edited), limits=first, always=s.approvals.always
                    )
                    step = without_dropped(replan, s.dropped_calls) if isinstance(replan, RunTools) else step
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
            return outcome

    # ----------------------------------------------------------------------- continue-as-new

    def _should_continue(self, first: t.AgentSpec) -> bool:
        info = workflow.info()
        if self._turns_here >= first.continue_as_new_after or info.is_continue_as_new_suggested():
            return True
        return self._s.session is not None and (
            info.get_current_history_size() > SESSION_HISTORY_BYTES
            or info.get_current_history_length() > SESSION_HISTORY_EVENTS
        )

    async def _continue_as_new(self, input: t.RunInput) -> NoReturn:
        s = self._s
        assert s.agent is not None
        await workflow.wait_condition(workflow.all_handlers_finished)
        self._set_phase("continuing", f"turn {s.turn}: continuing as new to keep history small")
        carry = s.to_carry(workflow.info().run_id)
        # The prompt travels once, as the carried transcript's first message.
        workflow.continue_as_new(
            t.RunInput(prompt="", agent=s.agent.name, carry=carry, capture=input.capture, session=input.session)
        )

    # --------------------------------------------------------------------------- breakpoints

    async def _before_model(self, agent: t.AgentSpec, turn: int) -> None:
        """The safe point before model call `turn`: the agent's breakpoint function (if any) may
        edit or pause; a breakpoint or a pause request pauses."""
        s = self._s
        why = edits.before_model(s.breakpoints, turn) or self._pause_requested()
        if agent.breakpoint and why is None:
            result = await self._hook(agent, "breakpoint", agent.breakpoint, transcript_len=len(s.messages))
            for edit in result.edits:
                try:
                    self._apply_edit(edit.model_copy(update={"by": f"breakpoint function {agent.breakpoint}"}))
                except edits.EditRefused as refused:
                    why = f"breakpoint function {agent.breakpoint}: its edit was refused: {refused}"
                    break
            if why is None and result.pause is not None:
                why = f"breakpoint function {agent.breakpoint}: {result.pause or 'pause'}"
        if why is not None:
            await self._pause("before_model", turn, why)

    def _pause_requested(self) -> str | None:
        request = self._s.pause_request
        if request is None:
            return None
        return f"paused by {request.by}" + (f": {request.reason}" if request.reason else "")

    async def _pause(self, where: t.PauseWhere, turn: int, why: str) -> None:
        """Holds the run still, durably, until `client.py resume`; edits apply meanwhile."""
        s = self._s
        s.pause_request, s.resumed_by = None, None
        s.paused = t.PauseInfo(where=where, turn=turn, why=why, at=workflow.now())
        point = f"before model call {turn}" if where == "before_model" else f"before the tool calls of turn {turn}"
        self._event("paused", detail=f"{point}: {why}")
        self._set_phase("paused", f"paused {point}: {why}")
        try:
            await workflow.wait_condition(
                lambda: s.resumed_by is not None, timeout=PAUSE_LIMIT, timeout_summary="pause limit"
            )
        except TimeoutError:
            s.paused = None
            message = f"paused {point} for {PAUSE_LIMIT.days} days without a resume (fork it to go on)"
            raise self._failure(message, "PausedTooLong") from None
        self._event("resumed", detail=f"by {s.resumed_by}")
        s.paused = None
        self._set_phase("running_tools" if where == "before_tools" else "calling_model", f"resumed by {s.resumed_by}")

    def _apply_edit(self, edit: t.Edit) -> t.EditRecord:
        """An edit through the one validated path (a person's or a breakpoint function's)."""
        s = self._s
        state = s.editable()
        summary = edits.apply(edit, state)  # raises EditRefused, before anything changes
        s.take_edit(state)
        record = t.EditRecord(edit=edit, at=workflow.now(), turn=s.turn, summary=summary)
        s.edits.append(record)
        self._event("edited", detail=summary)
        workflow.set_current_details(s.details())
        return record

    # ------------------------------------------------------------------------------ sessions

    async def _conversation(self, input: t.RunInput) -> t.RunResult:
        """A session: answer each message in turn, wait (durably, holding no worker) for the
        next, until `end`, the agent's idle timeout, or a cancel. A failed answer is that
        message's error; the conversation goes on."""
        s, session = self._s, self._s.session
        assert session is not None
        if input.carry is None and input.prompt:
            first_message = t.SessionMessage(text=input.prompt, by="client")
            self._received(first_message, session.accept(first_message, workflow.now(), steer=False))
        first = await self._start(input)
        while True:
            guard = None
            if session.current is None:
                if not session.queue:
                    if self._turns_here and self._should_continue(first):
                        await self._continue_as_new(input)
                    why = await self._wait_for_message(first)
                    if why is not None:
                        return self._session_ended(why)
                opened = session.open(s.turn, workflow.now(), workflow.info().run_id)
                s.refusals = {}
                s.messages.append(t.UserMessage(content=opened.text))
                guard = opened.text if first.input_guardrails else None
            number = session.current.message if session.current else 0
            try:
                done = await self._answer(input, guard)
            except ApplicationError as err:
                s.approvals.abandon()
                s.error = s.error_type = None
                kind = err.type or "Error"
                error = f"{kind}: {err.message}"
                session.close(workflow.now(), s.turn, s.usage, None, None, error, workflow.info().run_id)
                self._event("answered", text=err.message, detail=f"message {number} · failed ({kind})")
                continue
            s.output = done.output
            self._event("final", text=done.output)
            run_id = workflow.info().run_id
            exchange = session.close(workflow.now(), s.turn, s.usage, done.output, done.output_object, None, run_id)
            self._event("answered", text=done.output, detail=f"message {exchange.message}")

    async def _wait_for_message(self, first: t.AgentSpec) -> str | None:
        """Waits for a message; None when one came, else why the session ends."""
        session = self._s.session
        assert session is not None
        if session.ending is not None:
            return f"ended by {session.ending.by}" + (f": {session.ending.reason}" if session.ending.reason else "")
        since = session.idle_since = session.idle_since or workflow.now()
        left = first.idle_timeout_seconds - (workflow.now() - since).total_seconds()
        self._set_phase("waiting_for_message", f"answered {session.answered} message(s); waiting for the next")
        self._event("waiting", detail=f"ends after {first.idle_timeout_seconds:g}s without a message")
        try:
            await workflow.wait_condition(
                lambda: bool(session.queue) or session.ending is not None,
                timeout=timedelta(seconds=max(left, 0.001)),
                timeout_summary="session idle timeout",
            )
        except TimeoutError:
            return f"idle for {first.idle_timeout_seconds:g}s"
        if session.queue:
            return None
        return await self._wait_for_message(first)  # ending: said above

    def _session_ended(self, why: str) -> t.RunResult:
        s, session = self._s, self._s.session
        assert session is not None and s.agent is not None
        last = next((ex for ex in reversed(session.exchanges) if ex.output is not None), None)
        self._event("ended", text=why)
        self._set_phase("completed", f"session ended: {why}")
        output, output_object = (last.output or "", last.output_object) if last else ("", None)
        return self._result(output, output_object, messages=session.answered, ended_by=why)

    def _steer(self, session: SessionState) -> None:
        for queued in session.steer():
            self._s.messages.append(t.UserMessage(content=queued.text))
            detail = f"message {queued.message} from {queued.by} · steers the answer"
            self._event("message", text=queued.text, detail=detail)

    async def _fit_memory(self, agent: t.AgentSpec, policy: t.MemoryPolicy) -> None:
        """Compacts the transcript when it nears the budget; a visible step of its own."""
        s, session = self._s, self._s.session
        assert session is not None
        plan = memory.plan(s.messages, policy, s.last_input_tokens)
        if plan is None:
            return
        size = memory.transcript_bytes(s.messages[: plan.upto])
        self._set_phase("compacting", f"turn {s.turn}: compacting {plan.upto} earlier messages ({plan.reason})")
        summary, how = None, f"dropped {plan.upto} earlier messages ({size:,} bytes)"
        if plan.strategy == "summarize":
            result = await self._summarize(agent, plan.upto, policy, session.compactions + 1)
            if isinstance(result, str):
                how += f": summarizing failed ({result})"
            else:
                summary = result.summary
                s.add_usage(agent.name, result.usage)
                how = f"summarized {plan.upto} earlier messages ({size:,} bytes) in {len(summary):,} characters"
        s.replace_messages(memory.compacted(s.messages, plan.upto, summary))
        s.last_input_tokens = 0
        session.compactions += 1
        self._event("compacted", text=summary or "", detail=f"{how}; {plan.reason}")

    async def _summarize(
        self, agent: t.AgentSpec, upto: int, policy: t.MemoryPolicy, number: int
    ) -> t.CompactResult | str:
        """The model's summary of messages[:upto] (read by query, like a model call), or why not."""
        s = self._s
        model = agent.model or "the worker's default model"
        try:
            result: t.CompactResult = await workflow.execute_activity(
                t.COMPACT_ACTIVITY,
                t.CompactInput(
                    agent=agent.name,
                    model=agent.model,
                    turn=s.turn,
                    upto=upto,
                    instructions=policy.summary_instructions,
                ),
                result_type=t.CompactResult,
                activity_id=f"compact-{number}",
                **model_call_bounds(agent),
                summary=f"turn {s.turn} · {self._who(agent)}compact {upto} messages · {model}",
            )
            return result
        except ActivityError as err:
            cause = err.cause
            return cause.message if isinstance(cause, FailureError) else err.message

    def _agent_now(self) -> t.AgentSpec | None:
        return self._s.agent_now if self._s.agent is not None else None

    async def _run_tools(self, agent: t.AgentSpec, step: RunTools) -> None:
        runs = [p for p in step.calls if p.action in ("tool", "child")]
        names = ", ".join(describe_call(p.call, 60) for p in runs) or "no runnable calls"
        self._set_phase("running_tools", f"turn {self._s.turn}: running {names}")
        tasks = [asyncio.create_task(self._carry_out(agent, p)) for p in runs]
        try:
            results = {m.call_id: m for m in await asyncio.gather(*tasks)}
        except BaseException:
            for task in tasks:  # one call ended the answer: its siblings stop too
                task.cancel()
            raise
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
        self._search(SA_AGENT.value_set(target.name), SA_VERSION.value_set(target.version))
        self._set_phase("running_tools", f"turn {s.turn}: {agent.name} handed off to {target.name}")

    async def _first_call_guarded(self, agent: t.AgentSpec, text: str, capture: bool) -> t.ModelReply:
        """The first model call, with the agent's input guardrails running alongside it (as the
        Agents SDK does). A tripwire ends the run before any tool runs, and cancels the call."""
        model = asyncio.create_task(self._call_model(agent, capture))
        guards = asyncio.create_task(self._guardrails(agent, "input", text))
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

    # ------------------------------------------------------------------------- session updates

    @workflow.update(
        name=t.SESSION_SEND_UPDATE,
        description='A message to a session: {"text": "…", "by": "alice", "message_id": "…"}. Answered after '
        "the ones before it (or, for an agent that steers, within the answer in progress); refused once it has ended.",
    )
    def send_message(self, message: t.SessionMessage) -> t.MessageReceipt:
        s, session = self._s, self._s.session
        assert session is not None
        steer = s.agent is not None and s.agent.mid_turn == "steer"
        receipt = session.accept(message, workflow.now(), steer)
        if not receipt.duplicate:
            self._received(message, receipt)
        return receipt

    def _received(self, message: t.SessionMessage, receipt: t.MessageReceipt) -> None:
        how = f" · {receipt.queued} ahead" if receipt.queued else ""
        how = " · steers the answer in progress" if receipt.steer else how
        self._event("message", text=message.text, detail=f"message {receipt.message} from {message.by}{how}")
        workflow.set_current_details(self._s.details())

    @send_message.validator
    def _validate_send(self, message: t.SessionMessage) -> None:
        try:
            self._session().check(message, self._s.done)
        except Refused as refused:
            raise ApplicationError(str(refused), type=refused.kind, non_retryable=True) from None

    @workflow.update(
        name=t.SESSION_END_UPDATE,
        description='Ends a session once the messages it has accepted are answered: {"by": "alice", "reason": "…"}.',
    )
    def end_session(self, end: t.EndSession) -> t.EndReceipt:
        session = self._session()
        session.ending = session.ending or end
        return t.EndReceipt(messages=session.messages, unanswered=session.messages - session.answered)

    @end_session.validator
    def _validate_end(self, end: t.EndSession) -> None:
        self._session()
        if self._s.done:
            raise ApplicationError("the session has ended", type="SessionEnded", non_retryable=True)

    def _session(self) -> SessionState:
        if self._s.session is None:
            raise ApplicationError(
                "this run is not a session: start one with `client.py chat`", type="NotASession", non_retryable=True
            )
        return self._s.session

    # -------------------------------------------------------------------------- debug updates

    @workflow.update(name=t.PAUSE_UPDATE, description='Pause at the next safe point: {"by": "alice", "reason": "…"}.')
    def pause(self, request: t.PauseRequest) -> t.RunStatus:
        self._s.pause_request = request
        self._s.last_step = f"pause requested by {request.by}: the run pauses at its next safe point"
        workflow.set_current_details(self._s.details())
        return self.status()

    @pause.validator
    def _validate_pause(self, request: t.PauseRequest) -> None:
        s = self._s
        if s.done:
            raise ApplicationError(
                "the run has ended: fork it to go on from a turn", type="RunEnded", non_retryable=True
            )
        if s.paused is not None:
            raise ApplicationError(
                f"the run is already paused ({s.paused.why})", type="AlreadyPaused", non_retryable=True
            )

    @workflow.update(name=t.RESUME_UPDATE, description='Go on from a pause (with any edits): {"by": "alice"}.')
    def resume(self, request: t.ResumeRequest) -> t.RunStatus:
        s = self._s
        if s.paused is not None:
            s.resumed_by = request.by
        else:  # paused only on request so far: the request is withdrawn
            s.pause_request = None
            self._event("resumed", detail=f"pause request withdrawn by {request.by}")
        return self.status()

    @resume.validator
    def _validate_resume(self, request: t.ResumeRequest) -> None:
        if self._s.paused is None and self._s.pause_request is None:
            raise ApplicationError("the run is not paused", type="NotPaused", non_retryable=True)
        if self._s.resumed_by is not None:
            raise ApplicationError(f"already resumed by {self._s.resumed_by}", type="NotPaused", non_retryable=True)

    @workflow.update(
        name=t.EDIT_UPDATE, description='Edit a paused run: {"op": "text", "index": 3, "text": "…"} (see Edit).'
    )
    def edit(self, edit: t.Edit) -> t.EditReceipt:
        record = self._apply_edit(edit)
        return t.EditReceipt(summary=record.summary, items=len(self._s.messages))

    @edit.validator
    def _validate_edit(self, edit: t.Edit) -> None:
        s = self._s
        if s.paused is None or s.resumed_by is not None:
            raise ApplicationError(
                "the run is not paused: pause it first (client.py pause RUN_ID)", type="NotPaused", non_retryable=True
            )
        try:
            edits.apply(edit, s.editable())
        except edits.EditRefused as refused:
            raise ApplicationError(str(refused), type=refused.kind, non_retryable=True) from None

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

    @workflow.query(name=t.EXCHANGE_QUERY, description='A session\'s message K and its answer: {"message": K}.')
    def exchange(self, query: t.ExchangeQuery) -> t.ExchangeAnswer:
        return self._session().find(query.message)

    @workflow.query(name=t.INSPECT_QUERY, description="A paused run's state: items with indexes, pending calls, edits.")
    def inspect(self) -> t.Inspection:
        return self._s.inspection(workflow.info().workflow_id)

    @workflow.query(name=t.FORK_POINT_QUERY, description='The state just before model call N: {"turn": N}.')
    def fork_point(self, query: t.ForkQuery) -> t.ForkPoint:
        try:
            return self._s.fork_point(query.turn)
        except ValueError as err:
            raise ApplicationError(str(err), type="CannotFork") from None

    @workflow.query(name=t.MODEL_CONTEXT_QUERY, description="Internal: read by the model-call activity.")
    def model_context(self, query: t.ModelContextQuery) -> t.ModelContext:
        try:
            return self._s.model_context(query)
        except ValueError as err:
            raise ApplicationError(str(err)) from None
