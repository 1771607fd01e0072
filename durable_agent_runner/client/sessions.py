"""The handle of a session, `SessionHandle`: a run that answers message after message until it is
ended. It adds `send`, `ask`, `answer`, `exchange` and `end` to what a `RunHandle` does."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from durable_agent_runner.client import checks, stuck, updates
from durable_agent_runner.client.errors import RunFailed, StillRunning
from durable_agent_runner.client.handles import RunHandle
from durable_agent_runner.client.status import WaitingFor, waiting_for
from durable_agent_runner.workflows import types as t

ANSWER_WAIT = checks.MAX_WAIT  # seconds an answer is waited for unless told: the longest wait the client has


class NotAnswered(StillRunning):
    """A session's message had no answer within the wait given. `message`: its number;
    `waiting_for`: what the run waits for a person on (a call's approval, a resume), if anything."""

    def __init__(
        self,
        run_id: str,
        message: int,
        waited: float,
        waits: Sequence[WaitingFor],
        phase: str | None,
        unserved: Sequence[str] = (),
    ) -> None:
        super().__init__(run_id, waits, phase, unserved)
        why = (
            "; it waits for a person: " + "; ".join(str(w) for w in waits)
            if waits
            else f" (the run is {phase})"
            if phase
            else ""
        )
        why += "".join(f"; {u}" for u in unserved)
        self.args = (f"message {message} of session {run_id} has no answer after {waited:g}s{why}",)
        self.message = message


class SessionHandle(RunHandle):
    """A session: a run that answers message after message until it is ended."""

    async def send(
        self, text: str, *, by: str | None = None, message_id: str | None = None, wait: float = updates.DEFAULT_WAIT
    ) -> t.MessageReceipt:
        """Send a message; the receipt holds its number K. Sent again with the same `message_id`
        (say after NoWorkerAnswered), it counts once."""
        checks.prompt(text, "text")
        if len(text) > t.MAX_MESSAGE_CHARS:
            raise checks.BadArgument(
                "text", f"the message is longer than {t.MAX_MESSAGE_CHARS:,} characters: give large inputs to a tool"
            )
        if message_id is not None:
            checks.name(message_id, "message_id")
        return await updates.send_message(
            self.temporal, self.id, text, by=checks.by_or_default(by), message_id=message_id, wait=checks.seconds(wait)
        )

    async def answer(self, message: int, *, wait: float = ANSWER_WAIT) -> Any:
        """Message K's answer once it is given (typed as `result()` is), waiting at most `wait`
        seconds (then NotAnswered, a StillRunning); RunFailed if answering it failed, its
        `error_type` the failure's (`TokenBudgetExceeded`: raise it with `resume(add_tokens=N)`;
        the session goes on), AgentRunError if the session ended first."""
        exchange = await self.exchange(message, wait=wait)
        if exchange.error is not None:  # "TokenBudgetExceeded: …": its kind is the error's type
            kind, _, why = exchange.error.partition(": ")
            error_type, why = (kind, why) if why and kind.isidentifier() else ("MessageFailed", exchange.error)
            raise RunFailed(self.id, "failed", error_type, f"message {message}: {why}")
        return self.typed("", exchange.output, exchange.output_object)

    async def exchange(
        self, message: int, on_gap: Callable[[str, int], None] | None = None, *, wait: float = ANSWER_WAIT
    ) -> t.Exchange:
        """Message K's whole exchange (prompt, answer, usage, turns) once it is answered or failed,
        waiting at most `wait` seconds (then NotAnswered: what the run waits for, if a person).
        Reads no worker answers are asked again, after `on_gap(what Temporal said, in a row)`."""
        checks.whole(message, "message", 1, 10**9)
        bound = checks.seconds(wait)
        await self.exists()
        try:
            async with asyncio.timeout(bound):
                return await updates.wait_answer(self.temporal, self.id, message, on_gap)
        except TimeoutError:
            live, unserved = await asyncio.gather(self.live(), stuck.unserved_words(self.temporal, self.handle))
            waits = [w for w in waiting_for(self.id, live) if w.kind != "message"] if live else []
            raise NotAnswered(self.id, message, bound, waits, live.phase if live else None, unserved) from None

    async def exchange_now(self, message: int) -> t.Exchange | None:
        """Message K's exchange as it stands now (None: not taken yet); AgentRunError if the
        session has fewer than K messages."""
        checks.whole(message, "message", 1, 10**9)
        await self.exists()
        return await updates.get_exchange(self.temporal, self.id, message)

    async def ask(
        self, text: str, *, by: str | None = None, wait: float = updates.DEFAULT_WAIT, answer_wait: float = ANSWER_WAIT
    ) -> Any:
        """Send a message (a worker takes it within `wait` seconds) and wait for its answer (at
        most `answer_wait` seconds: NotAnswered)."""
        checks.seconds(answer_wait, "answer_wait")
        receipt = await self.send(text, by=by, wait=wait)
        return await self.answer(receipt.message, wait=answer_wait)

    async def end(self, reason: str = "", *, by: str | None = None, wait: float = updates.DEFAULT_WAIT) -> t.EndReceipt:
        """End the session once the messages it has taken are answered; ending it again counts once."""
        checks.string(reason, "reason")
        return await updates.end_session(
            self.temporal, self.id, by=checks.by_or_default(by), reason=reason, wait=checks.seconds(wait)
        )
