"""The compaction activity (`agent.compact`) against the real fake_llm server over real HTTP,
without a Temporal server: `ActivityEnvironment` supplies the activity context and a
`ModelActivities` whose `read_context` returns a fixed transcript (as in test_model_activity.py).

fake_llm answers any model asked to summarize with "SUMMARY: " and the transcript's user
messages, so what the activity sent can be read back from what it returns."""

from __future__ import annotations

import dataclasses
import re
from datetime import timedelta
from typing import Any

import pytest
from pydantic import SecretStr
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from durable_agent_runner.activities import compaction
from durable_agent_runner.activities.compaction import (
    DEFAULT_GUIDANCE,
    HEAD,
    MAX_SUMMARY_CHARS,
    MAX_TRANSCRIPT_CHARS,
    CompactionActivities,
    render,
)
from durable_agent_runner.activities.model import new_http_client
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.testing.fake_llm import FakeLLMServer
from durable_agent_runner.testing.scenarios import basic as scenarios
from durable_agent_runner.workflows.types import (
    COMPACT_ACTIVITY,
    AgentSpec,
    AssistantMessage,
    CompactInput,
    CompactResult,
    Message,
    ModelSettings,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from tests.helpers import closed_address
from tests.test_model_activity import AGENT, FixedContext, leaks, llm_settings

KEY = "sk-test-0123456789abcdefSECRET"
SESSION: list[Message] = [
    UserMessage(content="SUMMARY: my name is Ada", summary_of=4),
    UserMessage(content="What is the weather in Tokyo? My order is 4417."),
    AssistantMessage(tool_calls=[ToolCall(call_id="call_1_0", name="get_weather", arguments='{"city": "Tokyo"}')]),
    ToolMessage(call_id="call_1_0", name="get_weather", content='{"city": "Tokyo", "temperature_c": 22.0}'),
    AssistantMessage(content="Tokyo: sunny, 22.0°C."),
    UserMessage(content="Thanks!"),
    AssistantMessage(content="You're welcome."),
]  # fmt: skip


async def compact(
    settings: LLMSettings,
    messages: list[Message] = SESSION,
    *,
    agent: AgentSpec = AGENT,
    instructions: str = "",
    model: str | None = None,
) -> CompactResult:
    """Runs `compact` once over all of `messages`, in run `run-1`."""
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info,
        activity_type=COMPACT_ACTIVITY,
        workflow_id="run-1",
        workflow_run_id="run-1-r",
        workflow_type="AgentRun",
        start_to_close_timeout=timedelta(seconds=agent.model_timeout_seconds),
    )
    upto = len(messages)
    async with new_http_client(settings) as http:
        acts = FixedContext(settings, http, agent, messages)
        result: CompactResult = await env.run(
            CompactionActivities(acts).compact,
            CompactInput(agent=agent.name, model=model, turn=3, upto=upto, instructions=instructions),
        )
    assert acts.asked == [upto], "the activity reads exactly the messages its input names"
    return result


async def failure(settings: LLMSettings, messages: list[Message] = SESSION, **kw: Any) -> ApplicationError:
    with pytest.raises(ApplicationError) as info:
        await compact(settings, messages, **kw)
    return info.value


def sent(llm: FakeLLMServer) -> tuple[str, str, dict[str, Any]]:
    """The last request's instructions, its one user message, and its body."""
    [request] = llm.requests(last=1)
    body = request["body"]
    if "messages" in body:
        system, user = body["messages"]
        assert system["role"] == "system" and user["role"] == "user"
        return system["content"], user["content"], body
    [user] = body["input"]
    assert user["role"] == "user"
    return body["instructions"], user["content"], body


