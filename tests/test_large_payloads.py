"""Payloads past Temporal's limits (2 MB a payload, 4 MB a gRPC message) never wedge a run: they
go to the payload store and history keeps a reference; failure texts, which cannot move, are cut.

Every run here must end within RUN_TIMEOUT, and its history must replay."""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import json
import os
import re
import sys
from asyncio.subprocess import PIPE
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.contrib.aws.s3driver import S3StorageDriver, S3StorageDriverClient
from temporalio.converter import StorageDriverClaim, StorageDriverRetrieveContext, StorageDriverStoreContext

from durable_agent_runner import Registry
from durable_agent_runner.config.connection import DATA_CONVERTER, MAX_FAILURE_TEXT
from durable_agent_runner.payloads.store import (
    DEFAULT_THRESHOLD,
    LazyS3Client,
    LocalDirectoryDriver,
    PayloadStoreError,
    external_storage,
)
from durable_agent_runner.workflows import types as t
from tests.fixtures.large_payload_tools import blob_text
from tests.helpers import calls, context_queries, replay, script, start, transcript
from tests.test_durability import effects

ROOT = Path(__file__).resolve().parent.parent
MB = 1024 * 1024
RUN_TIMEOUT = 90  # seconds: a wedged run fails the test instead of hanging it
SMALL_HISTORY = 64 * 1024  # bytes: a run's whole history, however big its payloads


@pytest.fixture
def large_registry() -> Registry:
    return Registry.from_modules(["tests.fixtures.large_payload_tools"])


async def finish(handle: WorkflowHandle[Any, t.RunResult]) -> t.RunResult:
    async with asyncio.timeout(RUN_TIMEOUT):
        return await handle.result()


async def history_bytes(handle: WorkflowHandle[Any, Any]) -> int:
    return sum(e.ByteSize() for e in (await handle.fetch_history()).events)


async def stored_bytes(handle: WorkflowHandle[Any, Any]) -> int:
    """What the server counts as kept outside this execution's history."""
    return (await handle.describe()).raw_description.workflow_execution_info.external_payload_size_bytes


def tool_contents(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["body"]["messages"] if m["role"] == "tool"]


async def test_a_3mb_tool_result_leaves_history_and_reaches_the_model(
    client, task_queue, worker_factory, llm, large_registry, counter_file
):
    size = 3 * MB
    model = script(llm, calls(("blob", {"label": "big", "size": size})), {"content": "read it"})
    async with worker_factory(registry=large_registry):
        handle = await start(client, task_queue, "fetch", agent="bulky", model=model)
        result = await finish(handle)
        await replay(handle)
    assert result.output == "read it"
    assert tool_contents(llm.requests()[-1]) == [blob_text("big", size)]
    assert effects(counter_file) == Counter({"blob:big": 1})
    kept, stored = await history_bytes(handle), await stored_bytes(handle)
    print(f"\na 3 MiB tool result: history {kept:,} B, stored outside it {stored:,} B")
    assert kept < SMALL_HISTORY and stored >= size


async def test_a_5mb_tool_result_passes_the_4mb_message_limit(
    client, task_queue, worker_factory, llm, large_registry, counter_file
):
    size = 5 * MB
    model = script(llm, calls(("blob", {"label": "huge", "size": size})), {"content": "read it"})
    async with worker_factory(registry=large_registry):
        handle = await start(client, task_queue, "fetch", agent="bulky", model=model)
        result = await finish(handle)
        await replay(handle)
        # A worker that did not run the tool reads the transcript with the context query, one
        # page per message past 1 MB: this page is one 5 MB message, stored like the rest.
        query = t.ModelContextQuery(upto=3, start=2)
        page = await handle.query(t.MODEL_CONTEXT_QUERY, query, result_type=t.ModelContext)
    assert result.output == "read it"
    assert tool_contents(llm.requests()[-1]) == [blob_text("huge", size)]
    assert [m.content for m in page.messages] == [blob_text("huge", size)]
    assert effects(counter_file) == Counter({"blob:huge": 1})
    assert await history_bytes(handle) < SMALL_HISTORY


async def test_a_3mb_model_reply_is_the_answer(client, task_queue, worker_factory, llm, large_registry):
    answer = blob_text("answer", 3 * MB)
    async with worker_factory(registry=large_registry):
        handle = await start(client, task_queue, "write a lot", agent="bulky", model=script(llm, {"content": answer}))
        result = await finish(handle)
        messages = await transcript(handle)  # a 3 MB query result
        await replay(handle)
    assert result.output == answer and messages[-1].content == answer
    assert await history_bytes(handle) < SMALL_HISTORY


