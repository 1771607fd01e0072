"""The durable agent loop: one agent run is one execution chain of the `AgentRun` workflow.

The workflow is an interpreter. The run machine (machine/run.py, pure) chooses each next step of
the whole run: each answer's turns and, in a session, what comes between answers. `run` carries
each step out (an activity, a child run, a wait for a person or a message, a continue-as-new) and
feeds back what happened, until the machine finishes the run or a step fails it.

Determinism rules for this module: no I/O, no clocks, no randomness, no threads. Time comes from
`workflow.now()`. Everything that touches the world is an activity called by name (names in
`workflows.types`), so renaming Python code never breaks runs in flight.
"""

from __future__ import annotations

import asyncio
from typing import NoReturn

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

from durable_agent_runner.machine import conversation, progress
from durable_agent_runner.machine import outcomes as o
from durable_agent_runner.machine import run as machine
from durable_agent_runner.machine import turn as turn_machine
from durable_agent_runner.machine.budget import Ledger
from durable_agent_runner.machine.calls import RunTools
from durable_agent_runner.machine.rerun import Reran, RerunRecorded
from durable_agent_runner.machine.rules import Stop
from durable_agent_runner.workflows import endings, versions
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.call_steps import CallSteps
from durable_agent_runner.workflows.handlers import Inbox
from durable_agent_runner.workflows.notify_steps import Notifier
from durable_agent_runner.workflows.patches import (
    BREAK_TOOLS_PATCH,
    GIVEN_BUDGET_PATCH,
    SESSION_PROMPT_PATCH,
    SESSION_RAISE_PATCH,
    TREE_BUDGET_PATCH,
)
from durable_agent_runner.workflows.steps import FallingBack, Steps
from durable_agent_runner.workflows.turn_steps import TurnSteps

# Only the project's own errors fail a run from workflow code: every failure it means is an
# ApplicationError (which always fails the run). A bug in this code holds the workflow task, as
# Temporal intends, so a fixed deploy carries the run on; `client.py status` says it is stuck.
RUN_FAILURE_TYPES: list[type[BaseException]] = []


