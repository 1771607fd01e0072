"""What the next model call sees of the transcript: a session's compaction, a handoff's filter.
Pure, tested without a server.

Before each model call of a session, `plan` checks the transcript against the agent's memory
budget (`MemoryPolicy`): its size as JSON, and the input tokens the last model call reported.
Over budget, everything before the last `keep_exchanges` exchanges and the one in progress is
compacted into one message: the model's summary of it, or a note that it was dropped. Cuts fall
only where an exchange begins, never between a tool call and its result, never inside the answer
in progress.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel

from durable_agent_runner.machine.state import RunState
from durable_agent_runner.workflows import types as t


class Compaction(BaseModel):
    upto: int  # messages[:upto] are compacted
    strategy: Literal["summarize", "trim"]
    reason: str  # which budget, in numbers


def transcript_bytes(messages: list[t.Message]) -> int:
    return sum(len(m.model_dump_json(exclude={"approval"})) for m in messages)


def plan(messages: list[t.Message], policy: t.MemoryPolicy, last_input_tokens: int = 0) -> Compaction | None:
    size = transcript_bytes(messages)
    reasons = []
    if size >= policy.budget_bytes:
        reasons.append(f"transcript {size:,} bytes ≥ budget {policy.budget_bytes:,}")
    if policy.budget_tokens is not None and last_input_tokens >= policy.budget_tokens:
        reasons.append(f"last call read {last_input_tokens:,} tokens ≥ budget {policy.budget_tokens:,}")
    if not reasons:
        return None
    starts = exchange_starts(messages)
    keep = policy.keep_exchanges + 1  # and the exchange in progress
    if len(starts) <= keep:
        return None
    upto = starts[-keep]
    if all(isinstance(m, t.UserMessage) and m.summary_of for m in messages[:upto]):
        return None  # nothing before the kept exchanges but an earlier summary
    return Compaction(upto=upto, strategy=policy.strategy, reason="; ".join(reasons))


def exchange_starts(messages: list[t.Message]) -> list[int]:
    """Where exchanges begin: a user message first, after a final answer (an assistant message
    without calls) or after a summary. One after tool results joined the answer in progress
    (a steering message), so it is no place to cut."""
    starts = []
    for i, m in enumerate(messages):
        if not isinstance(m, t.UserMessage) or m.summary_of:
            continue
        before = messages[i - 1] if i else None
        answered = isinstance(before, t.AssistantMessage) and not before.tool_calls
        if before is None or answered or (isinstance(before, t.UserMessage) and before.summary_of):
            starts.append(i)
    return starts


def compacted(messages: list[t.Message], upto: int, summary: str | None) -> list[t.Message]:
    """The transcript with messages[:upto] replaced by one message: the summary, or (None) a
    note that they were dropped. The replaced messages stay in history (`client.py export`)."""
    stands_for = sum(m.summary_of if isinstance(m, t.UserMessage) and m.summary_of else 1 for m in messages[:upto])
    if summary is None:
        text = f"[{stands_for} earlier messages of this conversation were dropped to keep it within its memory budget]"
    else:
        text = f"Summary of our conversation so far ({stands_for} earlier messages):\n{summary}"
    return [t.UserMessage(content=text, summary_of=stands_for), *messages[upto:]]


def apply(s: RunState, plan: Compaction, size: int, result: t.CompactResult | str | None) -> tuple[str, str]:
    """The planned compaction done to the run: messages[:plan.upto] (`size` bytes) replaced by the
    model's summary (`result`; its usage counts), or by a note that they were dropped (no summary
    asked, or why it failed). The event's text and detail."""
    session, agent = s.session, s.agent_now
    assert session is not None
    summary, how = None, f"dropped {plan.upto} earlier messages ({size:,} bytes)"
    if isinstance(result, str):
        how += f": summarizing failed ({result})"
    elif result is not None:
        summary = result.summary
        s.add_usage(agent.name, result.usage, agent.model)
        how = f"summarized {plan.upto} earlier messages ({size:,} bytes) in {len(summary):,} characters"
    s.replace_messages(compacted(s.messages, plan.upto, summary))
    s.last_input_tokens = 0
    session.compactions += 1
    return summary or "", f"{how}; {plan.reason}"


# ---------------------------------------------------------------------------- handoff filters


def _remove_tools(messages: list[t.Message]) -> list[t.Message]:
    kept: list[t.Message] = []
    for m in messages:
        if isinstance(m, t.ToolMessage):
            continue
        if isinstance(m, t.AssistantMessage) and m.tool_calls:
            if not m.content:
                continue
            m = t.AssistantMessage(content=m.content)
        kept.append(m)
    return kept


def _last_user_message(messages: list[t.Message]) -> list[t.Message]:
    users: list[t.Message] = [m for m in messages if isinstance(m, t.UserMessage)]
    return users[-1:]


# Built-in filters a handoff may name: what the next agent sees of the conversation so far.
HANDOFF_FILTERS: dict[str, Callable[[list[t.Message]], list[t.Message]]] = {
    "remove_tools": _remove_tools,
    "last_user_message": _last_user_message,
}
