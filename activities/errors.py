"""One place that decides which model-call failures Temporal retries.

    retryable       connection errors, timeouts, 408, 409, 429, 5xx, a malformed body (a few
                    times): `ApplicationError` with `next_retry_delay` from Retry-After
    non-retryable   400, 401, 403, 404, 422, other 4xx, and 429 with code `insufficient_quota`:
                    the run fails at once with the provider's own message

The HTTP code never retries by itself (no retry transport): every attempt is an activity attempt,
visible in the workflow's history and the UI.
"""

from __future__ import annotations

import json
from datetime import timedelta
from email.utils import parsedate_to_datetime
from time import time

import httpx
from temporalio.exceptions import ApplicationError

RETRYABLE_STATUS = {408, 409, 429}
MALFORMED_ATTEMPTS = 5  # a server that keeps sending garbage is broken, not busy
MAX_RETRY_DELAY = 600.0


def provider_message(response: httpx.Response) -> tuple[str, str | None]:
    """The provider's error message and code, from an OpenAI-style body when there is one."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:500] or response.reason_phrase, None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        code = error.get("code") or error.get("type")
        return str(error.get("message") or body)[:500], str(code) if code else None
    if isinstance(error, str):
        return error[:500], None
    return json.dumps(body)[:500], None


def retry_after(headers: httpx.Headers) -> float | None:
    """Seconds to wait, from `retry-after-ms` (OpenAI) or `Retry-After` (seconds or HTTP date)."""
    if ms := headers.get("retry-after-ms"):
        try:
            return min(float(ms) / 1000, MAX_RETRY_DELAY)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return min(max(float(value), 0.0), MAX_RETRY_DELAY)
    except ValueError:
        try:
            return min(max(parsedate_to_datetime(value).timestamp() - time(), 0.0), MAX_RETRY_DELAY)
        except (TypeError, ValueError):
            return None


def redact(text: str, secret: str | None) -> str:
    """Some proxies echo the request's key in their errors: it must not reach history."""
    return text.replace(secret, "***") if secret else text


def from_status(response: httpx.Response, secret: str | None = None) -> ApplicationError:
    status = response.status_code
    message, code = provider_message(response)
    message = redact(message, secret)
    text = f"HTTP {status} from model server: {message}"
    if status == 429 and code == "insufficient_quota":
        return ApplicationError(text, type="ModelQuotaExceeded", non_retryable=True)
    if status in RETRYABLE_STATUS or status >= 500:
        delay = retry_after(response.headers)
        return ApplicationError(
            text,
            type=f"ModelHTTP{status}",
            next_retry_delay=timedelta(seconds=delay) if delay is not None else None,
        )
    return ApplicationError(text, type=f"ModelHTTP{status}", non_retryable=True)


def from_transport(err: httpx.TransportError, base_url: str, secret: str | None = None) -> ApplicationError:
    kind = "ModelTimeout" if isinstance(err, httpx.TimeoutException) else "ModelConnectionError"
    detail = redact(str(err) or type(err).__name__, secret)
    return ApplicationError(f"cannot reach model server at {base_url}: {detail}", type=kind)


def malformed(detail: str, count: int) -> ApplicationError:
    """The `count`-th malformed reply to this call (not its attempt number)."""
    return ApplicationError(
        f"malformed model response: {detail}",
        type="MalformedModelResponse",
        non_retryable=count >= MALFORMED_ATTEMPTS,
    )
