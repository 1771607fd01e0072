"""`client.py codec-server`: the HTTP codec server that lets the Temporal Web UI (and the
`temporal` CLI's --codec-endpoint) read payloads encrypted with PAYLOAD_CODEC_KEYS.

It serves POST /encode and POST /decode with the body the UI sends, `{"payloads": [...]}` (each a
Payload in protobuf JSON: base64 metadata values and data), and answers in kind. Only the path is
matched: UI 2.54 posts to `/decode?preserveStorageRefs=true`. A payload this codec did not
encrypt, an external-storage reference among them, comes back as it went. CORS is answered for
the UI's origins (`--origin`, repeatable), with credentials, so the UI's "include cookies"
setting works too. It holds the keys, so it is a decryption service to whoever reaches it: on
a host other than loopback it refuses to start without CODEC_TOKEN, and with that token every
POST must carry `Authorization: Bearer TOKEN` (`temporal --codec-auth`, or your proxy), else 401.
The standard library's threaded HTTP server is enough for one UI's requests.
"""

from __future__ import annotations

import argparse
import hmac
import json
import logging
import sys
from collections.abc import Callable, Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from google.protobuf.json_format import MessageToDict, ParseDict, ParseError
from temporalio.api.common.v1 import Payload, Payloads

from durable_agent_runner.cli.args import integer
from durable_agent_runner.machine.bounds import parse_json
from durable_agent_runner.payloads.codec import ENV, CodecConfigError, DecryptError, EncryptionCodec, keyring_from_env

DEFAULT_PORT = 8234
DEFAULT_ORIGIN = "http://localhost:8233"
MAX_BODY = 64 * 1024 * 1024
ALLOW_HEADERS = "Content-Type, X-Namespace, Authorization"
log = logging.getLogger("codec-server")


class CodecServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], codec: EncryptionCodec, origins: Sequence[str], token: str | None = None
    ) -> None:
        self.codec = codec
        self.origins = {o.rstrip("/") for o in origins}
        self.token = token  # CODEC_TOKEN: every POST must carry it
        super().__init__(address, _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


class _Handler(BaseHTTPRequestHandler):
    server: CodecServer
    protocol_version = "HTTP/1.1"
    timeout = 30  # seconds a client may leave its connection silent (a body that never comes)

    def do_OPTIONS(self) -> None:  # the browser's preflight: a JSON POST with X-Namespace is not "simple"
        self._reply(HTTPStatus.NO_CONTENT, b"")

    def do_POST(self) -> None:
        steps: dict[str, Callable[[Sequence[Payload]], list[Payload]]] = {
            "/encode": self.server.codec.encode_sync,
            "/decode": self.server.codec.decode_sync,
        }
        token = self.server.token
        if token and not hmac.compare_digest(
            self.headers.get("Authorization", "").encode(), f"Bearer {token}".encode()
        ):
            self.close_connection = True  # its body stays unread
            return self._error(HTTPStatus.UNAUTHORIZED, "Authorization: Bearer CODEC_TOKEN is required")
        step = steps.get(urlsplit(self.path).path.rstrip("/"))
        if step is None:
            return self._error(HTTPStatus.NOT_FOUND, "POST /encode or /decode")
        given = self.headers.get("Content-Length") or "0"
        length = int(given) if given.isascii() and given.isdigit() else -1
        if length < 0 or length > MAX_BODY:
            self.close_connection = True  # its body stays unread: the connection cannot go on
            if length < 0:
                return self._error(HTTPStatus.BAD_REQUEST, "Content-Length must be a number of bytes")
            return self._error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"body over {MAX_BODY} bytes")
        try:  # the one parser of outside data: a body nested 10,000 deep is a 400, not a traceback
            body = parse_json((self.rfile.read(length) or b"{}").decode("utf-8"), max_chars=MAX_BODY)
            if not isinstance(body, dict):
                raise ValueError("the body is not a JSON object")
            payloads = ParseDict(body, Payloads(), ignore_unknown_fields=True).payloads
        except (ValueError, ParseError) as err:  # OutsideDataError and UnicodeDecodeError are ValueErrors
            return self._error(HTTPStatus.BAD_REQUEST, f'expected {{"payloads": [...]}}: {err}')
        try:
            out = Payloads(payloads=step(payloads))
        except DecryptError as err:  # an unknown key id, an altered payload
            return self._error(HTTPStatus.BAD_REQUEST, str(err))
        except Exception as err:  # sealed bytes that are no payload: not ours
            return self._error(HTTPStatus.BAD_REQUEST, f"cannot {urlsplit(self.path).path.strip('/')}: {err}")
        data = json.dumps(MessageToDict(out, preserving_proto_field_name=False)).encode()
        self._reply(HTTPStatus.OK, data, "application/json")

    def _error(self, status: HTTPStatus, message: str) -> None:
        self._reply(status, json.dumps({"error": message}).encode(), "application/json")

    def _reply(self, status: HTTPStatus, body: bytes, content_type: str | None = None) -> None:
        self.send_response(status)
        origin = (self.headers.get("Origin") or "").rstrip("/")
        if origin and origin in self.server.origins:
            self.send_header("Access-Control-Allow-Origin", origin)
            self.send_header("Access-Control-Allow-Credentials", "true")
            self.send_header("Access-Control-Allow-Methods", "POST, OPTIONS")
            self.send_header("Access-Control-Allow-Headers", ALLOW_HEADERS)
            self.send_header("Access-Control-Max-Age", "600")
        self.send_header("Vary", "Origin")
        if content_type:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # request lines only: never a body
        log.debug(format, *args)


