"""`client.py chat`: talk with an agent, one durable session run per conversation.

`chat` starts a session and `chat RUN_ID` rejoins one. On a terminal there is a prompt; each answer
streams as it is written, tool calls show as they start and end, and a call that needs approval is
asked inline. Through a pipe (standard input not a terminal) there is no prompt and no colour: each
line is one message and its answer goes to standard output, everything else to standard error; a
call that needs approval is announced with the commands that decide it and waited for, a bounded
time, as an answer is (--answer-wait). Ctrl-C and the end of input detach: the session goes on,
and `chat RUN_ID` picks it up again.

The story comes from durable_agent_runner/client/follow.py's `follow` (the run's events, the live
text of the model call in flight, server gaps); messages and the end go through
durable_agent_runner/cli/session.py (the Python client's updates).
What a chat shows and how a typed line reads are in chat_view.py; its input, the run's status and
the approvals it asks or announces are in chat_io.py.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import signal
import sys
import uuid
from collections.abc import Callable
from contextlib import aclosing
from typing import Any

from temporalio.service import RPCError

from durable_agent_runner.cli import session
from durable_agent_runner.cli.args import agent_name, by_flag, model_string, new_id, number, run_id
from durable_agent_runner.cli.budget import chat_raise, raised_words
from durable_agent_runner.cli.chat_io import (
    ANSWER_WAIT,
    APPROVAL_WAIT,
    MAX_APPROVAL_WAIT,
    QUERY_TIMEOUT,
    UPDATE_WAIT,
    ChatIO,
    Detached,
    Lines,
    joinable,
    patiently,
)
from durable_agent_runner.cli.chat_view import (
    Awaited,
    ChatPrinter,
    Command,
    Style,
    failed,
    message_number,
    parse_line,
    render_exchange,
    render_status,
    wants_colour,
)
from durable_agent_runner.cli.common import UsageError, add_budget_flags
from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.client.errors import AgentRunError, IdTaken, cli, prog
from durable_agent_runner.client.follow import GIVE_UP_AFTER, Closed, Gap, gap_words
from durable_agent_runner.client.updates import LIVE
from durable_agent_runner.config.env import login_name
from durable_agent_runner.machine.texts import EVENT_TEXT
from durable_agent_runner.workflows import types as t

HELP = """\
  /status   messages, answering or waiting, the last exchange, tokens
  /end      end the session (what it was sent is answered first) and exit
  /raise N  add N tokens to its budget (/raise $X: X US dollars), between messages
  /help     this list
  /quit     leave; the session goes on (as Ctrl-C or Ctrl-D): {cli} chat {run_id}
  //text    sends "/text" as a message"""


