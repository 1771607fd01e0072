"""Which wire, URL and headers a model string names: the one place where a model call's
endpoint is chosen (the model activity, compaction and a guardrail's model call all ask here).

    "anthropic:claude-sonnet-4-5"  Anthropic's Messages API at ANTHROPIC_BASE_URL/v1/messages,
                                   with ANTHROPIC_API_KEY in `x-api-key`
    "gemini:gemini-2.5-flash"      Gemini's API at GEMINI_BASE_URL/v1beta/models/…:generateContent
                                   (streamed: :streamGenerateContent?alt=sse), GEMINI_API_KEY in
                                   `x-goog-api-key` (GOOGLE_API_KEY when it is not set)
    "openai:gpt-4.1"               OpenAI at OPENAI_BASE_URL, OPENAI_API_KEY (else LLM_API_KEY)
    "gpt-4.1-mini", "llama3:8b"    the worker's OpenAI-compatible server: LLM_BASE_URL, LLM_API_KEY
                                   and LLM_API_KEY_HEADER, as before providers had names

OpenAI-compatible endpoints speak the agent's `api` (Chat Completions or the Responses API; the
worker's LLM_API when the agent sets none). Each wire is a pure module behind `activities.wire.Wire`.
A model whose provider has no key on this worker is refused at once (`ProviderUnavailable`):
a run with fallback models then goes on to the next (machine/fallback.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from durable_agent_runner.activities import anthropic_wire, chat_wire, gemini_wire, responses_wire
from durable_agent_runner.activities.wire import Wire
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.workflows.types import ModelSettings, Provider, WireName, split_model

KEY_VARIABLES: dict[Provider, str] = {
    "llm": "LLM_API_KEY",
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
}


class ProviderUnavailable(ValueError):
    """The model names a provider this worker cannot reach (no key for it)."""


@dataclass(frozen=True)
class Endpoint:
    """Where and how one model is called."""

    provider: Provider
    model: str  # the provider's own name for it ("claude-sonnet-4-5", without the prefix)
    wire: Wire
    path: str  # the API's path, for spans, captures and logs ("chat/completions", "v1/messages", …)
    base_url: str
    headers: httpx.Headers

    def url(self, stream: bool) -> httpx.URL:
        if self.provider == "gemini":  # the model and streaming are in Gemini's URL, not its body
            verb = "streamGenerateContent?alt=sse" if stream else "generateContent"
            return httpx.URL(f"{self.base_url}/v1beta/models/{self.model}:{verb}")
        return httpx.URL(f"{self.base_url}/{self.path}")


def wire_for(provider: Provider, api: WireName) -> tuple[Wire, str]:
    """The wire module for a provider (and, OpenAI-compatible, its API) and its path."""
    if provider == "anthropic":
        return anthropic_wire, "v1/messages"
    if provider == "gemini":
        return gemini_wire, "v1beta/models"
    return (responses_wire, "responses") if api == "responses" else (chat_wire, "chat/completions")


class Providers:
    """A worker's providers, from its settings: headers are built once, not per request."""

    def __init__(self, settings: LLMSettings) -> None:
        self.settings = settings
        self._headers: dict[Provider, httpx.Headers] = {}

    def endpoint(self, model: str | None, api: WireName | None = None) -> Endpoint:
        """The endpoint of `model` (None: the worker's LLM_MODEL) spoken over `api` (None: LLM_API)."""
        s = self.settings
        provider, name = split_model(model or s.model)
        wire, path = wire_for(provider, api or s.api)
        base = {
            "llm": s.base_url,
            "openai": s.openai_base_url,
            "anthropic": s.anthropic_base_url,
            "gemini": s.gemini_base_url,
        }[provider]
        return Endpoint(provider, name, wire, path, base, self.headers(provider))

    def headers(self, provider: Provider) -> httpx.Headers:
        cached = self._headers.get(provider)
        if cached is None:
            cached = self._headers[provider] = httpx.Headers(
                {"Content-Type": "application/json", **self._auth(provider)}
            )
        return cached

    def _auth(self, provider: Provider) -> dict[str, str]:
        s = self.settings
        if provider == "llm":
            return s.auth_headers()
        key = {"openai": s.openai_api_key, "anthropic": s.anthropic_api_key, "gemini": s.gemini_api_key}[provider]
        if key is None:
            raise ProviderUnavailable(f"{KEY_VARIABLES[provider]} is not set on this worker: it cannot call {provider}")
        value = key.get_secret_value()
        if provider == "anthropic":
            return {"x-api-key": value, "anthropic-version": anthropic_wire.API_VERSION}
        if provider == "gemini":
            return {"x-goog-api-key": value}
        return {"Authorization": f"Bearer {value}"}


def settings_problems(model: str, api: WireName, settings: ModelSettings) -> list[str]:
    """What `settings` ask that the provider of `model` lacks, one line each ([]: none). A run
    is refused when it starts with any (activities/tool_activities.py), never mid-run, and
    never by dropping a setting silently."""
    provider, _ = split_model(model)
    wire, _ = wire_for(provider, api)
    return [f"model {model}: {problem}" for problem in wire.check_settings(settings)]


def sure_problems(model: str, settings: ModelSettings) -> list[str]:
    """What `settings` ask that `model` lacks whatever API it is spoken over: what a client that
    knows the model but not the agent's `api` (nor the worker's LLM_API) can refuse before a run
    starts. Anthropic and Gemini have one API each; an OpenAI-compatible model, what both of its
    wires lack (settings_problems is the worker's whole check, with the agent's own settings)."""
    if split_model(model)[0] in ("anthropic", "gemini"):
        return settings_problems(model, "chat", settings)
    on_responses = {line.split(": ", 1)[0] for line in responses_wire.check_settings(settings)}
    on_both = [line for line in chat_wire.check_settings(settings) if line.split(": ", 1)[0] in on_responses]
    return [f"model {model}: {line}" for line in on_both]