async def test_a_3mb_prompt_reaches_the_model(client, task_queue, worker_factory, llm, large_registry, monkeypatch):
    prompt = blob_text("prompt", 3 * MB)
    queried = context_queries(monkeypatch)  # a prompt this long is not copied into the resolve
    async with worker_factory(registry=large_registry):
        handle = await start(client, task_queue, prompt, agent="bulky", model=script(llm, {"content": "ok"}))
        result = await finish(handle)
        await replay(handle)
    assert result.output == "ok"
    (request,) = llm.requests()
    assert [m["content"] for m in request["body"]["messages"] if m["role"] == "user"] == [prompt]
    assert await history_bytes(handle) < SMALL_HISTORY
    assert queried == [1]


async def test_client_py_in_its_own_process_shares_the_store(
    client, temporal_server, task_queue, worker_factory, llm, large_registry
):
    """client.py stores the 3 MB prompt the worker reads, and reads the 3 MB answer it stored."""
    prompt, answer = blob_text("prompt", 3 * MB), blob_text("answer", 3 * MB)
    model = script(llm, {"content": answer})
    env = {**os.environ, "TEMPORAL_ADDRESS": temporal_server.target, "AGENT_TASK_QUEUE": task_queue}
    async with worker_factory(registry=large_registry):
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "client.py", "run", "--wait", "--json", "--agent", "bulky", "--model", model, "-",
            cwd=ROOT, env=env, stdin=PIPE, stdout=PIPE, stderr=PIPE,
        )  # fmt: skip
        async with asyncio.timeout(RUN_TIMEOUT):
            out, err = await proc.communicate(prompt.encode())
    assert proc.returncode == 0, (out.decode()[:2000], err.decode())
    assert json.loads(out)["output"] == answer
    requests = llm.requests()  # one, or more when a loaded machine had an attempt retried
    assert requests and all(
        [m["content"] for m in r["body"]["messages"] if m["role"] == "user"] == [prompt] for r in requests
    )


async def executions(client: Client, workflow_id: str, first_run_id: str) -> list[str]:
    """The run ids of the chain, oldest first, followed through each continue-as-new event."""
    runs = [first_run_id]
    while True:
        last = (await client.get_workflow_handle(workflow_id, run_id=runs[-1]).fetch_history()).events[-1]
        if last.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            return runs
        runs.append(last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id)


async def test_continue_as_new_carries_a_transcript_past_2mb(
    client, task_queue, worker_factory, llm, large_registry, counter_file
):
    size = 1_200_000  # two of them: the carried transcript is about 2.4 MB
    model = script(
        llm,
        calls(("blob", {"label": "first", "size": size})),
        calls(("blob", {"label": "second", "size": size})),
        {"content": "relayed"},
    )
    async with worker_factory(registry=large_registry):
        first = await start(client, task_queue, "relay", agent="bulky_relay", model=model)
        handle = client.get_workflow_handle(first.id, result_type=t.RunResult)
        result = await finish(handle)
        runs = await executions(client, first.id, first.result_run_id or "")
        for run_id in runs:
            await replay(client.get_workflow_handle(first.id, run_id=run_id))
    assert result.output == "relayed" and result.turns == 3
    assert len(runs) == 2
    assert tool_contents(llm.requests()[-1]) == [blob_text("first", size), blob_text("second", size)]
    assert effects(counter_file) == Counter({"blob:first": 1, "blob:second": 1})
    sizes = [await history_bytes(client.get_workflow_handle(first.id, run_id=run_id)) for run_id in runs]
    print(f"\ncarrying 2.4 MB across continue-as-new: history per execution {sizes} B")
    assert max(sizes) < SMALL_HISTORY


async def test_a_3mb_failure_message_is_cut_not_wedged(client, task_queue, worker_factory, llm, large_registry):
    model = script(llm, calls(("shout", {"size": 3 * MB})), {"content": "it failed"})
    async with worker_factory(registry=large_registry):
        handle = await start(client, task_queue, "shout", agent="bulky", model=model)
        result = await finish(handle)
        await replay(handle)
    assert result.output == "it failed"
    (told,) = tool_contents(llm.requests()[-1])
    assert told.startswith("error: tool 'shout' failed after 1 attempt(s): " + "!" * 100)
    assert told.endswith(f"… [{3 * MB - MAX_FAILURE_TEXT} characters cut]")


