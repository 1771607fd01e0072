"""Who may use the console, and how an action must come.

- It listens on 127.0.0.1 unless told otherwise; on any other host it refuses to start without
  CONSOLE_TOKEN (read by the settings model, durable_agent_runner/config/env.py).
- With a token, every request carries it: a cookie set from the `?token=` link it prints, or an
  `X-Console-Token` / `Authorization: Bearer` header. Without it: 401, and nothing is shown.
- On a loopback address it answers only to a loopback Host header, so a web page elsewhere cannot
  reach it through a DNS name rebound to 127.0.0.1.
- Every action is a POST with the console's CSRF token (a form field or `X-CSRF-Token`), whose
  form is read here: bounded in size, UTF-8 only; a cross-site Origin is refused.
"""

from __future__ import annotations

import hmac
import ipaddress
import re
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

COOKIE = "console_token"
MAX_FORM_BYTES = 256 * 1024  # a session message of t.MAX_MESSAGE_CHARS fits; larger is refused
MAX_FIELDS = 64
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


class Refused(Exception):
    """A request the console will not serve: its status and one line for the person."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def is_loopback(host: str) -> bool:
    if host.strip("[]") in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_start(host: str, token: str | None) -> None:
    """Refuse to serve beyond this machine without a token (a ValueError with what to do)."""
    if not is_loopback(host) and not token:
        raise ValueError(
            f"refusing to listen on {host} without CONSOLE_TOKEN: anyone who reaches it could approve tool "
            "calls. Set CONSOLE_TOKEN (16-256 letters, digits, -_.~), or keep the default --host 127.0.0.1"
        )


class Guard:
    """ASGI middleware: the Host check and the token, before any page or action."""

    def __init__(self, app: ASGIApp, *, token: str | None, loopback: bool) -> None:
        self.app = app
        self.token = token
        self.loopback = loopback

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        response = self.check(request)
        if response is not None:
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def check(self, request: Request) -> Response | None:
        host = urlsplit(f"//{request.headers.get('host', '')}").hostname or ""
        if self.loopback and not is_loopback(host):
            return PlainTextResponse(f"this console answers on 127.0.0.1 only, not to Host {host[:60]!r}", 421)
        if request.method == "POST":
            origin = request.headers.get("origin")
            if origin and origin != "null" and urlsplit(origin).netloc != request.headers.get("host"):
                return PlainTextResponse("refused: a cross-site request", 403)
        if self.token is None:
            return None
        given = request.query_params.get("token")
        if given is not None and request.method == "GET":
            if not _same(given, self.token):
                return PlainTextResponse("that link's token is wrong: ask for the link the console printed", 401)
            rest = urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "token"])
            back = RedirectResponse(request.url.path + (f"?{rest}" if rest else ""), 303)
            back.set_cookie(COOKIE, self.token, httponly=True, samesite="strict")
            return back
        bearer = request.headers.get("authorization", "")
        offered = [
            request.headers.get("x-console-token"),
            bearer[7:] if bearer.lower().startswith("bearer ") else None,
            _cookie(request),
        ]
        if any(o is not None and _same(o, self.token) for o in offered):
            return None
        return PlainTextResponse(
            "this console needs its token: open the link it printed (…/?token=…), or send X-Console-Token", 401
        )


def _same(given: str, token: str) -> bool:
    return hmac.compare_digest(given.encode("utf-8", "replace"), token.encode())


def _cookie(request: Request) -> str | None:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(request.headers.get("cookie", ""))
    except Exception:  # a malformed Cookie header: as if there were none
        return None
    morsel = jar.get(COOKIE)
    return morsel.value if morsel is not None else None


def new_csrf() -> str:
    return secrets.token_urlsafe(32)


async def read_form(request: Request, csrf: str) -> dict[str, str]:
    """An action's form: urlencoded, at most MAX_FORM_BYTES of UTF-8, one value per name, with the
    console's CSRF token. Anything else: Refused with the reason."""
    if request.method != "POST":
        raise Refused(405, "actions are POSTs")
    length = request.headers.get("content-length")
    if length is not None and not re.fullmatch(r"[0-9]{1,12}", length):  # ASCII digits: int() takes '²'
        raise Refused(400, "the Content-Length header is not a number written with the digits 0-9")
    if length is not None and int(length) > MAX_FORM_BYTES:
        raise Refused(413, f"the form is larger than {MAX_FORM_BYTES // 1024} KiB")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise Refused(413, f"the form is larger than {MAX_FORM_BYTES // 1024} KiB")
    try:
        text = bytes(body).decode("utf-8")
        pairs = parse_qs(text, keep_blank_values=True, max_num_fields=MAX_FIELDS, errors="strict")
    except UnicodeDecodeError:
        raise Refused(400, "the form is not UTF-8 text") from None
    except ValueError:
        raise Refused(400, f"the form has more than {MAX_FIELDS} fields") from None
    form = {k: v[-1] for k, v in pairs.items()}
    given = request.headers.get("x-csrf-token") or form.pop("csrf", "")
    if not given or not hmac.compare_digest(given.encode("utf-8", "replace"), csrf.encode()):
        raise Refused(403, "the form's CSRF token is missing or stale: reload the page and try again")
    for name, value in form.items():
        if "\x00" in value:
            raise Refused(400, f"{name[:40]} holds a NUL character")
    return form
