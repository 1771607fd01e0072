"""Worker-side model settings, read from the environment.

The API key lives only here, in the worker process: it is never part of an activity input or
result, so it never reaches workflow history, payloads or the UI. Its repr is masked.

A bad value is refused at start-up with a ValueError naming the variable (worker.py exits 2),
never discovered mid-run: every bound on a model call must be a finite, positive number, and
LLM_STREAM a yes or a no.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, SecretStr

from activities.capture import DEFAULT_DIR as DEFAULT_CAPTURE_DIR
from workflows.types import (
    DEFAULT_MODEL_MAX_ATTEMPTS,
    DEFAULT_MODEL_READ_TIMEOUT,
    DEFAULT_MODEL_RETRY_SECONDS,
    DEFAULT_MODEL_TIMEOUT,
)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MODEL = "gpt-4.1-mini"
DEFAULT_STREAM = True  # replies over SSE, so watchers see text as it is written; LLM_STREAM=0 turns it off


API_KEY_VARIABLES = ("LLM_API_KEY", "OPENAI_API_KEY")  # the model's key: the first one set


class LLMSettings(BaseModel):
    base_url: str = DEFAULT_BASE_URL
    model: str = DEFAULT_MODEL
    api_key: SecretStr | None = None
    # "Authorization" sends "Bearer KEY"; any other name (Azure's "api-key") sends the bare key.
    api_key_header: str = "Authorization"
    api: Literal["chat", "responses"] = "chat"
    stream: bool = DEFAULT_STREAM
    connect_timeout: float = 10.0
    # Defaults for agents that set no bounds of their own (AgentSpec.model_*_seconds, _attempts).
    read_timeout: float = Field(DEFAULT_MODEL_READ_TIMEOUT, gt=0)  # seconds without a byte from the server
    timeout: float = Field(DEFAULT_MODEL_TIMEOUT, gt=0)  # one attempt, start to finish
    max_attempts: int = Field(DEFAULT_MODEL_MAX_ATTEMPTS, gt=0)
    retry_seconds: float = Field(DEFAULT_MODEL_RETRY_SECONDS, gt=0)  # from a call's first attempt to giving up
    capture: bool = False  # keep every call's raw request and response (activities/capture.py)
    capture_dir: Path = Path(DEFAULT_CAPTURE_DIR)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> LLMSettings:
        env = os.environ if env is None else env
        key = next((env[name] for name in API_KEY_VARIABLES if env.get(name)), None)
        api = env.get("LLM_API", "chat")
        if api not in ("chat", "responses"):
            raise ValueError(f"LLM_API must be 'chat' or 'responses', not {api!r}")
        return cls(
            base_url=_base_url(env.get("LLM_BASE_URL", DEFAULT_BASE_URL)),
            model=env.get("LLM_MODEL", DEFAULT_MODEL),
            api_key=SecretStr(key) if key else None,
            api_key_header=env.get("LLM_API_KEY_HEADER", "Authorization"),
            api=api,
            stream=_switch(env, "LLM_STREAM", DEFAULT_STREAM),
            read_timeout=_seconds(env, "LLM_READ_TIMEOUT", DEFAULT_MODEL_READ_TIMEOUT),
            timeout=_seconds(env, "LLM_TIMEOUT", DEFAULT_MODEL_TIMEOUT),
            max_attempts=_count(env, "LLM_MAX_ATTEMPTS", DEFAULT_MODEL_MAX_ATTEMPTS),
            retry_seconds=_seconds(env, "LLM_RETRY_SECONDS", DEFAULT_MODEL_RETRY_SECONDS),
            capture=_switch(env, "LLM_CAPTURE", False),
            capture_dir=Path(env.get("LLM_CAPTURE_DIR", DEFAULT_CAPTURE_DIR)),
        )

    def auth_headers(self) -> dict[str, str]:
        if self.api_key is None:
            return {}
        key = self.api_key.get_secret_value()
        if self.api_key_header.lower() == "authorization":
            return {"Authorization": f"Bearer {key}"}
        return {self.api_key_header: key}


def _base_url(raw: str) -> str:
    url = raw.strip().rstrip("/")
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:  # e.g. an unclosed IPv6 bracket
        host = None
    if not host or parts.scheme not in ("http", "https"):
        raise ValueError(f"LLM_BASE_URL must be an http:// or https:// URL with a host, not {raw!r}")
    return url


def _switch(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    if raw.lower() in ("1", "true", "yes", "on"):
        return True
    if raw.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{name} must be 1, true, yes or on, or 0, false, no or off, not {raw!r}")


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive number of seconds, not {raw!r}")
    return value


def _count(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    if not (raw.isascii() and raw.isdigit()) or int(raw) < 1:
        raise ValueError(f"{name} must be a positive whole number, not {raw!r}")
    return int(raw)
