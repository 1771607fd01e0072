"""fake_llm's layers: its HTTP server answers with the responder it is given (scripts only when
none), the default scenarios are offline models of durable_agent_runner.testing, and
`python -m durable_agent_runner.testing.fake_llm --model module:attr` serves a user's model."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from durable_agent_runner.activities import chat_wire
from durable_agent_runner.testing import FunctionModel
from durable_agent_runner.testing.fake_llm import FakeLLMServer, LLMServer
from durable_agent_runner.testing.scenarios.team import TEAM
from durable_agent_runner.testing.scenarios.weather import WEATHER
from durable_agent_runner.workflows import types as t

MODULE = textwrap.dedent(
    '''
    from durable_agent_runner import Agent, tool
    from durable_agent_runner.testing import FunctionModel, ScriptedModel, call, reply

    @tool
    def get_order(order_id: str) -> str:
        """Look an order up."""
        return "shipped"

    assistant = Agent(name="assistant", instructions="Answer about orders.", tools=[get_order])
    MODEL = ScriptedModel({assistant: [call("get_order", order_id="42"), reply("Order 42 has shipped.")]})
    NAMELESS = ScriptedModel({"someone": [reply("hi")]})
    AGENTLESS = FunctionModel(lambda request: reply("billing" if request.agent == "assistant" else "no script"))
    NOT_A_MODEL = 3
    '''
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "my_agents.py").write_text(MODULE)
    return tmp_path


def fake_llm(cwd: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "durable_agent_runner.testing.fake_llm", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(cwd)},
    )


def test_the_default_scenarios_are_offline_models() -> None:
    assert isinstance(WEATHER, FunctionModel) and isinstance(TEAM, FunctionModel)
    assert issubclass(FakeLLMServer, LLMServer)


@pytest.mark.server  # it serves HTTP
def test_a_server_given_no_responder_serves_only_the_control_apis_scripts() -> None:
    with LLMServer() as srv, httpx.Client(base_url=srv.base_url, timeout=10) as http:
        srv.add_script("s", [{"content": "scripted"}])
        ok = http.post("/chat/completions", json={"model": "script:s", "messages": [{"role": "user", "content": "x"}]})
        assert ok.json()["choices"][0]["message"]["content"] == "scripted"
        refused = http.post("/chat/completions", json={"model": "demo", "messages": [{"role": "user", "content": "x"}]})
        assert refused.status_code == 404 and "serves only script:<id> models" in refused.json()["error"]["message"]


@pytest.mark.parametrize(
    ("reference", "said"),
    [
        ("my_agents", "expected module:attr, e.g. my_agents:MODEL"),
        ("no_such_module:MODEL", "cannot import no_such_module: ModuleNotFoundError"),
        ("my_agents:MODL", "my_agents has no attribute 'MODL'"),
        ("my_agents:NOT_A_MODEL", "not a model but int: give a ScriptedModel or FunctionModel"),
        ("my_agents:NAMELESS", "it does not know the agent(s) 'someone'"),
        ("my_agents:AGENTLESS", "FunctionModel(<lambda>) knows no agent, so request.agent would be ''"),
    ],
)
def test_a_model_reference_it_cannot_use_ends_it_with_one_line(
    project: Path, reference: str, said: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """fake_llm's main in this process (a process a case cost a second; the one below is one)."""
    from durable_agent_runner.testing.fake_llm.__main__ import main

    monkeypatch.syspath_prepend(str(project))
    monkeypatch.delitem(sys.modules, "my_agents", raising=False)  # this case's project, imported afresh
    try:
        assert main(["--port", "0", "--model", reference]) == 2
    finally:
        sys.modules.pop("my_agents", None)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("fake_llm: --model ") and said in err, err
    assert "Traceback" not in err


def test_a_model_reference_it_cannot_use_ends_the_process_with_one_line(project: Path) -> None:
    proc = fake_llm(project, "--port", "0", "--model", "my_agents:MODL")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, (out, err)
    assert err == "fake_llm: --model my_agents:MODL: my_agents has no attribute 'MODL'\n", err


@pytest.fixture
def served(project: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    # Port 0: the server takes a free port itself and says which (a port found free beforehand may
    # be taken meanwhile by another test process's server).
    proc = fake_llm(project, "--port", "0", "--model", "my_agents:MODEL")
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until it listens, or ends at its exit
        assert "(ScriptedModel my_agents:MODEL; agents: assistant)" in line, (line, proc.stderr and proc.stderr.read())
        yield proc, line.removeprefix("fake_llm listening on ").split()[0]
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)  # and closes its pipes


@pytest.mark.server  # `served` is a fake_llm process
def test_a_users_scripted_model_answers_over_http_until_sigterm(served: tuple[subprocess.Popen[str], str]) -> None:
    project: dict[str, Any] = {}
    exec(MODULE, project)  # the same agent as the served module's, to send its request
    proc, base_url = served
    request = chat_wire.build_request(project["assistant"].spec(), [t.UserMessage(content="order 42?")], "x", False)
    body = json.loads(json.dumps(request))
    with httpx.Client(base_url=base_url, timeout=10) as http:
        message = http.post("/chat/completions", json=body).json()["choices"][0]["message"]
        assert message["tool_calls"][0]["function"] == {"name": "get_order", "arguments": '{"order_id": "42"}'}
        other = http.post("/chat/completions", json={"model": "x", "messages": [{"role": "user", "content": "hi"}]})
        assert other.status_code == 400 and "ScriptedModel: no script for an agent it does not know" in other.text
    proc.send_signal(signal.SIGTERM)
    started = time.monotonic()
    assert proc.wait(30) == 0 and time.monotonic() - started < 30
