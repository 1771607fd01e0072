"""fake_llm, the test double, over real HTTP: scenarios, wire formats, faults, control API, CLI."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from durable_agent_runner.testing.fake_llm import FakeLLMServer

pytestmark = pytest.mark.server  # every test serves the fake model: a fixture's, its own or the CLI's
ROOT = Path(__file__).resolve().parent.parent
DEMO_TOOLS = ("get_weather", "get_forecast", "convert_temperature")
CHAT_TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": name, "description": "", "parameters": {"type": "object"}}}
    for name in DEMO_TOOLS
]
RESP_TOOLS: list[dict[str, Any]] = [{"type": "function", "name": name, "parameters": {}} for name in DEMO_TOOLS]
WEATHER = {
    "Tokyo": {"city": "Tokyo", "condition": "sunny", "temperature_c": 22.0},
    "Paris": {"city": "Paris", "condition": "cloudy", "temperature_c": 15.0},
}


@pytest.fixture(scope="module")
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as srv:
        yield srv


@pytest.fixture
def srv(server: FakeLLMServer) -> FakeLLMServer:
    server.reset()
    return server


@pytest.fixture
def http(srv: FakeLLMServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=srv.url, timeout=5) as client:
        yield client


# ------------------------------------------------------------------------------ helpers


def parse_sse(text: str) -> list[tuple[str | None, str]]:
    """(event, data) pairs; comments skipped, multi-line data joined with newlines."""
    events: list[tuple[str | None, str]] = []
    event: str | None = None
    data: list[str] = []
    for line in text.split("\n"):
        if not line:
            if data:
                events.append((event, "\n".join(data)))
            event, data = None, []
        elif line.startswith(":"):
            continue
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
    return events


def chat_from_stream(text: str) -> tuple[dict[str, Any], str | None, Any]:
    """Reassembles (message, finish_reason, usage) from a Chat Completions stream."""
    events = parse_sse(text)
    assert events[-1][1] == "[DONE]"
    content: str | None = None
    calls: dict[int, dict[str, Any]] = {}
    finish = usage = None
    for _, data in events[:-1]:
        chunk = json.loads(data)
        assert chunk["object"] == "chat.completion.chunk"
        usage = chunk.get("usage") or usage
        for choice in chunk["choices"]:
            delta = choice["delta"]
            if delta.get("content") is not None:
                content = (content or "") + delta["content"]
            for tc in delta.get("tool_calls", []):
                if "id" in tc:  # the first delta of a call names it, with empty arguments
                    assert tc["function"]["arguments"] == "" and tc["index"] not in calls
                    calls[tc["index"]] = {"id": tc["id"], "type": tc["type"], "function": dict(tc["function"])}
                else:
                    calls[tc["index"]]["function"]["arguments"] += tc["function"]["arguments"]
            finish = choice["finish_reason"] or finish
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return message, finish, usage


def responses_from_stream(text: str) -> dict[str, Any]:
    """Checks event order and sequence numbers, rebuilds the output, returns the final response."""
    events = [(name, json.loads(data)) for name, data in parse_sse(text)]
    assert all(name == body["type"] for name, body in events)
    assert [body["sequence_number"] for _, body in events] == list(range(len(events)))
    names = [name for name, _ in events]
    assert names[:2] == ["response.created", "response.in_progress"] and names[-1] == "response.completed"
    items: dict[int, dict[str, Any]] = {}
    texts: dict[str, str] = {}
    args: dict[str, str] = {}
    for name, body in events:
        if name == "response.output_text.delta":
            texts[body["item_id"]] = texts.get(body["item_id"], "") + body["delta"]
        elif name == "response.output_text.done":
            assert texts[body["item_id"]] == body["text"]
        elif name == "response.function_call_arguments.delta":
            args[body["item_id"]] = args.get(body["item_id"], "") + body["delta"]
        elif name == "response.function_call_arguments.done":
            assert args[body["item_id"]] == body["arguments"]
        elif name == "response.output_item.done":
            items[body["output_index"]] = body["item"]
    final = events[-1][1]["response"]
    assert final["output"] == [items[i] for i in sorted(items)]
    assert sum((n or "").endswith(".delta") for n in names) >= 2  # really streamed in pieces
    return final


def chat(http: httpx.Client, model: str, messages: list[dict[str, Any]], **extra: Any) -> httpx.Response:
    return http.post("/v1/chat/completions", json={"model": model, "messages": messages, **extra})


def responses(http: httpx.Client, model: str, input_: Any, **extra: Any) -> httpx.Response:
    return http.post("/v1/responses", json={"model": model, "input": input_, **extra})


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def message_of(resp: httpx.Response) -> dict[str, Any]:
    assert resp.status_code == 200, resp.text
    return resp.json()["choices"][0]["message"]


def output_text(body: dict[str, Any]) -> str:
    return "".join(p["text"] for item in body["output"] if item["type"] == "message" for p in item["content"])


def assert_error(resp: httpx.Response, status: int, *, param: str | None = None, code: str | None = None) -> None:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"] == "application/json"
    error = resp.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    assert error["param"] == param and error["code"] == code


# ---------------------------------------------------------------------------- endpoints


def test_health_models_and_keep_alive(http: httpx.Client, srv: FakeLLMServer) -> None:
    assert http.get("/healthz").json() == {"status": "ok"}
    srv.add_script("s1", [{"content": "x"}])
    models = http.get("/v1/models").json()
    assert models["object"] == "list"
    assert {"demo", "weather", "echo", "script:s1"} <= {m["id"] for m in models["data"]}
    resp = chat(http, "echo", user("a"))
    assert resp.headers["content-length"] == str(len(resp.content))
    assert resp.headers.get("connection") != "close"


@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", "/v1/nope"), ("GET", "/v1/chat/completions"), ("GET", "/"), ("POST", "/_control/nope")],
)
def test_unknown_path_is_404_with_openai_error(http: httpx.Client, method: str, path: str) -> None:
    assert_error(http.request(method, path), 404)


def test_bad_requests_are_400_with_openai_error(http: httpx.Client) -> None:
    bad_json = http.post("/v1/chat/completions", content=b"{nope", headers={"content-type": "application/json"})
    assert_error(bad_json, 400)
    assert_error(
        http.post("/v1/chat/completions", json={"messages": user("x")}),
        400,
        param="model",
        code="missing_required_parameter",
    )
    assert_error(
        http.post("/v1/chat/completions", json={"model": "echo"}),
        400,
        param="messages",
        code="missing_required_parameter",
    )
    assert_error(
        http.post("/v1/chat/completions", json={"model": "echo", "messages": "hi"}),
        400,
        param="messages",
        code="invalid_type",
    )
    assert_error(
        http.post("/v1/responses", json={"model": "echo"}), 400, param="input", code="missing_required_parameter"
    )
    assert_error(chat(http, "script:missing", user("x")), 404, code="model_not_found")
    assert_error(responses(http, "loop:x", "x"), 404, code="model_not_found")
    # tool_choice as OpenAI checks it: only beside tools, and a named function must be one of them.
    named = {"type": "function", "function": {"name": "get_wether"}}
    assert_error(chat(http, "echo", user("x"), tools=CHAT_TOOLS, tool_choice=named), 400, param="tool_choice")
    assert_error(chat(http, "echo", user("x"), tool_choice="required"), 400, param="tool_choice")
    wrong = {"type": "function", "name": "get_wether"}
    assert_error(responses(http, "echo", "x", tools=RESP_TOOLS, tool_choice=wrong), 400, param="tool_choice")


# ---------------------------------------------------------------------------- scenarios


def test_echo_both_apis(http: httpx.Client) -> None:
    resp = chat(
        http,
        "echo",
        [
            {"role": "system", "content": "s"},
            *user("first"),
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": [{"type": "text", "text": "héllo"}]},
        ],
    )
    body = resp.json()
    assert body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-") and body["model"] == "echo"
    assert body["choices"][0]["finish_reason"] == "stop"
    assert message_of(resp) == {"role": "assistant", "content": "echo: héllo", "refusal": None}
    r = responses(http, "echo", [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}]).json()
    assert r["object"] == "response" and r["status"] == "completed" and r["id"].startswith("resp_")
    [item] = r["output"]
    assert item["type"] == "message" and item["role"] == "assistant" and item["status"] == "completed"
    assert item["content"] == [{"type": "output_text", "text": "echo: hi", "annotations": []}]
    assert output_text(responses(http, "echo", "plain string").json()) == "echo: plain string"


def weather_chat_turns(http: httpx.Client, prompt: str, results: dict[str, Any]) -> list[dict[str, Any]]:
    """Plays the demo agent's loop over Chat Completions; returns the assistant messages."""
    messages = user(prompt)
    replies: list[dict[str, Any]] = []
    for _ in range(3):
        message = message_of(chat(http, "demo", messages, tools=CHAT_TOOLS))
        replies.append(message)
        messages.append(message)
        for call in message.get("tool_calls", []):
            args = json.loads(call["function"]["arguments"])
            if call["function"]["name"] == "get_weather":
                content = results[args["city"]]
            else:
                content = json.dumps({"value": round(args["celsius"] * 9 / 5 + 32, 2), "unit": args["unit"]})
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})
    return replies


