"""`client.py chat`: talk with an agent, one durable session run per conversation.

`chat` starts a session and `chat RUN_ID` rejoins one. On a terminal there is a prompt; each answer
streams as it is written, tool calls show as they start and end, and a call that needs approval is
asked inline. Through a pipe (standard input not a terminal) there is no prompt and no colour: each
line is one message and its answer goes to standard output, everything else to standard error; a
call that needs approval is announced with the commands that decide it and waited for, a bounded
time. Ctrl-C and the end of input detach: the session goes on, and `chat RUN_ID` picks it up again.

The story comes from durable_agent_runner/cli/watch.py's `follow` (the run's events, the live text of the model call in
flight, server gaps); messages and the end go through durable_agent_runner/cli/session.py.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import hashlib
import json
import os
import re
import signal
import sys
import threading
import uuid
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, BinaryIO, Literal, TextIO, TypeVar

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from durable_agent_runner.cli import session
from durable_agent_runner.cli.args import json_object
from durable_agent_runner.cli.watch import GIVE_UP_AFTER, Closed, Gap, Printer, follow
from workflows import types as t
from workflows.state import EVENT_TEXT

APPROVAL_WAIT = 600.0  # seconds a piped chat waits for someone to decide a call, by default
QUERY_TIMEOUT = timedelta(seconds=3)
SHOWN_LINES = 6  # of the last answer, when rejoining
ASK_AGAIN = {"InvalidArguments", "InvalidDecision"}  # refusals a person can fix by deciding again
# Steps shown as `watch` shows them, dimmed.
STEPS = ("tool_started", "tool_finished", "approval_decided", "handoff", "guardrail", "output_refused")
HELP = """\
  /status   messages, answering or waiting, the last exchange, tokens
  /end      end the session (what it was sent is answered first) and exit
  /help     this list
  //text    sends "/text" as a message
  Ctrl-C or Ctrl-D leaves; the session goes on: python client.py chat {run_id}"""
T = TypeVar("T")


class Detached(Exception):
    """The person left (end of input, /quit): the session goes on."""


# ------------------------------------------------------------------------------ pure pieces


@dataclass(frozen=True)
class Style:
    """ANSI colour, or plain text when off (not a terminal, NO_COLOR set, a pipe)."""

    on: bool

    def paint(self, text: str, code: str) -> str:
        body = text.rstrip("\n")
        if not self.on or not body:
            return text
        return f"\x1b[{code}m{body}\x1b[0m{text[len(body) :]}"

    def bold(self, text: str) -> str:
        return self.paint(text, "1")

    def dim(self, text: str) -> str:
        return self.paint(text, "2")

    def red(self, text: str) -> str:
        return self.paint(text, "31")

    def yellow(self, text: str) -> str:
        return self.paint(text, "33")

    def agent(self, text: str) -> str:
        return self.paint(text, "1;32")

    def person(self, text: str) -> str:
        return self.paint(text, "1;36")


def wants_colour(stream: TextIO) -> bool:
    return stream.isatty() and not os.environ.get("NO_COLOR")  # https://no-color.org


@dataclass(frozen=True)
class Command:
    name: str  # as typed after "/", lower-cased
    arg: str = ""


def parse_line(line: str) -> str | Command | None:
    """A line typed or piped in: a message to send, a /command, or None (a blank line)."""
    text = line.rstrip("\r\n")
    if not text.strip():
        return None
    if text.startswith("//"):
        return text[1:]
    if text.startswith("/"):
        name, _, arg = text[1:].partition(" ")
        return Command(name.strip().lower(), arg.strip())
    return text


def parse_choice(answer: str) -> Literal["y", "n", "e"] | None:
    choices: dict[str, Literal["y", "n", "e"]] = {"y": "y", "yes": "y", "n": "n", "no": "n", "e": "e", "edit": "e"}
    return choices.get(answer.strip().lower())


def parse_arguments(text: str) -> dict[str, Any]:
    """Edited arguments: a JSON object, or ValueError saying what is wrong with the text."""
    return json_object(text, "the arguments", 'a JSON object, e.g. {"label": "x"}')


def message_number(detail: str) -> int | None:
    """K from a "message K from BY" or "message K" event detail."""
    match = re.match(r"message (\d+)", detail)
    return int(match.group(1)) if match else None


def failed(ev: t.RunEvent) -> bool:
    """An "answered" event for a message whose answer failed (the session goes on)."""
    return ev.kind == "answered" and " · failed" in ev.detail


def sender(detail: str) -> str:
    match = re.match(r"message \d+ from (.+?)(?: · .*)?$", detail)
    return match.group(1) if match else "someone"


def one_line(text: str, width: int = 100) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def render_status(run_id: str, status: t.RunStatus) -> str:
    s = status.session
    if s is None:
        return f"run {run_id} is not a session"
    state = s.state + (f", {s.queued} queued" if s.queued else "")
    if s.state == "waiting" and s.idle_deadline is not None:
        state += f" (it ends at {s.idle_deadline:%Y-%m-%d %H:%M:%S} UTC unless a message comes)"
    u = status.usage
    lines = [
        f"session:  {run_id} · agent {status.agent or '?'}",
        f"state:    {state}",
        f"messages: {s.messages} received, {s.answered} answered",
        f"tokens:   {u.input_tokens} in ({u.cached_tokens} cached) · {u.output_tokens} out · {u.requests} model calls",
    ]
    if s.last is not None:
        answer = one_line(s.last.output) if s.last.output is not None else "(being answered)"
        lines.append(f"last:     message {s.last.message} from {s.last.by or 'someone'}: {one_line(s.last.prompt)}")
        lines.append(f"          → {s.last.error or answer}")
    if s.compactions:
        lines.append(f"memory:   compacted {s.compactions} time(s)")
    for p in status.pending_approvals:
        lines.append(f"waiting:  {p.call_id}  {p.tool}({json.dumps(p.arguments, ensure_ascii=False)}) for approval")
    return "\n".join(lines)


def render_exchange(ex: t.Exchange, agent: str, style: Style) -> str:
    """The last exchange, briefly: who asked what, and the first lines of the answer."""
    head = style.dim(f"── message {ex.message}\n") + style.person(f"{ex.by or 'someone'}> ") + one_line(ex.prompt, 200)
    if ex.output is None:
        return head + "\n" + style.dim("  (being answered: following it)") + "\n"
    lines = (ex.error or ex.output).splitlines() or [""]
    more = f"\n  … ({len(lines) - SHOWN_LINES} more lines)" if len(lines) > SHOWN_LINES else ""
    return head + "\n" + style.agent(f"{agent}> ") + "\n".join(lines[:SHOWN_LINES]) + style.dim(more) + "\n"


# -------------------------------------------------------------------------------- rendering


@dataclass
class ChatPrinter(Printer):
    """The story as a conversation: replies under the agent's name, other steps dimmed, no turn
    headers. On a terminal (`stream`) replies show as they are written; through a pipe the answers
    are printed by the chat, and every other line goes to `info`."""

    style: Style = field(default_factory=lambda: Style(False))
    stream: bool = True
    info: TextIO = field(default_factory=lambda: sys.stderr)
    agent: str = "agent"
    mine: set[int] = field(default_factory=set)  # messages this chat sent: not echoed back
    open: bool = False  # a reply is being written on screen under the agent's name

    def emit(self, obj: dict[str, Any], text: str | None) -> None:
        if not text:
            return
        if obj.get("type") == "delta" and not self.open:
            text, self.open = self.style.agent(f"{self.agent}> ") + text, True
        elif obj.get("type") == "discard":
            text, self.open = self.style.dim(text), False
        print(text, end="", file=self.out, flush=True)

    def event(self, ev: t.RunEvent) -> None:
        text = self.render(ev)
        if text:
            print(text, end="", file=self.out if self.stream else self.info, flush=True)

    def render(self, ev: t.RunEvent) -> str:
        s = self.style
        if ev.kind in ("model_finished", "final") and not self.stream:
            return ""  # through a pipe, only the answers are printed, whole
        if ev.kind == "model_finished":
            text = self.reply(ev)
            if text and not self.open and ev.text:  # nothing of it was streamed
                text = s.agent(f"{self.agent}> ") + text
            self.open = False
            return text
        if ev.kind == "final":  # the answer is the reply just shown; repeat it only if it was not
            return "" if self.answered == ev.turn else s.agent(f"{self.agent}> ") + ev.text + "\n"
        if ev.kind == "message":
            if message_number(ev.detail) in self.mine:
                return ""
            return s.person(f"{sender(ev.detail)}> ") + ev.text + "\n"
        if ev.kind == "answered" and failed(ev):
            return s.red(f"✗ message {message_number(ev.detail)} was not answered: {ev.text}\n")
        if ev.kind in ("model_started", "answered", "waiting", "approval_requested"):
            return ""  # answers are shown as replies; approvals are asked (or announced) by the chat
        if ev.kind == "compacted":
            return s.dim(f"  (memory compacted: {ev.detail})\n")
        if ev.kind == "ended":
            return s.dim(f"session ended: {ev.text}\n")
        if ev.kind in ("failed", "cancelled"):
            return s.red(self._render(ev))
        if ev.kind in STEPS:
            return s.dim(self._render(ev))
        return s.dim(f"  · {ev.kind}: {ev.detail or ev.text}\n")  # a kind of step newer than this chat


# ------------------------------------------------------------------------------------ input


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


# ------------------------------------------------------------------------------------- chat


async def patiently(fn: Callable[[], Awaitable[T]], note: Callable[[str], None]) -> T:
    """fn(), retried through server gaps (a restarted dev server, a worker gap) for about as long
    as `watch` keeps trying; an unknown run or a refused request is not retried."""
    for attempt in range(1, GIVE_UP_AFTER + 1):
        try:
            return await fn()
        except RPCError as err:
            if err.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT) or attempt == GIVE_UP_AFTER:
                raise
            note(f"(chat: {err.message}; retrying)")
            await asyncio.sleep(1.0)
    raise AssertionError("not reached")


@dataclass
class Awaited:
    """The answer a chat waits for after sending message K: K's own, or, when K steered the
    answer in progress, that one. `seen` once K's own event has gone by."""

    message: int
    steer: bool = False
    seen: bool = False

    def answers(self, ev: t.RunEvent) -> bool:
        n = message_number(ev.detail) if ev.kind == "answered" else None
        return n is not None and (n >= self.message or (self.steer and self.seen))

    def done(self, ev: t.RunEvent) -> bool:
        if ev.kind == "message" and message_number(ev.detail) == self.message:
            self.seen = True
        return self.answers(ev) or (self.seen and ev.kind == "waiting")


