"""The handle of one run, `RunHandle`: result, status, events, export; approve, reject, resolve, answer_question,
complete_call, cancel; pause, resume, inspect, edit, fork (a session's adds send, ask, end: sessions.py). A handle
is cheap and makes no call until used; an unknown run id is RunNotFound at the first call. Every argument is
checked before anything is sent (durable_agent_runner/client/checks.py)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import TypeAdapter
from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
)
from temporalio.service import RPCError, RPCStatusCode

from durable_agent_runner.activities.capture import CaptureStore
from durable_agent_runner.client import checks, control, listing, stuck, updates
from durable_agent_runner.client.errors import RunNotFound, StillRunning, run_failed
from durable_agent_runner.client.events import Event, stream
from durable_agent_runner.client.export import export_run
from durable_agent_runner.client.follow import GIVE_UP_AFTER, Closed, Gap, events_since, follow
from durable_agent_runner.client.status import RunInfo, WaitingFor, gather, ui_url, waiting_for
from durable_agent_runner.config.env import ClientSettings
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.types import evals as te

WATCH_EVERY = 2.0  # seconds between looks at what a run waits for, while `outcome(on_waiting=...)` waits
MAX_EVENTS = 10_000  # of a run's events, what `read_events` reads at most


class RunHandle:
    """One run. `output_types` maps an agent's name to its `output_type`, so `result()` returns the
    answering agent's type (after handoffs it may not be the agent the run started with)."""

    def __init__(
        self,
        temporal: Client,
        run_id: str,
        output_types: Mapping[str, Any] | None = None,
        *,
        task_queue: str | None = None,
        settings: ClientSettings | None = None,  # its client's, read once (default: now)
    ) -> None:
        self.id = checks.run_id(run_id, "run_id", checks.MAX_ANY_ID)
        self.temporal = temporal
        self.settings = settings if settings is not None else ClientSettings.load()
        self.task_queue = task_queue or str(self.settings.task_queue)  # where `fork` starts its new run
        self.ui = str(self.settings.ui_url)  # the Web UI (TEMPORAL_UI_URL) its links point at
        self.handle: WorkflowHandle[Any, t.RunResult] = temporal.get_workflow_handle(run_id, result_type=t.RunResult)
        self._adapters = {name: TypeAdapter(kind) for name, kind in (output_types or {}).items() if kind is not None}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.id!r})"

    @property
    def ui_url(self) -> str:
        """The run's page in the Web UI (TEMPORAL_UI_URL), in the namespace this client is connected to."""
        return ui_url(self.ui, self.id, self.temporal.namespace)

    # ------------------------------------------------------------------------------ reading

    async def exists(self) -> WorkflowExecutionStatus | None:
        """The run's Temporal status; RunNotFound if there is no such run."""
        return (await updates.describe(self.handle)).status

    async def describe(self) -> WorkflowExecutionDescription:
        """Temporal's description of the run; RunNotFound if there is none (server gaps: RPCError)."""
        return await updates.describe(self.handle)

    async def read_status(self, wait: float = 3.0) -> t.RunStatus:
        """The run's own status query, raising what the read met (temporalio's RPCError when no
        worker answers within `wait` seconds: a caller that retries through gaps wants it)."""
        bound = timedelta(seconds=checks.seconds(wait))
        status: t.RunStatus = await self.handle.query(t.STATUS_QUERY, result_type=t.RunStatus, rpc_timeout=bound)
        return status

    async def events_page(self, since: int = 0, wait: float = 3.0) -> t.EventsPage:
        """One page of the current execution's events from `since` on (`next`: where the next
        page starts), raising what the read met, as `read_status`."""
        query = t.EventsQuery(since=checks.whole(since, "since", 0, 10**12))
        bound = timedelta(seconds=checks.seconds(wait))
        page: t.EventsPage = await self.handle.query(t.EVENTS_QUERY, query, result_type=t.EventsPage, rpc_timeout=bound)
        return page

    async def outcome(
        self,
        *,
        wait: float | None = None,
        on_waiting: Callable[[list[WaitingFor]], None] | None = None,
    ) -> t.RunResult:
        """Wait for the run to end and return all it recorded: output, usage, turns, handoffs. RunFailed
        (RunCancelled) if it ended without an answer. `wait`: at most this many seconds (0: do not wait;
        None: until it ends), then StillRunning, which says what the run waits for a person on, if any.
        `on_waiting` is called, while this waits, each time what the run waits for a person on changes
        (a call's approval, a call in doubt, a resume, a message)."""
        bound = None if wait is None else checks.seconds(wait, "wait", zero=True)
        running = await self.exists() in (WorkflowExecutionStatus.RUNNING, None)  # RunNotFound, NotThatKind
        watcher = asyncio.create_task(self._watch_waits(on_waiting)) if on_waiting is not None else None
        try:
            if bound == 0 and running:
                raise await self._still_running()
            if bound is None or bound == 0:
                return await self._outcome()
            try:
                async with asyncio.timeout(bound):
                    return await self._outcome()
            except TimeoutError:
                raise await self._still_running() from None
        finally:
            if watcher is not None:
                watcher.cancel()

    async def _outcome(self) -> t.RunResult:
        try:
            return await self.handle.result()
        except WorkflowFailureError as err:
            raise run_failed(self.id, err) from None
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise RunNotFound(self.id) from None
            raise

    async def _still_running(self) -> StillRunning:
        live, unserved = await asyncio.gather(self.live(), stuck.unserved_words(self.temporal, self.handle))
        return StillRunning(self.id, waiting_for(self.id, live) if live else [], live.phase if live else None, unserved)

    async def _watch_waits(self, on_waiting: Callable[[list[WaitingFor]], None]) -> None:
        told: list[WaitingFor] | None = None
        while True:
            live = await self.live()
            if live is not None:
                now = waiting_for(self.id, live)
                if now != told:
                    on_waiting(now)
                    told = now
            await asyncio.sleep(WATCH_EVERY)

    async def result(self, *, wait: float | None = None) -> Any:
        """Wait for the final output: an instance of the answering agent's `output_type` when the
        handle knows it, else the typed output as JSON data, else the answer's text. `wait`:
        as `outcome`'s (StillRunning says what the run waits for)."""
        done = await self.outcome(wait=wait)
        return self.typed(done.agent, done.output, done.output_object)

    async def waiting_for(self) -> list[WaitingFor]:
        """What the run waits for a person on now: each call waiting for approval, each call in
        doubt, a resume when it is paused, a session's next message. Empty when it waits for
        nobody, or has ended. RunNotFound for an unknown run; [] when no worker answers."""
        await self.exists()
        live = await self.live()
        return waiting_for(self.id, live) if live is not None else []

    async def live(self, wait: float = 3.0) -> t.RunStatus | None:
        """The run's own status query (its phase, waiting calls, pause, session), or None when no
        worker answers within `wait` seconds (or the run is unknown)."""
        try:
            return await self.read_status(wait)
        except (RPCError, WorkflowQueryFailedError):
            return None

    def typed(self, agent: str, output: str | None, output_object: Any) -> Any:
        adapter = self._adapters.get(agent) or self._adapters.get("")
        if output_object is None:
            return output
        return adapter.validate_python(output_object) if adapter is not None else output_object

    async def status(self) -> RunInfo:
        """What the run is doing: the facts `client.py status` shows (of a delivery's too)."""
        desc = await updates.describe(self.handle, t.WORKFLOW_NAME, t.DELIVER_WORKFLOW)
        return await gather(self.temporal, self.handle, desc, self.ui)

    async def events(
        self, since: int = 0, *, give_up_after: int = GIVE_UP_AFTER, check: bool = True
    ) -> AsyncIterator[Event]:
        """The run's story live from event `since` (resume where a reader stopped): `RunEvent`s,
        `TextDelta`s of the reply being streamed, `TextDiscarded`, `Retrying`, `RunClosed`. Ends
        with the run (a session: when it ends). Reads that fail `give_up_after` times in a row
        (about a second each) raise EventsUnavailable."""
        checks.whole(since, "since", 0, 10**12)
        checks.whole(give_up_after, "give_up_after", 1, 10**6)
        if check:
            await self.exists()
        async for item in stream(self.temporal, self.id, since, give_up_after):
            yield item

    def follow(self, since: int = 0) -> AsyncGenerator[t.AnyRunEvent | t.ModelProgress | Gap | Closed, None]:
        """The raw story under `events()`: events, the streamed text's heartbeats as they come
        (`ModelProgress`), failed reads (`Gap`) and `Closed`; it never ends on its own or gives up
        (the caller stops reading). For a live page that keeps its own state."""
        return follow(self.temporal, self.id, checks.whole(since, "since", 0, 10**12))

    async def read_events(self, since: int = 0, limit: int = 2000) -> list[t.AnyRunEvent]:
        """The run's recorded events from `since` on, at most `limit` (a worker answers)."""
        checks.whole(limit, "limit", 1, MAX_EVENTS)
        out: list[t.AnyRunEvent] = []
        while len(out) < limit:
            page = await events_since(self.temporal, self.id, checks.whole(since, "since", 0, 10**12))
            out.extend(page.events)
            if not page.events or page.done:  # all read (an ended run's next query may be slow)
                break
            since = page.events[-1].seq + 1
        return out[:limit]

    async def transcript(self, *, start: int = 0, wait: float = updates.DEFAULT_WAIT) -> t.Transcript:
        """The run's transcript (its messages from `start`, as the model reads them) and its frozen agent."""
        bound = timedelta(seconds=checks.seconds(wait))
        query = t.TranscriptQuery(start=checks.whole(start, "start", 0, 10**9))
        read: t.Transcript = await control.query_run(
            self.temporal, self.id, t.TRANSCRIPT_QUERY, query, result_type=t.Transcript, wait=bound
        )
        return read

    async def agent(self, *, wait: float = 2.0) -> t.AgentSpec | None:
        """The run's first agent as it froze it, with its team; None when no worker answers."""
        bound = timedelta(seconds=checks.seconds(wait))
        try:  # the transcript from past its end carries the agent and no message
            answer: t.Transcript = await self.handle.query(
                t.TRANSCRIPT_QUERY, t.TranscriptQuery(start=10**9), result_type=t.Transcript, rpc_timeout=bound
            )
        except (RPCError, WorkflowQueryFailedError):
            return None
        return answer.agent

    async def children(self, depth: int = 2) -> list[dict[str, Any]]:
        """The runs this one started (agents used as tools), as `list` rows, each with its own `children`,
        `depth` levels down."""
        return await listing.children(self.temporal, self.id, self.ui, checks.whole(depth, "depth", 1, 5))

    async def export(self, captures: Path | str | None = None) -> list[dict[str, Any]]:
        """The whole run as JSON-ready lines, from its history (durable_agent_runner/client/export.py
        lists them): the agent, the prompt, each model reply with its wire capture (read from
        `captures`, default LLM_CAPTURE_DIR), each decision, approval, resolution and tool result
        (a child run's answer and a result a person gave too), a session's messages, the result."""
        if captures is not None and not isinstance(captures, str | os.PathLike):
            raise TypeError(f"captures must be a directory's path, not {type(captures).__name__}")
        root = Path(captures if captures is not None else self.settings.capture_dir)
        if captures is not None and not await asyncio.to_thread(root.is_dir):  # a typo: replies without captures
            raise checks.BadArgument("captures", f"{root} is not a directory")
        await self.exists()
        return await export_run(self.temporal, self.id, CaptureStore(root))

    # ------------------------------------------------------------------------------ deciding

    async def approve(
        self,
        call_id: str,
        args: dict[str, Any] | None = None,
        *,
        by: str | None = None,
        always: bool = False,
        wait: float = updates.DEFAULT_WAIT,
    ) -> t.DecisionReceipt:
        """Approve a waiting tool call (it runs), with edited `args` if given (validated by the run:
        refused, nothing is recorded). `always`: later calls of the tool in this run too. Sending the
        same decision again counts once."""
        decision = checks.body(
            t.ApprovalDecision,
            call_id=checks.call_id(call_id),
            approve=True,
            arguments=checks.arguments(args),
            always=checks.flag(always, "always"),
            by=checks.by_or_default(by),
        )
        return await self._decide(decision, wait)

    async def reject(
        self, call_id: str, reason: str, *, by: str | None = None, wait: float = updates.DEFAULT_WAIT
    ) -> t.DecisionReceipt:
        """Reject a waiting tool call; the model is told `reason` (it may not be empty)."""
        decision = checks.body(t.ApprovalDecision, call_id=checks.call_id(call_id), approve=False,
                               reason=checks.reason(reason), by=checks.by_or_default(by))  # fmt: skip
        return await self._decide(decision, wait)

    async def resolve(self, call_id: str, action: Literal["rerun", "result", "fail"], result: str | None = None,
                      reason: str = "", *, by: str | None = None, doubt: int | None = None,
                      wait: float = updates.DEFAULT_WAIT) -> t.ResolveReceipt:  # fmt: skip
        """Decide a call in doubt (a `once` tool's attempt that ended without a result): `rerun` it,
        give the `result` it returned (JSON text, checked against the bounds: ValueError), or
        `fail` it with a `reason` the model is told. `doubt`: the time the call is in doubt that the
        person saw (default: now). DecisionRefused unless the call is in doubt; a repeat counts once."""
        decision = checks.resolve_call(call_id, action, result, reason, checks.by_or_default(by), doubt)
        return await updates.resolve(self.handle, decision, checks.seconds(wait))

    async def complete_call(self, call_id: str, result: object = None, *, fail: str | None = None,
                            by: str | None = None, wait: float = updates.DEFAULT_WAIT,
                            ) -> t.CompleteReceipt:  # fmt: skip
        """Complete a call waiting for an outside completion: its `result` (any JSON value, of the tool's
        result type) or `fail`, the reason the model is told. DecisionRefused: nothing recorded."""
        body = checks.complete_call(call_id, result, fail, checks.by_or_default(by))
        return await updates.complete(self.handle, body, checks.seconds(wait))

    async def answer_question(self, call_id: str, text: str | None = None, *, choice: int | None = None,
                              by: str | None = None, wait: float = updates.DEFAULT_WAIT) -> t.AnswerReceipt:
        """Answer an `ask_person` question: `text` or a 1-based `choice`; DecisionRefused: nothing recorded."""
        answer = checks.answer_question(call_id, text, choice, checks.by_or_default(by))
        return await updates.answer(self.handle, answer, checks.seconds(wait))

    async def decide(self, decision: t.ApprovalDecision, *, wait: float = updates.DEFAULT_WAIT) -> t.DecisionReceipt:
        """Send a whole decision (`approve` and `reject` build one): with `turn` set, the run
        refuses it unless the call waits in that turn (what the person saw)."""
        if not isinstance(decision, t.ApprovalDecision):
            raise TypeError(f"decision must be an ApprovalDecision, not {type(decision).__name__}")
        checks.call_id(decision.call_id)
        if not decision.approve:
            checks.reason(decision.reason)
        return await self._decide(decision, wait)

    async def _decide(self, decision: t.ApprovalDecision, wait: float) -> t.DecisionReceipt:
        return await updates.decide(self.handle, decision, checks.seconds(wait))

    async def unserved(self) -> list[dict[str, str]]:
        """What the run waits for that no worker takes: its next step (no worker polls its queue) or
        an activity on an agent's queue (no worker serves that agent, or that version), each as
        {queue, waiting, message}; [] when each has a worker. What it was just asked for (an approved
        call's tool) gets stuck.GRACE to be taken first. Bounded: TimeoutError past stuck.LOOK_BOUND."""
        async with asyncio.timeout(stuck.LOOK_BOUND.total_seconds()):
            return await stuck.unserved_soon(self.temporal, self.handle)

    async def cancel(self) -> None:
        """Ask the run to stop: it answers the calls in flight as cancelled and ends cancelled
        (`result()` then raises RunCancelled); an eval's id cancels the eval. DecisionRefused if it has ended."""
        await updates.cancel(self.handle, t.WORKFLOW_NAME, te.EVAL_WORKFLOW)

    # ------------------------------------------------------------------------------ debugging

    async def pause(
        self, reason: str = "", *, by: str | None = None, wait: float = updates.DEFAULT_WAIT
    ) -> t.RunStatus:
        """Pause the run at its next safe point (before a model call or the tool calls a reply
        asked for); the status it had when it took the request. DecisionRefused if it is paused, or
        a pause is already requested (the refusal names who asked: `resume` withdraws it)."""
        checks.string(reason, "reason")
        return await control.pause(
            self.temporal, self.id, by=checks.by_or_default(by), reason=reason, wait=checks.seconds(wait)
        )

    async def resume(
        self,
        *,
        by: str | None = None,
        add_tokens: int | None = None,
        add_usd: float | None = None,
        wait: float = updates.DEFAULT_WAIT,
    ) -> t.RunStatus:
        """Resume a paused run, with the edits made. A run paused on its budget goes on with it
        raised by `add_tokens` and/or `add_usd` (bounded: NaN, inf, ≤ 0 refused)."""
        raised = checks.budget_raise(add_tokens, add_usd)
        return await control.resume(
            self.temporal, self.id, by=checks.by_or_default(by), wait=checks.seconds(wait), raised=raised
        )

    async def inspect(self, *, wait: float = updates.DEFAULT_WAIT) -> t.Inspection:
        """A paused run's state: transcript items with indexes, pending calls, edits (a running run answers too)."""
        bound = timedelta(seconds=checks.seconds(wait))
        view: t.Inspection = await control.query_run(
            self.temporal, self.id, t.INSPECT_QUERY, result_type=t.Inspection, wait=bound
        )
        return view

    async def edit(
        self,
        change: t.Edit | None = None,
        *,
        text: tuple[int, str] | None = None,
        drop: int | None = None,
        insert: tuple[int, Literal["user", "assistant"], str] | None = None,
        args: tuple[str, dict[str, Any]] | None = None,
        drop_call: str | None = None,
        agent: str | None = None,
        by: str | None = None,
        wait: float = updates.DEFAULT_WAIT,
    ) -> t.EditReceipt:
        """One edit of a paused run, validated by the run (refused: DecisionRefused, nothing
        recorded): `text=(index, text)`, `drop=index`, `insert=(index, role, text)`,
        `args=(call_id, arguments)`, `drop_call=call_id`, `agent=name`, or a `t.Edit`."""
        if change is None:
            change = control.make_edit(
                text=text, drop=drop, insert=insert, args=args, drop_call=drop_call, agent=agent,
                by=checks.by_or_default(by),
            )
        elif not isinstance(change, t.Edit):
            raise TypeError(f"change must be an Edit, not {type(change).__name__}")
        return await control.edit(self.temporal, self.id, change, wait=checks.seconds(wait))

    async def fork(
        self,
        at_turn: int,
        prompt: str | None = None,
        *,
        id: str | None = None,
        live_tools: bool = False,
        task_queue: str | None = None,
        budget_usd: float | None = None,
        budget_tokens: int | None = None,
    ) -> control.Forked:
        """Start a new run from the state just before model call `at_turn` of this one (finished
        or not), with `prompt` added as a user message when given. The calls before that point
        are reused from the transcript, unless `live_tools` runs them again (their side effects
        too). Its id: `id`, or made from this run's. `budget_usd`, `budget_tokens`: its own cap,
        as `start`'s. `AgentClient.get(forked.run_id)` follows it."""
        checks.whole(at_turn, "at_turn", 1, 10**6)
        if prompt is not None:
            checks.prompt(prompt, "prompt")
        new_id = None if id is None else checks.new_run_id(id)
        queue = checks.task_queue(task_queue) if task_queue is not None else self.task_queue
        live, budget = checks.flag(live_tools, "live_tools"), checks.budget_cap(budget_usd, budget_tokens)
        return await control.fork(self.temporal, self.id, at_turn, prompt, new_id, queue, live, budget)
