"""Schedules: runs that start themselves, on Temporal Schedules (`AgentClient.schedules`; `client.py
schedule ...` is a shell over it). A schedule lives in the server, so it survives restarts of
everything else and shows in the Web UI's Schedules page; each run it starts is an ordinary run
whose id begins `sched-NAME-` and whose `TemporalScheduledById` search attribute names it
(`status` and `list` show it). Sent to a session instead, each firing starts a small
DeliverMessage run (workflows/deliver.py) that gives the session its message once.

Every verb is bounded (RPC_TIMEOUT a call); an unknown name is ScheduleNotFound, a name taken
ScheduleExists, a bad argument a BadArgument naming it (client/schedule_specs.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionExecutionStartWorkflow,
    ScheduleActionResult,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleBackfill,
    ScheduleHandle,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
)
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError, RPCStatusCode

from durable_agent_runner.client import checks, deliveries, stuck
from durable_agent_runner.client import schedule_specs as specs
from durable_agent_runner.client.errors import AgentRunError
from durable_agent_runner.client.follow import DEADLINE
from durable_agent_runner.client.status import web_ui
from durable_agent_runner.workflows import types as t

RPC_TIMEOUT = timedelta(seconds=10)
# The server answers a describe by querying the schedule's own workflow, which must have taken its
# first task on the server's internal worker (just after a create, a pause, a restart): on a loaded
# host that took longer than a call's timeout (CI, stop 39). A describe that times out is asked again.
DESCRIBE_TRIES = 3
MAX_RUNNING = 100  # an allow-all schedule's runs still going, listed at most
TRIGGER_WAIT = 5.0  # seconds `trigger` looks for the run it started before answering without its id
MAX_LIST = 1000
MAX_BACKFILL = 1000  # runs one backfill may start: a range past it is refused, not started by the thousand
MAX_BACKFILL_CRON = timedelta(days=31)  # a cron schedule's range (its count is the server's to know)
MAX_SCAN = 10_000  # schedules of the namespace a list reads at most (others' too), a bound whatever it holds
RUN_PREFIX = "sched-"  # a scheduled run's id: sched-NAME-2026-12-02T07:00:00Z (Temporal adds the time)
MARK = "durable_agent_runner"  # the memo key that says a schedule is ours (the list shows only ours)


class ScheduleNotFound(AgentRunError):
    def __init__(self, name: str) -> None:
        super().__init__(f"no schedule named '{name}'")
        self.name = name


class ScheduleExists(AgentRunError):
    def __init__(self, name: str) -> None:
        super().__init__(f"a schedule named '{name}' exists already: delete it first, or choose another name")
        self.name = name


class ScheduledRun(BaseModel):
    """One run a schedule started: its id, when it was due and when it started."""

    run_id: str
    scheduled_at: datetime
    started_at: datetime | None = None


class ScheduleRow(BaseModel):
    """A schedule as `schedule list` and the console show it."""

    name: str
    agent: str = ""
    session: str | None = None  # sends its input to this session instead of starting runs
    when: str = ""  # "every 10s", "cron 0 9 * * 1-5"
    paused: bool = False
    note: str = ""
    last_run: ScheduledRun | None = None
    next_runs: list[datetime] = []  # when it will start runs next (none while it is paused)
    ui_url: str = ""


class ScheduleView(ScheduleRow):
    """A schedule whole, as `schedule describe` shows it."""

    input: str = ""
    every_seconds: float | None = None
    timezone: str | None = None
    jitter_seconds: float | None = None
    overlap: str = "skip"
    catchup_window_seconds: float | None = None
    model: str | None = None
    budget_usd: float | None = None
    budget_tokens: int | None = None
    runs_started: int = 0
    skipped_overlap: int = 0
    missed_catchup: int = 0
    running: list[str] = []
    recent: list[ScheduledRun] = []
    created_at: datetime | None = None
    unserved: str = ""  # for an agent no worker serves now: what its runs would wait for (stuck.py)


class Triggered(BaseModel):
    """A `trigger`'s answer: the run it started, when seen within TRIGGER_WAIT seconds."""

    name: str
    run_id: str | None = None
    message: str


def ui_url(base: str, name: str, namespace: str) -> str:
    """The schedule's page in the Web UI at `base`."""
    return web_ui(base, namespace, "schedules", name)


def _when(memo: Mapping[str, Any]) -> str:
    if memo.get("cron"):
        return f"cron {memo['cron']}" + (f" ({memo['timezone']})" if memo.get("timezone") else "")
    every = float(memo.get("every_seconds") or 0)
    return f"every {specs.said(timedelta(seconds=every))}" if every else ""


