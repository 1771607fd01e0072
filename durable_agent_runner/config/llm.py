"""Worker-side model settings, read from the environment through the one settings model
(durable_agent_runner/config/env.py), which parses and bounds every value.

The API key lives only here, in the worker process: it is never part of an activity input or
result, so it never reaches workflow history, payloads or the UI. Its repr is masked.

A bad value is refused at start-up with a SettingsError naming the variable, the value and what
is allowed (worker.py exits 2), never discovered mid-run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from durable_agent_runner.config.completion import CompletionSettings
from durable_agent_runner.config.env import DEFAULT_CAPTURE_DIR, WorkerSettings
from durable_agent_runner.config.notify import NotifySettings
from durable_agent_runner.config.values import ApiKey, Attempts, AttemptSeconds, CallSeconds, HeaderName, Url
from durable_agent_runner.workflows.types import (
    DEFAULT_MODEL_MAX_ATTEMPTS,
    DEFAULT_MODEL_READ_TIMEOUT,
    DEFAULT_MODEL_RETRY_SECONDS,
    DEFAULT_MODEL_TIMEOUT,
    WireName,
    split_model,
)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MODEL = "gpt-4.1-mini"
DEFAULT_STREAM = True  # replies over SSE, so watchers see text as it is written; LLM_STREAM=0 turns it off


API_KEY_VARIABLES = ("LLM_API_KEY", "OPENAI_API_KEY")  # the model's key: the first one set


class LLMSettings(BaseModel):
    # A misspelt setting is refused, not dropped; a refused value is not quoted back (keys, URLs).
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    base_url: Url = DEFAULT_BASE_URL  # as LLM_BASE_URL takes it (config/values.py), in code too
    model: str = DEFAULT_MODEL
    api_key: ApiKey | None = None  # visible ASCII: it rides in a header (config/env.py)
    # "Authorization" sends "Bearer KEY"; any other name (Azure's "api-key") sends the bare key.
    api_key_header: HeaderName = "Authorization"
    api: WireName = "chat"
    stream: bool = DEFAULT_STREAM
    connect_timeout: float = 10.0
    # Defaults for agents that set no bounds of their own (AgentSpec.model_*_seconds, _attempts).
    read_timeout: AttemptSeconds = DEFAULT_MODEL_READ_TIMEOUT  # seconds without a byte from the server
    timeout: AttemptSeconds = DEFAULT_MODEL_TIMEOUT  # one attempt, start to finish
    max_attempts: Attempts = DEFAULT_MODEL_MAX_ATTEMPTS
    retry_seconds: CallSeconds = DEFAULT_MODEL_RETRY_SECONDS  # from a call's first attempt to giving up
    capture: bool = False  # keep every call's raw request and response (activities/capture.py)
    capture_dir: Path = Path(DEFAULT_CAPTURE_DIR)
    # The providers a model string names by prefix (activities/providers.py): "openai:…",
    # "anthropic:…", "gemini:…". A model without a prefix goes to base_url above, as it always has.
    openai_base_url: Url = DEFAULT_BASE_URL
    openai_api_key: ApiKey | None = None
    anthropic_base_url: Url = "https://api.anthropic.com"
    anthropic_api_key: ApiKey | None = None
    gemini_base_url: Url = "https://generativelanguage.googleapis.com"
    gemini_api_key: ApiKey | None = None
    # Keys the worker holds but never sends (GOOGLE_API_KEY beside GEMINI_API_KEY): masked all the same.
    held_keys: tuple[ApiKey, ...] = ()
    # Who hears of a run waiting for a person (NOTIFY_*, SMTP_*): with the model's settings, as
    # every worker-side setting travels to the activities with them.
    notify: NotifySettings = Field(default_factory=NotifySettings)
    completion: CompletionSettings = Field(default_factory=CompletionSettings)  # COMPLETION_*: signed URLs

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> LLMSettings:
        return cls.of(WorkerSettings.load(env))

    @classmethod
    def of(cls, s: WorkerSettings) -> LLMSettings:
        return cls(
            base_url=s.llm_base_url,
            model=s.llm_model,
            api_key=s.llm_api_key or s.openai_api_key,
            api_key_header=s.llm_api_key_header,
            api=s.llm_api,
            stream=s.llm_stream,
            read_timeout=s.llm_read_timeout,
            timeout=s.llm_timeout,
            max_attempts=s.llm_max_attempts,
            retry_seconds=s.llm_retry_seconds,
            capture=s.llm_capture,
            capture_dir=Path(s.capture_dir),
            openai_base_url=s.openai_base_url,
            openai_api_key=s.openai_api_key or s.llm_api_key,
            anthropic_base_url=s.anthropic_base_url,
            anthropic_api_key=s.anthropic_api_key,
            gemini_base_url=s.gemini_base_url,
            gemini_api_key=s.gemini_api_key or s.google_api_key,  # Google's own name, when Gemini's is unset
            held_keys=tuple(k for k in (s.google_api_key,) if k is not None and s.gemini_api_key is not None),
            notify=NotifySettings.of(s),
            completion=CompletionSettings(secret=s.completion_secret, base_url=s.completion_base_url),
        )

    def keys(self) -> list[str]:
        """Every key this worker holds, for the redactor: none of them may leave the worker."""
        found = (self.api_key, self.openai_api_key, self.anthropic_api_key, self.gemini_api_key, *self.held_keys)
        completion = [self.completion.secret.get_secret_value()] if self.completion.secret else []
        return [k.get_secret_value() for k in found if k is not None] + self.notify.keys() + completion

    def keyless(self, models: Iterable[str | None]) -> str | None:
        """A warning for the worker's start when one of `models` (None: LLM_MODEL) would go to
        OpenAI itself (LLM_BASE_URL's default) with no key, which it refuses every time; None
        when none would (a key is set, another server is, or each model names its provider)."""
        if self.api_key is not None or self.base_url.rstrip("/") != DEFAULT_BASE_URL:
            return None
        if not any(split_model(m or self.model)[0] == "llm" for m in models):
            return None
        return (
            f"no LLM_API_KEY or OPENAI_API_KEY: {DEFAULT_BASE_URL} refuses every model call without one "
            "(set a key, or LLM_BASE_URL for a server that needs none)"
        )

    def auth_headers(self) -> dict[str, str]:
        if self.api_key is None:
            return {}
        key = self.api_key.get_secret_value()
        if self.api_key_header.lower() == "authorization":
            return {"Authorization": f"Bearer {key}"}
        return {self.api_key_header: key}
