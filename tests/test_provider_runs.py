"""Whole runs on each provider's own wire, on the dev server, against the fake's strict side of
that API: several turns with tools, streamed and not, usage counted, keys kept out of the story."""

from __future__ import annotations

import pytest
from temporalio.client import WorkflowFailureError

from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.workflows import types as t
from tests.helpers import calls, replay, script, start, transcript

GEMINI_KEY = "g-Zr8Kq2Lw5Xv9"
ANTHROPIC_KEY = "a-Jm4Tn7Ps1Yc6"
OPENAI_KEY = "o-Hd3Wq8Nv2Bx5"


@pytest.fixture
def settings(llm) -> LLMSettings:
    return LLMSettings(
        base_url=llm.base_url,
        model="demo",
        gemini_base_url=llm.url,
        gemini_api_key=GEMINI_KEY,
        anthropic_base_url=llm.url,
        anthropic_api_key=ANTHROPIC_KEY,
        openai_base_url=llm.base_url,
        openai_api_key=OPENAI_KEY,
        max_attempts=2,
    )


def weather_script(llm) -> str:
    return script(
        llm,
        calls(("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Oslo"})),
        calls(("convert_temperature", {"celsius": 21})),
        {"content": "Paris is warmer than Oslo."},
    )


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
@pytest.mark.parametrize("provider", ["anthropic", "gemini", "openai"])
async def test_a_run_with_tools_over_several_turns(client, task_queue, worker_factory, llm, settings, provider, stream):
    model = weather_script(llm)
    async with worker_factory(settings=settings.model_copy(update={"stream": stream})):
        handle = await start(client, task_queue, "Paris or Oslo?", model=f"{provider}:{model}")
        result = await handle.result()
        messages = await transcript(handle)
        await replay(handle)
        history = (await handle.fetch_history()).to_json()
    assert result.output == "Paris is warmer than Oslo."
    assert result.turns == 3 and result.usage.requests == 3 and result.usage.input_tokens > 0
    assert set(result.usage_by_model) == {f"{provider}:{model}"}
    results = [m for m in messages if isinstance(m, t.ToolMessage)]
    assert [m.name for m in results] == ["get_weather", "get_weather", "convert_temperature"]
    assert not any(m.is_error for m in results), [m.content for m in results]
    sent = [r for r in llm.requests() if r["model"] == model]
    api = "chat" if provider == "openai" else provider
    assert len(sent) == 3 and all(r["api"] == api and r["stream"] is stream for r in sent)
    assert [k for k in (GEMINI_KEY, ANTHROPIC_KEY, OPENAI_KEY) if k in history] == []


async def test_a_provider_s_setting_it_lacks_is_refused_when_the_run_starts(client, task_queue, worker_factory, llm):
    model = script(llm, {"content": "never asked"})
    async with worker_factory():
        handle = await start(
            client,
            task_queue,
            "hi",
            model=f"gemini:{model}",
            model_settings=t.ModelSettings(parallel_tool_calls=False),
        )
        with pytest.raises(WorkflowFailureError) as failure:
            await handle.result()
    assert "parallel_tool_calls" in str(failure.value.cause) and f"gemini:{model}" in str(failure.value.cause)
    assert not [r for r in llm.requests() if r["model"] == model]


async def test_a_claude_run_with_thinking_sends_each_signed_block_back_unchanged(
    client, task_queue, worker_factory, llm, settings
):
    model = weather_script(llm)
    async with worker_factory(settings=settings):
        handle = await start(
            client,
            task_queue,
            "Paris or Oslo?",
            model=f"anthropic:{model}",
            model_settings=t.ModelSettings(thinking_tokens=2048),
        )
        result = await handle.result()
        messages = await transcript(handle)
    # fake_llm signs the thinking it sends and refuses a continuation whose block changed or went
    # missing (as the API does): three calls answered means each came back exactly as it was sent.
    assert result.output == "Paris is warmer than Oslo." and result.turns == 3
    replies = [m for m in messages if isinstance(m, t.AssistantMessage)]
    assert all(len(r.thinking) == 1 and r.thinking[0].provider == "anthropic" for r in replies)
    assert all(r.thinking[0].signature and r.thinking[0].text for r in replies)
    assert all(r.thinking[0].text not in (r.content or "") for r in replies)  # never answer text
    bodies = [r["body"] for r in llm.requests() if r["model"] == model]
    assert all(b["thinking"] == {"type": "enabled", "budget_tokens": 2048} for b in bodies)
    sent_back = [m["content"][0] for b in bodies[1:] for m in b["messages"] if m["role"] == "assistant"]
    assert sent_back and all(block["type"] == "thinking" and block["signature"] for block in sent_back)


async def test_anthropic_answering_529_forever_falls_back_to_openai_and_the_run_completes(
    client, task_queue, worker_factory, llm, settings
):
    down, up = weather_script(llm), weather_script(llm)
    llm.add_faults([{"kind": "status", "status": 529, "count": 1000, "model": down, "type": "overloaded_error"}])
    async with worker_factory(settings=settings):
        handle = await start(
            client, task_queue, "Paris or Oslo?", model=f"anthropic:{down}", fallback_models=[f"openai:{up}"]
        )
        result = await handle.result()
        status = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)
    assert result.output == "Paris is warmer than Oslo."
    (switch,) = status.switches
    assert (switch.from_model, switch.to_model, switch.turn) == (f"anthropic:{down}", f"openai:{up}", 1)
    assert "ModelHTTP529" in switch.why
    assert set(result.usage_by_model) == {f"openai:{up}"}
    to_anthropic = [r for r in llm.requests() if r["model"] == down]
    assert len(to_anthropic) == 2 and all(r["api"] == "anthropic" and r["status"] == 529 for r in to_anthropic)


async def test_the_providers_example_runs_offline(temporal_server):
    from examples import providers

    lines = await providers.main(address=temporal_server.target)
    assert all("it is sunny in Paris, 22 C." in line for line in lines[:3]), lines  # each on its own wire
    assert "anthropic:claude-sonnet-4-5: " in lines[0] and "gemini:gemini-2.5-flash: " in lines[1]
    assert "openai:gpt-4.1-mini: " in lines[2]
    assert lines[3] == "fallback anthropic:claude-sonnet-4-5 → gemini:gemini-2.5-flash in turn 1"
    assert lines[4] == "careful  careful: it is sunny in Paris, 22 C."
