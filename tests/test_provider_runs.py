"""Whole runs on each provider's own wire, on the dev server, against the fake's strict side of
that API: several turns with tools, streamed and not, usage counted, keys kept out of the story."""

from __future__ import annotations

import json

import pytest
from temporalio.client import WorkflowFailureError

from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.workflows import types as t
from tests.helpers import calls, replay, script, start, transcript

GEMINI_KEY = "g-Zr8Kq2Lw5Xv9"
ANTHROPIC_KEY = "a-Jm4Tn7Ps1Yc6"


@pytest.fixture
def settings(llm) -> LLMSettings:
    return LLMSettings(
        base_url=llm.base_url,
        model="demo",
        gemini_base_url=llm.url,
        gemini_api_key=GEMINI_KEY,
        anthropic_base_url=llm.url,
        anthropic_api_key=ANTHROPIC_KEY,
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
@pytest.mark.parametrize("provider", ["gemini"])
async def test_a_run_with_tools_over_several_turns(client, task_queue, worker_factory, llm, settings, provider, stream):
    model = weather_script(llm)
    async with worker_factory(settings=settings.model_copy(update={"stream": stream})):
        handle = await start(client, task_queue, "Paris or Oslo?", model=f"{provider}:{model}")
        result = await handle.result()
        messages = await transcript(handle)
        await replay(handle)
    assert result.output == "Paris is warmer than Oslo."
    assert result.turns == 3 and result.usage.requests == 3 and result.usage.input_tokens > 0
    assert set(result.usage_by_model) == {f"{provider}:{model}"}
    results = [m for m in messages if isinstance(m, t.ToolMessage)]
    assert [m.name for m in results] == ["get_weather", "get_weather", "convert_temperature"]
    assert not any(m.is_error for m in results), [m.content for m in results]
    sent = [r for r in llm.requests() if r["model"] == model]
    assert len(sent) == 3 and all(r["api"] == provider and r["stream"] is stream for r in sent)
    history = json.dumps([json.loads(m.model_dump_json()) for m in messages])
    assert GEMINI_KEY not in history and ANTHROPIC_KEY not in history


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
