"""Calls completed from outside through the pure machine, the book of outside waits, the tool's
options and the completion URL's signature, with no server: the wait after the tool's start, a
completion's result or failure, both timeouts, and every completion the door must refuse before
anything is recorded."""

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import BaseModel

from durable_agent_runner import Agent, tool
from durable_agent_runner.config import completion
from durable_agent_runner.machine import call as m
from durable_agent_runner.machine.approvals import DecisionRefused
from durable_agent_runner.machine.calls import plan_calls
from durable_agent_runner.machine.outside import Outside, for_model, timeout_record
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.workflows.patches import OUTSIDE_PATCH
from durable_agent_runner.workflows.types import AgentSpec, CompleteCall, EventKind, PendingOutside, ToolCall

pytestmark = pytest.mark.pure
NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


class Rendered(BaseModel):
    pages: int


def agent(**options: object) -> AgentSpec:
    @tool(completes="outside", outside_result=Rendered, **options)  # type: ignore[misc]
    def render(doc: str) -> str:
        """Start rendering."""
        return "job-1"

    return Agent(name="outsider", tools=[render]).spec()


def ctx(spec: AgentSpec, patched: bool = True) -> m.Ctx:
    return m.Ctx(agent=spec, now=NOW, run_id="run-1", patched=lambda _id: patched)


def started(spec: AgentSpec, patched: bool = True, is_error: bool = False) -> m.Transition:
    c = ctx(spec, patched)
    planned = plan_calls(spec, [ToolCall(call_id="call_1_0", name="render", arguments='{"doc": "a"}')], set()).calls[0]
    first = m.start(planned, 1, c)
    assert isinstance(first.steps[0], m.RunTool)  # its activity starts the work, as any tool's
    return m.advance(first.call, m.Ran(call_id="call_1_0", content="job-1", is_error=is_error), c)


def book(spec: AgentSpec) -> Outside:
    tool_spec = spec.tool("render")
    assert tool_spec is not None and tool_spec.outside is not None
    b = Outside()
    b.wait(
        PendingOutside(call_id="call_1_0", tool="render", turn=1, since=NOW, deadline=NOW + timedelta(hours=1)),
        tool_spec.outside,
    )
    return b


def test_after_its_start_the_call_waits_for_the_completion_with_the_tools_timeout():
    t = started(agent(outside_timeout_seconds=60))
    assert t.call.stage is m.Stage.OUTSIDE and t.call.started == "job-1"
    (wait,) = t.steps
    assert isinstance(wait, m.AwaitOutside) and wait.timeout == timedelta(seconds=60)
    (note,) = t.notes
    assert note.kind is EventKind.OUTSIDE_WAITING and note.text == "job-1"
    assert t.call.waits_for() == "waiting for outside completion of render (call_1_0)"


def test_a_failed_start_and_runs_recorded_before_the_patch_end_as_any_call():
    assert started(agent(), is_error=True).call.stage is m.Stage.DONE  # the model reads the tool's error
    old = started(agent(), patched=False)
    assert old.call.stage is m.Stage.DONE and old.call.message is not None and old.call.message.content == "job-1"
    asked: list[str] = []
    c = m.Ctx(agent=agent(), now=NOW, run_id="r", patched=lambda i: asked.append(i) or True)
    planned = plan_calls(c.agent, [ToolCall(call_id="c", name="render", arguments="{}")], set()).calls[0]
    m.advance(m.start(planned, 1, c).call, m.Ran(call_id="c", content="x"), c)
    assert asked == [OUTSIDE_PATCH]


def test_a_completion_is_the_result_and_a_failure_an_error():
    spec = agent()
    t = started(spec)
    b = book(spec)
    record = b.apply(CompleteCall(call_id="call_1_0", result='{"pages": 3}', by="renderer"), NOW)
    done = m.advance(t.call, m.Completed(record=record), ctx(spec))
    assert done.call.message is not None and done.call.message.content == '{"pages": 3}'
    assert not done.call.message.is_error
    assert [n.kind for n in done.notes] == [EventKind.OUTSIDE_COMPLETED, EventKind.TOOL_FINISHED]
    b = book(spec)
    failed = b.apply(CompleteCall(call_id="call_1_0", fail=" no paper ", by="renderer"), NOW)
    assert for_model(failed) == ("error: tool 'render' failed: no paper (reported by renderer)", True)


def test_the_timeout_tells_the_model_or_sends_the_call_to_a_person():
    quick = agent(outside_timeout_seconds=5)
    told = m.advance(started(quick).call, m.TimedOut(call_id="call_1_0"), ctx(quick))
    assert told.call.message is not None and told.call.message.is_error
    assert told.call.message.content == "error: tool 'render' failed: no outside completion within 5s"
    assert told.call.completion is not None and told.call.completion.automatic
    spec = agent(outside_timeout_seconds=5, on_outside_timeout="person")
    doubted = m.advance(started(spec).call, m.TimedOut(call_id="call_1_0"), ctx(spec))
    assert doubted.call.stage is m.Stage.IN_DOUBT and doubted.call.doubt is not None
    assert doubted.call.doubt.ended == "no outside completion within 5s"
    assert isinstance(doubted.steps[0], m.AskPerson) and doubted.steps[0].about == "doubt"


