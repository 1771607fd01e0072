"""The worker's memory of recent transcripts, so most model calls skip reading their context.

A model call needs the run's messages. The workflow is the source of truth and always answers
the `agent.model_context` query, but a query is a round trip through the server (~15 ms here).
The worker that made a run's last reply and ran its tools already holds every message of the
next request: the messages it sent, the reply, and the tool results. It rebuilds them and checks
them against the hash the workflow puts in the activity's input (`ModelCallInput.digest`); only
an exact match is used. Anything else (another worker ran a tool, a person edited arguments, a
restart) falls back to the query. Bounded: the most recent runs only.

Runs are keyed by workflow id, not run id: a run that continues as new carries its transcript
on, so the new execution's first call finds it here too (the hash decides, as always).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from durable_agent_runner.workflows.types import (
    AgentSpec,
    AssistantMessage,
    Message,
    ToolMessage,
    ToolResult,
    chain_digest,
)

MAX_RUNS = 256


@dataclass
class _Entry:
    agent: AgentSpec
    messages: list[Message]
    digest: str


class ContextCache:
    def __init__(self, max_runs: int = MAX_RUNS) -> None:
        self._runs: OrderedDict[str, _Entry] = OrderedDict()
        self._tools: dict[tuple[str, str], ToolMessage] = {}
        self._max = max_runs
        self.hits = 0
        self.misses = 0

    def remember(
        self, run: str, agent: AgentSpec, messages: list[Message], digest: str, reply: AssistantMessage
    ) -> None:
        """After a model call: the context it sent (whose hash the workflow gave) plus its reply.
        Only the reply is hashed here, so a turn's cost does not grow with the transcript."""
        digest = digest or digest_of(messages)  # "": a call scheduled by code older than the hash
        self._runs[run] = _Entry(agent, [*messages, reply], chain_digest(digest, reply))
        self._runs.move_to_end(run)
        self._evict()

    def _evict(self) -> None:
        while len(self._runs) > self._max:
            gone, _ = self._runs.popitem(last=False)
            self._tools = {k: v for k, v in self._tools.items() if k[0] != gone}

    def seed(self, run: str, agent: AgentSpec, messages: list[Message]) -> None:
        """A run's context before its first model call (its agent, resolved here, and its
        prompt): the call finds it like any other, if the workflow's hash agrees."""
        self._runs[run] = _Entry(agent, list(messages), digest_of(messages))
        self._runs.move_to_end(run)
        self._evict()

    def remember_tool(self, run: str, result: ToolResult) -> None:
        if run in self._runs:
            self._tools[(run, result.call_id)] = tool_message(result)

    def lookup(self, run: str, upto: int, digest: str) -> tuple[AgentSpec, list[Message]] | None:
        found = self._lookup(run, upto, digest)
        if found is None:
            self.misses += 1
        else:
            self.hits += 1
        return found

    def _lookup(self, run: str, upto: int, digest: str) -> tuple[AgentSpec, list[Message]] | None:
        entry = self._runs.get(run)
        if entry is None or not digest:
            return None
        last = entry.messages[-1]
        calls = last.tool_calls if isinstance(last, AssistantMessage) else []
        results = [self._tools.get((run, c.call_id)) for c in calls]
        if any(r is None for r in results) or len(entry.messages) + len(results) != upto:
            return None
        value = entry.digest
        extra = [r for r in results if r is not None]
        for message in extra:
            value = chain_digest(value, message)
        if value != digest:
            return None
        for call in calls:
            del self._tools[(run, call.call_id)]
        return entry.agent, [*entry.messages, *extra]

    def after_tool(self, run: str, upto: int, tool: ToolMessage) -> tuple[AgentSpec, list[Message], str] | None:
        """For a model call made ahead by a tool's activity (activities/ahead.py): the run's
        context with `tool`'s result added and its hash, when this worker holds messages[:upto]
        and they end in a reply whose only call is that tool's; else None (read by query)."""
        entry = self._runs.get(run)
        if entry is None or len(entry.messages) != upto:
            self.misses += 1
            return None
        last = entry.messages[-1]
        if not isinstance(last, AssistantMessage) or [c.call_id for c in last.tool_calls] != [tool.call_id]:
            self.misses += 1
            return None
        self.hits += 1
        self._tools.pop((run, tool.call_id), None)
        return entry.agent, [*entry.messages, tool], chain_digest(entry.digest, tool)


def tool_message(result: ToolResult) -> ToolMessage:
    """A tool's result as the run appends it to the transcript (so its hash agrees)."""
    return ToolMessage(call_id=result.call_id, name=result.tool, content=result.output, is_error=result.is_error)


def digest_of(messages: list[Message]) -> str:
    """The transcript hash of `messages`, as the workflow chains it (RunState.digest)."""
    digest = ""
    for message in messages:
        digest = chain_digest(digest, message)
    return digest
