"""The model-call activity against the real fake_llm server over real HTTP, without a Temporal
server: `ActivityEnvironment` supplies the activity context (attempt number, heartbeats), and a
subclass of `ModelActivities` answers `read_context` with a fixed transcript instead of a query.

Each fault class is pinned by what a user relies on: which failures Temporal retries (and when),
which fail the run at once with the provider's own words, that a broken stream is never taken for
an answer, what goes over the wire, and that the API key never leaves the worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import random
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any, cast

import httpx
import pytest
from pydantic import SecretStr
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from durable_agent_runner.activities import chat_wire, errors, model_call
from durable_agent_runner.activities import model as model_module
from durable_agent_runner.activities.model import ModelActivities, new_http_client
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.redact import Redactor
from durable_agent_runner.testing.fake_llm import FakeLLMServer
from durable_agent_runner.workflows.types import (
    MODEL_CALL_ACTIVITY,
    AgentSpec,
    AssistantMessage,
    HandoffSpec,
    Message,
    ModelCallInput,
    ModelProgress,
    ModelReply,
    ModelSettings,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from tests.helpers import closed_address, script

KEY = "sk-test"
WEATHER_PARAMS: dict[str, object] = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}
AGENT = AgentSpec(
    name="weather-agent",
    instructions="You are a weather assistant. Use get_weather for every city asked about.",
    tools=[ToolSpec(name="get_weather", description="Current weather for one city.", parameters=WEATHER_PARAMS)],
    temperature=0.2,
)
ASK: list[Message] = [UserMessage(content="What is the weather in Tokyo and Paris?")]
# Turn 1 of the weather scenario: the model asked for both cities, the tools answered.
AFTER_TOOLS: list[Message] = [
    *ASK,
    AssistantMessage(
        content=None,
        tool_calls=[
            ToolCall(call_id="call_0_0", name="get_weather", arguments='{"city": "Tokyo"}'),
            ToolCall(call_id="call_0_1", name="get_weather", arguments='{"city": "Paris"}'),
        ],
    ),
    ToolMessage(
        call_id="call_0_0",
        name="get_weather",
        content='{"city": "Tokyo", "condition": "sunny", "temperature_c": 22.0}',
    ),
    ToolMessage(
        call_id="call_0_1",
        name="get_weather",
        content='{"city": "Paris", "condition": "cloudy", "temperature_c": 15.0}',
    ),
]


class FixedContext(ModelActivities):
    """The activity with its transcript given, not queried from a workflow."""

    def __init__(self, settings: LLMSettings, http: httpx.AsyncClient, agent: AgentSpec, messages: list[Message]):
        super().__init__(cast(Client, None), settings, http)  # the client is only used by read_context
        self.agent, self.messages = agent, messages
        self.asked: list[int] = []

    async def read_context(self, upto: int) -> tuple[AgentSpec, list[Message]]:
        self.asked.append(upto)
        return self.agent, self.messages[:upto]


def llm_settings(
    server: FakeLLMServer | str, *, stream: bool = False, model: str = "weather", **kw: Any
) -> LLMSettings:
    base_url = server if isinstance(server, str) else server.base_url
    kw.setdefault("api_key", SecretStr(KEY))
    return LLMSettings(base_url=base_url, model=model, stream=stream, **kw)


async def call(
    settings: LLMSettings,
    messages: list[Message] = ASK,
    *,
    agent: AgentSpec = AGENT,
    model: str | None = None,
    attempt: int = 1,
    http: httpx.AsyncClient | None = None,
    on_heartbeat: Callable[..., None] | None = None,
    heartbeat_details: list[Any] | None = None,
) -> ModelReply:
    """Runs `call_model` once, as attempt `attempt` of a model call inside run `run-1`."""
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info,
        activity_type=MODEL_CALL_ACTIVITY,
        workflow_id="run-1",
        workflow_run_id="run-1-r",
        workflow_type="AgentRun",
        attempt=attempt,
        heartbeat_details=heartbeat_details or [],
        start_to_close_timeout=timedelta(seconds=agent.model_timeout_seconds),  # as the workflow sets it
    )
    if on_heartbeat is not None:
        env.on_heartbeat = on_heartbeat
    turn = sum(isinstance(m, AssistantMessage) for m in messages)
    async with contextlib.AsyncExitStack() as stack:
        client = http or await stack.enter_async_context(new_http_client(settings))
        acts = FixedContext(settings, client, agent, messages)
        reply = await env.run(
            acts.call_model,
            ModelCallInput(agent=agent.name, model=model, turn=turn, transcript_len=len(messages)),
        )
    assert acts.asked == [len(messages)], "the activity reads exactly the transcript its input names"
    return reply


def unclocked(reply: ModelReply) -> ModelReply:
    """The reply without when it arrived, to compare two calls' answers."""
    assert reply.received_at is not None, "the activity records when the reply arrived"
    return reply.model_copy(update={"received_at": None})