class Chat(ChatIO):
    """The conversation: messages sent, /commands, the story followed until each answer, rejoining."""

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
        except BrokenPipeError:  # our reader has gone (`chat --json | head -1`): main ends quietly
            raise
        except Exception as err:  # never a traceback: one line, and how to come back
            self.error(f"chat: {gap_words(err)}; the session goes on: {cli()} chat {self.run_id}")
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
        note = f"detached; the session goes on. rejoin it: {cli()} chat {run} · end it: {cli()} end {run}"
        if call is not None:
            note += f"\n  {call} waits for a decision: {cli()} approve {run} {call}"
        self.say(self.printer.style.dim(note))
        return 0

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
        return await self.session.exists() not in LIVE

    async def send(self, text: str) -> int | None:
        message_id = uuid.uuid4().hex  # the same on every retry: a message that did arrive counts once
        run = self.session
        sent = patiently(lambda: run.send(text, by=self.by, message_id=message_id, wait=UPDATE_WAIT), self.say)
        receipt = await self.warned(sent)
        self.printer.mine.add(receipt.message)
        if receipt.steer:
            self.say(self.printer.style.dim("  (it joins the answer in progress)"))
        elif receipt.queued:
            self.say(self.printer.style.dim(f"  (queued: {receipt.queued} message(s) ahead of it)"))
        awaited = Awaited(receipt.message, receipt.steer)
        return await self.warned(self.follow_until(awaited.done, awaited.answers))

    async def command(self, cmd: Command) -> int | None:
        if cmd.name == "help":
            self.say(HELP.format(cli=cli(), run_id=self.run_id))
        elif cmd.name == "status":
            self.say(render_status(self.run_id, await self.status()))
        elif cmd.name == "end":
            receipt = await self.warned(self.session.end(cmd.arg or "/end in chat", by=self.by, wait=UPDATE_WAIT))
            left = f": {receipt.unanswered} message(s) to answer first" if receipt.unanswered else ""
            self.say(self.printer.style.dim(f"ending the session{left}…"))
            return await self.warned(self.follow_until(lambda ev: False))
        elif cmd.name == "raise":  # a session takes a raise alone while it waits for a message (2.0.4)
            try:
                raised = chat_raise(cmd.arg)
                await self.session.resume(by=self.by, wait=UPDATE_WAIT, **raised.model_dump(exclude_none=True))
                said = f"{raised_words(raised)} by {self.by}"
                self.printer.raised.append(said)  # its event, when the chat next follows the run, is not said again
                self.say(self.printer.style.dim(f"budget raised {said}"))
            except (ValueError, AgentRunError) as err:  # how to write it; the run's refusal
                self.say(str(err))
        elif cmd.name in ("quit", "exit", "detach"):
            raise Detached
        else:
            self.say(f"unknown command /{cmd.name}: /help lists them (//text sends a message that starts with '/')")
        return None

    # --------------------------------------------------------------------------- following

    async def follow_until(
        self, done: Callable[[t.AnyRunEvent], bool], mine: Callable[[t.AnyRunEvent], bool] = lambda ev: False
    ) -> int | None:
        """Show the story from `since` until `done` accepts an event: None then. The exit code
        when the run closes first (0 if the session ended, else 1), the server stays out of reach,
        or, through a pipe, nobody decides a waiting call in time. `mine`: the answers to print
        on standard output when piped."""
        loop = asyncio.get_running_loop()
        announced: set[str] = set()
        unheld = None if self.tty else self.answer_wait  # piped: an answer no decision holds up is bounded too
        try:
            async with (
                asyncio.timeout(unheld) as limit,
                aclosing(self.session.follow(self.since)) as story,
            ):
                async for item in story:
                    if isinstance(item, t.ModelProgress):
                        if self.tty:
                            self.printer.delta(item)
                        continue
                    if isinstance(item, Gap):
                        if item.errors >= GIVE_UP_AFTER:
                            self.error(f"chat: giving up after {item.errors} failed polls: {item.error}")
                            self.say(f"the session goes on: {cli()} chat {self.run_id}")
                            return 1
                        print(f"(chat: {item.error}; retrying)", file=sys.stderr, flush=True)
                        continue
                    if isinstance(item, Closed):
                        return self.ended(item.status)
                    ev, self.since = item, item.seq + 1
                    if isinstance(ev, t.ApprovalRequestedEvent):  # names its call, always
                        if self.tty:
                            await self.ask(ev)
                        elif await self.announce(ev):
                            announced.add(ev.call_id)
                            limit.reschedule(loop.time() + self.approval_wait)
                    if ev.kind == t.EventKind.APPROVAL_DECIDED and ev.call_id in announced:
                        announced.discard(ev.call_id)
                        self.waiting_on = None
                        limit.reschedule(limit.when() if announced else unheld and loop.time() + unheld)
                    if ev.kind == t.EventKind.ANSWERED and not self.tty:
                        await self.print_answer(ev, mine(ev))
                    else:
                        self.printer.event(ev)
                    if ev.kind in t.STOP_KINDS:
                        return 1
                    if done(ev):
                        return None
        except TimeoutError:
            if not limit.expired():
                raise
            if not announced:
                self.error(f"chat: no answer within {self.answer_wait:g} s; leaving (--answer-wait)")
                self.say(f"the session goes on: {cli()} chat {self.run_id}")
                return 1
            self.error(f"chat: nobody decided {', '.join(sorted(announced))} within {self.approval_wait:g} s; leaving")
            self.say(f"the session goes on and the call still waits: {cli()} chat {self.run_id}")
            return 1
        return 1  # not reached: the story ends with Closed

    def ended(self, status: str) -> int:
        if status == t.Phase.COMPLETED:
            self.say(self.printer.style.dim(f"session {self.run_id} has ended"))
            return 0
        self.error(f"run {self.run_id} {status}")
        return 1

    async def print_answer(self, ev: t.AnyRunEvent, mine: bool) -> None:
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
                exchange = await self.session.exchange_now(n)
            except (RPCError, session.SessionError):
                exchange = None
            text = exchange.output if exchange is not None and exchange.output is not None else text
        if self.as_json:
            self.emit_json({"type": "answer", "run_id": self.run_id, "message": n, "answer": text, "yours": mine})
        elif mine:
            print(text, file=self.out, flush=True)
        else:
            self.say(f"(answer to message {n}) {text}")

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
        return await self.warned(self.follow_until(lambda ev: ev.kind == t.EventKind.WAITING))

    async def resume_point(self, answering: t.Exchange | None) -> int:
        """Just after the message whose answer is in progress, so its steps so far are shown again;
        else the end of the log. Only the current execution is read: the events are numbered on."""
        run = self.session
        since, found = 0, None
        while True:
            page = await patiently(functools.partial(run.events_page, since, QUERY_TIMEOUT.total_seconds()), self.say)
            for ev in page.events:
                if (
                    answering is not None
                    and ev.kind == t.EventKind.MESSAGE
                    and message_number(ev.detail) == answering.message
                ):
                    found = ev.seq + 1
            if not page.events:
                return found if found is not None else page.next
            since = page.next


