"""Every environment variable the product reads itself, as one typed settings model.

`ClientSettings` holds what `client.py` reads; `WorkerSettings` adds what only a worker reads.
Each is read once, at start, by pydantic-settings; a bad value stops the process there with one
line, `NAME must be <what is allowed>, not '<value>'` (exit code 2), instead of being discovered
by the first run that uses it. Numbers are parsed here and nowhere else, finite and bounded;
switches take one set of spellings.

No other module of the product reads the environment (tests/test_env_reads.py checks it): each
takes its value from these models, loaded once by the process's entry point and passed down.
Not here: the TEMPORAL_* connection variables and the profile file, which temporalio's envconfig
reads as the `temporal` CLI does (durable_agent_runner/config/connection.py); the OTEL_* variables
the OpenTelemetry SDK reads itself (its endpoint's headers, timeouts, sampler, batching).
`TelemetrySettings` holds the few OTEL_* ones durable_agent_runner/telemetry/ decides by.

Variables (default in brackets):
  AGENT_TASK_QUEUE [agent-runner]   the workers' task queue
  TEMPORAL_UI_URL [http://localhost:8233]   where `client.py` links runs
  TEMPORAL_TLS   read by temporalio; checked here: true/false/1/0 (it reads any other word as on)
  CONSOLE_TOKEN   the web console's token: needed to serve it beyond 127.0.0.1 (durable_agent_runner/console/)
  LLM_CAPTURE_DIR [.state/captures]   wire captures (activities/capture.py)
  PAYLOAD_CODEC_KEYS, PAYLOAD_STORE, PAYLOAD_STORE_DIR, PAYLOAD_STORE_THRESHOLD   payloads
  OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT [off]   message text in spans
  LLM_BASE_URL, LLM_MODEL, LLM_API_KEY / OPENAI_API_KEY, LLM_API_KEY_HEADER, LLM_API [chat],
  LLM_STREAM [on], LLM_CAPTURE [off], LLM_READ_TIMEOUT, LLM_TIMEOUT, LLM_MAX_ATTEMPTS,
  LLM_RETRY_SECONDS   the model (durable_agent_runner/config/llm.py)
  OPENAI_BASE_URL, OPENAI_API_KEY, ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY, GEMINI_BASE_URL,
  GEMINI_API_KEY / GOOGLE_API_KEY   the providers "openai:…", "anthropic:…", "gemini:…" name
  NOTIFY_WEBHOOK_URL, NOTIFY_WEBHOOK_SECRET, NOTIFY_SLACK_WEBHOOK_URL, NOTIFY_ESCALATE_WEBHOOK_URL,
  SMTP_HOST, SMTP_PORT [25], SMTP_USERNAME, SMTP_PASSWORD, SMTP_STARTTLS [off], NOTIFY_EMAIL_TO,
  NOTIFY_EMAIL_FROM, NOTIFY_CONSOLE_URL, NOTIFY_MAX_ATTEMPTS [5], NOTIFY_TIMEOUT [10]   who hears of a
  run waiting for a person (durable_agent_runner/config/notify.py)
  LLM_PRICES, TOOL_THREADS [16], WORKER_EVENT_LOOP [uvloop], HOOKS_STATE_DIR [.state/hooks]
  COMPLETION_SECRET, COMPLETION_BASE_URL   signed completion URLs (durable_agent_runner/config/completion.py)
  USER / USERNAME   who decides, when a command is not told (`--by`)
  NO_COLOR   any value: no colour in the chat (https://no-color.org)
  OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT, OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL, OTEL_SDK_DISABLED,
  OTEL_TRACES_EXPORTER, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES   whether and how to trace
"""

from __future__ import annotations

import argparse
import contextvars
import math
import os
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AliasChoices, BeforeValidator, Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from durable_agent_runner.config.addresses import email_address, email_list
from durable_agent_runner.workflows.types import (
    DEFAULT_MODEL_MAX_ATTEMPTS,
    DEFAULT_MODEL_READ_TIMEOUT,
    DEFAULT_MODEL_RETRY_SECONDS,
    DEFAULT_MODEL_TIMEOUT,
    WireName,
)