async def failure(settings: LLMSettings, messages: list[Message] = ASK, **kw: Any) -> ApplicationError:
    with pytest.raises(ApplicationError) as info:
        await call(settings, messages, **kw)
    return info.value


def last_request(llm: FakeLLMServer) -> dict[str, Any]:
    [request] = llm.requests(last=1)
    return request


# ------------------------------------------------------------------------------- success


async def test_weather_turn_zero_asks_for_each_city_in_parallel_streamed_or_not(llm: FakeLLMServer):
    plain = await call(llm_settings(llm, stream=False))
    streamed = await call(llm_settings(llm, stream=True))

    calls = [(c.name, json.loads(c.arguments)) for c in plain.message.tool_calls]
    assert calls == [("get_weather", {"city": "Tokyo"}), ("get_weather", {"city": "Paris"})]
    assert len({c.call_id for c in plain.message.tool_calls}) == 2 and all(c.call_id for c in plain.message.tool_calls)
    assert plain.message.content is None and plain.finish_reason == "tool_calls"
    assert plain.usage.requests == 1 and plain.usage.input_tokens > 0 and plain.usage.output_tokens > 0
    assert plain.model == "weather" and plain.response_id
    # The same answer either way: a run may switch LLM_STREAM between attempts.
    assert unclocked(streamed) == unclocked(plain)
    assert [r["stream"] for r in llm.requests()] == [False, True]


async def test_echo_replies_with_text_streamed_or_not(llm: FakeLLMServer):
    plain = await call(llm_settings(llm, model="echo"))
    streamed = await call(llm_settings(llm, model="echo", stream=True))
    assert plain.message.content == "echo: What is the weather in Tokyo and Paris?"
    assert plain.message.tool_calls == [] and plain.finish_reason == "stop"
    assert plain.usage.input_tokens > 0 and plain.usage.output_tokens > 0
    assert unclocked(streamed) == unclocked(plain)


async def test_tool_results_are_joined_to_their_calls_and_answered(llm: FakeLLMServer):
    for stream in (False, True):
        reply = await call(llm_settings(llm, stream=stream), AFTER_TOOLS)
        assert reply.message.tool_calls == [] and reply.finish_reason == "stop"
        assert reply.message.content == "Tokyo: sunny, 22.0°C. Paris: cloudy, 15.0°C. Tokyo is warmer."


# ---------------------------------------------------------------------------- rate limits


@pytest.mark.parametrize("stream", [False, True])
async def test_429_retry_after_seconds_sets_the_next_retry_delay(llm: FakeLLMServer, stream: bool):
    llm.add_fault("status", status=429, retry_after=7, message="Rate limit reached for requests.")
    err = await failure(llm_settings(llm, stream=stream))
    assert not err.non_retryable and err.type == "ModelHTTP429"
    assert err.next_retry_delay == timedelta(seconds=7)
    assert "Rate limit reached for requests." in err.message


