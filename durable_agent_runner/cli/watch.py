"""Follow a run as it happens: `client.py watch RUN_ID` and `client.py run --follow PROMPT`.

The story comes from the Python client (`RunHandle.events()`, durable_agent_runner/client/events.py):
the run's numbered events, so `--since N` resumes without gaps or repeats, and the text of the reply
being streamed, withdrawn when its model call fails half-way and is retried. `watch` prints it;
`client.py chat` (durable_agent_runner/cli/chat.py) renders it as a conversation through `Printer`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import dataclass, field
from typing import Any, TextIO, assert_never

from durable_agent_runner.cli.common import on_screen
from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.client.errors import EventsUnavailable, cli
from durable_agent_runner.client.events import Live, Retrying, RunClosed, TextDelta, TextDiscarded, TextTracker
from durable_agent_runner.client.follow import (
    GIVE_UP_AFTER,
    POLL,
    STREAM_POLL,
    Closed,
    Gap,
    events_since,
    follow,
    is_session,
    live_progress,
)
from durable_agent_runner.client.stuck import warn_unserved
from durable_agent_runner.machine.texts import EVENT_TEXT
from durable_agent_runner.workflows import types as t

__all__ = [  # the story's parts, kept importable from here for chat and older callers
    "GIVE_UP_AFTER",
    "POLL",
    "STREAM_POLL",
    "Closed",
    "Gap",
    "Live",
    "Printer",
    "cmd_watch",
    "events_since",
    "follow",
    "is_session",
    "live_progress",
    "watch",
]


def shown(ev: t.AnyRunEvent) -> t.AnyRunEvent:
    """An event as a terminal shows it: its words, and the names a model or a tool chose, without
    controls (`watch --json` keeps them, escaped by JSON)."""
    fields = {"text": on_screen(ev.text), "detail": on_screen(ev.detail)}
    fields |= {name: on_screen(value) for name in ("call_id", "tool") if (value := getattr(ev, name)) is not None}
    if isinstance(ev, t.NewerEvent):
        fields["kind"] = on_screen(ev.kind)
    return ev.model_copy(update=fields)


@dataclass
class Printer:
    run_id: str
    as_json: bool
    out: TextIO = field(default_factory=lambda: sys.stdout)
    text: TextTracker = field(default_factory=TextTracker)
    answered: int | None = None  # the turn whose reply text was last shown whole
    headed: int | None = None  # the turn whose header was last printed
    tooling: int | None = None  # the turn whose tool is running: its activity may call the model next
    headers: bool = True  # a header for each turn's model call

    def emit(self, obj: dict[str, Any], text: str | None) -> None:
        if self.as_json:
            print(json.dumps(obj, default=str, ensure_ascii=False), file=self.out, flush=True)
        elif text is not None:
            print(text, end="", file=self.out, flush=True)

    def delta(self, progress: t.ModelProgress) -> None:
        """A heartbeat of the model call in flight: shows what it adds."""
        for piece in self.text.take(progress):
            self.show(piece)

    def show(self, piece: TextDelta | TextDiscarded) -> None:
        if isinstance(piece, TextDelta) and not self.as_json:
            piece = piece.model_copy(update={"text": on_screen(piece.text)})
        self.text.note(piece)
        ahead = self.tooling is not None and piece.turn == self.tooling + 1 and self.headed != piece.turn
        if ahead and self.headers and not self.as_json and isinstance(piece, TextDelta):
            self.headed = piece.turn  # made by the tool's activity: its text comes before its events
            self.emit({}, f"── turn {piece.turn} · made with the tool's result\n")
        if isinstance(piece, TextDiscarded):
            obj: dict[str, Any] = piece.model_dump()
            why = f"\n  ↻ model call attempt {piece.attempt} failed mid-stream; its partial text above is void\n"
            self.emit(obj, why)
            return
        obj = piece.model_dump(exclude={"skipped"} if not piece.skipped else set())
        skipped = piece.skipped
        self.emit(obj, (f"\n  … [{skipped} characters streamed by unseen] …\n" if skipped else "") + piece.text)

    def event(self, ev: t.AnyRunEvent) -> None:
        obj = {"type": "event", **ev.model_dump(mode="json")}
        self.emit(obj, None)
        if self.as_json:
            if ev.kind in (t.EventKind.MODEL_FINISHED, t.EventKind.MODEL_DROPPED):
                self.text.reset(ev.turn + (ev.kind == t.EventKind.MODEL_DROPPED))
            return
        self.emit(obj, self._render(shown(ev)))

    def reply(self, ev: t.RunEvent) -> str:
        """A finished reply's text (a model_finished event) as it completes the live view: what the
        live view had not shown yet, or the whole reply again if a retry changed it."""
        live = self.text.reset(ev.turn)
        self.answered = ev.turn if not ev.detail else None
        text = ev.text
        if live.turn == ev.turn and live.end:
            n = min(len(live.head), len(text), EVENT_TEXT)
            if text[:n] != live.head[:n]:
                text = "\n  ↻ the reply was retried; its final text:\n" + text
            elif len(text) > EVENT_TEXT and live.end >= EVENT_TEXT:  # the event keeps less than was shown
                text = f"\n  (the run's events keep a reply's first {EVENT_TEXT} characters; the live view may"
                text += f" have missed its end: {cli()} result {self.run_id} prints an answer whole)"
            else:
                text = text[live.end :]  # what the live view had not shown yet
        return text + "\n" if (text or live.end) else ""

    def _render(self, ev: t.AnyRunEvent) -> str:
        """One line for each kind: mypy holds the match whole (`assert_never`), so a new kind
        cannot reach watchers without a line of its own."""
        first_line = ev.text.splitlines()[0] if ev.text else ""
        match ev:
            case t.ModelStartedEvent():
                self.tooling = None
                if self.headed == ev.turn:  # its text has streamed already, under its header
                    return ""
                self.headed = ev.turn
                return f"── turn {ev.turn} · {ev.detail}\n"
            case t.ModelDroppedEvent():  # the next call of that turn streams afresh
                self.text.reset(ev.turn + 1)
                self.headed = None
                return f"  ↷ {ev.detail}\n"
            case t.ModelFinishedEvent():
                calls = f"  → asks for: {ev.detail}\n" if ev.detail else ""
                return self.reply(ev) + calls
            case t.ModelFallbackEvent():
                return f"  ⇄ {ev.detail}\n"
            case t.ToolStartedEvent():
                self.tooling = ev.turn
                return f"  ⚙ {ev.detail}\n"
            case t.ToolFinishedEvent():  # a newline first when the next reply streamed already
                gap = "\n" if self.headed == ev.turn + 1 else ""
                return f"{gap}  ← {ev.tool}: {ev.text}\n"
            case t.ApprovalRequestedEvent():
                hint = f"{cli()} approve {self.run_id} {ev.call_id}"
                return f"  ⏸ waiting for approval: {ev.detail}  ({hint})\n"
            case t.ApprovalDecidedEvent() | t.CallResolvedEvent():  # "rejected: …", "failed: …" said so
                mark = "✗" if ev.detail.startswith(("rejected", "failed")) else "✔"
                return f"  {mark} {ev.tool} {ev.call_id}: {ev.detail}\n"
            case t.FinalEvent():  # the answer is the reply just shown; repeat it only if it was not
                return f"✓ final answer (turn {ev.turn})\n" if self.answered == ev.turn else f"\n{ev.text}\n"
            case t.HandoffEvent():
                return f"  ⇢ handoff: {ev.detail}\n"
            case t.GuardrailEvent():
                return f"  ⛨ {ev.detail}\n"
            case t.OutputRefusedEvent():
                return f"  ↺ final output refused, asking again: {first_line}\n"
            case t.CancelledEvent():
                return f"\n✗ run {ev.text}\n"
            case t.FailedEvent():
                return f"\n✗ run failed: {ev.text}\n"
            case t.MessageEvent():
                return f"\n» {ev.detail}: {first_line}\n"
            case t.AnsweredEvent():
                return f"  ✗ {ev.detail}: {first_line}\n" if "failed" in ev.detail else f"✓ answered {ev.detail}\n"
            case t.CompactedEvent():
                return f"  ⊟ memory compacted: {ev.detail}\n"
            case t.WaitingEvent():
                return f"… waiting for the next message ({ev.detail})\n"
            case t.EndedEvent():
                return f"\n■ session ended: {ev.text}\n"
            case t.PausedEvent():
                return f"  ⏸ paused {ev.detail}  ({cli()} inspect {self.run_id})\n"
            case t.EditedEvent():
                return f"  ✎ {ev.detail}\n"
            case t.ResumedEvent():
                return f"  ▶ resumed {ev.detail}\n"
            case t.BudgetRaisedEvent():
                return f"  $ budget raised: {ev.detail}\n"
            case t.CallInDoubtEvent():
                hint = f"{cli()} resolve {self.run_id} {ev.call_id} --rerun | --result JSON | --fail REASON"
                return f"  ⚠ in doubt: {ev.tool} {ev.call_id} {ev.detail}  ({hint})\n"
            case t.QuestionAskedEvent():
                hint = f"{cli()} answer {self.run_id} {ev.call_id} TEXT | --choice N"
                return f"  ? {ev.call_id} asks a person: {first_line} [{ev.detail}]  ({hint})\n"
            case t.QuestionAnsweredEvent():
                return f"  ✔ {ev.call_id} answered: {ev.detail}\n"
            case t.OutsideWaitingEvent():
                hint = f"{cli()} complete {self.run_id} {ev.call_id} --result JSON | --fail REASON"
                return (
                    f"  ⧗ {ev.tool} {ev.call_id} waits for an outside completion {ev.detail}: {first_line}  ({hint})\n"
                )
            case t.OutsideCompletedEvent():
                return f"  ✔ {ev.tool} {ev.call_id} completed from outside: {ev.detail}\n"
            case t.NotifiedEvent():
                return f"  ✉ notified: {ev.detail}\n"
            case t.NotifyFailedEvent():  # never the run's failure: it goes on waiting for its person
                return f"  ✉ notify failed: {ev.detail}; the run still waits\n"
            case t.NewerEvent():  # a kind newer than this watcher (a worker deployed after it)
                return f"  · {ev.kind}: {ev.detail or first_line}\n"
            case _:
                assert_never(ev)


async def watch(
    client: AgentClient, run_id: str, since: int = 0, as_json: bool = False, out: TextIO | None = None,
    seconds: float | None = None,
) -> int:  # fmt: skip
    """Print the run's story from event `since` on until it ends; 0 if it answered, else 1. A
    wait no worker takes (no worker serves the agent, a tool's version) is said on standard error
    within seconds, as `run --wait` says it. `seconds`: follow at most that long (then 1, saying
    where to pick it up)."""
    printer = Printer(run_id, as_json, out or sys.stdout)
    last, asked = "", since
    run = client.get(run_id)
    say = asyncio.create_task(warn_unserved(run.temporal, run.handle, lambda text: print(text, file=sys.stderr)))
    limit = asyncio.timeout(seconds)
    try:
        async with limit:
            async for item in run.events(since, check=False):
                if isinstance(item, TextDelta | TextDiscarded):
                    printer.show(item)
                elif isinstance(item, Retrying):
                    printer.emit({"type": "retrying", "error": item.error}, None)
                    print(f"(watch: {item.error}; retrying)", file=sys.stderr)
                elif isinstance(item, RunClosed):  # completed: its answer came before `since`
                    done = item.status == t.Phase.COMPLETED.value
                    said = f"\n{'✓' if done else '✗'} run {item.status}\n"
                    if since == asked > 0:  # nothing shown: `--since` was past its last event
                        said = f"{said.strip()} (no event from {asked} on)\n"
                    printer.emit({"type": "ended", "status": item.status}, said)
                    return 0 if done else 1
                else:
                    printer.event(item)
                    since, last = item.seq + 1, item.kind
    except EventsUnavailable as err:
        printer.emit({"type": "gave_up", "error": err.error, "next": err.next}, None)
        print(f"watch: {err}", file=sys.stderr)
        return 1
    except TimeoutError:
        if not limit.expired():  # not ours to say
            raise
        printer.emit({"type": "timeout", "next": since}, None)
        print(
            f"watch: stopped after {seconds:g} s; the run goes on: {cli()} watch {run_id} --since {since}",
            file=sys.stderr,
        )
        return 1
    finally:
        say.cancel()
    printer.emit({"type": "end", "outcome": last, "next": since}, None)
    answered = last in (t.EventKind.FINAL, t.EventKind.ENDED)  # a session: ended after its answers
    return 0 if answered else 1


async def cmd_watch(client: AgentClient, args: argparse.Namespace) -> int:
    await client.get(args.run_id).exists()
    return await watch(client, args.run_id, args.since, args.json, seconds=args.timeout)
