"""Worker-side model settings, read from the environment.

The API key lives only here, in the worker process: it is never part of an activity input or
result, so it never reaches workflow history, payloads or the UI. Its repr is masked.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, SecretStr

from activities.capture import DEFAULT_DIR as DEFAULT_CAPTURE_DIR

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MODEL = "gpt-4.1-mini"


class LLMSettings(BaseModel):
    base_url: str = DEFAULT_BASE_URL
    model: str = DEFAULT_MODEL
    api_key: SecretStr | None = None
    # "Authorization" sends "Bearer KEY"; any other name (Azure's "api-key") sends the bare key.
    api_key_header: str = "Authorization"
    api: Literal["chat", "responses"] = "chat"
    stream: bool = False
    connect_timeout: float = 10.0
    capture: bool = False  # keep every call's raw request and response (activities/capture.py)
    capture_dir: Path = Path(DEFAULT_CAPTURE_DIR)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> LLMSettings:
        env = os.environ if env is None else env
        key = env.get("LLM_API_KEY") or env.get("OPENAI_API_KEY")
        api = env.get("LLM_API", "chat")
        if api not in ("chat", "responses"):
            raise ValueError(f"LLM_API must be 'chat' or 'responses', not {api!r}")
        return cls(
            base_url=env.get("LLM_BASE_URL", DEFAULT_BASE_URL).rstrip("/"),
            model=env.get("LLM_MODEL", DEFAULT_MODEL),
            api_key=SecretStr(key) if key else None,
            api_key_header=env.get("LLM_API_KEY_HEADER", "Authorization"),
            api=api,
            stream=env.get("LLM_STREAM", "").lower() in ("1", "true", "yes"),
            capture=env.get("LLM_CAPTURE", "").lower() in ("1", "true", "yes"),
            capture_dir=Path(env.get("LLM_CAPTURE_DIR", DEFAULT_CAPTURE_DIR)),
        )

    def auth_headers(self) -> dict[str, str]:
        if self.api_key is None:
            return {}
        key = self.api_key.get_secret_value()
        if self.api_key_header.lower() == "authorization":
            return {"Authorization": f"Bearer {key}"}
        return {self.api_key_header: key}
