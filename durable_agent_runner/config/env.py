"""Every environment variable the product reads itself, as one typed settings model.

`ClientSettings` holds what `client.py` reads; `WorkerSettings` adds what only a worker reads.
Each is read once, at start, by pydantic-settings; a bad value stops the process there with one
line, `NAME must be <what is allowed>, not '<value>'` (exit code 2), instead of being discovered
by the first run that uses it. Numbers are parsed by these models and nowhere else, finite and bounded;
switches take one set of spellings. What a value may be (the parsers, the value types) is in
config/values.py; which variable holds which value is here.

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

import contextvars
import os
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BeforeValidator, Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from durable_agent_runner.config.values import (
    SHOWN,
    Address,
    ApiKey,
    Attempts,
    AttemptSeconds,
    Bytes,
    CallSeconds,
    ConsoleToken,
    Email,
    Emails,
    HeaderName,
    Host,
    NotifyAttempts,
    NotifySeconds,
    Port,
    QueueName,
    Secret,
    SecretUrl,
    SigningSecret,
    Switch,
    Text,
    Threads,
    TlsSwitch,
    Url,
    choice_word,
    is_present,
    masked,
    otel_true,
    otlp_protocol,
)
from durable_agent_runner.workflows.types import (
    DEFAULT_MODEL_MAX_ATTEMPTS,
    DEFAULT_MODEL_READ_TIMEOUT,
    DEFAULT_MODEL_RETRY_SECONDS,
    DEFAULT_MODEL_TIMEOUT,
    WireName,
)

DEFAULT_CAPTURE_DIR = ".state/captures"  # LLM_CAPTURE_DIR's default (activities/capture.py)
# Never quoted back, even when bad: a mistyped secret is still most of the secret.
SECRETS = frozenset({
    "CONSOLE_TOKEN", "LLM_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY",
    "TEMPORAL_API_KEY", "PAYLOAD_CODEC_KEYS", "NOTIFY_WEBHOOK_SECRET", "NOTIFY_SLACK_WEBHOOK_URL", "SMTP_PASSWORD",
    "COMPLETION_SECRET", "CODEC_TOKEN",
})  # fmt: skip
MAX_NAME = 200  # characters of a login name kept as who decided (the CLI's --by takes as many)


_ONLY_GIVEN = contextvars.ContextVar("settings_only_given", default=False)


class SettingsError(ValueError):
    """A bad environment variable: one line naming it, the value and what is allowed."""


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
    no_color: Annotated[bool, BeforeValidator(is_present)] = Field(False, validation_alias=_env("NO_COLOR"))


def login_name(default: str) -> str:
    """Who decides when a command is not told (`--by`): $USER or $USERNAME, else `default`."""
    return str(ShellSettings.load().user or default)


def no_color() -> bool:
    """$NO_COLOR set to anything: no colour (https://no-color.org)."""
    return bool(ShellSettings.load().no_color)


class ClientSettings(ShellSettings):
    """What `client.py` (and so also a worker) reads from the environment."""

    task_queue: QueueName = Field("agent-runner", validation_alias=_env("AGENT_TASK_QUEUE"))
    ui_url: Url = Field("http://localhost:8233", validation_alias=_env("TEMPORAL_UI_URL"))
    # Read by temporalio's envconfig (config/connection.py), checked here before it is.
    temporal_address: Address | None = Field(None, validation_alias=_env("TEMPORAL_ADDRESS"))
    temporal_tls: TlsSwitch | None = Field(None, validation_alias=_env("TEMPORAL_TLS"))
    capture_dir: Text = Field(DEFAULT_CAPTURE_DIR, validation_alias=_env("LLM_CAPTURE_DIR"))
    codec_keys: SecretStr | None = Field(None, validation_alias=_env("PAYLOAD_CODEC_KEYS"))  # payloads/codec.py
    payload_store: Text = Field("local", validation_alias=_env("PAYLOAD_STORE"))
    payload_store_dir: Text | None = Field(None, validation_alias=_env("PAYLOAD_STORE_DIR"))
    payload_store_threshold: Bytes | None = Field(None, validation_alias=_env("PAYLOAD_STORE_THRESHOLD"))
    capture_content: Switch = Field(False, validation_alias=_env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"))
    # `client.py console`: every request must carry it (durable_agent_runner/console/security.py).
    console_token: ConsoleToken | None = Field(None, validation_alias=_env("CONSOLE_TOKEN"))
    # `client.py codec-server`: every POST must carry it (durable_agent_runner/cli/codec_server.py).
    codec_token: ConsoleToken | None = Field(None, validation_alias=_env("CODEC_TOKEN"))
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
    event_loop: Annotated[Literal["uvloop", "asyncio"], BeforeValidator(choice_word)] | None = Field(
        None, validation_alias=_env("WORKER_EVENT_LOOP")
    )
    hooks_state_dir: Text | None = Field(None, validation_alias=_env("HOOKS_STATE_DIR"))
    # Who hears of a run waiting for a person (durable_agent_runner/config/notify.py).
    notify_webhook_url: Url | None = Field(None, validation_alias=_env("NOTIFY_WEBHOOK_URL"))
    notify_webhook_secret: SigningSecret | None = Field(None, validation_alias=_env("NOTIFY_WEBHOOK_SECRET"))
    notify_slack_webhook_url: SecretUrl | None = Field(None, validation_alias=_env("NOTIFY_SLACK_WEBHOOK_URL"))
    notify_escalate_webhook_url: Url | None = Field(None, validation_alias=_env("NOTIFY_ESCALATE_WEBHOOK_URL"))
    smtp_host: Host | None = Field(None, validation_alias=_env("SMTP_HOST"))
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
    traces_protocol: Annotated[str, BeforeValidator(otlp_protocol)] | None = Field(
        None, validation_alias=_env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
    )
    protocol: Annotated[str, BeforeValidator(otlp_protocol)] | None = Field(
        None, validation_alias=_env("OTEL_EXPORTER_OTLP_PROTOCOL")
    )
    sdk_disabled: Annotated[bool, BeforeValidator(otel_true)] = Field(False, validation_alias=_env("OTEL_SDK_DISABLED"))
    traces_exporter: Annotated[str, BeforeValidator(choice_word)] = Field(
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
    when the settings that would have masked them failed to load. A URL's without its scheme: the
    masking of any 8 characters of a key would eat `https://` from the message's own words."""
    source = os.environ if env is None else env
    values = [(name, value) for name in sorted(SECRETS) if (value := source.get(name))]
    return [value.split("://", 1)[-1] if name.endswith("_URL") else value for name, value in values]


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
        raw = masked(raw)  # before it is cut: a cut could leave a password without its "@"
        shown = raw if len(raw) <= SHOWN else raw[:SHOWN] + "…"
        parts.append(f"{name} must be {allowed}, not {shown!r}")
    return "; ".join(parts)


def named_secret(name: str, env: Mapping[str, str] | None = None) -> str:
    """The value of a variable a user's file names as holding a secret (a webhook's `secret_env`):
    read here, as every variable is, and "" when it is not set."""
    return (os.environ if env is None else env).get(name, "")
