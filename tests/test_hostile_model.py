"""A hostile model server cannot wedge a run, fool it, or make it leak the key.

Three levels: the wires against seeded mutations of valid replies (only a valid reply or
MalformedResponse / StreamFailed may come out); the model activity against fake_llm's hostile
mode and key-echoing faults (no key in a reply, an error, a heartbeat or a capture, even
without the worker's interceptor); and whole runs through a worker with the redaction
interceptor and log filter installed as worker.py installs them, each ending clearly within a
bounded time, with the key nowhere in the run's history or the logs.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
import logging
import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.protobuf.message import Message as ProtoMessage
from pydantic import BaseModel, SecretStr
from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError

from durable_agent_runner import Agent, Registry, tool
from durable_agent_runner.activities import chat_wire, model_call, responses_wire
from durable_agent_runner.activities import model as model_module
from durable_agent_runner.activities.wire import (
    MAX_COUNT,
    MAX_LABEL,
    MAX_NAME,
    MAX_PROVIDER_ID,
    MAX_TOOL_CALLS,
    MalformedResponse,
    StreamFailed,
)
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.redact import RedactingFilter, Redactor, redaction_for
from durable_agent_runner.testing.fake_llm import FakeLLMServer
from durable_agent_runner.testing.fake_llm.wire import (
    Reply,
    chat_completion,
    chat_stream,
    response_object,
    response_stream,
)
from durable_agent_runner.testing.fake_llm.wire import ToolCall as FakeCall
from durable_agent_runner.testing.fake_llm.wire import Usage as FakeUsage
from durable_agent_runner.workflows import types as t
from tests.helpers import script, start, transcript
from tests.test_model_activity import AFTER_TOOLS, ASK, call, failure, llm_settings

KEY = "sk-hostile-5f0c2a9e7d3b41c8a6e2f9d0b7c4a1e3"
WINDOWS = [KEY[i : i + 12] for i in range(len(KEY) - 11)]  # any 12 characters of it


def assert_no_key(text: str, where: str = "") -> None:
    leaked = [w for w in WINDOWS if w in text]
    assert not leaked, f"part of the key in {where or 'the text'}: {leaked[:3]}"


# ------------------------------------------------------------------------ fuzzing the wires

SEED = 20260611
JUNK: list[object] = [
    None, True, False, 0, -1, 7, 10**30, -(10**30), 1e30, float("nan"), float("inf"), "", "12", "x" * 3000,
    "\ud800", "[DONE]", [], [1, "a"], {}, {"a": {"b": []}}, {"type": "output_text", "text": 5},
]  # fmt: skip


def _deep(n: int) -> object:
    value: object = "bottom"
    for _ in range(n):
        value = [value]
    return value


def _paths(value: object, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield at
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*at, i))


def _mutate(value: object, rng: random.Random, deep: bool = True) -> object:
    """One random edit somewhere in a JSON value: a junk value, a deletion, a wrong container,
    a subtree moved, a value as JSON text, or (`deep`) nesting past the recursion limit."""
    root = copy.deepcopy(value)
    path = rng.choice(list(_paths(root)))
    if not path:
        return rng.choice([*JUNK, _deep(5000 if deep else 50)])
    parent: Any = root
    for step in path[:-1]:
        parent = parent[step]
    old, last = parent[path[-1]], path[-1]
    choice = rng.randrange(7)
    if choice == 0 and isinstance(parent, dict):
        del parent[last]
    elif choice == 1:
        parent[last] = [old] if rng.random() < 0.5 else {"0": old}
    elif choice == 2:
        parent[last] = json.dumps(old)
    elif choice == 3:
        parent[last] = copy.deepcopy(rng.choice([root, parent]))
    elif choice == 4:
        parent[last] = _deep(3000 if deep else 50)
    else:
        parent[last] = rng.choice(JUNK)
    return root


def _valid_reply() -> Reply:
    calls = (FakeCall("call_a", "get_weather", '{"city": "Tokyo"}'), FakeCall("call_b", "f", "{}"))
    return Reply("Sunny in Tokyo, cloudy in Paris.", calls, FakeUsage(12, 7, 3, 1))


def _valid_bodies() -> list[tuple[Any, dict[str, Any]]]:
    reply = _valid_reply()
    return [
        (chat_wire, chat_completion(reply, rid="chatcmpl-1", model="m", created=0)),
        (responses_wire, response_object(reply, rid="resp_1", model="m", created=0, request={})),
    ]


def _valid_streams() -> list[tuple[Any, list[dict[str, Any] | str]]]:
    reply = _valid_reply()
    chat = chat_stream(reply, rid="c", model="m", created=0, include_usage=True)
    resp = response_stream(reply, rid="resp_1", model="m", created=0, request={})
    return [(chat_wire, [e.payload for e in chat]), (responses_wire, [e.payload for e in resp])]


def assert_valid(reply: t.ModelReply, turn: int) -> None:
    """What the workflow may rely on, whatever the server sent."""
    reply.model_dump_json()  # serializable: no lone surrogates, no NaN
    u = reply.usage
    for n in (u.input_tokens, u.cached_tokens, u.output_tokens, u.reasoning_tokens):
        assert type(n) is int and 0 <= n <= MAX_COUNT
    for label in (reply.finish_reason, reply.model, reply.response_id):
        assert label is None or (isinstance(label, str) and 0 < len(label) <= MAX_LABEL)
    assert reply.message.content is None or isinstance(reply.message.content, str)
    for i, c in enumerate(reply.message.tool_calls):
        assert c.call_id == f"call_{turn}_{i}" and isinstance(c.arguments, str)
        assert 0 < len(c.name) <= MAX_NAME and len(c.provider_id) <= MAX_PROVIDER_ID


def _render(event: object) -> list[str]:
    if isinstance(event, str):
        return [f"data: {event}", ""]
    try:
        data = json.dumps(event)
    except (ValueError, RecursionError):
        data = "{"
    return [f"data: {data}", ""]


def _stream_lines(events: list[Any], rng: random.Random) -> list[str]:
    """A stream with one event mutated, or its framing broken."""
    events = list(events)
    i = rng.randrange(len(events))
    kind = rng.randrange(6)
    if kind <= 2 and isinstance(events[i], dict):
        events[i] = _mutate(events[i], rng, deep=False)
    elif kind == 3:
        del events[i]
    elif kind == 4:
        events.insert(i, rng.choice(events))
    lines = [line for e in events for line in _render(e)]
    if kind == 5:
        j = rng.randrange(len(lines))
        broken = [
            lines[j][: rng.randrange(len(lines[j]) + 1)],
            "data: {",
            ": c",
            "event: x",
            "data",
            "data: " + "[" * 10**5,
        ]
        lines[j] = rng.choice(broken)
    return lines


async def _lines(lines: list[str]) -> Any:
    for line in lines:
        yield line


async def test_mutated_replies_give_a_valid_reply_or_a_named_failure_never_anything_else():
    rng = random.Random(SEED)
    outcomes: dict[str, int] = {"reply": 0, "malformed": 0, "stream_failed": 0}
    for _ in range(150):
        for wire, body in _valid_bodies():
            mutated = _mutate(body, rng) if rng.random() < 0.8 else _mutate(_mutate(body, rng, deep=False), rng)
            try:
                assert_valid(wire.parse_response(mutated, 3), 3)
                outcomes["reply"] += 1
            except MalformedResponse:
                outcomes["malformed"] += 1
        for wire, events in _valid_streams():
            try:
                assert_valid(await wire.parse_stream(_lines(_stream_lines(events, rng)), 3, on_delta=str), 3)
                outcomes["reply"] += 1
            except MalformedResponse:
                outcomes["malformed"] += 1
            except StreamFailed:
                outcomes["stream_failed"] += 1
    assert sum(outcomes.values()) == 600 and all(outcomes.values()), outcomes  # every kind of outcome occurred


@pytest.mark.parametrize("wire", [chat_wire, responses_wire])
def test_a_reply_is_normalized_field_by_field(wire: Any):
    huge = "x" * 10_000
    if wire is chat_wire:
        body: dict[str, Any] = {
            "id": huge,
            "model": 5,
            "choices": [
                {
                    "finish_reason": huge,
                    "message": {
                        "content": [{"type": "text", "text": "Hel"}, "lo", {"type": "refusal", "refusal": "!"}],
                        "tool_calls": [
                            {"id": huge, "function": {"name": 42, "arguments": {"a": 1}}},
                            {"id": 7, "function": {"name": "n" * 300, "arguments": None}},
                        ],
                    },
                }
            ],
            "usage": {"prompt_tokens": "12", "completion_tokens": -3, "prompt_tokens_details": {"cached_tokens": 1e30}},
        }
    else:
        body = {
            "id": huge,
            "model": 5,
            "output": [
                {"type": "message", "content": [{"type": "output_text", "text": "Hello!"}]},
                {"type": "function_call", "call_id": huge, "name": 42, "arguments": {"a": 1}},
                {"type": "function_call", "call_id": 7, "name": "n" * 300},
            ],
            "usage": {"input_tokens": "12", "output_tokens": -3, "input_tokens_details": {"cached_tokens": 1e30}},
        }
    reply = wire.parse_response(body, 4)
    assert reply.message.content == "Hello!"
    assert [(c.call_id, c.name, c.arguments, c.provider_id) for c in reply.message.tool_calls] == [
        ("call_4_0", "42", '{"a": 1}', "x" * MAX_PROVIDER_ID),
        ("call_4_1", "n" * MAX_NAME, "{}", ""),
    ]
    assert (reply.usage.input_tokens, reply.usage.output_tokens, reply.usage.cached_tokens) == (0, 0, MAX_COUNT)
    assert reply.model is None and reply.response_id == "x" * MAX_LABEL
    assert reply.finish_reason is not None and len(reply.finish_reason) <= MAX_LABEL


async def test_streamed_tool_call_indexes_may_be_strings_missing_or_huge():
    def chunk(delta: dict[str, Any]) -> list[str]:
        return [f"data: {json.dumps({'choices': [{'delta': delta}]})}", ""]

    lines = [
        *chunk({"tool_calls": [{"index": "0", "id": "a", "function": {"name": "f", "arguments": '{"x"'}}]}),
        *chunk({"tool_calls": [{"index": "0", "function": {"arguments": ": 1}"}}]}),
        *chunk({"tool_calls": [{"id": "b", "function": {"name": "g"}}]}),  # no index, a new id: a new call
        *chunk({"tool_calls": [{"id": "b", "function": {"arguments": '{"y"'}}]}),  # the same id: that call
        *chunk({"tool_calls": [{"function": {"arguments": ": 2}"}}]}),  # no index, no id: the last call
        *chunk({"tool_calls": [{"index": 10**20, "id": "c", "function": {"name": "h"}}]}),
        "data: [DONE]",
    ]
    reply = await chat_wire.parse_stream(_lines(lines), 2)
    assert [(c.call_id, c.provider_id, c.name, c.arguments) for c in reply.message.tool_calls] == [
        ("call_2_0", "a", "f", '{"x": 1}'),
        ("call_2_1", "b", "g", '{"y": 2}'),
        ("call_2_2", "c", "h", "{}"),
    ]


def test_too_many_tool_calls_in_one_reply_is_malformed():
    calls = [{"function": {"name": "f"}} for _ in range(MAX_TOOL_CALLS + 1)]
    with pytest.raises(MalformedResponse, match="tool calls in one reply"):
        chat_wire.parse_response({"choices": [{"message": {"tool_calls": calls}}]}, 1)


# --------------------------------------------------------------------------------- redaction


def test_the_redactor_masks_the_key_its_bearer_form_and_its_pieces_but_not_placeholders():
    r = Redactor(KEY)
    assert r.text(f"Authorization: Bearer {KEY}; again {KEY}.") == "Authorization: Bearer ***; again ***."
    # A key streamed in pieces leaves a piece in each raw line.
    assert r.text(f'data: {{"delta": "{KEY[:20]}"}} data: {{"delta": "{KEY[20:]}"}}') == (
        'data: {"delta": "***"} data: {"delta": "***"}'
    )
    assert Redactor("EMPTY").text("EMPTY is no secret") == "EMPTY is no secret"
    assert Redactor(None).scrub({"a": KEY}) == {"a": KEY}


def test_a_piece_cut_from_a_longer_text_loses_any_part_of_a_key_at_its_edges():
    r = Redactor(KEY)
    assert r.visible(f"...{KEY[:6]}", cut_after=True) == "..."  # too short a piece to be masked
    assert r.visible(f"{KEY[-6:]} done", cut_before=True) == " done"
    assert r.visible(f"{KEY[-5:]} {KEY} done") == f"{KEY[-5:]} *** done"  # not cut: a short piece is no key
    assert r.visible("Tokyo is warm", cut_before=True, cut_after=True) == "Tokyo is warm"


@dataclasses.dataclass
class _Record:
    note: str
    items: tuple[str, ...]


class _Model(BaseModel):
    text: str
    nested: dict[str, list[_Record]]


def test_scrub_reaches_into_dicts_lists_tuples_models_and_dataclasses():
    value = _Model(text=KEY, nested={KEY: [_Record(note=f"k={KEY}", items=(KEY, "ok"))]})
    clean = Redactor(KEY).scrub(value)
    assert clean == _Model(text="***", nested={"***": [_Record(note="k=***", items=("***", "ok"))]})
    assert value.text == KEY  # the original is untouched


def test_errors_are_masked_keeping_their_type_and_retryability():
    r = Redactor(KEY)
    app = ApplicationError(f"HTTP 401: {KEY}", {"key": KEY}, type="ModelHTTP401", non_retryable=True)
    clean = r.error(app)
    assert isinstance(clean, ApplicationError) and clean.message == "HTTP 401: ***"
    assert (clean.type, clean.non_retryable, clean.details) == ("ModelHTTP401", True, ({"key": "***"},))
    try:
        try:
            raise ConnectionError(f"proxy said {KEY}")
        except ConnectionError as cause:
            raise ValueError("tool failed") from cause
    except ValueError as err:
        other = r.error(err)
    assert isinstance(other, ApplicationError) and other.type == "ValueError" and not other.non_retryable
    assert isinstance(other.__cause__, ApplicationError) and other.__cause__.message == "proxy said ***"
    plain = ValueError("nothing secret")
    assert r.error(plain) is plain


def test_the_log_filter_masks_messages_arguments_and_tracebacks():
    try:
        raise RuntimeError(f"boom {KEY}")
    except RuntimeError:
        record = logging.getLogger("x").makeRecord(
            "x", logging.ERROR, __file__, 1, "sent %s to %r", (f"Bearer {KEY}", {"k": KEY}), sys.exc_info()
        )
    RedactingFilter(Redactor(KEY)).filter(record)
    text = logging.Formatter().format(record)
    assert "sent Bearer *** to {'k': '***'}" in text and "boom ***" in text
    assert_no_key(text)


# ------------------------------------------------------------------- the model activity alone


def hostile_settings(llm: FakeLLMServer, **kw: Any) -> LLMSettings:
    kw.setdefault("model", "hostile:echo")
    return llm_settings(llm, api_key=SecretStr(KEY), **kw)


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("stream", [False, True])
async def test_an_echoed_key_reaches_no_reply_heartbeat_or_capture(
    llm: FakeLLMServer, api: str, stream: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(model_module, "PROGRESS_EVERY", 0.005)
    llm.set_latency(0, stream_event_ms=3)  # many heartbeats while the key streams in, piece by piece
    beats: list[Any] = []
    settings = hostile_settings(llm, stream=stream, api=api, capture=True, capture_dir=tmp_path)
    for messages in (ASK, AFTER_TOOLS):
        reply = await call(settings, messages, on_heartbeat=lambda *d: beats.append(d))
        assert "***" in (reply.message.content or "")
        assert_no_key(reply.model_dump_json(), "the reply")
        if messages is ASK:  # the call "named" with the key is still a call, under our id
            assert [c.call_id for c in reply.message.tool_calls] == ["call_0_0", "call_0_1", "call_0_2"]
            assert all(c.provider_id == "Bearer ***" for c in reply.message.tool_calls)
    assert KEY in llm.requests()[-1]["headers"]["authorization"]
    if stream:
        assert len([b for b in beats if b and b[0].text]) > 5
    assert_no_key(repr(beats), "heartbeats")
    assert_no_key("".join(p.read_text() for p in tmp_path.iterdir()), "captures")


@pytest.mark.parametrize(
    "fault",
    [
        {"kind": "status", "status": 401, "echo_key": True},
        {"kind": "status", "status": 401, "echo_key": True, "size": 5000},
        {"kind": "status", "status": 503, "echo_key": True, "size": 200_000, "raw": True},
        {"kind": "status", "status": 429, "echo_key": True, "size": 700, "raw": True},
        {"kind": "malformed", "echo_key": True, "size": 3000},
        {"kind": "malformed", "echo_key": True, "stream": True},
        {"kind": "error_event", "echo_key": True, "size": 2000},
    ],
)
async def test_an_echoed_key_reaches_no_error_whatever_its_length(llm: FakeLLMServer, fault: dict[str, Any]):
    llm.add_faults([fault])
    err = await failure(hostile_settings(llm, model="echo", stream=fault.get("stream", fault["kind"] == "error_event")))
    assert "***" in err.message
    assert_no_key(f"{err} {err!r} {err.message} {err.details!r}", "the error")
    assert err.non_retryable == (fault.get("status") == 401)


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_odd_fields_are_normalized(llm: FakeLLMServer, api: str):
    for stream in (False, True):
        reply = await call(hostile_settings(llm, model="hostile:odd", api=api, stream=stream))
        assert_valid(reply, 0)
        assert [c.name for c in reply.message.tool_calls] == ["get_weather", "get_weather", "7"]
        assert all(len(c.provider_id) == MAX_PROVIDER_ID for c in reply.message.tool_calls[:2])


async def test_streamed_text_in_heartbeats_is_only_its_tail(llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(model_module, "PROGRESS_EVERY", 0.01)
    filler = "lorem ipsum " * 8000  # 96 KB on either side of the key
    model = script(llm, {"content": f"{filler}{KEY}{filler}"})
    beats: list[Any] = []
    reply = await call(hostile_settings(llm, model=model, stream=True), on_heartbeat=lambda *d: beats.append(d))
    assert reply.message.content == f"{filler}***{filler}"
    texts = [b[0].text for b in beats if b]
    assert texts and max(map(len, texts)) <= model_call.TAIL_CHARS  # however long the reply
    assert_no_key(repr(beats), "heartbeats")


def test_the_streamed_tail_never_shows_part_of_a_key_wherever_the_pieces_fall():
    progress = t.ModelProgress(turn=1, attempt=1)
    call = model_call.Call(chat_wire, "", {}, {}, True, 1, httpx.Timeout(1), Redactor(KEY), progress)
    text = ("lorem ipsum " * 2000 + KEY) * 8  # 190 KB: the tail is cut, keys cross its edges
    keys = [i for i in range(len(text)) if text.startswith(KEY, i)]
    rng, at, shown = random.Random(SEED), 0, []
    while at < len(text):
        n = rng.randint(1, 40)
        call.delta(text[at : at + n])
        at += n
        if rng.random() < 0.01 or any(k - 100 < at < k + len(KEY) + 100 for k in keys):
            shown.append(call.snapshot().text)
    assert all(len(s) <= model_call.TAIL_CHARS for s in shown) and shown[-1].endswith("***")
    for s in shown:
        assert_no_key(s, "a heartbeat")
        assert not any(KEY.startswith(s[-n:]) for n in range(1, 8))  # no key streaming in yet


# ------------------------------------------------------------------------------- whole runs


@tool
def leak_result() -> str:
    """Returns the key, as a careless tool might."""
    logging.getLogger("tests.leaky").warning("about to return %s", KEY)
    return f"the key is {KEY}"


@tool(max_attempts=1)
def leak_error() -> str:
    """Fails with the key in its message."""
    raise ValueError(f"cannot use key {KEY}")


leaky = Agent(name="leaky", instructions="Leak.", tools=[leak_result, leak_error])


def _payloads(message: ProtoMessage) -> list[Payload]:
    found: list[Payload] = []
    for field, value in message.ListFields():
        if field.type != field.TYPE_MESSAGE:
            continue
        if field.message_type.GetOptions().map_entry:
            items = list(value.values())
        elif field.is_repeated:
            items = list(value)
        else:
            items = [value]
        for item in items:
            if isinstance(item, Payload):
                found.append(item)
            elif isinstance(item, ProtoMessage):
                found += _payloads(item)
    return found


async def history_text(client: Client, handle: WorkflowHandle[Any, Any]) -> str:
    """The run's whole history as text: the events, and every payload decoded through the
    client's data converter (codec included), so nothing hides in base64."""
    history = await handle.fetch_history()
    texts = [history.to_json()]
    for event in history.events:
        for payload in _payloads(event):
            [value] = await client.data_converter.decode([payload])
            texts.append(json.dumps(value, default=str, ensure_ascii=False))
    return "\n".join(texts)


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """Every record, through the key filter as worker.py installs it (on the handlers)."""
    caplog.set_level(logging.DEBUG)
    _, log_filter = redaction_for(LLMSettings(api_key=SecretStr(KEY)))
    caplog.handler.addFilter(log_filter)
    return caplog


