"""An agent run as a tool, decided here: the child run's id, its input (the frozen member with
the rest of the team, the model's `input`, its share of the budget) and, as it ends, what its
parent's model is told and what its usage adds to the parent's. Pure; the workflow starts the
child workflow and reports how it ended.
"""

from __future__ import annotations

from dataclasses import dataclass

import pydantic

from durable_agent_runner.machine.budget import Ledger
from durable_agent_runner.machine.calls import PlannedCall
from durable_agent_runner.machine.rules import Stop
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.workflows import types as t


@dataclass(frozen=True)
class Child:
    """A child run to start: `child_id` (the parent's id and the call's), its input, and the
    summary the Web UI shows for it."""

    call: PlannedCall
    member: str
    child_id: str
    input: t.RunInput
    summary: str


def plan(
    s: RunState, agent: t.AgentSpec, planned: PlannedCall, args: dict[str, object] | None, run_id: str,
    ledger: Ledger | None,
) -> Child | t.ToolMessage | Stop:  # fmt: skip
    """The child run `planned` asks for, with its share of what the budget has left (held in the
    ledger until it ends); the model's error when its `input` is not a non-empty string; a Stop
    for a member the run did not freeze (impossible by construction: the resolve froze them all)."""
    assert s.agent is not None
    call = planned.call
    member = s.agent.member(planned.target)
    if member is None:
        return Stop(message=f"agent '{planned.target}' is not part of this run", error="UnknownAgent")
    prompt = (args or {}).get("input")
    if not isinstance(prompt, str) or not prompt.strip():
        content = f"error: tool '{call.name}' needs a non-empty string argument 'input'"
        return t.ToolMessage(call_id=call.call_id, name=call.name, content=content, is_error=True)
    team = [a for a in [s.agent.model_copy(update={"team": []}), *s.agent.team] if a.name != member.name]
    child_id = f"{run_id}.{call.call_id}"
    share = ledger.grant(child_id, s.usage) if ledger is not None else None
    frozen = member.model_copy(update={"team": team})
    run = t.RunInput(prompt=prompt, agent=member.name, frozen=frozen, budget=share)
    return Child(planned, member.name, child_id, run, f"{member.name} for {agent.name}: {prompt[:100]}")


def answered(s: RunState, child: Child, result: t.RunResult, ledger: Ledger | None) -> t.ToolMessage:
    """The child's answer is the tool's result; its usage counts here, and its share is no longer held."""
    for name, usage in (result.usage_by_agent or {child.member: result.usage}).items():
        s.add_usage(name, usage)
    if ledger is not None:
        ledger.release(child.child_id)
    call = child.call.call
    return t.ToolMessage(call_id=call.call_id, name=call.name, content=result.output)


def failed(s: RunState, child: Child, why: str, spent: t.ChildUsage | None, ledger: Ledger | None) -> t.ToolMessage:
    """A child that failed or was cancelled: the model is told so; what it spent (`spent`, when
    known) counts here too, and its share is no longer held."""
    for name, usage in (spent.usage_by_agent if spent is not None else {}).items():
        s.add_usage(name, usage)
    if ledger is not None:
        ledger.release(child.child_id)
    call = child.call.call
    content = f"error: agent '{child.member}' (run {child.child_id}) failed: {why}"
    return t.ToolMessage(call_id=call.call_id, name=call.name, content=content, is_error=True)


def usage_in(details: object) -> t.ChildUsage | None:
    """What a failed child spent, from its failure's details (the run's own failures carry its
    ledger); None for a failure raised elsewhere."""
    try:
        return t.ChildUsage.model_validate(details)
    except pydantic.ValidationError:
        return None
