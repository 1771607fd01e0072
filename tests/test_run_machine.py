"""The run machine (machine/run.py) step by step, with no server and no interpreter: each step
returns a new run and leaves the one it was given as it was; a pause, a breakpoint, a steer, a
compaction, a failed answer and a session's end are the machine's to write, and what status says
comes with the step, in order, before the interpreter carries it out."""

import pickle
from datetime import UTC, datetime, timedelta

import pytest

from durable_agent_runner.machine import conversation, progress
from durable_agent_runner.machine import run as machine
from durable_agent_runner.machine.memory import Compaction
from durable_agent_runner.machine.outcomes import Facts, HandedOff, Replied, Resumed, ToolsRan
from durable_agent_runner.machine.rules import Stop
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.machine.turn import Breakpoint, CallModel, Compact, Pause
from durable_agent_runner.workflows import types as t

pytestmark = pytest.mark.pure

NOW = Facts(now=datetime(2026, 12, 4, 9, tzinfo=UTC))
AGENT = t.AgentSpec(name="ops", version="v1", tools=[t.ToolSpec(name="get_weather")], max_turns=4)


def begin(agent: t.AgentSpec = AGENT, prompt: str = "Weather in Tokyo?", **given: object) -> machine.Run:
    s = RunState()
    progress.begin(s, t.RunInput(prompt=prompt, agent=agent.name, **given))  # type: ignore[arg-type]
    progress.resolved(s, agent)
    return machine.begin(s, None, "exec-1")


def go(run: machine.Run, happened: machine.Happened, facts: Facts = NOW) -> machine.Transition:
    """One step, checked to leave the run and the happening it was given as they were."""
    before = pickle.dumps((run, happened))
    moved = machine.step(run, happened, facts)
    assert pickle.dumps((run, happened)) == before, "the step changed its input"
    return moved


def answer(text: str) -> Replied:
    usage = t.Usage(input_tokens=10, output_tokens=2, total_tokens=12)
    return Replied(t.ModelReply(message=t.AssistantMessage(content=text), usage=usage))


def kinds(run: machine.Run) -> list[str]:
    return [e.kind for e in run.books.events]


def test_a_single_run_goes_from_its_prompt_to_its_finish_and_each_step_leaves_the_last_run_as_it_was():
    start = begin()
    asked = go(start, machine.Began("Weather in Tokyo?"))
    assert isinstance(asked.step, CallModel) and asked.run.books.turn == 1
    assert start.books.messages == [] and start.books.turn == 0  # the prompt is in the new run only
    assert [m.content for m in asked.run.books.messages] == ["Weather in Tokyo?"]
    done = go(asked.run, answer("Sunny."))
    assert isinstance(done.step, machine.Finish) and done.run.answer is None
    assert (done.step.output, done.step.words) == ("Sunny.", "final answer from ops after 1 turn(s)")
    assert done.run.books.output == "Sunny." and kinds(done.run)[-1] == "final"
    assert asked.run.books.output is None and "final" not in kinds(asked.run)


def test_a_pause_is_taken_and_said_with_its_step_and_the_resume_is_said_before_the_next_step_is_chosen():
    start = begin(breakpoints=t.Breakpoints(at_turns=[1]))
    held = go(start, machine.Began("Weather in Tokyo?"))
    assert isinstance(held.step, Pause) and held.run.books.paused is not None and start.books.paused is None
    assert held.phases == ((t.Phase.PAUSED, "paused before model call 1: a breakpoint at turn 1"),)
    held.run.books.resumed_by = "dave"  # what the resume handler writes into the live books
    resumed = go(held.run, machine.PauseEnded(held.step))
    # The phase comes first, with the run as it is then: its search attributes count turn 0.
    assert resumed.step == machine.GoOn(Resumed()) and resumed.run.books.turn == 0
    assert resumed.phases == ((t.Phase.CALLING_MODEL, "resumed by dave"),)
    assert resumed.run.books.paused is None and kinds(resumed.run)[-2:] == ["paused", "resumed"]
    on = go(resumed.run, Resumed())
    assert isinstance(on.step, CallModel) and on.run.books.turn == 1
    # the call is said with its step: its phase, and the story's model_started, in the new books
    assert on.phases == ((t.Phase.CALLING_MODEL, "turn 1: ops calling the worker's default model"),)
    assert kinds(on.run)[-1] == "model_started" and kinds(resumed.run)[-1] == "resumed"


