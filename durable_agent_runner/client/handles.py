"""Handles of one run: `RunHandle` (result, status, events, approve, reject, resolve, cancel) and
`SessionHandle`, which adds `send` and `end`. A handle is cheap and makes no call until used; an
unknown run id is RunNotFound at the first call."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, Literal

from pydantic import TypeAdapter, ValidationError
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

from durable_agent_runner.client import updates
from durable_agent_runner.client.errors import DecisionRefused, RunFailed, RunNotFound, run_failed
from durable_agent_runner.client.events import Event, stream
from durable_agent_runner.client.follow import GIVE_UP_AFTER
from durable_agent_runner.client.status import STATUS_NAMES, RunInfo, gather
from durable_agent_runner.config.env import login_name
from durable_agent_runner.workflows import types as t


def default_by() -> str:
    """Who decides when `by` is not given: the login name, as the CLI's `--by`."""
    return login_name("python")


class RunHandle:
    """One run. `output_types` maps an agent's name to its `output_type`, so `result()` returns the
    answering agent's type (after handoffs it may not be the agent the run started with)."""

    def __init__(self, temporal: Client, run_id: str, output_types: Mapping[str, Any] | None = None) -> None:
        self.id = run_id
        self.temporal = temporal
        self.handle: WorkflowHandle[Any, t.RunResult] = temporal.get_workflow_handle(run_id, result_type=t.RunResult)
        self._adapters = {name: TypeAdapter(kind) for name, kind in (output_types or {}).items() if kind is not None}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.id!r})"

    # ------------------------------------------------------------------------------ reading

    async def exists(self) -> WorkflowExecutionStatus | None:
        """The run's Temporal status; RunNotFound if there is no such run."""
        return (await updates.describe(self.handle)).status

    async def outcome(self) -> t.RunResult:
        """Wait for the run to end and return all it recorded: output, usage, turns, handoffs.
        RunFailed (RunCancelled) if it ended without an answer."""
        try:
            return await self.handle.result()
        except WorkflowFailureError as err:
            raise run_failed(self.id, err) from None
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise RunNotFound(self.id) from None
            raise

    async def result(self) -> Any:
        """Wait for the final output: an instance of the answering agent's `output_type` when the
        handle knows it, else the typed output as JSON data, else the answer's text."""
        done = await self.outcome()
        return self.typed(done.agent, done.output, done.output_object)

    def typed(self, agent: str, output: str | None, output_object: Any) -> Any:
        adapter = self._adapters.get(agent) or self._adapters.get("")
        if output_object is None:
            return output
        return adapter.validate_python(output_object) if adapter is not None else output_object

    async def status(self) -> RunInfo:
        """What the run is doing: the facts `client.py status` shows."""
        desc = await updates.describe(self.handle)
        return await gather(self.temporal, self.handle, desc)

    async def events(
        self, since: int = 0, *, give_up_after: int = GIVE_UP_AFTER, check: bool = True
    ) -> AsyncIterator[Event]:
        """The run's story live from event `since` (resume where a reader stopped): `RunEvent`s,
        `TextDelta`s of the reply being streamed, `TextDiscarded`, `Retrying`, `RunClosed`. Ends
        with the run (a session: when it ends). Reads that fail `give_up_after` times in a row
        (about a second each) raise EventsUnavailable."""
        if check:
            await self.exists()
        async for item in stream(self.temporal, self.id, since, give_up_after):
            yield item

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
        """Approve a waiting tool call (it runs), with edited `args` if given (validated by the
        run: refused, nothing is recorded). `always`: later calls of the tool in this run too.
        Sending the same decision again counts once."""
        decision = t.ApprovalDecision(
            call_id=call_id, approve=True, arguments=args, always=always, by=default_by() if by is None else by
        )
        return await self._decide(decision, wait)

    async def reject(
        self, call_id: str, reason: str, *, by: str | None = None, wait: float = updates.DEFAULT_WAIT
    ) -> t.DecisionReceipt:
        """Reject a waiting tool call; the model is told `reason`."""
        decision = t.ApprovalDecision(
            call_id=call_id, approve=False, reason=reason, by=default_by() if by is None else by
        )
        return await self._decide(decision, wait)

    async def resolve(
        self,
        call_id: str,
        action: Literal["rerun", "result", "fail"],
        result: str | None = None,
        reason: str = "",
        *,
        by: str | None = None,
        doubt: int | None = None,
        wait: float = updates.DEFAULT_WAIT,
    ) -> t.ResolveReceipt:
        """Decide a call in doubt (a `once` tool's attempt that ended without a result): `rerun` it,
        give the `result` it returned (JSON text, checked against the bounds: ValueError), or
        `fail` it with a `reason` the model is told. `doubt`: the time the call is in doubt that the
        person saw (default: now). DecisionRefused unless the call is in doubt; a repeat counts once."""
        try:
            decision = t.ResolveCall(
                call_id=call_id, action=action, result=result, reason=reason, by=default_by() if by is None else by
            )
        except ValidationError as err:
            raise ValueError(f"resolve: {err.errors(include_url=False)[0]['msg']}") from None
        decision.doubt = doubt
        if await self.exists() != WorkflowExecutionStatus.RUNNING:
            raise DecisionRefused(f"run {self.id} has already finished: no call of it is in doubt")
        return await updates.resolve(self.handle, decision, wait)

    async def _decide(self, decision: t.ApprovalDecision, wait: float) -> t.DecisionReceipt:
        if await self.exists() != WorkflowExecutionStatus.RUNNING:
            raise DecisionRefused(f"run {self.id} has already finished: no call of it is pending")
        return await updates.decide(self.handle, decision, wait)

    async def cancel(self) -> None:
        """Ask the run to stop: it answers the calls in flight as cancelled and ends cancelled
        (`result()` then raises RunCancelled). DecisionRefused if it has already ended."""
        status = await self.exists()
        if status != WorkflowExecutionStatus.RUNNING:
            how = STATUS_NAMES.get(status, "unknown") if status else "?"
            raise DecisionRefused(f"run {self.id} has already ended ({how})")
        await self.handle.cancel()


