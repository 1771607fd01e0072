"""`ask_person` through the pure machine and the question book, with no server: the question
stage, an answer by choice or text, the timeout's default, the model's bad arguments, and every
answer the door must refuse before anything is recorded."""

import io
import json
from datetime import UTC, datetime, timedelta

import pytest

from durable_agent_runner import Agent, ask_person
from durable_agent_runner.activities.notify import headline, slack_payload
from durable_agent_runner.cli.watch import Printer
from durable_agent_runner.machine import call as m
from durable_agent_runner.machine.approvals import DecisionRefused
from durable_agent_runner.machine.calls import plan_calls
from durable_agent_runner.machine.questions import Questions, for_model, parse
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.workflows.types import (
    AgentSpec,
    AnswerQuestion,
    EventKind,
    NotifyInput,
    PendingQuestion,
    ToolCall,
)
from tests.helpers import event

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
AGENT: AgentSpec = Agent(name="planner", tools=[ask_person.with_options(timeout_seconds=60, default="Tuesday")]).spec()
QUIET: AgentSpec = Agent(name="quiet", tools=[ask_person]).spec()
DAYS = '{"question": "Which day?", "choices": ["Monday", "Tuesday", "Friday"]}'


def ctx(agent: AgentSpec = AGENT, patched: bool = True) -> m.Ctx:
    return m.Ctx(agent=agent, now=NOW, run_id="run-1", patched=lambda _id: patched)


def begin(arguments: str = DAYS, c: m.Ctx | None = None) -> m.Transition:
    c = c or ctx()
    call = ToolCall(call_id="call_1_0", name="ask_person", arguments=arguments)
    planned = plan_calls(c.agent, [call], set()).calls[0]
    assert planned.action == "ask"
    return m.start(planned, 1, c)


def book(arguments: str = DAYS) -> Questions:
    question, choices = parse(ToolCall(call_id="c", name="ask_person", arguments=arguments).args)  # type: ignore[misc]
    q = Questions()
    q.ask(PendingQuestion(call_id="call_1_0", question=question, choices=choices, since=NOW, turn=1))
    return q


def test_the_call_waits_for_an_answer_with_the_tools_timeout_and_runs_nothing():
    t = begin()
    assert t.call.stage is m.Stage.QUESTION
    assert t.call.question == "Which day?" and t.call.choices == ("Monday", "Tuesday", "Friday")
    (ask,) = t.steps
    assert isinstance(ask, m.AskPerson) and ask.about == "question" and ask.timeout == timedelta(seconds=60)
    assert [n.kind for n in t.notes] == ["tool_started", "question_asked"]
    assert t.notes[1].text == "Which day?" and t.notes[1].detail == "1. Monday; 2. Tuesday; 3. Friday"
    assert t.call.waits_for() == "waiting for an answer to: Which day?"


def test_an_answer_by_choice_is_the_result_the_model_reads_with_its_number():
    t = begin()
    q = book()
    record = q.apply(AnswerQuestion(call_id="call_1_0", choice=2, by="alice"), NOW)
    done = m.advance(t.call, m.Answered(record=record), ctx())
    assert done.call.stage is m.Stage.DONE and not done.steps
    message = done.call.message
    assert message is not None and message.content == "Tuesday (choice 2)" and not message.is_error
    assert message.answer == record and record.by == "alice" and record.at == NOW
    assert [n.kind for n in done.notes] == ["question_answered", "tool_finished"]
    assert done.notes[0].detail == "choice 2: Tuesday (by alice)"
    assert q.pending == {} and q.answered("call_1_0") == record


def test_a_text_answer_is_given_as_written_and_a_choices_text_counts_as_that_choice():
    q = book('{"question": "Where to?"}')
    record = q.apply(AnswerQuestion(call_id="call_1_0", text="  Lisbon, in May ", by="bob"), NOW)
    assert for_model(record) == "Lisbon, in May" and record.choice is None
    q = book()
    assert q.apply(AnswerQuestion(call_id="call_1_0", text="friday", by="bob"), NOW).choice == 3


@pytest.mark.parametrize(
    ("arguments", "answer", "kind", "says"),
    [
        (DAYS, {"choice": 4}, "InvalidAnswer", "choice 4 is not one of 1..3"),
        (DAYS, {"text": "Sunday"}, "InvalidAnswer", "'Sunday' is not one of the choices"),
        ('{"question": "Where?"}', {"text": "   "}, "InvalidAnswer", "may not be empty"),
        ('{"question": "Where?"}', {"choice": 1}, "InvalidAnswer", "has no choices: answer with text"),
        (DAYS, {"call_id": "call_9_9", "choice": 1}, "UnknownCall", "no question waits with call call_9_9"),
    ],
)
def test_a_bad_answer_is_refused_and_nothing_is_recorded(arguments, answer, kind, says):
    q = book(arguments)
    request = AnswerQuestion.model_validate({"call_id": "call_1_0", "by": "eve"} | answer)
    with pytest.raises(DecisionRefused) as refused:
        q.check(request)
    assert refused.value.kind == kind and says in str(refused.value)
    assert q.answers == [] and "call_1_0" in q.pending