async def run_hostile(
    client: Client,
    worker_factory: Any,
    task_queue: str,
    logs: pytest.LogCaptureFixture,
    llm: FakeLLMServer,
    model: str,
    *,
    api: str = "chat",
    stream: bool = False,
    agent: str = "demo",
    registry: Registry | None = None,
    bound: float = 45.0,
) -> tuple[t.RunResult | WorkflowFailureError, list[t.Message]]:
    """One run against the hostile server: its outcome within `bound` seconds and its
    transcript, after checking that neither its history nor the logs hold any part of the key."""
    settings = LLMSettings(
        base_url=llm.base_url, model="demo", api_key=SecretStr(KEY), api=api, stream=stream, read_timeout=1.0
    )
    options: dict[str, Any] = {"settings": settings}  # build_worker installs the masking interceptor itself
    if registry is not None:
        options["registry"] = registry
    async with worker_factory(**options):
        handle = await start(client, task_queue, "What's the weather in Tokyo and Paris?", agent=agent, model=model)
        started = time.monotonic()
        try:
            outcome: t.RunResult | WorkflowFailureError = await asyncio.wait_for(handle.result(), bound)
        except WorkflowFailureError as err:
            outcome = err
        assert time.monotonic() - started < bound
        text = await history_text(client, handle)
        messages = await transcript(handle)
    assert KEY in json.dumps([r["headers"] for r in llm.requests()])  # the key was really sent
    assert_no_key(text, "the run's history")
    assert logs.records and all(KEY not in r.getMessage() for r in logs.records)
    assert_no_key(logs.text, "the logs")
    assert_no_key(repr(messages), "the transcript")
    return outcome, messages


