"""The durable agent loop: one agent run is one execution chain of the `AgentRun` workflow.

The workflow is an interpreter. `turn.Turn` (pure) chooses each next step of an answer; `_answer`
carries it out (an activity, a child run, a wait for a person, a continue-as-new) and feeds back
what happened, until the machine answers or stops. A session wraps answers in a conversation:
each message answered in turn, a durable wait for the next in between.

Determinism rules for this module: no I/O, no clocks, no randomness, no threads. Time comes from
`workflow.now()`. Everything that touches the world is an activity called by name (names in
`workflows.types`), so renaming Python code never breaks runs in flight.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Literal, NoReturn

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, FailureError

import workflows.types as t
from workflows import edits, memory
from workflows.calls import RunTools, describe_call
from workflows.handlers import Handlers
from workflows.session import SessionState
from workflows.steps import model_call_bounds
from workflows.turn import (
    Breakpoint,
    BreakpointRan,
    CallModel,
    CheckOutput,
    Compact,
    Compacted,
    ContinueAsNew,
    Done,
    Facts,
    Guardrails,
    GuardrailsRan,
    HandedOff,
    HandOff,
    NextStep,
    Outcome,
    OutputChecked,
    Pause,
    Ready,
    Replied,
    Resumed,
    Steer,
    Steered,
    Stop,
    ToolsRan,
    Turn,
    should_continue,
    tripwire,
)

# Only the project's own errors fail a run from workflow code: every failure it means is an
# ApplicationError (which always fails the run). A bug in this code holds the workflow task, as
# Temporal intends, so a fixed deploy carries the run on; `client.py status` says it is stuck.
RUN_FAILURE_TYPES: list[type[BaseException]] = []

# A paused run waits this long for a resume, then fails (its state stays forkable).
PAUSE_LIMIT = timedelta(days=30)


# Outside temporalio's sandbox: it checked nothing here (every module of workflows/ was passed
# through, so clocks, randomness and the environment were the real ones) and cost a turn about
# 1 ms of worker CPU. Determinism is checked where it can be: workflows/ruff.toml bans clocks,
# randomness, I/O and threads in this package, and the tests replay every run they make and every
# checked-in history in temporalio's sandbox with nothing of ours passed through
# (tests/helpers.py: STRICT_SANDBOX), which fails on any of them at run time.
@workflow.defn(name=t.WORKFLOW_NAME, failure_exception_types=RUN_FAILURE_TYPES, sandboxed=False)
class AgentRun(Handlers):
    @workflow.init
    def __init__(self, input: t.RunInput) -> None:
        # State exists before any handler runs: a message may arrive with the start itself.
        super().__init__()
        if input.carry is not None:
            self._s.from_carry(input.carry)
        else:
            self._s.breakpoints = input.breakpoints
            self._s.session = SessionState() if input.session else None

    # ------------------------------------------------------------------------------- the run

    @workflow.run
    async def run(self, input: t.RunInput) -> t.RunResult:
        try:
            if self._s.session is None:
                return await self._single(input)
            return await self._conversation(input)
        except asyncio.CancelledError:
            self._end("cancelled", "cancelled: " + (self._s.last_step or "while starting"))
            await self._tell_parent()
            raise

    async def _start(self, input: t.RunInput) -> t.AgentSpec:
        s = self._s
        if input.carry is None:
            s.agent = input.frozen or await self._resolve(input)
            self._search(t.SA_AGENT.value_set(s.agent.name), t.SA_VERSION.value_set(s.agent.version))
        assert s.agent is not None
        return s.agent

    async def _single(self, input: t.RunInput) -> t.RunResult:
        """One prompt, one answer: the run ends with it."""
        s = self._s
        first = await self._start(input)
        if input.carry is None:
            s.messages.append(t.UserMessage(content=input.prompt))
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

    async def _tell_parent(self) -> None:
        """A cancelled child run tells its parent what it spent (a failed one says so in its error)."""
        parent = workflow.info().parent
        if parent is None or self._s.agent is None:
            return
        ledger = t.ChildUsage(child_id=workflow.info().workflow_id, usage_by_agent=self._s.usage_by_agent)
        try:
            await workflow.get_external_workflow_handle(parent.workflow_id).signal(t.CHILD_USAGE_SIGNAL, ledger)
        except Exception:  # the parent has ended: nobody is left to count it
            workflow.logger.info("could not tell parent %s this child's usage", parent.workflow_id)

    # ---------------------------------------------------------------------- the interpreter

    async def _answer(self, input: t.RunInput, guard: str | None) -> Done:
        """Carries out the turn machine's steps until it answers (or stops, which raises)."""
        turn = Turn(self._s, guard)
        step = turn.next(Ready(), self._facts())
        while not isinstance(step, Done):
            if isinstance(step, Stop):
                raise self._failure(step.message, step.error)
            outcome = await self._carry(step, input)
            step = turn.next(outcome, self._facts())
        return step

    def _facts(self) -> Facts:
        info = workflow.info()
        session = self._s.session is not None  # only a session's history is measured between turns
        return Facts(
            now=workflow.now(),
            continue_suggested=info.is_continue_as_new_suggested(),
            history_bytes=info.get_current_history_size() if session else 0,
            history_events=info.get_current_history_length() if session else 0,
        )

    async def _carry(self, step: NextStep, input: t.RunInput) -> Outcome:
        s = self._s
        if isinstance(step, CallModel):
            if step.guard is not None:
                return Replied(await self._first_call_guarded(step.agent, step.guard, input.capture))
            return Replied(await self._call_model(step.agent, input.capture, step.with_reply))
        if isinstance(step, RunTools):
            return ToolsRan(await self._run_tools(s.agent_now, step))
        if isinstance(step, HandOff):
            await self._hand_off(s.agent_now, step)
            return HandedOff()
        if isinstance(step, CheckOutput):
            agent = s.agent_now
            return OutputChecked(
                await self._hook(agent, "output_type", agent.output_name or "output", text=step.output)
            )
        if isinstance(step, Guardrails):
            return GuardrailsRan(await self._guardrails(s.agent_now, "output", step.answer.output))
        if isinstance(step, Pause):
            await self._pause(step)
            return Resumed()
        if isinstance(step, Breakpoint):
            return BreakpointRan(await self._breakpoint(step))
        if isinstance(step, Steer):
            self._steer()
            return Steered()
        if isinstance(step, Compact):
            await self._compact(step.plan)
            return Compacted()
        assert isinstance(step, ContinueAsNew)
        await self._continue_as_new(input)

    # ----------------------------------------------------------------------- continue-as-new

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

    async def _breakpoint(self, step: Breakpoint) -> str | None:
        """The agent's breakpoint function, before model call `step.turn`: its edits apply; why
        the run pauses, if it asked to or an edit of it was refused."""
        agent = self._s.agent_now
        result = await self._hook(agent, "breakpoint", step.name, transcript_len=len(self._s.messages))
        for edit in result.edits:
            try:
                self._apply_edit(edit.model_copy(update={"by": f"breakpoint function {step.name}"}))
            except edits.EditRefused as refused:
                return f"breakpoint function {step.name}: its edit was refused: {refused}"
        if result.pause is not None:
            return f"breakpoint function {step.name}: {result.pause or 'pause'}"
        return None

    async def _pause(self, step: Pause) -> None:
        """Holds the run still, durably, until `client.py resume`; edits apply meanwhile."""
        s = self._s
        s.pause_request, s.resumed_by = None, None
        s.paused = t.PauseInfo(where=step.where, turn=step.turn, why=step.why, at=workflow.now())
        point = (
            f"before model call {step.turn}"
            if step.where == "before_model"
            else f"before the tool calls of turn {step.turn}"
        )
        self._event("paused", detail=f"{point}: {step.why}")
        self._set_phase("paused", f"paused {point}: {step.why}")
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
        phase: t.Phase = "running_tools" if step.where == "before_tools" else "calling_model"
        self._set_phase(phase, f"resumed by {s.resumed_by}")

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
                    if s.turns_here and should_continue(s, first, self._facts()):
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
        while True:
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

    def _session_ended(self, why: str) -> t.RunResult:
        s, session = self._s, self._s.session
        assert session is not None and s.agent is not None
        last = next((ex for ex in reversed(session.exchanges) if ex.output is not None), None)
        self._event("ended", text=why)
        self._set_phase("completed", f"session ended: {why}")
        output, output_object = (last.output or "", last.output_object) if last else ("", None)
        return self._result(output, output_object, messages=session.answered, ended_by=why)

    def _steer(self) -> None:
        session = self._s.session
        assert session is not None
        for queued in session.steer():
            self._s.messages.append(t.UserMessage(content=queued.text))
            detail = f"message {queued.message} from {queued.by} · steers the answer"
            self._event("message", text=queued.text, detail=detail)

    async def _compact(self, plan: memory.Compaction) -> None:
        """Compacts a session's transcript as the machine planned: a visible step of its own."""
        s, session = self._s, self._s.session
        assert session is not None and s.agent is not None
        agent, policy = s.agent_now, s.agent.memory
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

    # --------------------------------------------------------------------------------- calls

    async def _run_tools(self, agent: t.AgentSpec, step: RunTools) -> dict[str, t.ToolMessage]:
        runs = [p for p in step.calls if p.action in ("tool", "child")]
        names = ", ".join(describe_call(p.call, 60) for p in runs) or "no runnable calls"
        self._set_phase("running_tools", f"turn {self._s.turn}: running {names}")
        tasks = [asyncio.create_task(self._carry_out(agent, p)) for p in runs]
        try:
            return {m.call_id: m for m in await asyncio.gather(*tasks)}
        except BaseException:
            for task in tasks:  # one call ended the answer: its siblings stop too
                task.cancel()
            raise

    async def _hand_off(self, agent: t.AgentSpec, step: HandOff) -> None:
        """The next turn runs the target, frozen at the start like every agent this run can
        reach, with the conversation so far (through the handoff's input filter, if any)."""
        s, planned = self._s, step.call
        assert s.agent is not None
        target = s.agent.member(planned.target)
        spec = next((h for h in agent.handoffs if h.agent == planned.target), None)
        if target is None or spec is None:  # impossible by construction: resolve froze them all
            raise self._failure(f"cannot hand off to '{planned.target}': not part of this run", "UnknownAgent")
        if spec.input_filter in memory.HANDOFF_FILTERS:
            s.replace_messages(memory.HANDOFF_FILTERS[spec.input_filter](s.messages))
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
        self._search(t.SA_AGENT.value_set(target.name), t.SA_VERSION.value_set(target.version))
        self._set_phase("running_tools", f"turn {s.turn}: {agent.name} handed off to {target.name}")

    # ------------------------------------------------------------------------------ guardrails

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
