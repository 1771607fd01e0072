"""Is a request signed by the hook's secret? HMAC-SHA256 over the raw body, compared in constant
time, as each sender signs:

- github:  `X-Hub-Signature-256: sha256=HEX` over the body;
- slack:   `X-Slack-Signature: v0=HEX` over `v0:{X-Slack-Request-Timestamp}:{body}`, the timestamp
           within STALE_SECONDS of now (an old request replayed is refused);
- generic: `X-Signature-256: sha256=HEX` over the body (GitHub's scheme under a neutral name).

`check` returns None when the signature holds, else the reason (said to the sender with a 401:
which header is missing or wrong, never what was expected)."""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping

STALE_SECONDS = 300  # Slack's own advice: five minutes either way
HEX = re.compile(r"[0-9a-fA-F]{64}")
HEADERS = {"github": "X-Hub-Signature-256", "slack": "X-Slack-Signature", "generic": "X-Signature-256"}
PREFIXES = {"github": "sha256=", "slack": "v0=", "generic": "sha256="}
SLACK_TIMESTAMP = "X-Slack-Request-Timestamp"


def sign(kind: str, key: bytes, body: bytes, timestamp: str = "") -> str:
    """The header value a sender of `kind` puts on `body` (tests and senders use it too)."""
    signed = b"v0:" + timestamp.encode() + b":" + body if kind == "slack" else body
    return PREFIXES[kind] + hmac.new(key, signed, hashlib.sha256).hexdigest()


def check(kind: str, key: bytes, headers: Mapping[str, str], body: bytes, now: float) -> str | None:
    header = HEADERS[kind]
    given = headers.get(header.lower())
    if not given:
        return f"the request is not signed: no {header} header"
    timestamp = ""
    if kind == "slack":
        timestamp = headers.get(SLACK_TIMESTAMP.lower(), "")
        if not re.fullmatch(r"[0-9]{1,12}", timestamp):
            return f"the request has no valid {SLACK_TIMESTAMP} header"
        if abs(now - int(timestamp)) > STALE_SECONDS:
            return f"the request is stale: its {SLACK_TIMESTAMP} is more than {STALE_SECONDS // 60} minutes from now"
    prefix = PREFIXES[kind]
    if not (given.startswith(prefix) and HEX.fullmatch(given[len(prefix) :])):
        return f"the {header} header is not {prefix}<64 hex digits>"
    expected = sign(kind, key, body, timestamp)
    if not hmac.compare_digest(given.lower().encode(), expected.encode()):
        return f"the {header} signature does not match the body"
    return None