def test_weather_demo_over_chat(http: httpx.Client) -> None:
    results = {c: json.dumps(w) for c, w in WEATHER.items()}
    first, second, final = weather_chat_turns(http, "Weather in Tokyo and Paris? Which is warmer?", results)
    assert first["content"] is None
    calls = first["tool_calls"]
    assert [c["id"] for c in calls] == ["call_0_0", "call_0_1"]  # deterministic, parallel
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [{"city": "Tokyo"}, {"city": "Paris"}]
    [convert] = second["tool_calls"]
    assert convert["id"] == "call_1_0" and convert["function"]["name"] == "convert_temperature"
    assert json.loads(convert["function"]["arguments"]) == {"celsius": 22.0, "unit": "fahrenheit"}
    assert "tool_calls" not in final
    assert final["content"] == "Tokyo: sunny, 22.0°C. Paris: cloudy, 15.0°C. Tokyo is warmer at 71.6°F."


def test_weather_demo_defaults_and_any_model_name(http: httpx.Client) -> None:
    calls = message_of(chat(http, "gpt-4o-mini", user("How is the weather?"), tools=CHAT_TOOLS))["tool_calls"]
    assert [json.loads(c["function"]["arguments"])["city"] for c in calls] == ["Tokyo", "Paris"]
    three = message_of(chat(http, "weather", user("Sydney, london or new york?"), tools=CHAT_TOOLS))["tool_calls"]
    assert [json.loads(c["function"]["arguments"])["city"] for c in three] == ["Sydney", "London", "New York"]
    no_tools = message_of(chat(http, "demo", user("Weather in Rome?")))
    # Not the demo's agent (a newcomer's own): told plainly there is no script for it, no weather talk.
    assert "tool_calls" not in no_tools and "There is no script for this agent" in no_tools["content"]
    assert "docs/testing.md" in no_tools["content"] and "weather" not in no_tools["content"]


