"""What the interpreter carries out for the run machine's steps that are more than one activity:
a pause (a durable wait for a person), the agent's breakpoint function, a session's wait for a
message and its compaction's summary, the turn's calls in parallel, a handoff, and the
guardrails. What each came to goes back to the machine (machine/run.py), which writes the books.

Determinism rules for this module, as for all of workflows/: no I/O, no clocks, no randomness,
no threads. Time comes from `workflow.now()`; activities are called by their declared names.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from typing import Literal

from temporalio import workflow
from temporalio.exceptions import ActivityError, FailureError

from durable_agent_runner.machine import control, conversation, memory
from durable_agent_runner.machine.calls import RunTools
from durable_agent_runner.machine.rules import Stop, guardrails_ran
from durable_agent_runner.machine.run import RUNNABLE, FilterHandoff, HandoffFiltered, PauseEnded, Summarized
from durable_agent_runner.machine.turn import Breakpoint, Pause
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows import versions
from durable_agent_runner.workflows.call_steps import CallSteps
from durable_agent_runner.workflows.notify_steps import Notifier, Wait
from durable_agent_runner.workflows.patches import CALL_AHEAD_PATCH
from durable_agent_runner.workflows.steps import Steps, model_call_bounds


class TurnSteps:
    """The steps `AgentRun._carry` hands on that are more than one activity."""

    def __init__(self, steps: Steps, notifier: Notifier, calls: CallSteps) -> None:
        self.steps, self.notifier, self.calls = steps, notifier, calls

    # --------------------------------------------------------------------------- breakpoints

    async def breakpoint(self, step: Breakpoint) -> t.HookResult:
        """The agent's breakpoint function, before model call `step.turn` (the machine takes its
        edits, and pauses if it asks to)."""
        s = self.steps.s
        return await self.steps.hook(s.agent_now, "breakpoint", step.name, transcript_len=len(s.messages))

    async def pause(self, step: Pause) -> PauseEnded:
        """Holds the run still, durably, until `client.py resume` (the machine took the pause and
        said so); edits apply meanwhile."""
        s = self.steps.s

        def resumed() -> bool:
            return s.resumed_by is not None

        agent = s.agent_now
        # A budget pause waits for a person who did not ask for it: they hear of it. A breakpoint
        # or `client.py pause` is a person's own doing: no one is told.
        escalate = agent.notify.escalate_after if agent.notify is not None else None
        label = f"budget-{step.turn}-{step.where}"
        why = control.holding(step).why
        wait = Wait("budget", label, step.turn, why, escalate_after=escalate, open=lambda: not resumed())
        try:
            async with self.notifier.notifying(agent, wait) if step.reason == "budget" else contextlib.nullcontext():
                await workflow.wait_condition(resumed, timeout=control.PAUSE_LIMIT, timeout_summary="pause limit")
        except TimeoutError:
            return PauseEnded(step, timed_out=True)
        return PauseEnded(step)

    # ------------------------------------------------------------------------------ sessions

    async def wait_for_message(self, wait: conversation.WaitForMessage) -> conversation.Woke:
        """Waits for a message or an end, within the idle time left."""
        s = self.steps.s  # the live books: a message taken at the door is a new session record (drafts.take)
        try:
            await workflow.wait_condition(
                lambda: s.session is not None and (bool(s.session.queue) or s.session.ending is not None),
                timeout=timedelta(seconds=wait.seconds),
                timeout_summary="session idle timeout",
            )
        except TimeoutError:
            return conversation.Woke(waited=True, timed_out=True)
        return conversation.Woke(waited=True)

    async def compact(self, plan: memory.Compaction) -> Summarized:
        """A session's compaction, as the machine planned it (and said so): the model's summary
        when it summarizes; the machine compacts the transcript with what comes back."""
        s = self.steps.s
        assert s.agent is not None
        if plan.strategy != "summarize":
            return Summarized(plan)
        compactions = s.session.compactions if s.session is not None else 0
        return Summarized(plan, await self._summarize(s.agent_now, plan.upto, s.agent.memory, compactions + 1))

    async def _summarize(
        self, agent: t.AgentSpec, upto: int, policy: t.MemoryPolicy, number: int
    ) -> t.CompactResult | str:
        """The model's summary of messages[:upto] (read by query, like a model call), or why not."""
        s = self.steps.s
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
                summary=f"turn {s.turn} · {self.steps.who(agent)}compact {upto} messages · {model}",
            )
            return result
        except ActivityError as err:
            cause = err.cause
            return cause.message if isinstance(cause, FailureError) else err.message

    # --------------------------------------------------------------------------------- calls

    async def run_tools(self, agent: t.AgentSpec, step: RunTools) -> dict[str, t.ToolMessage]:
        """The turn's calls at once (the machine said so, and shared the budget among its children)."""
        runs = [p for p in step.calls if p.action in RUNNABLE]
        self.steps.tracker.calls_now = {}  # each call says what it does as it goes (_doing)
        tasks = [asyncio.create_task(self.calls.carry_out(agent, p)) for p in runs]
        try:
            return {m.call_id: m for m in await asyncio.gather(*tasks)}
        except BaseException:
            for task in tasks:  # one call ended the answer: its siblings stop too
                task.cancel()
            raise

    async def run_calls(self, step: RunTools, capture: bool) -> tuple[dict[str, t.ToolMessage], t.AheadReply | None]:
        """The turn's calls, the lone routed one making the next model call too when the turn
        planned it (`step.ahead`) and the run is of code that knows how (CALL_AHEAD_PATCH)."""
        self.calls.ahead_next = None
        if step.ahead is not None and versions.patched(CALL_AHEAD_PATCH):
            self.calls.ahead_next = (step.calls[0].call.call_id, step.ahead.model_copy(update={"capture": capture}))
        try:
            results = await self.run_tools(self.steps.s.agent_now, step)
            return results, self.calls.made_ahead
        finally:
            self.calls.ahead_next, self.calls.made_ahead = None, None

    async def filter_handoff(self, step: FilterHandoff) -> HandoffFiltered:
        """The agent's handoff filter function on the conversation so far (machine/handoff.py
        planned the handoff; the machine hands over with what it returns)."""
        hook = step.handoff.hook
        assert hook is not None
        result = await self.steps.hook(step.agent, "input_filter", hook, transcript_len=len(self.steps.s.messages))
        return HandoffFiltered(step.agent, step.handoff, result.messages)

    # ------------------------------------------------------------------------------ guardrails

    async def first_call_guarded(
        self, agent: t.AgentSpec, text: str, capture: bool, cap: int | None = None
    ) -> t.ModelReply:
        """The first model call, with the agent's input guardrails running alongside it (as the
        Agents SDK does). A tripwire ends the run before any tool runs, and cancels the call."""
        model = asyncio.create_task(self.steps.call_model(agent, capture, None, cap))
        guards = asyncio.create_task(self.guardrails(agent, "input", text))
        await workflow.wait([model, guards], return_when=asyncio.FIRST_COMPLETED)
        if model.done() and model.exception() is not None:
            guards.cancel()
            return await model  # raises the model call's failure
        stop = await guards  # a reply that came first still waits: no tool runs before the verdict
        if stop is not None:
            model.cancel()
            raise self.steps.failure(stop.message, stop.error)
        return await model

    async def guardrails(self, agent: t.AgentSpec, kind: Literal["input", "output"], text: str) -> Stop | None:
        names = agent.input_guardrails if kind == "input" else agent.output_guardrails
        if not names:
            return None
        hook: t.HookKind = "input_guardrail" if kind == "input" else "output_guardrail"
        results = await asyncio.gather(*(self.steps.hook(agent, hook, name, text=text) for name in names))
        answered = list(zip(names, results, strict=True))
        return self.steps.take(lambda s, _: guardrails_ran(s, kind, answered, workflow.now()))
