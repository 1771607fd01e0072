"""Signed completion URLs (docs/outside-completion.md): what a tool that completes outside hands to
the system doing the work, so that system can complete the call without Temporal credentials.

    POST {COMPLETION_BASE_URL}/complete/{run_id}/{call_id}?exp={unix seconds}&sig={hex}

`sig` is HMAC-SHA256, keyed with COMPLETION_SECRET, over `complete`, the run id, the call id and
`exp`, one per line: a URL is good for one call of one run, until `exp`. The worker signs it in
the tool's activity (`ToolContext.completion_url`), so the secret never enters a run's history;
`client.py serve-hooks` checks it (webhooks/app.py) before it sends the `complete_call` update.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
from urllib.parse import quote

from pydantic import BaseModel, SecretStr

PATH = "/complete/{run_id}/{call_id}"
HEX = re.compile(r"[0-9a-f]{64}")
EXP = re.compile(r"[0-9]{1,12}")
MARGIN_SECONDS = 300  # a URL outlives the wait's deadline by this much: the run, not the URL, says "too late"


class CompletionSettings(BaseModel):
    """COMPLETION_SECRET and COMPLETION_BASE_URL (config/env.py): with both, tools that complete
    outside get a signed URL; the secret alone lets `client.py serve-hooks` check them."""

    secret: SecretStr | None = None
    base_url: str | None = None

    def key(self) -> bytes | None:
        return self.secret.get_secret_value().encode() if self.secret is not None else None


def signature(key: bytes, run_id: str, call_id: str, expires: int) -> str:
    return hmac.new(key, f"complete\n{run_id}\n{call_id}\n{expires}".encode(), hashlib.sha256).hexdigest()


def url(base: str, key: bytes, run_id: str, call_id: str, expires: float) -> str:
    """The signed URL that completes `call_id` of `run_id`, good until `expires` (unix seconds)."""
    exp = math.ceil(expires)
    path = PATH.format(run_id=quote(run_id, safe=""), call_id=quote(call_id, safe=""))
    return f"{base.rstrip('/')}{path}?exp={exp}&sig={signature(key, run_id, call_id, exp)}"


def check(key: bytes, run_id: str, call_id: str, exp: str, sig: str, now: float) -> str | None:
    """None when the URL holds; else why not, in one line (the ingress answers 401 with it)."""
    if not EXP.fullmatch(exp) or not HEX.fullmatch(sig):
        return "the completion URL is not signed: it needs exp=<unix seconds> and sig=<64 hex digits>"
    if not hmac.compare_digest(sig.encode(), signature(key, run_id, call_id, int(exp)).encode()):
        return "the completion URL's signature does not match"
    if int(exp) < now:
        return "the completion URL has expired"
    return None