def origin(text: str) -> str:
    """A Web UI's origin as a browser sends it: http(s)://host[:port] (a path given, as in the
    UI's address behind a proxy, is no part of it)."""
    parts = urlsplit(text.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc or any(c.isspace() for c in text.strip()):
        raise argparse.ArgumentTypeError(f"{text[:80]!r} is not an origin: http(s)://HOST[:PORT], as the UI's address")
    return f"{parts.scheme}://{parts.netloc}"


def add_parser(sub: argparse._SubParsersAction[Any]) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "codec-server",
        help="serve /encode and /decode so the Web UI shows payloads encrypted with PAYLOAD_CODEC_KEYS",
        description="Serves POST /encode and /decode for the Temporal Web UI (--ui-codec-endpoint, or the UI's "
        "Codec Server setting) and `temporal --codec-endpoint`, with the keys in PAYLOAD_CODEC_KEYS. "
        "Needs no connection to Temporal. Keep it on localhost, or behind authentication: it holds the keys.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: %(default)s)")
    p.add_argument("--port", type=integer, default=DEFAULT_PORT, help="port (default: %(default)s)")
    p.add_argument(
        "--origin",
        action="append",
        type=origin,
        metavar="URL",
        help=f"a Web UI origin allowed to call it (repeatable; default: {DEFAULT_ORIGIN})",
    )
    return p


def cmd_codec_server(args: argparse.Namespace) -> int:
    """Runs until interrupted. Needs no Temporal connection, only the keys: client.py calls it
    directly, not through the command dispatch that connects first."""
    from durable_agent_runner.config.env import ClientSettings, SettingsError
    from durable_agent_runner.console.security import is_loopback

    try:
        keyring = keyring_from_env()
        secret = ClientSettings.load().codec_token
    except (CodecConfigError, SettingsError) as err:
        print(f"client.py: error: {err}", file=sys.stderr)
        return 2
    token = secret.get_secret_value() if secret is not None else None
    if not is_loopback(args.host) and not token:
        print(f"client.py: error: refusing to listen on {args.host} without CODEC_TOKEN: anyone who reaches it "
              "could decrypt every payload. Set CODEC_TOKEN (16-256 letters, digits, -_.~; callers send "
              "Authorization: Bearer TOKEN), or keep the default --host 127.0.0.1", file=sys.stderr)  # fmt: skip
        return 2
    if keyring is None:
        print(f"client.py: error: {ENV} is not set: there is nothing to decode", file=sys.stderr)
        return 2
    try:
        server = CodecServer((args.host, args.port), EncryptionCodec(keyring), args.origin or [DEFAULT_ORIGIN], token)
    except OSError as err:
        print(f"client.py: error: cannot listen on {args.host}:{args.port}: {err.strerror or err} "
              "(choose another --port or --host)", file=sys.stderr)  # fmt: skip
        return 2
    origins = ", ".join(sorted(server.origins))
    guard = "; every POST needs Authorization: Bearer CODEC_TOKEN" if token else ""
    print(f"codec server on {server.url} (keys: {', '.join(keyring.ids)}; UI origins: {origins}{guard})", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m durable_agent_runner.cli.codec_server`: the same command without client.py."""
    parser = argparse.ArgumentParser(prog="codec-server")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return cmd_codec_server(parser.parse_args(["codec-server", *(sys.argv[1:] if argv is None else argv)]))


if __name__ == "__main__":
    sys.exit(main())
