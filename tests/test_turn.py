"""The whole turn as a pure state machine, without Temporal: decide, plan, merge, check output."""

from durable_agent_runner.machine.calls import RunTools, after_tools, checked, describe_call, taken, with_reply
from durable_agent_runner.machine.memory import HANDOFF_FILTERS
from durable_agent_runner.machine.rules import Done, Final, Retry, Stop, after_output, decide, tripwire
from durable_agent_runner.workflows.types import (
    AgentSpec,
    AssistantMessage,
    Breakpoints,
    HandoffSpec,
    HookResult,
    ModelReply,
    ToolCall,
    ToolMessage,
    ToolResult,
    ToolSpec,
    UserMessage,
)

AGENT = AgentSpec(
    name="a",
    tools=[
        ToolSpec(name="get_weather"),
        ToolSpec(name="add"),
        ToolSpec(name="pay", approval="conditional"),
        ToolSpec(name="send", approval="always"),
        ToolSpec(name="research", agent="researcher"),
    ],
    handoffs=[
        HandoffSpec(agent="billing", tool_name="transfer_to_billing"),
        HandoffSpec(agent="refunds", tool_name="transfer_to_refunds"),
    ],
    max_turns=3,
)


def reply(content: str | None = None, *calls: ToolCall) -> ModelReply:
    return ModelReply(message=AssistantMessage(content=content, tool_calls=list(calls)))


def call(call_id: str, name: str, arguments: str = "{}") -> ToolCall:
    return ToolCall(call_id=call_id, name=name, arguments=arguments)


def plan(*calls: ToolCall, always: tuple[str, ...] = ()) -> RunTools:
    step = decide(AGENT, 1, reply(None, *calls), always=always)
    assert isinstance(step, RunTools)
    return step


def test_text_without_tool_calls_is_the_final_output():
    assert decide(AGENT, 1, reply("It is sunny.")) == Final(output="It is sunny.")
    assert decide(AGENT, 1, reply(None)) == Final(output="")


def test_each_call_is_planned_in_the_order_asked():
    step = plan(call("c1", "get_weather"), call("c2", "pay"), call("c3", "send"), call("c4", "research"))
    assert [(p.call.call_id, p.action, p.approval) for p in step.calls] == [
        ("c1", "tool", "none"),
        ("c2", "tool", "check"),
        ("c3", "tool", "check"),
        ("c4", "child", "none"),
    ]
    assert step.calls[3].target == "researcher" and step.handoff is None


def test_a_tool_approved_with_always_is_not_asked_again():
    step = plan(call("c1", "send"), call("c2", "pay"), always=("send",))
    assert [p.approval for p in step.calls] == ["auto", "check"]


def test_unknown_tools_are_answered_at_once_with_what_exists():
    step = plan(call("c1", "launch_rocket"), call("c2", "add"), call("c3", "x" * 500))
    first = step.calls[0]
    assert first.action == "answer" and "unknown tool 'launch_rocket'" in first.answer
    assert "get_weather, add, pay, send, research, transfer_to_billing, transfer_to_refunds" in first.answer
    assert len(step.calls[2].answer) < 300  # a huge name is cut


def test_a_handoff_is_planned_and_a_second_one_is_refused():
    step = plan(call("c1", "add"), call("c2", "transfer_to_billing"), call("c3", "transfer_to_refunds"))
    assert [p.action for p in step.calls] == ["tool", "handoff", "answer"]
    assert step.handoff is not None and step.handoff.target == "billing"
    assert "only one handoff per turn" in step.calls[2].answer and "'billing'" in step.calls[2].answer


def test_results_merge_in_the_order_asked_and_answers_fill_in():
    step = plan(call("c1", "add"), call("c2", "transfer_to_billing"), call("c3", "nope"), call("c4", "get_weather"))
    ran = {
        "c4": ToolMessage(call_id="c4", name="get_weather", content="sunny"),
        "c1": ToolMessage(call_id="c1", name="add", content="3"),
    }
    merged = after_tools(step, ran)
    assert [m.call_id for m in merged] == ["c1", "c2", "c3", "c4"]
    assert merged[1].content == '{"assistant": "billing"}' and not merged[1].is_error
    assert merged[2].is_error and "unknown tool 'nope'" in merged[2].content


