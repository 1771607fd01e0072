"""Real receivers for notifications (tests/test_notify*.py): a webhook receiver (http.server in a
thread) that checks each request's signature and drops a key it has acted on, as a receiver
should; and an SMTP server (aiosmtpd's Controller) that keeps every email it is sent."""

from __future__ import annotations

import email
import email.policy
import json
import socket
import threading
import time
from datetime import UTC, datetime
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiosmtpd.controller import Controller

from durable_agent_runner.webhooks import signatures

MAX_BODY = 1024 * 1024


class Receiver:
    """POSTs to `url` are recorded whole (`requests`); a signed one whose key is new is acted on
    (`acted`), once per key. `status`: what it answers; `stall_first`: seconds it holds the first
    request before answering it (a worker killed meanwhile never hears the answer)."""

    def __init__(self, secret: str | None = None, status: int = 200, stall_first: float = 0.0) -> None:
        self.secret, self.status, self.stall_first = secret, status, stall_first
        self.requests: list[dict[str, Any]] = []
        self.acted: list[str] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                receiver._handle(self)

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False  # a stalled handler must not hold the test's teardown
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/hook"

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def signed(self, body: bytes, headers: Any) -> bool:
        """Checked as serve-hooks checks a `generic` hook's request: signature, id and freshness."""
        if self.secret is None:
            return headers.get("X-Signature-256") is None
        delivery = headers.get("X-Delivery-Id", "")
        return signatures.check("generic", self.secret.encode(), headers, body, time.time(), delivery) is None

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        size = min(int(h.headers.get("Content-Length") or 0), MAX_BODY)
        body = h.rfile.read(size)
        key = h.headers.get("Idempotency-Key")
        ok = self.signed(body, h.headers)
        with self._lock:
            first = not self.requests
            at = datetime.now(UTC)
            self.requests.append(
                {"key": key, "signed": ok, "json": json.loads(body), "headers": dict(h.headers), "at": at}
            )
        if first and self.stall_first:
            time.sleep(self.stall_first)
        status = self.status if ok else 401
        if status == 200:
            with self._lock:
                if key not in self.acted:
                    self.acted.append(key)
        try:
            h.send_response(status)
            h.send_header("Content-Length", "2")
            h.end_headers()
            h.wfile.write(b"ok")
        except OSError:  # the sender is gone (its worker was stopped): it will try again
            pass


class SmtpSink:
    """A real SMTP server on 127.0.0.1: `messages` holds every email it accepted."""

    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []
        self.envelopes: list[tuple[str, list[str]]] = []
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self._controller = Controller(self, hostname="127.0.0.1", port=self.port)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        assert isinstance(message, EmailMessage)
        self.messages.append(message)
        self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
        return "250 OK"

    def __enter__(self) -> SmtpSink:
        self._controller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._controller.stop()