DEFAULT_CAPTURE_DIR = ".state/captures"  # LLM_CAPTURE_DIR's default (activities/capture.py)
SHOWN = 40  # characters of a bad value quoted back
# Never quoted back, even when bad: a mistyped secret is still most of the secret.
SECRETS = frozenset({
    "CONSOLE_TOKEN", "LLM_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY",
    "TEMPORAL_API_KEY", "PAYLOAD_CODEC_KEYS", "NOTIFY_WEBHOOK_SECRET", "NOTIFY_SLACK_WEBHOOK_URL", "SMTP_PASSWORD",
    "COMPLETION_SECRET",
})  # fmt: skip
MAX_TEXT = 4096  # characters of a name, a path or a URL
MAX_QUEUE = 200  # characters of a task queue's name: `Q@agent@version` is a queue too
MAX_NAME = 200  # characters of a login name kept as who decided (the CLI's --by takes as many)


_ONLY_GIVEN = contextvars.ContextVar("settings_only_given", default=False)


class SettingsError(ValueError):
    """A bad environment variable: one line naming it, the value and what is allowed."""


# ---------------------------------------------------------------------------------- parsers


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
                if kind is int and not (text.isascii() and text.lstrip("+-").isdigit() and len(text) <= 20):
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


def queue_name(raw: object) -> object:
    """A task queue's name (AGENT_TASK_QUEUE, `--task-queue`, `task_queue=`): printable, with no
    blank at either end, short enough that an agent's name and version still fit after it."""
    if isinstance(raw, str) and not (0 < len(raw) <= MAX_QUEUE and raw.isprintable() and raw == raw.strip()):
        raise ValueError(f"1-{MAX_QUEUE} printable characters with no space at either end")
    return raw


def queue_flag(text: str) -> str:
    """`--task-queue Q` as argparse takes it: the same rule, said as a usage error."""
    try:
        queue_name(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"{text[:SHOWN]!r}: a task queue must be {err}") from None
    return text


def _url(raw: object) -> object:
    """An http(s) URL with a host, without its trailing slash."""
    if not isinstance(raw, str):
        return raw
    url = _text(raw.strip().rstrip("/"))
    try:
        parts = urlsplit(str(url))
        host = parts.hostname
    except ValueError:  # e.g. an unclosed IPv6 bracket
        host = None
    if not host or parts.scheme not in ("http", "https"):
        raise ValueError("an http:// or https:// URL with a host")
    return url


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


def _present(raw: object) -> object:
    """A flag set by any value at all (NO_COLOR's rule)."""
    return bool(raw) if isinstance(raw, str) else raw


def _otel_true(raw: object) -> object:
    """OpenTelemetry's booleans: only `true` (any case) is true."""
    return raw.strip().lower() == "true" if isinstance(raw, str) else raw


def _protocol(raw: object) -> object:
    if isinstance(raw, str) and raw.strip() not in ("http/protobuf", "grpc"):
        raise ValueError("http/protobuf or grpc")
    return raw.strip() if isinstance(raw, str) else raw


def _word(raw: object) -> object:
    """A choice among words: any case, blanks around it ignored."""
    return raw.strip().lower() if isinstance(raw, str) else raw


Switch = Annotated[bool, BeforeValidator(_switch)]
TlsSwitch = Annotated[bool, BeforeValidator(_tls_switch)]
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
SecretUrl = Annotated[SecretStr, BeforeValidator(_url)]  # a URL that is its own credential (Slack's webhooks)
Secret = Annotated[SecretStr, BeforeValidator(_text)]
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


def _env(name: str, *more: str) -> Any:
    return AliasChoices(name, *more) if more else name


# ---------------------------------------------------------------------------------- models