async def test_429_retry_after_ms_sets_the_next_retry_delay_in_milliseconds(llm: FakeLLMServer):
    llm.add_fault("status", status=429, retry_after_ms=1500)
    err = await failure(llm_settings(llm))
    assert not err.non_retryable and err.next_retry_delay == timedelta(milliseconds=1500)


async def test_429_insufficient_quota_fails_the_run_at_once(llm: FakeLLMServer):
    message = "You exceeded your current quota, please check your plan and billing details."
    llm.add_fault("status", status=429, code="insufficient_quota", message=message)
    err = await failure(llm_settings(llm))
    assert err.non_retryable and err.type == "ModelQuotaExceeded"
    assert message in err.message and "429" in err.message


# --------------------------------------------------------------------------- HTTP statuses


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("status", [408, 409, 500, 502, 503])
async def test_server_side_statuses_retry_with_the_providers_message(llm: FakeLLMServer, status: int, stream: bool):
    llm.add_fault("status", status=status, message=f"upstream trouble {status}, try again")
    err = await failure(llm_settings(llm, stream=stream))
    assert not err.non_retryable and err.type == f"ModelHTTP{status}"
    assert f"upstream trouble {status}, try again" in err.message and f"HTTP {status}" in err.message
    assert err.next_retry_delay is None  # no Retry-After: the workflow's retry policy decides


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
async def test_caller_errors_fail_the_run_at_once_with_the_providers_message(
    llm: FakeLLMServer, status: int, stream: bool
):
    llm.add_fault("status", status=status, message=f"you did something wrong ({status})")
    err = await failure(llm_settings(llm, stream=stream))
    assert err.non_retryable and err.type == f"ModelHTTP{status}"
    assert f"you did something wrong ({status})" in err.message


async def test_an_unknown_model_fails_at_once_naming_the_model(llm: FakeLLMServer):
    err = await failure(llm_settings(llm, model="script:nobody-registered-this"))
    assert err.non_retryable and err.type == "ModelHTTP404"
    assert "script:nobody-registered-this" in err.message and "does not exist" in err.message


# ----------------------------------------------------------------------- slow and unreachable


async def test_a_slow_reply_still_succeeds_and_heartbeats_while_waiting(
    llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
):
    # Beat every 50 ms instead of every 5 s, so a short delay shows beats during the wait.
    monkeypatch.setattr(model_module, "HEARTBEAT_EVERY", 0.05)
    beats: list[float] = []
    llm.add_fault("delay", ms=500)
    start = time.monotonic()
    reply = await call(llm_settings(llm), on_heartbeat=lambda *_: beats.append(time.monotonic()))
    took = time.monotonic() - start

    assert took >= 0.5 and last_request(llm)["fault"]["kind"] == "delay"
    assert [c.name for c in reply.message.tool_calls] == ["get_weather", "get_weather"]
    assert len(beats) >= 5, beats
    assert beats[-1] - beats[0] >= 0.3, "heartbeats kept coming while the server was silent"
    done = len(beats)
    await asyncio.sleep(0.2)
    assert len(beats) == done, "no heartbeats after the activity returned"


async def test_a_first_attempt_that_answers_within_a_beat_sends_the_server_no_heartbeat(llm: FakeLLMServer):
    # A heartbeat is a write of the run's state on the server: most calls end before one is due.
    beats: list[object] = []
    await call(llm_settings(llm), on_heartbeat=lambda *d: beats.append(d))
    assert beats == []


async def test_a_retry_beats_at_once_so_watchers_stop_showing_the_earlier_attempts_text(llm: FakeLLMServer):
    beats: list[tuple[object, ...]] = []
    await call(llm_settings(llm), attempt=2, on_heartbeat=lambda *d: beats.append(d))
    assert beats and isinstance(beats[0][0], ModelProgress) and beats[0][0].attempt == 2
    assert beats[0][0].text == ""


