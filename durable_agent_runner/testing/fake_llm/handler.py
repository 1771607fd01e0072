"""The HTTP side of the fake server: routing, model calls, streaming and the control API.
What a model call answers is the state's responder's (scripts.py): this module knows no scenario.

Standard library only (http.server), so the test double has no dependencies of its own.
Normal replies use HTTP/1.1 keep-alive with an exact Content-Length; streams use chunked
transfer encoding, so a dropped stream ("cut" fault) is visible to the client as such.
"""

from __future__ import annotations

import itertools
import json
import socket
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast
from urllib.parse import parse_qs, urlsplit

from durable_agent_runner.testing.fake_llm import hostile
from durable_agent_runner.testing.fake_llm.control import State, apply_control
from durable_agent_runner.testing.fake_llm.conversation import Api, Conversation, as_dict
from durable_agent_runner.testing.fake_llm.dialects import DIALECTS, Call, call_for, rid_for
from durable_agent_runner.testing.fake_llm.faults import (
    KEEPALIVE,
    STALL_MS,
    Fault,
    error_event_http,
    malformed_body,
    shape_stream,
    status_error,
)
from durable_agent_runner.testing.fake_llm.wire import SSE, ApiError, Reply, dumps

BATCH_BYTES = 64 * 1024  # an unpaced stream's chunks (see _stream)


class HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # benchmarks open many connections at once; the default is 5
    state: State
    verbose: bool

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gives up (a read timeout, a capped read) resets its connection: not news.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _HTTPServer6(HTTPServer):
    address_family = socket.AF_INET6  # for an IPv6 literal host such as ::1


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like the real API
    disable_nagle_algorithm = True  # headers and body go out in separate writes: no 40 ms stalls
    server_version = "durable_agent_runner/testing/fake_llm/1.0"
    timeout = 120  # drop idle keep-alive connections eventually

    @property
    def state(self) -> State:
        return cast(HTTPServer, self.server).state

    def log_message(self, format: str, *args: Any) -> None:
        if cast(HTTPServer, self.server).verbose:
            super().log_message(format, *args)

    # ------------------------------------------------------------------------ plumbing

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return bytes(data)
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _send_bytes(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _send_json(self, status: int, obj: object, headers: dict[str, str] | None = None) -> None:
        self._send_bytes(status, dumps(obj).encode(), "application/json", headers)

    def _send_error(self, err: ApiError, api: Api = "chat") -> None:
        if err.raw:
            self._send_bytes(err.status, err.message.encode(), "text/plain; charset=utf-8", err.headers)
        else:
            self._send_json(err.status, DIALECTS[api].error(err), err.headers)

    def _key(self, api: Api) -> str:
        """The request's key exactly as sent, for a hostile server to echo."""
        return DIALECTS[api].key({k.lower(): v for k, v in self.headers.items()})

    def _not_found(self) -> None:
        self._send_error(ApiError(404, f"Invalid URL ({self.command} {self.path.split('?')[0]})"))

    def _json_body(self, raw: bytes) -> dict[str, Any]:
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        obj = as_dict(body)
        if obj is None:
            raise ApiError(
                400,
                "We could not parse the JSON body of your request. (HINT: This likely means you aren't "
                "using your HTTP library correctly. The OpenAI API expects a JSON payload.)",
            )
        return obj

    # -------------------------------------------------------------------------- routing

    def do_GET(self) -> None:
        self._route()

    def do_POST(self) -> None:
        self._route()

    def do_PUT(self) -> None:
        self._route()

    def do_DELETE(self) -> None:
        self._route()

    def do_PATCH(self) -> None:
        self._route()

    def _route(self) -> None:
        path = self.path.split("?")[0].rstrip("/") or "/"
        try:
            raw = self._read_body()
            if path.startswith("/_control/"):
                self._control(path.removeprefix("/_control/"), raw)
            elif (self.command, path) == ("GET", "/healthz"):
                self._send_json(200, {"status": "ok"})
            else:
                self._api(path, raw)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client went away; nothing to answer
        except Exception as exc:  # a bug in the double: say so loudly, but still answer
            traceback.print_exc()
            self.close_connection = True
            try:
                self._send_error(ApiError(500, f"fake_llm internal error: {exc!r}"))
            except OSError:
                pass

    def _api(self, path: str, raw: bytes) -> None:
        entry = self.state.record(
            {
                "time": time.time(),
                "method": self.command,
                "path": path,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "raw": raw,
                "fault": None,
                "flags": [],
                "status": None,
            }
        )
        call = call_for(self.command, path, urlsplit(self.path).query)
        try:
            if self.command == "GET" and path == "/v1/models":
                self.state.update(entry, status=200)
                self._send_json(200, self._models())
            elif call is not None:
                self._model_call(call, raw, entry)
            else:
                raise ApiError(404, f"Invalid URL ({self.command} {path})")
        except ApiError as err:
            self.state.update(entry, status=err.status)
            self._send_error(err, call.api if call is not None else "chat")

    def _models(self) -> dict[str, Any]:
        with self.state.lock:
            names = [*self.state.models, *(f"script:{sid}" for sid in self.state.scripts)]
        return {
            "object": "list",
            "data": [{"id": name, "object": "model", "created": 0, "owned_by": "fake_llm"} for name in names],
        }

    # ----------------------------------------------------------------------- model calls

    def _model_call(self, call: Call, raw: bytes, entry: dict[str, Any]) -> None:
        self.state.sleep(self.state.latency_ms)  # benchmarks: every reply pays it, before byte one
        api = call.api
        dialect = DIALECTS[api]
        body = self._json_body(raw)
        dialect.check({k.lower(): v for k, v in self.headers.items()}, body)
        conv = dialect.parse(body, call)
        fault = self.state.faults.take(conv.model, api, conv.stream)
        self.state.update(
            entry,
            api=api,
            model=conv.model,
            stream=conv.stream,
            turn=conv.turn,
            flags=list(conv.flags),
            fault=fault.to_json() if fault else None,
        )
        if fault and fault.kind == "delay":
            self.state.sleep(fault.ms)
        key = self._key(api)
        if fault and fault.kind == "status":
            raise status_error(fault, key)
        if fault and fault.kind == "error_event" and not conv.stream:
            raise error_event_http(fault, key)
        if conv.prefixes is not None:  # a request that reached the model reads and writes the cache
            conv = replace(conv, cache_chars=self.state.prompt_cache.account(conv.prefixes))
        with self.state.lock:
            scripts = dict(self.state.scripts)
        case = hostile.case_of(conv.model)
        reply = self.state.responder(conv, scripts)
        if case is not None:
            reply = hostile.bend_reply(case, reply, key)
        self.state.update(entry, status=200)
        # From the request, not random: a retry, streamed or not, gets the very same reply.
        rid = rid_for(api, conv.fingerprint)
        created = int(time.time())
        if conv.stream:
            self._stream(api, conv, reply, rid, created, fault, entry, case, key)
            return
        if fault and fault.kind == "malformed":
            self._send_bytes(200, malformed_body(fault, key), "application/json")
            return
        obj = dialect.body(reply, conv, rid, created)
        payload = dumps(hostile.bend(case, obj, key) if case else obj).encode()
        if fault and fault.kind in ("cut", "stall"):
            # Promise the full body, deliver half, then hang up (cut) or go quiet (stall).
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload[: len(payload) // 2])
            if fault.kind == "stall":
                rest = payload[len(payload) // 2 :]
                self._stall(fault, (rest[i : i + 1] for i in range(len(rest))))
            self._hang_up()
            return
        self._send_bytes(200, payload, "application/json")

    def _stream(
        self,
        api: Api,
        conv: Conversation,
        reply: Reply,
        rid: str,
        created: int,
        fault: Fault | None,
        entry: dict[str, Any],
        case: str | None,
        key: str,
    ) -> None:
        events: list[SSE] = DIALECTS[api].stream(reply, conv, rid, created)
        if case is not None:
            events = [
                SSE(hostile.bend(case, e.payload, key), e.event) if isinstance(e.payload, dict) else e for e in events
            ]
        plan = shape_stream(events, fault, api, reply.keepalive, key)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        sent: list[float] = []  # when each frame left, for streaming-latency benchmarks
        pace = self.state.stream_event_ms
        # Paced, each frame is a chunk of its own; unpaced, frames share chunks of about BATCH_BYTES
        # (as behind a buffering proxy): a 3 MB reply is ~190,000 frames, each a write otherwise.
        batch: list[bytes] = []
        size = 0
        for frame in plan.frames:
            batch.append(frame)
            size += len(frame)
            if pace or size >= BATCH_BYTES:
                self._chunk(b"".join(batch))
                batch, size = [], 0
            sent.append(time.time())
            self.state.sleep(pace)
        if batch:
            self._chunk(b"".join(batch))
        self.state.update(entry, frames_sent_at=sent)
        if fault and fault.kind == "stall":
            self._stall(fault, itertools.repeat(b"%x\r\n%s\r\n" % (len(KEEPALIVE), KEEPALIVE)))
        if plan.abort:
            self._hang_up()  # no terminating chunk: the client sees an incomplete body
            return
        self.wfile.write(b"0\r\n\r\n")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _stall(self, fault: Fault, drips: Iterator[bytes]) -> None:
        """Silence for `fault.ms` (or STALL_MS); with `drip_ms`, one of `drips` that often instead."""
        until = time.monotonic() + (fault.ms or STALL_MS) / 1000
        pause = (fault.drip_ms or 0) / 1000
        while not self.state.stopping.is_set() and (left := until - time.monotonic()) > 0:
            if not pause:
                self.state.stopping.wait(left)
                break
            drip = next(drips, None)
            if drip is None:
                break
            self.wfile.write(drip)
            self.wfile.flush()
            self.state.stopping.wait(min(pause, left))

    def _hang_up(self) -> None:
        self.close_connection = True
        self.wfile.flush()
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # --------------------------------------------------------------------------- control

    def _control(self, name: str, raw: bytes) -> None:
        try:
            if self.command == "GET" and name == "requests":
                query = parse_qs(urlsplit(self.path).query)
                last = int(query["last"][0]) if "last" in query else None
                self._send_json(200, {"requests": self.state.requests(last)})
            elif self.command == "GET" and name == "faults":
                self._send_json(200, {"faults": self.state.faults.pending()})
            elif self.command == "POST" and name == "reset":
                self.state.reset()
                self._send_json(200, {"ok": True})
            elif self.command == "POST" and name in ("scripts", "faults", "latency"):
                self._send_json(200, apply_control(self.state, name, self._json_body(raw)))
            else:
                raise ApiError(404, f"Invalid URL ({self.command} /_control/{name})")
        except ValueError as exc:
            self._send_error(ApiError(400, str(exc)))
        except ApiError as err:
            self._send_error(err)


def bind(host: str, port: int, state: State, *, verbose: bool = False) -> HTTPServer:
    """The server bound to (host, port), not yet serving: IPv6 for an IPv6 literal host."""
    server_cls = _HTTPServer6 if ":" in host else HTTPServer
    httpd = server_cls((host, port), _Handler)
    httpd.state = state
    httpd.verbose = verbose
    return httpd
