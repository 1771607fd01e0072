"""The turn machine end to end, without Temporal: each outcome fed back, each next step checked."""

from datetime import UTC, datetime

import pytest

from durable_agent_runner.machine.calls import RunTools
from durable_agent_runner.machine.outcomes import (
    Compacted,
    Facts,
    HandedOff,
    OutputChecked,
    Ready,
    Replied,
    Resumed,
    Steered,
    ToolsRan,
)
from durable_agent_runner.machine.rules import Done, Stop
from durable_agent_runner.machine.session import SessionState
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.machine.turn import CallModel, CheckOutput, ContinueAsNew, HandOff, Pause, Steer, Turn
from durable_agent_runner.workflows import types as t

NOW = Facts(now=datetime(2026, 11, 27, tzinfo=UTC))
AGENT = t.AgentSpec(
    name="a",
    version="v1",
    tools=[t.ToolSpec(name="get_weather"), t.ToolSpec(name="lookup", local=True)],
    handoffs=[t.HandoffSpec(agent="b", tool_name="transfer_to_b")],
    max_turns=4,
    team=[t.AgentSpec(name="b")],
)


def state(agent: t.AgentSpec = AGENT, prompt: str = "hi") -> RunState:
    s = RunState()
    s.agent = agent
    s.messages.append(t.UserMessage(content=prompt))
    return s


def reply(content: str | None = None, *calls: tuple[str, str], tokens: int = 10, **extra: object) -> Replied:
    tool_calls = [t.ToolCall(call_id=i, name=n, arguments="{}") for i, n in calls]
    usage = t.Usage(input_tokens=tokens, output_tokens=0, total_tokens=tokens)
    return Replied(
        t.ModelReply(message=t.AssistantMessage(content=content, tool_calls=tool_calls), usage=usage, **extra)
    )


def ran(*ids: str) -> ToolsRan:
    return ToolsRan({i: t.ToolMessage(call_id=i, name="get_weather", content="sunny") for i in ids})


def test_a_run_of_two_turns_calls_the_model_runs_the_tools_and_answers():
    s = state()
    turn = Turn(s, guard=None)
    first = turn.next(Ready(), NOW)
    assert isinstance(first, CallModel) and first.agent.name == "a" and s.turn == 1
    assert first.with_reply is not None and first.with_reply.tools == ["lookup"]  # the cheap tool may ride along
    tools = turn.next(reply(None, ("c1", "get_weather"), ("c2", "nope")), NOW)
    assert isinstance(tools, RunTools) and [p.action for p in tools.calls] == ["tool", "answer"]
    second = turn.next(ran("c1"), NOW)
    assert isinstance(second, CallModel) and s.turn == 2
    # the tool messages are in the transcript, in the model's order, the unknown tool answered
    assert [(m.role, getattr(m, "call_id", "")) for m in s.messages[-2:]] == [("tool", "c1"), ("tool", "c2")]
    assert s.messages[-1].is_error and "unknown tool 'nope'" in s.messages[-1].content
    done = turn.next(reply("It is sunny."), NOW)
    assert done == Done(output="It is sunny.") and s.usage.total_tokens == 20


def test_a_result_brought_back_with_the_reply_is_planned_beside_its_call():
    s = state()
    turn = Turn(s, guard=None)
    turn.next(Ready(), NOW)
    result = t.ToolResult(call_id="c1", tool="lookup", output="42")
    step = turn.next(reply(None, ("c1", "lookup"), tool_results=[result]), NOW)
    assert isinstance(step, RunTools) and step.calls[0].ran == result and step.calls[0].ran_arguments == "{}"


def test_a_pause_requested_holds_the_next_model_call_and_a_resume_makes_it():
    s = state()
    s.pause_request = t.PauseRequest(by="alice", reason="look")
    turn = Turn(s, guard=None)
    step = turn.next(Ready(), NOW)
    assert step == Pause("before_model", 1, "paused by alice: look") and s.turn == 0
    s.pause_request = None
    resumed = turn.next(Resumed(), NOW)
    assert isinstance(resumed, CallModel) and s.turn == 1


