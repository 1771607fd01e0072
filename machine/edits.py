"""Edits to a paused run: each one checked, then applied, or refused with a reason and nothing
changed. Pure: the update validator runs `apply` on a copy to refuse, the handler runs it for real.

The transcript stays one the model can read: a tool result is never separated from its call, and
the calls the run is about to make (paused before tools) can be changed or dropped, not deleted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from durable_agent_runner.machine import schema
from durable_agent_runner.workflows import types as t

EXCERPT = 60


class EditRefused(ValueError):
    def __init__(self, message: str, kind: str = "EditRefused") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class Editable:
    """What an edit may change, copied from the run's state."""

    messages: list[t.Message]
    first: t.AgentSpec  # the run's first agent, holding the frozen team
    current: str  # the agent in charge
    pending: list[t.ToolCall] = field(default_factory=list)  # paused before tools: the calls about to run
    dropped: dict[str, str] = field(default_factory=dict)  # call id → who dropped it


def apply(edit: t.Edit, state: Editable) -> str:
    """Applies `edit` to `state` in place and says what it did, or raises EditRefused."""
    messages = state.messages
    if edit.op in ("text", "drop"):
        index = _index(edit, len(messages))
        message = messages[index]
        if edit.op == "text":
            if edit.text is None or not edit.text.strip():
                raise EditRefused("--text needs the new text (not empty)")
            messages[index] = message.model_copy(update={"content": edit.text})
            return f"{edit.by} replaced the text of item {index} ({message.role}): {_cut(edit.text)}"
        return _drop(state, index, edit.by)
    if edit.op == "insert":
        if edit.index is None or not 0 <= edit.index <= len(messages):
            raise EditRefused(f"insert position must be 0-{len(messages)} (the transcript has {len(messages)} items)")
        if edit.text is None or not edit.text.strip() or edit.role is None:
            raise EditRefused("insert needs a role (user or assistant) and a non-empty text")
        if edit.index < len(messages) and isinstance(messages[edit.index], t.ToolMessage):
            raise EditRefused(f"item {edit.index} is a tool result: nothing may come between a call and its results")
        if edit.index == len(messages) and state.pending:
            raise EditRefused("the pending tool calls' results come next: insert before their call instead")
        new: t.Message = (
            t.UserMessage(content=edit.text) if edit.role == "user" else t.AssistantMessage(content=edit.text)
        )
        messages.insert(edit.index, new)
        article = "an" if edit.role == "assistant" else "a"
        return f"{edit.by} inserted {article} {edit.role} message at item {edit.index}: {_cut(edit.text)}"
    if edit.op in ("args", "drop_call"):
        call = _pending(state, edit.call_id)
        if edit.op == "drop_call":
            state.dropped[call.call_id] = edit.by
            return f"{edit.by} dropped the pending call {call.call_id} ({call.name})"
        return _arguments(state, call, edit)
    return _agent(state, edit)


def before_model(breakpoints: t.Breakpoints | None, turn: int) -> str | None:
    """Why the run pauses before model call `turn`, if its breakpoints say so."""
    if breakpoints is None:
        return None
    if breakpoints.every_turn:
        return "a breakpoint before every model call"
    return f"a breakpoint at turn {turn}" if turn in breakpoints.at_turns else None


def before_tools(breakpoints: t.Breakpoints | None, calls: list[t.ToolCall]) -> str | None:
    """Why the run pauses before running `calls`, if its breakpoints say so."""
    if breakpoints is None or not calls:
        return None
    if breakpoints.before_tools:
        return "a breakpoint before tool calls"
    named = sorted({c.name for c in calls} & set(breakpoints.tools))
    return f"a breakpoint before {', '.join(named)}" if named else None


def unknown_break_tools(breakpoints: t.Breakpoints | None, agent: t.AgentSpec) -> str | None:
    """Why a run cannot start: a breakpoint before a tool that no agent of its frozen team can call
    (a mistyped name would never pause, and the call it meant would run unpaused). None: all known."""
    if breakpoints is None or not breakpoints.tools:
        return None
    team = (agent, *agent.team)
    names = sorted({s.name for a in team for s in a.tools} | {h.tool_name for a in team for h in a.handoffs})
    unknown = [name for name in breakpoints.tools if name not in names]
    if not unknown:
        return None
    known = (", ".join(names[:20]) + (", …" if len(names) > 20 else "")) if names else "they have none"
    said = ", ".join(repr(name[:100]) for name in unknown[:5]) + (", …" if len(unknown) > 5 else "")
    return f"a breakpoint before {said}: no agent of this run has a tool of that name ({known})"