@pytest.mark.parametrize(
    ("api", "stream"), [("chat", False), ("chat", True), ("responses", False), ("responses", True)]
)
async def test_a_server_echoing_the_key_everywhere_cannot_get_it_into_the_run(
    client: Client, worker_factory: Any, task_queue: str, logs: pytest.LogCaptureFixture, llm: FakeLLMServer,
    api: str, stream: bool,
):  # fmt: skip
    result, messages = await run_hostile(
        client, worker_factory, task_queue, logs, llm, "hostile:echo", api=api, stream=stream
    )
    assert isinstance(result, t.RunResult) and result.output.endswith("(your key: Bearer ***)")
    answered = [m for m in messages if isinstance(m, t.ToolMessage) and m.name == "Bearer ***"]
    assert answered and "unknown tool 'Bearer ***'" in answered[0].content  # named with the key: answered, not run


async def test_a_rejected_key_fails_the_run_at_once_without_showing_it(
    client: Client, worker_factory: Any, task_queue: str, logs: pytest.LogCaptureFixture, llm: FakeLLMServer
):
    llm.add_faults([{"kind": "status", "status": 401, "echo_key": True, "size": 20_000}])
    outcome, _ = await run_hostile(client, worker_factory, task_queue, logs, llm, "echo", bound=20)
    assert isinstance(outcome, WorkflowFailureError)
    assert "Incorrect API key provided: Bearer ***" in str(outcome.cause) and len(llm.requests()) == 1