def test_an_approval_check_runs_asks_or_answers():
    planned = plan(call("c1", "pay", '{"amount": 5}')).calls[0]
    assert checked(planned, HookResult(needs_approval=False)) == "run"
    assert checked(planned, HookResult(needs_approval=True, arguments={"amount": 5})) == "ask"
    bad = checked(planned, HookResult(invalid="invalid arguments for tool 'pay': amount: required"))
    assert isinstance(bad, ToolMessage) and bad.is_error and "amount: required" in bad.content


def test_tool_calls_on_the_last_turn_exceed_max_turns():
    step = decide(AGENT, 3, reply(None, call("c1", "add")))
    assert isinstance(step, Stop) and step.error == "MaxTurnsExceeded"
    assert "max_turns (3) exceeded" in step.message


def test_the_run_limits_come_from_its_first_agent():
    first = AGENT.model_copy(update={"max_turns": 9, "token_budget": 100})
    other = AGENT.model_copy(update={"name": "billing", "max_turns": 1})
    assert isinstance(decide(other, 2, reply(None, call("c", "add")), limits=first), RunTools)
    step = decide(other, 2, reply(None, call("c", "add")), limits=first, tokens_used=100)
    assert isinstance(step, Stop) and step.error == "TokenBudgetExceeded" and "100 of 100" in step.message


def test_a_final_answer_is_kept_past_the_turn_limit_and_the_budget():
    budgeted = AGENT.model_copy(update={"token_budget": 1000})
    assert decide(budgeted, 3, reply("done"), tokens_used=5000) == Final(output="done")


def test_run_override_of_max_turns_wins():
    assert isinstance(decide(AGENT, 2, reply(None, call("c", "add")), max_turns=2), Stop)
    assert isinstance(decide(AGENT, 5, reply(None, call("c", "add")), max_turns=9), RunTools)


TYPED = AGENT.model_copy(update={"output_schema": {"type": "object"}, "output_name": "Ticket", "output_retries": 2})


def test_typed_output_valid_invalid_then_beyond_the_bound():
    assert after_output(AGENT, "plain", None, 0) == Done(output="plain")
    ok = after_output(TYPED, '{"id": 1}', HookResult(output={"id": 1}), 0)
    assert ok == Done(output='{"id": 1}', output_object={"id": 1})
    again = after_output(TYPED, "nope", HookResult(invalid="id: Field required"), 2)
    assert isinstance(again, Retry) and "not a valid Ticket: id: Field required" in again.feedback
    stop = after_output(TYPED, "nope", HookResult(invalid="id: Field required"), 3)
    assert isinstance(stop, Stop) and stop.error == "ModelBehaviorError"
    assert "after 3 tries" in stop.message and "id: Field required" in stop.message


def test_the_first_tripped_guardrail_stops_the_run():
    passed = [("polite", HookResult()), ("on_topic", HookResult())]
    assert tripwire("input", passed) is None
    fired = tripwire("output", [("polite", HookResult()), ("no_pii", HookResult(tripwire=True, info={"found": "ssn"}))])
    assert fired == Stop(
        error="OutputGuardrailTripwireTriggered", message='output guardrail \'no_pii\' tripped: {"found": "ssn"}'
    )
    assert tripwire("input", [("x", HookResult(tripwire=True))]).error == "InputGuardrailTripwireTriggered"  # type: ignore[union-attr]


def test_handoff_filters():
    messages = [
        UserMessage(content="refund me"),
        AssistantMessage(content=None, tool_calls=[call("c1", "lookup")]),
        ToolMessage(call_id="c1", name="lookup", content="order 7"),
        AssistantMessage(content="Passing you on.", tool_calls=[call("c2", "transfer_to_refunds")]),
        ToolMessage(call_id="c2", name="transfer_to_refunds", content="{}"),
        UserMessage(content="thanks"),
    ]
    kept = HANDOFF_FILTERS["remove_tools"](messages)
    assert kept == [UserMessage(content="refund me"), AssistantMessage(content="Passing you on."), messages[-1]]
    assert HANDOFF_FILTERS["last_user_message"](messages) == [UserMessage(content="thanks")]


