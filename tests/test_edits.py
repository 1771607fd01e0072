"""Edits to a paused run and where a run pauses, as pure rules (machine/edits.py), without Temporal;
and `without_dropped`, which turns the calls a person dropped into answered ones (machine/calls.py)."""

from __future__ import annotations

import copy
import json

import pytest
from pydantic import ValidationError

from durable_agent_runner.machine.calls import RunTools, after_tools, without_dropped
from durable_agent_runner.machine.edits import (
    Editable,
    EditRefused,
    apply,
    before_model,
    before_tools,
    unknown_break_tools,
)
from durable_agent_runner.machine.rules import decide
from durable_agent_runner.workflows import types as t

BOOK = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "seats": {"type": "integer", "minimum": 1},
    },
    "required": ["city"],
    "additionalProperties": False,
}
FIRST = t.AgentSpec(
    name="triage",
    tools=[t.ToolSpec(name="get_weather"), t.ToolSpec(name="book", parameters=BOOK)],
    team=[t.AgentSpec(name="billing", tools=[t.ToolSpec(name="refund")]), t.AgentSpec(name="refunds")],
)


def call(call_id: str, name: str, **args: object) -> t.ToolCall:
    return t.ToolCall(call_id=call_id, name=name, arguments=json.dumps(args))


def transcript() -> list[t.Message]:
    """0 user · 1 assistant(c1, c2) · 2 tool c1 · 3 tool c2 · 4 assistant · 5 user."""
    return [
        t.UserMessage(content="weather in Paris and Tokyo?"),
        t.AssistantMessage(
            tool_calls=[call("c1", "get_weather", city="Paris"), call("c2", "get_weather", city="Tokyo")]
        ),
        t.ToolMessage(call_id="c1", name="get_weather", content="sunny"),
        t.ToolMessage(call_id="c2", name="get_weather", content="rain"),
        t.AssistantMessage(content="Paris is sunny, Tokyo is rainy."),
        t.UserMessage(content="book me a seat to Paris"),
    ]


def before_model_state() -> Editable:
    """Paused before a model call: no calls pending."""
    return Editable(transcript(), FIRST, "triage")


def before_tools_state(*calls: t.ToolCall) -> Editable:
    """Paused before tools: item 6 holds the calls about to run. `pending` is a copy, not the very
    objects in the transcript, so an edit must change both on purpose."""
    calls = calls or (call("c3", "book", city="Paris"),)
    messages = [*transcript(), t.AssistantMessage(content="booking", tool_calls=list(calls))]
    pending = [c.model_copy(deep=True) for c in calls]
    return Editable(messages, FIRST, "triage", pending)


def refused(edit: t.Edit, state: Editable) -> EditRefused:
    """The edit is refused and the state is left exactly as it was."""
    before = copy.deepcopy(state)
    with pytest.raises(EditRefused) as info:
        apply(edit, state)
    assert state == before
    return info.value


# ------------------------------------------------------------------------------------- text


def test_text_replaces_one_items_text_and_keeps_its_role_and_calls():
    state = before_tools_state()
    summary = apply(t.Edit(op="text", index=6, text="booking now", by="alice"), state)
    assert summary == "alice replaced the text of item 6 (assistant): booking now"
    edited = state.messages[6]
    assert isinstance(edited, t.AssistantMessage) and edited.content == "booking now"
    assert [c.call_id for c in edited.tool_calls] == ["c3"]
    assert state.messages[:6] == transcript()
    apply(t.Edit(op="text", index=2, text="cloudy"), state)
    assert state.messages[2] == t.ToolMessage(call_id="c1", name="get_weather", content="cloudy")


@pytest.mark.parametrize("index", [6, 7, 100, None])
def test_text_of_an_item_that_does_not_exist_is_refused(index):
    err = refused(t.Edit(op="text", index=index, text="x"), before_model_state())
    assert str(err) == f"no item {index}: the transcript has items 0-5"


def test_a_negative_index_never_reaches_apply():
    with pytest.raises(ValidationError):
        t.Edit(op="text", index=-1, text="x")