@pytest.mark.parametrize("stream", [False, True])
async def test_echoing_errors_and_bodies_are_retried_then_the_run_completes(
    client: Client, worker_factory: Any, task_queue: str, logs: pytest.LogCaptureFixture, llm: FakeLLMServer,
    stream: bool,
):  # fmt: skip
    faults: list[dict[str, Any]] = [
        {"kind": "status", "status": 503, "echo_key": True, "size": 100_000, "raw": True},
        {"kind": "malformed", "echo_key": True, "size": 1000}
        if not stream
        else {"kind": "error_event", "echo_key": True},
    ]
    llm.add_faults(faults)
    result, _ = await run_hostile(client, worker_factory, task_queue, logs, llm, "echo", stream=stream)
    assert isinstance(result, t.RunResult) and result.output.startswith("echo: ")
    assert [r["fault"]["kind"] for r in llm.requests()[:2]] == [f["kind"] for f in faults]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_server_that_stalls_mid_reply_costs_one_read_timeout_then_the_run_goes_on(
    client: Client, worker_factory: Any, task_queue: str, logs: pytest.LogCaptureFixture, llm: FakeLLMServer,
    stream: bool,
):  # fmt: skip
    llm.add_faults([{"kind": "stall", "after_events": 3, "ms": 120_000}])
    started = time.monotonic()
    result, _ = await run_hostile(client, worker_factory, task_queue, logs, llm, "echo", stream=stream, bound=20)
    assert isinstance(result, t.RunResult) and result.output.startswith("echo: ")
    assert time.monotonic() - started < 60  # the stall would have lasted 120 s (bound loose: a loaded machine)
    assert llm.requests()[0]["fault"]["kind"] == "stall" and len(llm.requests()) == 2