def test_a_breakpoint_before_tools_pauses_and_the_resume_runs_the_calls_as_left():
    s = state()
    s.breakpoints = t.Breakpoints(tools=["get_weather"])
    turn = Turn(s, guard=None)
    turn.next(Ready(), NOW)
    step = turn.next(reply(None, ("c1", "get_weather"), ("c2", "get_weather")), NOW)
    assert isinstance(step, Pause) and step.where == "before_tools"
    s.dropped_calls["c2"] = "alice"  # the person dropped one while paused
    replanned = turn.next(Resumed(), NOW)
    assert isinstance(replanned, RunTools)
    assert [p.action for p in replanned.calls] == ["tool", "answer"] and "alice dropped" in replanned.calls[1].answer


def test_a_handoff_runs_after_the_tools_then_the_target_is_called():
    s = state()
    turn = Turn(s, guard=None)
    turn.next(Ready(), NOW)
    step = turn.next(reply(None, ("c1", "transfer_to_b")), NOW)
    assert isinstance(step, RunTools) and step.handoff is not None
    handoff = turn.next(ToolsRan({}), NOW)
    assert isinstance(handoff, HandOff) and handoff.call.target == "b"
    assert s.messages[-1].content == '{"assistant": "b"}'
    s.current = "b"  # what the workflow's handoff does
    after = turn.next(HandedOff(), NOW)
    assert isinstance(after, CallModel) and after.agent.name == "b"


def test_usage_a_child_run_added_stops_the_run_before_its_next_model_call():
    s = state(AGENT.model_copy(update={"token_budget": 100}))
    turn = Turn(s, guard=None)
    turn.next(Ready(), NOW)
    turn.next(reply(None, ("c1", "get_weather")), NOW)
    s.add_usage("child", t.Usage(input_tokens=500, output_tokens=0, total_tokens=500))  # a child's ledger
    step = turn.next(ran("c1"), NOW)
    assert isinstance(step, Stop) and step.error == "TokenBudgetExceeded"
    assert "510 of 100 tokens" in step.message and "before model call 2" in step.message


def test_a_refused_output_is_retried_then_stops_after_the_agent_allows():
    agent = AGENT.model_copy(update={"output_schema": {"type": "object"}, "output_retries": 1})
    s = state(agent)
    turn = Turn(s, guard=None)
    turn.next(Ready(), NOW)
    check = turn.next(reply("not json"), NOW)
    assert check == CheckOutput("not json")
    retry = turn.next(OutputChecked(t.HookResult(invalid="not an object")), NOW)
    assert isinstance(retry, CallModel) and "not a valid output" in s.messages[-1].content
    turn.next(reply("still not"), NOW)
    stop = turn.next(OutputChecked(t.HookResult(invalid="not an object")), NOW)
    assert isinstance(stop, Stop) and stop.error == "ModelBehaviorError"
    good = Turn(state(agent), guard=None)
    good.next(Ready(), NOW)
    good.next(reply('{"x": 1}'), NOW)
    assert good.next(OutputChecked(t.HookResult(output={"x": 1})), NOW) == Done(
        output='{"x": 1}', output_object={"x": 1}
    )


def test_the_run_continues_as_new_when_temporal_suggests_it_between_turns():
    s = state()
    turn = Turn(s, guard=None)
    turn.next(Ready(), NOW)
    turn.next(reply(None, ("c1", "get_weather")), NOW)
    suggested = Facts(now=NOW.now, continue_suggested=True)
    assert isinstance(turn.next(ran("c1"), suggested), ContinueAsNew)


def test_the_last_turn_allowed_stops_a_reply_that_still_asks_for_tools():
    s = state(AGENT.model_copy(update={"max_turns": 1}))
    turn = Turn(s, guard=None)
    first = turn.next(Ready(), NOW)
    assert isinstance(first, CallModel) and first.with_reply is None  # no cheap call on the last turn
    stop = turn.next(reply(None, ("c1", "get_weather")), NOW)
    assert isinstance(stop, Stop) and stop.error == "MaxTurnsExceeded"