def _index(edit: t.Edit, n: int) -> int:
    if edit.index is None or not 0 <= edit.index < n:
        raise EditRefused(f"no item {edit.index}: the transcript has items 0-{n - 1}")
    return edit.index


def _drop(state: Editable, index: int, by: str) -> str:
    messages = state.messages
    message = messages[index]
    if isinstance(message, t.ToolMessage):
        owner = next(
            (i for i in range(index - 1, -1, -1) if isinstance(messages[i], t.AssistantMessage)), None
        )  # fmt: skip
        raise EditRefused(f"item {index} is a tool result: drop its call's message (item {owner}) to drop both")
    gone = [index]
    if isinstance(message, t.AssistantMessage) and message.tool_calls:
        if index == len(messages) - 1 and state.pending:
            raise EditRefused(f"item {index} holds the pending calls: drop them with --drop-call CALL_ID")
        ids = {c.call_id for c in message.tool_calls}
        gone += [i for i, m in enumerate(messages) if isinstance(m, t.ToolMessage) and m.call_id in ids]
    if len(gone) == len(messages):
        raise EditRefused("that would leave the transcript empty")
    for i in sorted(gone, reverse=True):
        del messages[i]
    also = f" and its {len(gone) - 1} tool result(s)" if len(gone) > 1 else ""
    return f"{by} dropped item {index} ({message.role}){also}"


def _pending(state: Editable, call_id: str | None) -> t.ToolCall:
    call = next((c for c in state.pending if c.call_id == call_id), None)
    if call is None:
        ids = ", ".join(c.call_id for c in state.pending) or "none (the run is not paused before tools)"
        raise EditRefused(f"no pending call {call_id}; pending: {ids}", "UnknownCall")
    if call.call_id in state.dropped:
        raise EditRefused(f"call {call_id} was dropped by {state.dropped[call.call_id]}", "UnknownCall")
    return call


def _arguments(state: Editable, call: t.ToolCall, edit: t.Edit) -> str:
    if edit.arguments is None:
        raise EditRefused("--args needs the arguments as a JSON object")
    agent = state.first.member(state.current)
    spec = agent.tool(call.name) if agent else None
    if spec is None:
        raise EditRefused(f"call {call.call_id} is to '{call.name}', which is not a tool of {state.current}")
    problems = schema.check(edit.arguments, spec.parameters)
    if problems:
        raise EditRefused(f"arguments for {call.name} are invalid: " + "; ".join(problems), "InvalidArguments")
    before = call.args
    text = json.dumps(edit.arguments, ensure_ascii=False)
    # The call itself changes (the assistant message holds it), so the model later reads what ran.
    for message in state.messages:
        if isinstance(message, t.AssistantMessage):
            for c in message.tool_calls:
                if c.call_id == call.call_id:
                    c.arguments = text
    call.arguments = text
    was = _cut(json.dumps(before, ensure_ascii=False))
    return f"{edit.by} changed the arguments of {call.call_id} ({call.name}) from {was} to {_cut(text)}"


def _agent(state: Editable, edit: t.Edit) -> str:
    name = edit.agent or ""
    if state.first.member(name) is None:
        agents = ", ".join([state.first.name, *(a.name for a in state.first.team)])
        raise EditRefused(f"no agent '{name}' in this run; it froze: {agents}", "UnknownAgent")
    live = [c for c in state.pending if c.call_id not in state.dropped]
    if live:
        ids = ", ".join(c.call_id for c in live)
        raise EditRefused(f"the pending calls ({ids}) belong to {state.current}: drop them before switching agents")
    before, state.current = state.current, name
    return f"{edit.by} switched the agent in charge from {before} to {name}"


def _cut(text: str) -> str:
    return text if len(text) <= EXCERPT else text[: EXCERPT - 1] + "…"