def _run(result: ScheduleActionResult) -> ScheduledRun:
    action = result.action
    run_id = action.workflow_id if isinstance(action, ScheduleActionExecutionStartWorkflow) else ""
    return ScheduledRun(run_id=run_id, scheduled_at=result.scheduled_at, started_at=result.started_at)


class Schedules:
    """The schedules of one namespace: create, list, describe, pause, unpause, trigger, backfill,
    delete. `AgentClient.schedules` is one, starting runs on the client's task queue."""

    def __init__(self, temporal: Client, task_queue: str, ui: str) -> None:
        self.temporal = temporal
        self.task_queue = task_queue
        self.ui = ui  # the Web UI's base URL (TEMPORAL_UI_URL)

    async def create(
        self,
        name: str,
        *,
        agent: str | None = None,
        input: str,
        cron: str | None = None,
        every: timedelta | float | str | None = None,
        overlap: str = "skip",
        catchup_window: timedelta | float | str | None = None,
        jitter: timedelta | float | str | None = None,
        timezone: str | None = None,
        budget_usd: float | None = None,
        budget_tokens: int | None = None,
        session: str | None = None,
        model: str | None = None,
        paused: bool = False,
        note: str = "",
    ) -> ScheduleView:
        """A schedule named `name` that starts a run of `agent` answering `input` (or, given
        `session` instead, sends `input` to that session) by `cron` or `every` interval, one of the two.
        `overlap`: skip (default), buffer-one, cancel-other or allow-all, when a run is still going
        at the next time; `catchup_window`: how late a missed time (the server was down) may still
        start; `jitter`: a random delay up to this; `timezone` (IANA) for cron; `budget_usd` and
        `budget_tokens` cap each run; `model` overrides the agent's; `paused` creates it paused."""
        name = specs.name(name)
        if (agent is None) == (session is None):
            raise checks.BadArgument("agent/session", "give one of agent (start its runs) or session (message it)")
        checks.prompt(input)
        if (cron is None) == (every is None):
            raise checks.BadArgument("cron/every", "give one of cron or every")
        spec = ScheduleSpec(
            cron_expressions=[specs.cron(cron)] if cron is not None else [],
            intervals=[ScheduleIntervalSpec(every=specs.duration(every, "every", low=specs.MIN_EVERY))]
            if every is not None
            else [],
            jitter=specs.duration(jitter, "jitter") if jitter is not None else None,
            time_zone_name=specs.zone_for(timezone, cron),
        )
        specs.jitter_within(spec.jitter, spec.intervals[0].every if spec.intervals else None)
        policy = SchedulePolicy(
            overlap=specs.overlap(overlap),
            catchup_window=specs.duration(catchup_window, "catchup_window", low=specs.MIN_CATCHUP)
            if catchup_window is not None
            else None,
        )
        budget = checks.budget_cap(budget_usd, budget_tokens)  # each run's (None: the agent's own only)
        if model is not None:
            checks.model(model)
        checks.flag(paused, "paused")
        specs.note(note)
        by = f"schedule {name}"
        if session is not None:
            session = checks.run_id(session, "session", checks.MAX_ANY_ID)
            if budget is not None or model is not None:
                raise checks.BadArgument("session", "a session has its own model and budget: give no budget or model")
            if len(input) > t.MAX_MESSAGE_CHARS:
                raise checks.BadArgument("input", f"a session's message is at most {t.MAX_MESSAGE_CHARS:,} characters")
            why = await deliveries.not_a_session(self.temporal, session)
            if why is not None:
                raise deliveries.NoSession(why)
            action = ScheduleActionStartWorkflow(
                t.DELIVER_WORKFLOW,
                t.Delivery(session=session, text=input, by=by),
                id=f"{RUN_PREFIX}{name}",
                task_queue=self.task_queue,
                static_summary=f"{by}: a message to session {session}"[:200],
            )
        else:
            agent = checks.agent(agent)
            action = ScheduleActionStartWorkflow(
                t.WORKFLOW_NAME,
                t.RunInput(prompt=input, agent=agent, model=model, budget=budget),
                id=f"{RUN_PREFIX}{name}",
                task_queue=self.task_queue,
                typed_search_attributes=TypedSearchAttributes(
                    [SearchAttributePair(t.SA_AGENT, agent), SearchAttributePair(t.SA_PHASE, t.Phase.STARTING)]
                ),
                static_summary=f"{agent}: {input[:120]} ({by})",
            )
        # What the list shows without reading each schedule whole; never the input (the action holds it).
        memo: dict[str, Any] = {
            MARK: 1,
            "agent": agent or "",
            "session": session,
            "cron": spec.cron_expressions[0] if spec.cron_expressions else None,
            "every_seconds": spec.intervals[0].every.total_seconds() if spec.intervals else None,
            "timezone": spec.time_zone_name,
        }
        schedule = Schedule(action=action, spec=spec, policy=policy, state=ScheduleState(paused=paused, note=note))
        try:
            await self.temporal.create_schedule(name, schedule, memo=memo, rpc_timeout=RPC_TIMEOUT)
        except ScheduleAlreadyRunningError:
            raise ScheduleExists(name) from None
        except RPCError as err:
            if err.status == RPCStatusCode.INVALID_ARGUMENT:  # the server's own check of the spec (a cron field)
                raise checks.BadArgument("schedule", f"Temporal refused it: {err.message}") from None
            raise
        return await self.describe(name)

    def _handle(self, name: str) -> ScheduleHandle:
        return self.temporal.get_schedule_handle(specs.name(name))

    async def _call(self, name: str, what: Any) -> Any:
        try:
            return await what
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise ScheduleNotFound(name) from None
            raise

    async def _still_running(self, name: str) -> list[str]:
        """The runs a schedule started that are still going, from visibility (a moment behind):
        under allow-all a schedule does not track its runs."""
        query = f"{specs.SCHEDULED_BY.name} = '{specs.name(name)}' AND ExecutionStatus = 'Running'"
        listed = self.temporal.list_workflows(query, limit=MAX_RUNNING, rpc_timeout=RPC_TIMEOUT)
        return sorted([wf.id async for wf in listed])

    async def describe(self, name: str) -> ScheduleView:
        handle = self._handle(name)
        for tried in range(1, DESCRIBE_TRIES + 1):
            try:
                desc = await self._call(name, handle.describe(rpc_timeout=RPC_TIMEOUT))
                break
            except RPCError as err:
                if err.status not in DEADLINE or tried == DESCRIBE_TRIES:
                    raise
        memo = await desc.memo()
        s, info = desc.schedule, desc.info
        view: dict[str, Any] = {
            "name": name,
            "agent": memo.get("agent", ""),
            "session": memo.get("session"),
            "when": _when(memo),
            "every_seconds": memo.get("every_seconds"),
            "paused": s.state.paused,
            "note": s.state.note or "",
            "next_runs": [] if s.state.paused else list(info.next_action_times[:5]),
            "ui_url": ui_url(self.ui, name, self.temporal.namespace),
            "timezone": s.spec.time_zone_name or None,
            "jitter_seconds": s.spec.jitter.total_seconds() if s.spec.jitter else None,
            "overlap": specs.OVERLAP_NAMES.get(s.policy.overlap, s.policy.overlap.name.lower()),
            "catchup_window_seconds": s.policy.catchup_window.total_seconds() if s.policy.catchup_window else None,
            "runs_started": info.num_actions,
            "skipped_overlap": info.num_actions_skipped_overlap,
            "missed_catchup": info.num_actions_missed_catchup_window,
            "running": [
                a.workflow_id for a in info.running_actions if isinstance(a, ScheduleActionExecutionStartWorkflow)
            ],
            "recent": [_run(r) for r in info.recent_actions],
            "created_at": info.created_at,
        }
        if s.policy.overlap == ScheduleOverlapPolicy.ALLOW_ALL:  # the server keeps no list of them then
            view["running"] = await self._still_running(name)
        view["last_run"] = view["recent"][-1] if view["recent"] else None
        action = s.action
        if isinstance(action, ScheduleActionStartWorkflow) and action.args:
            kind = t.RunInput if action.workflow == t.WORKFLOW_NAME else t.Delivery
            (given,) = await self.temporal.data_converter.decode(list(action.args), [kind])
            if isinstance(given, t.RunInput):
                view["input"], view["model"] = given.prompt, given.model
                view["unserved"] = await stuck.agent_unserved(self.temporal, action.task_queue, given.agent)
                if given.budget is not None:
                    view["budget_usd"], view["budget_tokens"] = given.budget.usd, given.budget.tokens
            elif isinstance(given, t.Delivery):
                view["input"] = given.text
        return ScheduleView.model_validate(view)

    async def list(self, limit: int = 100) -> list[ScheduleRow]:
        """This client's schedules (those `create` made), by name. The server's list is eventually
        consistent: one created a moment ago may show a second later."""
        checks.whole(limit, "limit", 1, MAX_LIST)
        rows: list[ScheduleRow] = []
        scanned = 0
        async for entry in await self.temporal.list_schedules(page_size=100, rpc_timeout=RPC_TIMEOUT):
            scanned += 1
            if scanned > MAX_SCAN:
                break
            memo = await entry.memo()
            if not memo.get(MARK):
                continue
            recent = entry.info.recent_actions if entry.info else []
            state = entry.schedule.state if entry.schedule else None
            rows.append(
                ScheduleRow(
                    name=entry.id,
                    agent=memo.get("agent", ""),
                    session=memo.get("session"),
                    when=_when(memo),
                    paused=bool(state and state.paused),
                    note=(state.note if state else "") or "",
                    last_run=_run(recent[-1]) if recent else None,
                    next_runs=list(entry.info.next_action_times[:3])
                    if entry.info and not (state and state.paused)
                    else [],
                    ui_url=ui_url(self.ui, entry.id, self.temporal.namespace),
                )
            )
            if len(rows) >= limit:
                break
        return sorted(rows, key=lambda r: r.name)

    async def pause(self, name: str, note: str = "") -> ScheduleView:
        note = specs.note(note) or "paused from durable-agent-runner"
        await self._call(name, self._handle(name).pause(note=note, rpc_timeout=RPC_TIMEOUT))
        return await self.describe(name)

    async def unpause(self, name: str, note: str = "") -> ScheduleView:
        note = specs.note(note) or "unpaused from durable-agent-runner"
        await self._call(name, self._handle(name).unpause(note=note, rpc_timeout=RPC_TIMEOUT))
        return await self.describe(name)

    async def trigger(self, name: str, *, overlap: str | None = None) -> Triggered:
        """Start one run now (a paused schedule too), under the schedule's overlap policy unless
        `overlap` says otherwise; the answer names the run when it is seen within a few seconds."""
        policy: ScheduleOverlapPolicy | None = specs.overlap(overlap) if overlap is not None else None
        before = await self.describe(name)
        seen = {r.run_id for r in before.recent} | set(before.running)
        asked = datetime.now(UTC)
        await self._call(name, self._handle(name).trigger(overlap=policy, rpc_timeout=RPC_TIMEOUT))
        try:
            async with asyncio.timeout(TRIGGER_WAIT):
                while True:
                    after = await self.describe(name)
                    new = [r.run_id for r in after.recent if r.run_id not in seen] + [
                        run for run in after.running if run not in seen
                    ]
                    if new:
                        return Triggered(name=name, run_id=new[-1], message=f"started {new[-1]}")
                    if after.skipped_overlap > before.skipped_overlap:
                        return Triggered(name=name, message="skipped: a run it started is still going (overlap skip)")
                    await asyncio.sleep(0.3)
        except TimeoutError:
            pass
        return Triggered(
            name=name, message=f"triggered at {asked:%H:%M:%S} UTC; no run seen yet (see `schedule describe {name}`)"
        )

    async def backfill(self, name: str, start: datetime | str, end: datetime | str) -> ScheduleView:
        """Start the runs the schedule would have started between `start` and `end` (times, or ISO
        8601 text: UTC unless a zone is given), as if it had run then: at most MAX_BACKFILL runs
        of an interval, MAX_BACKFILL_CRON of a cron schedule's times."""
        since, until = specs.moment(start, "from"), specs.moment(end, "to")
        if since >= until:
            raise checks.BadArgument("from/to", "FROM must be before TO")
        if until > (now := datetime.now(UTC)):  # it would start now the runs of times still to come
            raise checks.BadArgument(
                "from/to", f"TO is in the future (now is {now:%Y-%m-%dT%H:%M} UTC): a backfill starts the runs of "
                "times past; the schedule starts the rest when they are due",
            )  # fmt: skip
        view = await self.describe(name)
        span = until - since
        if view.every_seconds and span.total_seconds() / view.every_seconds > MAX_BACKFILL:
            many = int(span.total_seconds() / view.every_seconds)
            raise checks.BadArgument("from/to", f"that range would start {many:,} runs, more than {MAX_BACKFILL:,}")
        if not view.every_seconds and span > MAX_BACKFILL_CRON:
            raise checks.BadArgument("from/to", f"a cron schedule backfills at most {MAX_BACKFILL_CRON.days} days")
        fill = ScheduleBackfill(start_at=since, end_at=until, overlap=ScheduleOverlapPolicy.ALLOW_ALL)
        await self._call(name, self._handle(name).backfill(fill, rpc_timeout=RPC_TIMEOUT))
        return await self.describe(name)

    async def delete(self, name: str) -> None:
        """Delete the schedule; the runs it started go on."""
        await self._call(name, self._handle(name).delete(rpc_timeout=RPC_TIMEOUT))