@dataclass
class Chat:
    client: Client
    run_id: str
    by: str
    tty: bool  # a person at a terminal: a prompt, streamed replies, approvals asked
    as_json: bool
    printer: ChatPrinter
    approval_wait: float = APPROVAL_WAIT
    since: int = 0  # the next event to show
    waiting_on: str | None = None  # a call that waits for a decision, for the note on leaving
    failures: int = 0  # piped messages whose answer failed: the exit code is 1
    lines: Lines | None = None

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

    def emit_json(self, obj: dict[str, Any]) -> None:
        print(json.dumps(obj, ensure_ascii=False, default=str), file=self.out, flush=True)

    async def run(self, status: t.RunStatus | None) -> int:
        """The whole conversation; Ctrl-C, end of input and /quit leave it running (exit code 0)."""
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        interrupted = False

        def on_interrupt() -> None:
            nonlocal interrupted
            interrupted = True
            task.cancel()

        try:
            loop.add_signal_handler(signal.SIGINT, on_interrupt)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or not POSIX
            pass
        self.lines = Lines(sys.stdin.buffer)
        try:
            return await self.converse(status)
        except asyncio.CancelledError:
            if not interrupted:
                raise
            task.uncancel()
            return self.detach()
        except Detached:
            return self.detach()
        except session.SessionError as err:
            self.error(f"chat: {err}")
            return 1
        except Exception as err:  # never a traceback: one line, and how to come back
            message = err.message if isinstance(err, RPCError) else f"{type(err).__name__}: {err}"
            self.error(f"chat: {message}; the session goes on: python client.py chat {self.run_id}")
            return 1
        finally:
            try:
                loop.remove_signal_handler(signal.SIGINT)
            except (NotImplementedError, RuntimeError, ValueError):
                pass

    def detach(self) -> int:
        if self.printer.open or self.tty:
            print(file=self.out, flush=True)  # off the prompt or the reply being written
            self.printer.open = False
        if self.as_json:
            self.emit_json({"type": "detached", "run_id": self.run_id, "pending_approval": self.waiting_on})
            return 0
        run, call = self.run_id, self.waiting_on
        note = f"detached; the session goes on. rejoin it: python client.py chat {run}"
        if call is not None:
            note += f"\n  {call} waits for a decision: python client.py approve {run} {call}"
        self.say(self.printer.style.dim(note))
        return 0

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

    async def converse(self, status: t.RunStatus | None) -> int:
        if status is not None:
            code = await self.rejoin(status)
            if code is not None:
                return code
        while True:
            line = await self.read(self.printer.style.bold("you> "))
            if line is None:
                return max(self.detach(), int(self.failures > 0))
            item = parse_line(line)
            if item is None:
                continue
            try:
                code = await (self.command(item) if isinstance(item, Command) else self.send(item))
            except session.SessionError as err:
                self.error(f"chat: {err}")
                code = 1 if not self.tty or await self.closed() else None
            if code is not None:
                return code

    async def closed(self) -> bool:
        desc = await self.client.get_workflow_handle(self.run_id).describe()
        return desc.status not in (WorkflowExecutionStatus.RUNNING, WorkflowExecutionStatus.CONTINUED_AS_NEW)

    async def send(self, text: str) -> int | None:
        message_id = uuid.uuid4().hex  # the same on every retry: a message that did arrive counts once
        receipt = await patiently(
            lambda: session.send_message(self.client, self.run_id, text, by=self.by, message_id=message_id), self.say
        )
        self.printer.mine.add(receipt.message)
        if receipt.steer:
            self.say(self.printer.style.dim("  (it joins the answer in progress)"))
        elif receipt.queued:
            self.say(self.printer.style.dim(f"  (queued: {receipt.queued} message(s) ahead of it)"))
        awaited = Awaited(receipt.message, receipt.steer)
        return await self.follow_until(awaited.done, awaited.answers)

    async def command(self, cmd: Command) -> int | None:
        if cmd.name == "help":
            self.say(HELP.format(run_id=self.run_id))
        elif cmd.name == "status":
            self.say(render_status(self.run_id, await self.status()))
        elif cmd.name == "end":
            receipt = await session.end_session(self.client, self.run_id, by=self.by, reason=cmd.arg or "/end in chat")
            left = f": {receipt.unanswered} message(s) to answer first" if receipt.unanswered else ""
            self.say(self.printer.style.dim(f"ending the session{left}…"))
            return await self.follow_until(lambda ev: False)
        elif cmd.name in ("quit", "exit", "detach"):
            raise Detached
        else:
            self.say(f"unknown command /{cmd.name}: /help lists them (//text sends a message that starts with '/')")
        return None

    async def status(self) -> t.RunStatus:
        handle = self.client.get_workflow_handle(self.run_id)
        status: t.RunStatus = await patiently(
            lambda: handle.query(t.STATUS_QUERY, result_type=t.RunStatus, rpc_timeout=QUERY_TIMEOUT), self.say
        )
        return status

    # --------------------------------------------------------------------------- following

    async def follow_until(
        self, done: Callable[[t.RunEvent], bool], mine: Callable[[t.RunEvent], bool] = lambda ev: False
    ) -> int | None:
        """Show the story from `since` until `done` accepts an event: None then. The exit code
        when the run closes first (0 if the session ended, else 1), the server stays out of reach,
        or, through a pipe, nobody decides a waiting call in time. `mine`: the answers to print
        on standard output when piped."""
        loop = asyncio.get_running_loop()
        announced: set[str] = set()
        try:
            async with asyncio.timeout(None) as limit, aclosing(follow(self.client, self.run_id, self.since)) as story:
                async for item in story:
                    if isinstance(item, t.ModelProgress):
                        if self.tty:
                            self.printer.delta(item)
                        continue
                    if isinstance(item, Gap):
                        if item.errors >= GIVE_UP_AFTER:
                            self.error(f"chat: giving up after {item.errors} failed polls: {item.error}")
                            self.say(f"the session goes on: python client.py chat {self.run_id}")
                            return 1
                        print(f"(chat: {item.error}; retrying)", file=sys.stderr, flush=True)
                        continue
                    if isinstance(item, Closed):
                        return self.ended(item.status)
                    ev, self.since = item, item.seq + 1
                    if ev.kind == "approval_requested":
                        if self.tty:
                            await self.ask(ev)
                        elif await self.announce(ev):
                            announced.add(ev.call_id or "")
                            limit.reschedule(loop.time() + self.approval_wait)
                    if ev.kind == "approval_decided" and ev.call_id in announced:
                        announced.discard(ev.call_id)
                        self.waiting_on = None
                        limit.reschedule(None if not announced else limit.when())
                    if ev.kind == "answered" and not self.tty:
                        await self.print_answer(ev, mine(ev))
                    else:
                        self.printer.event(ev)
                    if ev.kind in ("failed", "cancelled"):
                        return 1
                    if done(ev):
                        return None
        except TimeoutError:
            if not limit.expired():
                raise
            self.error(f"chat: nobody decided {', '.join(sorted(announced))} within {self.approval_wait:g} s; leaving")
            self.say(f"the session goes on and the call still waits: python client.py chat {self.run_id}")
            return 1
        return 1  # not reached: the story ends with Closed

    def ended(self, status: str) -> int:
        if status == "completed":
            self.say(self.printer.style.dim(f"session {self.run_id} has ended"))
            return 0
        self.error(f"run {self.run_id} {status}")
        return 1

    async def print_answer(self, ev: t.RunEvent, mine: bool) -> None:
        """Through a pipe: the answer whole (an event keeps only its first EVENT_TEXT characters)."""
        n = message_number(ev.detail) or 0
        text = ev.text
        if failed(ev):
            self.failures += mine
            if self.as_json:
                self.emit_json({"type": "answer", "run_id": self.run_id, "message": n, "error": text, "yours": mine})
            else:
                self.printer.event(ev)  # to standard error, like every line that is not an answer
            return
        if len(text) > EVENT_TEXT:
            try:
                exchange = await session.get_exchange(self.client, self.run_id, n)
            except (RPCError, session.SessionError):
                exchange = None
            text = exchange.output if exchange is not None and exchange.output is not None else text
        if self.as_json:
            self.emit_json({"type": "answer", "run_id": self.run_id, "message": n, "answer": text, "yours": mine})
        elif mine:
            print(text, file=self.out, flush=True)
        else:
            self.say(f"(answer to message {n}) {text}")

    async def pending(self, call_id: str | None) -> t.PendingApproval | None:
        status = await self.status()
        return next((p for p in status.pending_approvals if p.call_id == call_id), None)

    async def ask(self, ev: t.RunEvent) -> None:
        """On a terminal: ask the person about a call that waits, until a decision is recorded."""
        pending = await self.pending(ev.call_id)
        if pending is None:
            return  # decided already (someone was quicker, or this is a replay): its decision follows
        s = self.printer.style
        args = json.dumps(pending.arguments, ensure_ascii=False)
        self.say(s.yellow(f"  ⏸ {pending.tool}({args}) needs your approval") + s.dim(f"  [{pending.call_id}]"))
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
                reason = await self.read("  reason, for the model (Enter: none): ")
                if reason is None:
                    raise Detached
                decision = decision.model_copy(update={"approve": False, "reason": reason.strip()[:4000]})
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
        """Send a decision through the validated update: True when recorded, False when refused in
        a way deciding again can fix, None when the call is no longer waiting."""
        if decision.arguments is not None:
            digest = hashlib.sha256(json.dumps(decision.arguments, sort_keys=True).encode()).hexdigest()[:12]
            update_id = f"edit-{decision.call_id}-{digest}"
        else:  # the ids `client.py approve` and `reject` use: the same decision from both counts once
            update_id = f"{'approve' if decision.approve else 'reject'}-{decision.call_id}"
        handle = self.client.get_workflow_handle(self.run_id)
        try:
            await handle.execute_update(t.APPROVAL_UPDATE, decision, id=update_id, result_type=t.DecisionReceipt)
        except WorkflowUpdateFailedError as err:
            cause = err.cause
            message = cause.message if isinstance(cause, ApplicationError) else str(cause or err)
            self.say(self.printer.style.red(f"  refused: {message}"))
            return False if isinstance(cause, ApplicationError) and cause.type in ASK_AGAIN else None
        except RPCError as err:
            self.say(self.printer.style.red(f"  the decision did not get through ({err.message}); decide again"))
            return False
        return True

    async def announce(self, ev: t.RunEvent) -> bool:
        """Through a pipe: say which call waits and how to decide it. False if it no longer waits."""
        pending = await self.pending(ev.call_id)
        if pending is None:
            return False
        self.waiting_on = pending.call_id
        args = json.dumps(pending.arguments, ensure_ascii=False)
        run, call = self.run_id, pending.call_id
        self.say(
            f"⏸ {pending.tool}({args}) needs approval; decide from another shell:\n"
            f"    python client.py approve {run} {call}        (--args JSON runs it with edited arguments)\n"
            f"    python client.py reject {run} {call} --reason TEXT\n"
            f"  waiting up to {self.approval_wait:g} s for a decision"
        )
        return True

    # ------------------------------------------------------------------------------ rejoin

    async def rejoin(self, status: t.RunStatus) -> int | None:
        """Show the last exchange briefly; if an answer is in progress, follow it from its start."""
        assert status.session is not None
        s = status.session
        self.say(
            self.printer.style.dim(
                f"rejoined session {self.run_id} with {status.agent or '?'}: {s.messages} message(s),"
                f" {s.answered} answered, {s.state}" + (" · /help lists commands" if self.tty else "")
            )
        )
        if s.last is not None and not self.as_json:
            print(render_exchange(s.last, self.printer.agent, self.printer.style), end="", file=self.info, flush=True)
        answering = s.last if s.state != "waiting" and s.last is not None and s.last.output is None else None
        self.since = await self.resume_point(answering)
        if s.state == "waiting":
            return None
        return await self.follow_until(lambda ev: ev.kind == "waiting")

    @staticmethod
    async def events_page(handle: WorkflowHandle[Any, Any], since: int) -> t.EventsPage:
        query = t.EventsQuery(since=since)
        page: t.EventsPage = await handle.query(
            t.EVENTS_QUERY, query, result_type=t.EventsPage, rpc_timeout=QUERY_TIMEOUT
        )
        return page

    async def resume_point(self, answering: t.Exchange | None) -> int:
        """Just after the message whose answer is in progress, so its steps so far are shown again;
        else the end of the log. Only the current execution is read: the events are numbered on."""
        handle = self.client.get_workflow_handle(self.run_id)
        since, found = 0, None
        while True:
            page = await patiently(functools.partial(self.events_page, handle, since), self.say)
            for ev in page.events:
                if answering is not None and ev.kind == "message" and message_number(ev.detail) == answering.message:
                    found = ev.seq + 1
            if not page.events:
                return found if found is not None else page.next
            since = page.next