class Settings(BaseSettings):
    """The base of the settings models: how they read the environment and report a bad value."""

    # Empty means unset, as a shell's `VAR=` does; names are exact; other variables are not ours.
    model_config = SettingsConfigDict(case_sensitive=True, env_ignore_empty=True, extra="ignore")

    @classmethod
    def load(cls, env: Mapping[str, str] | None = None) -> Any:
        """The settings from `env` (default: the process's environment); SettingsError if one is bad."""
        try:
            if env is None:
                return cls()
            names = _names(cls)
            given = {k: v for k, v in env.items() if k in names and v != ""}
            token = _ONLY_GIVEN.set(True)
            try:
                return cls.model_validate(given)
            finally:
                _ONLY_GIVEN.reset(token)
        except ValidationError as err:
            raise SettingsError(describe(err, env if env is not None else os.environ)) from None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # `load(env)` reads `env` alone: the process's own variables must not fill in the rest.
        if _ONLY_GIVEN.get():
            return (init_settings,)
        return (init_settings, env_settings, dotenv_settings, file_secret_settings)


def _cut_name(raw: object) -> object:
    return raw[:MAX_NAME] if isinstance(raw, str) else raw


class ShellSettings(Settings):
    """What a command takes from the shell it runs in (`login_name`, `no_color`); never refused."""

    user: Annotated[str, BeforeValidator(_cut_name)] | None = Field(None, validation_alias=_env("USER", "USERNAME"))
    no_color: Annotated[bool, BeforeValidator(_present)] = Field(False, validation_alias=_env("NO_COLOR"))


def login_name(default: str) -> str:
    """Who decides when a command is not told (`--by`): $USER or $USERNAME, else `default`."""
    return str(ShellSettings.load().user or default)


def no_color() -> bool:
    """$NO_COLOR set to anything: no colour (https://no-color.org)."""
    return bool(ShellSettings.load().no_color)