# Outside temporalio's sandbox (it checked nothing here and cost a turn ~1 ms of worker CPU):
# workflows/ruff.toml bans clocks, randomness, I/O and threads, and the tests replay every run
# and checked-in history in the strict sandbox (tests/helpers.py: STRICT_SANDBOX).
@workflow.defn(name=t.WORKFLOW_NAME, failure_exception_types=RUN_FAILURE_TYPES, sandboxed=False)
class AgentRun:
    """One class, no base: the loop, the handlers' declarations and the run's parts. Each part
    holds the one `Steps` (the run's state and what status says): `TurnSteps` (a turn's steps that
    are more than one activity), `CallSteps` (each call's life), `Notifier` (who hears of a wait)
    and `Inbox` (what the handlers record)."""

    @workflow.init
    def __init__(self, input: t.RunInput) -> None:
        versions.started_on_2_0()  # before any command: 2.0's path, or a 1.x run's patches (workflows/versions.py)
        # State exists before any handler runs: a message may arrive with the start itself.
        self._steps = Steps()
        self._s = self._steps.s
        notifier = Notifier(self._steps)
        self._turns = TurnSteps(self._steps, notifier, CallSteps(self._steps, notifier))
        self._inbox = Inbox(self._steps)
        self._prompt_taken = False
        if input.carry is not None:
            self._s.from_carry(input.carry)
        else:
            progress.begin(self._s, input)
            # Here, not in the run: a message delivered with the start itself (its update runs
            # before the run does) must not take the opening prompt's place as message 1.
            if self._s.session is not None and input.prompt and versions.patched(SESSION_PROMPT_PATCH):
                self._accept_prompt(input.prompt)

    def _accept_prompt(self, prompt: str) -> None:
        self._inbox.opening(t.SessionMessage(text=prompt, by="client"))
        self._prompt_taken = True

    # ------------------------------------------------------------------------------- the run

    @workflow.run
    async def run(self, input: t.RunInput) -> t.RunResult:
        """Carries out the run machine's steps (machine/run.py), feeding back what each came to,
        until it finishes; each new run is adopted into the live books before anything else runs."""
        try:
            if self._s.session is not None and input.carry is None and input.prompt and not self._prompt_taken:
                self._accept_prompt(input.prompt)  # a session recorded before 1.4
            # Asked before the resolve, in the first workflow task (see GIVEN_BUDGET_PATCH's note), and only
            # by a new run with breakpoints before named tools: no other run records its marker.
            named = input.carry is None and input.breakpoints is not None and bool(input.breakpoints.tools)
            check = named and versions.patched_2x(BREAK_TOOLS_PATCH)
            if self._s.session is not None:  # asked by every session execution at its start, as the one above
                self._inbox.raise_between = versions.patched_2x(SESSION_RAISE_PATCH)
            await self._start(input)
            run = machine.begin(self._s, self._steps.ledger, workflow.info().run_id)
            happened: machine.Happened = machine.Began(input.prompt if input.carry is None else None, check)
            while True:
                moved = machine.step(run, happened, self._steps.facts())
                run = machine.adopt(moved.run, self._s, self._steps.ledger)
                self._steps.search(*moved.search)
                for phase, words in moved.phases:
                    self._steps.set_phase(phase, words)
                if isinstance(moved.step, machine.Finish):
                    return await self._finish(moved.step, run.first)
                try:
                    happened = await self._carry(moved.step, input)
                except ApplicationError as err:
                    if run.answer is None or self._s.session is None:
                        raise
                    happened = machine.Failed(err.type or "Error", err.message)  # that message's error
        except asyncio.CancelledError:
            self._steps.cancelled()
            await endings.tell_parent(self._s)
            raise

    async def _start(self, input: t.RunInput) -> t.AgentSpec:
        s = self._s
        first: bool | None = None  # the budget's patch, asked before the resolve (see _budget)
        if input.carry is None:
            if input.frozen is None and input.budget is not None:
                first = versions.patched(GIVEN_BUDGET_PATCH)
            agent = progress.resolved(s, input.frozen or await self._steps.resolve_agent(input))
            self._steps.search(t.SA_AGENT.value_set(agent.name), t.SA_VERSION.value_set(agent.version))
        assert s.agent is not None
        self._steps.ledger = self._budget(input, s.agent, first)
        return s.agent

    def _budget(self, input: t.RunInput, agent: t.AgentSpec, first: bool | None) -> Ledger | None:
        """The run's ledger (None: no budget), as machine/budget.py `Ledger.for_run` decides it; why
        a run handed a budget asks its patch before the resolve: workflows/patches.py."""
        ledger, ask = Ledger.for_run(input, agent, workflow.info().parent is not None, first)
        return ledger if not ask or versions.patched(TREE_BUDGET_PATCH) else None

    async def _finish(self, end: machine.Finish, first: t.AgentSpec) -> t.RunResult:
        s, info = self._s, workflow.info()
        if end.done is not None and first.evaluators and info.parent is None:  # online scoring: top-level runs only
            await endings.score(s, first, end.done)
        if s.session is None:
            return progress.result(s, info.workflow_id, end.output, end.output_object)
        session = {"messages": s.session.answered, "ended_by": end.ended_by}
        return progress.result(s, info.workflow_id, end.output, end.output_object, **session)

    # ---------------------------------------------------------------------- the interpreter

    async def _carry(self, step: machine.Step, input: t.RunInput) -> machine.Happened:
        s = self._s
        if isinstance(step, Stop):
            raise self._steps.failure(step.message, step.error)
        if isinstance(step, conversation.WaitForMessage):
            return await self._turns.wait_for_message(step)
        if isinstance(step, machine.GoOn):
            return step.happened
        if isinstance(step, turn_machine.CallModel):
            cap = step.max_output_tokens
            try:
                if step.guard is not None:
                    return o.Replied(await self._turns.first_call_guarded(step.agent, step.guard, input.capture, cap))
                return o.Replied(
                    await self._steps.call_model(step.agent, input.capture, step.with_reply, cap, step.made)
                )
            except FallingBack as fall:
                return fall.outcome
        if isinstance(step, RunTools):
            return o.ToolsRan(*await self._turns.run_calls(step, input.capture))
        if isinstance(step, RerunRecorded):  # a --live-tools fork: a recorded turn's calls, run again
            return Reran(await self._turns.run_tools(step.agent, step.plan))
        if isinstance(step, machine.FilterHandoff):
            return await self._turns.filter_handoff(step)
        if isinstance(step, turn_machine.CheckOutput):
            agent = s.agent_now
            return o.OutputChecked(
                await self._steps.hook(agent, "output_type", agent.output_name or "output", text=step.output)
            )
        if isinstance(step, turn_machine.Guardrails):
            return o.GuardrailsRan(await self._turns.guardrails(s.agent_now, "output", step.answer.output))
        if isinstance(step, turn_machine.Pause):
            return await self._turns.pause(step)
        if isinstance(step, turn_machine.Breakpoint):
            return machine.BreakpointAnswered(step.name, await self._turns.breakpoint(step))
        if isinstance(step, turn_machine.Compact):
            return await self._turns.compact(step.plan)
        assert isinstance(step, turn_machine.ContinueAsNew)
        await self._continue_as_new(input)

    # ----------------------------------------------------------------------- continue-as-new

    async def _continue_as_new(self, input: t.RunInput) -> NoReturn:
        s = self._s
        assert s.agent is not None
        await workflow.wait_condition(workflow.all_handlers_finished)
        self._steps.set_phase(*progress.continuing(s))
        carry = s.to_carry(workflow.info().run_id)
        if self._steps.ledger is not None:
            carry.budget = self._steps.ledger.budget
        # The prompt travels once, as the carried transcript's first message.
        workflow.continue_as_new(
            t.RunInput(prompt="", agent=s.agent.name, carry=carry, capture=input.capture, session=input.session)
        )

    # ------------------------------------------------------------------------------ handlers
    # Declared here (name, description, the one model each takes); `Inbox` (workflows/handlers.py)
    # checks and records. A validator refuses before anything is recorded.

    @workflow.signal(name=t.CHILD_USAGE_SIGNAL, description="Internal: what a cancelled child run spent.")
    def child_usage(self, ledger: t.ChildUsage) -> None:
        self._inbox.child_usage(ledger)

    @workflow.signal(
        name=t.APPROVAL_SIGNAL,
        description='Decide on a pending tool call: {"call_id": "call_…", "approve": true, "by": "you"}; '
        'reject with {"call_id": …, "approve": false, "reason": "…"}; edit with "arguments": {…}; '
        '"always": true approves later calls of that tool. The pending calls are in the current details.',
    )
    def approval_signal(self, body: RawValue) -> None:
        self._inbox.approval_signal(body)

    @workflow.update(
        name=t.APPROVAL_UPDATE,
        description="Like the approval signal, but a bad decision is refused before anything is recorded.",
    )
    def approval_update(self, decision: t.ApprovalDecision) -> t.DecisionReceipt:
        return self._inbox.decide(decision)

    @approval_update.validator
    def _validate_approval(self, decision: t.ApprovalDecision) -> None:
        self._inbox.check_approval(decision)

    @workflow.signal(
        name=t.RESOLVE_SIGNAL,
        description='Resolve a call in doubt (its one attempt ended without a result): {"call_id": "call_…", '
        '"action": "rerun", "by": "you"}; or "action": "result" with "result": "<JSON text of what it returned>"; '
        'or "action": "fail" with "reason": "…" (told to the model). The calls in doubt are in the current details.',
    )
    def resolve_signal(self, body: RawValue) -> None:
        self._inbox.resolve_signal(body)

    @workflow.update(
        name=t.RESOLVE_UPDATE,
        description="Like the resolve_call signal, but a bad resolution is refused before anything is recorded.",
    )
    def resolve_update(self, decision: t.ResolveCall) -> t.ResolveReceipt:
        return self._inbox.resolve(decision)

    @resolve_update.validator
    def _validate_resolve(self, decision: t.ResolveCall) -> None:
        self._inbox.check_resolve(decision)

    @workflow.update(
        name=t.ANSWER_UPDATE,
        description='Answer an ask_person question: {"call_id": "call_…", "text": "…", "by": "you"}, or '
        '{"call_id": …, "choice": 2} (1-based). A choice outside the list, an empty answer or a question '
        "already answered is refused before anything is recorded. The questions are in the current details.",
    )
    def answer_question(self, answer: t.AnswerQuestion) -> t.AnswerReceipt:
        return self._inbox.answer(answer)

    @answer_question.validator
    def _validate_answer(self, answer: t.AnswerQuestion) -> None:
        self._inbox.check_answer(answer)

    @workflow.update(
        name=t.COMPLETE_UPDATE,
        description='Complete a call waiting for an outside completion: {"call_id": "call_…", "result": "<JSON '
        'text>", "by": "you"}, or {"call_id": …, "fail": "why"}. A result that is not JSON or not of the tool\'s '
        "result type, or a call already completed, is refused before anything is recorded.",
    )
    def complete_call(self, completion: t.CompleteCall) -> t.CompleteReceipt:
        return self._inbox.complete(completion)

    @complete_call.validator
    def _validate_complete(self, completion: t.CompleteCall) -> None:
        self._inbox.check_complete(completion)

    @workflow.update(
        name=t.SESSION_SEND_UPDATE,
        description='A message to a session: {"text": "…", "by": "alice", "message_id": "…"}. Answered after '
        "the ones before it (or, for an agent that steers, within the answer in progress); refused once it has ended.",
    )
    def send_message(self, message: t.SessionMessage) -> t.MessageReceipt:
        return self._inbox.send(message)

    @send_message.validator
    def _validate_send(self, message: t.SessionMessage) -> None:
        self._inbox.check_send(message)

    @workflow.update(
        name=t.SESSION_END_UPDATE,
        description='Ends a session once the messages it has accepted are answered: {"by": "alice", "reason": "…"}.',
    )
    def end_session(self, end: t.EndSession) -> t.EndReceipt:
        return self._inbox.end(end)

    @end_session.validator
    def _validate_end(self, end: t.EndSession) -> None:
        self._inbox.check_end(end)

    @workflow.update(name=t.PAUSE_UPDATE, description='Pause at the next safe point: {"by": "alice", "reason": "…"}.')
    def pause(self, request: t.PauseRequest) -> t.RunStatus:
        return self._inbox.pause(request)

    @pause.validator
    def _validate_pause(self, request: t.PauseRequest) -> None:
        self._inbox.check_pause(request)

    @workflow.update(
        name=t.RESUME_UPDATE,
        description='Go on from a pause (with any edits): {"by": "alice"}; a run paused on its budget '
        'goes on once raised: {"by": "alice", "add_usd": 2.5} or {"add_tokens": 50000}. A session waiting '
        "for its next message takes a raise alone.",
    )
    def resume(self, request: t.ResumeRequest) -> t.RunStatus:
        return self._inbox.resume(request)

    @resume.validator
    def _validate_resume(self, request: t.ResumeRequest) -> None:
        self._inbox.check_resume(request)

    @workflow.update(
        name=t.EDIT_UPDATE, description='Edit a paused run: {"op": "text", "index": 3, "text": "…"} (see Edit).'
    )
    def edit(self, edit: t.Edit) -> t.EditReceipt:
        return self._inbox.edit(edit)

    @edit.validator
    def _validate_edit(self, edit: t.Edit) -> None:
        self._inbox.check_edit(edit)

    @workflow.query(name=t.STATUS_QUERY, description="Phase, turn, token usage, pending approvals and decisions.")
    def status(self) -> t.RunStatus:
        return self._inbox.status()

    @workflow.query(name=t.TRANSCRIPT_QUERY, description='The conversation so far: {} for all, or {"start": N}.')
    def transcript(self, query: t.TranscriptQuery) -> t.Transcript:
        return t.Transcript(agent=self._s.agent, messages=self._s.messages[query.start :])

    @workflow.query(name=t.EVENTS_QUERY, description='The run\'s numbered steps for watchers: {"since": N}.')
    def events(self, query: t.EventsQuery) -> t.EventsPage:
        return self._s.events_page(query)

    @workflow.query(name=t.EXCHANGE_QUERY, description='A session\'s message K and its answer: {"message": K}.')
    def exchange(self, query: t.ExchangeQuery) -> t.ExchangeAnswer:
        return self._inbox.session().find(query.message)

    @workflow.query(name=t.INSPECT_QUERY, description="A paused run's state: items with indexes, pending calls, edits.")
    def inspect(self) -> t.Inspection:
        return self._s.inspection(workflow.info().workflow_id)

    @workflow.query(name=t.FORK_POINT_QUERY, description='The state just before model call N: {"turn": N}.')
    def fork_point(self, query: t.ForkQuery) -> t.ForkPoint:
        return self._inbox.fork_point(query)

    @workflow.query(name=t.MODEL_CONTEXT_QUERY, description="Internal: read by the model-call activity.")
    def model_context(self, query: t.ModelContextQuery) -> t.ModelContext:
        return self._inbox.model_context(query)