async def test_the_product_client_has_no_default_read_timeout(llm: FakeLLMServer):
    # Each request carries its agent's read timeout instead (below).
    async with new_http_client(llm_settings(llm)) as http:
        assert http.timeout.read is None and http.timeout.connect == LLMSettings().connect_timeout


@pytest.mark.parametrize("stream", [False, True])
async def test_a_read_timeout_is_a_retryable_model_timeout(llm: FakeLLMServer, stream: bool):
    llm.add_fault("delay", ms=3000)
    started = time.monotonic()
    err = await failure(llm_settings(llm, stream=stream, read_timeout=0.2))
    assert time.monotonic() - started < 2.5
    assert not err.non_retryable and err.type == "ModelTimeout"
    assert llm.base_url in err.message


async def test_the_agents_read_timeout_wins_over_the_workers(llm: FakeLLMServer):
    llm.add_fault("delay", ms=3000)
    agent = AGENT.model_copy(update={"model_read_timeout_seconds": 0.2})
    started = time.monotonic()
    err = await failure(llm_settings(llm, read_timeout=30), agent=agent)
    assert err.type == "ModelTimeout" and time.monotonic() - started < 2.5


@pytest.mark.parametrize("stream", [False, True])
async def test_a_server_that_stalls_mid_reply_ends_the_attempt_within_the_read_timeout(
    llm: FakeLLMServer, stream: bool
):
    llm.add_fault("stall", after_events=3)  # headers and part of the body, then nothing
    started = time.monotonic()
    err = await failure(llm_settings(llm, stream=stream, read_timeout=0.5))
    assert 0.4 < time.monotonic() - started < 3
    assert not err.non_retryable and err.type == "ModelTimeout" and llm.base_url in err.message


async def test_an_attempt_longer_than_the_model_timeout_ends_with_a_retryable_timeout(llm: FakeLLMServer):
    # A byte every 100 ms keeps the read timeout from firing; the attempt's own bound still ends it.
    llm.add_fault("stall", after_events=2, drip_ms=100)
    agent = AGENT.model_copy(update={"model_timeout_seconds": 2.0})
    started = time.monotonic()
    err = await failure(llm_settings(llm, stream=True, read_timeout=1), agent=agent)
    took = time.monotonic() - started
    assert 1.5 < took < 4, took  # it ends itself at 1.8 s, a little before Temporal's start-to-close would
    assert not err.non_retryable and err.type == "ModelTimeout" and "2 s" in err.message


@pytest.mark.parametrize("stream", [False, True])
async def test_connection_refused_is_retryable_and_names_the_server(stream: bool):
    with closed_address() as nobody:  # a port merely found free may be taken by another test process
        base_url = f"http://{nobody}/v1"
        err = await failure(llm_settings(base_url, stream=stream))
    assert not err.non_retryable and err.type == "ModelConnectionError"
    assert base_url in err.message


# ----------------------------------------------------------------------- broken replies


@pytest.mark.parametrize("stream", [False, True])
async def test_a_malformed_body_retries_a_few_times_then_fails_the_run(llm: FakeLLMServer, stream: bool):
    llm.add_fault("malformed", count=2)
    first = await failure(llm_settings(llm, stream=stream), attempt=1)
    assert not first.non_retryable and first.type == "MalformedModelResponse"
    beats: list[Any] = []
    # an earlier attempt's heartbeat says how many bad bodies came before (not the attempt number)
    earlier = [{"turn": 0, "attempt": 9, "malformed": errors.MALFORMED_ATTEMPTS - 1}]
    last = await failure(
        llm_settings(llm, stream=stream), attempt=9, heartbeat_details=earlier, on_heartbeat=lambda *d: beats.append(d)
    )
    assert last.non_retryable and last.type == "MalformedModelResponse"
    assert "malformed model response" in last.message
    assert beats[-1][0].malformed == errors.MALFORMED_ATTEMPTS  # handed on to a next attempt


