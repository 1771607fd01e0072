"""A whole run through the machine, with no server: the interpreter's loops over a scripted world.

`PureRun` carries out each step the run machine (machine/run.py) gives the way the workflow does
(workflows/agent.py `run` and `_carry`, workflows/call_steps.py `carry_out`, workflows/turn_steps.py `pause`),
but the model, the tools, the agent's hooks and the people are scripted here, and the clock is a
counter. Every decision is the machine's own code: the turn (machine/turn.py), each call's life
(machine/call.py), what each of its steps writes into the run (machine/drafts.record, which the
workflow calls too), the door's checks of a decision (machine/approvals.py, doubts.py,
control.py), budgets, handoffs, forks and carries.

With `World.speedups`, the workers here take the speed-ups the run offers, as the activities do:
a model call runs the cheap calls of its reply (`WithReply`, chosen by the worker's own rule,
machine/calls.py `cheap_calls`), and the lone routed tool's activity makes the next model call
(`CallAhead`) with the transcript as the activity builds it (activities/ahead.py). The requests
are the workflow's own (machine/requests.py). The turn decides, as ever, what it takes of them.

What the workflow adds (commands, history, replay, timers, asyncio's interleavings) is for
the server tests. Sibling calls go on at once here too: in the order asked, each takes its steps
until it waits for a person or an outside completion, and people act once every call left waits.
"""

from __future__ import annotations

import io
import itertools
import json
import pickle
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal, TypeVar

from pydantic import BaseModel

from durable_agent_runner.activities import anthropic_wire, chat_wire, gemini_request, responses_wire
from durable_agent_runner.activities.context_cache import digest_of, tool_message
from durable_agent_runner.agents.tools import parse_arguments
from durable_agent_runner.machine import call as m
from durable_agent_runner.machine import child as child_machine
from durable_agent_runner.machine import (
    control,
    conversation,
    drafts,
    fallback,
    progress,
    requests,
    rules,
)
from durable_agent_runner.machine import outcomes as o
from durable_agent_runner.machine import run as machine
from durable_agent_runner.machine import turn as turn_machine
from durable_agent_runner.machine.budget import Ledger
from durable_agent_runner.machine.calls import PlannedCall, RunTools, cheap_calls
from durable_agent_runner.machine.progress import Status
from durable_agent_runner.machine.rerun import Reran, RerunRecorded
from durable_agent_runner.machine.rules import Stop
from durable_agent_runner.machine.session import SessionState
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.testing.fake_llm import anthropic, gemini
from durable_agent_runner.testing.fake_llm.conversation import parse_chat, parse_responses
from durable_agent_runner.testing.fake_llm.wire import ApiError
from durable_agent_runner.workflows import types as t

W = TypeVar("W")
START = datetime(2026, 12, 4, 9, 0, tzinfo=UTC)

Person = Callable[["PureRun"], None]  # acts on a run that waits for a person, through its door
Tool = Callable[[dict[str, object]], str]  # a tool's result; raise LostAttempt for no result


class LostAttempt(Exception):
    """A tool's attempts ended without a result (its worker died, it timed out, ...)."""

    def __init__(self, end: str = "timeout", ended: str = "heartbeat timeout") -> None:
        super().__init__(ended)
        self.end, self.ended = end, ended


class ModelDown(Exception):
    """A model call failed for good (its retries spent), as `kind` (ModelHTTP503, ...)."""

    def __init__(self, model: str | None, kind: str = "ModelHTTP503") -> None:
        super().__init__(f"{model or 'the default model'} is down")
        self.kind = kind