def test_describe_call_is_short_and_readable():
    assert describe_call(call("c", "get_weather", '{"city": "Tokyo"}')) == "get_weather(city=Tokyo)"
    assert describe_call(call("c", "add", "not json")) == "add(not json)"
    assert describe_call(call("c", "f", '{"text": "' + "x" * 500 + '"}')) == "f(text=" + "x" * 39 + "…)"
    many = describe_call(call("c", "f", '{"a": "' + "y" * 30 + '", "b": "' + "z" * 30 + '"}'), limit=60)
    assert len(many) == 60 and many.endswith("…)")  # cut inside its parentheses: was `…` with no `)`
    assert describe_call(call("c", "n" * 70, "{}"), limit=60) == "n" * 59 + "…"  # a name longer than the line


# ------------------------------------------------------------------ calls run with the reply

CHEAP = AgentSpec(
    name="cheap",
    version="v1",
    tools=[
        ToolSpec(name="add", local=True),
        ToolSpec(name="convert", local=True),
        ToolSpec(name="lookup"),  # not declared cheap: a tool activity of its own
        ToolSpec(name="pay", local=True, approval="conditional"),  # a person may have to decide first
        ToolSpec(name="research", local=True, agent="researcher"),  # a child run
        ToolSpec(name="transfer_to_billing", local=True),  # a handoff's name wins
    ],
    handoffs=[HandoffSpec(agent="billing", tool_name="transfer_to_billing")],
    max_turns=3,
    token_budget=1000,
    cost_budget_usd=0.5,
)


def test_only_cheap_calls_that_need_no_person_may_come_back_with_the_reply():
    ahead = with_reply(CHEAP, 1, tokens_used=400, cost_used=0.2)
    assert ahead is not None
    assert ahead.version == "v1" and ahead.tools == ["add", "convert"] and ahead.pause_on == []
    assert ahead.tokens_left == 600 and ahead.cost_left == 0.3
    unbudgeted = with_reply(CHEAP.model_copy(update={"token_budget": None, "cost_budget_usd": None}), 1)
    assert unbudgeted is not None and unbudgeted.tokens_left is None and unbudgeted.cost_left is None


def test_no_call_comes_back_with_a_reply_the_turn_could_not_act_on():
    assert with_reply(CHEAP, 2) is not None
    assert with_reply(CHEAP, 3) is None  # the last turn: decide stops instead of running tools
    later = CHEAP.model_copy(update={"max_turns": 2})  # the run's limits are its first agent's
    assert with_reply(CHEAP.model_copy(update={"max_turns": 50}), 2, limits=later) is None
    assert with_reply(CHEAP.model_copy(update={"version": None}), 1) is None  # no worker holds it for sure
    assert with_reply(AGENT, 1) is None  # no cheap tools
    assert with_reply(CHEAP, 1, breakpoints=Breakpoints(before_tools=True)) is None
    named = with_reply(CHEAP, 1, breakpoints=Breakpoints(tools=["lookup", "add"]))
    assert named is not None and named.pause_on == ["add", "lookup"]  # the worker runs none if one is called


def result(call_id: str, tool: str, output: str) -> ToolResult:
    return ToolResult(call_id=call_id, tool=tool, output=output)


def test_the_turn_takes_a_result_only_for_the_call_it_was_run_for():
    r = reply(None, call("c1", "add", '{"a": 1}'), call("c2", "add", '{"a": 2}'), call("c3", "convert"))
    r.tool_results = [result("c1", "add", "1"), result("c2", "add", "2"), result("c3", "lookup", "?")]
    asked = [c.call_id for c in r.message.tool_calls]
    r.message.tool_calls[1].call_id = "call_4_1"  # the run renamed it: its key was built from "c2"
    got = taken(asked, r)
    assert got == {"c1": ('{"a": 1}', r.tool_results[0])}  # c3's result names another tool
    assert taken([], reply("done")) == {}
