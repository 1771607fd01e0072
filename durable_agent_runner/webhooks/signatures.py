"""Is a request signed by the hook's secret? HMAC-SHA256 hex, compared in constant time, as each
sender signs:

- github:  `X-Hub-Signature-256: sha256=HEX` over the body (GitHub signs nothing else: its
           X-GitHub-Delivery is not signed, so the ingress keys the run on the body);
- slack:   `X-Slack-Signature: v0=HEX` over `v0:{X-Slack-Request-Timestamp}:{body}`;
- generic: `X-Signature-256: sha256=HEX` over `{X-Timestamp}.{delivery id}.{body}`, the delivery
           id being the value of the hook's id header (X-Delivery-Id unless the hook names
           another), empty when it is not sent. The id is signed, so a captured request resent
           under a new id does not match.

Slack's and generic's timestamps must be within STALE_SECONDS of now, either way: a request
captured and replayed later is refused. `check` returns None when the signature holds, else the
reason (said to the sender with a 401: which header is missing or wrong, never what was expected)."""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from collections.abc import Mapping

STALE_SECONDS = 300  # slack and generic timestamps: five minutes either way (Slack's own advice)
HEX = re.compile(r"[0-9a-fA-F]{64}")
HEADERS = {"github": "X-Hub-Signature-256", "slack": "X-Slack-Signature", "generic": "X-Signature-256"}
PREFIXES = {"github": "sha256=", "slack": "v0=", "generic": "sha256="}
TIMESTAMPS = {"slack": "X-Slack-Request-Timestamp", "generic": "X-Timestamp"}  # Unix seconds
DELIVERY_ID = "X-Delivery-Id"  # a generic request's signed delivery id, unless its hook names another header
TIMESTAMP = re.compile(r"[0-9]{1,12}")


def signed_bytes(kind: str, body: bytes, timestamp: str = "", delivery: str = "") -> bytes:
    """What `kind`'s sender signs: the one definition the receiver and the senders share."""
    if kind == "slack":
        return b"v0:" + timestamp.encode() + b":" + body
    if kind == "generic":
        return f"{timestamp}.{delivery}.".encode() + body
    return body


def sign(kind: str, key: bytes, body: bytes, timestamp: str = "", delivery: str = "") -> str:
    """The signature header's value a sender of `kind` puts on `body` (tests and senders use it too)."""
    return PREFIXES[kind] + hmac.new(key, signed_bytes(kind, body, timestamp, delivery), hashlib.sha256).hexdigest()


def generic_headers(key: bytes, body: bytes, delivery: str, *, now: float | None = None) -> dict[str, str]:
    """The headers a sender puts on a `generic` hook's POST of `body` as delivery `delivery`
    (for a hook that reads its id from another header, send the id under that name instead; ""
    sends none, and the id signed is empty)."""
    if "." in delivery:
        raise ValueError("a generic delivery id has no '.' (it separates the signed parts)")
    timestamp = str(int(time.time() if now is None else now))
    signature = sign("generic", key, body, timestamp, delivery)
    ids = {DELIVERY_ID: delivery} if delivery else {}
    return {"Content-Type": "application/json", TIMESTAMPS["generic"]: timestamp, **ids, HEADERS["generic"]: signature}


def check(kind: str, key: bytes, headers: Mapping[str, str], body: bytes, now: float, delivery: str = "") -> str | None:
    """None if `body` (and for generic, `delivery`: the id header's value, "" if none) is signed."""
    header = HEADERS[kind]
    given = headers.get(header.lower())
    if not given:
        return f"the request is not signed: no {header} header"
    timestamp = ""
    if kind in TIMESTAMPS:
        name = TIMESTAMPS[kind]
        timestamp = headers.get(name.lower(), "")
        if not TIMESTAMP.fullmatch(timestamp):
            return f"the request has no valid {name} header (Unix seconds)"
        if abs(now - int(timestamp)) > STALE_SECONDS:
            return f"the request is stale: its {name} is more than {STALE_SECONDS // 60} minutes from now"
    prefix = PREFIXES[kind]
    if not (given.startswith(prefix) and HEX.fullmatch(given[len(prefix) :])):
        return f"the {header} header is not {prefix}<64 hex digits>"
    expected = sign(kind, key, body, timestamp, delivery)
    if not hmac.compare_digest(given.lower().encode(), expected.encode()):
        what = {"github": "the body", "slack": "v0:{timestamp}:{body}", "generic": "{timestamp}.{delivery id}.{body}"}
        return f"the {header} signature does not match {what[kind]}"
    return None