@pytest.mark.parametrize("text", [None, "", "  \n "])
def test_empty_text_is_refused(text):
    err = refused(t.Edit(op="text", index=0, text=text), before_model_state())
    assert "not empty" in str(err)


# ------------------------------------------------------------------------------------- drop


def test_drop_removes_a_message_without_calls():
    state = before_model_state()
    summary = apply(t.Edit(op="drop", index=4, by="bob"), state)
    assert summary == "bob dropped item 4 (assistant)"
    assert state.messages == [m for i, m in enumerate(transcript()) if i != 4]


@pytest.mark.parametrize("index", [6, 99, None])
def test_drop_out_of_range_is_refused(index):
    assert "the transcript has items 0-5" in str(refused(t.Edit(op="drop", index=index), before_model_state()))


@pytest.mark.parametrize("index", [2, 3])
def test_a_tool_result_alone_cannot_be_dropped_and_the_refusal_names_its_calls_item(index):
    err = refused(t.Edit(op="drop", index=index), before_model_state())
    assert str(err) == f"item {index} is a tool result: drop its call's message (item 1) to drop both"


def test_dropping_a_message_with_tool_calls_drops_its_results_too():
    state = before_model_state()
    summary = apply(t.Edit(op="drop", index=1, by="bob"), state)
    assert summary == "bob dropped item 1 (assistant) and its 2 tool result(s)"
    original = transcript()
    assert state.messages == [original[0], original[4], original[5]]
    assert not any(isinstance(m, t.ToolMessage) for m in state.messages)


def test_the_message_holding_the_pending_calls_cannot_be_dropped():
    err = refused(t.Edit(op="drop", index=6), before_tools_state())
    assert "pending calls" in str(err) and "--drop-call" in str(err)


def test_an_earlier_message_with_calls_can_be_dropped_while_calls_are_pending():
    state = before_tools_state()
    apply(t.Edit(op="drop", index=1), state)
    assert len(state.messages) == 4 and state.messages[-1].tool_calls[0].call_id == "c3"
    assert [c.call_id for c in state.pending] == ["c3"]


def test_a_drop_that_would_empty_the_transcript_is_refused():
    state = Editable([t.UserMessage(content="hi")], FIRST, "triage")
    assert "empty" in str(refused(t.Edit(op="drop", index=0), state))
    state = Editable([t.AssistantMessage(tool_calls=[call("c1", "get_weather")]), *transcript()[2:3]], FIRST, "triage")
    assert "empty" in str(refused(t.Edit(op="drop", index=0), state))


# ----------------------------------------------------------------------------------- insert


@pytest.mark.parametrize(("index", "role"), [(0, "user"), (1, "assistant"), (4, "user"), (6, "assistant")])
def test_insert_puts_a_message_of_the_given_role_at_the_position(index, role):
    state = before_model_state()
    summary = apply(t.Edit(op="insert", index=index, role=role, text="note", by="carol"), state)
    assert summary == f"carol inserted {'an' if role == 'assistant' else 'a'} {role} message at item {index}: note"
    new = state.messages.pop(index)
    assert new == (t.UserMessage(content="note") if role == "user" else t.AssistantMessage(content="note"))
    assert state.messages == transcript()


@pytest.mark.parametrize("index", [7, 50, None])
def test_insert_out_of_range_is_refused(index):
    err = refused(t.Edit(op="insert", index=index, role="user", text="x"), before_model_state())
    assert str(err) == "insert position must be 0-6 (the transcript has 6 items)"


@pytest.mark.parametrize(("role", "text"), [(None, "x"), ("user", None), ("user", ""), ("assistant", "  ")])
def test_insert_needs_a_role_and_text(role, text):
    err = refused(t.Edit(op="insert", index=0, role=role, text=text), before_model_state())
    assert "needs a role" in str(err)


