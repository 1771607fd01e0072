"""The model call a lone routed tool's activity makes (machine/requests.py), without Temporal:
when the turn asks for it, and when it takes the reply, drops it, and counts its tokens."""

from __future__ import annotations

import dataclasses

from durable_agent_runner.machine.calls import RunTools
from durable_agent_runner.machine.outcomes import SESSION_HISTORY_EVENTS, Facts, Ready, Resumed, ToolsRan
from durable_agent_runner.machine.session import SessionState
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.machine.turn import CallModel, Pause, Turn
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.patches import AHEAD_CONTINUE_PATCH
from tests.test_turn_machine import AGENT, NOW, reply, state

ROUTED = AGENT.model_copy(
    update={
        "tools": [
            t.ToolSpec(name="get_weather"),
            t.ToolSpec(name="lookup", local=True),
            t.ToolSpec(name="send", approval="always"),
            t.ToolSpec(name="pay", once=True),
        ]
    }
)


def planned(s: RunState, *calls: tuple[str, str]) -> tuple[Turn, RunTools]:
    turn = Turn(s, guard=None)
    assert isinstance(turn.next(Ready(), NOW), CallModel)
    step = turn.next(reply(None, *calls), NOW)
    assert isinstance(step, RunTools)
    return turn, step


def made_by_worker(
    s: RunState, step: RunTools, result: t.ToolMessage, text: str = "done", tokens: int = 7
) -> t.AheadReply:
    """What a worker brings back: the request with the transcript's hash as it then reads."""
    assert step.ahead is not None
    after = RunState()
    after.messages = [*s.messages, result]
    request = step.ahead.model_copy(update={"digest": after.digest(), "transcript_len": len(after.messages)})
    usage = t.Usage(input_tokens=tokens, total_tokens=tokens)
    return t.AheadReply(request=request, reply=t.ModelReply(message=t.AssistantMessage(content=text), usage=usage))


def test_a_lone_routed_call_asks_for_the_next_model_call_as_the_turn_would_make_it():
    s = state(ROUTED)
    _, step = planned(s, ("c1", "get_weather"))
    assert step.ahead is not None
    assert (step.ahead.agent, step.ahead.turn, step.ahead.transcript_len) == ("a", 2, len(s.messages) + 1)
    assert step.ahead.with_reply is not None and step.ahead.with_reply.tools == ["lookup"]


def test_no_call_ahead_for_two_calls_a_person_a_once_tool_a_cheap_tool_a_budget_or_a_breakpoint():
    for calls in (
        [("c1", "get_weather"), ("c2", "get_weather")],
        [("c1", "send")],
        [("c1", "pay")],
        [("c1", "lookup")],
    ):
        assert planned(state(ROUTED), *calls)[1].ahead is None, calls
    budgeted = ROUTED.model_copy(update={"token_budget": 10_000})
    assert planned(state(budgeted), ("c1", "get_weather"))[1].ahead is None
    stepped = state(ROUTED)
    stepped.breakpoints = t.Breakpoints(at_turns=[2])
    assert planned(stepped, ("c1", "get_weather"))[1].ahead is None
    assert planned(state(ROUTED.model_copy(update={"local_model_call": True})), ("c1", "get_weather"))[1].ahead is None


def test_the_turn_takes_the_reply_made_ahead_for_exactly_its_call_and_counts_it_once():
    s = state(ROUTED)
    turn, step = planned(s, ("c1", "get_weather"))
    result = t.ToolMessage(call_id="c1", name="get_weather", content="sunny")
    made = made_by_worker(s, step, result)
    call = turn.next(ToolsRan({"c1": result}, made), NOW)
    assert isinstance(call, CallModel) and call.made == made and s.turn == 2
    done = turn.next(reply("done", tokens=7), NOW)
    assert done.output == "done" and s.usage.total_tokens == 17  # the first reply's 10 and this one's 7


def test_a_reply_made_for_another_transcript_is_dropped_and_its_tokens_count():
    s = state(ROUTED)
    turn, step = planned(s, ("c1", "get_weather"))
    made = made_by_worker(s, step, t.ToolMessage(call_id="c1", name="get_weather", content="rain"))
    call = turn.next(ToolsRan({"c1": t.ToolMessage(call_id="c1", name="get_weather", content="sunny")}, made), NOW)
    assert isinstance(call, CallModel) and call.made is None  # the turn calls the model itself
    assert s.usage.total_tokens == 17 and s.events[-1].kind == "model_dropped"


def test_a_pause_asked_for_while_the_tool_ran_drops_the_reply_and_pauses_before_the_model():
    s = state(ROUTED)
    turn, step = planned(s, ("c1", "get_weather"))
    result = t.ToolMessage(call_id="c1", name="get_weather", content="sunny")
    made = made_by_worker(s, step, result)
    s.pause_request = t.PauseRequest(by="alice")
    paused = turn.next(ToolsRan({"c1": result}, made), NOW)
    assert isinstance(paused, Pause) and paused.where == "before_model" and s.turn == 1
    assert s.usage.total_tokens == 17 and s.events[-1].kind == "model_dropped"
    s.pause_request = None
    resumed = turn.next(Resumed(), NOW)
    assert isinstance(resumed, CallModel) and resumed.made is None


def test_no_call_ahead_once_the_run_knows_it_continues_as_new_first_unless_its_history_predates_that():
    """Temporal suggested continue-as-new, or a session's history passed its bound mid-answer: the
    run continues as new before its next model call, so a reply made ahead would be dropped. A run
    recorded before 1.4.8 (no patch marker) still asked for it, and replays so."""
    asked: list[str] = []

    def patched(patch_id: str) -> bool:
        asked.append(patch_id)
        return True

    def ahead(facts: Facts, session: bool = False) -> t.ModelCallInput | None:
        s = state(ROUTED)
        if session:
            s.session = SessionState()
        turn = Turn(s, guard=None)
        assert isinstance(turn.next(Ready(), NOW), CallModel)
        step = turn.next(reply(None, ("c1", "get_weather")), facts)
        assert isinstance(step, RunTools)
        return step.ahead

    suggested = dataclasses.replace(NOW, continue_suggested=True, patched=patched)
    assert ahead(suggested) is None and asked == [AHEAD_CONTINUE_PATCH]
    long_session = dataclasses.replace(NOW, history_events=SESSION_HISTORY_EVENTS + 1, patched=patched)
    assert ahead(long_session, session=True) is None
    assert ahead(long_session) is not None  # a single run's history size is Temporal's to judge
    before = dataclasses.replace(NOW, continue_suggested=True, patched=lambda _id: False)
    assert ahead(before) is not None
    asked.clear()
    assert ahead(dataclasses.replace(NOW, patched=patched)) is not None and asked == []  # asked only where it decides
