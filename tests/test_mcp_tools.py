"""MCP tools against real MCP servers (tests/fixtures/mcp_server.py, built with the `mcp` package),
over stdio and streamable HTTP: first the pieces on their own, then whole runs on the dev server
with fake_llm asking for the tools, each replayed from its history."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowFailureError

from durable_agent_runner import Agent, McpServer, Registry, ToolContext, ToolRetryableError, tool
from durable_agent_runner.activities.mcp_tools import MAX_RESULT_CHARS, McpTool, freeze
from durable_agent_runner.workflows import types as t
from tests.devserver import free_port
from tests.helpers import calls, replay, script, start, transcript
from tests.test_approvals import decide, pending, update

pytestmark = pytest.mark.server  # its tests start MCP servers (over stdio or HTTP) themselves
FIXTURE = str(Path(__file__).parent / "fixtures" / "mcp_server.py")
TOKEN = "tok-7f3c9a1e-secret-header"
CTX = ToolContext(run_id="r", call_id="call_1_0", idempotency_key="r:call_1_0", turn=1, attempt=1)


@pytest.fixture
def calls_file(tmp_path: Path) -> Path:
    """The fixture server's `count` tool appends a line here for every call that reached it."""
    return tmp_path / "mcp_calls.log"


def stdio(calls_file: Path, name: str = "fx", *args: str, **fields: Any) -> McpServer:
    env = {"MCP_CALLS_FILE": str(calls_file)}
    return McpServer(name=name, command=[sys.executable, FIXTURE, *args], env=env, **fields)