class RunFailed(Exception):
    def __init__(self, message: str, kind: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.message, self.kind = message, kind


class NobodyActs(Exception):
    """The run waits for a person, and the script has no one left to act (a run that would wait)."""


_CALL_IDS = itertools.count(1)


def reply(text: str | None = None, *calls: tuple[str, dict[str, object]], tokens: int = 100) -> t.ModelReply:
    """A model's reply: its text, and the tool calls it asks for (name, arguments), each with a
    call id of its own (`call_N`, as a provider gives them)."""
    tool_calls = [t.ToolCall(call_id=f"call_{next(_CALL_IDS)}", name=n, arguments=json.dumps(a)) for n, a in calls]
    usage = t.Usage(input_tokens=tokens, output_tokens=tokens // 10, total_tokens=tokens + tokens // 10)
    return t.ModelReply(message=t.AssistantMessage(content=text, tool_calls=tool_calls), usage=usage)


@dataclass
class World:
    """What the run meets: the model's replies in order, the tools, the agent's hooks (by kind and
    name: an approval check says a person decides unless told otherwise) and the people, each of
    whom acts once, in order, when the run waits for a person."""

    replies: list[t.ModelReply]
    tools: dict[str, Tool] = field(default_factory=dict)
    hooks: dict[tuple[t.HookKind, str], t.HookResult] = field(default_factory=dict)
    people: list[Person] = field(default_factory=list)
    seen: list[list[t.Message]] = field(default_factory=list)  # the transcript each model call was sent
    ran: list[tuple[str, dict[str, object]]] = field(default_factory=list)  # each tool run, in order
    time_passes: bool = False  # with nobody left to act, a bounded wait runs out (else NobodyActs)
    then_answer: str | None = None  # once the replies run out, the model answers this (None: an error)
    model: Callable[[list[t.Message]], t.ModelReply] | None = None  # replies to the transcript (not `replies`)
    speedups: bool = False  # the workers run cheap calls with the reply and make calls ahead (module doc)
    with_reply: list[str] = field(default_factory=list)  # the calls a model call ran with its reply
    made_ahead: list[str] = field(default_factory=list)  # the calls whose activity made the next model call
    down: set[str | None] = field(default_factory=set)  # models whose every call fails (ModelDown)
    models: list[str | None] = field(default_factory=list)  # the model each call went to, in order
    hook_fn: Callable[[t.HookKind, str], t.HookResult | None] | None = None  # the agent's code, before `hooks`
    check_pure: bool = True  # check that each step leaves the run and the happening it was given as they were


class PureRun:
    """One run (its executions, if it continues as new) of `agent` on `world`."""

    def __init__(
        self, agent: t.AgentSpec, world: World, run_input: t.RunInput, run_id: str = "run-1", child: bool = False
    ) -> None:
        self.world, self.run_id, self.input, self.child = world, run_id, run_input, child
        self.now = START
        self.s, self.tracker = RunState(), Status()
        self.executions = 1
        self.continue_at: set[int] = set()  # the turns after which Temporal suggests continue-as-new
        self.waits: list[t.RunStatus] = []  # the run's status each time it waited for a person
        self.ledger: Ledger | None = None  # set below, once the agent is resolved
        if run_input.carry is not None:
            self.s.from_carry(run_input.carry)
        else:
            progress.begin(self.s, run_input)
            progress.resolved(self.s, agent)
            if self.s.session is not None:
                self.send(run_input.prompt, by="client")
        self.ledger, _ = Ledger.for_run(run_input, self.s.agent_now, child=child, first=True)
        self.children: list[PureRun] = []  # the child runs its calls started (agents as tools)
        self._ahead_next: tuple[str, t.ModelCallInput] | None = None  # the call to make the next model call
        self._made_ahead: t.AheadReply | None = None  # what that call's activity brought back
        # (agent, model, answer): a model call that failed for good, in a session's answer K (0: a single run's)
        self.failed: set[tuple[str, str | None, int]] = set()

    # ----------------------------------------------------------------------------- the loops

    def run(self) -> t.RunResult:
        """The run to its end, as workflows/agent.py `run` carries out the run machine's steps:
        a single run's answer, or a session's end, or RunFailed (NobodyActs: it would wait for a
        person). In a session, while it waits for a message, the next scripted person acts (sends
        one, or ends it), and with nobody left its idle time runs out."""
        began = machine.Began(self.input.prompt if self.input.carry is None else None)
        while True:
            try:
                return self._execution(began)
            except _ContinuedAsNew:
                began = machine.Began()

    converse = run

    def _execution(self, happened: machine.Happened) -> t.RunResult:
        run = machine.begin(self.s, self.ledger, f"execution-{self.executions}")
        while True:
            before = shape((run, happened)) if self.world.check_pure else None
            moved = machine.step(run, happened, self.facts())
            assert before is None or shape((run, happened)) == before, "step changed the run it was given"
            run = machine.adopt(moved.run, self.s, self.ledger)
            self.tracker.due.extend(moved.search)
            for phase, words in moved.phases:
                self.set_phase(phase, words)
            if isinstance(moved.step, machine.Finish):
                end, session = moved.step, self.s.session
                more = {} if session is None else {"messages": session.answered, "ended_by": end.ended_by}
                return progress.result(self.s, self.run_id, end.output, end.output_object, **more)
            try:
                happened = self._carry(moved.step)
            except RunFailed as err:
                if run.answer is None or self.s.session is None:
                    raise
                happened = machine.Failed(err.kind, err.message)

    def _carry(self, step: machine.Step) -> machine.Happened:
        s = self.s
        if isinstance(step, Stop):
            raise self.failure(step.message, step.error)
        if isinstance(step, machine.GoOn):
            return step.happened
        if isinstance(step, conversation.WaitForMessage):
            if self.world.people:
                self.world.people.pop(0)(self)
            session = _session(self.s)  # read after the person acted: a message taken is a new record
            return conversation.Woke(waited=True, timed_out=not session.queue and session.ending is None)
        if isinstance(step, turn_machine.CallModel):  # as workflows/steps.py `call_model`
            try:
                return o.Replied(self._call_model(step))
            except ModelDown as down:
                self.failed.add((step.agent.name, step.agent.model, self.answering()))
                if fallback.falls_back(step.agent, down.kind):
                    return o.ModelFailed(down.kind, str(down))
                raise self.failure(f"model call failed on turn {s.turn}: {down}", down.kind) from None
        if isinstance(step, RunTools):  # as workflows/turn_steps.py `run_calls`
            if step.ahead is not None and self.world.speedups:
                self._ahead_next = (step.calls[0].call.call_id, step.ahead)
            try:
                return o.ToolsRan(self._run_tools(s.agent_now, step), self._made_ahead)
            finally:
                self._ahead_next, self._made_ahead = None, None
        if isinstance(step, RerunRecorded):
            return Reran(self._run_tools(step.agent, step.plan))
        if isinstance(step, machine.FilterHandoff):
            assert step.handoff.hook is not None
            return machine.HandoffFiltered(
                step.agent, step.handoff, self.hook("input_filter", step.handoff.hook).messages
            )
        if isinstance(step, turn_machine.CheckOutput):
            return o.OutputChecked(self.hook("output_type", s.agent_now.output_name or "output"))
        if isinstance(step, turn_machine.Guardrails):
            names = s.agent_now.output_guardrails
            verdicts = [(n, self.hook("output_guardrail", n)) for n in names]
            return o.GuardrailsRan(self._take(lambda s, _: rules.guardrails_ran(s, "output", verdicts, self.now)))
        if isinstance(step, turn_machine.Pause):  # the machine took the pause and said so: a person resumes
            self.tick()
            self._person(lambda: self.s.resumed_by is not None, None)
            return machine.PauseEnded(step)
        if isinstance(step, turn_machine.Breakpoint):
            return machine.BreakpointAnswered(step.name, self.hook("breakpoint", step.name))
        if isinstance(step, turn_machine.Compact):  # a session's transcript nears its budget
            if step.plan.strategy == "summarize":
                return machine.Summarized(step.plan, t.CompactResult(summary="(the earlier exchanges, summarized)"))
            return machine.Summarized(step.plan)
        assert isinstance(step, turn_machine.ContinueAsNew), step
        self._continue_as_new()

    # -------------------------------------------------------------------------------- steps

    def answering(self) -> int:
        """The message whose answer is in progress (0: a single run)."""
        current = self.s.session.current if self.s.session is not None else None
        return current.message if current is not None else 0

    def _call_model(self, step: turn_machine.CallModel) -> t.ModelReply:
        if step.guard is not None:
            verdicts = [(n, self.hook("input_guardrail", n)) for n in step.agent.input_guardrails]
            stop = self._take(lambda s, _: rules.guardrails_ran(s, "input", verdicts, self.now))
            if stop is not None:
                raise self.failure(stop.message, stop.error)
        # A model that failed for good is not called again by that agent in this answer; a session's
        # later answer starts on the agent's first model again (docs/providers.md).
        again = (step.agent.name, step.agent.model, self.answering()) in self.failed
        assert not again, (step.agent.model, self.answering())
        if step.made is not None:  # made by the last tool's activity, for exactly this call
            return step.made.reply
        request, _ = requests.model_call(self.s, step.agent, False, step.with_reply, step.max_output_tokens)
        return self._model(request, list(self.s.messages))

    def _model(self, request: t.ModelCallInput, messages: list[t.Message]) -> t.ModelReply:
        """The model activity: the script's reply to `messages`; with speed-ups, the cheap calls
        of the reply run with it, by the worker's rule (activities/model.py)."""
        self.world.models.append(request.model)
        if request.model in self.world.down:
            raise ModelDown(request.model)
        assert self.s.agent is not None
        agent = self.s.agent.member(request.agent)
        assert agent is not None
        refused = refusal(agent, messages)
        assert refused is None, f"a model call the API refuses: {refused}"
        self.world.seen.append(messages)
        if self.world.model is not None:
            answer = self.world.model(list(messages))
        elif not self.world.replies and self.world.then_answer is not None:
            answer = reply(self.world.then_answer)
        elif not self.world.replies:
            raise AssertionError(f"the model was called for turn {request.turn}, and the script has no reply left")
        else:
            answer = self.world.replies.pop(0)
        if request.with_reply is None or not self.world.speedups:
            return answer
        earlier = {c.call_id for m in messages if isinstance(m, t.AssistantMessage) for c in m.tool_calls}
        results = []
        for call in cheap_calls(request.with_reply, answer, earlier):
            ran = self._ran(call.name, call.arguments)
            if not isinstance(ran, LostAttempt):  # one that fails is left out: the turn runs it
                self.world.with_reply.append(call.call_id)
                results.append(t.ToolResult(call_id=call.call_id, tool=call.name, output=ran[0], is_error=ran[1]))
        return answer.model_copy(update={"tool_results": results})

    def _call_ahead(self, request: t.ToolCallInput, result: t.ToolResult) -> t.AheadReply | None:
        """The next model call, made by the tool's activity once its tool ran (activities/ahead.py):
        the run's transcript as it was when the tool started, and the tool's result."""
        then = request.then
        assert then is not None
        messages = [*self.s.messages[: then.upto], tool_message(result)]
        call = then.call.model_copy(update={"digest": digest_of(messages), "transcript_len": len(messages)})
        try:
            made = self._model(call, messages)
        except ModelDown:  # no failure of the activity: the result comes back alone, the turn calls
            return None
        self.world.made_ahead.append(request.call_id)
        return t.AheadReply(request=call, reply=made, began_at=self.tick())

    def _ran(self, tool: str, arguments: str) -> tuple[str, bool] | LostAttempt:
        """One run of a tool: its result and whether it is an error, or how it was lost. Arguments
        that are not a JSON object run nothing: the model is told (as the tool's activity does)."""
        args = parse_arguments(tool, arguments)
        if isinstance(args, str):
            return f"error: {args}", True
        self.world.ran.append((tool, args))
        try:
            return self.world.tools[tool](dict(args)), False
        except LostAttempt as lost:
            return lost

    def _run_tools(self, agent: t.AgentSpec, step: RunTools) -> dict[str, t.ToolMessage]:
        runs = [p for p in step.calls if p.action in machine.RUNNABLE]
        self.tracker.calls_now = {}
        # Each call's life goes on while its siblings wait (workflows/call_steps.py `carry_out`, a
        # task each): in the order asked, each call takes its steps until it waits for a person
        # or an outside completion; once every call left waits, a person acts (or a wait runs out).
        moving: dict[str, m.Transition] = {}
        for p in runs:
            moving[p.call.call_id] = m.start(p, self.s.turn, self._ctx(agent), self.s.doubts.times(p.call.call_id))
            self._took(agent, moving[p.call.call_id], None)
        results: dict[str, t.ToolMessage] = {}
        while moving:
            went_on = False
            for call_id, moved in list(moving.items()):
                if moved.call.message is not None:
                    results[call_id] = moved.call.message
                    del moving[call_id]
                    continue
                happened = self._do(agent, moved.call, moved.steps[0])
                if happened is not None:  # else: it waits for what has not happened yet
                    moving[call_id] = m.advance(moved.call, happened, self._ctx(agent))
                    self._took(agent, moving[call_id], moved.call.stage)
                    went_on = True
            if moving and not went_on:
                self._waits_for_people(agent, moving)
        return results

    def _waits_for_people(self, agent: t.AgentSpec, moving: dict[str, m.Transition]) -> None:
        """Every call left waits: status names each wait, then the next scripted person acts. With
        nobody left, the first bounded wait runs out if the world lets time pass; else NobodyActs."""
        status = self.status()
        self.waits.append(status)
        named = {
            "approval": {p.call_id for p in status.pending_approvals},
            "doubt": {d.call_id for d in status.in_doubt},
            "question": {q.call_id for q in status.questions},
            "outside": {o.call_id for o in status.outside},
        }
        for call_id, moved in moving.items():
            step = moved.steps[0]
            about = step.about if isinstance(step, m.AskPerson) else "outside"
            assert call_id in named[about], f"{call_id} waits ({about}), and status does not name it: {status}"
            # the one line names each wait by its call, beside a person's (a question: by its text)
            if about != "question" and (about != "outside" or named["approval"] or named["doubt"]):
                assert call_id in status.last_step, f"{call_id} waits ({about}): {status.last_step}"
        # the phase says a person is waited for, as long as one is (a question waits as an approval does)
        if named["approval"] or named["question"]:
            assert status.phase == t.Phase.AWAITING_APPROVAL, status.phase
        elif named["doubt"]:
            assert status.phase == t.Phase.IN_DOUBT, status.phase
        if self.world.people:
            self.world.people.pop(0)(self)
            self.tick(timedelta(minutes=1))
            return
        bounded = [(c, mv) for c, mv in moving.items() if getattr(mv.steps[0], "timeout", None) is not None]
        if not bounded or not self.world.time_passes:
            raise NobodyActs(status.last_step)
        call_id, moved = bounded[0]
        timeout = getattr(moved.steps[0], "timeout", None)
        assert isinstance(timeout, timedelta)
        self.tick(timeout)
        moving[call_id] = m.advance(moved.call, m.TimedOut(call_id=call_id), self._ctx(agent))
        self._took(agent, moving[call_id], moved.call.stage)

    def _ctx(self, agent: t.AgentSpec) -> m.Ctx:
        forked = self.s.forked_from.run_id if self.s.forked_from is not None else None
        return m.Ctx(
            agent=agent, now=self.tick(), run_id=self.run_id, always=self.s.approvals.always, forked_from=forked
        )

    def _took(self, agent: t.AgentSpec, moved: m.Transition, before: m.Stage | None) -> None:
        ahead = self._made_ahead.began_at if self._made_ahead is not None else None
        given = shape((self.s, self.tracker, moved)) if self.world.check_pure else None
        kept = drafts.record(self.s, self.tracker, agent, moved, before, self.now, ahead)
        assert given is None or shape((self.s, self.tracker, moved)) == given, "record changed its input"
        drafts.keep(kept.books, self.s), drafts.keep(kept.tracker, self.tracker)
        took = kept.took
        if took.phase is not None:
            self.set_phase(*took.phase)

    def _do(self, agent: t.AgentSpec, c: m.Call, step: m.Step) -> m.Happened | None:
        """One step of a call, carried out: what happened, or None while it waits for a person or an
        outside completion that has not come yet."""
        if isinstance(step, m.CheckApproval):
            # As the agent's check answers for a tool that always asks: a person decides, shown
            # the arguments it validated (activities/hooks.py).
            asks = t.HookResult(needs_approval=True, arguments=step.args)
            return m.Checked(call_id=c.call_id, result=self.hook("approval", c.tool, asks))
        if isinstance(step, m.AskPerson):
            return self._ask(c, step)
        if isinstance(step, m.RunTool):  # as workflows/call_steps.py `_tool`, its input the workflow's own
            run = requests.tool_run(self.s, agent, c, step, self._ahead_next)
            ran = self._ran(c.tool, step.arguments)
            if isinstance(ran, LostAttempt):
                return m.Lost(call_id=c.call_id, end=ran.end, why=str(ran), ended=ran.ended)  # type: ignore[arg-type]
            if run.ahead:
                result = t.ToolResult(call_id=c.call_id, tool=c.tool, output=ran[0], is_error=ran[1])
                self._made_ahead = self._call_ahead(run.request, result)
            return m.Ran(call_id=c.call_id, content=ran[0], is_error=ran[1])
        if isinstance(step, m.StartChild):
            message = self._child(agent, c.planned, step.args)
            return m.Ran(call_id=c.call_id, content=message.content, is_error=message.is_error)
        if isinstance(step, m.AwaitOutside):
            record = self.s.outside.completed(c.call_id)
            return m.Completed(record=record) if record is not None else None
        assert isinstance(step, m.FailRun), f"not carried out here: {step}"
        raise self.failure(step.message, step.error)

    def _child(self, agent: t.AgentSpec, planned: PlannedCall, args: dict[str, object] | None) -> t.ToolMessage:
        """An agent as a tool: a child run of the frozen member on the same world (its model
        replies come next in the script), within its share of the budget (machine/child.py)."""
        planned_child = child_machine.plan(self.s, agent, planned, args, self.run_id, self.ledger)
        if isinstance(planned_child, Stop):
            raise self.failure(planned_child.message, planned_child.error)
        if isinstance(planned_child, t.ToolMessage):
            return planned_child
        frozen = planned_child.input.frozen
        assert frozen is not None
        sub = PureRun(frozen, self.world, planned_child.input, planned_child.child_id, child=True)
        self.children.append(sub)
        try:
            result = sub.run()
        except RunFailed as err:
            spent = t.ChildUsage(child_id=sub.run_id, usage_by_agent=sub.s.usage_by_agent)
            return child_machine.failed(self.s, planned_child, err.message, spent, self.ledger)
        return child_machine.answered(self.s, planned_child, result, self.ledger)

    def _ask(self, c: m.Call, step: m.AskPerson) -> m.Happened | None:
        """A wait for a person: what a person decided at the door (the call's record), if they have."""
        if step.about == "approval":
            record = self.s.approvals.decided(c.call_id)
            return m.Decided(record=record) if record is not None else None
        if step.about == "question":
            answer = self.s.questions.answered(c.call_id)
            return m.Answered(record=answer) if answer is not None else None
        assert c.doubt is not None
        resolution = self.s.doubts.decided(c.call_id, c.doubt.doubt)
        return m.Resolved(record=resolution) if resolution is not None else None

    def _person(self, done: Callable[[], bool], bound: timedelta | None) -> None:
        """The run waits for a person: the next scripted ones act, until `done`. With nobody left,
        the wait's `bound` passes if the world lets time pass; else NobodyActs."""
        self.waits.append(self.status())
        while not done() and self.world.people:
            self.world.people.pop(0)(self)
        if not done() and (bound is None or not self.world.time_passes):
            raise NobodyActs(self.status().last_step)
        self.tick(bound if not done() and bound is not None else timedelta(minutes=1))

    def _continue_as_new(self) -> None:
        """A new execution from the carry alone, as Temporal starts it (workflows/agent.py)."""
        self.set_phase(*progress.continuing(self.s))
        self.continue_at.discard(self.s.turn)  # the new execution's history is small again
        carry = self.s.to_carry(f"execution-{self.executions}")
        if self.ledger is not None:
            carry.budget = self.ledger.budget
        carry = t.Carry.model_validate_json(carry.model_dump_json())  # what crosses is only what serializes
        self.input = t.RunInput(prompt="", agent=carry.agent.name, carry=carry)
        self.s, self.tracker, self.executions = RunState(), Status(), self.executions + 1
        self.s.from_carry(carry)
        self.ledger, _ = Ledger.for_run(self.input, self.s.agent_now, child=self.child, first=True)
        raise _ContinuedAsNew

    # --------------------------------------------------------------- the door (what people use)

    def approve(self, by: str = "alice", call_id: str | None = None, **more: object) -> None:
        """Approves `call_id`, or the one call waiting for approval (as status lists it)."""
        call_id = call_id or self._waiting(self.status().pending_approvals)
        self._decide(t.ApprovalDecision(call_id=call_id, approve=True, by=by, **more))  # type: ignore[arg-type]

    def reject(self, reason: str, by: str = "bob", call_id: str | None = None) -> None:
        call_id = call_id or self._waiting(self.status().pending_approvals)
        self._decide(t.ApprovalDecision(call_id=call_id, approve=False, by=by, reason=reason))

    def _decide(self, decision: t.ApprovalDecision) -> None:
        self.s.approvals.check(decision, self.s.agent_now)  # the update's validator
        self._take(lambda s, _: control.decision(s, decision, self.now))

    def resolve(
        self, action: Literal["rerun", "result", "fail"], by: str = "carol", call_id: str | None = None, **more: object
    ) -> None:
        """Resolves `call_id`, or the one call in doubt (as status lists it)."""
        call_id = call_id or self._waiting(self.status().in_doubt)
        decision = t.ResolveCall(call_id=call_id, action=action, by=by, **more)  # type: ignore[arg-type]
        self.s.doubts.check(decision)
        self._take(lambda s, _: control.resolution(s, decision, self.now))

    def resume(self, by: str = "dave", **raised: int | float) -> None:
        request = t.ResumeRequest(by=by, **raised)  # type: ignore[arg-type]
        control.check_resume(self.s, self.ledger, request)
        self._take(lambda s, ledger: control.resume(s, ledger, request, self.now))

    def complete(self, result: str, by: str = "frank", call_id: str | None = None) -> None:
        """Completes `call_id`, or the one call waiting for an outside completion (as status lists it)."""
        call_id = call_id or self._waiting(self.status().outside)
        completion = t.CompleteCall(call_id=call_id, result=result, by=by)
        self.s.outside.check(completion)
        self._take(lambda s, _: s.outside.apply(completion, self.now))

    def answer(
        self, text: str | None = None, choice: int | None = None, by: str = "gina", call_id: str | None = None
    ) -> None:
        """Answers `call_id`'s question, or the one question waiting (as status lists it)."""
        call_id = call_id or self._waiting(self.status().questions)
        answer = t.AnswerQuestion(call_id=call_id, text=text, choice=choice, by=by)
        self.s.questions.check(answer)
        self._take(lambda s, _: s.questions.apply(answer, self.now))

    def send(self, text: str, by: str = "erin") -> t.MessageReceipt:
        session, message = self.s.session, t.SessionMessage(text=text, by=by)
        assert session is not None, "not a session"
        session.check(message, self.s.done)  # the update's validator
        return self._take(lambda s, _: control.message(s, message, self.now))

    def end(self, by: str = "erin") -> None:
        assert self.s.session is not None, "not a session"
        self._take(lambda s, _: _session(s).end(t.EndSession(by=by)))

    def pause(self, by: str = "dave") -> None:
        control.check_pause(self.s)
        self._take(lambda s, _: control.pause(s, t.PauseRequest(by=by)))

    def edit(self, edit: t.Edit) -> None:
        control.check_edit(self.s, edit)
        self._take(lambda s, _: control.take_edit(s, edit, self.now))

    def _take(self, write: Callable[[RunState, Ledger | None], W]) -> W:
        """As workflows/handlers.py `Inbox._take`: the rule writes a draft (machine/drafts.take),
        checked to leave the books it was given as they were; the new books are kept."""
        given = shape((self.s, self.ledger)) if self.world.check_pure else None
        taken = drafts.take(self.s, self.ledger, write)
        assert given is None or shape((self.s, self.ledger)) == given, "take changed its input"
        drafts.keep(taken.books, self.s)
        if self.ledger is not None and taken.ledger is not None:
            drafts.keep(taken.ledger, self.ledger)
        return taken.value

    @staticmethod
    def _waiting(
        pending: list[t.PendingApproval] | list[t.InDoubtCall] | list[t.PendingOutside] | list[t.PendingQuestion],
    ) -> str:
        assert len(pending) == 1, f"not one call waits, but {len(pending)}"
        return pending[0].call_id

    # ------------------------------------------------------------------------------- records

    def status(self) -> t.RunStatus:
        status = self.s.status(self.run_id)
        if self.ledger is not None:
            status.budget = self.ledger.status(self.s.usage)
        return status

    def kinds(self) -> list[str]:
        return [e.kind for e in self.s.events]

    def hook(self, kind: t.HookKind, name: str, default: t.HookResult | None = None) -> t.HookResult:
        found = self.world.hook_fn(kind, name) if self.world.hook_fn is not None else None
        return found or self.world.hooks.get((kind, name), default or t.HookResult())

    def facts(self) -> o.Facts:
        return o.Facts(now=self.tick(), continue_suggested=self.s.turn in self.continue_at)

    def tick(self, by: timedelta = timedelta(seconds=1)) -> datetime:
        self.now += by
        return self.now

    def event(self, kind: t.EventKind, **fields: object) -> None:
        self.s.event(self.now, kind, **fields)

    def set_phase(self, phase: t.Phase, step: str) -> None:
        before = progress.set_phase(self.s, phase, step)
        self.tracker.writes(self.s, before)

    def failure(self, message: str, kind: str) -> RunFailed:
        before = self._take(lambda s, _: progress.failed(s, message, kind, self.now))
        if before is not None:
            self.tracker.writes(self.s, before)
        return RunFailed(message, kind)


GEMINI = "gemini-2.5-flash"


def refusal(agent: t.AgentSpec, messages: list[t.Message]) -> str | None:
    """Whether an API would refuse this transcript, as each wire sends it (Chat Completions, the
    Responses API, Anthropic's Messages, Gemini), checked as strictly as the APIs do (fake_llm's
    dialects); its words, or None."""
    try:
        parse_chat(chat_wire.build_request(agent, messages, "gpt-4.1", stream=False))
        parse_responses(responses_wire.build_request(agent, messages, "gpt-4.1", stream=False))
        anthropic.parse(anthropic_wire.build_request(agent, messages, "claude-sonnet-4-5", stream=False))
        gemini.parse(gemini_request.build_request(agent, messages, GEMINI, False), GEMINI, False)
    except ApiError as refused:
        return str(refused)
    return None


def _session(s: RunState) -> SessionState:
    assert s.session is not None, "not a session"
    return s.session


def shape(value: object) -> bytes:
    """Everything `value` holds, however deep (ids, counters, lists, a record's fields), as bytes:
    equal before and after a step iff the step changed nothing in it. A model's private
    attributes are left out: they are memos a read fills (a call's parsed arguments,
    machine/bounds.py `ParsedArguments`), not state."""
    out = io.BytesIO()
    _Shape(out).dump(value)
    return out.getvalue()


class _Shape(pickle.Pickler):
    def reducer_override(self, obj: object) -> object:
        if isinstance(obj, BaseModel):
            return object.__new__, (type(obj),), (obj.__dict__, obj.__pydantic_fields_set__)
        return NotImplemented


class _ContinuedAsNew(Exception):
    """The execution ended in a continue-as-new: the run goes on from its carry."""


def fork(origin: PureRun, at_turn: int, world: World, live_tools: bool = False, prompt: str | None = None) -> PureRun:
    """A fork of `origin` before model call `at_turn`, as `client.py fork` makes it (its carry)."""
    link = t.ForkLink(run_id=origin.run_id, turn=at_turn, live_tools=live_tools)
    carry = t.Carry.for_fork(origin.s.fork_point(at_turn), link, prompt)
    return PureRun(
        carry.agent, world, t.RunInput(prompt="", agent=carry.agent.name, carry=carry), f"{origin.run_id}-fork"
    )
