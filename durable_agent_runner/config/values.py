"""What a setting's value may be: the parsers and the value types the settings models
(config/env.py) build their fields from. Each parser takes the raw text, returns the value or
raises a ValueError whose message completes `NAME must be …`."""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import BeforeValidator, SecretStr

from durable_agent_runner.config.addresses import email_address, email_list

SHOWN = 40  # characters of a bad value quoted back
MAX_TEXT = 4096  # characters of a name, a path or a URL
MAX_QUEUE = 200  # characters of a task queue's name: `Q@agent@version` is a queue too
# A number as a person writes one, in ASCII digits: int() and float() also read other scripts' digits
# ('٣' is 3) and underscores ('1_0'), which no one means. NaN and infinity pass as words, for a
# bound to refuse by name.
INTEGER = re.compile(r"[+-]?[0-9]+")
NUMBER = re.compile(r"[+-]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|nan|inf|infinity)", re.IGNORECASE)


def in_digits(text: str, kind: type[int] | type[float]) -> bool:
    """Whether `text` is a `kind` written in ASCII digits: the settings' numbers and the CLI's flags."""
    return (INTEGER if kind is int else NUMBER).fullmatch(text.strip()) is not None


def _switch(raw: object) -> object:
    """The one boolean parser: 1/true/yes/on, 0/false/no/off (any case); anything else is refused."""
    if isinstance(raw, str):
        word = raw.strip().lower()
        if word in ("1", "true", "yes", "on"):
            return True
        if word in ("0", "false", "no", "off"):
            return False
        raise ValueError("1, true, yes or on, or 0, false, no or off")
    return raw


def _address(raw: object) -> object:
    """TEMPORAL_ADDRESS as temporalio connects to it: host:port, not a URL (the SDK warns of a
    scheme, and will refuse it)."""
    if isinstance(raw, str) and "://" in raw:
        raise ValueError("the server's host:port, not a URL (no http:// or https://)")
    return raw


def _tls_switch(raw: object) -> object:
    """TEMPORAL_TLS as temporalio's envconfig reads it: true/false/1/0 in any case. It takes any
    other word (`off`, `no`) as TLS on, against a plaintext server too, so those are refused."""
    if isinstance(raw, str):
        word = raw.strip().lower()
        if word not in ("true", "false", "1", "0"):
            raise ValueError("true or false (or 1 or 0), the words temporalio reads")
        return word in ("true", "1")
    return raw


def number(
    kind: type[float] | type[int], low: float, high: float, *, open_low: bool = False, unit: str = ""
) -> Callable[..., Any]:
    """The one number parser: a finite `kind` in [low, high] (or (low, high])."""
    what = ("a whole number" if kind is int else "a number") + (f" of {unit}" if unit else "")
    allowed = f"{what} in {'(' if open_low else '['}{low:g}, {high:g}]"

    def parse(raw: object) -> float | int:
        value: float | int
        try:
            if isinstance(raw, str):
                text = raw.strip()
                if not in_digits(text, kind) or (kind is int and len(text) > 20):
                    raise ValueError
                value = kind(text)
            elif isinstance(raw, bool) or not isinstance(raw, int | float):
                raise ValueError
            else:
                value = raw
        except (ValueError, OverflowError):
            raise ValueError(allowed) from None
        ok = math.isfinite(value) and (low < value if open_low else low <= value) and value <= high
        if not ok or (kind is int and value != int(value)):
            raise ValueError(allowed)
        return kind(value)

    return parse


def _text(raw: object) -> object:
    if isinstance(raw, str) and len(raw) > MAX_TEXT:
        raise ValueError(f"at most {MAX_TEXT} characters")
    return raw


RESERVED_QUEUES = "/_sys/"  # Temporal's prefix for its internal task queues


def queue_name(raw: object) -> object:
    """A task queue's name (AGENT_TASK_QUEUE, `--task-queue`, `task_queue=`): printable, with no
    blank at either end, short enough that an agent's name and version still fit after it, and
    not in Temporal's own `/_sys/` (a worker would poll a queue no run can be started on)."""
    if isinstance(raw, str) and not (0 < len(raw) <= MAX_QUEUE and raw.isprintable() and raw == raw.strip()):
        raise ValueError(f"1-{MAX_QUEUE} printable characters with no space at either end")
    if isinstance(raw, str) and raw.startswith(RESERVED_QUEUES):
        raise ValueError(f"a name outside {RESERVED_QUEUES}, which Temporal keeps for its own queues")
    return raw


def queue_flag(text: str) -> str:
    """`--task-queue Q` as argparse takes it: the same rule, said as a usage error."""
    try:
        queue_name(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"{text[:SHOWN]!r}: a task queue must be {err}") from None
    return text


def _secret_url(raw: object) -> object:
    """An http(s) URL with a host (and a port of 1-65535, if it names one), without its trailing slash."""
    if not isinstance(raw, str):
        return raw
    url = _text(raw.strip().rstrip("/"))
    try:
        parts = urlsplit(str(url))
        host = parts.hostname
    except ValueError:  # e.g. an unclosed IPv6 bracket
        host = None
    if not host or parts.scheme not in ("http", "https") or any(c.isspace() for c in str(url)):
        raise ValueError("an http:// or https:// URL with a host, and no blanks")
    try:
        port = parts.port  # past 65535 or not a number: ValueError
    except ValueError:
        port = 0
    if port == 0:
        raise ValueError("a URL whose port, if it has one, is a number from 1 to 65535")
    return url


def masked(text: str) -> str:
    """`text` as a refusal may show it: a URL's user and password (`http://u:p@h`) as `***@`."""
    return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#]*@", r"\1***@", text)


