"""What a chat shows and what a typed line means, without I/O: colours, /commands, approval
answers, the session's status and last exchange as text, and ChatPrinter, which tells a run's
story as a conversation (durable_agent_runner/cli/chat.py runs the chat itself)."""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Literal, TextIO

from durable_agent_runner.cli.args import json_object
from durable_agent_runner.cli.budget import raise_hint
from durable_agent_runner.cli.watch import Printer, shown
from durable_agent_runner.config.env import no_color
from durable_agent_runner.workflows import types as t

SHOWN_LINES = 6  # of the last answer, when rejoining


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
    return stream.isatty() and not no_color()  # https://no-color.org


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


def failed(ev: t.AnyRunEvent) -> bool:
    """An "answered" event for a message whose answer failed (the session goes on)."""
    return ev.kind == t.EventKind.ANSWERED and " · failed" in ev.detail


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
    if ex.output is None and ex.error is None:
        return head + "\n" + style.dim("  (being answered: following it)") + "\n"
    if ex.error is not None:  # the answer failed: not the agent's words
        return head + "\n" + style.red(f"✗ not answered: {one_line(ex.error, 300)}") + "\n"
    lines = (ex.output or "").splitlines() or [""]
    more = f"\n  … ({len(lines) - SHOWN_LINES} more lines)" if len(lines) > SHOWN_LINES else ""
    return head + "\n" + style.agent(f"{agent}> ") + "\n".join(lines[:SHOWN_LINES]) + style.dim(more) + "\n"


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
    raised: list[str] = field(default_factory=list)  # raises this chat made and said: their events not again
    open: bool = False  # a reply is being written on screen under the agent's name
    headers: bool = False

    def emit(self, obj: dict[str, Any], text: str | None) -> None:
        if not text:
            return
        if obj.get("type") == "delta" and not self.open:
            text, self.open = self.style.agent(f"{self.agent}> ") + text, True
        elif obj.get("type") == "discard":
            text, self.open = self.style.dim(text), False
        print(text, end="", file=self.out, flush=True)

    def event(self, ev: t.AnyRunEvent) -> None:
        text = self.render(shown(ev))
        if text:
            print(text, end="", file=self.out if self.stream else self.info, flush=True)

    def render(self, ev: t.AnyRunEvent) -> str:
        s = self.style
        if ev.kind in (t.EventKind.MODEL_FINISHED, t.EventKind.FINAL) and not self.stream:
            return ""  # through a pipe, only the answers are printed, whole
        if ev.kind == t.EventKind.MODEL_FINISHED:
            text = self.reply(ev)
            if text and not self.open and ev.text:  # nothing of it was streamed
                text = s.agent(f"{self.agent}> ") + text
            self.open = False
            return text
        if ev.kind == t.EventKind.FINAL:  # the answer is the reply just shown; repeat it only if it was not
            return "" if self.answered == ev.turn else s.agent(f"{self.agent}> ") + ev.text + "\n"
        if ev.kind == t.EventKind.MESSAGE:
            if message_number(ev.detail) in self.mine:
                return ""
            return s.person(f"{sender(ev.detail)}> ") + ev.text + "\n"
        if ev.kind == t.EventKind.BUDGET_RAISED and ev.detail in self.raised:
            self.raised.remove(ev.detail)
            return ""
        if ev.kind == t.EventKind.ANSWERED and failed(ev):
            kind = re.search(r"failed \((\w+)\)", ev.detail)  # machine/conversation.failed
            hint = raise_hint(kind[1], self.run_id, chat=True) if kind else None
            return s.red(f"✗ message {message_number(ev.detail)} was not answered: {ev.text}\n") + (
                s.dim(f"  {hint}\n") if hint else ""
            )
        if ev.kind in (
            t.EventKind.MODEL_STARTED,
            t.EventKind.ANSWERED,
            t.EventKind.WAITING,
            t.EventKind.APPROVAL_REQUESTED,
        ):
            return ""  # answers are shown as replies; approvals are asked (or announced) by the chat
        if ev.kind == t.EventKind.COMPACTED:
            return s.dim(f"  (memory compacted: {ev.detail})\n")
        if ev.kind == t.EventKind.ENDED:
            return s.dim(f"session ended: {ev.text}\n")
        if ev.kind in t.STOP_KINDS:
            return s.red(self._render(ev))
        return s.dim(self._render(ev))  # every other step as `watch` shows it: a line of its own a kind


@dataclass
class Awaited:
    """The answer a chat waits for after sending message K: K's own, or, when K steered the
    answer in progress, that one. `seen` once K's own event has gone by."""

    message: int
    steer: bool = False
    seen: bool = False

    def answers(self, ev: t.AnyRunEvent) -> bool:
        n = message_number(ev.detail) if ev.kind == t.EventKind.ANSWERED else None
        return n is not None and (n >= self.message or (self.steer and self.seen))

    def done(self, ev: t.AnyRunEvent) -> bool:
        if ev.kind == t.EventKind.MESSAGE and message_number(ev.detail) == self.message:
            self.seen = True
        return self.answers(ev) or (self.seen and ev.kind == t.EventKind.WAITING)
