"""A durable fallback across models (machine/fallback.py), on the dev server: a model that fails
for good hands the same turn to the next, the switch is in the run's story and state, a request's
own fault does not switch, and a worker killed after the switch resumes on the model reached."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError

from durable_agent_runner import Agent, Registry
from durable_agent_runner.activities.prices import Price, PriceTable
from durable_agent_runner.cli.status import render_status
from durable_agent_runner.client import AgentClient
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.console.data import run_view
from durable_agent_runner.console.views_run import story
from durable_agent_runner.machine import fallback
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.patches import MODEL_FALLBACK_PATCH, RELEASE_2_PATCH
from tests.conftest import run_id
from tests.helpers import calls, replay, script, start, transcript

HISTORIES = Path(__file__).parent / "histories"
FOREVER = 1000  # faults: more than any retry bound uses


def worker_settings(llm, **more: str) -> LLMSettings:
    # Two attempts per call: a provider that answers 529 forever uses its bound in about a second.
    return LLMSettings(
        base_url=llm.base_url,
        model="demo",
        openai_base_url=llm.base_url,
        openai_api_key="sk-Q7f3a9c2eZ41",
        max_attempts=2,
        **more,
    )


@pytest.fixture
def settings(llm) -> LLMSettings:
    return worker_settings(llm)


def requests_for(llm, model: str) -> int:
    return sum(r["model"] == model for r in llm.requests())


def answers_then_down(llm, model: str, turns: int) -> None:
    """`model` answers its first `turns` calls, then 529 forever: faults are taken in order, and a
    0 ms delay answers as usual."""
    llm.add_faults([{"kind": "delay", "ms": 0, "count": turns, "model": model}])
    llm.add_faults([{"kind": "status", "status": 529, "count": FOREVER, "model": model, "type": "overloaded_error"}])


async def events(handle) -> list[t.RunEvent]:
    page = await handle.query(t.EVENTS_QUERY, t.EventsQuery(), result_type=t.EventsPage)
    return page.events


async def test_a_provider_down_for_good_hands_the_same_turn_to_the_next_model(client, task_queue, worker_factory, llm):
    down = script(llm, {"content": "never said"})
    up = script(llm, calls(("get_weather", {"city": "Paris"})), {"content": "Sunny in Paris."})
    llm.add_faults([{"kind": "status", "status": 529, "count": FOREVER, "model": down}])
    async with worker_factory():
        handle = await start(client, task_queue, "Weather in Paris?", model=f"openai:{down}", fallback_models=[up])
        result = await handle.result()
        story = await events(handle)
        status = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)
        await replay(handle)
    assert result.output == "Sunny in Paris."
    switches = [e for e in story if e.kind == t.EventKind.MODEL_FALLBACK]
    assert len(switches) == 1
    assert switches[0].turn == 1
    assert f"openai:{down} failed" in switches[0].detail and "529" in switches[0].detail
    assert f"goes to {up}" in switches[0].detail
    assert requests_for(llm, down) == 2  # its retry bound, then never again: turn 2 asks the model reached
    assert requests_for(llm, up) == 2
    assert set(result.usage_by_model) == {up}  # cost per model: the failed calls cost nothing
    assert result.usage_by_model[up].requests == 2
    assert status.usage_by_model == result.usage_by_model
    if os.environ.get("RECORD_HISTORIES"):  # re-record only on purpose (tests/test_patches.py reads it)
        history = await handle.fetch_history()
        (HISTORIES / "model_fallback_2_0.json").write_text(history.to_json())


async def test_the_switch_is_2_0_s_path_with_the_release_marker_alone(client, task_queue, worker_factory, llm):
    down, up = script(llm, {"content": "x"}), script(llm, {"content": "from the fallback"})
    llm.add_faults([{"kind": "status", "status": 503, "count": FOREVER, "model": down}])
    async with worker_factory():
        handle = await start(client, task_queue, "hi", model=f"openai:{down}", fallback_models=[up])
        assert (await handle.result()).output == "from the fallback"
        history = await handle.fetch_history()
    markers = [e for e in history.events if e.HasField("marker_recorded_event_attributes")]
    recorded = b"".join(m.SerializeToString() for m in markers)
    assert RELEASE_2_PATCH.encode() in recorded and MODEL_FALLBACK_PATCH.encode() not in recorded


async def test_a_local_model_call_falls_back_too_on_2_0(client, task_queue, worker_factory, llm):
    """1.4 could not ask its patch after a local activity; a 2.0 run asks none mid-run, so an agent
    with local_model_call switches as a routed one does, and a status query during its calls
    leaves the history replayable."""
    down, up = script(llm, {"content": "x"}), script(llm, {"content": "from the fallback, locally"})
    llm.add_faults([{"kind": "status", "status": 503, "count": FOREVER, "model": down}])
    quick = Agent(
        name="quick", instructions="Answer.", model=f"openai:{down}", fallback_models=[up], local_model_call=True
    )
    async with worker_factory(registry=Registry(agents=[quick])):
        handle = await start(client, task_queue, "hi", agent="quick")
        while (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
            await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)  # queries while the local calls run
            await asyncio.sleep(0.05)
        result = await handle.result()
        story = await events(handle)
        history = await handle.fetch_history()
        await replay(handle)
    if os.environ.get("RECORD_HISTORIES"):  # re-record only on purpose (tests/test_patches.py reads it)
        (HISTORIES / "local_fallback_2_0.json").write_text(history.to_json())
    assert result.output == "from the fallback, locally"
    (switch,) = [e for e in story if e.kind == t.EventKind.MODEL_FALLBACK]
    assert f"openai:{down} failed" in switch.detail and f"goes to {up}" in switch.detail
    scheduled = [e for e in history.events if e.HasField("activity_task_scheduled_event_attributes")]
    assert scheduled == [], "every model call ran as a local activity"


async def test_a_session_s_next_message_asks_its_first_model_again(client, task_queue, worker_factory, llm):
    """The first model is down for message 1, whose answer goes to the fallback; its provider is
    back by message 2, which it answers: a session started on 2.0 does not stay on the fallback."""
    first = script(llm, {"content": "from the first model, back"})
    backup = script(llm, {"content": "from the fallback"}, {"content": "the fallback again"})
    llm.add_faults([{"kind": "status", "status": 503, "count": 2, "model": first}])  # its retry bound, once
    agents = AgentClient(client, task_queue=task_queue)
    async with worker_factory():
        opened = t.RunInput(prompt="", agent="demo", session=True, model=f"openai:{first}", fallback_models=[backup])
        started = await client.start_workflow(t.WORKFLOW_NAME, opened, id=run_id("chat"), task_queue=task_queue)
        session = agents.get_session(started.id)
        await session.send("hello")
        one = await session.answer(1, wait=60)
        await session.send("hello again")
        two = await session.answer(2, wait=60)
        story = await events(client.get_workflow_handle(session.id))
        await session.end("test over")
        await replay(client.get_workflow_handle(session.id))
        if os.environ.get("RECORD_HISTORIES"):  # re-record only on purpose (tests/test_patches.py reads it)
            history = await client.get_workflow_handle(session.id).fetch_history()
            (HISTORIES / "session_fallback_2_0.json").write_text(history.to_json())
    assert (one, two) == ("from the fallback", "from the first model, back")
    assert requests_for(llm, first) == 3 and requests_for(llm, backup) == 1
    (switch,) = [e for e in story if e.kind == t.EventKind.MODEL_FALLBACK]
    assert switch.turn == 1
    calls = [e.detail for e in story if e.kind == t.EventKind.MODEL_STARTED]
    assert calls == [f"openai:{first}", backup, f"openai:{first}"]  # message 2 starts on the first model


async def test_a_request_s_own_fault_does_not_switch(client, task_queue, worker_factory, llm):
    bad, up = script(llm, {"content": "x"}), script(llm, {"content": "never asked"})
    llm.add_faults([{"kind": "status", "status": 400, "count": FOREVER, "model": bad, "message": "bad schema"}])
    async with worker_factory():
        handle = await start(client, task_queue, "hi", model=bad, fallback_models=[up])
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()
        story = await events(handle)
    assert "bad schema" in str(failure.value.cause)
    assert not any(e.kind == t.EventKind.MODEL_FALLBACK for e in story)
    assert requests_for(llm, up) == 0


async def test_a_provider_with_no_key_on_the_worker_is_skipped_at_once(client, task_queue, worker_factory, llm):
    up = script(llm, {"content": "answered by the next one"})
    async with worker_factory():  # no ANTHROPIC_API_KEY on this worker
        handle = await start(client, task_queue, "hi", model="anthropic:claude-sonnet-4-5", fallback_models=[up])
        result = await handle.result()
        story = await events(handle)
    assert result.output == "answered by the next one"
    (switch,) = [e for e in story if e.kind == t.EventKind.MODEL_FALLBACK]
    assert "ANTHROPIC_API_KEY is not set" in switch.detail


async def test_every_model_down_fails_the_run_with_the_last_one_s_words(client, task_queue, worker_factory, llm):
    first, second = script(llm, {"content": "x"}), script(llm, {"content": "y"})
    llm.add_faults([{"kind": "status", "status": 503, "count": FOREVER, "model": m} for m in (first, second)])
    async with worker_factory():
        handle = await start(client, task_queue, "hi", model=first, fallback_models=[second])
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()
        story = await events(handle)
    assert "503" in str(failure.value.cause)
    assert [e.kind for e in story].count(t.EventKind.MODEL_FALLBACK) == 1


async def test_a_worker_killed_after_the_switch_resumes_on_the_model_reached(client, task_queue, worker_factory, llm):
    down = script(llm, {"content": "x"})
    up = script(llm, calls(("get_weather", {"city": "Oslo"})), {"content": "Cold in Oslo."})
    llm.add_faults([{"kind": "status", "status": 529, "count": FOREVER, "model": down}])
    llm.add_faults([{"kind": "delay", "ms": 4000, "model": up}])  # the next model's first reply is slow
    async with worker_factory():
        handle = await start(client, task_queue, "Oslo?", model=down, fallback_models=[up])
        for _ in range(600):  # while its queries race the run's first tasks (what once broke its replay)
            if any(e.kind == t.EventKind.MODEL_FALLBACK for e in await events(handle)):
                break
            await asyncio.sleep(0.05)
        else:
            pytest.fail("no model_fallback event within 30 s")
        asked = requests_for(llm, down)
    async with worker_factory():  # a new worker replays the run and goes on from the model it reached
        result = await asyncio.wait_for(handle.result(), 120)
        status = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)
    assert result.output == "Cold in Oslo."
    assert requests_for(llm, down) == asked  # the failed model is never asked again
    assert set(status.usage_by_model) == {up}


async def test_the_client_refuses_a_model_string_with_no_model(client):
    agents = AgentClient(client, task_queue="unused")
    with pytest.raises(ValueError, match="names the provider anthropic but no model"):
        await agents.start("demo", "hi", model="anthropic:")
    with pytest.raises(ValueError, match="names the provider gemini but no model"):
        await agents.start("demo", "hi", fallback_models=["gemini: "])
    with pytest.raises(TypeError, match="list of model strings"):
        await agents.start("demo", "hi", fallback_models="openai:gpt-4.1")  # type: ignore[arg-type]


def test_which_failures_switch():
    agent = t.AgentSpec(name="a", model="anthropic:claude-x", fallback_models=["openai:gpt-4.1"])
    for kind in ("ModelHTTP529", "ModelHTTP429", "ModelHTTP401", "ModelQuotaExceeded", "ModelTimeout", None):
        assert fallback.falls_back(agent, kind), kind
    for kind in ("ModelHTTP400", "ModelHTTP422", "ModelSettingsInvalid"):
        assert not fallback.falls_back(agent, kind), kind
    assert not fallback.falls_back(agent.model_copy(update={"fallback_models": []}), "ModelHTTP529")


def test_a_switch_moves_only_that_agent_on_and_counts_the_thinking_left_behind():
    member = t.AgentSpec(name="b", model="gemini:g", fallback_models=["openai:o", "x"])
    first = t.AgentSpec(name="a", model="m", team=[member])
    moved = fallback.switched(first, "b")
    assert (moved.model, moved.member("b").model, moved.member("b").fallback_models) == ("m", "openai:o", ["x"])
    thinking = [t.Thinking(provider="anthropic", text="hm", signature="sig")]
    messages: list[t.Message] = [t.UserMessage(content="q"), t.AssistantMessage(content="a", thinking=thinking)]
    assert fallback.thinking_lost(messages, "openai:gpt-4.1") == 1
    assert fallback.thinking_lost(messages, "anthropic:claude-x") == 0


async def test_the_switch_shows_in_status_the_cli_the_console_and_the_export(client, task_queue, worker_factory, llm):
    down, up = script(llm, {"content": "x"}), script(llm, {"content": "answered after the switch"})
    llm.add_faults([{"kind": "status", "status": 529, "count": FOREVER, "model": down}])
    agents = AgentClient(client, task_queue=task_queue)
    async with worker_factory():
        run = await agents.start("demo", "hi", model=f"openai:{down}", fallback_models=[up])
        assert await run.result(wait=60) == "answered after the switch"
        info = await run.status()
        view = await run_view(agents, run.id)
    exported = await run.export()
    (switch,) = info.switches
    assert (switch.from_model, switch.to_model, switch.turn, switch.agent) == (f"openai:{down}", up, 1, "demo")
    assert "ModelHTTP529" in switch.why and info.model == up
    text = render_status(info.as_dict())
    assert f"· model {up}" in text and f"fallback: openai:{down} → {up} in turn 1" in text
    page = story(view)
    assert "<h2>Model fallbacks</h2>" in page and f"openai:{down} → {up} in turn 1" in page
    lines = [line for line in exported if line["type"] == "model_fallback"]
    assert len(lines) == 1 and lines[0]["from"] == f"openai:{down}" and lines[0]["to"] == up and lines[0]["turn"] == 1
    assert "529" in lines[0]["error"]
    assert [line["type"] for line in exported].count("decision") == 1  # the fallback is no decision of the run


def test_an_agent_lists_its_models_in_order_and_a_bad_one_is_refused():
    from durable_agent_runner import Agent

    careful = Agent(name="careful", model=["anthropic:claude-x", "gemini:g"], fallback_models=["openai:o"])
    assert (careful.model, careful.fallback_models) == ("anthropic:claude-x", ["gemini:g", "openai:o"])
    assert careful.spec().fallback_models == ["gemini:g", "openai:o"]
    assert Agent(name="plain").spec().fallback_models == []  # its version digest is as before
    # a run's --model that is one of the agent's fallbacks is not tried again after it failed
    assert careful.spec(model="gemini:g").fallback_models == ["openai:o"]
    assert careful.spec(model="openai:o").fallback_models == ["gemini:g"]
    assert careful.spec(model="demo").fallback_models == ["gemini:g", "openai:o"]
    with pytest.raises(ValueError, match="names no model"):
        Agent(name="none", model=[])
    with pytest.raises(ValueError, match="names the provider openai but no model"):
        Agent(name="bad", model="gpt-4.1", fallback_models=["openai:"])


async def test_each_model_s_cost_is_counted_apart_when_both_answered(client, task_queue, worker_factory, llm):
    usage = {"prompt_tokens": 1000, "completion_tokens": 100, "cached_tokens": 0}
    first = script(llm, {**calls(("get_weather", {"city": "Paris"})), "usage": usage}, {"content": "never said"})
    later = {**usage, "prompt_tokens": 2000, "completion_tokens": 50}
    second = script(llm, {"content": "Sunny in Paris.", "usage": later})
    answers_then_down(llm, first, turns=1)
    prices = PriceTable({first: Price(input=1000, output=2000), second: Price(input=10, output=100)})  # by own name
    async with worker_factory(prices=prices):
        handle = await start(client, task_queue, "Weather in Paris?", model=f"openai:{first}", fallback_models=[second])
        result = await handle.result()
        status = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)
    assert result.output == "Sunny in Paris."
    (switch,) = status.switches
    assert (switch.from_model, switch.to_model, switch.turn) == (f"openai:{first}", second, 2)
    by_model = status.usage_by_model
    assert set(by_model) == {f"openai:{first}", second}
    assert by_model[f"openai:{first}"].requests == 1 and by_model[second].requests == 1  # failed calls cost nothing
    assert by_model[f"openai:{first}"].cost_usd == pytest.approx(1000 * 0.001 + 100 * 0.002)  # $1.20
    assert by_model[second].cost_usd == pytest.approx(2000 * 0.00001 + 50 * 0.0001)  # $0.025
    assert status.usage.cost_usd == pytest.approx(1.2 + 0.025)
    assert result.usage_by_model == by_model


async def test_a_switch_after_thinking_tool_turns_sends_the_calls_on_and_says_the_thinking_was_dropped(
    client, task_queue, worker_factory, llm
):
    claude = script(
        llm,
        {**calls(("get_weather", {"city": "Paris"})), "thinking": "Paris first."},
        {**calls(("get_weather", {"city": "Oslo"})), "thinking": "Now Oslo."},
        {"content": "never said"},
    )
    gpt = script(llm, {"content": "Paris is warmer than Oslo."})
    answers_then_down(llm, claude, turns=2)
    anthropic = worker_settings(llm, anthropic_base_url=llm.url, anthropic_api_key="a-Jm4Tn7Ps1Yc6")
    async with worker_factory(settings=anthropic):
        handle = await start(
            client,
            task_queue,
            "Paris or Oslo?",
            model=f"anthropic:{claude}",
            fallback_models=[f"openai:{gpt}"],
            model_settings=t.ModelSettings(reasoning_effort="high"),  # adaptive thinking; Chat Completions takes it too
        )
        result = await handle.result()
        story = await events(handle)
        messages = await transcript(handle)
        await replay(handle)
    assert result.output == "Paris is warmer than Oslo."
    to_claude = [r for r in llm.requests() if r["model"] == claude]
    assert [r["status"] for r in to_claude] == [200, 200, 529, 529] and all(r["api"] == "anthropic" for r in to_claude)
    thought = [m for m in messages if isinstance(m, t.AssistantMessage) and m.thinking]
    assert len(thought) == 2  # the run keeps them; only the next provider does not get them
    (switch,) = [e for e in story if e.kind == t.EventKind.MODEL_FALLBACK]
    assert switch.turn == 3 and f"goes to openai:{gpt}" in switch.detail
    assert switch.detail.endswith("; 2 thinking blocks of another provider not sent")
    (sent,) = [r["body"] for r in llm.requests() if r["model"] == gpt]
    asked = [c for m in sent["messages"] if m["role"] == "assistant" for c in m.get("tool_calls", [])]
    answered = {m["tool_call_id"]: m["content"] for m in sent["messages"] if m["role"] == "tool"}
    results = {m.call_id: m.content for m in messages if isinstance(m, t.ToolMessage)}
    assert [json.loads(c["function"]["arguments"]) for c in asked] == [{"city": "Paris"}, {"city": "Oslo"}]
    assert answered == results and set(answered) == {c["id"] for c in asked} and len(answered) == 2
    assert "Paris first." not in json.dumps(sent) and "signature" not in json.dumps(sent)


async def test_a_setting_a_fallback_model_s_provider_lacks_is_refused_when_the_run_starts(
    client, task_queue, worker_factory, llm
):
    claude, gpt = script(llm, {"content": "never asked"}), script(llm, {"content": "never asked"})
    async with worker_factory():
        handle = await start(
            client,
            task_queue,
            "hi",
            model=f"anthropic:{claude}",  # Anthropic takes a thinking budget; Chat Completions has none
            fallback_models=[f"openai:{gpt}"],
            model_settings=t.ModelSettings(thinking_tokens=2048),
        )
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()
    cause = str(failure.value.cause)
    assert f"model openai:{gpt}: thinking_tokens" in cause and f"anthropic:{claude}" not in cause, cause
    assert not [r for r in llm.requests() if r["model"] in (claude, gpt)]