@pytest.mark.parametrize("index", [2, 3])
def test_nothing_may_be_inserted_between_a_call_and_its_results(index):
    err = refused(t.Edit(op="insert", index=index, role="user", text="x"), before_model_state())
    assert f"item {index} is a tool result" in str(err)


def test_nothing_may_be_inserted_after_the_pending_calls_but_before_them_it_may():
    state = before_tools_state()
    err = refused(t.Edit(op="insert", index=7, role="user", text="x"), state)
    assert "insert before their call" in str(err)
    apply(t.Edit(op="insert", index=6, role="user", text="x"), state)
    assert state.messages[6] == t.UserMessage(content="x") and state.messages[7].tool_calls[0].call_id == "c3"


def test_insert_at_the_end_is_allowed_when_no_calls_are_pending():
    state = before_model_state()
    apply(t.Edit(op="insert", index=6, role="user", text="also"), state)
    assert state.messages[-1] == t.UserMessage(content="also")


# ------------------------------------------------------------------------------------- args


def test_valid_arguments_change_the_pending_call_and_the_call_in_the_transcript():
    state = before_tools_state(call("c3", "book", city="Paris"), call("c4", "get_weather", city="Paris"))
    summary = apply(t.Edit(op="args", call_id="c3", arguments={"city": "Lyon", "seats": 2}, by="dan"), state)
    text = json.dumps({"city": "Lyon", "seats": 2})
    assert state.pending[0].arguments == text
    assert state.messages[6].tool_calls[0].arguments == text
    assert json.loads(state.pending[1].arguments) == {"city": "Paris"}  # the other call is untouched
    assert json.loads(state.messages[6].tool_calls[1].arguments) == {"city": "Paris"}
    assert summary.startswith("dan changed the arguments of c3 (book) from {")
    assert '"Paris"' in summary and '"Lyon"' in summary


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"city": 5}, "city: 5 is not of type 'string'"),
        ({"city": "Paris", "seats": 0}, "seats: 0 is less than the minimum of 1"),
        ({"seats": 1}, "'city' is a required property"),  # of the whole object: no path before it
        ({"city": "Paris", "class": "first"}, "Additional properties are not allowed ('class' was unexpected)"),
    ],
)
def test_arguments_that_break_the_tools_schema_are_refused_naming_the_field(arguments, named):
    err = refused(t.Edit(op="args", call_id="c3", arguments=arguments), before_tools_state())
    assert err.kind == "InvalidArguments"
    assert str(err) == f"arguments for book are invalid: {named}"


def test_args_need_arguments():
    err = refused(t.Edit(op="args", call_id="c3"), before_tools_state())
    assert err.kind == "EditRefused" and "JSON object" in str(err)


def test_args_of_a_call_to_a_tool_the_agent_in_charge_lacks_are_refused():
    err = refused(t.Edit(op="args", call_id="c9", arguments={}), before_tools_state(call("c9", "refund")))
    assert str(err) == "call c9 is to 'refund', which is not a tool of triage"


def test_args_are_checked_against_the_tools_of_the_agent_in_charge():
    state = before_tools_state(call("c9", "refund"))
    state.current = "billing"
    apply(t.Edit(op="args", call_id="c9", arguments={"amount": 5}), state)
    assert json.loads(state.pending[0].arguments) == {"amount": 5}


@pytest.mark.parametrize("op", ["args", "drop_call"])
def test_an_unknown_call_is_refused_listing_the_pending_ones(op):
    err = refused(t.Edit(op=op, call_id="c1", arguments={"city": "x"}), before_tools_state())
    assert err.kind == "UnknownCall" and str(err) == "no pending call c1; pending: c3"
    err = refused(t.Edit(op=op, call_id="c3", arguments={"city": "x"}), before_model_state())
    assert err.kind == "UnknownCall" and "none (the run is not paused before tools)" in str(err)


# -------------------------------------------------------------------------------- drop_call


def test_drop_call_records_who_dropped_it_and_keeps_the_transcript():
    state = before_tools_state()
    summary = apply(t.Edit(op="drop_call", call_id="c3", by="erin"), state)
    assert summary == "erin dropped the pending call c3 (book)"
    assert state.dropped == {"c3": "erin"}
    assert len(state.messages) == 7 and [c.call_id for c in state.pending] == ["c3"]


