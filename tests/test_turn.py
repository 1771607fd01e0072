"""The turn's decision, without Temporal."""

from workflows.turn import BudgetSpent, FinalAnswer, RunTools, TurnLimitReached, decide, describe_call
from workflows.types import AgentSpec, AssistantMessage, ModelReply, ToolCall, ToolSpec

AGENT = AgentSpec(name="a", tools=[ToolSpec(name="get_weather"), ToolSpec(name="add")], max_turns=3)


def reply(content: str | None = None, *calls: ToolCall) -> ModelReply:
    return ModelReply(message=AssistantMessage(content=content, tool_calls=list(calls)))


def call(call_id: str, name: str, arguments: str = "{}") -> ToolCall:
    return ToolCall(call_id=call_id, name=name, arguments=arguments)


def test_text_without_tool_calls_is_the_final_answer():
    step = decide(AGENT, 1, reply("It is sunny."))
    assert step == FinalAnswer(output="It is sunny.")


def test_empty_reply_is_an_empty_final_answer():
    assert decide(AGENT, 1, reply(None)) == FinalAnswer(output="")


def test_tool_calls_run_in_the_order_asked():
    step = decide(AGENT, 1, reply(None, call("c1", "get_weather"), call("c2", "add")))
    assert isinstance(step, RunTools)
    assert [c.call_id for c in step.run] == ["c1", "c2"]
    assert step.order == ["c1", "c2"] and step.answered == []


def test_unknown_tool_is_answered_with_an_error_the_model_can_read():
    step = decide(AGENT, 1, reply(None, call("c1", "launch_rocket"), call("c2", "add")))
    assert isinstance(step, RunTools)
    assert [c.call_id for c in step.run] == ["c2"]
    (answer,) = step.answered
    assert answer.call_id == "c1" and answer.is_error
    assert "unknown tool 'launch_rocket'" in answer.content and "get_weather, add" in answer.content
    assert step.order == ["c1", "c2"]


def test_tool_calls_on_the_last_turn_exceed_max_turns():
    step = decide(AGENT, 3, reply(None, call("c1", "add")))
    assert isinstance(step, TurnLimitReached)
    assert step.max_turns == 3 and "max_turns (3) exceeded" in step.message


def test_a_final_answer_on_the_last_turn_is_fine():
    assert decide(AGENT, 3, reply("done")) == FinalAnswer(output="done")


def test_run_override_of_max_turns_wins():
    assert isinstance(decide(AGENT, 2, reply(None, call("c", "add")), max_turns=2), TurnLimitReached)
    assert isinstance(decide(AGENT, 5, reply(None, call("c", "add")), max_turns=9), RunTools)


def test_describe_call_is_short_and_readable():
    assert describe_call(call("c", "get_weather", '{"city": "Tokyo"}')) == "get_weather(city=Tokyo)"
    assert describe_call(call("c", "add", "not json")) == "add(not json)"
    assert describe_call(call("c", "f", '{"text": "' + "x" * 500 + '"}')) == "f(text=" + "x" * 39 + "…)"
    many = describe_call(call("c", "f", '{"a": "' + "y" * 30 + '", "b": "' + "z" * 30 + '"}'), limit=60)
    assert len(many) == 60 and many.endswith("…")


def test_a_spent_token_budget_ends_a_run_that_wants_more_work():
    budgeted = AGENT.model_copy(update={"token_budget": 1000})
    step = decide(budgeted, 1, reply(None, call("c", "add")), tokens_used=1000)
    assert isinstance(step, BudgetSpent) and step.used == 1000 and "1000 of 1000" in step.message
    assert isinstance(decide(budgeted, 1, reply(None, call("c", "add")), tokens_used=999), RunTools)
    # a final answer is kept even past the budget: its tokens are already spent
    assert decide(budgeted, 1, reply("done"), tokens_used=5000) == FinalAnswer(output="done")
