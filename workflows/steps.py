"""What an agent run carries out: the activities and child runs behind each step of a turn.

`workflows.turn` decides; the methods here only execute (a model call, a tool, a hook, a child
run, a wait for a person) and record what happened for status, watchers and the Web UI. The
calls of a turn are carried out by `workflows.call_steps`.

Determinism rules for this module, as for all of workflows/: no I/O, no clocks, no randomness,
no threads. Time comes from `workflow.now()`; activities are called by their declared names.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any, Literal, get_args

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributeUpdate
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    FailureError,
    TimeoutType,
)
from temporalio.exceptions import TimeoutError as ActivityTimeout

from durable_agent_runner.machine import fallback
from durable_agent_runner.machine.approvals import decision_words
from durable_agent_runner.machine.budget import Ledger
from durable_agent_runner.machine.calls import describe_call
from durable_agent_runner.machine.doubts import resolution_words
from durable_agent_runner.machine.outcomes import ModelFailed
from durable_agent_runner.machine.questions import waiting_words
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.patches import MODEL_FALLBACK_PATCH

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
# The activity ends an attempt itself at the agent's model timeout, with a clear error; Temporal's
# own start-to-close is a backstop a little later (a worker stuck in a way the activity can't see).
MODEL_TIMEOUT_MARGIN = timedelta(seconds=15)
# The model activity heartbeats every 2 s (more often while streaming): a worker that dies
# mid-call is noticed within 10 s and the call moves to another worker.
MODEL_HEARTBEAT_TIMEOUT = timedelta(seconds=10)
# The counters (turn, tokens, pending, cost) are written at most every COUNTERS_EVERY_SECONDS
# while the phase stays unfiltered, and always with a filtered phase change. The seconds are read
# off the model replies' `received_at`, recorded in history: `workflow.now()` is not replay-stable
# here (a worker that takes a run over from its full history sees the previous task's time in its
# first activation, a replay the task's own).
COUNTERS_EVERY_SECONDS = 5.0
# What a call of the turn is doing, as status says it: its approval checked (by the agent's policy,
# in the hook activity), or run.
CallDoing = Literal["checking", "running", "outside"]
CALL_DOINGS: tuple[CallDoing, ...] = get_args(CallDoing)
FILTERED_PHASES: frozenset[t.Phase] = t.FINAL_PHASES | {
    t.Phase.AWAITING_APPROVAL, t.Phase.PAUSED, t.Phase.WAITING_FOR_MESSAGE, t.Phase.IN_DOUBT,
}  # fmt: skip


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
    """The run's state and the steps it carries out; `AgentRun` adds the loop and handlers."""

    def __init__(self) -> None:
        self._s = RunState()
        self._due: list[SearchAttributeUpdate[Any]] = []
        self._searched_turn = -1
        self._searched_at: datetime | None = None  # the reply clock when the counters were last written
        self._replied_at: datetime | None = None  # the last model reply's received_at
        self._child_usage: dict[str, t.ChildUsage] = {}  # signalled by cancelled child runs, by child id
        self._ledger: Ledger | None = None  # the run's budgets across its tree (tree-budget-1.1)
        self._calls_now: dict[str, tuple[str, CallDoing]] = {}  # the turn's calls under way, for status

    # ---------------------------------------------------------------------------- failures

    def _failure(self, message: str, kind: str) -> ApplicationError:
        """Ends the run: recorded for status and watchers, then raised as a non-retryable error
        whose details hold the run's usage, so a parent run counts what a failed child spent."""
        self._s.error, self._s.error_type = message, kind
        session = self._s.session
        if session is None or session.current is None:  # in a session, only the answer fails
            self._end(t.Phase.FAILED, message)
        ledger = t.ChildUsage(usage_by_agent=self._s.usage_by_agent)
        return ApplicationError(message, ledger.model_dump(mode="json"), type=kind, non_retryable=True)

    def _end(self, phase: t.Phase, message: str) -> None:
        """The run is over: nothing waits any more, and the UI, status and watchers say how it ended."""
        self._s.abandon()
        self._event(t.EventKind.FAILED if phase == t.Phase.FAILED else t.EventKind.CANCELLED, text=message)
        self._set_phase(phase, message)

    def _failed_activity(self, err: ActivityError, default_type: str, context: str) -> ApplicationError:
        """The run's failure, carrying the cause's own message and type to the client."""
        message, kind = _cause(err, default_type)
        return self._failure(f"{context}{message}", kind)

    # ------------------------------------------------------------------------------ agents

    async def _resolve(self, input: t.RunInput) -> t.AgentSpec:
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
            if isinstance(err.cause, ActivityTimeout) and err.cause.type == TimeoutType.SCHEDULE_TO_START:
                message = (
                    f"no worker serves agent '{input.agent}': nothing polled task queue {queue} "
                    f"for {input.agent_wait_seconds:g}s (start a worker with --tools for that agent)"
                )
                raise self._failure(message, "UnknownAgent") from err
            raise self._failed_activity(err, "ResolveAgentFailed", "") from err

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

    async def _call_model(
        self,
        agent: t.AgentSpec,
        capture: bool,
        with_reply: t.WithReply | None = None,
        cap: int | None = None,
        made: t.AheadReply | None = None,
    ) -> t.ModelReply:
        """One model call; `with_reply`: the cheap calls it may run with its reply (turn.with_reply);
        `cap`: the max output tokens the budget has left room for (None: the agent's); `made`:
        its reply, already made by the last tool's activity (machine/ahead.py)."""
        s = self._s
        model = agent.model or "the worker's default model"
        self._set_phase(t.Phase.CALLING_MODEL, f"turn {s.turn}: {agent.name} calling {model}")
        self._event(t.EventKind.MODEL_STARTED, made.began_at if made else None, detail=f"{self._who(agent)}{model}")
        if made is not None:
            return self._clocked(made.reply)
        n = len(s.messages)
        request = t.ModelCallInput(
            agent=agent.name,
            model=agent.model,
            turn=s.turn,
            transcript_len=len(s.messages),
            capture=capture,
            digest=s.digest(),
            with_reply=with_reply,
            max_output_tokens=cap,
        )
        summary = f"turn {s.turn} · {self._who(agent)}model {model} · {n} message{'' if n == 1 else 's'}"
        summary += " · local tools with the reply" if with_reply is not None else ""
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
                return self._clocked(local)
            reply: t.ModelReply = await workflow.execute_activity(
                t.MODEL_CALL_ACTIVITY,
                request,
                result_type=t.ModelReply,
                activity_id=f"model-{s.turn}",
                **model_call_bounds(agent),
                summary=summary,
            )
            return self._clocked(reply)
        except ActivityError as err:
            if isinstance(err.cause, CancelledError):  # the run called it off (a tripped guardrail)
                raise asyncio.CancelledError from err
            failed: Exception = err
            message, kind = _cause(err, "ModelCallFailed")
        except ApplicationError as err:  # a local call's failure may come bare
            failed, message, kind = err, err.message, err.type or "ModelCallFailed"
        # Asked once a routed call failed, never after a local one: a query that came while a local
        # activity ran puts the marker in a later workflow task than a replay asks in (see
        # agent._budget), so an agent with local_model_call does not fall back (docs/providers.md).
        if not agent.local_model_call and fallback.falls_back(agent, kind) and workflow.patched(MODEL_FALLBACK_PATCH):
            raise FallingBack(ModelFailed(kind, message)) from failed
        raise self._failure(f"model call failed on turn {s.turn}: {message}", kind) from failed

    # ------------------------------------------------------------------------------- hooks

    async def _hook(self, agent: t.AgentSpec, kind: t.HookKind, name: str, **fields: object) -> t.HookResult:
        """Runs one piece of the agent author's code on a worker that holds the agent."""
        s = self._s
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
                summary=f"turn {s.turn} · {self._who(agent)}{kind.replace('_', ' ')}: {name[:80]}",
            )
            return result
        except ActivityError as err:
            raise self._failed_activity(err, "AgentHookFailed", f"{kind.replace('_', ' ')} '{name}' failed: ") from err

    def _who(self, agent: t.AgentSpec) -> str:
        """`refunds · ` in a summary when the run has a team, so the UI says which agent acts."""
        return f"{agent.name} · " if self._s.agent is not None and self._s.agent.team else ""

    # ------------------------------------------------------------------------------ records

    # A decision's event is the call machine's (its `approval_decided` / `call_resolved` note, as the
    # waiting call takes it up, in the same workflow task): these say it in status at once.

    def _record_decision(self, record: t.ApprovalRecord) -> None:
        self._s.last_step = f"turn {self._s.turn}: {record.tool} {record.call_id} {decision_words(record)}"

    def _record_resolution(self, record: t.CallResolution) -> None:
        detail = resolution_words(record)
        self._s.last_step = f"turn {self._s.turn}: {record.tool} {record.call_id} in doubt: {detail}"

    def _doing(self, call_id: str, doing: CallDoing | None, call: t.ToolCall | None = None) -> None:
        """What call `call_id` is doing now (None: nothing, it waits or ended); status names each
        call under way while the run runs tools (a wait for a person has its own words, _refresh_phase)."""
        if doing is None:
            self._calls_now.pop(call_id, None)
        else:
            assert call is not None
            self._calls_now[call_id] = (describe_call(call, 60), doing)
        if self._s.phase == t.Phase.RUNNING_TOOLS and self._calls_now:
            self._say(self._calls_step())

    def _calls_step(self) -> str:
        """`turn 2: checking whether send(label=a) needs approval; running lookup(q=b)`."""
        checking, running, outside = ([w for w, doing in self._calls_now.values() if doing == d] for d in CALL_DOINGS)
        parts = [f"running {', '.join(running)}"] if running else []
        parts += [f"waiting for outside completion of {what}" for what in outside]
        if checking:
            verb = "needs" if len(checking) == 1 else "need"
            parts.insert(0, f"checking whether {', '.join(checking)} {verb} approval")
        return f"turn {self._s.turn}: " + "; ".join(parts)

    def _say(self, step: str) -> None:
        """What the run does now, within its phase, for status and the Web UI: no search
        attribute changes, so no command (replay-safe wherever it is said)."""
        self._s.last_step = step
        workflow.set_current_details(self._s.details())

    def _refresh_phase(self) -> None:
        s = self._s
        if s.approvals.pending or s.questions.pending:  # an `ask_person` question waits as an approval does
            calls = ", ".join(f"{p.tool} ({p.call_id})" for p in s.approvals.pending.values())
            waits = [f"waiting for approval of {calls}"] if calls else []
            waits += [waiting_words(q) for q in s.questions.pending.values()]
            self._set_phase(t.Phase.AWAITING_APPROVAL, f"turn {s.turn}: " + "; ".join(waits))
        elif s.doubts.pending:
            calls = ", ".join(f"{d.tool} ({d.call_id})" for d in s.doubts.pending.values())
            self._set_phase(t.Phase.IN_DOUBT, f"turn {s.turn}: in doubt, waiting for a person to resolve {calls}")
        elif s.phase == t.Phase.AWAITING_APPROVAL:
            step = self._calls_step() if self._calls_now else f"turn {s.turn}: running approved tools"
            self._set_phase(t.Phase.RUNNING_TOOLS, step)
        elif s.phase == t.Phase.IN_DOUBT:
            self._set_phase(t.Phase.RUNNING_TOOLS, s.last_step)  # what the person decided

    def _event(self, kind: t.EventKind, at: datetime | None = None, **fields: object) -> None:
        """An event now, or `at` (a time history recorded: when a call made ahead began)."""
        self._s.event(at or workflow.now(), kind, **fields)

    def _set_phase(self, phase: t.Phase, step: str) -> None:
        """The run's phase for status, watchers and the Web UI's current details. Its search
        attributes are written when a person would filter on the change (FILTERED_PHASES, in or
        out), and the counters at most once per turn, in one upsert with whatever else is due."""
        s = self._s
        before, s.phase = s.phase, phase
        s.last_step = step
        workflow.set_current_details(s.details())
        counters: list[SearchAttributeUpdate[Any]] = [
            t.SA_TURN.value_set(s.turn),
            t.SA_TOKENS.value_set(s.usage.total_tokens),
            t.SA_PENDING.value_set(len(s.approvals.pending) + len(s.questions.pending)),  # questions wait too
        ]
        if s.usage.cost_usd:  # priced calls only (runs recorded before prices upsert as they did)
            counters.append(t.SA_COST.value_set(s.usage.cost_usd))
        if s.doubts.pending or s.doubts.resolutions:  # runs with a call in doubt only
            counters.append(t.SA_IN_DOUBT.value_set(bool(s.doubts.pending)))
        if phase in FILTERED_PHASES or before in FILTERED_PHASES or self._counters_due() or self._due:
            workflow.upsert_search_attributes([*self._due, t.SA_PHASE.value_set(phase), *counters])
            self._due, self._searched_turn, self._searched_at = [], s.turn, self._replied_at

    def _counters_due(self) -> bool:
        """A new turn's counters, unless they were written less than COUNTERS_EVERY_SECONDS
        ago by the reply clock."""
        if self._s.turn == self._searched_turn:
            return False
        if self._searched_turn < 0:
            return True  # never written
        if self._replied_at is None or self._searched_at is None:
            return False  # no reply yet: nothing new to count
        return (self._replied_at - self._searched_at).total_seconds() >= COUNTERS_EVERY_SECONDS

    def _clocked(self, reply: t.ModelReply) -> t.ModelReply:
        """Notes when `reply` arrived (the reply clock), as its history records it; the clock
        starts with the first reply."""
        self._replied_at = reply.received_at or self._replied_at
        self._searched_at = self._searched_at or self._replied_at
        return reply

    def _search(self, *updates: SearchAttributeUpdate[Any]) -> None:
        """Search attributes written with the next phase change (the agent in charge, …)."""
        self._due.extend(updates)