# ------------------------------------------------------------------ the store, without Temporal


def payload(data: bytes) -> Payload:
    return Payload(metadata={"encoding": b"binary/plain"}, data=data)


async def test_the_local_store_is_content_addressed_and_checks_what_it_reads(tmp_path: Path):
    driver = LocalDirectoryDriver(tmp_path)
    one, two = payload(b"a" * 1000), payload(b"b" * 1000)
    claims = await driver.store(StorageDriverStoreContext(), [one, two, one])
    assert claims[0] == claims[2] != claims[1]
    assert len(list(tmp_path.rglob("*"))) == 4  # two files, each in its two-letter directory
    assert await driver.retrieve(StorageDriverRetrieveContext(), claims) == [one, two, one]

    path = driver.path(claims[1].claim_data["hash_value"])
    path.write_bytes(b"tampered")
    with pytest.raises(PayloadStoreError, match="corrupt"):
        await driver.retrieve(StorageDriverRetrieveContext(), [claims[1]])
    path.unlink()
    with pytest.raises(PayloadStoreError, match="PAYLOAD_STORE_DIR"):
        await driver.retrieve(StorageDriverRetrieveContext(), [claims[1]])
    forged = StorageDriverClaim({"hash_algorithm": "sha256", "hash_value": "../../etc/passwd"})
    with pytest.raises(PayloadStoreError, match="not a payload reference"):
        await driver.retrieve(StorageDriverRetrieveContext(), [forged])


def test_the_store_comes_from_the_environment(tmp_path: Path):
    default = external_storage({})
    assert default.payload_size_threshold == DEFAULT_THRESHOLD
    (driver,) = default.drivers
    assert isinstance(driver, LocalDirectoryDriver) and driver.root == Path(".state/payloads")
    chosen = external_storage({"PAYLOAD_STORE_DIR": str(tmp_path), "PAYLOAD_STORE_THRESHOLD": "1024"})
    assert chosen.payload_size_threshold == 1024 and chosen.drivers[0].root == tmp_path  # type: ignore[attr-defined]
    for bad in ("lots", "-1"):
        with pytest.raises(PayloadStoreError, match="PAYLOAD_STORE_THRESHOLD"):
            external_storage({"PAYLOAD_STORE_THRESHOLD": bad})
    with pytest.raises(PayloadStoreError, match="expected local, s3://BUCKET"):
        external_storage({"PAYLOAD_STORE": "ftp://bucket"})
    # the worker, the client, the tests and the replayer all use one converter, with one store
    assert DATA_CONVERTER.external_storage is not None


@pytest.mark.parametrize(
    "store, adapter, extra",
    [
        ("s3://bucket/runs", "aioboto3", "temporalio[aioboto3]"),
        ("gs://bucket", "temporalio.contrib.gcp.gcsdriver.gcloud_aio", "temporalio[gcloud-aio-storage]"),
    ],
)
def test_a_cloud_store_without_its_library_is_a_clear_error(store, adapter, extra):
    try:
        importlib.import_module(adapter)
    except ImportError:
        pass
    else:
        pytest.skip(f"{extra} is installed")
    with pytest.raises(PayloadStoreError, match=re.escape(f"pip install '{extra}'")):
        external_storage({"PAYLOAD_STORE": store})


class MemoryS3(S3StorageDriverClient):
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], bytes] = {}

    async def put_object(self, *, bucket: str, key: str, data: bytes) -> None:
        self.objects[bucket, key] = data

    async def object_exists(self, *, bucket: str, key: str) -> bool:
        return (bucket, key) in self.objects

    async def get_object(self, *, bucket: str, key: str) -> bytes:
        return self.objects[bucket, key]


async def test_an_s3_prefix_is_put_before_every_key():
    memory = MemoryS3()

    class Prefixed(LazyS3Client):
        async def open(self, stack: Any) -> S3StorageDriverClient:
            return memory

    driver = S3StorageDriver(Prefixed("/runs/agent/"), "bucket")
    big = payload(b"x" * 2000)
    (claim,) = await driver.store(StorageDriverStoreContext(), [big])
    ((bucket, key),) = memory.objects
    assert bucket == "bucket" and key == "runs/agent/" + claim.claim_data["key"]
    assert claim.claim_data["hash_value"] == hashlib.sha256(big.SerializeToString()).hexdigest()
    assert await driver.retrieve(StorageDriverRetrieveContext(), [StorageDriverClaim(claim.claim_data)]) == [big]
