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
from typing import NoReturn

from temporalio import workflow
from temporalio.exceptions import ApplicationError
from temporalio.workflow import ParentClosePolicy

from durable_agent_runner.machine import conversation, live_scores
from durable_agent_runner.machine.budget import Ledger
from durable_agent_runner.machine.calls import RunTools
from durable_agent_runner.machine.outcomes import (
    BreakpointRan,
    Compacted,
    Facts,
    GuardrailsRan,
    HandedOff,
    Outcome,
    OutputChecked,
    Ready,
    Replied,
    Resumed,
    Steered,
    ToolsRan,
)
from durable_agent_runner.machine.rerun import Reran, RerunRecorded
from durable_agent_runner.machine.rules import Done, Stop
from durable_agent_runner.machine.session import SessionState
from durable_agent_runner.machine.turn import (
    Breakpoint,
    CallModel,
    CheckOutput,
    Compact,
    ContinueAsNew,
    Guardrails,
    HandOff,
    NextStep,
    Pause,
    Steer,
    Turn,
)
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.patches import GIVEN_BUDGET_PATCH, SESSION_PROMPT_PATCH, TREE_BUDGET_PATCH
from durable_agent_runner.workflows.steps import FallingBack
from durable_agent_runner.workflows.turn_steps import TurnSteps
from durable_agent_runner.workflows.types import live_scores as tl

# Only the project's own errors fail a run from workflow code: every failure it means is an
# ApplicationError (which always fails the run). A bug in this code holds the workflow task, as
# Temporal intends, so a fixed deploy carries the run on; `client.py status` says it is stuck.
RUN_FAILURE_TYPES: list[type[BaseException]] = []