def _url(raw: object) -> object:
    """A URL that is shown (the worker's log, links, errors): a secret URL with no user or password
    in it, which would be shown with it."""
    url = _secret_url(raw)
    if isinstance(url, str) and "@" in urlsplit(url).netloc:
        raise ValueError("a URL with no user or password in it (it is shown in logs): give the key in its own variable")
    return url


def _host(raw: object) -> object:
    """A host's name or address (SMTP_HOST): no blank, no scheme, no path (its port is SMTP_PORT)."""
    if isinstance(raw, str) and not (
        0 < len(raw) <= 253 and raw.isprintable() and not any(c.isspace() or c in "/@" for c in raw)
    ):
        raise ValueError("a host's name or address (no blanks, scheme or path; the port is SMTP_PORT)")
    return raw


def _signing_secret(raw: object) -> object:
    """A secret that signs what the worker sends (NOTIFY_WEBHOOK_SECRET): at least 8 characters,
    as a hook of `serve-hooks`, which checks such a signature, requires of its own."""
    if isinstance(raw, str) and not 8 <= len(raw) <= MAX_TEXT:
        raise ValueError(f"8-{MAX_TEXT} characters")
    return raw


def _token(raw: object) -> object:
    if isinstance(raw, str) and not (16 <= len(raw) <= 256 and all(c.isalnum() or c in "-_.~" for c in raw)):
        raise ValueError("16-256 characters of letters, digits and -_.~")
    return raw


def _header_value(raw: object) -> object:
    """A value sent in an HTTP header (the model's API key): visible ASCII only. httpx refuses a
    non-ASCII key with a traceback at the first call, and a line break or blank splits or ends the
    header, so each is refused here, at start, instead of failing every run."""
    text = raw.get_secret_value() if isinstance(raw, SecretStr) else raw
    if isinstance(text, str) and not (text and all("!" <= c <= "~" for c in text)):
        raise ValueError("printable ASCII without blanks or line breaks (it rides in an HTTP header)")
    return raw


TCHAR = "!#$%&'*+-.^_`|~"  # besides letters and digits, in a header's name


def _header_name(raw: object) -> object:
    """An HTTP header's name (RFC 9110's token)."""
    ok = isinstance(raw, str) and 0 < len(raw) <= 256 and all(c.isascii() and (c.isalnum() or c in TCHAR) for c in raw)
    if isinstance(raw, str) and not ok:
        raise ValueError("an HTTP header name (letters, digits and !#$%&'*+-.^_`|~)")
    return raw


def is_present(raw: object) -> object:
    """A flag set by any value at all (NO_COLOR's rule)."""
    return bool(raw) if isinstance(raw, str) else raw


def otel_true(raw: object) -> object:
    """OpenTelemetry's booleans: only `true` (any case) is true."""
    return raw.strip().lower() == "true" if isinstance(raw, str) else raw


def otlp_protocol(raw: object) -> object:
    if isinstance(raw, str) and raw.strip() not in ("http/protobuf", "grpc"):
        raise ValueError("http/protobuf or grpc")
    return raw.strip() if isinstance(raw, str) else raw


def choice_word(raw: object) -> object:
    """A choice among words: any case, blanks around it ignored."""
    return raw.strip().lower() if isinstance(raw, str) else raw


Switch = Annotated[bool, BeforeValidator(_switch)]
TlsSwitch = Annotated[bool, BeforeValidator(_tls_switch)]
Address = Annotated[str, BeforeValidator(_address)]
Url = Annotated[str, BeforeValidator(_url)]
Text = Annotated[str, BeforeValidator(_text)]
QueueName = Annotated[str, BeforeValidator(queue_name)]
# Bounds on a model call: Temporal's timers and retry policies take these, and an hour per attempt,
# a day per call and a hundred attempts are beyond any model call a run should wait for.
AttemptSeconds = Annotated[float, BeforeValidator(number(float, 0, 3600, open_low=True, unit="seconds"))]
CallSeconds = Annotated[float, BeforeValidator(number(float, 0, 86400, open_low=True, unit="seconds"))]
Attempts = Annotated[int, BeforeValidator(number(int, 1, 100))]
Threads = Annotated[int, BeforeValidator(number(int, 1, 1024))]
Port = Annotated[int, BeforeValidator(number(int, 1, 65535))]
NotifyAttempts = Annotated[int, BeforeValidator(number(int, 1, 20))]
NotifySeconds = Annotated[float, BeforeValidator(number(float, 0, 120, open_low=True, unit="seconds"))]
SecretUrl = Annotated[SecretStr, BeforeValidator(_secret_url)]  # a URL that is its own credential (Slack's webhooks)
Secret = Annotated[SecretStr, BeforeValidator(_text)]
SigningSecret = Annotated[SecretStr, BeforeValidator(_signing_secret)]
Host = Annotated[str, BeforeValidator(_host)]
# NOTIFY_EMAIL_TO (kept as the addresses joined by ", ") and NOTIFY_EMAIL_FROM
Emails = Annotated[str, BeforeValidator(lambda raw: ", ".join(email_list(raw)) if isinstance(raw, str) else raw)]
Email = Annotated[str, BeforeValidator(lambda raw: email_address(raw) if isinstance(raw, str) else raw)]
# Long enough not to be guessed, short enough for a header; printable, as it rides in a link and a cookie.
ConsoleToken = Annotated[SecretStr, BeforeValidator(_token)]
ApiKey = Annotated[SecretStr, BeforeValidator(_header_value)]
HeaderName = Annotated[str, BeforeValidator(_header_name)]
Bytes = Annotated[
    int, BeforeValidator(number(int, 0, 2 * 1024 * 1024, unit="bytes"))
]  # Temporal refuses a payload past 2 MB
