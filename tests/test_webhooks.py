"""Signed webhooks against a real served ingress (uvicorn on a free port) and the dev server: a
delivery posted twice starts one run; a captured request resent under a forged delivery id starts
none; a bad or missing signature, a stale Slack or generic timestamp, a generic signature over
another id, an oversized or non-JSON body, an unknown hook and a missing template field start
nothing, each with its status and one line; a session's hook gives the session one message; secrets never appear in
an answer or a log. The hooks file and the CLI's refusals need no server."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import os
import socket
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from temporalio.service import RPCError, RPCStatusCode

from durable_agent_runner.cli import main as cli_main
from durable_agent_runner.client import deliveries
from durable_agent_runner.client.agent_client import AgentClient
from durable_agent_runner.webhooks import Hook, HookConfigError, build_app, generic_headers, hooks_from, load, sign
from durable_agent_runner.workflows import types as t
from tests.test_client import ROOT

SECRET = "s3cret-for-tests-only"
HOOKS = {
    "issues": {"agent": "demo", "secret": SECRET, "kind": "github", "input": "Triage #{issue.number}: {issue.title}"},
    "chat": {"agent": "demo", "secret_env": "TEST_SLACK_SECRET", "kind": "slack", "input": "{event.text}"},
    "plain": {"agent": "demo", "secret": SECRET, "input": "Weather in {city}?", "delivery_header": "X-Request-Id"},
}


@contextlib.asynccontextmanager
async def serve_hooks(agents: AgentClient, hooks: dict[str, Hook], **options: Any) -> AsyncIterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = build_app(agents, hooks, **options)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "the ingress did not start"
        await asyncio.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(task, 10)
        sock.close()


@pytest.fixture
def hooks(monkeypatch: pytest.MonkeyPatch) -> dict[str, Hook]:
    monkeypatch.setenv("TEST_SLACK_SECRET", SECRET)
    return hooks_from(HOOKS)


def github(body: bytes, delivery: str | None = None, key: str = SECRET) -> dict[str, str]:
    headers = {"Content-Type": "application/json", "X-Hub-Signature-256": sign("github", key.encode(), body)}
    return headers | ({"X-GitHub-Delivery": delivery} if delivery else {})


def generic(
    body: bytes,
    delivery: str,
    *,
    header: str = "X-Delivery-Id",
    stamp: float | None = None,
    signed_id: str | None = None,
) -> dict[str, str]:
    """A generic request's headers, written out here (not by the product's helper): `signed_id`
    signs another id than the one sent."""
    ts = str(int(time.time() if stamp is None else stamp))
    mac = sign("generic", SECRET.encode(), body, ts, delivery if signed_id is None else signed_id)
    return {"Content-Type": "application/json", "X-Timestamp": ts, header: delivery, "X-Signature-256": mac}


def digest_run(name: str, body: bytes) -> str:
    """The run id of a delivery known by its body's digest (a github hook's, always)."""
    return f"hook-{name}-{hashlib.sha256(('body:' + hashlib.sha256(body).hexdigest()).encode()).hexdigest()[:16]}"


def id_run(name: str, delivery: str) -> str:
    return f"hook-{name}-{hashlib.sha256(delivery.encode()).hexdigest()[:16]}"


async def exists(client: Any, run_id: str) -> bool:
    try:
        await client.get_workflow_handle(run_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return True


async def test_a_delivery_posted_twice_starts_one_run(client, task_queue, worker_factory, hooks, caplog):
    caplog.set_level(logging.INFO)
    agents = AgentClient(client, task_queue=task_queue)
    body = json.dumps({"issue": {"number": 7, "title": "Weather in Tokyo?"}, "at": time.monotonic_ns()}).encode()
    delivery = f"gh-{time.monotonic_ns()}"
    async with worker_factory(), serve_hooks(agents, hooks) as url, httpx.AsyncClient(timeout=20) as http:
        first = await http.post(f"{url}/hooks/issues", content=body, headers=github(body, delivery))
        again = await http.post(f"{url}/hooks/issues", content=body, headers=github(body, delivery))
        assert (first.status_code, again.status_code) == (202, 202), first.text
        a, b = first.json(), again.json()
        assert (a["started"], b["started"]) == (True, False)
        # GitHub signs the body, not X-GitHub-Delivery: the run is keyed on what is signed (a
        # redelivery sends the same body and id: one run).
        assert a["run_id"] == b["run_id"] == digest_run("issues", body)
        assert a["delivery"] == "body digest" and a["hook"] == "issues"
        assert await agents.get(a["run_id"]).result()  # the demo's answer
        # Ended, the run's id still refuses a third start of the same delivery.
        third = await http.post(f"{url}/hooks/issues", content=body, headers=github(body, delivery))
        assert third.json()["started"] is False
    query = f'WorkflowId="{a["run_id"]}"'
    assert len([wf async for wf in client.list_workflows(query)]) == 1
    transcript = await agents.get(a["run_id"]).status()
    assert transcript.agent == "demo"
    logged = caplog.text + first.text + again.text
    assert SECRET not in logged and "sha256=" not in logged


async def test_bad_signatures_stale_slack_and_bad_bodies_start_nothing(client, task_queue, hooks):
    agents = AgentClient(client, task_queue=task_queue)
    body = json.dumps({"issue": {"number": 8, "title": "x"}}).encode()
    now = int(time.time())  # the ingress's clock, held still: the 5-minute bound is tested to the second
    async with (
        serve_hooks(agents, hooks, max_body=4096, clock=lambda: now) as url,
        httpx.AsyncClient(timeout=20) as http,
    ):

        async def post(name: str, content: bytes, headers: dict[str, str]) -> httpx.Response:
            return await http.post(f"{url}/hooks/{name}", content=content, headers=headers)

        cases = [
            ("wrong key", await post("issues", body, github(body, "bad-1", key="not-the-key")), 401, "does not match"),
            ("unsigned", await post("issues", body, {"Content-Type": "application/json", "X-GitHub-Delivery": "bad-2"}),
             401, "no X-Hub-Signature-256 header"),
            ("tampered", await post("issues", body.replace(b"8", b"9"), github(body, "bad-3")), 401, "does not match"),
            ("malformed", await post("issues", body, {**github(body, "bad-4"), "X-Hub-Signature-256": "sha256=zz"}),
             401, "not sha256=<64 hex digits>"),
        ]  # fmt: skip
        event = json.dumps({"event_id": "Ev1", "event": {"text": "Weather in Paris?"}}).encode()
        for label, stamp in (("stale", now - 301), ("future", now + 301)):
            headers = {
                "Content-Type": "application/json",
                "X-Slack-Request-Timestamp": str(stamp),
                "X-Slack-Signature": sign("slack", SECRET.encode(), event, str(stamp)),
            }
            cases.append((label, await post("chat", event, headers), 401, "is stale"))
        big = json.dumps({"issue": {"number": 1, "title": "x" * 5000}}).encode()
        cases += [
            ("too large", await post("issues", big, github(big, "bad-5")), 413, "larger than 4,096 bytes"),
            ("not json", await post("issues", b"a=1", {**github(b"a=1", "bad-6"), "Content-Type": "text/plain"}),
             415, "as JSON"),
            ("unknown hook", await post("nobody", body, github(body, "bad-7")), 404, "no such hook"),
            ("invalid json", await post("issues", b"{nope", github(b"{nope", "bad-8")), 400, "not valid JSON"),
        ]  # fmt: skip
        missing = json.dumps({"issue": {"number": 9}}).encode()
        cases.append(("missing field", await post("issues", missing, github(missing, "bad-9")), 422, "'issue.title'"))
        for label, response, status, says in cases:
            assert response.status_code == status, (label, response.text)
            assert says in response.json()["error"] and SECRET not in response.text, (label, response.text)
        for sent in (body, body.replace(b"8", b"9"), big, b"a=1", b"{nope", missing):  # none started a run
            assert not await exists(client, digest_run("issues", sent))

        # Signed and fresh (5 minutes old at most), Slack's event starts one run; its retry (same event_id) none.
        headers = {
            "Content-Type": "application/json; charset=utf-8",
            "X-Slack-Request-Timestamp": str(now - 300),
            "X-Slack-Signature": sign("slack", SECRET.encode(), event, str(now - 300)),
        }
        first = await post("chat", event, headers)
        retry = await post("chat", event, {**headers, "X-Slack-Retry-Num": "1"})
        assert (first.status_code, first.json()["started"], retry.json()["started"]) == (202, True, False)
        assert first.json()["delivery"] == "field event_id" and first.json()["run_id"] == retry.json()["run_id"]
        # Slack's signed check of a new URL is answered, and starts nothing.
        challenge = json.dumps({"type": "url_verification", "challenge": "abc123"}).encode()
        signed_challenge = {**headers, "X-Slack-Signature": sign("slack", SECRET.encode(), challenge, str(now - 300))}
        answered = await post("chat", challenge, signed_challenge)
        assert (answered.status_code, answered.json()) == (200, {"challenge": "abc123"})
        # No delivery header: the body's digest is the delivery, and says so.
        plain = json.dumps({"city": "Oslo"}).encode()
        signed = {
            "Content-Type": "application/json",
            "X-Timestamp": str(now),
            "X-Signature-256": sign("generic", SECRET.encode(), plain, str(now), ""),  # no id: signed as ""
        }
        one, two = await post("plain", plain, signed), await post("plain", plain, signed)
        assert (one.json()["delivery"], one.json()["started"], two.json()["started"]) == ("body digest", True, False)
    for run_id in (first.json()["run_id"], one.json()["run_id"]):
        await client.get_workflow_handle(run_id).terminate("test over: no worker serves it")


async def test_a_session_hook_and_a_builder_function(client, task_queue, worker_factory, hooks):
    agents = AgentClient(client, task_queue=task_queue)
    async with worker_factory():
        session = await agents.start_session("demo")

        def build(body: Any, headers: Any) -> str:
            return f"Weather in {body['city'].title()}? (asked by {headers.get('x-asker', 'someone')})"

        served = hooks | hooks_from({"to-chat": Hook(secret=SECRET, session=session.id, build=build)})
        async with serve_hooks(agents, served) as url, httpx.AsyncClient(timeout=20) as http:
            body = json.dumps({"city": "tokyo"}).encode()
            headers = generic_headers(SECRET.encode(), body, "chat-1") | {"X-Asker": "ops"}
            first = await http.post(f"{url}/hooks/to-chat", content=body, headers=headers)
            again = await http.post(f"{url}/hooks/to-chat", content=body, headers=headers)
        assert first.status_code == 202 and first.json()["session"] == session.id
        assert (first.json()["started"], again.json()["started"]) == (True, False)
        delivered = await client.get_workflow_handle(first.json()["run_id"], result_type=t.Delivered).result()
        exchange = await session.exchange(delivered.message, wait=60)
        assert exchange.prompt == "Weather in Tokyo? (asked by ops)" and exchange.by == "hook to-chat"
        assert (await session.live()).session.messages == 1  # type: ignore[union-attr]
        await session.end("done")
        await client.get_workflow_handle(session.id).result()
        # The session has ended: a new delivery sends nothing and says why (409); a repeat is a repeat.
        async with serve_hooks(agents, served) as url, httpx.AsyncClient(timeout=20) as http:
            body = json.dumps({"city": "oslo"}).encode()
            late = await http.post(
                f"{url}/hooks/to-chat", content=body, headers=generic_headers(SECRET.encode(), body, "chat-2")
            )
            repeat = await http.post(f"{url}/hooks/to-chat", content=first.request.content, headers=headers)
        says = f"session: run '{session.id}' is not a running session (completed): the message was not sent"
        assert (late.status_code, late.json()) == (409, {"error": says})
        late_id = deliveries.delivery_run_id("hook-to-chat", "chat-2")
        with pytest.raises(RPCError):  # nothing was started for it
            await client.get_workflow_handle(late_id).describe()
        assert repeat.status_code == 202 and repeat.json()["started"] is False


def test_the_hooks_file_is_read_as_yaml_or_json_and_refused_with_one_line(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("GH_SECRET", SECRET)
    yml = tmp_path / "hooks.yaml"
    yml.write_text("gh:\n  agent: triage\n  secret_env: GH_SECRET\n  kind: github\n  input: 'Issue {issue.title}'\n")
    (hook,) = load(yml).values()
    assert (hook.name, hook.kind, hook.key()) == ("gh", "github", SECRET.encode())
    assert SECRET not in repr(hook) and SECRET not in hook.model_dump_json()
    js = tmp_path / "hooks.json"
    js.write_text(json.dumps({"g": {"agent": "demo", "secret": SECRET, "input": "{x}"}}))
    assert load(js)["g"].kind == "generic"
    bad = [
        ({"h": {"agent": "demo", "input": "x"}}, "hook h: give one of secret or secret_env"),
        ({"h": {"agent": "demo", "secret_env": "NOT_SET_ANYWHERE", "input": "x"}}, "NOT_SET_ANYWHERE is not set"),
        ({"h": {"agent": "demo", "secret": SECRET, "input": "x", "kind": "gitlab"}}, "hook h: kind:"),
        ({"h": {"agent": "demo", "secret": SECRET}}, "give input"),
        ({"h": {"agent": "demo", "secret": "short", "input": "x"}}, "shorter than 8"),
        ({"h": {"agent": "demo", "secret": SECRET, "builder": "no_such_module:fn"}}, "cannot import"),
        ({"h": {"agent": "demo", "secret": SECRET, "input": "x", "builder": "m:fn"}}, "one of input (a template) or"),
        ({"h": {"agent": "demo", "session": "s-1", "secret": SECRET, "input": "x"}}, "hook h: agent/session: give one"),
        ({"h": {"secret": SECRET, "input": "x"}}, "hook h: agent/session: give one of agent"),
        ({"h": {"agent": "", "secret": SECRET, "input": "x"}}, "hook h: agent/session: give one of agent"),
        # YAML's unquoted `secret: 12345678`: said so, and the value (a secret) never echoed
        ({"h": {"agent": "demo", "secret": 12345678, "input": "x"}}, "secret: Input should be a valid string, not a"),
        (
            {"h": {"agent": True, "secret": SECRET, "input": "x"}},
            "agent: Input should be a valid string, not true or false: quote it",
        ),
        ({"a b": {"agent": "demo", "secret": SECRET, "input": "x"}}, "a hook's name"),
        (
            {
                "h": {
                    "agent": "demo",
                    "secret": SECRET,
                    "input": "x",
                    "kind": "github",
                    "delivery_header": "X-GitHub-Delivery",
                }
            },
            "hook h: delivery_header: a github hook's headers are not signed",
        ),
        ({"h": {"agent": "demo", "secret": SECRET, "input": "x", "delivery_header": "X Id"}}, "a header's name"),
        ([], "must hold an object"),
        ({"hooks": [{"name": "x", "agent": "demo"}]}, "hook hooks: its settings must be an object (agent: or session:"),
        ({"h": "demo"}, "not text: the file maps each hook's name to its settings"),
        ({"h": {"agent": "demo", "secret": SECRET, "input": "Weather in {city"}}, "hook h: input: a lone '{'"),
        ({"h": {"agent": "demo", "secret": SECRET, "input": 'Data: {"a": 1}'}}, "{{ or }} for a brace"),
    ]
    for raw, says in bad:
        with pytest.raises(HookConfigError, match=None) as err:
            hooks_from(raw)
        assert says in str(err.value) and "\n" not in str(err.value), str(err.value)
        assert "12345678" not in str(err.value)


@pytest.mark.pure
def test_generic_headers_sign_timestamp_id_and_body_as_the_docs_say():
    body, key = b'{"city": "Oslo"}', SECRET.encode()
    headers = generic_headers(key, body, "alert-4711", now=1_700_000_000)
    mac = hmac.new(key, b"1700000000.alert-4711." + body, hashlib.sha256).hexdigest()
    assert headers == {"Content-Type": "application/json", "X-Timestamp": "1700000000",
                       "X-Delivery-Id": "alert-4711", "X-Signature-256": f"sha256={mac}"}  # fmt: skip
    assert "X-Delivery-Id" not in generic_headers(key, body, "", now=1)
    with pytest.raises(ValueError, match=r"no '\.'"):
        generic_headers(key, body, "a.b")


def test_serve_hooks_refuses_a_bad_file_before_connecting(tmp_path: Path, capsys):
    broken = tmp_path / "hooks.yaml"
    broken.write_text("gh: [unclosed\n")
    twice = tmp_path / "twice.yaml"
    twice.write_text("gh:\n  agent: demo\n  agent: other\n")  # the last was kept without a word
    twice_json = tmp_path / "twice.json"
    twice_json.write_text('{"gh": {"agent": "demo"}, "gh": {"agent": "other"}}')
    for argv, says in [
        (["serve-hooks", "--config", str(tmp_path / "missing.yaml")], "cannot read"),
        (["serve-hooks", "--config", str(broken)], "is not valid YAML"),
        (["serve-hooks", "--config", str(twice)], "is not valid YAML at line 3: 'agent' is given twice"),
        (["serve-hooks", "--config", str(twice_json)], "is not valid JSON: 'gh' is given twice in one object"),
        (["serve-hooks", "--config", str(broken), "--port", "0"], "--port must be 1-65535"),
        (["serve-hooks", "--config", str(broken), "--max-body", "10"], "--max-body must be 1024-"),
    ]:
        with pytest.raises(SystemExit) as exit:
            cli_main.main(argv)
        err = capsys.readouterr().err
        assert exit.value.code == 2 and says in err and err.count("\n") == 1, err


async def test_client_py_serve_hooks_serves_the_file_it_is_given(temporal_server, task_queue, client, tmp_path):
    config = tmp_path / "hooks.yaml"
    config.write_text(
        "issues:\n  agent: demo\n  secret_env: TEST_HOOK_SECRET\n  kind: github\n  input: '{issue.title}'\n"
    )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": temporal_server.target,
        "TEMPORAL_NAMESPACE": "default",
        "AGENT_TASK_QUEUE": task_queue,
        "TEST_HOOK_SECRET": SECRET,
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "client.py", "serve-hooks", "--port", str(port), "--config", str(config),
        cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        head = f"hook issues: POST http://127.0.0.1:{port}/hooks/issues (github-signed) -> agent demo"
        # No worker serves 'demo' on this test's queue: the line says what its runs would wait for.
        assert (
            line.strip() == f"{head} (! no worker serves agent 'demo' now: nothing has polled task queue "
            f"{task_queue}@demo lately; its runs wait for one (start a worker with --tools for that agent))"
        ), line
        body = json.dumps({"issue": {"title": "Weather in Rome?"}}).encode()
        async with httpx.AsyncClient(timeout=20) as http:
            for _ in range(100):  # the server listens a moment after it prints
                with contextlib.suppress(httpx.ConnectError):
                    answer = await http.post(
                        f"http://127.0.0.1:{port}/hooks/issues", content=body, headers=github(body, "cli-1")
                    )
                    break
                await asyncio.sleep(0.1)
        assert answer.status_code == 202 and answer.json()["started"] is True, answer.text
        await client.get_workflow_handle(answer.json()["run_id"]).terminate("test over: no worker serves it")
    finally:
        proc.terminate()
        _, err = await asyncio.wait_for(proc.communicate(), 20)
    assert SECRET not in err.decode()


async def test_a_captured_request_resent_with_a_forged_delivery_id_starts_no_second_run(client, task_queue, hooks):
    """The replay of issue 35's review: one signed request, captured, resent under new delivery
    ids. GitHub's id is not signed, so its run is keyed on the body: the same run, refused as a
    repeat. A generic request signs its id: a forged one does not match (401)."""
    agents = AgentClient(client, task_queue=task_queue)
    body = json.dumps({"issue": {"number": 35, "title": "Weather in Lima?"}, "city": "Lima", "at": time.time_ns()})
    body_bytes, original = body.encode(), f"orig-{time.monotonic_ns()}"
    captured = {
        "issues": (github(body_bytes, original), "X-GitHub-Delivery"),
        "plain": (generic(body_bytes, original, header="X-Request-Id"), "X-Request-Id"),
    }
    async with serve_hooks(agents, hooks) as url, httpx.AsyncClient(timeout=20) as http:
        for name, (headers, id_header) in captured.items():
            first = await http.post(f"{url}/hooks/{name}", content=body_bytes, headers=headers)
            repeat = await http.post(f"{url}/hooks/{name}", content=body_bytes, headers=headers)
            assert (first.status_code, first.json()["started"], repeat.json()["started"]) == (202, True, False)
            for forged in ("forged-1", "forged-2"):
                again = await http.post(
                    f"{url}/hooks/{name}", content=body_bytes, headers={**headers, id_header: forged}
                )
                if name == "issues":
                    assert again.status_code == 202, again.text
                    assert (again.json()["run_id"], again.json()["started"]) == (first.json()["run_id"], False)
                else:
                    assert again.status_code == 401, again.text
                    assert again.json()["error"] == (
                        "the X-Signature-256 signature does not match {timestamp}.{delivery id}.{body}"
                    )
                assert not await exists(client, id_run(name, forged))
            await client.get_workflow_handle(first.json()["run_id"]).terminate("test over: no worker serves it")


async def test_a_generic_request_stale_future_or_signed_for_another_id_is_refused(client, task_queue, hooks):
    agents = AgentClient(client, task_queue=task_queue)
    key, now = SECRET.encode(), int(time.time())  # the ingress's clock, held still
    body = json.dumps({"city": "Quito", "at": time.time_ns()}).encode()
    ok = generic_headers(key, body, "gen-ok", now=now - 300)  # 5 minutes old: still fresh

    served = hooks_from({"gen": {"agent": "demo", "secret": SECRET, "input": "Weather in {city}?"}})
    async with (
        serve_hooks(agents, served, clock=lambda: now) as url,
        httpx.AsyncClient(timeout=20) as http,
    ):
        old_scheme = {
            "Content-Type": "application/json",
            "X-Delivery-Id": "gen-6",
            "X-Signature-256": sign("github", key, body),
        }  # the body alone, as before issue 35
        stale = "the request is stale: its X-Timestamp is more than 5 minutes from now"
        cases = [
            ("stale", generic(body, "gen-1", stamp=now - 301), 401, stale),
            ("future", generic(body, "gen-2", stamp=now + 301), 401, stale),
            ("another id", generic(body, "gen-3", stamp=now, signed_id="gen-other"), 401,
             "the X-Signature-256 signature does not match {timestamp}.{delivery id}.{body}"),
            ("no timestamp", {k: v for k, v in generic(body, "gen-4", stamp=now).items() if k != "X-Timestamp"}, 401,
             "the request has no valid X-Timestamp header (Unix seconds)"),
            ("dotted id", generic(body, "gen.5", stamp=now), 400,
             "the X-Delivery-Id header is not a delivery id (1-1000 printable characters, no '.')"),
            ("old scheme", old_scheme | {"X-Timestamp": str(now)}, 401,
             "the X-Signature-256 signature does not match {timestamp}.{delivery id}.{body}"),
        ]  # fmt: skip
        for label, headers, status, says in cases:
            response = await http.post(f"{url}/hooks/gen", content=body, headers=headers)
            assert (response.status_code, response.json()) == (status, {"error": says}), (label, response.text)
        for delivery in ("gen-1", "gen-2", "gen-3", "gen-other", "gen-4", "gen.5", "gen-6"):
            assert not await exists(client, id_run("gen", delivery)), delivery
        assert not await exists(client, digest_run("gen", body))
        fresh = await http.post(f"{url}/hooks/gen", content=body, headers=ok)
        assert (fresh.status_code, fresh.json()["delivery"]) == (202, "header X-Delivery-Id"), fresh.text
        assert fresh.json()["run_id"] == id_run("gen", "gen-ok") and fresh.json()["started"] is True
    await client.get_workflow_handle(fresh.json()["run_id"]).terminate("test over: no worker serves it")