@pytest.mark.parametrize("op", ["args", "drop_call"])
def test_a_dropped_call_can_be_neither_dropped_again_nor_edited(op):
    state = before_tools_state()
    apply(t.Edit(op="drop_call", call_id="c3", by="erin"), state)
    err = refused(t.Edit(op=op, call_id="c3", arguments={"city": "x"}, by="frank"), state)
    assert err.kind == "UnknownCall" and str(err) == "call c3 was dropped by erin"


# ------------------------------------------------------------------------------------ agent


@pytest.mark.parametrize("name", ["billing", "refunds", "triage"])
def test_the_agent_in_charge_can_be_switched_to_a_member_when_no_calls_are_pending(name):
    state = before_model_state()
    state.current = "refunds" if name == "triage" else "triage"
    before = state.current
    summary = apply(t.Edit(op="agent", agent=name, by="gus"), state)
    assert state.current == name and summary == f"gus switched the agent in charge from {before} to {name}"


@pytest.mark.parametrize("name", ["nobody", "", None])
def test_switching_to_an_agent_the_run_did_not_freeze_is_refused(name):
    err = refused(t.Edit(op="agent", agent=name), before_model_state())
    assert err.kind == "UnknownAgent"
    assert str(err) == f"no agent '{name or ''}' in this run; it froze: triage, billing, refunds"


def test_switching_agents_is_refused_while_live_calls_are_pending_and_allowed_once_they_are_dropped():
    state = before_tools_state(call("c3", "book", city="Paris"), call("c4", "get_weather", city="Paris"))
    err = refused(t.Edit(op="agent", agent="billing"), state)
    assert str(err) == "the pending calls (c3, c4) belong to triage: drop them before switching agents"
    apply(t.Edit(op="drop_call", call_id="c3"), state)
    err = refused(t.Edit(op="agent", agent="billing"), state)
    assert "(c4)" in str(err)
    apply(t.Edit(op="drop_call", call_id="c4"), state)
    apply(t.Edit(op="agent", agent="billing"), state)
    assert state.current == "billing"


# -------------------------------------------------------------------- refusals change nothing


@pytest.mark.parametrize(
    "edit",
    [
        t.Edit(op="text", index=9, text="x"),
        t.Edit(op="text", index=1, text=" "),
        t.Edit(op="drop", index=2),
        t.Edit(op="drop", index=6),
        t.Edit(op="insert", index=3, role="user", text="x"),
        t.Edit(op="insert", index=7, role="user", text="x"),
        t.Edit(op="insert", index=0, text="x"),
        t.Edit(op="args", call_id="c3", arguments={"city": 1}),
        t.Edit(op="args", call_id="c3", arguments={"city": "x", "seats": "2"}),
        t.Edit(op="args", call_id="nope", arguments={"city": "x"}),
        t.Edit(op="drop_call", call_id="nope"),
        t.Edit(op="agent", agent="nobody"),
        t.Edit(op="agent", agent="billing"),
    ],
    ids=lambda e: e.op,
)
def test_a_refused_edit_leaves_the_state_as_it_was(edit):
    state = before_tools_state()
    state.dropped["old"] = "someone"
    refused(edit, state)  # compares a deep copy taken before with the state after


# -------------------------------------------------------------------------------- pausing


def test_before_model_pauses_at_the_named_turns_or_every_turn():
    assert before_model(None, 1) is None
    at = t.Breakpoints(at_turns=[2, 5])
    assert [before_model(at, n) for n in (1, 2, 3, 5)] == [
        None,
        "a breakpoint at turn 2",
        None,
        "a breakpoint at turn 5",
    ]
    every = t.Breakpoints(every_turn=True, at_turns=[2])
    assert {before_model(every, n) for n in (1, 2, 3)} == {"a breakpoint before every model call"}
    assert before_model(t.Breakpoints(before_tools=True, tools=["book"]), 1) is None


