"""A session's own state: the messages sent to it, their queue, and each one's exchange. Pure: no
Temporal calls, so its rules are tested without a server; the workflow passes in the time and
its execution's run id.

The rules: a message is accepted once (a repeated `message_id` gets the first receipt back), in
order, while the session is open and its queue has room; it is answered exactly once, by the
exchange it opens or, when the agent steers, by the exchange in progress that it joins.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta

from durable_agent_runner.machine.calls import BUDGET_SPENT
from durable_agent_runner.machine.texts import excerpt
from durable_agent_runner.workflows import types as t

MAX_QUEUED = 100  # unanswered messages; the sender is told to wait for answers
MAX_QUEUED_CHARS = 1_000_000
RECENT_IDS = 1000  # message ids remembered for de-duplication, across continue-as-new
KEEP_EXCHANGES = 10  # exchanges carried whole into the next execution


class Refused(Exception):
    """Why a message or an end is refused; the update validator raises it as the error."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


def text_digest(text: str) -> str:
    """A short digest of a message's text: enough to tell a repeat from another message."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


class SessionState:
    def __init__(self, carry: t.SessionCarry | None = None) -> None:
        c = carry or t.SessionCarry()
        self.messages = c.messages
        self.queue = list(c.queue)
        self.exchanges = list(c.exchanges)
        self.spans = list(c.spans)
        self.recent = dict(c.recent)  # message_id → its number, the latest RECENT_IDS of them
        self.recent_texts = dict(c.recent_texts)  # message_id → text_digest(its text)
        self.ending = c.ending
        self.compactions = c.compactions
        self.idle_since = c.idle_since
        self.receipts: dict[str, t.MessageReceipt] = {}  # this execution's, for repeated sends

    # ------------------------------------------------------------------------------ messages

    @property
    def recent_ids(self) -> list[str]:
        return list(self.recent)

    @property
    def current(self) -> t.Exchange | None:
        """The exchange being answered, if any."""
        last = self.exchanges[-1] if self.exchanges else None
        return last if last is not None and last.finished is None else None

    @property
    def answered(self) -> int:
        return self.messages - len(self.queue) - (1 + len(self.current.steered) if self.current else 0)

    def check(self, message: t.SessionMessage, ended: bool) -> None:
        """Raises Refused unless `message` can be accepted now (a repeat always can; an id used
        for another text never can: that is a client's mistake, not a repeat)."""
        if message.message_id in self.recent:
            known = self.recent_texts.get(message.message_id)
            if known is not None and known != text_digest(message.text):
                number = self.recent[message.message_id]
                raise Refused(
                    f"message id '{message.message_id}' was already used for message {number}, with other text: "
                    "send this one with a new id",
                    "MessageIdReused",
                )
            return
        if ended:
            raise Refused("the session has ended: it takes no more messages", "SessionEnded")
        if self.ending is not None:
            raise Refused(f"the session is ending (client.py end by {self.ending.by})", "SessionEnding")
        waiting = sum(len(q.text) for q in self.queue)
        if len(self.queue) >= MAX_QUEUED or waiting + len(message.text) > MAX_QUEUED_CHARS:
            raise Refused(
                f"{len(self.queue)} messages ({waiting:,} characters) are still waiting for answers; "
                "send more once some are answered",
                "SessionQueueFull",
            )

    def accept(self, message: t.SessionMessage, now: datetime, steer: bool) -> t.MessageReceipt:
        """Queues `message` (checked first); a repeat of an accepted message_id changes nothing."""
        if message.message_id in self.recent:
            earlier = self.receipts.get(message.message_id)  # this execution's, with how it was taken
            number = self.recent[message.message_id]
            return t.MessageReceipt(message=number, queued=0, steer=bool(earlier and earlier.steer), duplicate=True)
        self.messages += 1
        ahead = len(self.queue)
        self.queue.append(
            t.Queued(message=self.messages, text=message.text, by=message.by, at=now, message_id=message.message_id)
        )
        receipt = t.MessageReceipt(message=self.messages, queued=ahead, steer=steer and self.current is not None)
        if message.message_id:
            self.recent[message.message_id] = receipt.message
            self.recent_texts[message.message_id] = text_digest(message.text)
            for old in list(self.recent)[: max(len(self.recent) - RECENT_IDS, 0)]:
                del self.recent[old]
                self.recent_texts.pop(old, None)
            self.receipts[message.message_id] = receipt
        return receipt

    def open(self, turn: int, now: datetime, execution: str) -> t.Queued:
        """Takes the next queued message and opens its exchange (turns after `turn`)."""
        nxt = self.queue.pop(0)
        self.exchanges.append(
            t.Exchange(
                message=nxt.message, prompt=excerpt(nxt.text), by=nxt.by, first_turn=turn + 1, started=now,
                execution=execution,
            )
        )  # fmt: skip
        return nxt

    def end(self, end: t.EndSession) -> t.EndReceipt:
        """`client.py end`: the session ends once what it holds is answered (the first end asked counts)."""
        self.ending = self.ending or end
        return t.EndReceipt(messages=self.messages, unanswered=self.messages - self.answered)

    def steer(self) -> list[t.Queued]:
        """The queued messages that join the exchange in progress (all of them, in order)."""
        current = self.current
        if current is None or not self.queue:
            return []
        joined, self.queue = self.queue, []
        self.exchanges[-1] = current.model_copy(update={"steered": current.steered + [q.message for q in joined]})
        return joined

    def close(
        self,
        now: datetime,
        turn: int,
        usage: t.Usage,
        output: str | None,
        output_object: object,
        error: str | None,
        execution: str = "",
    ) -> t.Exchange:
        """The answer to the exchange in progress; it is held whole by `execution` from now on
        (where it was finished, after any continue-as-new since it opened)."""
        current = self.current
        assert current is not None, "no exchange is being answered"
        closed = current.model_copy(
            update={
                "execution": execution or current.execution,
                "output": output,
                "output_object": output_object,
                "error": error,
                "turns": turn - current.first_turn + 1,
                "usage": usage,
                "finished": now,
            }
        )  # a new record: the one in the books a step was given stays as it was (machine/run.py)
        self.exchanges[-1], self.idle_since = closed, now
        return closed

    # -------------------------------------------------------------------------------- reads

    def find(self, message: int) -> t.ExchangeAnswer:
        """Message K's exchange if this execution holds it; else where it is held (or nothing yet)."""
        number = message or (self.exchanges[-1].message if self.exchanges else 0)
        for ex in reversed(self.exchanges):
            if ex.message == number or number in ex.steered:
                return t.ExchangeAnswer(exchange=ex, messages=self.messages)
        span = next((s for s in reversed(self.spans) if s.first <= number), None)
        held = self.exchanges[0].message if self.exchanges else self.messages + 1
        if span is not None and number < held:
            return t.ExchangeAnswer(messages=self.messages, execution=span.execution)
        return t.ExchangeAnswer(messages=self.messages)

    def details(self) -> str:
        """The conversation in the run's Web UI details (markdown): its counts, its last exchange."""
        line = f"**conversation:** {self.messages} message(s), {self.answered} answered"
        line += f", {len(self.queue)} queued" if self.queue else ""
        last = self.exchanges[-1] if self.exchanges else None
        if last is not None:
            line += f"\n\n**message {last.message}** ({last.by}): {excerpt(last.prompt, 200)}"
            if last.output is not None:
                line += f"\n\n**answer:** {excerpt(last.output, 300)}"
            elif last.error is not None and last.finished is not None:  # the session goes on
                line += f"\n\n**not answered:** {excerpt(last.error, 300)}"
                if last.error.partition(":")[0] in BUDGET_SPENT and not self.current:
                    body = '`{"by": "you", "add_tokens": 50000}` (or `"add_usd"`)'
                    line += f"\n\nRaise its budget for the next message: Send an Update → `{t.RESUME_UPDATE}`, {body}"
        return line

    def status(self, idle_timeout: float, ended: bool, mid_turn: t.MidTurn) -> t.SessionStatus:
        state: t.SessionState = "ended" if ended else "answering" if self.current or self.queue else "waiting"
        if state == "waiting" and self.ending is not None:
            state = "ending"
        deadline = None
        if state == "waiting" and self.idle_since is not None:
            deadline = self.idle_since + timedelta(seconds=idle_timeout)
        return t.SessionStatus(
            messages=self.messages,
            answered=self.answered,
            state=state,
            queued=len(self.queue),
            last=self.exchanges[-1] if self.exchanges else None,
            idle_deadline=deadline,
            compactions=self.compactions,
            mid_turn=mid_turn,
        )

    # ----------------------------------------------------------------------- continue-as-new

    def to_carry(self, execution: str) -> t.SessionCarry:
        """The exchanges this execution answered stay readable here (by query): the carry keeps
        the last few whole and a pointer to this execution for the rest."""
        answered_here = [ex for ex in self.exchanges if ex.execution == execution]
        spans = list(self.spans)
        if answered_here:
            spans.append(t.ExchangeSpan(first=answered_here[0].message, execution=execution))
        return t.SessionCarry(
            messages=self.messages,
            queue=self.queue,
            exchanges=self.exchanges[-KEEP_EXCHANGES:],
            spans=spans,
            recent=self.recent,
            recent_texts=self.recent_texts,
            ending=self.ending,
            compactions=self.compactions,
            idle_since=self.idle_since,
        )