async def joinable(client: Client, run_id: str, note: Callable[[str], None]) -> t.RunStatus:
    """The status of a session one can join; SessionError (a usage error) for anything else."""
    handle = client.get_workflow_handle(run_id)
    try:
        desc = await patiently(handle.describe, note)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise session.SessionError(f"no run with id '{run_id}'") from None
        raise
    if desc.status not in (WorkflowExecutionStatus.RUNNING, WorkflowExecutionStatus.CONTINUED_AS_NEW):
        how = desc.status.name.lower() if desc.status else "ended"
        raise session.SessionError(f"run {run_id} has ended ({how}); start a new chat with: python client.py chat")
    status: t.RunStatus = await patiently(
        lambda: handle.query(t.STATUS_QUERY, result_type=t.RunStatus, rpc_timeout=QUERY_TIMEOUT), note
    )
    if status.session is None:
        raise session.SessionError(
            f"run {run_id} is not a session (it answers one prompt): follow it with python client.py watch {run_id}"
        )
    return status


async def cmd_chat(client: Client, args: argparse.Namespace) -> int:
    as_json = bool(args.json)
    tty = sys.stdin.isatty() and not as_json
    style = Style(tty and wants_colour(sys.stdout))
    info = sys.stdout if tty else sys.stderr

    def note(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    def usage(message: str) -> int:  # like client.py's usage errors: one line, exit code 2
        if as_json:
            print(json.dumps({"error": message, "exit_code": 2}), flush=True)
        else:
            print(f"client.py: error: {message}", file=sys.stderr, flush=True)
        return 2

    if args.run_id is not None and (args.agent, args.model, args.id) != (None, None, None):
        return usage("--agent, --model and --id start a new chat; RUN_ID rejoins one as it is")
    if args.approval_wait <= 0:
        return usage("--approval-wait must be a positive number of seconds")
    status: t.RunStatus | None = None
    try:
        if args.run_id is None:
            agent = args.agent or t.DEFAULT_AGENT
            run_id = await session.start_session(
                client, agent=agent, task_queue=args.task_queue, run_id=args.id, model=args.model
            )
        else:
            run_id = args.run_id
            status = await joinable(client, run_id, note)
            agent = status.agent or "agent"
    except session.SessionError as err:
        return usage(str(err))
    printer = ChatPrinter(run_id, False, sys.stdout, style=style, stream=tty, info=info, agent=agent)
    chat = Chat(client, run_id, args.by, tty, as_json, printer, approval_wait=args.approval_wait)
    if status is None:
        if as_json:
            chat.emit_json({"type": "session", "run_id": run_id, "agent": agent})
        else:
            hint = " · /help lists commands · Ctrl-C or Ctrl-D leaves it" if tty else ""
            chat.say(style.dim(f"session {run_id} with {agent}{hint}"))
    return await chat.run(status)


def add_parser(sub: argparse._SubParsersAction[Any]) -> argparse.ArgumentParser:
    who = os.environ.get("USER") or os.environ.get("USERNAME") or "cli"
    chat: argparse.ArgumentParser = sub.add_parser(
        "chat",
        help="talk with an agent: one durable run per conversation (RUN_ID rejoins one)",
        description="On a terminal: a prompt, answers as they stream, approvals asked inline. Through a pipe: "
        "one message per line, each answer on standard output. Ctrl-C or end of input leaves the session running.",
    )
    chat.add_argument("run_id", nargs="?", help="rejoin this session")
    chat.add_argument("--agent", help=f"agent of a new session (default: {t.DEFAULT_AGENT})")
    chat.add_argument("--model", help="override the agent's model, for a new session")
    chat.add_argument("--id", help="run id for a new session (default: generated)")
    chat.add_argument("--by", default=who, help="who is talking, recorded with each message (default: %(default)s)")
    chat.add_argument(
        "--approval-wait",
        type=float,
        default=APPROVAL_WAIT,
        metavar="SECONDS",
        help="through a pipe: how long to wait for someone to decide a call (default: %(default)g)",
    )
    chat.add_argument("--json", action="store_true", help="one JSON object per answer; implies no prompt")
    chat.set_defaults(fn=cmd_chat)
    return chat
