"""The run's state and the views it serves, without Temporal."""

from datetime import UTC, datetime

from durable_agent_runner.machine.state import RunState
from durable_agent_runner.workflows import types as t

NOW = datetime(2026, 11, 23, tzinfo=UTC)


def team_state() -> RunState:
    s = RunState()
    s.agent = t.AgentSpec(name="triage", team=[t.AgentSpec(name="billing"), t.AgentSpec(name="refunds")])
    s.messages = [t.UserMessage(content="refund me")]
    return s


def test_the_web_ui_details_name_the_agent_in_charge_and_the_handoffs():
    s = team_state()
    assert "**agent:**" not in s.details()
    for turn, (a, b) in enumerate([("triage", "billing"), ("billing", "refunds")], start=1):
        s.handoffs.append(t.HandoffRecord(from_agent=a, to_agent=b, turn=turn, at=NOW, call_id=f"call_{turn}_0"))
        s.current = b
    assert "**agent:** refunds (handed off: triage → billing → refunds)" in s.details()
    assert s.status("run").agent == "refunds" and len(s.status("run").handoffs) == 2


def test_call_ids_stay_unique_across_the_run_even_after_a_filter_drops_messages():
    s = team_state()
    first = t.AssistantMessage(tool_calls=[t.ToolCall(call_id="0", name="f")])
    s.claim_call_ids(first)
    s.messages.append(first)
    s.replace_messages([t.UserMessage(content="refund me")])  # a handoff filter dropped the call
    s.turn = 2
    again = t.AssistantMessage(tool_calls=[t.ToolCall(call_id="0", name="f"), t.ToolCall(call_id="0", name="f")])
    s.claim_call_ids(again)
    assert [c.call_id for c in again.tool_calls] == ["call_2_0", "call_2_1"]