def test_a_breakpoint_before_a_tool_the_run_cannot_call_stops_it_at_its_start_before_any_model_call():
    start = begin(breakpoints=t.Breakpoints(tools=["get_wether"]))
    stopped = go(start, machine.Began("Weather in Tokyo?", check_break_tools=True))
    assert isinstance(stopped.step, Stop) and stopped.step.error == "BreakpointInvalid"
    assert stopped.step.message == (
        "a breakpoint before 'get_wether': no agent of this run has a tool of that name (get_weather)"
    )
    assert stopped.run.books.turn == 0 and stopped.run.books.messages == []
    # a run started before the patch (its replay) does not check: it goes on as it did
    asked = go(start, machine.Began("Weather in Tokyo?"))
    assert isinstance(asked.step, CallModel)
    known = go(begin(breakpoints=t.Breakpoints(tools=["get_weather"])), machine.Began("hi", check_break_tools=True))
    assert isinstance(known.step, CallModel)


def test_a_pause_nobody_resumes_fails_the_run_with_its_state_left_forkable():
    held = go(begin(breakpoints=t.Breakpoints(at_turns=[1])), machine.Began("Weather in Tokyo?"))
    assert isinstance(held.step, Pause)
    gave_up = go(held.run, machine.PauseEnded(held.step, timed_out=True))
    assert isinstance(gave_up.step, Stop) and gave_up.step.error == "PausedTooLong"
    assert "without a resume (fork it to go on)" in gave_up.step.message and gave_up.run.books.paused is None


def test_a_breakpoint_functions_edits_are_taken_by_the_machine_and_its_pause_asked_for():
    start = begin(AGENT.model_copy(update={"breakpoint": "redact"}))
    asked = go(start, machine.Began("Weather in Tokyo?"))
    assert asked.step == Breakpoint("redact", 1)
    edit = t.Edit(op="text", index=0, text="Weather in Paris?")
    result = t.HookResult(edits=[edit], pause="look first")
    held = go(asked.run, machine.BreakpointAnswered("redact", result))
    assert isinstance(held.step, Pause) and held.step.why == "breakpoint function redact: look first"
    assert [m.content for m in held.run.books.messages] == ["Weather in Paris?"]
    assert [m.content for m in asked.run.books.messages] == ["Weather in Tokyo?"]
    assert kinds(held.run)[-2:] == ["edited", "paused"]


def session(agent: t.AgentSpec = AGENT) -> machine.Run:
    start = begin(agent, prompt="", session=True)
    s = start.books
    assert s.session is not None
    for text in ("Weather in Tokyo?", "And Paris?"):
        message = t.SessionMessage(text=text, by="erin")
        s.session.accept(message, NOW.now, steer=False)
    return start


def test_a_session_answers_its_messages_in_turn_a_failed_answer_is_that_messages_error_and_idle_ends_it():
    first = go(session(), machine.Began())
    assert isinstance(first.step, CallModel) and first.run.answer is not None
    failed = go(first.run, machine.Failed("ModelHTTP503", "the provider is down"))
    assert isinstance(failed.step, CallModel)  # the next message's answer, at once
    assert [ex.error for ex in failed.run.books.session.exchanges] == ["ModelHTTP503: the provider is down", None]
    answered = go(failed.run, answer("Rainy in Paris."))
    assert isinstance(answered.step, conversation.WaitForMessage) and answered.run.answer is None
    assert answered.run.books.session.exchanges[-1].output == "Rainy in Paris."
    assert failed.run.books.session.exchanges[-1].output is None  # the exchange is a new record
    ended = go(answered.run, conversation.Woke(waited=True, timed_out=True), Facts(now=NOW.now + timedelta(hours=1)))
    assert isinstance(ended.step, machine.Finish) and ended.step.ended_by == ended.step.words[len("session ended: ") :]
    assert ended.step.output == "Rainy in Paris." and kinds(ended.run)[-1] == "ended"


