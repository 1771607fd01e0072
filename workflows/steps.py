"""What every part of an agent run's interpreter works on: `Steps`, the run's state and the
steps all parts carry out (the agent's resolve, a model call, a hook, a failure) and what status,
watchers and the Web UI are told. The machine (`machine/`) decides; these only execute and record.
The turn's other steps are `workflows.turn_steps`, its calls `workflows.call_steps`.

Determinism rules for this module, as for all of workflows/: no I/O, no clocks, no randomness,
no threads. Time comes from `workflow.now()`; activities are called by their declared names.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    FailureError,
    TimeoutType,
)
from temporalio.exceptions import TimeoutError as ActivityTimeout

from durable_agent_runner.machine import drafts, fallback, progress, requests
from durable_agent_runner.machine.budget import Ledger
from durable_agent_runner.machine.outcomes import Facts, ModelFailed
from durable_agent_runner.machine.requests import MODEL_HEARTBEAT_TIMEOUT, MODEL_TIMEOUT_MARGIN
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.machine.texts import no_worker_serves
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows import versions
from durable_agent_runner.workflows.patches import CANCEL_RESOLVE_PATCH, MODEL_FALLBACK_PATCH

W = TypeVar("W")

RESOLVE_RETRY = RetryPolicy(maximum_attempts=5)
RESOLVE_HERE_TIMEOUT = timedelta(seconds=10)  # the local resolve: no I/O, the registry and the agent's code
# The routed resolve heartbeats while it freezes the agent (activities/tool_activities.py): a worker
# that dies mid-resolve is noticed within this, not the attempt's RESOLVE_SECONDS.
RESOLVE_HEARTBEAT_TIMEOUT = timedelta(seconds=10)
# Hooks run the agent author's code (guardrails may call a model themselves): retried a few
# times for a worker that died, then the run fails with the hook's own error. The activity
# heartbeats every 2 s (activities/hooks.py) while the author's code runs: a worker that dies
# mid-hook (an approval check, a guardrail) is noticed within HOOK_HEARTBEAT_TIMEOUT and the hook
# moves to another worker; HOOK_TIMEOUT only bounds code that hangs on a live worker.
HOOK_RETRY = RetryPolicy(maximum_attempts=3)
HOOK_TIMEOUT = timedelta(seconds=300)
HOOK_HEARTBEAT_TIMEOUT = timedelta(seconds=10)


class FallingBack(Exception):
    """A model call failed in a way that sends the turn to the agent's next model: the turn
    machine makes the switch (machine/turn.py, machine/fallback.py)."""

    def __init__(self, outcome: ModelFailed) -> None:
        super().__init__(outcome.message)
        self.outcome = outcome


def _cause(err: ActivityError, default_type: str) -> tuple[str, str]:
    """An activity failure's own message and type. A call that ran out of time is reported with
    the last error it got (the provider's own words)."""
    cause = err.cause
    message = cause.message if isinstance(cause, FailureError) else err.message
    kind = cause.type if isinstance(cause, ApplicationError) and cause.type else default_type
    if isinstance(cause, ActivityTimeout):
        last = cause.cause if isinstance(cause.cause, FailureError) else None
        kind = last.type if isinstance(last, ApplicationError) and last.type else default_type
        what = cause.type.name.lower().replace("_", "-") if cause.type is not None else "timeout"
        message = f"gave up after the {what} timeout" + (f"; last error: {last.message}" if last else "")
    return message, kind


def model_retry(agent: t.AgentSpec) -> RetryPolicy:
    """Temporal owns retries, within bounds: a non-retryable answer (bad request, auth, quota)
    fails at once; anything else is retried up to the agent's attempts (its time bound is the
    activity's schedule-to-close), each attempt visible in the UI."""
    return RetryPolicy(
        initial_interval=timedelta(seconds=1),
        maximum_interval=timedelta(seconds=60),
        maximum_attempts=agent.model_max_attempts or t.DEFAULT_MODEL_MAX_ATTEMPTS,
    )


def model_call_bounds(agent: t.AgentSpec) -> dict[str, Any]:
    """Timeouts, heartbeat and retries of an activity that calls the agent's model (a turn's
    call, a session's compaction): each attempt bounded, the whole call bounded, retried within."""
    return {
        "start_to_close_timeout": timedelta(seconds=agent.model_timeout_seconds) + MODEL_TIMEOUT_MARGIN,
        "schedule_to_close_timeout": timedelta(seconds=agent.model_retry_seconds or t.DEFAULT_MODEL_RETRY_SECONDS),
        "heartbeat_timeout": MODEL_HEARTBEAT_TIMEOUT,
        "retry_policy": model_retry(agent),
    }


def agent_queue(agent: t.AgentSpec) -> str | None:
    """Where `agent`'s code runs: workers holding this exact version. Runs recorded before
    routing (no version) keep using the run's own queue."""
    return t.agent_task_queue(workflow.info().task_queue, agent.name, agent.version) if agent.version else None


class Steps:
    """The run's state and the steps every part of the interpreter carries out: a model call, a
    hook, the agent's resolve, and what status, watchers and the Web UI are told. The workflow
    (`AgentRun`) and its parts (`TurnSteps`, `CallSteps`, `Notifier`, `Inbox`) each hold this one
    object; none inherits from another."""

    def __init__(self) -> None:
        self.s = RunState()
        self.tracker = progress.Status()  # the calls under way, and when search attributes are written
        self.child_usage: dict[str, t.ChildUsage] = {}  # signalled by cancelled child runs, by child id
        self.ledger: Ledger | None = None  # the run's budgets across its tree (tree-budget-1.1)

    def facts(self) -> Facts:
        """What only Temporal knows, for the machine: the time and the history's size."""
        info = workflow.info()
        session = self.s.session is not None  # only a session's history is measured between turns
        return Facts(
            now=workflow.now(),
            continue_suggested=info.is_continue_as_new_suggested(),
            history_bytes=info.get_current_history_size() if session else 0,
            history_events=info.get_current_history_length() if session else 0,
            patched=versions.patched,
            release_2=versions.started_on_2_0(),
        )

    def agent_or_none(self) -> t.AgentSpec | None:
        """The agent in charge, once the run has one."""
        return self.s.agent_now if self.s.agent is not None else None

    # ---------------------------------------------------------------------------- failures

    def failure(self, message: str, kind: str) -> ApplicationError:
        """Ends the run (in a session, only the answer fails: machine/progress.failed), then
        raised as a non-retryable error whose details hold the run's usage, so a parent run
        counts what a failed child spent."""
        before = self.take(lambda s, _: progress.failed(s, message, kind, workflow.now()))
        if before is not None:
            self._search(before)
        ledger = t.ChildUsage(usage_by_agent=self.s.usage_by_agent)
        return ApplicationError(message, ledger.model_dump(mode="json"), type=kind, non_retryable=True)

    def cancelled(self) -> None:
        """The run was cancelled: it ends so (machine/progress.cancelled)."""
        self._search(self.take(lambda s, _: progress.cancelled(s, workflow.now())))

    def failed_activity(self, err: ActivityError, default_type: str, context: str) -> ApplicationError:
        """The run's failure, carrying the cause's own message and type to the client."""
        message, kind = _cause(err, default_type)
        return self.failure(f"{context}{message}", kind)

    # ------------------------------------------------------------------------------ agents

    async def resolve_agent(self, input: t.RunInput) -> t.AgentSpec:
        """Freeze the agent (and every agent it can reach) into history: later edits never touch
        this run. The run's own worker does it when it serves the agent; otherwise a worker that
        does, through the agent's queue, which only such workers poll."""
        queue = t.agent_task_queue(workflow.info().task_queue, input.agent)
        request = t.ResolveAgentInput(
            agent=input.agent,
            max_turns=input.max_turns,
            model=input.model,
            model_settings=input.model_settings,
            fallback_models=input.fallback_models or None,
        )
        seed = input.prompt if len(input.prompt) < t.SEED_PROMPT_CHARS else None
        here = await self._resolve_here(request.model_copy(update={"prompt": seed}))
        if here is not None:
            return here
        try:
            spec: t.AgentSpec = await workflow.execute_activity(
                t.RESOLVE_AGENT_ACTIVITY,
                request,
                result_type=t.AgentSpec,
                task_queue=queue,
                schedule_to_start_timeout=timedelta(seconds=input.agent_wait_seconds),
                start_to_close_timeout=timedelta(seconds=t.RESOLVE_SECONDS),
                heartbeat_timeout=RESOLVE_HEARTBEAT_TIMEOUT,
                retry_policy=RESOLVE_RETRY,
                summary=f"resolve agent {input.agent}",
            )
            return spec
        except ActivityError as err:
            if isinstance(err.cause, CancelledError) and versions.patched_2x(CANCEL_RESOLVE_PATCH):
                raise asyncio.CancelledError from err  # the run is being cancelled: it ends cancelled, not failed
            if isinstance(err.cause, ActivityTimeout) and err.cause.type == TimeoutType.SCHEDULE_TO_START:
                message = no_worker_serves(input.agent, queue, input.agent_wait_seconds)
                raise self.failure(message, "UnknownAgent") from err
            raise self.failed_activity(err, "ResolveAgentFailed", "") from err

    async def _resolve_here(self, request: t.ResolveAgentInput) -> t.AgentSpec | None:
        """The resolve as a local activity, in this workflow task: the first model call follows
        without a round trip through the server, and reads its context from the worker's cache.
        None when this worker does not serve the agent, would need the agent's MCP servers (no
        I/O while the task is open), or fails in any way: the routed resolve then decides, with
        its retries and its errors."""
        try:
            spec: t.AgentSpec = await workflow.execute_local_activity(
                t.RESOLVE_AGENT_ACTIVITY,
                request,
                result_type=t.AgentSpec,
                activity_id="resolve",
                start_to_close_timeout=RESOLVE_HERE_TIMEOUT,
                retry_policy=RetryPolicy(maximum_attempts=1),
                summary=f"resolve agent {request.agent} (local)",
            )
            return spec
        except (ActivityError, ApplicationError) as err:  # a local activity's failure may come bare
            if isinstance(err.cause, CancelledError):  # the run is being cancelled
                raise asyncio.CancelledError from err
            return None

    # ------------------------------------------------------------------------------- model

    async def call_model(
        self,
        agent: t.AgentSpec,
        capture: bool,
        with_reply: t.WithReply | None = None,
        cap: int | None = None,
        made: t.AheadReply | None = None,
    ) -> t.ModelReply:
        """One model call; `with_reply`: the cheap calls it may run with its reply (turn.with_reply);
        `cap`: the max output tokens the budget has left room for (None: the agent's); `made`:
        its reply, already made by the last tool's activity (machine/requests.py). What status says
        and the story's `model_started` came with the step (machine/run.py `_saying`)."""
        s = self.s
        if made is not None:
            return self.clocked(made.reply)
        request, summary = requests.model_call(s, agent, capture, with_reply, cap)
        try:
            if agent.local_model_call:
                context = t.ModelContext(agent=agent, messages=list(s.messages))
                bounds = model_call_bounds(agent)
                bounds.pop("heartbeat_timeout")
                local: t.ModelReply = await workflow.execute_local_activity(
                    t.MODEL_CALL_ACTIVITY,
                    request.model_copy(update={"context": context}),
                    result_type=t.ModelReply,
                    activity_id=f"model-{s.turn}",
                    **bounds,
                    summary=f"{summary} (local)",
                )
                return self.clocked(local)
            reply: t.ModelReply = await workflow.execute_activity(
                t.MODEL_CALL_ACTIVITY,
                request,
                result_type=t.ModelReply,
                activity_id=f"model-{s.turn}",
                **model_call_bounds(agent),
                summary=summary,
            )
            return self.clocked(reply)
        except ActivityError as err:
            if isinstance(err.cause, CancelledError):  # the run called it off (a tripped guardrail)
                raise asyncio.CancelledError from err
            failed: Exception = err
            message, kind = _cause(err, "ModelCallFailed")
        except ApplicationError as err:  # a local call's failure may come bare
            failed, message, kind = err, err.message, err.type or "ModelCallFailed"
        if fallback.falls_back(agent, kind) and self._may_fall_back(agent):
            raise FallingBack(ModelFailed(kind, message)) from failed
        raise self.failure(f"model call failed on turn {s.turn}: {message}", kind) from failed

    @staticmethod
    def _may_fall_back(agent: t.AgentSpec) -> bool:
        """A 2.0 run falls back after any call, a local one too: it asks no marker mid-run. A 1.x
        run asks its patch only after a routed call: a query that came while a local activity ran
        puts the marker in a later workflow task than a replay asks in (see agent._budget)."""
        return versions.started_on_2_0() or (not agent.local_model_call and versions.patched(MODEL_FALLBACK_PATCH))

    # ------------------------------------------------------------------------------- hooks

    async def hook(self, agent: t.AgentSpec, kind: t.HookKind, name: str, **fields: object) -> t.HookResult:
        """Runs one piece of the agent author's code on a worker that holds the agent."""
        s = self.s
        key = str(fields.get("call_id") or name)
        try:
            result: t.HookResult = await workflow.execute_activity(
                t.HOOK_ACTIVITY,
                t.HookInput.model_validate(
                    {"agent": agent.name, "version": agent.version, "kind": kind, "name": name, "turn": s.turn} | fields
                ),
                result_type=t.HookResult,
                activity_id=f"{kind}-{s.turn}-{key}",
                task_queue=agent_queue(agent),
                start_to_close_timeout=HOOK_TIMEOUT,
                heartbeat_timeout=HOOK_HEARTBEAT_TIMEOUT,
                retry_policy=HOOK_RETRY,
                summary=f"turn {s.turn} · {self.who(agent)}{kind.replace('_', ' ')}: {name[:80]}",
            )
            return result
        except ActivityError as err:
            raise self.failed_activity(err, "AgentHookFailed", f"{kind.replace('_', ' ')} '{name}' failed: ") from err

    def who(self, agent: t.AgentSpec) -> str:
        return requests.who(self.s, agent)

    # ------------------------------------------------------------------------------ records

    def set_phase(self, phase: t.Phase, step: str) -> None:
        """The run's phase for status, watchers and the Web UI's current details, and its search
        attributes when machine/progress.py says they are due."""
        before = progress.set_phase(self.s, phase, step)
        workflow.set_current_details(self.s.details())
        self._search(before)

    def _search(self, before: t.Phase) -> None:
        """The search attributes due now that the phase changed from `before` (Status.writes)."""
        written = self.tracker.writes(self.s, before)
        if written is not None:
            workflow.upsert_search_attributes(written)

    def take(self, write: Callable[[RunState, Ledger | None], W]) -> W:
        """A rule of the machine (what reaches the run at the door, a guardrail's verdicts, a
        round of notifications, the run's end) written into a draft of its books
        (machine/drafts.take), then kept, and the Web UI's details told: a rule that raises
        leaves nothing half done."""
        taken = drafts.take(self.s, self.ledger, write)
        drafts.keep(taken.books, self.s)
        if self.ledger is not None and taken.ledger is not None:
            drafts.keep(taken.ledger, self.ledger)
        workflow.set_current_details(self.s.details())
        return taken.value

    def clocked(self, reply: t.ModelReply) -> t.ModelReply:
        """Notes when `reply` arrived (the reply clock the counters' writes go by)."""
        self.tracker.clocked(reply)
        return reply

    def search(self, *updates: t.SearchWrite) -> None:
        """Search attributes written with the next phase change (the agent in charge, …)."""
        self.tracker.due.extend(updates)
