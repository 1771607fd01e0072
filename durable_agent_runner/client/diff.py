"""Where two runs diverge (`AgentClient.diff`, `client.py diff`): a fork and its origin, or any two.

Each run's transcript is read by query (a worker answers it, for finished runs too) and cut into
turns: turn k is what model call k read that the call before it had not (the prompt, tool
results, a message added by a fork or an edit) and the reply it gave. The first turn whose
messages differ is found, with both sides' messages from there. Messages are compared by what
the model reads (role, text, each call's tool and arguments, each result), not by call ids,
which a fork numbers on its own.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from temporalio.client import Client

from durable_agent_runner.client.control import query_run
from durable_agent_runner.client.updates import describe
from durable_agent_runner.machine.bounds import json_object
from durable_agent_runner.workflows import types as t


class DiffSide(BaseModel):
    run_id: str
    messages: int
    model_calls: int
    from_difference: list[dict[str, Any]]  # {"turn": k, "messages": [...]} from the first difference on
    forked_from: str | None = None  # "fork of R before model call N", when it is one


class RunDiff(BaseModel):
    """Two runs compared: `first_difference` is the first turn that differs (None: the same)."""

    a: DiffSide
    b: DiffSide
    same_turns: int
    same_messages: int
    first_difference: int | None


def turns(messages: list[t.Message]) -> list[list[t.Message]]:
    """The transcript cut after each reply; a last part without one is what the next call reads."""
    out: list[list[t.Message]] = [[]]
    for m in messages:
        out[-1].append(m)
        if isinstance(m, t.AssistantMessage):
            out.append([])
    return out if out[-1] else out[:-1]


def key(m: t.Message) -> tuple[object, ...]:
    """What the model reads of a message: equal keys, same message."""
    if isinstance(m, t.AssistantMessage):
        return ("assistant", m.content or "", tuple((c.name, _arguments(c.arguments)) for c in m.tool_calls))
    if isinstance(m, t.ToolMessage):
        return ("tool", m.name, m.content, m.is_error)
    return ("user", m.content)


def _arguments(raw: str) -> str:
    parsed = json_object(raw)
    return raw if parsed is None else json.dumps(parsed, sort_keys=True, ensure_ascii=False)


def first_difference(a: list[list[t.Message]], b: list[list[t.Message]]) -> int | None:
    """The number of the first turn that differs (from 1); None when the transcripts are the same."""
    for number, (x, y) in enumerate(zip(a, b, strict=False), start=1):
        if [key(m) for m in x] != [key(m) for m in y]:
            return number
    return None if len(a) == len(b) else min(len(a), len(b)) + 1


def compare(a_id: str, a: list[t.Message], b_id: str, b: list[t.Message]) -> dict[str, Any]:
    """The diff as data (what --json prints)."""
    ta, tb = turns(a), turns(b)
    first = first_difference(ta, tb)
    same = (first - 1) if first is not None else len(ta)

    def side(run_id: str, parts: list[list[t.Message]], messages: list[t.Message]) -> dict[str, Any]:
        rest = [
            {"turn": n, "messages": [m.model_dump(mode="json", exclude={"approval"}) for m in part]}
            for n, part in enumerate(parts, start=1)
            if first is not None and n >= first
        ]
        replies = sum(isinstance(m, t.AssistantMessage) for m in messages)
        return {"run_id": run_id, "messages": len(messages), "model_calls": replies, "from_difference": rest}

    return {
        "a": side(a_id, ta, a),
        "b": side(b_id, tb, b),
        "same_turns": same,
        "same_messages": sum(len(part) for part in ta[:same]),
        "first_difference": first,
    }


async def transcript_of(client: Client, run_id: str, wait: timedelta) -> tuple[list[t.Message], str | None]:
    """The run's transcript, and what it was forked from (its memo); RunNotFound for an unknown id."""
    handle = client.get_workflow_handle(run_id)
    desc = await describe(handle)  # RunNotFound for an unknown id
    link = (await desc.memo()).get("forked_from")
    fork = None
    if isinstance(link, dict) and "run_id" in link:
        fork = f"fork of {link['run_id']} before model call {link.get('turn')}"
        fork += ", its earlier calls run again" if link.get("live_tools") else ""
    read: t.Transcript = await query_run(
        client, run_id, t.TRANSCRIPT_QUERY, t.TranscriptQuery(), result_type=t.Transcript, wait=wait
    )
    return read.messages, fork


async def diff_runs(
    client: Client, a_id: str, b_id: str, wait: timedelta
) -> tuple[RunDiff, list[t.Message], list[t.Message]]:
    """The diff of two runs, and both transcripts (a renderer shows them from the difference)."""
    a, a_link = await transcript_of(client, a_id, wait)
    b, b_link = await transcript_of(client, b_id, wait)
    found = RunDiff.model_validate(compare(a_id, a, b_id, b))
    found.a.forked_from, found.b.forked_from = a_link, b_link
    return found, a, b