class HttpServer:
    """The fixture server over streamable HTTP on a free port, requiring the bearer token."""

    def __init__(self, calls_file: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        env = {**os.environ, "MCP_CALLS_FILE": str(calls_file)}
        cmd = [sys.executable, FIXTURE, "--http", str(self.port), "--token", TOKEN]
        self.proc = subprocess.Popen(cmd, env=env, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1):
                break
            assert self.proc.poll() is None and time.monotonic() < deadline, "the MCP HTTP server did not start"
            time.sleep(0.1)

    def server(self, name: str = "web", **fields: Any) -> McpServer:
        return McpServer(name=name, url=self.url, headers={"Authorization": f"Bearer {TOKEN}"}, **fields)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


@pytest.fixture
def http(calls_file: Path) -> Iterator[HttpServer]:
    server = HttpServer(calls_file)
    yield server
    server.stop()


async def frozen_tools(server: McpServer, **agent: Any) -> dict[str, McpTool]:
    a = Agent(name="a", mcp_servers=[server], **agent)
    spec = await freeze(a, a.spec())
    return {s.name: McpTool(server, s) for s in spec.tools if s.mcp_server}


def reached(calls_file: Path) -> list[str]:
    return calls_file.read_text().splitlines() if calls_file.exists() else []


# ------------------------------------------------------------------------ without Temporal


def test_a_server_is_a_command_or_a_url():
    with pytest.raises(ValueError, match="either command"):
        McpServer(name="x")
    with pytest.raises(ValueError, match="either command"):
        McpServer(name="x", command=["srv"], url="http://h/mcp")
    with pytest.raises(ValueError, match="letters, digits"):
        McpServer(name="my server", command=["srv"])
    with pytest.raises(ValueError, match="http:// or https://"):
        McpServer(name="x", url="ftp://h/mcp")
    with pytest.raises(ValueError, match="env is for stdio"):
        McpServer(name="x", url="http://h/mcp", env={"A": "b"})
    with pytest.raises(ValueError, match="less than or equal to 30"):  # a run's start lists it within 60 s
        McpServer(name="x", url="http://h/mcp", connect_timeout_seconds=45)
    with pytest.raises(ValueError, match="more than one MCP server named fs"):
        Agent(name="a", mcp_servers=[McpServer(name="fs", command=["a"]), McpServer(name="fs", command=["b"])])


def test_secrets_are_not_shown_nor_in_the_version():
    server = McpServer(name="web", url="http://h/mcp", headers={"Authorization": f"Bearer {TOKEN}"})
    assert TOKEN not in repr(server) and TOKEN not in repr(Agent(name="a", mcp_servers=[server]))
    assert server.authored() == {"name": "web", "url": "http://h/mcp", "headers": ["Authorization"]}

    def version(**fields: Any) -> str:
        return Agent(name="a", instructions="hi", mcp_servers=[server.model_copy(update=fields)]).version

    plain = Agent(name="a", instructions="hi").version
    assert version() != plain  # the server list counts
    assert version(headers={"Authorization": "Bearer rotated-token-value"}) == version()  # a secret's value does not
    assert version(headers={"X-Other": "v"}) != version()  # which headers are sent does
    assert version(url="http://other/mcp") != version()
    member = Agent(name="helper", mcp_servers=[server])
    with_team = Agent(name="lead", handoffs=[member])
    assert with_team.version != Agent(name="lead", handoffs=[Agent(name="helper")]).version  # a member's servers count


def test_approvals_may_name_mcp_tools_by_their_server_prefix():
    server = McpServer(name="fx", command=["srv"])
    Agent(name="a", mcp_servers=[server], approvals={"fx_add": "always"})
    with pytest.raises(ValueError, match="sets approval for tools it does not have: add"):
        Agent(name="a", mcp_servers=[server], approvals={"add": "always"})
    Agent(name="a", mcp_servers=[McpServer(name="fx", command=["srv"], prefix="")], approvals={"add": "always"})


async def test_freeze_lists_the_tools_over_stdio(calls_file):
    server = stdio(calls_file)
    a = Agent(name="a", mcp_servers=[server], approvals={"fx_add": "always", "fx_count": lambda args: True})
    spec = await freeze(a, a.spec())
    by_name = {s.name: s for s in spec.tools}
    listed = ("add", "shout_loud", "fail", "crash", "picture", "big", "slow", "whoami", "count")
    assert set(by_name) == {f"fx_{n}" for n in listed}
    add = by_name["fx_add"]
    assert add.mcp_server == "fx" and add.description == "Add two integers." and add.approval == "always"
    assert add.parameters["required"] == ["a", "b"]  # the server's inputSchema, as it listed it
    assert by_name["fx_count"].approval == "conditional" and by_name["fx_big"].approval == "never"
    assert add.max_attempts == 3 and add.timeout_seconds == 10 + 60 + 10
    # only the server's name is frozen: not its command, and never its environment
    dumped = spec.model_dump_json()
    assert FIXTURE not in dumped and str(calls_file) not in dumped
    # without a prefix, the server's own names (one with a dot made a function name)
    bare = Agent(name="a", mcp_servers=[stdio(calls_file, prefix="")])
    assert {"add", "shout_loud"} <= {s.name for s in (await freeze(bare, bare.spec())).tools}


async def test_freeze_refuses_names_that_are_taken_and_approvals_of_no_tool(calls_file):
    @tool(name="fx_add")
    def taken(a: int) -> int:
        """A function tool with an MCP tool's name."""
        return a

    clash = Agent(name="a", tools=[taken], mcp_servers=[stdio(calls_file)])
    with pytest.raises(ValueError, match="tool 'add', named 'fx_add' here, which is already a function tool's name"):
        await freeze(clash, clash.spec())
    twins = Agent(name="a", mcp_servers=[stdio(calls_file, "one", prefix="x_"), stdio(calls_file, "two", prefix="x_")])
    with pytest.raises(ValueError, match="already MCP server 'one' tool 'add''s name"):
        await freeze(twins, twins.spec())
    ghost = Agent(name="a", mcp_servers=[stdio(calls_file)], approvals={"fx_nothing": "always"})
    with pytest.raises(ValueError, match="sets approval for tools neither it nor its MCP servers have: fx_nothing"):
        await freeze(ghost, ghost.spec())


async def test_calls_over_stdio_return_text_errors_and_summaries_of_other_content(calls_file):
    tools = await frozen_tools(stdio(calls_file))
    added = await tools["fx_add"].invoke('{"a": 2, "b": 3}', CTX)
    assert (added.output, added.is_error, added.call_id, added.tool) == ("2 + 3 = 5", False, "call_1_0", "fx_add")
    assert (await tools["fx_shout_loud"].invoke('{"text": "hi"}', CTX)).output == "HI"  # called by its own name
    failed = await tools["fx_fail"].invoke('{"reason": "no access"}', CTX)
    assert failed.is_error and "refused: no access" in failed.output  # isError: told to the model, not retried
    picture = await tools["fx_picture"].invoke("{}", CTX)
    assert picture.output == (
        "a grey square\n[image: image/png, 3,008 bytes]\n"
        "[resource file:///data.bin: application/octet-stream, 3,008 bytes]"
    )
    big = await tools["fx_big"].invoke(json.dumps({"chars": MAX_RESULT_CHARS + 5000}), CTX)
    assert len(big.output) < MAX_RESULT_CHARS + 100 and big.output.endswith("(cut: 5,000 more characters)")


async def test_an_error_the_server_answers_is_the_models_to_hear_not_a_retry(calls_file):
    """A JSON-RPC error, an internal one included, is an answer: the same call would get it again.
    Only a server that does not answer (closed, timed out, a bare 5xx) is retried."""
    tools = await frozen_tools(stdio(calls_file))
    crashed = await tools["fx_crash"].invoke('{"reason": "disk on fire"}', CTX)
    assert crashed.is_error and crashed.output == (
        "error: MCP server 'fx' refused the call: internal error: disk on fire"
    )


async def test_arguments_past_the_bounds_never_reach_the_server(calls_file):
    tools = await frozen_tools(stdio(calls_file))
    deep = await tools["fx_count"].invoke('{"label": ' + "[" * 5000 + "]" * 5000 + "}", CTX)
    assert deep.is_error and deep.output.startswith("arguments for tool 'fx_count' refused: nested deeper than 64")
    digits = await tools["fx_count"].invoke('{"label": ' + "9" * 5000 + "}", CTX)
    assert digits.is_error and "refused: a number longer than 100 characters" in digits.output
    assert reached(calls_file) == []


async def test_invalid_arguments_never_reach_the_server(calls_file):
    tools = await frozen_tools(stdio(calls_file))
    bad = await tools["fx_count"].invoke('{"label": 7}', CTX)
    assert bad.is_error and bad.output == (
        "invalid arguments for tool 'fx_count': label: 7 is not of type 'string' (parameters: label)"
    )
    assert (await tools["fx_count"].invoke("[1]", CTX)).output.startswith("arguments for tool 'fx_count' must be")
    assert reached(calls_file) == []
    assert (await tools["fx_count"].invoke('{"label": "ok"}', CTX)).output == "counted ok"
    assert reached(calls_file) == ["ok"]


async def test_a_call_over_http_sends_the_headers_and_masks_them_when_echoed(http):
    tools = await frozen_tools(http.server())
    assert (await tools["web_add"].invoke('{"a": 1, "b": 1}', CTX)).output == "1 + 1 = 2"
    echoed = await tools["web_whoami"].invoke("{}", CTX)
    assert "authorization: ***" in echoed.output and TOKEN not in echoed.output


async def test_servers_that_cannot_be_reached_are_retryable(calls_file, http, tmp_path):
    tools = await frozen_tools(http.server())
    spec = tools["web_add"].spec
    unauthorized = McpTool(McpServer(name="web", url=http.url, headers={"Authorization": "Bearer wrong-token"}), spec)
    with pytest.raises(ToolRetryableError, match="MCP server 'web' failed starting or reaching it"):
        await unauthorized.invoke('{"a": 1, "b": 1}', CTX)
    http.stop()
    with pytest.raises(ToolRetryableError, match="failed starting or reaching it: ConnectError"):
        await tools["web_add"].invoke('{"a": 1, "b": 1}', CTX)
    flag = tmp_path / "refuse"
    flag.touch()
    refusing = McpTool(stdio(calls_file, "fx", "--refuse-if", str(flag)), spec)
    with pytest.raises(ToolRetryableError, match="Connection closed"):
        await refusing.invoke('{"a": 1, "b": 1}', CTX)
    missing = McpTool(McpServer(name="fx", command=[str(tmp_path / "no-such-server")]), spec)
    with pytest.raises(ToolRetryableError, match="FileNotFoundError"):
        await missing.invoke('{"a": 1, "b": 1}', CTX)


async def test_a_stdio_servers_stderr_is_logged_masked(calls_file, caplog):
    """A stdio server's stderr goes to the worker's log, each line masked with the server's
    secrets and cut, never straight to the worker's own stderr."""
    secret = "env-5ecret-value-1234"
    server = stdio(calls_file, "fx", "--say-env", "API_TOKEN")
    server = server.model_copy(update={"env": {**server.env, "API_TOKEN": secret}})
    caplog.set_level(logging.INFO, logger="durable_agent_runner.activities.mcp_tools")
    tools = await frozen_tools(server)
    assert (await tools["fx_add"].invoke('{"a": 2, "b": 2}', CTX)).output == "2 + 2 = 4"
    for _ in range(100):  # the relay thread logs as the server writes, and may trail the call
        if "[cut]" in caplog.text:
            break
        await asyncio.sleep(0.05)
    assert "MCP server 'fx' stderr: starting with API_TOKEN=***" in caplog.text
    assert secret not in caplog.text and secret[:8] not in caplog.text
    long_lines = [r.getMessage() for r in caplog.records if "[cut]" in r.getMessage()]
    assert long_lines and all(len(m) < 2100 for m in long_lines)


async def test_a_slow_call_times_out_and_a_cancelled_one_leaves_no_process(calls_file, tmp_path):
    tools = await frozen_tools(stdio(calls_file, timeout_seconds=1))
    pid_file = tmp_path / "pid"
    args = json.dumps({"seconds": 30, "pid_file": str(pid_file)})
    began = time.monotonic()
    with pytest.raises(ToolRetryableError, match="did not answer fx_slow within 1s"):
        await tools["fx_slow"].invoke(args, CTX)
    assert time.monotonic() - began < 10
    await gone(int(pid_file.read_text()))
    pid_file.unlink()
    # Temporal cancels an activity with a plain task.cancel(): the server's process still ends
    call = asyncio.create_task(tools["fx_slow"].invoke(args, CTX))
    pid = await pid_in(pid_file)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await gone(pid)


async def pid_in(path: Path, timeout: float = 30) -> int:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text()):
        assert time.monotonic() < deadline, f"nothing wrote {path}"
        await asyncio.sleep(0.05)
    return int(path.read_text())