def test_a_steer_is_taken_inside_the_step_and_the_model_call_reads_the_message():
    start = session(AGENT.model_copy(update={"mid_turn": "steer", "max_turns": 6}))
    s = start.books
    assert s.session is not None
    s.session.queue = s.session.queue[:1]  # one message to answer; the other arrives mid-answer
    first = go(start, machine.Began())
    call = t.ToolCall(call_id="c1", name="get_weather", arguments='{"city": "Tokyo"}')
    usage = t.Usage(input_tokens=10, output_tokens=2, total_tokens=12)
    tools = go(first.run, Replied(t.ModelReply(message=t.AssistantMessage(tool_calls=[call]), usage=usage)))
    books = tools.run.books
    assert books.session is not None
    books.session.accept(t.SessionMessage(text="Paris too", by="erin"), NOW.now, steer=True)
    ran = go(tools.run, ToolsRan({"c1": t.ToolMessage(call_id="c1", name="get_weather", content="sunny")}))
    assert isinstance(ran.step, CallModel)  # no Steer step reaches the interpreter
    assert ran.run.books.messages[-1].content == "Paris too" and kinds(ran.run)[-2:] == ["message", "model_started"]


def test_a_compaction_is_said_with_its_step_and_applied_by_the_machine_when_its_summary_comes_back():
    memory = t.MemoryPolicy(budget_tokens=100, keep_exchanges=0, strategy="trim")
    start = session(AGENT.model_copy(update={"memory": memory}))
    s = start.books
    for i in range(3):  # earlier exchanges
        s.messages += [t.UserMessage(content=f"question {i}"), t.AssistantMessage(content=f"answer {i}")]
    s.last_input_tokens = 10_000  # the last model call read more than the budget
    first = go(start, machine.Began())
    assert isinstance(first.step, Compact), first.step
    assert first.phases and first.phases[0][0] == t.Phase.COMPACTING
    plan: Compaction = first.step.plan
    compacted = go(first.run, machine.Summarized(plan))
    assert isinstance(compacted.step, CallModel) and kinds(compacted.run)[-2:] == ["compacted", "model_started"]
    assert len(compacted.run.books.messages) < len(first.run.books.messages)


TEAM = AGENT.model_copy(
    update={
        "handoffs": [
            t.HandoffSpec(agent="billing", tool_name="transfer_to_billing", input_filter="hook:last_two"),
            t.HandoffSpec(agent="support", tool_name="transfer_to_support", input_filter="remove_tools"),
        ],
        "team": [t.AgentSpec(name="billing", version="v2"), t.AgentSpec(name="support", version="v3")],
    }
)


def handing_off(to: str) -> machine.Transition:
    """A run whose model asked to hand off to `to`, up to the step after the turn's calls."""
    asked = go(begin(TEAM), machine.Began("I was charged twice"))
    call = t.ToolCall(call_id="c1", name=f"transfer_to_{to}", arguments="{}")
    usage = t.Usage(input_tokens=10, output_tokens=2, total_tokens=12)
    tools = go(asked.run, Replied(t.ModelReply(message=t.AssistantMessage(tool_calls=[call]), usage=usage)))
    return go(tools.run, ToolsRan({}))


def test_a_handoff_is_the_machines_and_what_status_and_search_say_come_before_the_next_step_is_chosen():
    moved = handing_off("support")  # a built-in filter: no step for the interpreter but the phase
    assert moved.step == machine.GoOn(HandedOff())
    assert moved.phases == ((t.Phase.RUNNING_TOOLS, "turn 1: ops handed off to support"),)
    assert [(w.key.name, w.value) for w in moved.search] == [("AgentName", "support"), ("AgentVersion", "v3")]
    assert moved.run.books.current == "support" and moved.run.books.turn == 1 and kinds(moved.run)[-1] == "handoff"
    on = go(moved.run, HandedOff())
    assert isinstance(on.step, CallModel) and on.step.agent.name == "support" and on.run.books.turn == 2


def test_a_handoff_filter_function_is_called_by_the_interpreter_and_its_answer_taken_by_the_machine():
    moved = handing_off("billing")
    assert isinstance(moved.step, machine.FilterHandoff) and moved.step.handoff.hook == "last_two"
    assert moved.run.books.current is None  # not handed off until the filter answers
    kept = [t.UserMessage(content="I was charged twice")]
    done = go(moved.run, machine.HandoffFiltered(moved.step.agent, moved.step.handoff, kept))
    assert done.step == machine.GoOn(HandedOff()) and done.run.books.current == "billing"
    assert done.run.books.messages == kept
    none = go(moved.run, machine.HandoffFiltered(moved.step.agent, moved.step.handoff, None))
    assert isinstance(none.step, Stop) and none.step.error == "AgentHookFailed"
