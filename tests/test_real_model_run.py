"""A durable run against a REAL OpenAI-compatible server: llama.cpp's server with SmolLM2-135M.

The 135M model is too small to use tools sensibly, so these runs have no tools: what is under
test is that the model activity, the wire mapping and the loop work against a real server's
framing and quirks (no usage in streams, 500s for validation errors, ...), streamed and not.
Skipped, with the reason, when scripts/install_real_model.sh has not installed the server.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from durable_agent_runner import Agent, Registry
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.workflows import types as t
from tests.helpers import replay, start, transcript
from tests.real_model import real_llama_server, real_model_skip_reason

pytestmark = [
    pytest.mark.real_model,
    pytest.mark.skipif(real_model_skip_reason() is not None, reason=str(real_model_skip_reason())),
]

chatty = Agent(name="chatty", instructions="You are a friendly assistant. Answer in one short sentence.", max_turns=3)


@pytest.fixture(scope="module")
def llama_url() -> Iterator[str]:
    with real_llama_server(timeout=180) as url:
        yield url


@pytest.mark.parametrize("stream", [False, True])
async def test_a_durable_run_against_llama_cpp(client, task_queue, worker_factory, llama_url, stream):
    settings = LLMSettings(base_url=llama_url, model="smollm2-135m-instruct", stream=stream)
    registry = Registry(agents=[chatty])
    async with worker_factory(settings=settings, registry=registry):
        handle = await start(client, task_queue, "Say hello to Ada.", agent="chatty")
        result = await handle.result()
        messages = await transcript(handle)
    assert result.turns == 1 and result.output.strip()
    assert [m.role for m in messages] == ["user", "assistant"]
    assert isinstance(messages[1], t.AssistantMessage) and messages[1].content == result.output
    if not stream:  # llama.cpp sends no usage chunk in streams, even when asked
        assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0
    await replay(handle)