def test_a_session_steers_with_queued_messages_and_counts_turns_per_message():
    agent = AGENT.model_copy(update={"mid_turn": "steer", "max_turns": 2})
    s = state(agent, prompt="first")
    s.session = SessionState()
    s.turn = 7  # seven model calls answered earlier messages
    s.session.accept(t.SessionMessage(text="first"), NOW.now, steer=False)
    s.session.open(s.turn, NOW.now, "run")
    turn = Turn(s, guard=None)
    turn.next(Ready(), NOW)
    step = turn.next(reply(None, ("c1", "get_weather")), NOW)
    assert isinstance(step, RunTools)  # call 1 of 2 for this message, though the run's 8th
    s.session.accept(t.SessionMessage(text="and Paris?"), NOW.now, steer=True)
    assert isinstance(turn.next(ran("c1"), NOW), Steer)
    call = turn.next(Steered(), NOW)
    assert isinstance(call, CallModel)
    stop = turn.next(reply(None, ("c2", "get_weather")), NOW)
    assert isinstance(stop, Stop) and "max_turns (2) exceeded: turn 2" in stop.message


def test_a_fork_of_a_session_counts_its_turns_from_the_answer_it_continues():
    s = state(AGENT.model_copy(update={"max_turns": 4}), prompt="one")
    s.session = SessionState()
    for text in ("one", "two"):
        s.session.accept(t.SessionMessage(text=text), NOW.now, steer=False)
    s.session.open(0, NOW.now, "run")  # message 1: turns 1-3
    s.turn = 3
    s.mark()
    s.session.close(NOW.now, 3, s.usage, "answer one", None, None)
    s.messages += [t.AssistantMessage(content="answer one"), t.UserMessage(content="two")]
    s.session.open(3, NOW.now, "run")  # message 2 from turn 4
    s.turn = 5  # two model calls into message 2
    s.marks[6] = len(s.messages)
    point = s.fork_point(6)
    assert point.answer_base == 3 and point.turn == 5
    fork = RunState()
    carry = t.Carry(
        agent=point.agent, messages=point.messages, turn=point.turn, usage=t.Usage(), answer_base=point.answer_base
    )
    fork.from_carry(carry)
    turn = Turn(fork, guard=None)
    turn.next(Ready(), NOW)
    # the run's call 6 is call 3 of its answer: within max_turns 4 its tools run (not "turn 6 of 4")
    assert isinstance(turn.next(reply(None, ("c1", "get_weather")), NOW), RunTools)
    turn.next(ran("c1"), NOW)
    stop = turn.next(reply(None, ("c2", "get_weather")), NOW)
    assert isinstance(stop, Stop) and "max_turns (4) exceeded: turn 4" in stop.message


def test_a_fork_past_calls_that_have_no_results_yet_is_refused():
    s = state()
    s.turn = 1
    s.messages.append(t.AssistantMessage(tool_calls=[t.ToolCall(call_id="c1", name="get_weather")]))
    s.paused = t.PauseInfo(where="before_tools", turn=1, why="bp", at=NOW.now)
    with pytest.raises(ValueError, match="have no results yet"):
        s.fork_point(2)


def test_compaction_is_a_step_of_a_session_before_its_model_call():
    policy = t.MemoryPolicy(budget_bytes=1_000, strategy="trim", keep_exchanges=0)
    s = state(AGENT.model_copy(update={"memory": policy}), prompt="x" * 600)
    s.session = SessionState()
    s.messages += [t.AssistantMessage(content="y" * 600), t.UserMessage(content="next")]
    s.session.accept(t.SessionMessage(text="next"), NOW.now, steer=False)
    s.session.open(1, NOW.now, "run")
    s.turn = 1
    turn = Turn(s, guard=None)
    step = turn.next(Ready(), NOW)
    assert type(step).__name__ == "Compact" and step.plan.upto == 2
    assert isinstance(turn.next(Compacted(), NOW), CallModel)