async def test_attempts_lost_to_other_failures_do_not_count_as_malformed(llm: FakeLLMServer):
    llm.add_fault("malformed")
    err = await failure(llm_settings(llm), attempt=errors.MALFORMED_ATTEMPTS + 3)
    assert not err.non_retryable  # the first bad body, whatever the attempt number


@pytest.mark.parametrize("after_events", [1, 11])  # 11: everything but [DONE] (12 events in all)
async def test_a_stream_cut_off_midway_is_a_retryable_failure_never_a_partial_reply(
    llm: FakeLLMServer, after_events: int
):
    llm.add_fault("cut", after_events=after_events)
    err = await failure(llm_settings(llm, stream=True))
    assert last_request(llm)["fault"]["kind"] == "cut"
    assert not err.non_retryable and err.type == "ModelStreamFailed" and "cut off" in err.message


async def test_a_stream_cut_off_midway_is_reported_as_a_failed_stream(llm: FakeLLMServer):
    llm.add_fault("cut", after_events=3)
    err = await failure(llm_settings(llm, stream=True))
    assert not err.non_retryable
    assert err.type == "ModelStreamFailed" and "cannot reach" not in err.message, (err.type, err.message)


async def test_a_non_streamed_body_cut_off_midway_is_a_retryable_failure(llm: FakeLLMServer):
    llm.add_fault("cut")
    err = await failure(llm_settings(llm, stream=False))
    assert last_request(llm)["fault"]["kind"] == "cut"
    assert not err.non_retryable


async def test_an_error_event_mid_stream_is_a_retryable_failure(llm: FakeLLMServer):
    llm.add_fault("error_event", message="The engine is overloaded.")
    err = await failure(llm_settings(llm, stream=True, model="echo"))
    assert not err.non_retryable and err.type == "ModelStreamFailed"
    assert "The engine is overloaded." in err.message


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_streamed_3_mb_reply_completes_and_its_heartbeats_keep_up(llm: FakeLLMServer, api: str):
    # ~190,000 deltas of 16 characters: the stream is ~40 MB, past the 32 Mi a reply may hold.
    big = ("The quick brown fox jumps over the lazy dog; " * 70_000)[:3_000_000]
    beats: list[ModelProgress] = []
    reply = await call(
        llm_settings(llm, stream=True, model=script(llm, {"content": big}), api=api),
        on_heartbeat=lambda *d: beats.append(d[0].model_copy()),  # the activity updates one object
    )
    assert reply.message.content == big and reply.finish_reason in ("stop", "completed")
    # Each heartbeat is a tail of the text at its offset: a watcher follows it to the end.
    assert all(b.text == big[b.offset : b.offset + len(b.text)] for b in beats)
    assert max(b.offset for b in beats) > 1_000_000 and all(len(b.text) <= model_call.TAIL_CHARS for b in beats)
    assert [b.offset for b in beats] == sorted(b.offset for b in beats)


def test_heartbeat_offsets_count_the_masked_text_so_tails_line_up_around_keys():
    key = "sk-test-0123456789abcdefSECRET"
    redactor = Redactor(key)
    progress = ModelProgress(turn=1, attempt=1)
    stream = model_call.Call(chat_wire, "", {}, {}, True, 1, httpx.Timeout(1), redactor, progress)
    rng, at, beats = random.Random(7), 0, []
    text = "".join("lorem ipsum " * rng.randint(1, 30) + key for _ in range(3000))  # ~600 KB, a key every ~200
    whole = redactor.text(text)  # what the reply will hold, and watchers see
    while at < len(text):
        n = rng.randint(1, 3000)
        stream.delta(text[at : at + n])
        at += n
        if rng.random() < 0.2:
            beat = stream.snapshot()
            beats.append((beat.offset, beat.text))
    assert max(offset for offset, _ in beats) > len(whole) // 2
    assert all(shown == whole[offset : offset + len(shown)] for offset, shown in beats)
    assert all(key[:8] not in shown for _, shown in beats)


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_stream_past_the_caps_is_malformed(llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch, api: str):
    model = script(llm, {"content": "x" * 10_000})
    monkeypatch.setattr(model_call, "MAX_STREAM_CHARS", 50_000)  # framing counts here: ~130 KB in all
    err = await failure(llm_settings(llm, stream=True, model=model, api=api))
    assert err.type == "MalformedModelResponse" and "stream longer than 50000 characters" in err.message
    monkeypatch.setattr(model_call, "MAX_STREAM_CHARS", 1_000_000)
    monkeypatch.setattr(model_module, "MAX_REPLY_CHARS", 5_000)  # and here only text and arguments
    err = await failure(llm_settings(llm, stream=True, model=model, api=api))
    assert err.type == "MalformedModelResponse" and "reply longer than 5000 characters" in err.message
    if api == "responses":  # or one line: response.completed carries the whole response again
        err = await failure(llm_settings(llm, stream=True, model=script(llm, {"content": "x" * 4_900}), api=api))
        assert "a stream line longer than 5000 characters" in err.message