def test_weather_demo_reports_bad_tool_results(http: httpx.Client) -> None:
    results = {"Tokyo": json.dumps(WEATHER["Tokyo"]), "Paris": "Error: upstream timed out"}
    _, second, final = weather_chat_turns(http, "Tokyo and Paris?", results)
    assert second["tool_calls"][0]["function"]["arguments"] == '{"celsius": 22.0, "unit": "fahrenheit"}'
    assert "Tokyo: sunny, 22.0°C." in final["content"] and "71.6°F" in final["content"]
    assert "weather lookup for Paris failed: Error: upstream timed out" in final["content"]
    _, final, _ = weather_chat_turns(http, "Tokyo?", {"Tokyo": '{"error": "no such city"}'})
    assert "failed" in final["content"] and "tool_calls" not in final


def test_weather_demo_over_responses(http: httpx.Client) -> None:
    items: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "input_text", "text": "Paris or Tokyo?"}]}]
    extra = {"instructions": "Be brief.", "tools": RESP_TOOLS}
    first = responses(http, "demo", items, **extra).json()
    calls = first["output"]
    assert [(c["type"], c["call_id"], c["name"], c["status"]) for c in calls] == [
        ("function_call", "call_0_0", "get_weather", "completed"),
        ("function_call", "call_0_1", "get_weather", "completed"),
    ]
    assert all(c["id"].startswith("fc_") for c in calls)
    items += calls
    items += [
        {
            "type": "function_call_output",
            "call_id": c["call_id"],
            "output": json.dumps(WEATHER[json.loads(c["arguments"])["city"]]),
        }
        for c in calls
    ]
    [convert] = responses(http, "demo", items, **extra).json()["output"]
    assert json.loads(convert["arguments"]) == {"celsius": 22.0, "unit": "fahrenheit"}
    items += [convert, {"type": "function_call_output", "call_id": convert["call_id"], "output": '{"value": 71.6}'}]
    final = responses(http, "demo", items, **extra).json()
    assert output_text(final) == "Paris: cloudy, 15.0°C. Tokyo: sunny, 22.0°C. Tokyo is warmer at 71.6°F."


def test_loop_scenario_chat(http: httpx.Client) -> None:
    messages = user("go")
    tools: list[dict[str, Any]] = [{"type": "function", "function": {"name": "pad", "parameters": {}}}, *CHAT_TOOLS]
    for k in range(3):
        message = message_of(chat(http, "loop:4:100", messages, tools=tools))
        assert len(message["content"]) == 100
        [call] = message["tool_calls"]
        assert call["id"] == f"call_{k}_0" and call["function"]["name"] == "pad"
        assert json.loads(call["function"]["arguments"]) == {"i": k, "size": 100}
        messages += [message, {"role": "tool", "tool_call_id": call["id"], "content": "x" * 100}]
    final = chat(http, "loop:4:100", messages, tools=tools).json()
    assert final["choices"][0]["message"]["content"] == "done after 4 turns"
    assert final["choices"][0]["finish_reason"] == "stop"


def test_loop_scenario_counts_responses_turns_as_runs(http: httpx.Client) -> None:
    tools: list[dict[str, Any]] = [{"type": "function", "name": "pad", "parameters": {}}]
    items: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for k in range(2):
        output = responses(http, "loop:3:10", items, tools=tools).json()["output"]
        assert [o["type"] for o in output] == ["message", "function_call"]  # one turn, two items
        assert output[1]["call_id"] == f"call_{k}_0"
        items += [*output, {"type": "function_call_output", "call_id": output[1]["call_id"], "output": "ok"}]
    assert output_text(responses(http, "loop:3:10", items, tools=tools).json()) == "done after 3 turns"