def test_a_second_answer_is_refused_naming_the_first():
    q = book()
    q.apply(AnswerQuestion(call_id="call_1_0", choice=1, by="alice"), NOW)
    with pytest.raises(DecisionRefused, match="already answered by alice") as refused:
        q.check(AnswerQuestion(call_id="call_1_0", choice=2, by="bob"))
    assert refused.value.kind == "NotPending" and len(q.answers) == 1


def test_an_answer_is_text_or_a_choice_never_both_nor_neither():
    with pytest.raises(ValueError, match="one of them"):
        AnswerQuestion(call_id="call_1_0", text="Monday", choice=1)
    with pytest.raises(ValueError, match="one of them"):
        AnswerQuestion(call_id="call_1_0")


def test_on_timeout_the_model_reads_the_default_or_that_nobody_answered():
    t = begin()
    done = m.advance(t.call, m.TimedOut(call_id="call_1_0"), ctx())
    message = done.call.message
    assert message is not None and message.content == "no answer within 60s; the default applies: Tuesday"
    assert message.answer is not None and message.answer.automatic and message.answer.by == "timeout"
    quiet = begin('{"question": "Anyone?"}', ctx(QUIET))
    assert quiet.steps[0].timeout == timedelta(days=30)  # type: ignore[union-attr]
    silent = m.advance(quiet.call, m.TimedOut(call_id="call_1_0"), ctx(QUIET)).call.message
    assert silent is not None and silent.content == "no answer within 2.592e+06s: nobody answered"


@pytest.mark.parametrize(
    "arguments",
    [
        '{"choices": ["a"]}',
        '{"question": ""}',
        '{"question": "Q", "choices": []}',
        '{"question": "Q", "choices": [1]}',
        "x",
    ],
)
def test_bad_arguments_from_the_model_are_told_to_it_and_nobody_is_asked(arguments):
    t = begin(arguments)
    assert t.call.stage is m.Stage.DONE and not t.steps
    assert t.call.message is not None and t.call.message.is_error and "ask_person" in t.call.message.content


def test_a_run_recorded_before_the_patch_never_asks():
    t = begin(c=ctx(patched=False))
    assert t.call.stage is m.Stage.DONE and t.call.message is not None and t.call.message.is_error


def test_an_answer_that_does_not_fit_the_stage_is_a_bug_in_the_interpreter():
    t = begin()
    with pytest.raises(m.Unexpected):
        m.advance(t.call, m.Ran(call_id="call_1_0", content="x"), ctx())


def test_the_tool_is_a_plain_tool_to_the_model_and_its_options_are_checked():
    spec = AGENT.tool("ask_person")
    assert spec is not None and spec.ask is not None and spec.ask.default == "Tuesday"
    assert spec.parameters["required"] == ["question"]  # type: ignore[index]
    with pytest.raises(ValueError):
        ask_person.with_options(timeout_seconds=-1)


def test_watch_shows_the_question_and_its_answer():
    out = io.StringIO()
    printer = Printer("run-1", False, out)
    asked = event(EventKind.QUESTION_ASKED, seq=1, at=NOW, call_id="call_1_0", text="Which day?")
    printer.event(asked.model_copy(update={"detail": "1. Monday; 2. Tuesday"}))
    answered = event(EventKind.QUESTION_ANSWERED, seq=2, at=NOW, call_id="call_1_0")
    printer.event(answered.model_copy(update={"detail": "choice 2: Tuesday (by alice)"}))
    shown = out.getvalue()
    assert "? call_1_0 asks a person: Which day? [1. Monday; 2. Tuesday]" in shown
    assert "durable-agent-runner answer run-1 call_1_0 TEXT | --choice N" in shown
    assert "✔ call_1_0 answered: choice 2: Tuesday (by alice)" in shown


def test_a_question_s_notification_says_a_person_is_asked_and_links_to_answer_it():
    n = NotifyInput(
        channel="slack",
        kind="question",
        run_id="run-1",
        call_id="call_1_0",
        tool="ask_person",
        arguments=DAYS,
        agent="planner",
        turn=1,
        waiting_since=NOW,
        why="waiting for an answer to: Which day?",
        idempotency_key="k" * 40,
    )
    assert headline(n) == "planner asks a person a question"
    body = slack_payload(n, "https://c.example/inbox#call-run-1/call_1_0")
    (actions,) = [b for b in body["blocks"] if b["type"] == "actions"]  # type: ignore[index]
    assert actions["elements"][0]["text"]["text"] == "Answer in the console"
    assert "Which day?" in json.dumps(body["blocks"])  # the question, with its arguments


def test_answers_are_carried_when_the_run_continues_as_new():
    s = RunState()
    s.agent = AGENT
    q = s.questions
    q.ask(PendingQuestion(call_id="call_1_0", question="Which day?", choices=["Monday"], since=NOW, turn=1))
    q.apply(AnswerQuestion(call_id="call_1_0", choice=1, by="alice"), NOW)
    after = RunState()
    after.from_carry(s.to_carry("run-1"))
    assert [(a.call_id, a.answer, a.by) for a in after.status("run-1").answers] == [("call_1_0", "Monday", "alice")]