class ClientSettings(ShellSettings):
    """What `client.py` (and so also a worker) reads from the environment."""

    task_queue: QueueName = Field("agent-runner", validation_alias=_env("AGENT_TASK_QUEUE"))
    ui_url: Text = Field("http://localhost:8233", validation_alias=_env("TEMPORAL_UI_URL"))
    # Read by temporalio's envconfig (config/connection.py), checked here before it is.
    temporal_tls: TlsSwitch | None = Field(None, validation_alias=_env("TEMPORAL_TLS"))
    capture_dir: Text = Field(DEFAULT_CAPTURE_DIR, validation_alias=_env("LLM_CAPTURE_DIR"))
    codec_keys: SecretStr | None = Field(None, validation_alias=_env("PAYLOAD_CODEC_KEYS"))  # payloads/codec.py
    payload_store: Text = Field("local", validation_alias=_env("PAYLOAD_STORE"))
    payload_store_dir: Text | None = Field(None, validation_alias=_env("PAYLOAD_STORE_DIR"))
    payload_store_threshold: Bytes | None = Field(None, validation_alias=_env("PAYLOAD_STORE_THRESHOLD"))
    capture_content: Switch = Field(False, validation_alias=_env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"))
    # `client.py console`: every request must carry it (durable_agent_runner/console/security.py).
    console_token: ConsoleToken | None = Field(None, validation_alias=_env("CONSOLE_TOKEN"))
    completion_secret: ConsoleToken | None = Field(None, validation_alias=_env("COMPLETION_SECRET"))
    completion_base_url: Url | None = Field(None, validation_alias=_env("COMPLETION_BASE_URL"))


class WorkerSettings(ClientSettings):
    """Everything a worker reads: the client's settings, the model's and the worker's own."""

    llm_base_url: Url = Field("https://api.openai.com/v1", validation_alias=_env("LLM_BASE_URL"))
    llm_model: Text = Field("gpt-4.1-mini", validation_alias=_env("LLM_MODEL"))
    llm_api_key: ApiKey | None = Field(None, validation_alias=_env("LLM_API_KEY"))  # else OPENAI_API_KEY
    llm_api_key_header: HeaderName = Field("Authorization", validation_alias=_env("LLM_API_KEY_HEADER"))
    llm_api: WireName = Field("chat", validation_alias=_env("LLM_API"))
    llm_stream: Switch = Field(True, validation_alias=_env("LLM_STREAM"))
    llm_capture: Switch = Field(False, validation_alias=_env("LLM_CAPTURE"))
    llm_read_timeout: AttemptSeconds = Field(DEFAULT_MODEL_READ_TIMEOUT, validation_alias=_env("LLM_READ_TIMEOUT"))
    llm_timeout: AttemptSeconds = Field(DEFAULT_MODEL_TIMEOUT, validation_alias=_env("LLM_TIMEOUT"))
    llm_max_attempts: Attempts = Field(DEFAULT_MODEL_MAX_ATTEMPTS, validation_alias=_env("LLM_MAX_ATTEMPTS"))
    llm_retry_seconds: CallSeconds = Field(DEFAULT_MODEL_RETRY_SECONDS, validation_alias=_env("LLM_RETRY_SECONDS"))
    llm_prices: Text | None = Field(None, validation_alias=_env("LLM_PRICES"))  # read by activities/prices.py
    # The providers a model string names ("openai:…", "anthropic:…", "gemini:…"; activities/providers.py).
    openai_base_url: Url = Field("https://api.openai.com/v1", validation_alias=_env("OPENAI_BASE_URL"))
    openai_api_key: ApiKey | None = Field(None, validation_alias=_env("OPENAI_API_KEY"))  # else LLM_API_KEY
    anthropic_base_url: Url = Field("https://api.anthropic.com", validation_alias=_env("ANTHROPIC_BASE_URL"))
    anthropic_api_key: ApiKey | None = Field(None, validation_alias=_env("ANTHROPIC_API_KEY"))
    gemini_base_url: Url = Field("https://generativelanguage.googleapis.com", validation_alias=_env("GEMINI_BASE_URL"))
    gemini_api_key: ApiKey | None = Field(None, validation_alias=_env("GEMINI_API_KEY"))  # else GOOGLE_API_KEY
    google_api_key: ApiKey | None = Field(None, validation_alias=_env("GOOGLE_API_KEY"))
    tool_threads: Threads = Field(16, validation_alias=_env("TOOL_THREADS"))
    event_loop: Annotated[Literal["uvloop", "asyncio"], BeforeValidator(_word)] | None = Field(
        None, validation_alias=_env("WORKER_EVENT_LOOP")
    )
    hooks_state_dir: Text | None = Field(None, validation_alias=_env("HOOKS_STATE_DIR"))
    # Who hears of a run waiting for a person (durable_agent_runner/config/notify.py).
    notify_webhook_url: Url | None = Field(None, validation_alias=_env("NOTIFY_WEBHOOK_URL"))
    notify_webhook_secret: Secret | None = Field(None, validation_alias=_env("NOTIFY_WEBHOOK_SECRET"))
    notify_slack_webhook_url: SecretUrl | None = Field(None, validation_alias=_env("NOTIFY_SLACK_WEBHOOK_URL"))
    notify_escalate_webhook_url: Url | None = Field(None, validation_alias=_env("NOTIFY_ESCALATE_WEBHOOK_URL"))
    smtp_host: Text | None = Field(None, validation_alias=_env("SMTP_HOST"))
    smtp_port: Port = Field(25, validation_alias=_env("SMTP_PORT"))
    smtp_username: Text | None = Field(None, validation_alias=_env("SMTP_USERNAME"))
    smtp_password: Secret | None = Field(None, validation_alias=_env("SMTP_PASSWORD"))
    smtp_starttls: Switch = Field(False, validation_alias=_env("SMTP_STARTTLS"))
    notify_email_to: Emails | None = Field(None, validation_alias=_env("NOTIFY_EMAIL_TO"))  # comma-separated
    notify_email_from: Email = Field("durable-agent-runner@localhost", validation_alias=_env("NOTIFY_EMAIL_FROM"))
    notify_console_url: Url = Field("http://127.0.0.1:8237", validation_alias=_env("NOTIFY_CONSOLE_URL"))
    notify_max_attempts: NotifyAttempts = Field(5, validation_alias=_env("NOTIFY_MAX_ATTEMPTS"))
    notify_timeout: NotifySeconds = Field(10.0, validation_alias=_env("NOTIFY_TIMEOUT"))


class TelemetrySettings(Settings):
    """The OTEL_* variables that decide whether and how runs are traced (durable_agent_runner/telemetry/).
    Apart from the client's settings: a bad one turns tracing off with a warning in `client.py`,
    where it stops a worker."""

    traces_endpoint: Url | None = Field(None, validation_alias=_env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
    endpoint: Url | None = Field(None, validation_alias=_env("OTEL_EXPORTER_OTLP_ENDPOINT"))
    traces_protocol: Annotated[str, BeforeValidator(_protocol)] | None = Field(
        None, validation_alias=_env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
    )
    protocol: Annotated[str, BeforeValidator(_protocol)] | None = Field(
        None, validation_alias=_env("OTEL_EXPORTER_OTLP_PROTOCOL")
    )
    sdk_disabled: Annotated[bool, BeforeValidator(_otel_true)] = Field(
        False, validation_alias=_env("OTEL_SDK_DISABLED")
    )
    traces_exporter: Annotated[str, BeforeValidator(_word)] = Field(
        "otlp", validation_alias=_env("OTEL_TRACES_EXPORTER")
    )
    service_name: Text | None = Field(None, validation_alias=_env("OTEL_SERVICE_NAME"))
    resource_attributes: Text | None = Field(None, validation_alias=_env("OTEL_RESOURCE_ATTRIBUTES"))

    @property
    def enabled(self) -> bool:
        """Tracing is on with an OTLP endpoint, unless the standard switches turn it off."""
        return not self.sdk_disabled and self.traces_exporter != "none" and bool(self.traces_endpoint or self.endpoint)

    @property
    def protocol_in_use(self) -> tuple[str, str]:
        """The traces' protocol and the variable that set it (the traces' own wins)."""
        if self.traces_protocol:
            return self.traces_protocol, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
        return self.protocol or "http/protobuf", "OTEL_EXPORTER_OTLP_PROTOCOL"


def secret_values(env: Mapping[str, str] | None = None) -> list[str]:
    """The secrets the environment holds, as they are, parsed or not: what a message must mask
    when the settings that would have masked them failed to load."""
    source = os.environ if env is None else env
    return [value for name in sorted(SECRETS) if (value := source.get(name))]


def _names(cls: type[BaseSettings]) -> set[str]:
    names: set[str] = set()
    for field in cls.model_fields.values():
        alias = field.validation_alias
        names.update(alias.choices if isinstance(alias, AliasChoices) else [alias])  # type: ignore[list-item,arg-type]
    return {n for n in names if isinstance(n, str)}


def describe(err: ValidationError, env: Mapping[str, str]) -> str:
    """pydantic's errors as one line: `NAME must be <allowed>, not '<value>'` for each bad one."""
    parts = []
    for e in err.errors():
        name = str(e["loc"][0]) if e["loc"] else "?"
        ctx = e.get("ctx") or {}
        allowed = str(ctx["error"]) if e["type"] == "value_error" and "error" in ctx else e["msg"]
        if e["type"] == "literal_error":
            allowed = "one of " + str(ctx.get("expected", "")).replace("'", "")
        elif e["type"] == "string_too_short":
            allowed = "not empty"
        raw = env.get(name, str(e.get("input", "")))
        if name in SECRETS:
            parts.append(f"{name} must be {allowed}, not the {len(raw)} characters it holds (not shown)")
            continue
        shown = raw if len(raw) <= SHOWN else raw[:SHOWN] + "…"
        parts.append(f"{name} must be {allowed}, not {shown!r}")
    return "; ".join(parts)


def named_secret(name: str, env: Mapping[str, str] | None = None) -> str:
    """The value of a variable a user's file names as holding a secret (a webhook's `secret_env`):
    read here, as every variable is, and "" when it is not set."""
    return (os.environ if env is None else env).get(name, "")
