"""A handoff, a compaction and a child run as the machine does them to the run
(machine/handoff.py, machine/memory.apply, machine/child.py), without a server: who takes over,
what they see, what is recorded, what a child gets and what it spent."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from durable_agent_runner.machine import call as call_machine
from durable_agent_runner.machine import child, handoff, memory, requests
from durable_agent_runner.machine.budget import Ledger
from durable_agent_runner.machine.call_types import Ctx, RunTool
from durable_agent_runner.machine.calls import PlannedCall
from durable_agent_runner.machine.rules import Stop
from durable_agent_runner.machine.session import SessionState
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.workflows import types as t

pytestmark = pytest.mark.pure

NOW = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)


def team(input_filter: str | None) -> RunState:
    billing = t.AgentSpec(name="billing", version="v2")
    triage = t.AgentSpec(
        name="triage",
        handoffs=[t.HandoffSpec(agent="billing", tool_name="transfer_to_billing", input_filter=input_filter)],
        team=[billing],
    )
    s = RunState()
    s.agent, s.turn = triage, 2
    s.messages = [
        t.UserMessage(content="refund please"),
        t.AssistantMessage(content="looking", tool_calls=[t.ToolCall(call_id="c1", name="lookup", arguments="{}")]),
        t.ToolMessage(call_id="c1", name="lookup", content="order 7"),
        t.UserMessage(content="it was order 7"),
    ]
    return s


def transfer(target: str = "billing") -> PlannedCall:
    call = t.ToolCall(call_id="h1", name=f"transfer_to_{target}", arguments="{}")
    return PlannedCall(call=call, action="handoff", target=target)


def test_a_handoff_puts_the_target_in_charge_with_the_whole_conversation_and_records_it():
    s = team(None)
    planned = handoff.plan(s, s.agent_now, transfer())
    assert isinstance(planned, handoff.Handoff) and planned.hook is None and planned.target.version == "v2"
    record = handoff.handed_off(s, s.agent_now, planned, None, NOW)
    assert isinstance(record, t.HandoffRecord)
    assert (record.from_agent, record.to_agent, record.turn, record.call_id) == ("triage", "billing", 2, "h1")
    assert s.current == "billing" and s.agent_now.name == "billing" and s.handoffs == [record]
    assert len(s.messages) == 4  # no filter: all of it


def test_a_built_in_filter_applies_at_once_and_a_filter_function_applies_its_messages():
    s = team("remove_tools")
    planned = handoff.plan(s, s.agent_now, transfer())
    assert isinstance(planned, handoff.Handoff) and planned.hook is None
    assert [type(m).__name__ for m in s.messages] == ["UserMessage", "AssistantMessage", "UserMessage"]
    assert not any(isinstance(m, t.AssistantMessage) and m.tool_calls for m in s.messages)

    s = team("hook:only_last")
    planned = handoff.plan(s, s.agent_now, transfer())
    assert isinstance(planned, handoff.Handoff) and planned.hook == "only_last"
    assert len(s.messages) == 4  # the function's messages are not known yet
    handoff.handed_off(s, s.agent_now, planned, [t.UserMessage(content="it was order 7")], NOW)
    assert [m.content for m in s.messages] == ["it was order 7"]


def test_an_unknown_target_or_a_filter_function_with_no_messages_fails_the_run_and_changes_nothing():
    s = team("hook:broken")
    unknown = handoff.plan(s, s.agent_now, transfer("legal"))
    assert unknown == Stop(message="cannot hand off to 'legal': not part of this run", error="UnknownAgent")
    planned = handoff.plan(s, s.agent_now, transfer())
    assert isinstance(planned, handoff.Handoff)
    failed = handoff.handed_off(s, s.agent_now, planned, None, NOW)
    assert isinstance(failed, Stop) and failed.error == "AgentHookFailed" and "'broken'" in failed.message
    assert s.current is None and s.handoffs == [] and len(s.messages) == 4


def session_run() -> RunState:
    s = RunState()
    s.agent = t.AgentSpec(name="helpdesk", model="demo")
    s.session = SessionState()
    s.messages = [t.UserMessage(content=f"message {i}") for i in range(6)]
    s.last_input_tokens = 9_000
    return s


def test_a_summary_replaces_the_head_counts_its_usage_and_says_what_it_did():
    s = session_run()
    plan = memory.Compaction(upto=4, strategy="summarize", reason="transcript 9,000 bytes ≥ budget 8,000")
    usage = t.Usage(input_tokens=100, output_tokens=20)
    text, detail = memory.apply(s, plan, 9_000, t.CompactResult(summary="They asked four things.", usage=usage))
    assert text == "They asked four things."
    assert (
        detail == "summarized 4 earlier messages (9,000 bytes) in 23 characters; transcript 9,000 bytes ≥ budget 8,000"
    )
    assert s.messages[0].content.endswith("They asked four things.") and len(s.messages) == 3
    assert s.usage.total_tokens == 120 and s.usage_by_agent["helpdesk"].total_tokens == 120
    assert s.last_input_tokens == 0 and s.session is not None and s.session.compactions == 1


FAILED = ("the model timed out", ": summarizing failed (the model timed out)")


@pytest.mark.parametrize(("result", "says"), [(None, ""), FAILED])
def test_a_trim_or_a_failed_summary_drops_the_head_with_a_note(result, says):
    s = session_run()
    plan = memory.Compaction(upto=4, strategy="trim", reason="r")
    text, detail = memory.apply(s, plan, 1_234, result)
    assert text == "" and detail == f"dropped 4 earlier messages (1,234 bytes){says}; r"
    assert "4 earlier messages of this conversation were dropped" in s.messages[0].content
    assert s.usage.total_tokens == 0 and s.session is not None and s.session.compactions == 1


# ------------------------------------------------------------------------------ child runs


def parent(budget: int | None = 1_000) -> tuple[RunState, Ledger | None]:
    researcher = t.AgentSpec(name="researcher", version="v3")
    lead = t.AgentSpec(name="lead", token_budget=budget, team=[researcher])
    s = RunState()
    s.agent = lead
    s.usage = t.Usage(input_tokens=300, output_tokens=100)
    return s, Ledger.start(lead, None, child=False)


def ask(target: str = "researcher", name: str = "research") -> PlannedCall:
    return PlannedCall(call=t.ToolCall(call_id="k1", name=name, arguments="{}"), action="child", target=target)


def test_a_child_run_gets_its_member_frozen_with_the_rest_of_the_team_and_a_share_of_what_is_left():
    s, ledger = parent()
    c = child.plan(s, s.agent_now, ask(), {"input": "find the refund policy"}, "run-9", ledger)
    assert isinstance(c, child.Child)
    assert c.child_id == "run-9.k1" and c.summary == "researcher for lead: find the refund policy"
    assert c.input.agent == "researcher" and c.input.prompt == "find the refund policy"
    assert c.input.frozen is not None and [a.name for a in c.input.frozen.team] == ["lead"]  # never itself
    assert c.input.budget is not None and c.input.budget.tokens == 600  # 1,000 less the 400 spent
    assert ledger is not None and "run-9.k1" in ledger.grants


def test_a_child_answer_or_failure_counts_its_usage_here_and_frees_its_share():
    s, ledger = parent()
    c = child.plan(s, s.agent_now, ask(), {"input": "go"}, "run-9", ledger)
    assert isinstance(c, child.Child) and ledger is not None
    result = t.RunResult(
        run_id="run-9.k1",
        agent="researcher",
        output="30 days",
        turns=1,
        usage=t.Usage(input_tokens=50, output_tokens=10),
    )
    message = child.answered(s, c, result, ledger)
    assert (message.content, message.is_error) == ("30 days", False)
    assert s.usage_by_agent["researcher"].total_tokens == 60 and ledger.grants == {}

    s, ledger = parent()
    c = child.plan(s, s.agent_now, ask(), {"input": "go"}, "run-9", ledger)
    assert isinstance(c, child.Child)
    spent = child.usage_in({"child_id": "run-9.k1", "usage_by_agent": {"researcher": {"input_tokens": 70}}})
    message = child.failed(s, c, "token budget spent", spent, ledger)
    assert message.is_error and message.content == "error: agent 'researcher' (run run-9.k1) failed: token budget spent"
    assert s.usage_by_agent["researcher"].input_tokens == 70 and ledger is not None and ledger.grants == {}
    assert child.usage_in("a failure raised elsewhere") is None  # nothing counted
    other = child.usage_in({"not": "a ledger"})
    assert other is not None and other.usage_by_agent == {}


@pytest.mark.parametrize("args", [None, {}, {"input": ""}, {"input": "  "}, {"input": 3}])
def test_a_child_call_without_a_string_input_is_the_models_error_and_starts_nothing(args):
    s, ledger = parent()
    message = child.plan(s, s.agent_now, ask(), args, "run-9", ledger)
    assert isinstance(message, t.ToolMessage) and message.is_error and "'input'" in message.content
    assert ledger is not None and ledger.grants == {}


def test_a_child_of_an_agent_the_run_did_not_freeze_fails_the_run():
    s, ledger = parent(None)
    assert ledger is None
    stop = child.plan(s, s.agent_now, ask("legal"), {"input": "go"}, "run-9", None)
    assert stop == Stop(message="agent 'legal' is not part of this run", error="UnknownAgent")


# --------------------------------------------------------------------------- activity inputs


def a_tool_call(s: RunState, agent: t.AgentSpec, arguments: str = '{"q": "tides"}') -> tuple[Any, Any]:
    planned = PlannedCall(call=t.ToolCall(call_id="c7", name="lookup", arguments=arguments), action="tool")
    moved = call_machine.start(planned, s.turn, Ctx(agent=agent, now=NOW, run_id="run-1"))
    (step,) = moved.steps
    assert isinstance(step, RunTool)
    return moved.call, step


def test_a_tool_run_makes_the_next_model_call_only_as_the_model_asked_and_then_holds_it_in_its_bounds():
    agent = t.AgentSpec(name="a", model="demo", model_timeout_seconds=60, tools=[t.ToolSpec(name="lookup")])
    s = RunState()
    s.agent, s.turn = agent, 3
    s.messages = [t.UserMessage(content="hi")]
    c, step = a_tool_call(s, agent)
    plain = requests.tool_run(s, agent, c, step, None)
    assert plain.request.args == {"q": "tides"} and plain.request.arguments == "" and plain.request.then is None
    assert plain.summary == "turn 3 · tool: lookup(q=tides)" and not plain.ahead
    spec = agent.tool("lookup")
    assert spec is not None and plain.timeout == timedelta(seconds=spec.timeout_seconds)
    nxt = t.ModelCallInput(agent="a", model="demo", turn=4, transcript_len=3)
    ahead = requests.tool_run(s, agent, c, step, ("c7", nxt))
    assert ahead.ahead and ahead.request.then is not None and ahead.request.then.upto == 1
    assert ahead.timeout == plain.timeout + timedelta(seconds=60) + requests.MODEL_TIMEOUT_MARGIN
    assert ahead.summary.endswith(" · then model demo")
    edited = step.model_copy(update={"arguments": '{"q": "moon"}'})  # a person changed them: the turn asks itself
    assert not requests.tool_run(s, agent, c, edited, ("c7", nxt)).ahead
    assert not requests.tool_run(s, agent, c, step, ("other", nxt)).ahead


def test_a_model_calls_request_and_its_summary():
    lead = t.AgentSpec(name="lead", team=[t.AgentSpec(name="helper")])
    s = RunState()
    s.agent, s.turn, s.messages = lead, 2, [t.UserMessage(content="hi")]
    request, summary = requests.model_call(s, lead, False, None, 500)
    assert (request.turn, request.transcript_len, request.max_output_tokens) == (2, 1, 500)
    assert request.digest == s.digest() and summary == "turn 2 · lead · model the worker's default model · 1 message"


def test_a_runs_ledger_asks_the_tree_budget_patch_only_where_runs_before_1_3_asked_it():
    own = t.AgentSpec(name="a", token_budget=1_000)
    assert Ledger.for_run(t.RunInput(prompt="x"), t.AgentSpec(name="a"), False, None) == (None, False)
    ledger, ask = Ledger.for_run(t.RunInput(prompt="x"), own, False, None)
    assert ledger is not None and not ask  # its agent's own budget: no patch asked
    given = t.RunInput(prompt="x", budget=t.Budget(tokens=500))
    first, ask = Ledger.for_run(given, own, True, True)  # asked given-budget-first before the resolve
    assert first is not None and first.budget.tokens == 500 and first.shared and not ask
    before, ask = Ledger.for_run(given, own, True, False)  # a run recorded before 1.3
    assert before is not None and ask  # kept only where the run knows tree budgets


def test_a_tool_runs_input_is_the_same_whether_it_runs_local_or_routed():
    """Issue 32, item 2: the input carries the call and its agent's version, nothing of how it
    runs; the executor's command (a local or a routed activity) is the only difference. The
    version lets a local run refuse a worker without it (TOOL_NOT_HERE), and the call runs routed."""
    agent = t.AgentSpec(name="a", version="v7", tools=[t.ToolSpec(name="lookup", local=True)])
    s = RunState()
    s.agent, s.turn, s.messages = agent, 2, [t.UserMessage(content="hi")]
    c, step = a_tool_call(s, agent)
    assert step.how == "local"
    local = requests.tool_run(s, agent, c, step, None).request
    routed = requests.tool_run(s, agent, c, step.model_copy(update={"how": "activity"}), None).request
    assert local == routed and local.agent_version == "v7" and local.then is None
    assert set(t.ToolCallInput.model_fields) == {
        "call_id", "tool", "arguments", "idempotency_key", "turn", "agent", "args", "agent_version", "then",
    }  # fmt: skip