async def gone(pid: int, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # a zombie of ours counts as gone once reaped
        assert time.monotonic() < deadline, f"MCP server process {pid} is still alive"
        await asyncio.sleep(0.1)


# ------------------------------------------------------------------------------ whole runs


def registry(*agents: Agent) -> Registry:
    return Registry(agents=list(agents))


async def summaries(client, handle) -> list[str]:
    history = await handle.fetch_history()
    found = [e.user_metadata.summary for e in history.events if e.HasField("user_metadata")]
    return [str(v) for v in await client.data_converter.decode(found)]


async def failed_attempts(handle, activity_id_prefix: str) -> list[int]:
    """The attempt each failed activity whose id starts so had reached when it gave up."""
    history = await handle.fetch_history()
    ids = {
        e.event_id: e.activity_task_scheduled_event_attributes.activity_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    }
    started = {
        e.activity_task_started_event_attributes.scheduled_event_id: e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    }
    return [
        started[sid]
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED
        and ids[(sid := e.activity_task_failed_event_attributes.scheduled_event_id)].startswith(activity_id_prefix)
    ]


async def test_a_run_calls_an_mcp_tool_over_stdio(client, task_queue, worker_factory, llm, calls_file):
    agent = Agent(name="mcp_stdio", instructions="Use the tools.", mcp_servers=[stdio(calls_file)])
    model = script(llm, calls(("fx_add", {"a": 2, "b": 3}), ("fx_picture", {})), {"content": "5, and a square"})
    async with worker_factory(registry=registry(agent)):
        handle = await start(client, task_queue, "add 2 and 3", agent="mcp_stdio", model=model)
        result = await handle.result()
        messages = await transcript(handle)
    assert result.output == "5, and a square"
    results = {m.name: m.content for m in messages if isinstance(m, t.ToolMessage)}
    assert results == {"fx_add": "2 + 3 = 5", "fx_picture": results["fx_picture"]}
    assert "[image: image/png, 3,008 bytes]" in results["fx_picture"]
    sent = llm.requests()[0]["body"]["tools"]  # the model was offered the frozen tools, with the server's schemas
    offered = {f["function"]["name"]: f["function"]["parameters"] for f in sent}
    assert offered["fx_add"]["required"] == ["a", "b"] and "fx_whoami" in offered
    assert "turn 1 · tool: fx_add(a=2, b=3)" in await summaries(client, handle)
    # Reaching the servers is I/O: never inside the run's workflow task, so the resolve is routed.
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in (await handle.fetch_history()).events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert scheduled[0] == t.RESOLVE_AGENT_ACTIVITY
    await replay(handle)


async def test_a_run_over_http_keeps_the_headers_on_the_worker(client, task_queue, worker_factory, llm, http):
    agent = Agent(name="mcp_http", instructions="Use the tools.", mcp_servers=[http.server()])
    model = script(llm, calls(("web_whoami", {})), {"content": "done"})
    async with worker_factory(registry=registry(agent)):
        handle = await start(client, task_queue, "who am I?", agent="mcp_http", model=model)
        await handle.result()
        frozen: t.Transcript = await handle.query(t.TRANSCRIPT_QUERY, t.TranscriptQuery(), result_type=t.Transcript)
        messages = await transcript(handle)
    (echoed,) = [m.content for m in messages if isinstance(m, t.ToolMessage)]
    assert "authorization: ***" in echoed
    assert frozen.agent is not None and {s.mcp_server for s in frozen.agent.tools} == {"web"}
    history = json.dumps((await handle.fetch_history()).to_json_dict())
    assert TOKEN not in history and http.url not in history  # neither the header nor the URL is frozen
    assert TOKEN not in json.dumps(llm.requests()[-1]["body"])
    await replay(handle)


async def test_approvals_of_mcp_tools(client, task_queue, worker_factory, llm, calls_file):
    agent = Agent(
        name="mcp_guarded",
        instructions="Ask first.",
        mcp_servers=[stdio(calls_file)],
        approvals={"fx_count": "always", "fx_add": lambda args: args["a"] > 100},  # MCP arguments: a dict
    )
    model = script(
        llm,
        calls(("fx_count", {"label": "first"}), ("fx_add", {"a": 1, "b": 2}), ("fx_add", {"a": 500, "b": 1})),
        calls(("fx_count", {"label": 42})),  # invalid: told to the model, no one is asked
        {"content": "done"},
    )
    async with worker_factory(registry=registry(agent)):
        handle = await start(client, task_queue, "count", agent="mcp_guarded", model=model)
        waiting = {p.tool + str(p.arguments): p for p in await pending(handle, count=2)}
        assert set(waiting) == {"fx_count{'label': 'first'}", "fx_add{'a': 500, 'b': 1}"}
        assert reached(calls_file) == []  # nothing ran before the decision
        await update(handle, decide(waiting["fx_count{'label': 'first'}"].call_id, by="alice"))
        await update(handle, decide(waiting["fx_add{'a': 500, 'b': 1}"].call_id, approve=False, reason="too big"))
        assert (await handle.result()).output == "done"
        messages = await transcript(handle)
    results = [(m.name, m.content, m.is_error) for m in messages if isinstance(m, t.ToolMessage)]
    assert results[:3] == [
        ("fx_count", "counted first", False),
        ("fx_add", "1 + 2 = 3", False),  # the predicate said no approval needed
        ("fx_add", results[2][1], True),
    ]
    assert "rejected" in results[2][1] and "too big" in results[2][1]
    assert results[3] == (
        "fx_count",
        "invalid arguments for tool 'fx_count': label: 42 is not of type 'string' (parameters: label)",
        True,
    )
    assert reached(calls_file) == ["first"]
    await replay(handle)


async def test_invalid_arguments_go_back_to_the_model(client, task_queue, worker_factory, llm, http):
    agent = Agent(name="mcp_invalid", instructions="Add.", mcp_servers=[http.server()])
    model = script(llm, calls(("web_add", {"a": "two"})), calls(("web_add", {"a": 2, "b": 2})), {"content": "4"})
    async with worker_factory(registry=registry(agent)):
        handle = await start(client, task_queue, "add", agent="mcp_invalid", model=model)
        assert (await handle.result()).output == "4"
        messages = await transcript(handle)
    first, second = [m for m in messages if isinstance(m, t.ToolMessage)]
    assert first.is_error and "a: 'two' is not of type 'integer'" in first.content
    assert "'b' is a required property" in first.content
    assert (second.content, second.is_error) == ("2 + 2 = 4", False)
    await replay(handle)


async def test_servers_down_when_called_are_retried_then_the_model_is_told(
    client, task_queue, worker_factory, llm, calls_file, http, tmp_path
):
    flag = tmp_path / "refuse"
    agent = Agent(
        name="mcp_down",
        instructions="Try.",
        mcp_servers=[http.server(), stdio(calls_file, "fx", "--refuse-if", str(flag))],
        approvals={"web_add": "always", "fx_add": "always"},  # holds the calls while the servers go down
    )
    model = script(llm, calls(("web_add", {"a": 1, "b": 1}), ("fx_add", {"a": 2, "b": 2})), {"content": "sorry"})
    async with worker_factory(registry=registry(agent)):
        handle = await start(client, task_queue, "add", agent="mcp_down", model=model)
        waiting = await pending(handle, count=2)  # the tools were listed: both servers were up
        http.stop()
        flag.touch()  # the stdio command now exits at once
        for p in waiting:
            await update(handle, decide(p.call_id))
        assert (await handle.result()).output == "sorry"  # the run completes
        messages = await transcript(handle)
    results = {m.name: m for m in messages if isinstance(m, t.ToolMessage)}
    web, fx = results["web_add"], results["fx_add"]
    assert web.is_error and web.content.startswith("error: tool 'web_add' failed after 3 attempt(s): MCP server 'web'")
    assert "ConnectError" in web.content
    assert fx.is_error and "failed after 3 attempt(s): MCP server 'fx' failed starting or reaching it" in fx.content
    assert sorted(await failed_attempts(handle, "tool-")) == [3, 3]  # each retried to its bound
    await replay(handle)


async def test_a_server_down_when_the_run_starts_fails_it_clearly(client, task_queue, worker_factory, tmp_path):
    gone_server = McpServer(name="fx", command=[str(tmp_path / "no-such-server")])
    agent = Agent(name="mcp_nostart", instructions="-", mcp_servers=[gone_server])
    async with worker_factory(registry=registry(agent)):
        handle = await start(client, task_queue, "hi", agent="mcp_nostart")
        with pytest.raises(WorkflowFailureError) as caught:
            await handle.result()
    assert "MCP server 'fx' failed starting or reaching it: FileNotFoundError" in str(caught.value.cause)


async def test_a_name_collision_refuses_the_run_at_resolve(client, task_queue, worker_factory, calls_file):
    @tool(name="fx_add")
    def fx_add(a: int) -> int:
        """Already taken."""
        return a

    agent = Agent(name="mcp_clash", instructions="-", tools=[fx_add], mcp_servers=[stdio(calls_file)])
    async with worker_factory(registry=registry(agent)):
        handle = await start(client, task_queue, "hi", agent="mcp_clash")
        with pytest.raises(WorkflowFailureError) as caught:
            await handle.result()
    assert "which is already a function tool's name" in str(caught.value.cause)


async def test_cancelling_a_run_ends_its_stdio_server(client, task_queue, worker_factory, llm, calls_file, tmp_path):
    pid_file = tmp_path / "pid"
    agent = Agent(name="mcp_cancel", instructions="-", mcp_servers=[stdio(calls_file)])
    model = script(llm, calls(("fx_slow", {"seconds": 120, "pid_file": str(pid_file)})), {"content": "-"})
    async with worker_factory(registry=registry(agent)):
        handle = await start(client, task_queue, "wait", agent="mcp_cancel", model=model)
        pid = await pid_in(pid_file)
        await handle.cancel()
        await gone(pid)  # the activity's cancel reaches it at its next heartbeat, then the server stops


def test_a_server_declared_wrong_says_why_without_quoting_its_secrets():
    secret = "sk-S3CR3T"  # short: pydantic shortens a long input in the middle, which would hide a leak
    for bad in (
        {"name": "w", "command": ["x"], "url": "http://x", "headers": {"A": secret}},
        {"name": "w", "url": "http://x", "env": {"T": secret}},
    ):
        with pytest.raises(ValueError) as caught:
            McpServer(**bad)
        assert secret not in str(caught.value), caught.value
        assert str(caught.value).strip()


async def test_freeze_bounds_what_a_server_lists(monkeypatch: pytest.MonkeyPatch):
    """A server's listing goes into the run's history and every model request: too many tools
    or a huge schema refuse the run, saying why; a long description is cut."""
    from mcp.types import Tool as Listed

    from durable_agent_runner.activities import mcp_tools

    def listed(n: int, description: str = "d", schema: dict[str, Any] | None = None) -> list[Listed]:
        shape = schema or {"type": "object", "properties": {}}
        return [Listed(name=f"t{i}", description=description, inputSchema=shape) for i in range(n)]

    server = McpServer(name="big", url="http://127.0.0.1:9/mcp")
    agent = Agent(name="lister", instructions="-", mcp_servers=[server])
    for tools, why in (
        (listed(mcp_tools.MAX_LISTED_TOOLS + 1), "lists 129 tools, more than the 128"),
        (listed(1, schema={"type": "object", "description": "x" * 70_000}), "inputSchema is over 65,536 bytes"),
    ):

        async def serve(_: McpServer, tools: list[Listed] = tools) -> list[Listed]:
            return tools

        monkeypatch.setattr(mcp_tools, "list_tools", serve)
        with pytest.raises(ValueError, match=why):
            await freeze(agent, agent.spec())

    async def wordy(_: McpServer) -> list[Listed]:
        return listed(mcp_tools.MAX_LISTED_TOOLS, description="w" * 5000)

    monkeypatch.setattr(mcp_tools, "list_tools", wordy)
    spec = await freeze(agent, agent.spec())
    assert len(spec.tools) == 128 and {len(t.description) for t in spec.tools} == {mcp_tools.MAX_DESCRIPTION_CHARS}
