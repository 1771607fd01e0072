"""A chat's link to the person and to the run: standard input read off the event loop, calls
retried through server gaps, lines said on the right stream, the run's status, and the tool calls
that wait for approval (asked on a terminal, announced with the commands that decide them through
a pipe). durable_agent_runner/cli/chat.py builds the conversation on it."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, BinaryIO, TextIO, TypeVar

from temporalio.service import RPCError, RPCStatusCode

from durable_agent_runner.cli import session
from durable_agent_runner.cli.chat_view import ChatPrinter, parse_arguments, parse_choice
from durable_agent_runner.cli.common import on_screen
from durable_agent_runner.cli.watch import GIVE_UP_AFTER
from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.client.checks import MAX_WAIT
from durable_agent_runner.client.errors import AgentRunError, DecisionRefused, cli
from durable_agent_runner.client.follow import gap_words
from durable_agent_runner.client.sessions import SessionHandle
from durable_agent_runner.client.stuck import warn_unserved
from durable_agent_runner.client.updates import how_ended
from durable_agent_runner.workflows import types as t

APPROVAL_WAIT = 600.0  # seconds a piped chat waits for someone to decide a call, by default
MAX_APPROVAL_WAIT = 86_400  # and at most: a day (an answer's wait too)
ANSWER_WAIT = 3600.0  # seconds a piped chat waits for an answer no call's decision holds up, by default
QUERY_TIMEOUT = timedelta(seconds=3)
UPDATE_WAIT = MAX_WAIT  # seconds a message, an end or a decision waits for a worker to take it
ASK_AGAIN = {"InvalidArguments", "InvalidDecision"}  # refusals a person can fix by deciding again
T = TypeVar("T")


def call_words(pending: t.PendingApproval) -> str:
    """A call that waits, as a person's terminal shows it: the model chose its arguments, and JSON
    escapes an ESC but not an 8-bit CSI."""
    return on_screen(f"{pending.tool}({json.dumps(pending.arguments, ensure_ascii=False)})")


class Detached(Exception):
    """The person left (end of input, /quit): the session goes on."""


class Lines:
    """Standard input, line by line, read in a daemon thread so the event loop stays free and
    leaving never waits for a read to return. b"" is the end of input."""

    def __init__(self, stream: BinaryIO) -> None:
        self.queue: asyncio.Queue[bytes] = asyncio.Queue()
        self.eof = False
        loop = asyncio.get_running_loop()
        threading.Thread(target=self._read, args=(stream, loop), daemon=True, name="chat-input").start()

    def _read(self, stream: BinaryIO, loop: asyncio.AbstractEventLoop) -> None:
        while True:
            try:
                line = stream.readline()
            except (OSError, ValueError):
                line = b""
            try:
                loop.call_soon_threadsafe(self.queue.put_nowait, line)
            except RuntimeError:  # the loop has closed: the chat is over
                return
            if not line:
                return

    async def next(self) -> bytes:
        if self.eof:
            return b""
        line = await self.queue.get()
        self.eof = not line
        return line


async def patiently(fn: Callable[[], Awaitable[T]], note: Callable[[str], None]) -> T:
    """fn(), retried through server gaps (a restarted dev server, a worker gap) for about as long
    as `watch` keeps trying; an unknown run or a refused request is not retried."""
    for attempt in range(1, GIVE_UP_AFTER + 1):
        try:
            return await fn()
        except RPCError as err:
            if err.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT) or attempt == GIVE_UP_AFTER:
                raise
            note(f"(chat: {gap_words(err)}; retrying)")
            await asyncio.sleep(1.0)
    raise AssertionError("not reached")


@dataclass
class ChatIO:
    """The state a chat keeps, its output and input, and its approvals; `Chat` adds the rest."""

    client: AgentClient
    run_id: str
    by: str
    tty: bool  # a person at a terminal: a prompt, streamed replies, approvals asked
    as_json: bool
    printer: ChatPrinter
    approval_wait: float = APPROVAL_WAIT
    answer_wait: float = ANSWER_WAIT
    since: int = 0  # the next event to show
    waiting_on: str | None = None  # a call that waits for a decision, for the note on leaving
    failures: int = 0  # piped messages whose answer failed: the exit code is 1
    lines: Lines | None = None

    @property
    def session(self) -> SessionHandle:
        return self.client.get_session(self.run_id)

    @property
    def out(self) -> TextIO:
        return self.printer.out

    @property
    def info(self) -> TextIO:
        return self.printer.info

    def say(self, text: str) -> None:
        print(text, file=self.info, flush=True)

    def error(self, text: str) -> None:
        if self.printer.open:
            print(file=self.out)
            self.printer.open = False
        print(self.printer.style.red(text), file=sys.stderr, flush=True)

    async def warned(self, work: Awaitable[T]) -> T:
        """`work` (a message sent, its answer followed), saying meanwhile, once each and within
        seconds, what the session waits for that no worker takes: its own next step, the model
        call, a tool's agent (client/stuck.py, as `run --wait` says it)."""
        handle = self.client.get(self.run_id).handle
        warner = asyncio.create_task(warn_unserved(self.client.temporal, handle, self.warn))
        try:
            return await work
        finally:
            warner.cancel()

    def warn(self, text: str) -> None:
        if self.printer.open:  # off the answer being written
            print(file=self.out, flush=True)
            self.printer.open = False
        self.say(self.printer.style.dim(f"  ({text})"))

    def emit_json(self, obj: dict[str, Any]) -> None:
        print(json.dumps(obj, ensure_ascii=False, default=str), file=self.out, flush=True)

    async def read(self, prompt: str = "") -> str | None:
        """The next line, without its newline; None at the end of input."""
        assert self.lines is not None
        while True:
            if prompt and self.tty:
                print(prompt, end="", file=self.out, flush=True)
            raw = await self.lines.next()
            if not raw:
                return None
            try:
                return raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as err:
                self.error(f"that line is not UTF-8 text ({err.reason} at byte {err.start}); it was not sent")

    async def status(self) -> t.RunStatus:
        run = self.session
        return await patiently(lambda: run.read_status(QUERY_TIMEOUT.total_seconds()), self.say)

    async def pending(self, call_id: str) -> t.PendingApproval | None:
        status = await self.status()
        return next((p for p in status.pending_approvals if p.call_id == call_id), None)

    async def ask(self, ev: t.ApprovalRequestedEvent) -> None:
        """On a terminal: ask the person about a call that waits, until a decision is recorded."""
        pending = await self.pending(ev.call_id)
        if pending is None:
            return  # decided already (someone was quicker, or this is a replay): its decision follows
        s = self.printer.style
        args = call_words(pending)
        self.say(s.yellow(f"  ⏸ {args} needs your approval") + s.dim(f"  [{pending.call_id}]"))
        self.waiting_on = pending.call_id
        while True:
            answer = await self.read("  approve? [y]es / [n]o / [e]dit: ")
            if answer is None:
                raise Detached
            choice = parse_choice(answer)
            decision = t.ApprovalDecision(call_id=pending.call_id, approve=True, by=self.by, turn=pending.turn)
            if choice is None:
                self.say("  answer y, n or e")
                continue
            if choice == "n":
                reason = ""
                while not reason:
                    said = await self.read("  reason, for the model: ")
                    if said is None:
                        raise Detached
                    reason = said.strip()[:4000]
                decision = decision.model_copy(update={"approve": False, "reason": reason})
            if choice == "e":
                edited = await self.edit(pending)
                if edited is None:
                    continue
                decision = decision.model_copy(update={"arguments": edited})
            if await self.decide(decision) is not False:
                self.waiting_on = None
                return

    async def edit(self, pending: t.PendingApproval) -> dict[str, Any] | None:
        self.say(self.printer.style.dim(f"  arguments now: {json.dumps(pending.arguments, ensure_ascii=False)}"))
        while True:
            text = await self.read("  new arguments as a JSON object (Enter: back): ")
            if text is None:
                raise Detached
            if not text.strip():
                return None
            try:
                return parse_arguments(text)
            except ValueError as err:
                self.say(self.printer.style.red(f"  {err}"))

    async def decide(self, decision: t.ApprovalDecision) -> bool | None:
        """Send a decision through the client (the run's validated update, under the ids `client.py
        approve` and `reject` use: the same decision from both counts once): True when recorded,
        False when refused in a way deciding again can fix, None when the call no longer waits."""
        try:
            await self.session.decide(decision, wait=UPDATE_WAIT)
        except DecisionRefused as err:
            message = str(err).removeprefix(f"run {self.run_id} refused it: ")
            self.say(self.printer.style.red(f"  refused: {message}"))
            return False if err.kind in ASK_AGAIN else None
        except (AgentRunError, RPCError) as err:
            said = gap_words(err) if isinstance(err, RPCError) else str(err)
            self.say(self.printer.style.red(f"  the decision did not get through ({said}); decide again"))
            return False
        return True

    async def announce(self, ev: t.ApprovalRequestedEvent) -> bool:
        """Through a pipe: say which call waits and how to decide it. False if it no longer waits."""
        pending = await self.pending(ev.call_id)
        if pending is None:
            return False
        self.waiting_on = pending.call_id
        args = call_words(pending)
        run, call = self.run_id, pending.call_id
        self.say(
            f"⏸ {args} needs approval; decide from another shell:\n"
            f"    {cli()} approve {run} {call}        (--args JSON runs it with edited arguments)\n"
            f"    {cli()} reject {run} {call} --reason TEXT\n"
            f"  waiting up to {self.approval_wait:g} s for a decision"
        )
        return True


async def joinable(client: AgentClient, run_id: str, note: Callable[[str], None]) -> t.RunStatus:
    """The status of a session one can join; SessionError (a usage error) for anything else."""
    run = client.get_session(run_id)
    desc = await patiently(run.describe, note)  # an unknown id: RunNotFound, a SessionError
    how = how_ended(desc)
    if how is not None:
        raise session.SessionError(f"run {run_id} has ended ({how}); start a new chat with: {cli()} chat")
    status = await patiently(lambda: run.read_status(QUERY_TIMEOUT.total_seconds()), note)
    if status.session is None:
        raise session.SessionError(
            f"run {run_id} is not a session (it answers one prompt): follow it with {cli()} watch {run_id}"
        )
    return status
