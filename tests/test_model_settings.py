"""Model settings end to end: what `client.py run` accepts, and what reaches the model server
when a real run's agent carries settings, handoffs and a typed output."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio import activity
from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.worker import Worker

import client as client_module
from durable_agent_runner.activities import chat_wire, responses_wire
from durable_agent_runner.activities.model import ModelActivities, new_http_client
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.testing.fake_llm import FakeLLMServer
from durable_agent_runner.workflows import AgentRun
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.types import (
    AgentSpec,
    AssistantMessage,
    ModelSettings,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from tests.helpers import script, start
from tests.test_client import Done, one_clean_line

ROOT = Path(__file__).resolve().parent.parent


async def client_py(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> Done:
    """`python client.py ...` in its own process, as a user runs it."""
    began = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "client.py", *args, cwd=ROOT, env={**os.environ, **(env or {})},
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return Done(proc.returncode, out.decode(), err.decode(), time.monotonic() - began)


def cli_here(capsys: pytest.CaptureFixture[str], *args: str) -> Done:
    """`client.py ...` in this process: its exit code and what it printed."""
    began = time.monotonic()
    try:
        code = client_module.main(list(args))
    except SystemExit as ended:
        code = ended.code if isinstance(ended.code, int) else 1
    out, err = capsys.readouterr()
    return Done(code, out, err, time.monotonic() - began)


# ---------------------------------------------------------------------------- usage errors

# Nothing is started: each is refused before client.py connects (no Temporal listens there).
NOWHERE = {"TEMPORAL_ADDRESS": "127.0.0.1:9"}


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--temperature", "2.5"], "--temperature: Input should be less than or equal to 2"),
        (["--temperature", "warm"], "argument --temperature: invalid float value: 'warm'"),
        (["--top-p", "1.5"], "--top-p: Input should be less than or equal to 1"),
        (["--max-output-tokens", "0"], "--max-output-tokens: Input should be greater than or equal to 1"),
        (["--max-output-tokens", "many"], "argument --max-output-tokens: invalid int value: 'many'"),
        (["--reasoning-effort", "extreme"], "argument --reasoning-effort: invalid choice: 'extreme'"),
        (["--seed", "1.5"], "argument --seed: invalid int value: '1.5'"),
        ([*["--stop", "x"] * 5], "--stop: List should have at most 4 items"),
        (["--model-settings", "{temperature: 1}"], "--model-settings is not valid JSON"),
        (["--model-settings", "[1]"], "--model-settings must be a JSON object of model settings"),
        (["--model-settings", '{"temprature": 1}'], "--model-settings: unknown field temprature (known: temperature"),
        (["--model-settings", '{"seed": "x"}'], "--model-settings seed: Input should be a valid integer"),
        (["--model-settings", '{"top_p": 0.5, "temperature": 9}'], "--model-settings temperature: Input should be"),
        (["--model-settings", '{"extra_body": {"stream": false}}'], "extra_body may not set stream"),
        (["--stop", "END", "--stop", ""], "--stop: a stop sequence may not be empty"),
        (["--model-settings", '{"stop": [""]}'], "--model-settings stop: a stop sequence may not be empty"),
        (["--fallback-model", "m", "--fallback-model", "m"], "--fallback-model: fallback model 'm' is listed twice"),
        (["--model", "m", "--fallback-model", "m"], "--fallback-model: fallback model 'm' is the model itself"),
        (["--model", "anthropic:"], "--model: model 'anthropic:' names the provider anthropic but no model"),
        # a setting a named model's provider lacks, whatever the agent's api: refused before the run
        (["--model", "gemini:g", "--no-parallel-tool-calls"], "model gemini:g: parallel_tool_calls: Gemini's API"),
        (["--model", "anthropic:c", "--seed", "3"], "model anthropic:c: seed: Anthropic's Messages API has no seed"),
        (["--fallback-model", "anthropic:c", "--temperature", "1.5"], "model anthropic:c: temperature: Anthropic"),
        (["--model", "m", "--model-settings", '{"thinking_tokens": 2048}'], "model m: thinking_tokens: Chat"),
        # a flag overrides the JSON, so the flag's own value is the one judged
        (["--model-settings", '{"temperature": 1}', "--temperature", "3"], "--temperature: Input should be"),
    ],
)
def test_bad_model_settings_are_one_line_usage_errors(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """In this process: the parse and checks of client.py's own process, without its 0.6 s start
    (the process itself: the test below)."""
    monkeypatch.setenv("TEMPORAL_ADDRESS", NOWHERE["TEMPORAL_ADDRESS"])
    done, as_json = cli_here(capsys, "run", *flags, "hello"), cli_here(capsys, "run", "--json", *flags, "hello")
    assert done.code == 2, str(done)
    assert message in one_clean_line(done.err) and done.out == "", str(done)
    assert as_json.code == 2 and message in as_json.json()["error"] and as_json.json()["exit_code"] == 2, str(as_json)


async def test_a_bad_setting_is_one_usage_line_from_client_py_s_own_process():
    flags = ["--model-settings", '{"temprature": 1}']
    done, as_json = await asyncio.gather(
        client_py("run", *flags, "hello", env=NOWHERE), client_py("run", "--json", *flags, "hello", env=NOWHERE)
    )
    message = "client.py: error: --model-settings: unknown field temprature (known: temperature"
    assert done.code == 2 and one_clean_line(done.err).startswith(message) and done.out == "", str(done)
    assert as_json.code == 2 and "unknown field temprature" in as_json.json()["error"], str(as_json)


@pytest.mark.parametrize(
    "command",
    [
        ["eval", "run", "examples/weather_eval.yaml", "--agent", "demo"],
        ["schedule", "create", "nightly", "--every", "1h", "--input", "hi"],
        ["chat"],
    ],
)
async def test_every_command_that_takes_a_model_refuses_a_bad_one_before_connecting(command: list[str]):
    """Before: each connected first, and `eval run` and `schedule create` refused it from the server."""
    done = await client_py(*command, "--model", "gemini:", env=NOWHERE)
    assert done.code == 2, str(done)
    assert "argument --model: model 'gemini:' names the provider gemini but no model" in one_clean_line(done.err)


async def test_good_settings_pass_the_checks_and_fail_only_on_the_missing_server():
    flags = ["--temperature", "0", "--no-parallel-tool-calls", "--stop", "END", "--tool-choice", "get_weather"]
    done = await client_py("run", *flags, "--model-settings", '{"extra_body": {"max_tokens": 5}}', "hi", env=NOWHERE)
    assert done.code == 1 and "cannot reach Temporal" in one_clean_line(done.err), str(done)


# ------------------------------------------------------------------------- through a worker

SCHEMA: dict[str, Any] = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def triage(model: str, api: str) -> t.AgentSpec:
    return t.AgentSpec(
        name="triage",
        instructions="Route the question.",
        model=model,
        api=api,  # type: ignore[arg-type]
        settings=t.ModelSettings(
            temperature=0.1,
            top_p=0.8,
            max_output_tokens=64,
            tool_choice="auto",
            parallel_tool_calls=False,
            reasoning_effort="low",
            seed=11,
            stop=["END"],
            extra_body={"top_k": 20},
        ),
        handoffs=[t.HandoffSpec(agent="billing", tool_name="transfer_to_billing")],
        output_schema=SCHEMA,
        output_name="Where",
        team=[t.AgentSpec(name="billing", instructions="Money.")],
    )


async def first_request(llm: FakeLLMServer, model: str, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sent = [r for r in llm.requests() if r.get("model") == model]
        if sent:
            return sent[0]["body"]  # type: ignore[no-any-return]
        await asyncio.sleep(0.1)
    raise AssertionError(f"no request for {model} reached fake_llm in {timeout}s")


@pytest.mark.parametrize("api, stream", [("chat", False), ("chat", True), ("responses", True)])
async def test_a_runs_agent_settings_handoffs_and_typed_output_reach_the_model_server(
    client: Client, task_queue: str, llm: FakeLLMServer, api: str, stream: bool
):
    # The project's workflow and model activity; the agent comes from a stand-in resolve activity
    # (same name, on both queues: the run's own worker resolves it locally when it can), so this
    # holds whatever the registry does with settings.
    model = script(llm, {"json": {"city": "Rome"}})
    spec = triage(model, api)

    @activity.defn(name=t.RESOLVE_AGENT_ACTIVITY)
    async def resolve(input: t.ResolveAgentInput) -> t.AgentSpec:
        return spec

    settings = LLMSettings(base_url=llm.base_url, model="demo", stream=stream)
    async with new_http_client(settings) as http:
        model_calls = ModelActivities(client, settings, http)
        async with (
            Worker(client, task_queue=task_queue, workflows=[AgentRun], activities=[model_calls.call_model, resolve]),
            Worker(client, task_queue=t.agent_task_queue(task_queue, "triage"), activities=[resolve]),
        ):
            handle = await start(client, task_queue, "Where is the Colosseum?", agent="triage")
            try:
                body = await first_request(llm, model)
            finally:  # what the run does next (typed output, hooks) is the workflow's business
                with contextlib.suppress(RPCError):  # it may have ended already
                    await handle.terminate("seen what the model server got")
    names = [tool["function"]["name"] if api == "chat" else tool["name"] for tool in body["tools"]]
    assert names == ["transfer_to_billing"] and body["top_k"] == 20
    common = {"temperature": 0.1, "top_p": 0.8, "parallel_tool_calls": False, "tool_choice": "auto"}
    assert {k: body[k] for k in common} == common
    if api == "chat":
        assert (body["max_completion_tokens"], body["reasoning_effort"], body["seed"], body["stop"]) == (
            64, "low", 11, ["END"],
        )  # fmt: skip
        assert body["response_format"] == {
            "type": "json_schema",
            "json_schema": {"name": "Where", "schema": SCHEMA, "strict": False},
        }
        assert body["messages"][0] == {"role": "system", "content": "Route the question."}
    else:
        assert (body["max_output_tokens"], body["reasoning"], "seed" in body, "stop" in body) == (
            64, {"effort": "low"}, False, False,
        )  # fmt: skip
        assert body["text"] == {"format": {"type": "json_schema", "name": "Where", "schema": SCHEMA, "strict": False}}
    assert body.get("stream", False) is stream


async def test_run_flags_reach_the_model_server(temporal_server, task_queue: str, worker_factory, llm: FakeLLMServer):
    env = {"TEMPORAL_ADDRESS": temporal_server.target, "TEMPORAL_NAMESPACE": "default", "AGENT_TASK_QUEUE": task_queue}
    model = f"script:{uuid.uuid4().hex[:8]}"
    llm.add_script(model.removeprefix("script:"), [{"content": "done"}])
    async with worker_factory():
        done = await client_py(
            "run", "--wait", "--json", "--agent", "scripted", "--model", model,
            "--temperature", "0.2", "--max-output-tokens", "50", "say done", env=env,
        )  # fmt: skip
    assert done.code == 0 and done.json()["output"] == "done", str(done)
    body = next(r["body"] for r in llm.requests() if r.get("model") == model)
    assert (body.get("temperature"), body.get("max_completion_tokens")) == (0.2, 50), json.dumps(body)[:500]


@pytest.mark.parametrize("wire", [chat_wire, responses_wire])
def test_a_forced_tool_choice_lasts_until_a_tool_has_answered(wire: Any):
    agent = AgentSpec(name="a", tools=[ToolSpec(name="add")], settings=ModelSettings(tool_choice="required"))
    asked = [UserMessage(content="add 1 and 2")]
    assert wire.build_request(agent, asked, "m", False)["tool_choice"] == "required"
    answered = [
        *asked,
        AssistantMessage(tool_calls=[ToolCall(call_id="call_1_0", name="add")]),
        ToolMessage(call_id="call_1_0", name="add", content="3"),
    ]
    assert "tool_choice" not in wire.build_request(agent, answered, "m", False)  # may answer in text now
    auto = agent.model_copy(update={"settings": ModelSettings(tool_choice="none")})
    assert wire.build_request(auto, answered, "m", False)["tool_choice"] == "none"