# Outside temporalio's sandbox: it checked nothing here (every module of workflows/ was passed
# through, so clocks, randomness and the environment were the real ones) and cost a turn about
# 1 ms of worker CPU. Determinism is checked where it can be: workflows/ruff.toml bans clocks,
# randomness, I/O and threads in this package, and the tests replay every run they make and every
# checked-in history in temporalio's sandbox with nothing of ours passed through
# (tests/helpers.py: STRICT_SANDBOX), which fails on any of them at run time.
@workflow.defn(name=t.WORKFLOW_NAME, failure_exception_types=RUN_FAILURE_TYPES, sandboxed=False)
class AgentRun(TurnSteps):
    @workflow.init
    def __init__(self, input: t.RunInput) -> None:
        # State exists before any handler runs: a message may arrive with the start itself.
        super().__init__()
        self._prompt_taken = False
        if input.carry is not None:
            self._s.from_carry(input.carry)
        else:
            self._s.breakpoints = input.breakpoints
            self._s.session = SessionState() if input.session else None
            # Here, not in the run: a message delivered with the start itself (its update runs
            # before the run does) must not take the opening prompt's place as message 1.
            if self._s.session is not None and input.prompt and workflow.patched(SESSION_PROMPT_PATCH):
                self._accept_prompt(input.prompt)

    def _accept_prompt(self, prompt: str) -> None:
        session = self._s.session
        assert session is not None
        first = t.SessionMessage(text=prompt, by="client")
        self._received(first, session.accept(first, workflow.now(), steer=False))
        self._prompt_taken = True

    # ------------------------------------------------------------------------------- the run

    @workflow.run
    async def run(self, input: t.RunInput) -> t.RunResult:
        try:
            if self._s.session is None:
                return await self._single(input)
            return await self._conversation(input)
        except asyncio.CancelledError:
            self._end(t.Phase.CANCELLED, "cancelled: " + (self._s.last_step or "while starting"))
            await self._tell_parent()
            raise

    async def _start(self, input: t.RunInput) -> t.AgentSpec:
        s = self._s
        first: bool | None = None  # the budget's patch, asked before the resolve (see _budget)
        if input.carry is None:
            if input.frozen is None and input.budget is not None:
                first = workflow.patched(GIVEN_BUDGET_PATCH)
            s.agent = input.frozen or await self._resolve(input)
            self._search(t.SA_AGENT.value_set(s.agent.name), t.SA_VERSION.value_set(s.agent.version))
        assert s.agent is not None
        self._ledger = self._budget(input, s.agent, first)
        return s.agent

    def _budget(self, input: t.RunInput, agent: t.AgentSpec, first: bool | None) -> Ledger | None:
        """The run's ledger (None: no budget), as machine/budget.py `Ledger.for_run` decides it.

        `patched` right after the resolve, a local activity, is not replay-safe, and runs
        handed a budget asked `tree-budget-1.1` there before 1.3: a status query that reaches
        the run while the resolve runs makes the worker complete the first workflow task with
        the resolve's marker alone, so the code after the resolve asks in the second task and
        its marker is recorded there. A replay resolves the local activity from the first task
        and asks before the second task's markers are announced: False, and the replay fails on
        the marker (tests/test_budget_given_replay.py). Such runs only replay where the marker
        came in the resolve's task; those recorded before 1.3 still ask there (`first` False)."""
        ledger, ask = Ledger.for_run(input, agent, self._is_child(), first)
        return ledger if not ask or workflow.patched(TREE_BUDGET_PATCH) else None

    def _is_child(self) -> bool:
        return workflow.info().parent is not None

    async def _single(self, input: t.RunInput) -> t.RunResult:
        """One prompt, one answer: the run ends with it."""
        s = self._s
        first = await self._start(input)
        if input.carry is None:
            s.messages.append(t.UserMessage(content=input.prompt))
        guard = input.prompt if input.carry is None and first.input_guardrails else None
        if s.live_tools:  # a fork made with --live-tools (machine/rerun.py); older histories have none
            s.live_tools = workflow.patched(t.FORK_LIVE_TOOLS_PATCH)
        done = await self._answer(input, guard)
        s.output = done.output
        self._event(t.EventKind.FINAL, text=done.output)
        self._set_phase(t.Phase.COMPLETED, f"final answer from {s.agent_now.name} after {s.turn} turn(s)")
        if not self._is_child():
            await self._score(first, done)
        return self._result(done.output, done.output_object)

    async def _score(self, agent: t.AgentSpec, done: Done) -> None:
        """A sampled run's scores (online scoring): a ScoreRun started, and abandoned, so the
        result waits for its start to be recorded, never for its scores. Nothing it does fails
        the run. No patch: only a run whose frozen agent has evaluators takes this path, and no
        code before it froze any."""
        s, info = self._s, workflow.info()
        seconds = (workflow.now() - info.start_time).total_seconds()
        score = live_scores.score_input(
            info.workflow_id,
            agent,
            s.messages,
            done.output,
            done.output_object,
            s.turn,
            s.usage,
            seconds,
            answered_by=s.agent_now.name,
        )
        if score is None:
            return
        try:
            await workflow.start_child_workflow(
                tl.SCORE_WORKFLOW,
                score,
                id=tl.scores_id(info.workflow_id),
                parent_close_policy=ParentClosePolicy.ABANDON,
                static_summary=f"scores of {info.workflow_id[:200]}",
            )
        except Exception as err:  # already scored (a reset run), or refused: the answer stands
            workflow.logger.warning("scores of %s not started: %s", info.workflow_id, err)

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
                "usage_by_model": s.usage_by_model,
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
        turn = Turn(self._s, guard, self._ledger)
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
            cap = step.max_output_tokens
            try:
                if step.guard is not None:
                    return Replied(await self._first_call_guarded(step.agent, step.guard, input.capture, cap))
                return Replied(await self._call_model(step.agent, input.capture, step.with_reply, cap, step.made))
            except FallingBack as fall:
                return fall.outcome
        if isinstance(step, RunTools):
            return ToolsRan(*await self._run_calls(step, input.capture))
        if isinstance(step, RerunRecorded):  # a --live-tools fork: a recorded turn's calls, run again
            return Reran(await self._run_tools(step.agent, step.plan))
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
        self._set_phase(t.Phase.CONTINUING, f"turn {s.turn}: continuing as new to keep history small")
        carry = s.to_carry(workflow.info().run_id)
        if self._ledger is not None:
            carry.budget = self._ledger.budget
        # The prompt travels once, as the carried transcript's first message.
        workflow.continue_as_new(
            t.RunInput(prompt="", agent=s.agent.name, carry=carry, capture=input.capture, session=input.session)
        )

    # ------------------------------------------------------------------------------ sessions

    async def _conversation(self, input: t.RunInput) -> t.RunResult:
        """A session: each message answered in turn, a durable wait (holding no worker) for the
        next in between, as the conversation machine (machine/conversation.py) decides, until
        `end`, the agent's idle timeout, or a cancel."""
        if input.carry is None and input.prompt and not self._prompt_taken:  # a run recorded before 1.4
            self._accept_prompt(input.prompt)
        first = await self._start(input)
        woke = conversation.Woke()
        while True:
            step = conversation.between(self._s, first, self._facts(), woke, workflow.info().run_id)
            woke = conversation.Woke()
            if isinstance(step, conversation.ContinueAsNew):
                await self._continue_as_new(input)
            elif isinstance(step, conversation.EndSession):
                return self._session_ended(step.why)
            elif isinstance(step, conversation.WaitForMessage):
                woke = await self._wait_for_message(step)
            else:
                await self._answer_message(input, step.guard)

    async def _answer_message(self, input: t.RunInput, guard: str | None) -> None:
        """The held message answered; a failed answer is that message's error."""
        s, run_id = self._s, workflow.info().run_id
        try:
            done = await self._answer(input, guard)
        except ApplicationError as err:
            kind = err.type or "Error"
            detail = conversation.failed(s, kind, err.message, workflow.now(), run_id)
            self._event(t.EventKind.ANSWERED, text=err.message, detail=detail)
            return
        self._event(t.EventKind.FINAL, text=done.output)
        exchange = conversation.answered(s, done, workflow.now(), run_id)
        self._event(t.EventKind.ANSWERED, text=done.output, detail=f"message {exchange.message}")

    async def _wait_for_message(self, wait: conversation.WaitForMessage) -> conversation.Woke:
        """Waits for a message or an end, within the idle time left."""
        session = self._s.session
        assert session is not None
        self._set_phase(t.Phase.WAITING_FOR_MESSAGE, wait.step)
        self._event(t.EventKind.WAITING, detail=wait.detail)
        try:
            await workflow.wait_condition(
                lambda: bool(session.queue) or session.ending is not None,
                timeout=timedelta(seconds=wait.seconds),
                timeout_summary="session idle timeout",
            )
        except TimeoutError:
            return conversation.Woke(waited=True, timed_out=True)
        return conversation.Woke(waited=True)

    def _session_ended(self, why: str) -> t.RunResult:
        s, session = self._s, self._s.session
        assert session is not None and s.agent is not None
        self._event(t.EventKind.ENDED, text=why)
        self._set_phase(t.Phase.COMPLETED, f"session ended: {why}")
        output, output_object = conversation.ended(s)
        return self._result(output, output_object, messages=session.answered, ended_by=why)