def check(args: argparse.Namespace) -> None:
    """The flags that need no server, checked before connecting (UsageError)."""
    new = (args.agent, args.model, args.id, args.budget_usd, args.budget_tokens)
    if args.run_id is not None and new != (None,) * len(new):
        raise UsageError("--agent, --model, --id and --budget-* start a new chat; RUN_ID rejoins one as it is")
    for flag, value in (("--approval-wait", args.approval_wait), ("--answer-wait", args.answer_wait)):
        if not 0 < value <= MAX_APPROVAL_WAIT:  # NaN and inf too: every wait has a bound
            raise UsageError(f"{flag} must be a number of seconds in (0, {MAX_APPROVAL_WAIT:,}]")


async def cmd_chat(client: AgentClient, args: argparse.Namespace) -> int:
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
            print(f"{prog()}: error: {message}", file=sys.stderr, flush=True)
        return 2

    status: t.RunStatus | None = None
    try:
        if args.run_id is None:
            agent = args.agent or t.DEFAULT_AGENT
            started = await client.start_session(
                agent, id=args.id, model=args.model, task_queue=args.task_queue,
                budget_usd=args.budget_usd, budget_tokens=args.budget_tokens,
            )  # fmt: skip
            run_id = started.id
        else:
            run_id = args.run_id
            status = await joinable(client, run_id, note)
            agent = status.agent or "agent"
    except IdTaken as err:
        return usage(f"{err}: give another --id, or leave it out")
    except (session.SessionError, ValueError) as err:
        return usage(str(err))
    printer = ChatPrinter(run_id, False, sys.stdout, style=style, stream=tty, info=info, agent=agent)
    chat = Chat(
        client, run_id, args.by, tty, as_json, printer, approval_wait=args.approval_wait, answer_wait=args.answer_wait
    )
    if status is None:
        if as_json:
            chat.emit_json({"type": "session", "run_id": run_id, "agent": agent})
        else:
            hint = " · /help lists commands · Ctrl-C or Ctrl-D leaves it" if tty else ""
            chat.say(style.dim(f"session {run_id} with {agent}{hint}"))
    return await chat.run(status)


def add_parser(sub: argparse._SubParsersAction[Any]) -> argparse.ArgumentParser:
    who = login_name("cli")
    chat: argparse.ArgumentParser = sub.add_parser(
        "chat",
        help="talk with an agent: one durable run per conversation (RUN_ID rejoins one)",
        description="On a terminal: a prompt, answers as they stream, approvals asked inline. Through a pipe: "
        "one message per line, each answer on standard output. Ctrl-C or end of input leaves the session running.",
    )
    chat.add_argument("run_id", nargs="?", type=run_id, help="rejoin this session")
    chat.add_argument("--agent", type=agent_name, help=f"agent of a new session (default: {t.DEFAULT_AGENT})")
    chat.add_argument("--model", type=model_string, help="override the agent's model, for a new session")
    chat.add_argument("--id", type=new_id, help="run id for a new session (default: generated)")
    add_budget_flags(chat, "a new session (all told)")
    chat.add_argument(
        "--by", type=by_flag, default=who, help="who is talking, recorded with each message (default: %(default)s)"
    )
    chat.add_argument(
        "--approval-wait",
        type=number,
        default=APPROVAL_WAIT,
        metavar="SECONDS",
        help="through a pipe: how long to wait for someone to decide a call (default: %(default)g)",
    )
    chat.add_argument(
        "--answer-wait", type=number, default=ANSWER_WAIT, metavar="SECONDS",
        help="through a pipe: how long to wait for an answer, a decision aside (default: %(default)g)",
    )  # fmt: skip
    chat.add_argument("--json", action="store_true", help="one JSON object per answer; implies no prompt")
    chat.set_defaults(fn=cmd_chat)
    return chat
