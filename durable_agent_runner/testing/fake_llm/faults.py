"""Fault injection: a FIFO queue of faults and how each one bends a reply.

Faults are consumed in order by the model calls they match (`model`, `path`, `stream`), each
`count` times. Kinds:
  status       that HTTP status with the API's error body (+ Retry-After / retry-after-ms)
  delay        sleep `ms`, then answer normally
  malformed    200 with invalid JSON (streams: one `data:` line of invalid JSON)
  cut          streams: `after_events` events then a dropped connection;
               otherwise a Content-Length larger than the body, then a dropped connection
  error_event  streams: a couple of deltas, then an error event (Anthropic: `type` or
               overloaded_error); otherwise a 500
  keepalive    streams: ": keep-alive" comments (Anthropic: `ping` events) and multi-line
               `data:` events (matches streaming requests only, unless `stream` says otherwise)
  stall        headers and part of the body (streams: `after_events` events; otherwise half the
               body), then silence for `ms` (default 30 s) and a dropped connection; with
               `drip_ms`, a keep-alive comment (streams) or one more byte of the body every
               `drip_ms` instead of silence: alive, never done
Hostile options (see fake_llm.hostile): `echo_key` puts the request's key (its Authorization or
api-key header value) in a `status` error's message, a `malformed` body and an `error_event`;
`size` pads that text to at least so many characters; `raw` sends a `status` error as text/plain.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal, get_args

from durable_agent_runner.testing.fake_llm import anthropic, gemini
from durable_agent_runner.testing.fake_llm.conversation import Api, as_dict
from durable_agent_runner.testing.fake_llm.hostile import echoed
from durable_agent_runner.testing.fake_llm.wire import SSE, ApiError, chat_error_event, responses_error_event

FaultKind = Literal["status", "delay", "malformed", "cut", "error_event", "keepalive", "stall"]
KINDS: tuple[str, ...] = get_args(FaultKind)

KEEPALIVE = b": keep-alive\n\n"
STALL_MS = 30_000  # a stall's default silence: longer than any client should wait


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    count: int = 1
    model: str | None = None  # only requests for this model match
    path: Api | None = None  # only this API matches
    stream: bool | None = None  # only streaming (True) or non-streaming (False) requests match
    status: int = 500
    retry_after: float | None = None  # seconds, sent as Retry-After
    retry_after_ms: int | None = None  # sent as retry-after-ms
    code: str | None = None
    message: str | None = None
    type: str | None = None
    ms: int = 0
    after_events: int = 3
    # None rather than a default value, so a fault's JSON (to_json) lists only what was asked.
    drip_ms: int | None = None
    echo_key: bool | None = None
    size: int | None = None
    raw: bool | None = None

    def matches(self, model: str, path: Api, stream: bool) -> bool:
        # keepalive only means something for a stream, so by default it waits for one.
        wants_stream = True if self.stream is None and self.kind == "keepalive" else self.stream
        return (
            (self.model is None or self.model == model)
            and (self.path is None or self.path == path)
            and (wants_stream is None or wants_stream == stream)
        )

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


def parse_fault(raw: object) -> Fault:
    """Validate one control-API fault; ValueError says what is wrong."""
    spec = as_dict(raw)
    if spec is None:
        raise ValueError("each fault must be an object")
    if spec.get("kind") not in KINDS:
        raise ValueError(f"fault kind must be one of {list(KINDS)}, got {spec.get('kind')!r}")
    if spec.get("path") not in (None, *get_args(Api)):
        raise ValueError(f"fault path must be one of {list(get_args(Api))}")
    fields = set(Fault.__dataclass_fields__)
    unknown = set(spec) - fields
    if unknown:
        raise ValueError(f"unknown fault fields {sorted(unknown)}")
    checks: dict[str, tuple[type, ...]] = {
        "count": (int,),
        "status": (int,),
        "ms": (int, float),
        "after_events": (int,),
        "retry_after": (int, float),
        "retry_after_ms": (int, float),
        "model": (str,),
        "code": (str,),
        "message": (str,),
        "type": (str,),
        "stream": (bool,),
        "drip_ms": (int,),
        "echo_key": (bool,),
        "size": (int,),
        "raw": (bool,),
    }
    for key, types in checks.items():
        value = spec.get(key)
        if value is None:
            continue
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise ValueError(f"fault field {key!r} has the wrong type")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
            raise ValueError(f"fault field {key!r} must not be negative")
    if spec.get("count", 1) < 1:
        raise ValueError("fault count must be at least 1")
    status = spec.get("status", 500)
    if not 100 <= status <= 599:
        raise ValueError("fault status must be an HTTP status code")
    values: dict[str, Any] = {**spec, "ms": int(spec.get("ms", 0))}
    if "retry_after_ms" in spec:
        values["retry_after_ms"] = int(spec["retry_after_ms"])
    return Fault(**values)


class FaultQueue:
    """Thread-safe FIFO; the first fault matching a request is used once per match."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []

    def add(self, faults: Sequence[Fault]) -> None:
        with self._lock:
            self._faults.extend(faults)

    def take(self, model: str, path: Api, stream: bool) -> Fault | None:
        with self._lock:
            for i, fault in enumerate(self._faults):
                if fault.matches(model, path, stream):
                    if fault.count > 1:
                        self._faults[i] = replace(fault, count=fault.count - 1)
                    else:
                        del self._faults[i]
                    return replace(fault, count=1)
        return None

    def pending(self) -> list[dict[str, Any]]:
        with self._lock:
            return [f.to_json() for f in self._faults]

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()