@pytest.mark.parametrize("case", ["reuse-ids", "same-id", "odd"])
async def test_provider_ids_never_become_the_runs_ids(
    client: Client, worker_factory: Any, task_queue: str, logs: pytest.LogCaptureFixture, llm: FakeLLMServer,
    case: str,
):  # fmt: skip
    result, messages = await run_hostile(client, worker_factory, task_queue, logs, llm, f"hostile:{case}")
    assert isinstance(result, t.RunResult) and "Tokyo" in result.output
    calls = [c for m in messages if isinstance(m, t.AssistantMessage) for c in m.tool_calls]
    answered = [m.call_id for m in messages if isinstance(m, t.ToolMessage)]
    assert len(calls) >= 3 and len({c.call_id for c in calls}) == len(calls)
    assert answered == [c.call_id for c in calls]  # every call answered once, in order
    assert all(c.call_id.startswith("call_") and len(c.provider_id) <= MAX_PROVIDER_ID for c in calls)
    turns = result.turns
    for n in (result.usage.input_tokens, result.usage.cached_tokens, result.usage.output_tokens):
        assert 0 <= n <= turns * MAX_COUNT  # "odd" sends -5, "12", 1e30 and 10**30 as counts


async def test_a_tool_that_leaks_the_key_is_masked_by_the_interceptor(
    client: Client, worker_factory: Any, task_queue: str, logs: pytest.LogCaptureFixture, llm: FakeLLMServer
):
    model = script(llm, {"tool_calls": [{"name": "leak_result"}, {"name": "leak_error"}]}, {"content": "done"})
    registry = Registry(agents=[leaky])
    result, messages = await run_hostile(
        client, worker_factory, task_queue, logs, llm, model, agent="leaky", registry=registry
    )
    assert isinstance(result, t.RunResult) and result.output == "done"
    results = [m.content for m in messages if isinstance(m, t.ToolMessage)]
    assert results[0] == "the key is ***" and "cannot use key ***" in results[1]
    assert "about to return ***" in logs.text
