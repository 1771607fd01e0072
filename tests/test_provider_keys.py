"""Every provider's key stays in the worker, as LLM_API_KEY does (issue 33, item 3): the hostile
cases of tests/test_hostile_model.py (a server that echoes the key in its replies, in error
bodies, in non-JSON bodies and in stream error events) run here on the Anthropic and Gemini wires
and on `openai:` models, and no part of any key may reach the run's history (every payload
decoded), its events, status, transcript, export, console page, OTel spans or the worker's logs.

The worker holds all four keys at once, each different, so a key of one provider that leaks
through another's run is caught too. The redactor and the log filter are built from the settings
as worker.py builds them (`redaction_for(settings)`, fed by `LLMSettings.keys()`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from temporalio.client import Client, WorkflowFailureError

from durable_agent_runner.client import AgentClient
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.console.data import run_view
from durable_agent_runner.console.views_run import run_body
from durable_agent_runner.redact import Redactor, redaction_for
from durable_agent_runner.telemetry import Telemetry
from durable_agent_runner.testing.fake_llm import FakeLLMServer
from durable_agent_runner.workflows import types as t
from tests.helpers import start, transcript
from tests.test_hostile_model import history_text
from tests.test_telemetry import Receiver, flushed, receiver, telemetry  # noqa: F401  (the fixtures)

LLM_KEY = "sk-llm-3c9e71b04d2a4f6e8b15"
OPENAI_KEY = "sk-openai-8d2f4a61c07e4b93a5d2"
ANTHROPIC_KEY = "sk-ant-api03-b71e5c29f4a04d8e9c36"
GEMINI_KEY = "AIzaSyGem-6f0a2d8c41b94e7f2a53c9"
KEYS = {"llm": LLM_KEY, "openai": OPENAI_KEY, "anthropic": ANTHROPIC_KEY, "gemini": GEMINI_KEY}
SENT = {"openai": OPENAI_KEY, "anthropic": ANTHROPIC_KEY, "gemini": GEMINI_KEY}  # the key each provider is sent
# The key as the fake echoes it, masked: OpenAI's comes back as the whole Authorization value.
MASKED = {"openai": "Bearer ***", "anthropic": "***", "gemini": "***"}
PROVIDERS = list(SENT)
# Any 12 characters of a key, in any case: a wire that lower-cases a field (a finish reason) must
# not show a key that way either.
WINDOWS = {name: [k[i : i + 12].lower() for i in range(len(k) - 11)] for name, k in KEYS.items()}


def assert_no_key(text: str, where: str) -> None:
    text = text.lower()
    leaked = {name: [w for w in ws if w in text][:2] for name, ws in WINDOWS.items()}
    leaked = {name: ws for name, ws in leaked.items() if ws}
    assert not leaked, f"part of a key in {where}: {leaked}"


# ------------------------------------------------------------------------- the settings alone


@pytest.mark.pure
def test_every_key_the_settings_read_is_one_the_redactor_masks():
    env = {
        "LLM_API_KEY": LLM_KEY,
        "OPENAI_API_KEY": OPENAI_KEY,
        "ANTHROPIC_API_KEY": ANTHROPIC_KEY,
        "GEMINI_API_KEY": GEMINI_KEY,
    }
    settings = LLMSettings.from_env(env)
    assert set(settings.keys()) >= set(KEYS.values())
    redactor = Redactor.for_settings(settings)
    text = " | ".join(f"{name}={key}" for name, key in KEYS.items())
    assert redactor.text(text) == "llm=*** | openai=*** | anthropic=*** | gemini=***"
    assert all(key not in repr(settings) for key in KEYS.values())


@pytest.mark.pure
@pytest.mark.parametrize(
    ("name", "field"),
    [
        ("LLM_API_KEY", "api_key"),
        ("OPENAI_API_KEY", "openai_api_key"),
        ("ANTHROPIC_API_KEY", "anthropic_api_key"),
        ("GEMINI_API_KEY", "gemini_api_key"),
        ("GOOGLE_API_KEY", "gemini_api_key"),  # Google's own name for the Gemini key
    ],
)
def test_each_key_alone_is_read_and_masked(name: str, field: str):
    key = f"k-{name.lower()}-5e8a1f0c7b2d"
    settings = LLMSettings.from_env({name: key})
    secret = getattr(settings, field)
    assert secret is not None and secret.get_secret_value() == key
    assert key in settings.keys()
    assert Redactor.for_settings(settings).text(f"the server said {key}.") == "the server said ***."


@pytest.mark.pure
@pytest.mark.parametrize(
    "env, models, warned",
    [
        ({}, [None], True),  # LLM_MODEL, to OpenAI itself, with no key: refused every time
        ({}, ["gpt-4.1", "anthropic:claude-sonnet-4-5"], True),
        ({}, ["anthropic:claude-sonnet-4-5", "openai:gpt-4.1"], False),  # each names its provider
        ({"OPENAI_API_KEY": "k-openai-7c1e"}, [None], False),
        ({"LLM_BASE_URL": "http://127.0.0.1:11434/v1"}, [None], False),  # a local server needs none
        ({}, [], False),  # a worker of the runs' own steps calls no model
    ],
)
def test_a_worker_that_would_call_openai_without_a_key_warns_at_start(env, models, warned):
    said = LLMSettings.from_env(env).keyless(models)
    assert (said is not None) == warned
    if warned:
        assert said == (
            "no LLM_API_KEY or OPENAI_API_KEY: https://api.openai.com/v1 refuses every model call without one "
            "(set a key, or LLM_BASE_URL for a server that needs none)"
        )


@pytest.mark.pure
def test_the_gemini_key_is_masked_under_either_name_and_gemini_s_own_name_wins():
    both = LLMSettings.from_env({"GEMINI_API_KEY": GEMINI_KEY, "GOOGLE_API_KEY": "k-google-0b7d3e9a1c5f"})
    assert both.gemini_api_key is not None and both.gemini_api_key.get_secret_value() == GEMINI_KEY
    assert GEMINI_KEY in both.keys()
    # The worker never sends Google's name then, but holds it: a tool or a server that echoes it is masked.
    assert "k-google-0b7d3e9a1c5f" in both.keys()
    assert Redactor.for_settings(both).text("env: k-google-0b7d3e9a1c5f") == "env: ***"


# ------------------------------------------------------------------------------- whole runs


@pytest.fixture
def settings(llm: FakeLLMServer) -> LLMSettings:
    return LLMSettings(
        base_url=llm.base_url,
        model="demo",
        api_key=LLM_KEY,
        openai_base_url=llm.base_url,
        openai_api_key=OPENAI_KEY,
        anthropic_base_url=llm.url,
        anthropic_api_key=ANTHROPIC_KEY,
        gemini_base_url=llm.url,
        gemini_api_key=GEMINI_KEY,
        read_timeout=1.0,
    )


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture, settings: LLMSettings) -> pytest.LogCaptureFixture:
    """Every record, through the log filter worker.py builds from these settings (on the handler)."""
    caplog.set_level(logging.DEBUG)
    _, log_filter = redaction_for(settings)
    caplog.handler.addFilter(log_filter)
    return caplog


async def run_keyed(
    client: Client,
    worker_factory: Any,
    task_queue: str,
    settings: LLMSettings,
    logs: pytest.LogCaptureFixture,
    llm: FakeLLMServer,
    provider: str,
    model: str,
    *,
    stream: bool,
    tel: Telemetry | None = None,
    got: Receiver | None = None,
) -> t.RunResult | WorkflowFailureError:
    """One run of `provider:model`; its outcome, after checking that no key is anywhere a person
    or a program can read about the run."""
    agents = AgentClient(client, task_queue=task_queue)
    async with worker_factory(settings=settings.model_copy(update={"stream": stream}), telemetry=tel):
        handle = await start(client, task_queue, "What's the weather in Tokyo and Paris?", model=f"{provider}:{model}")
        try:
            outcome: t.RunResult | WorkflowFailureError = await asyncio.wait_for(handle.result(), 60)
        except WorkflowFailureError as err:
            outcome = err
        run = agents.get(handle.id)
        places = {
            "the run's history": await history_text(client, handle),
            "the transcript": repr(await transcript(handle)),
            "the events": repr(await run.read_events()),
            "the status": json.dumps((await run.status()).as_dict(), default=str),
            "the export": json.dumps(await run.export(), default=str),
            "the console's run page": run_body(await run_view(agents, handle.id)),
        }
    if isinstance(outcome, WorkflowFailureError):
        places["the failure"] = f"{outcome} {outcome.cause!r} {getattr(outcome.cause, 'details', '')!r}"
    sent = [r for r in llm.requests() if r["model"] == model]
    assert sent and all(r["api"] == ("chat" if provider == "openai" else provider) for r in sent)
    assert SENT[provider] in json.dumps([r["headers"] for r in sent])  # the key was really sent, and echoed
    for where, text in places.items():
        assert_no_key(text, where)
    assert logs.records and all(k not in r.getMessage() for r in logs.records for k in KEYS.values())
    assert_no_key(logs.text, "the logs")
    if tel is not None and got is not None:
        flushed(tel)
        with got.lock:
            spans = [repr(s) for s in got.spans]
        assert spans
        assert_no_key("\n".join(spans), "the spans")
    return outcome


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_server_echoing_the_key_in_every_field_cannot_get_it_into_the_run(
    client, worker_factory, task_queue, settings, logs, llm, telemetry, receiver, provider, stream
):
    outcome = await run_keyed(
        client, worker_factory, task_queue, settings, logs, llm, provider, "hostile:echo",
        stream=stream, tel=telemetry, got=receiver,
    )  # fmt: skip
    assert isinstance(outcome, t.RunResult), outcome
    assert outcome.output.endswith(f"(your key: {MASKED[provider]})")


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_rejected_key_echoed_in_the_error_body_fails_the_run_without_showing_it(
    client, worker_factory, task_queue, settings, logs, llm, provider
):
    llm.add_faults([{"kind": "status", "status": 401, "echo_key": True, "size": 20_000}])
    outcome = await run_keyed(client, worker_factory, task_queue, settings, logs, llm, provider, "echo", stream=False)
    assert isinstance(outcome, WorkflowFailureError)
    assert f"Incorrect API key provided: {MASKED[provider]}" in str(outcome.cause)
    assert len(llm.requests()) == 1  # not retried


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_echoing_error_bodies_and_events_are_retried_then_the_run_completes(
    client, worker_factory, task_queue, settings, logs, llm, provider, stream
):
    faults: list[dict[str, Any]] = [
        {"kind": "status", "status": 503, "echo_key": True, "size": 100_000, "raw": True},
        {"kind": "error_event", "echo_key": True} if stream else {"kind": "malformed", "echo_key": True, "size": 1000},
    ]
    llm.add_faults(faults)
    outcome = await run_keyed(client, worker_factory, task_queue, settings, logs, llm, provider, "echo", stream=stream)
    assert isinstance(outcome, t.RunResult) and outcome.output.startswith("echo: ")
    assert [r["fault"]["kind"] for r in llm.requests()[:2]] == [f["kind"] for f in faults]