class SessionHandle(RunHandle):
    """A session: a run that answers message after message until it is ended."""

    async def send(
        self, text: str, *, by: str | None = None, message_id: str | None = None, wait: float = updates.DEFAULT_WAIT
    ) -> t.MessageReceipt:
        """Send a message; the receipt holds its number K. Sent again with the same `message_id`
        (say after NoWorkerAnswered), it counts once."""
        if len(text) > t.MAX_MESSAGE_CHARS:
            raise ValueError(
                f"the message is longer than {t.MAX_MESSAGE_CHARS:,} characters: give large inputs to a tool"
            )
        return await updates.send_message(
            self.temporal, self.id, text, by=default_by() if by is None else by, message_id=message_id, wait=wait
        )

    async def answer(self, message: int) -> Any:
        """Message K's answer once it is given (typed as `result()` is); RunFailed if answering
        it failed (the session failed with it), AgentRunError if the session ended first."""
        exchange = await self.exchange(message)
        if exchange.error is not None:
            raise RunFailed(self.id, "failed", "MessageFailed", f"message {message}: {exchange.error}")
        return self.typed("", exchange.output, exchange.output_object)

    async def exchange(self, message: int) -> t.Exchange:
        """Message K's whole exchange (prompt, answer, usage, turns) once it is answered or failed."""
        await self.exists()
        return await updates.wait_answer(self.temporal, self.id, message)

    async def ask(self, text: str, *, by: str | None = None, wait: float = updates.DEFAULT_WAIT) -> Any:
        """Send a message and wait for its answer."""
        receipt = await self.send(text, by=by, wait=wait)
        return await self.answer(receipt.message)

    async def end(self, reason: str = "", *, by: str | None = None, wait: float = updates.DEFAULT_WAIT) -> t.EndReceipt:
        """End the session once the messages it has taken are answered; ending it again counts once."""
        return await updates.end_session(
            self.temporal, self.id, by=default_by() if by is None else by, reason=reason, wait=wait
        )
