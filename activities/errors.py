"""One place that decides which model-call failures Temporal retries.

    retryable       connection errors, timeouts (no byte for the read timeout, or an attempt
                    longer than the model timeout), 408, 409, 429, 5xx, a malformed body (a
                    few times): `ApplicationError` with `next_retry_delay` from Retry-After
                    (or a Google error body's RetryInfo)
    non-retryable   400, 401, 403, 404, 422, other 4xx, and 429 with code `insufficient_quota`:
                    the run fails at once with the provider's own message

The HTTP code never retries by itself (no retry transport): every attempt is an activity attempt,
visible in the workflow's history and the UI.
"""

from __future__ import annotations

from datetime import timedelta
from email.utils import parsedate_to_datetime
from time import time

import httpx
from temporalio.exceptions import ApplicationError

from durable_agent_runner.machine import bounds
from durable_agent_runner.redact import Redactor

RETRYABLE_STATUS = {408, 409, 429}
MALFORMED_ATTEMPTS = 5  # a server that keeps sending garbage is broken, not busy
MAX_RETRY_DELAY = 600.0
EXCERPT = 500  # characters of a provider's message kept in an error
NO_SECRETS = Redactor()


def excerpt(text: str, redactor: Redactor = NO_SECRETS) -> str:
    """What an error may quote of text a server sent: masked, then cut to EXCERPT characters."""
    return redactor.text(text)[:EXCERPT]


def provider_message(body: str, redactor: Redactor, *, cut: bool = False) -> tuple[str, str | None]:
    """The provider's error message and code, from an OpenAI-style body when there is one.
    Masked, then cut: some proxies echo the request's key in their errors. `cut` says the body
    was already cut short while being read (a part of a key may end it)."""

    def excerpt(text: str) -> str:
        return redactor.visible(text.strip(), cut_after=cut)[:EXCERPT]

    try:
        parsed = bounds.parse_json(body, max_chars=len(body), max_items=None)
    except bounds.OutsideDataError:  # not JSON, or past the bounds: its text is all there is
        return excerpt(body), None
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(error, dict):
        code = error.get("code") or error.get("type")
        return excerpt(str(error.get("message") or body)), excerpt(str(code)) if code else None
    return excerpt(error if isinstance(error, str) else body), None


def retry_after(headers: httpx.Headers) -> float | None:
    """Seconds to wait, from `retry-after-ms` (OpenAI) or `Retry-After` (seconds or HTTP date),
    within [0, MAX_RETRY_DELAY]; None when absent or unreadable."""
    if ms := headers.get("retry-after-ms"):
        try:
            return _bounded(float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return _bounded(float(value))
    except ValueError:
        try:
            return _bounded(parsedate_to_datetime(value).timestamp() - time())
        except (TypeError, ValueError, OverflowError, IndexError):
            return None


def body_retry_delay(body: str) -> float | None:
    """Seconds to wait from a `google.rpc.RetryInfo` detail of an error body, or None."""
    try:
        parsed = bounds.parse_json(body, max_chars=len(body), max_items=None)
    except bounds.OutsideDataError:
        return None
    error = parsed.get("error") if isinstance(parsed, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    for detail in details if isinstance(details, list) else []:
        delay = detail.get("retryDelay") if isinstance(detail, dict) else None
        if isinstance(delay, str) and delay.endswith("s"):
            try:
                return _bounded(float(delay[:-1]))
            except ValueError:
                return None
    return None


def _bounded(seconds: float) -> float | None:
    return None if seconds != seconds else min(max(seconds, 0.0), MAX_RETRY_DELAY)  # NaN: unreadable


def from_status(
    response: httpx.Response, body: str | None = None, redactor: Redactor = NO_SECRETS, *, cut: bool = False
) -> ApplicationError:
    """`body`: the response's text as read (default: all of it); `cut`: read only in part."""
    status = response.status_code
    message, code = provider_message(response.text if body is None else body, redactor, cut=cut)
    text = f"HTTP {status} from model server: {message or response.reason_phrase}"
    if status == 429 and code == "insufficient_quota":
        return ApplicationError(text, type="ModelQuotaExceeded", non_retryable=True)
    if status in RETRYABLE_STATUS or status >= 500:
        delay = retry_after(response.headers)
        if delay is None:  # Google's APIs say it in the body: error.details[].retryDelay ("7s")
            delay = body_retry_delay(response.text if body is None else body)
        return ApplicationError(
            text,
            type=f"ModelHTTP{status}",
            next_retry_delay=timedelta(seconds=delay) if delay is not None else None,
        )
    return ApplicationError(text, type=f"ModelHTTP{status}", non_retryable=True)


def from_transport(err: httpx.TransportError, base_url: str, redactor: Redactor = NO_SECRETS) -> ApplicationError:
    kind = "ModelTimeout" if isinstance(err, httpx.TimeoutException) else "ModelConnectionError"
    detail = excerpt(str(err) or type(err).__name__, redactor)
    return ApplicationError(f"cannot reach model server at {redactor.text(base_url)}: {detail}", type=kind)


def attempt_timeout(seconds: float) -> ApplicationError:
    """One attempt ran out of time (the agent's model timeout): retried like any timeout."""
    return ApplicationError(
        f"model call attempt took longer than {seconds:g} s; it will be retried", type="ModelTimeout"
    )


def malformed(detail: str, count: int) -> ApplicationError:
    """The `count`-th malformed reply to this call (not its attempt number)."""
    return ApplicationError(
        f"malformed model response: {detail}",
        type="MalformedModelResponse",
        non_retryable=count >= MALFORMED_ATTEMPTS,
    )