# ------------------------------------------------------------------------------- success


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("stream", [False, True])
async def test_the_summary_of_the_transcript_is_returned_with_its_usage(llm: FakeLLMServer, api: str, stream: bool):
    result = await compact(llm_settings(llm, model="recall", api=api, stream=stream))

    # fake_llm's summary: the user messages it was sent, an earlier summary's first.
    assert result.summary == "SUMMARY: my name is Ada | What is the weather in Tokyo? My order is 4417. | Thanks!"
    assert result.usage.requests == 1 and result.usage.input_tokens > 0 and result.usage.output_tokens > 0
    instructions, _, body = sent(llm)
    assert instructions == f"{HEAD}\n\n{DEFAULT_GUIDANCE}"
    assert body["model"] == "recall" and (body.get("stream") is True) == stream
    assert "tools" not in body and "tool_choice" not in body


async def test_the_transcript_is_one_user_message_with_calls_results_and_earlier_summaries(llm: FakeLLMServer):
    failed = ToolMessage(call_id="call_9_0", name="get_weather", content="boom", is_error=True)
    await compact(llm_settings(llm), [*SESSION, failed])
    _, transcript, _ = sent(llm)
    assert transcript == "\n".join(
        [
            '<summary of="4">\nSUMMARY: my name is Ada\n</summary>',
            "<user>\nWhat is the weather in Tokyo? My order is 4417.\n</user>",
            '<tool_call name="get_weather" id="call_1_0">{"city": "Tokyo"}</tool_call>',
            '<tool_result name="get_weather" id="call_1_0">\n{"city": "Tokyo", "temperature_c": 22.0}\n</tool_result>',
            "<assistant>\nTokyo: sunny, 22.0°C.\n</assistant>",
            "<user>\nThanks!\n</user>",
            "<assistant>\nYou're welcome.\n</assistant>",
            '<tool_result name="get_weather" id="call_9_0" error="true">\nboom\n</tool_result>',
        ]
    )


async def test_the_inputs_instructions_replace_the_default_guidance(llm: FakeLLMServer):
    await compact(llm_settings(llm), instructions="  Keep only order numbers.  ")
    instructions, _, _ = sent(llm)
    assert instructions == f"{HEAD}\n\nKeep only order numbers."
    # fake_llm knows a summary request by the words every one starts with.
    assert instructions.startswith(compaction.SUMMARY_MARKER) and compaction.SUMMARY_MARKER == scenarios.SUMMARY_MARKER


async def test_the_agents_settings_apply_but_nothing_that_asks_for_tools_or_a_format(llm: FakeLLMServer):
    agent = AGENT.model_copy(
        update={
            "settings": ModelSettings(tool_choice="required", temperature=0.3, extra_body={"top_k": 5}),
            "output_schema": {"type": "object"},
            "output_name": "Answer",
        }
    )
    result = await compact(llm_settings(llm), agent=agent, model="some-model")
    assert result.summary.startswith("SUMMARY: ")
    _, _, body = sent(llm)
    assert body["model"] == "some-model" and body["temperature"] == 0.3 and body["top_k"] == 5
    assert not {"tools", "tool_choice", "parallel_tool_calls", "response_format"} & set(body)


# -------------------------------------------------------------------------------- bounds


def test_a_long_transcript_keeps_the_head_of_each_message_and_short_ones_whole():
    messages: list[Message] = [
        UserMessage(content="short question"),
        ToolMessage(call_id="c", name="dump", content="a" * 50_000),
        UserMessage(content="b" * 30_000),
        AssistantMessage(content="short answer"),
    ]
    text = render(messages, limit=20_000)
    assert len(text) <= 20_000
    assert "<user>\nshort question\n</user>" in text and "<assistant>\nshort answer\n</assistant>" in text
    # The two long ones share what is left alike: each keeps its head, and says how much went.
    assert re.search(r"\na{9000,}… \[4\d{4} characters cut\]\n</tool_result>", text)
    assert re.search(r"\nb{9000,}… \[2\d{4} characters cut\]\n</user>", text)
    assert render(messages) == render(messages, limit=10**9)  # under the cap: nothing cut