async def test_keepalive_comments_in_a_stream_are_ignored(llm: FakeLLMServer):
    plain = await call(llm_settings(llm, stream=True))
    llm.add_fault("keepalive")
    kept_alive = await call(llm_settings(llm, stream=True))
    assert last_request(llm)["fault"]["kind"] == "keepalive"
    assert unclocked(kept_alive) == unclocked(plain)
    assert [json.loads(c.arguments)["city"] for c in kept_alive.message.tool_calls] == ["Tokyo", "Paris"]


# --------------------------------------------------------------------------- on the wire


@pytest.mark.parametrize("stream", [False, True])
async def test_the_request_the_server_receives(llm: FakeLLMServer, stream: bool):
    await call(llm_settings(llm, stream=stream), AFTER_TOOLS)
    request = last_request(llm)
    body = request["body"]

    assert request["path"] == "/v1/chat/completions" and request["method"] == "POST"
    assert request["headers"]["authorization"] == f"Bearer {KEY}"
    assert request["headers"]["content-type"].startswith("application/json")
    assert body["model"] == "weather"
    assert body["messages"][0] == {"role": "system", "content": AGENT.instructions}
    assert body["messages"][1] == {"role": "user", "content": ASK[0].content}
    assistant = body["messages"][2]
    assert assistant["role"] == "assistant"
    assert assistant["content"] == ""  # not null: llama.cpp rejects null beside tool_calls
    assert assistant["tool_calls"] == [
        {"id": "call_0_0", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Tokyo"}'}},
        {"id": "call_0_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
    ]
    assert [(m["role"], m["tool_call_id"]) for m in body["messages"][3:]] == [
        ("tool", "call_0_0"),
        ("tool", "call_0_1"),
    ]
    assert json.loads(body["messages"][3]["content"])["city"] == "Tokyo"
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather for one city.",
                "parameters": WEATHER_PARAMS,
            },
        }
    ]
    assert body["temperature"] == 0.2
    assert request["flags"] == []  # the server noticed no wire quirk
    if stream:
        assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    else:
        assert "stream" not in body


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_settings_handoffs_and_typed_output_reach_the_server(llm: FakeLLMServer, api: str):
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    agent = AGENT.model_copy(
        update={
            "settings": ModelSettings(
                top_p=0.5, max_output_tokens=80, tool_choice="get_weather", seed=3, extra_body={"top_k": 9}
            ),
            "handoffs": [HandoffSpec(agent="billing", tool_name="transfer_to_billing", description="Money.")],
            "output_schema": schema,
        }
    )
    await call(llm_settings(llm, api=api), agent=agent)
    body = last_request(llm)["body"]
    names = [t["function"]["name"] if api == "chat" else t["name"] for t in body["tools"]]
    assert names == ["get_weather", "transfer_to_billing"] and body["temperature"] == 0.2 and body["top_k"] == 9
    if api == "chat":
        assert (body["top_p"], body["max_completion_tokens"], body["seed"]) == (0.5, 80, 3)
        assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
        assert body["response_format"]["json_schema"] == {"name": "output", "schema": schema, "strict": False}
    else:
        assert (body["top_p"], body["max_output_tokens"], "seed" in body) == (0.5, 80, False)
        assert body["tool_choice"] == {"type": "function", "name": "get_weather"}
        assert body["text"]["format"] == {"type": "json_schema", "name": "output", "schema": schema, "strict": False}


