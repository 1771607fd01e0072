"""Encrypted payloads (durable_agent_runner/payloads/codec.py): the codec alone, inside the data converter (with the
payload store and failures), on wire captures, behind the codec server, and on a real run that
`temporal workflow show` can only print as ciphertext."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict
from temporalio.api.common.v1 import Payload, WorkflowExecution
from temporalio.api.failure.v1 import Failure
from temporalio.api.query.v1 import WorkflowQuery
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.api.workflowservice.v1 import QueryWorkflowRequest
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.worker import Replayer

from durable_agent_runner.activities.capture import CaptureStore
from durable_agent_runner.activities.model import new_http_client
from durable_agent_runner.cli.codec_server import CodecServer
from durable_agent_runner.config.connection import ENCODED_FAILURE, MAX_FAILURE_TEXT, connect, make_data_converter
from durable_agent_runner.payloads.codec import (
    ENCODING,
    KEY_ID,
    CodecConfigError,
    DecryptError,
    EncryptionCodec,
    Keyring,
)
from durable_agent_runner.worker.plugin import build_worker
from durable_agent_runner.workflows import AgentRun
from durable_agent_runner.workflows import types as t
from tests.devserver import temporal_cli
from tests.helpers import calls, script, start
from tests.test_approvals import decide, pending, update

ROOT = Path(__file__).resolve().parent.parent
K1 = base64.b64encode(bytes(range(32))).decode()
K2 = base64.b64encode(bytes(range(100, 116))).decode()
KEYS = f"k2:{K2},k1:{K1}"
UI_ORIGIN = "http://localhost:8233"


def payload(text: str) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(text).encode())


def codec(spec: str = KEYS) -> EncryptionCodec:
    return EncryptionCodec(Keyring.parse(spec))


# --------------------------------------------------------------------------------- the codec


async def test_round_trip_seals_the_whole_payload_under_the_first_key():
    plain = payload("the secret prompt")
    [sealed] = await codec().encode([plain])
    assert sealed.metadata["encoding"] == ENCODING and sealed.metadata[KEY_ID] == b"k2"
    assert b"secret" not in sealed.SerializeToString() and b"json/plain" not in sealed.SerializeToString()
    assert await codec().decode([sealed]) == [plain]
    [again] = await codec().encode([plain])
    assert again.data != sealed.data  # a fresh nonce every time


async def test_rotation_old_payloads_still_decrypt():
    [old] = await codec(f"k1:{K1}").encode([payload("written before the rotation")])
    rotated = codec(KEYS)
    assert await rotated.decode([old]) == [payload("written before the rotation")]
    [new] = await rotated.encode([payload("after")])
    assert new.metadata[KEY_ID] == b"k2"


async def test_an_unknown_key_id_is_named():
    [sealed] = await codec().encode([payload("x")])
    with pytest.raises(DecryptError, match=r"key id 'k2', which is not in PAYLOAD_CODEC_KEYS \(known: k1\)"):
        await codec(f"k1:{K1}").decode([sealed])


async def test_tampering_is_detected():
    [sealed] = await codec().encode([payload("pay alice 10")])
    flipped = Payload()
    flipped.CopyFrom(sealed)
    flipped.data = sealed.data[:-1] + bytes([sealed.data[-1] ^ 1])
    with pytest.raises(DecryptError, match="fails authentication"):
        await codec().decode([flipped])
    relabelled = Payload()  # the key id is bound into the seal: another known key cannot claim it
    relabelled.CopyFrom(sealed)
    relabelled.metadata[KEY_ID] = b"k1"
    with pytest.raises(DecryptError, match="'k1' fails authentication"):
        await codec().decode([relabelled])


async def test_payloads_it_did_not_encrypt_pass_through():
    plain = payload("from before the codec")
    assert await codec().decode([plain]) == [plain]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (f"{K1}", "item 1 is not ID:BASE64KEY"),
        (f"k1:{K1},oops", "item 2 is not ID:BASE64KEY"),
        (f"k 1:{K1}", "item 1 is not ID:BASE64KEY"),
        (f"{base64.b64encode(b'y' * 24).decode()}:k1", "item 1 is not ID:BASE64KEY"),  # the wrong way round
        (f"k1:{K1},k1:{K2}", "key id 'k1' is listed twice"),
        ("k1:not*base64!", "key 'k1' is not valid base64"),
        (f"k1:{base64.b64encode(b'0123456789').decode()}", "key 'k1' is 10 bytes; AES needs 16, 24 or 32"),
    ],
)
def test_bad_keys_are_one_clear_line_that_never_shows_a_key(spec: str, message: str):
    with pytest.raises(CodecConfigError) as err:
        Keyring.parse(spec)
    text = str(err.value)
    assert message in text and "\n" not in text
    assert K1 not in text and K2 not in text and "not*base64" not in text and "eXl5" not in text


def test_a_keyring_never_shows_its_keys():
    ring = Keyring.parse(KEYS)
    assert repr(ring) == "Keyring(current='k2', ids=['k2', 'k1'])"
    assert K1 not in repr(vars(ring)) and K2 not in repr(vars(ring))


# ------------------------------------------------------------------ inside the data converter


def env_with(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"PAYLOAD_CODEC_KEYS": KEYS, "PAYLOAD_STORE_DIR": str(tmp_path / "store"), **extra}


async def test_encrypt_then_offload_the_store_holds_only_ciphertext(tmp_path: Path):
    converter = make_data_converter(env_with(tmp_path, PAYLOAD_STORE_THRESHOLD="1024"))
    big = "confidential-" * 1000
    [reference] = await converter.encode([big])
    assert reference.metadata["encoding"] != ENCODING  # a reference: a hash, nothing of the content
    assert b"confidential" not in reference.SerializeToString()
    [stored] = [f for f in (tmp_path / "store").rglob("*") if f.is_file()]
    raw = stored.read_bytes()
    assert b"confidential" not in raw
    assert Payload.FromString(raw).metadata["encoding"] == ENCODING
    assert await converter.decode([reference], [str]) == [big]
    small = await converter.encode(["confidential but small"])
    assert small[0].metadata["encoding"] == ENCODING


async def test_failure_messages_and_stacks_are_encrypted_after_the_cut(tmp_path: Path):
    converter = make_data_converter(env_with(tmp_path))
    try:
        try:
            raise ValueError("inner secret " + "x" * (MAX_FAILURE_TEXT + 10))
        except ValueError as inner:
            raise ApplicationError("outer secret", "detail secret", type="ToolFailed") from inner
    except ApplicationError as err:
        failure = Failure()
        await converter.encode_failure(err, failure)
    wire = failure.SerializeToString()
    assert b"secret" not in wire and b"Traceback" not in wire and b"test_codec" not in wire
    assert failure.message == ENCODED_FAILURE and failure.cause.message == ENCODED_FAILURE
    assert failure.application_failure_info.type == "ToolFailed"  # the type stays readable
    back = await converter.decode_failure(failure)
    assert isinstance(back, ApplicationError) and back.message == "outer secret"
    assert back.details == ("detail secret",)
    assert isinstance(back.cause, ApplicationError)
    assert back.cause.message.startswith("inner secret xxx") and back.cause.message.endswith("characters cut]")
    assert len(back.cause.message) < MAX_FAILURE_TEXT + 100
    # Re-raised (its proto holds the decoded text), it is encrypted again, every level of it.
    again = Failure()
    await converter.encode_failure(back, again)
    assert b"secret" not in again.SerializeToString()


async def test_without_keys_failures_stay_readable(tmp_path: Path):
    converter = make_data_converter({"PAYLOAD_STORE_DIR": str(tmp_path)})
    failure = Failure()
    await converter.encode_failure(ApplicationError("plain " + "y" * (MAX_FAILURE_TEXT + 5)), failure)
    assert failure.message.startswith("plain yyy") and not failure.HasField("encoded_attributes")
    assert len(failure.message) < MAX_FAILURE_TEXT + 100


def test_wire_captures_are_encrypted_and_still_read(tmp_path: Path):
    record = {"request": {"messages": [{"role": "user", "content": "capture secret"}]}, "response": "ok"}
    sealed = CaptureStore(tmp_path, Keyring.parse(KEYS))
    key = sealed.put(record)
    [path] = tmp_path.iterdir()
    assert path.name == f"{key}.enc" and b"secret" not in path.read_bytes()
    assert sealed.get(key) == record
    assert CaptureStore(tmp_path, Keyring.parse(f"k9:{K1},k2:{K2}")).get(key) == record  # after a rotation
    with pytest.raises(ValueError, match="is encrypted: set PAYLOAD_CODEC_KEYS"):
        CaptureStore(tmp_path, None).get(key)
    plain_key = CaptureStore(tmp_path, None).put(record)  # written before the codec: still read
    assert sealed.get(plain_key) == record


# -------------------------------------------------------------------------- the codec server


@pytest.fixture
def codec_server() -> Iterator[CodecServer]:
    server = CodecServer(("127.0.0.1", 0), codec(), [UI_ORIGIN])
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


def http(
    server: CodecServer, method: str, path: str, body: Any = None, origin: str | None = UI_ORIGIN
) -> tuple[int, dict[str, str], Any]:
    headers = {"Content-Type": "application/json", "X-Namespace": "default"}
    if origin:
        headers["Origin"] = origin
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(server.url + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            raw = response.read()
            return response.status, dict(response.headers), json.loads(raw) if raw else None
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), json.loads(err.read() or b"null")


def as_json(*payloads: Payload) -> dict[str, Any]:
    """What the Web UI posts: protobuf JSON, base64 metadata values and data."""
    return {"payloads": [MessageToDict(p) for p in payloads]}


def texts(body: dict[str, Any]) -> list[Any]:
    return [json.loads(base64.b64decode(p["data"])) for p in body["payloads"]]


async def test_the_codec_server_decodes_what_the_ui_posts(codec_server: CodecServer):
    sealed = await codec().encode([payload("tool result: sunny"), payload("second")])
    plain = payload("not encrypted")
    status, headers, body = http(codec_server, "POST", "/decode?preserveStorageRefs=true", as_json(*sealed, plain))
    assert status == 200, body
    assert texts(body) == ["tool result: sunny", "second", "not encrypted"]
    assert base64.b64decode(body["payloads"][0]["metadata"]["encoding"]) == b"json/plain"
    assert headers["Access-Control-Allow-Origin"] == UI_ORIGIN
    assert headers["Access-Control-Allow-Credentials"] == "true"


async def test_the_codec_server_encodes_and_its_output_decodes(codec_server: CodecServer):
    status, _, body = http(codec_server, "POST", "/encode", as_json(payload("from the UI")))
    assert status == 200
    assert base64.b64decode(body["payloads"][0]["metadata"]["encoding"]) == ENCODING
    _, _, back = http(codec_server, "POST", "/decode", body)
    assert texts(back) == ["from the UI"]


def test_the_codec_server_answers_the_browsers_preflight(codec_server: CodecServer):
    status, headers, _ = http(codec_server, "OPTIONS", "/decode?preserveStorageRefs=true")
    assert status in (200, 204)
    assert headers["Access-Control-Allow-Origin"] == UI_ORIGIN
    assert "POST" in headers["Access-Control-Allow-Methods"]
    allowed = {h.strip().lower() for h in headers["Access-Control-Allow-Headers"].split(",")}
    assert {"content-type", "x-namespace"} <= allowed
    assert headers["Access-Control-Allow-Credentials"] == "true"
    _, other, _ = http(codec_server, "OPTIONS", "/decode", origin="http://evil.example")
    assert "Access-Control-Allow-Origin" not in other


async def test_the_codec_server_names_an_unknown_key_and_refuses_other_paths(codec_server: CodecServer):
    [foreign] = await codec(f"old:{K1}").encode([payload("x")])
    status, _, body = http(codec_server, "POST", "/decode", as_json(foreign))
    assert status == 400 and "key id 'old'" in body["error"]
    assert http(codec_server, "POST", "/decrypt", as_json(foreign))[0] == 404
    assert http(codec_server, "POST", "/decode", {"payloads": "nope"})[0] == 400


def test_the_codec_server_answers_a_hostile_body_with_a_400(codec_server: CodecServer):
    """A body nested 10,000 deep, or not UTF-8, is one clear 400: no traceback in the server."""
    for raw in (b'{"payloads": ' + b"[" * 10_000 + b"]" * 10_000 + b"}", b"\xff\xfe{}", b"[]"):
        request = urllib.request.Request(
            codec_server.url + "/decode", data=raw, method="POST", headers={"Content-Type": "application/json"}
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 400
        assert json.loads(refused.value.read())["error"].startswith('expected {"payloads": [...]}')
    assert http(codec_server, "POST", "/decode", {"payloads": []})[0] == 200  # and it still serves


def test_the_codec_server_refuses_a_bad_length_and_drops_a_body_that_never_comes(
    codec_server: CodecServer, monkeypatch: pytest.MonkeyPatch
):
    import socket
    from http.client import HTTPConnection

    for length in ("-5", "lots"):
        conn = HTTPConnection(codec_server.server_address[0], codec_server.server_address[1], timeout=10)
        conn.putrequest("POST", "/decode")
        conn.putheader("Content-Length", length)
        conn.endheaders()
        response = conn.getresponse()
        assert response.status == 400 and "Content-Length" in json.loads(response.read())["error"], length
        conn.close()
    # A client that promises a body and sends none is dropped after the handler's timeout.
    monkeypatch.setattr("durable_agent_runner.cli.codec_server._Handler.timeout", 0.5)
    with socket.create_connection(codec_server.server_address[:2], timeout=10) as silent:
        silent.sendall(b"POST /decode HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
        started = time.monotonic()
        assert silent.recv(1024) == b""  # closed by the server, not hanging
        assert time.monotonic() - started < 5
    assert http(codec_server, "POST", "/encode", as_json(payload("still serving")))[0] == 200


TOKEN = "codec-token-5e8a1f0c7b2d"


def test_with_codec_token_every_post_must_carry_it():
    """It holds the keys: without the token it decrypts for no one (401), and still answers the
    browser's preflight, which carries no credentials."""
    server = CodecServer(("127.0.0.1", 0), codec(), [UI_ORIGIN], token=TOKEN)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        body = json.dumps(as_json(payload("secret"))).encode()
        for given in (None, "Bearer nope", f"Token {TOKEN}", f"Bearer {TOKEN}x"):
            headers = {"Content-Type": "application/json"} | ({"Authorization": given} if given else {})
            request = urllib.request.Request(server.url + "/encode", data=body, method="POST", headers=headers)
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=10)
            assert refused.value.code == 401, given
            assert json.loads(refused.value.read()) == {"error": "Authorization: Bearer CODEC_TOKEN is required"}
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"}
        request = urllib.request.Request(server.url + "/encode", data=body, method="POST", headers=headers)
        with urllib.request.urlopen(request, timeout=10) as answered:
            assert answered.status == 200
        assert http(server, "OPTIONS", "/decode")[0] == 204
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.parametrize(("host", "code"), [("0.0.0.0", 2), ("127.0.0.1", 0)])
def test_the_codec_server_refuses_to_listen_beyond_this_machine_without_a_token(
    host: str, code: int, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: `--host 0.0.0.0` served every payload's plaintext to whoever reached it."""
    import argparse

    from durable_agent_runner.cli import codec_server as cs

    monkeypatch.setenv("PAYLOAD_CODEC_KEYS", KEYS)
    monkeypatch.delenv("CODEC_TOKEN", raising=False)
    monkeypatch.setattr(cs.CodecServer, "serve_forever", lambda self: None)  # started, then stopped at once
    args = argparse.Namespace(host=host, port=0, origin=None)
    assert cs.cmd_codec_server(args) == code
    err = capsys.readouterr().err
    if code:
        assert err.startswith(f"client.py: error: refusing to listen on {host} without CODEC_TOKEN: anyone who")
    monkeypatch.setenv("CODEC_TOKEN", TOKEN)
    assert cs.cmd_codec_server(args) == 0
    assert "every POST needs Authorization: Bearer CODEC_TOKEN" in capsys.readouterr().out


# --------------------------------------------------------------------------- startup errors


@pytest.mark.parametrize(
    "command",
    [
        ["worker.py"],
        ["client.py", "status", "some-run"],
        ["-m", "durable_agent_runner.cli.codec_server", "--port", "0"],
    ],
)
def test_bad_keys_stop_each_command_with_one_line(command: list[str], tmp_path: Path):
    bad = f"k1:{base64.b64encode(b'short').decode()}"
    env = {
        **os.environ,
        "PAYLOAD_CODEC_KEYS": bad,
        "TEMPORAL_ADDRESS": "127.0.0.1:1",
        "PAYLOAD_STORE_DIR": str(tmp_path),
    }
    done = subprocess.run([sys.executable, *command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "PAYLOAD_CODEC_KEYS: key 'k1' is 5 bytes" in lines[0], done.stderr
    assert "Traceback" not in done.stderr and bad.split(":")[1] not in done.stderr


# --------------------------------------------------------------------------- on a real server


@pytest.fixture
async def sealed_client(temporal_server, tmp_path: Path) -> Client:
    return await connect(temporal_server.target, "default", converter=make_data_converter(env_with(tmp_path)))


async def encrypted_run(sealed_client: Client, task_queue: str, registry, settings, prompt: str) -> str:
    run_id = f"sealed-{uuid.uuid4().hex[:12]}"  # client.py's ids carry the prompt's first words: not here
    async with (
        new_http_client(settings) as http_client,
        build_worker(sealed_client, task_queue, registry, settings, http_client),
    ):
        handle = await sealed_client.start_workflow(
            t.WORKFLOW_NAME,
            t.RunInput(prompt=prompt, agent="weather_routed"),
            id=run_id,
            task_queue=task_queue,
            result_type=t.RunResult,
            memo={"note": "memo secret"},
            static_summary="summary secret",
        )
        async with asyncio.timeout(60):
            result = await handle.result()
    assert "sunny" in result.output.lower()
    return run_id


def workflow_show(target: str, run_id: str, *output: str) -> str:
    done = subprocess.run(
        [temporal_cli(), "workflow", "show", "-w", run_id, "--address", target, "-n", "default", *output],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def payload_bytes(node: Any) -> list[bytes]:
    """Every payload's data in `temporal workflow show -o json`, base64-decoded (the JSON form
    hides plaintext too, so that alone would prove nothing)."""
    if isinstance(node, list):
        return [b for item in node for b in payload_bytes(item)]
    if not isinstance(node, dict):
        return []
    if isinstance(node.get("metadata"), dict) and isinstance(node.get("data", ""), str):
        return [base64.b64decode(node.get("data", ""))]
    return [b for value in node.values() for b in payload_bytes(value)]


async def test_a_run_with_the_codec_shows_only_ciphertext(
    sealed_client, temporal_server, task_queue, registry, settings, client, codec_server
):
    prompt = "zanzibar-prompt: what's the weather in Tokyo?"
    run_id = await encrypted_run(sealed_client, task_queue, registry, settings, prompt)
    shown = workflow_show(temporal_server.target, run_id, "-o", "json")
    text = workflow_show(temporal_server.target, run_id)  # the CLI's default view
    data = b"\n".join(payload_bytes(json.loads(shown)))
    assert b'"completed"' in data  # the search attributes cannot be encrypted: they are how runs are found
    for secret in ("zanzibar", "sunny", "Tokyo", "memo secret", "summary secret", "get_weather("):
        assert secret.encode() not in data and secret not in text and secret not in shown, secret
    assert base64.b64encode(ENCODING).decode() in shown
    assert "binary/encrypted" in text or base64.b64encode(ENCODING).decode() in text

    # The client with the keys reads everything back: result, memo, summaries, queries.
    handle = sealed_client.get_workflow_handle(run_id)
    desc = await handle.describe()
    assert await desc.memo_value("note") == "memo secret"
    assert await desc.static_summary() == "summary secret"
    history = await handle.fetch_history()
    await Replayer(workflows=[AgentRun], data_converter=sealed_client.data_converter).replay_workflow(history)

    # What the Web UI would post from this history, the codec server decodes.
    events = json.loads(shown)["events"]
    results = [
        e["activityTaskCompletedEventAttributes"]["result"]
        for e in events
        if "activityTaskCompletedEventAttributes" in e and "result" in e["activityTaskCompletedEventAttributes"]
    ]
    posted = {"payloads": [p for r in results for p in r["payloads"]]}
    status, _, body = http(codec_server, "POST", "/decode?preserveStorageRefs=true", posted)
    assert status == 200, body
    decoded = " ".join(base64.b64decode(p["data"]).decode() for p in body["payloads"])
    assert "sunny" in decoded and "Tokyo" in decoded
    # The CLI decodes through it as well (no Origin header: no CORS involved).
    through = workflow_show(temporal_server.target, run_id, "--codec-endpoint", codec_server.url)
    assert "Tokyo: sunny" in through and "json/plain" in through

    # A client without the keys gets no plaintext, only an error.
    with pytest.raises(Exception, match=r"binary/encrypted|encrypt"):
        await client.get_workflow_handle(run_id, result_type=t.RunResult).result()


async def test_approvals_and_a_failed_runs_message_are_encrypted_too(
    sealed_client, temporal_server, task_queue, registry, settings, llm, counter_file
):
    model = script(llm, calls(("send", {"label": "quartz-label"})), {"content": "sent it"})
    async with (
        new_http_client(settings) as http_client,
        build_worker(sealed_client, task_queue, registry, settings, http_client),
    ):
        approved = await start(sealed_client, task_queue, "send it", agent="guarded", model=model)
        (waiting,) = await pending(approved)
        # The current details the Web UI shows (a query the SDK answers) leave the worker sealed.
        metadata = await sealed_client.workflow_service.query_workflow(
            QueryWorkflowRequest(
                namespace="default",
                execution=WorkflowExecution(workflow_id=approved.id),
                query=WorkflowQuery(query_type="__temporal_workflow_metadata"),
            )
        )
        [sealed_details] = metadata.query_result.payloads
        assert sealed_details.metadata["encoding"] == ENCODING and b"quartz" not in sealed_details.data
        [details] = await sealed_client.data_converter.decode([sealed_details], [WorkflowMetadata])
        assert "quartz-label" in details.current_details
        await update(approved, decide(waiting.call_id, by="quartz-approver", reason="quartz-reason"))
        assert (await approved.result()).output == "sent it"
        failing = await start(sealed_client, task_queue, "weather in Tokyo", max_turns=1)
        with pytest.raises(WorkflowFailureError) as failed:
            await failing.result()
    assert "max_turns (1) exceeded" in str(failed.value.cause)  # the keys read the message back

    shown = workflow_show(temporal_server.target, approved.id, "-o", "json")
    data = b"\n".join(payload_bytes(json.loads(shown)))
    assert "workflowExecutionUpdateAcceptedEventAttributes" in shown  # the update is in history, sealed
    for secret in ("quartz", "sent it"):
        assert secret.encode() not in data and secret not in shown, secret
    shown = workflow_show(temporal_server.target, failing.id, "-o", "json")
    assert "max_turns" not in shown and "get_weather" not in shown
    assert ENCODED_FAILURE in shown and "Traceback" not in shown


def test_an_origin_is_what_a_browser_sends_or_refused() -> None:
    """Before: `--origin ftp://x` was taken, and `--origin https://ui.example.com/temporal` (the
    UI's address behind a proxy) never matched the browser's Origin header: CORS failed unsaid."""
    import argparse

    from durable_agent_runner.cli.codec_server import origin

    assert origin("https://ui.example.com/temporal") == "https://ui.example.com"
    assert origin("http://localhost:8233/") == "http://localhost:8233"
    for bad in ("ftp://x", "localhost:8233", "http://a b"):
        with pytest.raises(argparse.ArgumentTypeError, match=r"is not an origin: http\(s\)://HOST\[:PORT\]"):
            origin(bad)
