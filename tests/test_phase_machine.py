"""What status says a run does and when its search attributes are written (machine/phase.py),
without a server."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from durable_agent_runner.machine.phase import COUNTERS_EVERY_SECONDS, Status
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.workflows import types as t

pytestmark = pytest.mark.pure

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def call(call_id: str, name: str, **args: object) -> t.ToolCall:
    return t.ToolCall(call_id=call_id, name=name, arguments=json.dumps(args))


def tools_running(turn: int = 2) -> RunState:
    s = RunState()
    s.agent = t.AgentSpec(name="a")
    s.turn, s.phase = turn, t.Phase.RUNNING_TOOLS
    return s


def test_status_names_each_call_by_what_it_does_and_not_one_that_waits():
    s, status = tools_running(), Status()
    assert status.doing(s, "c1", "checking", call("c1", "send", label="a")) == (
        "turn 2: checking whether send(label=a) needs approval"
    )
    said = status.doing(s, "c2", "running", call("c2", "lookup", q="b"))
    assert said == "turn 2: checking whether send(label=a) needs approval; running lookup(q=b)"
    assert status.doing(s, "c1", None, None) == "turn 2: running lookup(q=b)"
    s.phase = t.Phase.AWAITING_APPROVAL  # a wait for a person has its own words
    assert status.doing(s, "c3", "outside", call("c3", "sign")) is None


def test_a_wait_for_a_person_sets_the_phase_and_its_end_goes_back_to_running_tools():
    s, status = tools_running(), Status()
    s.approvals.request("c1", "send", {}, 2, NOW)
    assert status.waiting(s) == (t.Phase.AWAITING_APPROVAL, "turn 2: waiting for approval of send (c1)")
    s.phase = t.Phase.AWAITING_APPROVAL
    s.approvals.abandon()
    assert status.waiting(s) == (t.Phase.RUNNING_TOOLS, "turn 2: running approved tools")
    s.phase = t.Phase.RUNNING_TOOLS
    assert status.waiting(s) is None  # nothing waits, nothing changes


def test_search_attributes_are_written_on_a_filtered_change_and_the_counters_once_a_turn():
    s, status = tools_running(turn=1), Status()
    first = status.writes(s, t.Phase.STARTING)
    assert first is not None  # never written: the first turn's counters
    names = [u.key.name for u in first]
    assert names[:3] == ["AgentPhase", "AgentTurn", "AgentTotalTokens"]
    assert status.writes(s, t.Phase.CALLING_MODEL) is None  # the same turn, no filtered change
    s.phase = t.Phase.AWAITING_APPROVAL
    assert status.writes(s, t.Phase.RUNNING_TOOLS) is not None  # a person filters on it
    s.turn, s.phase = 2, t.Phase.CALLING_MODEL
    status.clocked(t.ModelReply(message=t.AssistantMessage(content="x"), received_at=NOW))
    assert status.writes(s, t.Phase.RUNNING_TOOLS) is None  # a new turn, but within the reply clock's bound
    later = NOW + timedelta(seconds=COUNTERS_EVERY_SECONDS)
    status.clocked(t.ModelReply(message=t.AssistantMessage(content="y"), received_at=later))
    assert status.writes(s, t.Phase.RUNNING_TOOLS) is not None and status.searched_turn == 2
    status.due.append(t.SA_AGENT.value_set("billing"))  # the agent in charge changed: written next
    written = status.writes(s, t.Phase.RUNNING_TOOLS)
    assert written is not None and written[0].key.name == "AgentName" and status.due == []