def message_for(fault: Fault, default: str, key: str) -> str:
    if fault.echo_key:
        return echoed(key, fault.size or 0)
    return fault.message or default


def status_error(fault: Fault, key: str = "") -> ApiError:
    headers: dict[str, str] = {}
    if fault.retry_after is not None:
        headers["Retry-After"] = f"{fault.retry_after:g}"
    if fault.retry_after_ms is not None:
        headers["retry-after-ms"] = str(fault.retry_after_ms)
    code = fault.code
    if code is None and fault.status == 429:
        code = "rate_limit_exceeded"
    message = message_for(fault, f"Injected fault: HTTP {fault.status} ({code or 'error'}).", key)
    return ApiError(fault.status, message, type_=fault.type, code=code, headers=headers, raw=fault.raw is True)


def error_event_http(fault: Fault, key: str = "") -> ApiError:
    """A non-streaming request hit by `error_event`: the plain-HTTP equivalent, a 500."""
    return ApiError(
        500,
        message_for(fault, "The server had an error while processing your request.", key),
        type_=fault.type,
        code=fault.code,
    )


MALFORMED_JSON = b'{"id": "broken", "object": "chat.completion", "choices": [{"index": 0, "mess'


def malformed_body(fault: Fault, key: str = "") -> bytes:
    """A 200 body that is not JSON: half an object, or (echo_key) a proxy's page echoing the key."""
    if not fault.echo_key:
        return MALFORMED_JSON
    return f"<html><body>Gateway rejected the request: {echoed(key, fault.size or 0)}</body></html>".encode()


@dataclass(frozen=True)
class StreamPlan:
    frames: list[bytes]
    abort: bool  # drop the connection instead of ending the body cleanly


def shape_stream(events: list[SSE], fault: Fault | None, api: Api, keepalive: bool, key: str = "") -> StreamPlan:
    """Render a stream's events, bent by `fault` (None: the plain stream)."""
    kind = fault.kind if fault else None
    if kind in ("cut", "stall"):
        assert fault is not None
        # A Gemini stream ends with its body: a cut one must lack the last chunk, its finishReason.
        keep = min(fault.after_events, len(events) - 1) if api == "gemini" else fault.after_events
        return StreamPlan([e.render() for e in events[:keep]], abort=True)
    if kind == "malformed":
        assert fault is not None
        named = {"responses": "response.output_text.delta", "anthropic": "content_block_delta"}
        broken = SSE(malformed_body(fault, key).decode(), event=named.get(api))
        tail = [SSE("[DONE]")] if api == "chat" else []
        return StreamPlan([e.render() for e in [events[0], broken, *tail]], abort=False)
    if kind == "error_event":
        assert fault is not None
        kept = _until_second_delta(events, api)
        code, message = (
            fault.code or "server_error",
            message_for(fault, "The server had an error while processing your request.", key),
        )
        if api == "gemini":
            error = gemini.error_event(message)
        elif api == "anthropic":
            error = anthropic.error_event(fault.type or "overloaded_error", message)
        elif api == "chat":
            error = chat_error_event(code, message)
        else:
            error = responses_error_event(code, message, len(kept))
        return StreamPlan([e.render() for e in [*kept, error]], abort=False)
    if kind == "keepalive" or keepalive:
        alive = anthropic.ping().render() if api == "anthropic" else KEEPALIVE  # Anthropic's own keep-alive
        frames = [alive]
        for i, event in enumerate(events):
            frames.append(event.render(multiline=i % 2 == 1))
            frames.append(alive)
        return StreamPlan(frames, abort=False)
    return StreamPlan([e.render() for e in events], abort=False)


def _until_second_delta(events: list[SSE], api: Api) -> list[SSE]:
    if api == "chat":  # role chunk + two deltas (fewer if the stream is shorter)
        return events[: min(3, len(events) - 2)]
    if api == "gemini":  # two chunks, never the last (the one with the finishReason)
        return events[: min(2, len(events) - 1)]
    seen = 0
    for i, event in enumerate(events):
        if (event.event or "").endswith((".delta", "content_block_delta")):
            seen += 1
            if seen == 2:
                return events[: i + 1]
    return events[:-1]  # everything but response.completed