def test_script_steps_in_order_then_repeat_last(http: httpx.Client, srv: FakeLLMServer) -> None:
    model = srv.add_script(
        "s",
        [
            {
                "content": "thinking",
                "tool_calls": [{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": "{bad"}],
            },
            {"content": "end", "usage": {"prompt_tokens": 7, "completion_tokens": 3, "cached_tokens": 5}},
        ],
    )
    assert model == "script:s"
    first = message_of(chat(http, model, user("hi")))
    assert first["content"] == "thinking"
    assert [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in first["tool_calls"]] == [
        ("call_0_0", "a", '{"x": 1}'),
        ("call_0_1", "b", "{bad"),  # raw argument strings go out verbatim
    ]
    history = [*user("hi"), first, {"role": "tool", "tool_call_id": "call_0_0", "content": "1"}]
    history.append({"role": "tool", "tool_call_id": "call_0_1", "content": "error: bad arguments"})
    second = chat(http, model, history).json()
    assert second["choices"][0]["message"]["content"] == "end"
    assert second["usage"] == {
        "prompt_tokens": 7,
        "completion_tokens": 3,
        "total_tokens": 10,
        "prompt_tokens_details": {"cached_tokens": 5},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }
    later = [*history, {"role": "assistant", "content": "end"}, *user("again")]
    assert message_of(chat(http, model, later))["content"] == "end"
    r = responses(http, model, "hi").json()
    assert r["usage"]["total_tokens"] > 0
    assert [o["type"] for o in r["output"]] == ["message", "function_call", "function_call"]


def test_script_json_steps_and_delta_sizes(http: httpx.Client, srv: FakeLLMServer) -> None:
    report = {"city": "Tokyo", "temperature_c": 22.5, "tags": ["sunny", "晴れ"]}
    model = srv.add_script("typed", [{"json": report, "delta_chars": 5}])
    plain = message_of(chat(http, model, user("hi")))
    assert json.loads(plain["content"]) == report and plain["content"] == json.dumps(report, ensure_ascii=False)
    streamed = chat(http, model, user("hi"), stream=True).text
    deltas = [
        c["choices"][0]["delta"].get("content") for c in map(json.loads, [d for _, d in parse_sse(streamed)[:-1]])
    ]
    pieces = [d for d in deltas if d]
    assert "".join(pieces) == plain["content"] and {len(p) for p in pieces[:-1]} == {5}
    events = [json.loads(d) for _, d in parse_sse(responses(http, model, "hi", stream=True).text)]
    text_deltas = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
    assert "".join(text_deltas) == plain["content"] and len(text_deltas) == -(-len(plain["content"]) // 5)
    for bad in ({"json": 1, "content": "1"}, {"content": "x", "delta_chars": 0}, {"content": "x", "delta_chars": True}):
        assert_error(http.post("/_control/scripts", json={"id": "bad", "steps": [bad]}), 400)


SETTINGS_FIELDS: dict[str, Any] = {
    "temperature": 0.2,
    "top_p": 0.9,
    "seed": 7,
    "stop": ["END"],
    "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    "parallel_tool_calls": False,
    "reasoning_effort": "low",
    "max_completion_tokens": 50,
    "response_format": {"type": "json_schema", "json_schema": {"name": "o", "schema": {}, "strict": False}},
    "top_k": 40,  # a provider's own option, through extra_body
}


@pytest.mark.parametrize("stream", [False, True])
def test_model_settings_and_response_formats_are_accepted_and_recorded(
    http: httpx.Client, srv: FakeLLMServer, stream: bool
) -> None:
    resp = chat(http, "echo", user("hi"), tools=CHAT_TOOLS, stream=stream, **SETTINGS_FIELDS)
    assert resp.status_code == 200, resp.text
    fields: dict[str, Any] = {
        "temperature": 0.2,
        "top_p": 0.9,
        "max_output_tokens": 50,
        "tool_choice": {"type": "function", "name": "get_weather"},
        "parallel_tool_calls": False,
        "reasoning": {"effort": "low"},
        "text": {"format": {"type": "json_schema", "name": "o", "schema": {}, "strict": False}},
    }
    answer = responses(http, "echo", "hi", tools=RESP_TOOLS, stream=stream, **fields)
    assert answer.status_code == 200, answer.text
    final = responses_from_stream(answer.text) if stream else answer.json()
    assert output_text(final) == "echo: hi"
    assert {k: final[k] for k in fields} == fields  # echoed, as OpenAI's response object does
    sent_chat, sent_responses = (r["body"] for r in srv.requests())
    assert {k: sent_chat[k] for k in SETTINGS_FIELDS} == SETTINGS_FIELDS
    assert {k: sent_responses[k] for k in fields} == fields


def test_usage_fields_and_prompt_cache_estimate(http: httpx.Client) -> None:
    small = chat(http, "echo", user("hi")).json()["usage"]
    assert small["prompt_tokens"] > 0 and small["completion_tokens"] > 0
    assert small["total_tokens"] == small["prompt_tokens"] + small["completion_tokens"]
    assert small["prompt_tokens_details"] == {"cached_tokens": 0}
    assert small["completion_tokens_details"] == {"reasoning_tokens": 0}
    big = [*user("x" * 20000), {"role": "assistant", "content": "ok"}, *user("and?")]
    usage = chat(http, "echo", big).json()["usage"]
    assert usage["prompt_tokens"] >= 5000 and usage["prompt_tokens_details"]["cached_tokens"] >= 4096
    r = responses(http, "echo", big).json()["usage"]
    assert set(r) == {"input_tokens", "input_tokens_details", "output_tokens", "output_tokens_details", "total_tokens"}
    assert r["input_tokens_details"]["cached_tokens"] >= 4096 and r["output_tokens_details"] == {"reasoning_tokens": 0}


# -------------------------------------------------------------- streaming and determinism


def _cases(srv: FakeLLMServer) -> list[tuple[str, list[dict[str, Any]]]]:
    srv.add_script("st", [{"content": "pre", "tool_calls": [{"name": "x", "arguments": {"q": "ünï"}}]}])
    tool_turn = [
        *user("Berlin?"),
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"city": "Berlin", "temperature_c": 9}'},
    ]
    return [
        ("echo", user("stream me please")),
        ("demo", user("Tokyo, Paris and Rome")),
        ("demo", tool_turn),
        ("loop:5:64", user("go")),
        ("script:st", user("go")),
    ]


def test_chat_stream_matches_non_stream(http: httpx.Client, srv: FakeLLMServer) -> None:
    for model, messages in _cases(srv):
        plain = chat(http, model, messages, tools=CHAT_TOOLS).json()
        resp = chat(http, model, messages, tools=CHAT_TOOLS, stream=True, stream_options={"include_usage": True})
        assert resp.status_code == 200 and resp.headers["content-type"] == "text/event-stream"
        assert resp.headers["transfer-encoding"] == "chunked"
        message, finish, usage = chat_from_stream(resp.text)
        assert message == plain["choices"][0]["message"], model
        assert finish == plain["choices"][0]["finish_reason"] and usage == plain["usage"]
        chunks = [json.loads(d) for _, d in parse_sse(resp.text)[:-1]]
        assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
        assert chunks[-1]["choices"] == [] and all(c["id"] == plain["id"] for c in chunks)
        no_usage = chat(http, model, messages, tools=CHAT_TOOLS, stream=True)
        assert chat_from_stream(no_usage.text)[2] is None


def test_responses_stream_matches_non_stream(http: httpx.Client, srv: FakeLLMServer) -> None:
    for model, messages in _cases(srv):
        items = [m for m in messages if m["role"] == "user"]  # the Responses input for the same question
        plain = responses(http, model, items, tools=RESP_TOOLS).json()
        resp = responses(http, model, items, tools=RESP_TOOLS, stream=True)
        assert resp.headers["content-type"] == "text/event-stream" and "[DONE]" not in resp.text
        final = responses_from_stream(resp.text)
        assert {**final, "created_at": 0} == {**plain, "created_at": 0}, model


def test_replies_are_deterministic(http: httpx.Client) -> None:
    body = {"model": "demo", "messages": user("Cairo and Toronto"), "tools": CHAT_TOOLS}
    a, b = (http.post("/v1/chat/completions", json=body).json() for _ in range(2))
    assert {**a, "created": 0} == {**b, "created": 0}
    r1, r2 = (responses(http, "demo", "Cairo", tools=RESP_TOOLS).json() for _ in range(2))
    assert {**r1, "created_at": 0} == {**r2, "created_at": 0}


# ------------------------------------------------------------------------------- faults


def test_status_fault_with_retry_headers_and_count(http: httpx.Client, srv: FakeLLMServer) -> None:
    srv.add_faults([{"kind": "status", "status": 429, "retry_after": 1.5, "retry_after_ms": 200, "count": 2}])
    for _ in range(2):
        resp = chat(http, "echo", user("x"))
        assert_error(resp, 429, code="rate_limit_exceeded")
        assert resp.json()["error"]["type"] == "requests"
        assert resp.headers["retry-after"] == "1.5" and resp.headers["retry-after-ms"] == "200"
    assert chat(http, "echo", user("x")).status_code == 200
    srv.add_faults([{"kind": "status", "status": 429, "code": "insufficient_quota", "message": "quota gone"}])
    error = chat(http, "echo", user("x")).json()["error"]
    assert error == {"message": "quota gone", "type": "insufficient_quota", "param": None, "code": "insufficient_quota"}
    srv.add_fault("status", status=503)
    assert responses(http, "echo", "x").json()["error"]["type"] == "server_error"


def test_faults_match_model_path_and_stream_in_fifo_order(http: httpx.Client, srv: FakeLLMServer) -> None:
    srv.add_faults(
        [
            {"kind": "status", "status": 500, "model": "other"},
            {"kind": "status", "status": 401, "path": "responses"},
            {"kind": "status", "status": 502, "stream": True},
            {"kind": "status", "status": 400},
            {"kind": "status", "status": 503},
        ]
    )
    assert [f["status"] for f in srv.pending_faults()] == [500, 401, 502, 400, 503]
    assert chat(http, "echo", user("x")).status_code == 400  # skips the three that do not match
    assert chat(http, "echo", user("x")).status_code == 503
    assert chat(http, "echo", user("x")).status_code == 200
    assert chat(http, "echo", user("x"), stream=True).status_code == 502
    assert responses(http, "echo", "x").status_code == 401
    assert chat(http, "other", user("x")).status_code == 500
    assert srv.pending_faults() == []


def test_delay_fault_and_latency(http: httpx.Client, srv: FakeLLMServer) -> None:
    def timed(**extra: Any) -> float:
        start = time.perf_counter()
        assert chat(http, "echo", user("x"), **extra).status_code == 200
        return time.perf_counter() - start

    assert timed() < 0.1
    srv.add_fault("delay", ms=150)
    assert timed() >= 0.15
    assert timed() < 0.1
    assert http.post("/_control/latency", json={"ms": 120}).json()["ok"] is True
    assert timed() >= 0.12 and timed(stream=True) >= 0.12
    srv.set_latency(0)
    assert timed() < 0.1
    assert http.post("/_control/latency", json={"ms": -1}).status_code == 400


def test_malformed_fault(http: httpx.Client, srv: FakeLLMServer) -> None:
    srv.add_faults([{"kind": "malformed"}, {"kind": "malformed"}, {"kind": "malformed"}])
    resp = chat(http, "echo", user("x"))
    assert resp.status_code == 200 and resp.headers["content-type"] == "application/json"
    with pytest.raises(json.JSONDecodeError):
        resp.json()
    events = parse_sse(chat(http, "echo", user("x"), stream=True).text)
    json.loads(events[0][1])
    with pytest.raises(json.JSONDecodeError):
        json.loads(events[1][1])
    events = parse_sse(responses(http, "echo", "x", stream=True).text)
    assert events[0][0] == "response.created" and "response.completed" not in [e for e, _ in events]
    with pytest.raises(json.JSONDecodeError):
        json.loads(events[1][1])


def test_cut_fault_drops_the_connection(srv: FakeLLMServer) -> None:
    srv.add_faults([{"kind": "cut", "after_events": 3}, {"kind": "cut", "path": "responses"}, {"kind": "cut"}])
    with httpx.Client(base_url=srv.url, timeout=5) as http:
        received: list[str] = []
        with pytest.raises(httpx.RemoteProtocolError):
            with http.stream(
                "POST", "/v1/chat/completions", json={"model": "echo", "messages": user("x"), "stream": True}
            ) as resp:
                assert resp.status_code == 200
                received.extend(line for line in resp.iter_lines() if line.startswith("data:"))
        assert len(received) == 3 and "data: [DONE]" not in received
        with pytest.raises(httpx.RemoteProtocolError):
            responses(http, "echo", "x", stream=True)
        with pytest.raises(httpx.RemoteProtocolError):
            chat(http, "echo", user("x"))  # non-streaming: Content-Length promises more than arrives
        assert chat(http, "echo", user("after")).status_code == 200  # the server is fine afterwards
    assert [r["fault"]["kind"] for r in srv.requests()[:3]] == ["cut"] * 3


def test_error_event_fault(http: httpx.Client, srv: FakeLLMServer) -> None:
    srv.add_faults(
        [
            {"kind": "error_event"},
            {"kind": "error_event", "code": "overloaded", "message": "busy"},
            {"kind": "error_event"},
        ]
    )
    events = parse_sse(chat(http, "echo", user("a longer message"), stream=True).text)
    assert [d for _, d in events][-1] != "[DONE]"
    *deltas, last = [json.loads(d) for _, d in events]
    assert len(deltas) == 3 and last["error"]["type"] == "server_error" and last["error"]["message"]
    events = parse_sse(responses(http, "echo", "a longer message", stream=True).text)
    names = [e for e, _ in events]
    assert names.count("response.output_text.delta") == 2 and names[-1] == "error"
    error = json.loads(events[-1][1])
    assert error["type"] == "error" and error["code"] == "overloaded" and error["message"] == "busy"
    assert error["sequence_number"] == len(events) - 1
    assert_error(chat(http, "echo", user("x")), 500)  # non-streaming: the plain-HTTP equivalent


# -------------------------------------------------------------------- hostile mode

KEY = "sk-hostile-0123456789abcdef"
BEARER = {"Authorization": f"Bearer {KEY}"}


def hostile(http: httpx.Client, case: str, api: str, stream: bool, **headers: str) -> str:
    """The raw body of a first-turn weather request to `hostile:<case>`."""
    body: dict[str, Any] = {"model": f"hostile:{case}", "stream": stream}
    if api == "chat":
        body |= {"messages": user("Tokyo and Paris?"), "tools": CHAT_TOOLS, "stream_options": {"include_usage": True}}
    else:
        body |= {"input": "Tokyo and Paris?", "tools": RESP_TOOLS}
    resp = http.post(f"/v1/{'chat/completions' if api == 'chat' else 'responses'}", json=body, headers=headers)
    assert resp.status_code == 200, resp.text
    return resp.text


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("stream", [False, True])
def test_hostile_echo_puts_the_key_as_sent_in_every_field(http: httpx.Client, api: str, stream: bool) -> None:
    text = hostile(http, "echo", api, stream, **BEARER)
    bodies = [json.loads(d) for _, d in parse_sse(text) if d != "[DONE]"] if stream else [json.loads(text)]
    final = bodies[-1].get("response", bodies[-1])  # the body, the usage chunk, or response.completed
    assert final["model"] == f"Bearer {KEY}" and final["id"] == f"Bearer {KEY}"
    assert all(v == f"Bearer {KEY}" for k, v in final["usage"].items() if not k.endswith("_details"))
    if not stream:
        if api == "chat":
            calls = [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in message_of_body(final)]
        else:
            calls = [(i["call_id"], i["name"], i["arguments"]) for i in final["output"] if i["type"] == "function_call"]
        assert [c[0] for c in calls] == [f"Bearer {KEY}"] * 3
        assert calls[-1][1] == f"Bearer {KEY}" and all(KEY in c[2] for c in calls)
    assert text.count(KEY) > 10
    api_key = hostile(http, "echo", api, False, **{"api-key": KEY})
    assert KEY in api_key and "Bearer" not in api_key  # whatever header carried it, as sent


def message_of_body(body: dict[str, Any]) -> list[dict[str, Any]]:
    return body["choices"][0]["message"]["tool_calls"]


def test_hostile_ids_are_reused_across_turns(http: httpx.Client) -> None:
    for case, ids in (("reuse-ids", ["0", "1"]), ("same-id", ["call_1", "call_1"])):
        plain = json.loads(hostile(http, case, "chat", False))
        assert [c["id"] for c in message_of_body(plain)] == ids
        final = json.loads(hostile(http, case, "responses", False))
        assert [i["call_id"] for i in final["output"] if i["type"] == "function_call"] == ids


def test_hostile_odd_sends_odd_counts_ids_and_names(http: httpx.Client) -> None:
    plain = json.loads(hostile(http, "odd", "chat", False))
    calls = message_of_body(plain)
    assert [len(c["id"]) for c in calls] == [10_001, 10_001, 1] and calls[-1]["function"]["name"] == 7
    usage = plain["usage"]
    assert usage["prompt_tokens"] == -5 and usage["completion_tokens"] == "12" and usage["total_tokens"] == 1e30
    assert len(plain["model"]) == len(plain["id"]) == len(plain["choices"][0]["finish_reason"]) == 10_000
    chunks = [json.loads(d) for _, d in parse_sse(hostile(http, "odd", "chat", True)) if d != "[DONE]"]
    indexes = [tc["index"] for c in chunks for ch in c["choices"] for tc in ch["delta"].get("tool_calls", [])]
    assert indexes and all(isinstance(i, str) for i in indexes)
    final = json.loads(hostile(http, "odd", "responses", False))
    assert [i["name"] for i in final["output"] if i["type"] == "function_call"][-1] == 7


def test_an_unknown_hostile_case_is_a_404(http: httpx.Client) -> None:
    assert_error(chat(http, "hostile:nope", user("x")), 404, code="model_not_found")


def ask(http: httpx.Client, text: str, stream: bool = False) -> httpx.Response:
    """A Chat Completions request for `echo` that carries the key."""
    body = {"model": "echo", "messages": user(text), "stream": stream}
    return http.post("/v1/chat/completions", json=body, headers=BEARER)


def test_faults_echo_the_key_in_errors_non_json_bodies_and_error_events(http: httpx.Client, srv: FakeLLMServer) -> None:
    srv.add_faults(
        [
            {"kind": "status", "status": 401, "echo_key": True},
            {"kind": "status", "status": 503, "echo_key": True, "size": 50_000, "raw": True},
            {"kind": "malformed", "echo_key": True, "stream": False},
            {"kind": "error_event", "echo_key": True},
        ]
    )
    unauthorized = ask(http, "x")
    assert unauthorized.status_code == 401 and f"Bearer {KEY}" in unauthorized.json()["error"]["message"]
    proxy = ask(http, "x")
    assert proxy.status_code == 503 and proxy.headers["content-type"].startswith("text/plain")
    assert len(proxy.text) >= 50_000 and proxy.text.count(KEY) > 500
    assert proxy.text.rstrip("x ").endswith(KEY)  # whole keys only: the client must do the cutting
    page = ask(http, "x")
    assert page.status_code == 200 and KEY in page.text
    with pytest.raises(json.JSONDecodeError):
        page.json()
    stream = ask(http, "a longer message", stream=True)
    assert KEY in json.loads(parse_sse(stream.text)[-1][1])["error"]["message"]


def test_stall_fault_sends_part_of_the_reply_then_nothing(srv: FakeLLMServer) -> None:
    srv.add_faults([{"kind": "stall", "after_events": 2}, {"kind": "stall"}, {"kind": "stall", "ms": 300}])
    with httpx.Client(base_url=srv.url, timeout=httpx.Timeout(0.5, connect=5)) as http:
        received: list[str] = []
        with pytest.raises(httpx.ReadTimeout):
            with http.stream(
                "POST", "/v1/chat/completions", json={"model": "echo", "messages": user("x"), "stream": True}
            ) as resp:
                assert resp.status_code == 200
                received.extend(line for line in resp.iter_lines() if line.startswith("data:"))
        assert len(received) == 2
        with pytest.raises(httpx.ReadTimeout):
            chat(http, "echo", user("x"))  # non-streaming: headers and half the body, then silence
    # A stall of `ms`, then a dropped connection: read by a client that would wait 10 s, so a loaded
    # machine's late hang-up is not a read timeout; well before the default stall's 30 s.
    with httpx.Client(base_url=srv.url, timeout=httpx.Timeout(10, connect=5)) as http:
        started = time.monotonic()
        with pytest.raises(httpx.RemoteProtocolError):
            chat(http, "echo", user("x"))
        assert 0.25 < time.monotonic() - started < 5
    assert [r["fault"]["kind"] for r in srv.requests()] == ["stall"] * 3


def test_a_dripping_stall_stays_alive_and_never_ends(srv: FakeLLMServer) -> None:
    srv.add_faults([{"kind": "stall", "after_events": 1, "drip_ms": 50, "ms": 600}, {"kind": "stall", "drip_ms": 5}])
    lines: list[str] = []
    with httpx.Client(base_url=srv.url, timeout=httpx.Timeout(0.3, connect=5)) as http:
        with pytest.raises(httpx.RemoteProtocolError):  # no read timeout: a comment every 50 ms
            with http.stream(
                "POST", "/v1/chat/completions", json={"model": "echo", "messages": user("x"), "stream": True}
            ) as resp:
                lines.extend(resp.iter_lines())
        assert lines.count(": keep-alive") >= 5
        started = time.monotonic()
        resp = chat(http, "echo", user("drip"))  # the rest of the body, one byte every 5 ms
        assert resp.json()["choices"][0]["message"]["content"] == "echo: drip"
        assert time.monotonic() - started > 0.3


def test_keepalive_fault_and_script_option(http: httpx.Client, srv: FakeLLMServer) -> None:
    srv.add_faults([{"kind": "keepalive"}, {"kind": "keepalive"}])
    plain = chat(http, "demo", user("Tokyo"), tools=CHAT_TOOLS).json()
    text = chat(http, "demo", user("Tokyo"), tools=CHAT_TOOLS, stream=True).text
    assert ": keep-alive\n\n" in text and "\ndata: " in text.replace("\n\ndata: ", "")  # multi-line data events
    assert chat_from_stream(text)[0] == plain["choices"][0]["message"]
    text = responses(http, "echo", "x", stream=True).text
    assert ": keep-alive" in text and output_text(responses_from_stream(text)) == "echo: x"
    model = srv.add_script("ka", [{"content": "kept alive", "keepalive": True}])
    text = chat(http, model, user("x"), stream=True).text
    assert ": keep-alive" in text and chat_from_stream(text)[0]["content"] == "kept alive"


# ------------------------------------------------------------------- control and logging


def test_request_log_records_headers_bodies_and_faults(http: httpx.Client, srv: FakeLLMServer) -> None:
    srv.add_fault("status", status=500)
    tool_call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
    messages = [
        *user("x"),
        {"role": "assistant", "content": None, "tool_calls": [tool_call]},
        {"role": "tool", "tool_call_id": "c1", "content": "{}"},
    ]
    body = {"model": "echo", "messages": messages}
    http.post("/v1/chat/completions", json=body, headers={"Authorization": "Bearer sk-test"})
    http.post("/v1/chat/completions", json=body)
    http.post("/v1/responses", content=b"not json")
    http.get("/healthz")
    log = http.get("/_control/requests").json()["requests"]
    assert log == srv.requests() and len(log) == 3  # control and health checks are not logged
    first, second, third = log
    assert first["method"] == "POST" and first["path"] == "/v1/chat/completions"
    assert first["headers"]["authorization"] == "Bearer sk-test" and first["body"] == body
    assert first["fault"]["kind"] == "status" and first["status"] == 500 and isinstance(first["time"], float)
    assert first["flags"] == ["assistant_null_content_with_tool_calls"] and first["turn"] == 1
    assert second["fault"] is None and second["status"] == 200 and "authorization" not in second["headers"]
    assert third["body"] is None and third["body_text"] == "not json" and third["status"] == 400


def test_request_log_is_bounded_and_can_be_tailed() -> None:
    with FakeLLMServer(max_log=2) as srv, httpx.Client(base_url=srv.base_url, timeout=5) as http:
        for text in ("a", "b", "c"):
            chat(http, "echo", user(text))
        assert [r["seq"] for r in srv.requests()] == [1, 2]
        [last] = srv.requests(last=1)
        assert last["body"]["messages"] == user("c")
        assert http.get(f"{srv.url}/_control/requests", params={"last": 1}).json()["requests"] == [last]


def test_concurrent_requests_are_served_in_parallel(http: httpx.Client, srv: FakeLLMServer) -> None:
    srv.set_latency(200)
    start = time.perf_counter()

    def ask(i: int) -> str:
        return str(message_of(chat(http, "echo", user(str(i))))["content"])

    with ThreadPoolExecutor(max_workers=20) as pool:
        replies = list(pool.map(ask, range(20)))
    assert replies == [f"echo: {i}" for i in range(20)]
    assert time.perf_counter() - start < 1.5  # 20 x 200 ms would be 4 s if served one at a time


def test_control_api_over_http(http: httpx.Client) -> None:
    ok = http.post("/_control/scripts", json={"id": "h", "steps": [{"content": "over http"}]})
    assert ok.json() == {"ok": True, "id": "h", "model": "script:h", "steps": 1}
    assert message_of(chat(http, "script:h", user("x")))["content"] == "over http"
    bad_scripts: list[dict[str, Any]] = [
        {"id": "", "steps": [{}]},
        {"id": "b", "steps": []},
        {"id": "b", "steps": [{"tool_calls": [{}]}]},
        {"id": "b", "steps": [{"contents": "typo"}]},
    ]
    for bad in bad_scripts:
        assert_error(http.post("/_control/scripts", json=bad), 400)
    assert http.post("/_control/faults", json={"faults": [{"kind": "delay", "ms": 1}]}).json()["queued"] == 1
    assert http.get("/_control/faults").json()["faults"] == [
        {"kind": "delay", "count": 1, "status": 500, "ms": 1, "after_events": 3}
    ]
    for bad_fault in (
        {"kind": "nope"},
        {"kind": "status", "status": "429"},
        {"kind": "cut", "count": 0},
        {"kind": "delay", "path": "chats"},
        {"kind": "delay", "surprise": 1},
    ):
        assert_error(http.post("/_control/faults", json={"faults": [bad_fault]}), 400)
    assert_error(http.post("/_control/faults", content=b"{"), 400)
    assert http.post("/_control/reset").json() == {"ok": True}
    assert http.get("/_control/faults").json()["faults"] == [] and http.get("/_control/requests").json() == {
        "requests": []
    }
    assert_error(chat(http, "script:h", user("x")), 404, code="model_not_found")
    with pytest.raises(ValueError, match="kind"):
        FakeLLMServer().add_faults([{"kind": "bogus"}])


# ---------------------------------------------------------------------------------- CLI


def test_cli_serves_until_sigterm() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        # port 0: it takes a free port and says which (one found free beforehand may be taken meanwhile)
        [sys.executable, "-m", "durable_agent_runner.testing.fake_llm", "--host", "127.0.0.1", "--port", "0"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 10)
        assert ready, "no banner within 10 s"
        banner = re.fullmatch(r"fake_llm listening on http://127\.0\.0\.1:(\d+)/v1", proc.stdout.readline().strip())
        assert banner, "no banner"
        port = int(banner.group(1))
        with httpx.Client(timeout=5) as http:
            assert http.get(f"http://127.0.0.1:{port}/healthz").json() == {"status": "ok"}
            assert (
                message_of(
                    http.post(
                        f"http://127.0.0.1:{port}/v1/chat/completions", json={"model": "echo", "messages": user("cli")}
                    )
                )["content"]
                == "echo: cli"
            )
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert proc.stderr is not None and proc.stderr.read() == ""  # quiet: no per-request logging
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


@pytest.mark.parametrize("args", [["--port", "notaport"], ["--port", "70000"], ["--bogus"]])
def test_cli_rejects_bad_arguments(args: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "durable_agent_runner.testing.fake_llm", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=20,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 2 and "usage:" in done.stderr


def test_calls_left_unanswered_or_results_of_no_call_are_refused_as_openai_does(http: httpx.Client) -> None:
    """OpenAI answers 400 when an assistant message's tool calls are not each answered by the tool
    messages right after it, and when a tool message answers no call; so does the double."""
    asked = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        {"id": "call_b", "type": "function", "function": {"name": "f", "arguments": "{}"}},
    ]}  # fmt: skip
    one = {"role": "tool", "tool_call_id": "call_a", "content": "1"}
    for messages, ids in (
        ([*user("hi"), asked], "call_a, call_b"),
        ([*user("hi"), asked, one, *user("and?")], "call_b"),
    ):
        refused = chat(http, "echo", messages)
        assert refused.status_code == 400
        error = refused.json()["error"]
        assert error["type"] == "invalid_request_error" and error["param"].startswith("messages.[")
        assert error["message"].endswith(f"did not have response messages: {ids}")
    stray = chat(http, "echo", [*user("hi"), {"role": "tool", "tool_call_id": "call_z", "content": "1"}])
    assert stray.status_code == 400 and "must be a response to a preceeding message" in stray.json()["error"]["message"]
    whole = chat(http, "echo", [*user("hi"), asked, one, {"role": "tool", "tool_call_id": "call_b", "content": "2"}])
    assert whole.status_code == 200, whole.text


def test_a_responses_call_without_its_output_or_an_output_without_its_call_is_refused(http: httpx.Client) -> None:
    """As OpenAI's Responses API: with no server-side conversation, the input holds each call's output."""
    call = {"type": "function_call", "call_id": "call_a", "name": "f", "arguments": "{}"}
    said = {"role": "user", "content": "hi"}
    missing = responses(http, "echo", [said, call])
    assert (
        missing.status_code == 400
        and missing.json()["error"]["message"] == "No tool output found for function call call_a."
    )
    stray = responses(http, "echo", [said, {"type": "function_call_output", "call_id": "call_z", "output": "1"}])
    assert stray.status_code == 400
    assert stray.json()["error"]["message"] == "No tool call found for function call output with call_id call_z."
    whole = responses(http, "echo", [said, call, {"type": "function_call_output", "call_id": "call_a", "output": "1"}])
    assert whole.status_code == 200, whole.text