def test_a_breakpoint_before_a_tool_no_agent_of_the_team_has_is_named():
    """A mistyped --break-tool would never pause (before 2.0.2 the run went on, and the call it
    meant ran unpaused): the run's start names it and the team's tools."""
    lead = FIRST.model_copy(update={"handoffs": [t.HandoffSpec(agent="billing", tool_name="transfer_to_billing")]})
    for known in (["book"], ["refund"], ["transfer_to_billing", "get_weather"], []):
        assert unknown_break_tools(t.Breakpoints(tools=known), lead) is None, known
    assert unknown_break_tools(None, lead) is None
    assert unknown_break_tools(t.Breakpoints(before_tools=True, at_turns=[1]), lead) is None
    said = unknown_break_tools(t.Breakpoints(tools=["book", "boook", "send"]), lead)
    assert said == (
        "a breakpoint before 'boook', 'send': no agent of this run has a tool of that name "
        "(book, get_weather, refund, transfer_to_billing)"
    )
    alone = unknown_break_tools(t.Breakpoints(tools=["x"]), t.AgentSpec(name="bare"))
    assert alone is not None and alone.endswith("(they have none)")


def test_before_tools_pauses_before_any_call_or_calls_of_the_named_tools():
    calls = [call("c1", "get_weather"), call("c2", "book"), call("c3", "send")]
    assert before_tools(None, calls) is None
    assert before_tools(t.Breakpoints(before_tools=True), []) is None
    assert before_tools(t.Breakpoints(before_tools=True), calls) == "a breakpoint before tool calls"
    named = t.Breakpoints(tools=["send", "book", "other"])
    assert before_tools(named, calls) == "a breakpoint before book, send"
    assert before_tools(named, calls[:1]) is None
    assert before_tools(t.Breakpoints(every_turn=True, at_turns=[1]), calls) is None


# -------------------------------------------------------------------------- without_dropped


def test_dropped_calls_are_answered_naming_who_dropped_them_and_the_rest_keep_their_plan_and_order():
    agent = t.AgentSpec(
        name="a",
        tools=[t.ToolSpec(name="get_weather"), t.ToolSpec(name="pay", approval="always")],
        handoffs=[t.HandoffSpec(agent="billing", tool_name="transfer_to_billing")],
    )
    calls = [call("c1", "get_weather"), call("c2", "pay"), call("c3", "transfer_to_billing"), call("c4", "nope")]
    step = decide(agent, 1, t.ModelReply(message=t.AssistantMessage(tool_calls=calls)))
    assert isinstance(step, RunTools)
    plan = without_dropped(step, {"c2": "alice", "c3": "bob"})
    assert [p.call.call_id for p in plan.calls] == ["c1", "c2", "c3", "c4"]
    assert plan.calls[0] == step.calls[0] and plan.calls[3] == step.calls[3]
    for p, by in [(plan.calls[1], "alice"), (plan.calls[2], "bob")]:
        assert p.action == "answer" and p.answer == f"error: {by} dropped this call before it ran"
    assert plan.handoff is None  # a dropped handoff hands nothing over
    assert step.calls[1].action == "tool" and step.calls[1].approval == "check"  # the input is not changed
    messages = after_tools(plan, {"c1": t.ToolMessage(call_id="c1", name="get_weather", content="sunny")})
    assert [(m.call_id, m.is_error) for m in messages] == [("c1", False), ("c2", True), ("c3", True), ("c4", True)]
    assert messages[1].content == "error: alice dropped this call before it ran"


def test_without_dropped_changes_nothing_when_no_call_was_dropped():
    calls = [call("c1", "get_weather"), call("c2", "get_weather")]
    step = decide(FIRST, 1, t.ModelReply(message=t.AssistantMessage(tool_calls=calls)))
    assert isinstance(step, RunTools)
    assert without_dropped(step, {}) == step
    assert without_dropped(step, {"other": "alice"}) == step