def test_the_door_refuses_a_bad_completion_before_anything_is_recorded():
    b = book(agent())
    with pytest.raises(DecisionRefused, match="no call waits for an outside completion with id call_9_9") as unknown:
        b.check(CompleteCall(call_id="call_9_9", result="1"))
    assert unknown.value.kind == "UnknownCall"
    with pytest.raises(DecisionRefused, match="is not JSON") as bad:
        b.check(CompleteCall(call_id="call_1_0", result="{"))
    assert bad.value.kind == "InvalidResult"
    with pytest.raises(DecisionRefused, match="does not match the tool's result type: pages"):
        b.check(CompleteCall(call_id="call_1_0", result='{"pages": "many"}'))
    with pytest.raises(DecisionRefused, match="needs a reason"):
        b.check(CompleteCall(call_id="call_1_0", fail="  "))
    assert b.records == [] and "call_1_0" in b.pending
    b.apply(CompleteCall(call_id="call_1_0", result='{"pages": 1}', by="renderer"), NOW)
    with pytest.raises(DecisionRefused, match="call call_1_0 was already completed by renderer at 2026-12-02 12:00:00"):
        b.check(CompleteCall(call_id="call_1_0", fail="again"))
    timed = book(agent())
    timed.settle(timeout_record("call_1_0", "render", agent().tools[0].outside, NOW))  # type: ignore[arg-type]
    with pytest.raises(DecisionRefused, match="timed out at"):
        timed.check(CompleteCall(call_id="call_1_0", result='{"pages": 1}'))
    to_person = book(agent())
    to_person.expire("call_1_0")
    with pytest.raises(DecisionRefused, match="is in doubt: a person resolves it"):
        to_person.check(CompleteCall(call_id="call_1_0", result='{"pages": 1}'))
    with pytest.raises(ValueError, match="one of them"):
        CompleteCall(call_id="call_1_0", result="1", fail="x")


def test_status_and_the_web_ui_show_the_wait():
    s = RunState()
    s.outside = book(agent())
    assert [o.call_id for o in s.status("run-1").outside] == ["call_1_0"]
    assert "python client.py complete RUN_ID call_1_0 --result JSON | --fail REASON" in s.details()
    s.abandon()
    assert s.status("run-1").outside == []


def test_the_tools_options_are_checked_when_it_is_made():
    with pytest.raises(ValueError, match="only go with completes='outside'"):
        tool(outside_timeout_seconds=5)(lambda_tool())
    with pytest.raises(ValueError, match="cannot be local"):
        tool(completes="outside", local=True)(lambda_tool())
    with pytest.raises(ValueError, match="completes must be 'inside' or 'outside'"):
        tool(completes="elsewhere")(lambda_tool())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="less than or equal"):
        tool(completes="outside", outside_timeout_seconds=10**9)(lambda_tool())
    with pytest.raises(TypeError, match="did you mean on_outside_timeout"):
        tool(on_outside_timout="person")(lambda_tool())  # type: ignore[call-arg]
    plain = tool(completes="outside")(lambda_tool())
    assert plain.spec().outside is not None and plain.spec().outside.result_schema is None  # any JSON


def lambda_tool():
    def job(doc: str) -> str:
        """Start a job."""
        return doc

    return job


def test_a_completion_url_holds_for_its_call_until_it_expires():
    key = b"k" * 32
    url = completion.url("https://hooks.example/", key, "run/1", "call_1_0", 1000.2)
    assert url.startswith("https://hooks.example/complete/run%2F1/call_1_0?exp=1001&sig=")
    sig = url.rsplit("sig=", 1)[1]
    assert completion.check(key, "run/1", "call_1_0", "1001", sig, now=1000) is None
    assert "expired" in (completion.check(key, "run/1", "call_1_0", "1001", sig, now=1002) or "")
    assert "does not match" in (completion.check(key, "run/1", "call_1_1", "1001", sig, now=1000) or "")
    assert "does not match" in (completion.check(b"x" * 32, "run/1", "call_1_0", "1001", sig, now=1000) or "")
    assert "not signed" in (completion.check(key, "run/1", "call_1_0", "", sig, now=1000) or "")


def test_the_consoles_run_page_shows_the_wait_and_how_to_complete_it():
    from durable_agent_runner.console import views
    from durable_agent_runner.console.waits import Outside as Shown

    call = PendingOutside(
        call_id="call_1_0", tool="render", turn=1, since=NOW, deadline=NOW + timedelta(hours=1), started="<job-1>"
    )
    row = views.call_row(Shown("run-1", "outsider", call), with_run=True)
    assert "durable-agent-runner complete run-1 call_1_0 --result JSON | --fail REASON" in row
    assert "&lt;job-1&gt;" in row and "<job-1>" not in row and "the model is told" in row


def test_serve_hooks_serves_completions_alone_with_a_completion_secret(monkeypatch):
    import argparse

    from durable_agent_runner.cli import hooks_serve
    from durable_agent_runner.cli.common import UsageError
    from durable_agent_runner.config.env import ClientSettings

    monkeypatch.delenv("COMPLETION_SECRET", raising=False)
    args = argparse.Namespace(port=8238, max_body=1024 * 1024, config=None, client_settings=ClientSettings.load())
    with pytest.raises(UsageError, match="or set COMPLETION_SECRET to serve completion URLs"):
        hooks_serve.check(args)
    monkeypatch.setenv("COMPLETION_SECRET", "s" * 16)
    args.client_settings = ClientSettings.load()
    hooks_serve.check(args)
    assert args.hooks == {} and args.completion_key == b"s" * 16