async def test_settings_the_runner_cannot_send_fail_the_run_at_once_naming_them(llm: FakeLLMServer):
    agent = AGENT.model_copy(update={"settings": ModelSettings(extra_body={"stream": True, "messages": []})})
    err = await failure(llm_settings(llm), agent=agent)
    assert err.non_retryable and err.type == "ModelSettingsInvalid"
    assert "weather-agent" in err.message and "extra_body may not set messages, stream" in err.message
    assert llm.requests() == []


async def test_the_inputs_model_overrides_the_settings(llm: FakeLLMServer):
    reply = await call(llm_settings(llm, model="weather"), model="echo")
    assert last_request(llm)["body"]["model"] == "echo"
    assert reply.model == "echo" and reply.message.content == f"echo: {ASK[0].content}"


async def test_without_an_api_key_no_authorization_header_is_sent(llm: FakeLLMServer):
    await call(llm_settings(llm, api_key=None))
    headers = last_request(llm)["headers"]
    assert "authorization" not in headers and "api-key" not in headers


async def test_a_custom_key_header_sends_the_bare_key(llm: FakeLLMServer):
    await call(llm_settings(llm, api_key_header="api-key"))
    headers = last_request(llm)["headers"]
    assert headers["api-key"] == KEY and "authorization" not in headers


# ------------------------------------------------------------------------- the secret


def leaks(err: BaseException, key: str) -> bool:
    texts = [str(err), repr(err)]
    if isinstance(err, ApplicationError):
        texts += [err.message, repr(err.details), str(err.type)]
    return any(key in text for text in texts)


async def test_the_api_key_appears_in_no_reply_and_no_error(llm: FakeLLMServer):
    key = "sk-test-0123456789abcdefSECRET"

    def settings(stream: bool = False, model: str = "weather", base_url: str | None = None) -> LLMSettings:
        return llm_settings(base_url or llm, stream=stream, model=model, api_key=SecretStr(key))

    for stream in (False, True):
        for messages in (ASK, AFTER_TOOLS):
            reply = await call(settings(stream), messages)
            assert key not in reply.model_dump_json()
    assert last_request(llm)["headers"]["authorization"] == f"Bearer {key}"  # the key was really sent

    raised: list[ApplicationError] = []
    for fault, stream in [
        ({"kind": "status", "status": 401}, False),
        ({"kind": "status", "status": 429, "code": "insufficient_quota"}, True),
        ({"kind": "status", "status": 500}, False),
        ({"kind": "malformed"}, False),
        ({"kind": "malformed"}, True),
        ({"kind": "cut"}, True),
        ({"kind": "cut"}, False),
        ({"kind": "error_event"}, True),
    ]:
        llm.add_faults([fault])
        raised.append(await failure(settings(stream)))
    with closed_address() as nobody:
        raised.append(await failure(settings(base_url=f"http://{nobody}/v1")))
    llm.add_fault("delay", ms=1000)
    raised.append(await failure(settings().model_copy(update={"read_timeout": 0.2})))

    assert len(raised) == 10
    assert not [err for err in raised if leaks(err, key)]


async def test_the_api_key_is_redacted_even_when_the_server_echoes_it(llm: FakeLLMServer):
    key = "sk-test-0123456789abcdefSECRET"
    llm.add_fault("status", status=401, message=f"Incorrect API key provided: {key}.")
    err = await failure(llm_settings(llm, api_key=SecretStr(key)))
    assert err.non_retryable and "Incorrect API key provided" in err.message
    assert not leaks(err, key)