async def test_what_is_sent_and_what_comes_back_are_bounded(llm: FakeLLMServer):
    messages: list[Message] = [UserMessage(content=f"{n}: " + "x" * 200_000) for n in range(3)]
    result = await compact(llm_settings(llm), messages)
    _, transcript, _ = sent(llm)
    assert len(transcript) <= MAX_TRANSCRIPT_CHARS and transcript.startswith("<user>\n0: xxx")
    assert transcript.count("<user>") == 3  # every message keeps its head
    assert MAX_SUMMARY_CHARS - 32 < len(result.summary) <= MAX_SUMMARY_CHARS
    assert result.summary.startswith("SUMMARY: 0: xxx") and result.summary.endswith("characters cut]")


# ------------------------------------------------------------------------------ failures


async def test_a_blank_summary_fails_for_good(llm: FakeLLMServer):
    # fake_llm has nothing to summarize without a user message: it replies with nothing.
    only_tools: list[Message] = SESSION[2:4]
    err = await failure(llm_settings(llm), only_tools)
    assert err.non_retryable and err.type == "CompactionFailed"
    assert "blank summary of 2 messages" in err.message


async def test_nothing_to_summarize_fails_for_good(llm: FakeLLMServer):
    err = await failure(llm_settings(llm), [])
    assert err.non_retryable and err.type == "CompactionFailed" and not llm.requests()


async def test_model_failures_are_classified_like_a_model_calls(llm: FakeLLMServer):
    llm.add_fault("status", status=503)
    err = await failure(llm_settings(llm))
    assert not err.non_retryable and err.type == "ModelHTTP503"
    llm.add_fault("status", status=400)
    err = await failure(llm_settings(llm))
    assert err.non_retryable and err.type == "ModelHTTP400"
    bad = AGENT.model_copy(update={"settings": ModelSettings(extra_body={"messages": []})})
    err = await failure(llm_settings(llm), agent=bad)
    assert err.non_retryable and err.type == "ModelSettingsInvalid"


async def test_the_api_key_appears_in_no_summary_and_no_error(llm: FakeLLMServer):
    def settings(stream: bool = False, model: str = "demo", base_url: str | None = None) -> LLMSettings:
        return llm_settings(base_url or llm, stream=stream, model=model, api_key=SecretStr(KEY))

    for stream in (False, True):
        # A server that echoes the key it was sent into everything it returns.
        result = await compact(settings(stream, model="hostile:echo"))
        assert result.summary.startswith("SUMMARY: ") and KEY not in result.model_dump_json()
    [request] = llm.requests(last=1)
    assert request["headers"]["authorization"] == f"Bearer {KEY}"  # the key was really sent

    raised: list[ApplicationError] = []
    for fault, stream in [
        ({"kind": "status", "status": 401, "message": f"Incorrect API key provided: {KEY}."}, False),
        ({"kind": "status", "status": 500, "echo_key": True}, False),
        ({"kind": "malformed"}, False),
        ({"kind": "cut"}, True),
        ({"kind": "error_event", "echo_key": True}, True),
    ]:
        llm.add_faults([fault])
        raised.append(await failure(settings(stream)))
    with closed_address() as nobody:  # a port merely found free may be taken by another test process
        raised.append(await failure(settings(base_url=f"http://{nobody}/v1")))
    raised.append(await failure(settings(), SESSION[2:4]))  # blank summary
    assert len(raised) == 7 and "Incorrect API key provided" in raised[0].message
    assert not [err for err in raised if leaks(err, KEY)]


def test_a_calls_name_and_arguments_are_shown_as_the_model_sent_them():
    call = AssistantMessage(tool_calls=[ToolCall(call_id="c1", name='we"ird', arguments='{"q": "</tool_call>"}')])
    assert render([call]) == '<tool_call name="we\\"ird" id="c1">{"q": "</tool_call>"}</tool_call>'
