"""Wire capture and export: raw bodies kept outside history, and an exported run replays offline."""

from __future__ import annotations

import json
import uuid

import pytest

from durable_agent_runner.activities.capture import CaptureStore
from durable_agent_runner.cli.export import write_jsonl
from durable_agent_runner.client.export import export_run
from durable_agent_runner.client.replay import read_jsonl, replay_decisions
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.workflows import types as t
from tests.helpers import activity_attempts, calls, payload_bytes_per_turn, script, start


@pytest.mark.parametrize("api, stream", [("chat", False), ("chat", True), ("responses", False), ("responses", True)])
async def test_an_exported_run_replays_to_the_same_decisions(
    client, task_queue, worker_factory, llm, tmp_path, api, stream
):
    store = CaptureStore(tmp_path / "captures")
    secret = f"sk-{uuid.uuid4().hex}"
    settings = LLMSettings(
        base_url=llm.base_url, model="demo", api=api, stream=stream, capture_dir=store.root, api_key=secret
    )
    async with worker_factory(settings=settings):
        handle = await client.start_workflow(
            "AgentRun",
            {"prompt": "Weather in Tokyo and Paris? Which is warmer?", "capture": True},
            id=f"export-{uuid.uuid4().hex[:8]}",
            task_queue=task_queue,
        )
        await handle.result()
    lines = await export_run(client, handle.id, store)
    path = tmp_path / "run.jsonl"
    write_jsonl(lines, path)
    lines = read_jsonl(path)
    kinds = [line["type"] for line in lines]
    assert kinds[0] == "run" and kinds[-1] == "result" and kinds.count("model_call") == 3
    assert lines[0]["agent"]["name"] == "demo" and lines[0]["status"] == "completed"
    calls = [line for line in lines if line["type"] == "model_call"]
    assert all(c["capture"] and c["capture"]["request"]["model"] == "demo" for c in calls)
    if stream:
        assert any("data:" in raw for raw in calls[0]["capture"]["response"])
    assert [line["tool"] for line in lines if line["type"] == "tool_result"] == [
        "get_weather", "get_weather", "convert_temperature"
    ]  # fmt: skip
    decisions = list(await replay_decisions(lines))
    assert len(decisions) == 3
    assert all(recorded == replayed for _, recorded, replayed in decisions), decisions
    assert decisions[-1][1].startswith("final: Tokyo")
    assert secret not in path.read_text() and all(secret not in p.read_text() for p in store.root.iterdir())


async def test_a_tampered_capture_replays_to_a_different_decision(client, task_queue, worker_factory, llm, tmp_path):
    store = CaptureStore(tmp_path / "captures")
    # Not streamed: the capture is one JSON body, which the test edits.
    settings = LLMSettings(base_url=llm.base_url, model="demo", stream=False, capture=True, capture_dir=store.root)
    async with worker_factory(settings=settings):
        handle = await start(client, task_queue, "Weather in Tokyo?")
        await handle.result()
    lines = await export_run(client, handle.id, store)
    first = next(line for line in lines if line["type"] == "model_call")
    body = json.loads(first["capture"]["response"])
    body["choices"][0]["message"] = {"role": "assistant", "content": "no tools today"}
    first["capture"]["response"] = json.dumps(body)
    decisions = list(await replay_decisions(lines))
    assert decisions[0][1] != decisions[0][2] and decisions[0][2] == "final: no tools today"


async def test_an_export_keeps_the_tool_results_a_reply_brought_back(client, task_queue, worker_factory, llm, tmp_path):
    """Cheap calls run with the model's reply have no event of their own: the export reads their
    results from the reply, a local model call's too (its reply is a marker)."""
    steps = [calls(("quick_add", {"a": i, "b": 1})) for i in range(2)]
    async with worker_factory():
        for agent in ("quick", "nimble"):  # the model call an activity, then a local activity
            handle = await start(client, task_queue, "go", agent=agent, model=script(llm, *steps, {"content": "2"}))
            await handle.result()
            lines = await export_run(client, handle.id, CaptureStore(tmp_path / "captures"))
            results = [(line["tool"], line["output"]) for line in lines if line["type"] == "tool_result"]
            assert results == [("quick_add", "1"), ("quick_add", "2")], agent
            assert not any("tool_results" in line.get("reply", {}) for line in lines)  # each result once


async def test_captures_do_not_bloat_history(client, task_queue, worker_factory, llm, tmp_path):
    async def per_turn(capture: bool) -> list[int]:
        settings = LLMSettings(base_url=llm.base_url, model="demo", capture=capture, capture_dir=tmp_path / "c")
        async with worker_factory(settings=settings):
            handle = await start(client, task_queue, "go", agent="looper", model="loop:12:3000")
            await handle.result()
        return await payload_bytes_per_turn(handle)

    plain, captured = await per_turn(False), await per_turn(True)
    # A capture adds its 64-character key to each reply, not the 3 KB bodies: judged by what the
    # run's code recorded (activity inputs and results, markers), which no load varies.
    assert all(0 < c - p < 200 for p, c in zip(plain[:10], captured[:10], strict=True)), (plain, captured)
    assert captured[9] <= 1.5 * captured[2]
    assert len(list((tmp_path / "c").iterdir())) == 12


def test_llm_capture_reads_yes_and_no_like_the_other_switches():
    assert not LLMSettings.from_env({}).capture
    for on in ("1", "true", "yes", "on", " ON "):  # "on" once read as off
        assert LLMSettings.from_env({"LLM_CAPTURE": on}).capture, on
    for off in ("0", "false", "no", "off", ""):
        assert not LLMSettings.from_env({"LLM_CAPTURE": off}).capture, off
    with pytest.raises(ValueError, match="LLM_CAPTURE must be 1, true, yes or on"):
        LLMSettings.from_env({"LLM_CAPTURE": "maybe"})


async def test_a_capture_that_cannot_be_written_never_fails_the_call(client, task_queue, worker_factory, llm, tmp_path):
    """Before: with LLM_CAPTURE_DIR unwritable, each attempt of a captured model call failed with a
    traceback after the cheap calls it ran with its reply, so they ran again on every retry. Now
    the call goes on without its capture, and the worker says why in one line."""
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    settings = LLMSettings(base_url=llm.base_url, model="demo", capture=True, capture_dir=blocked / "captures")
    model = script(llm, calls(("quick_add", {"a": 1, "b": 1})), {"content": "it is 2"})
    async with worker_factory(settings=settings):
        handle = await start(client, task_queue, "go", agent="quick", model=model, capture=True)
        done = await handle.result()
    assert done.output == "it is 2" and done.turns == 2
    lines = await export_run(client, handle.id, CaptureStore(tmp_path / "elsewhere"))
    assert [line["capture"] for line in lines if line["type"] == "model_call"] == [None, None]
    assert [line["output"] for line in lines if line["type"] == "tool_result"] == ["2"]
    assert await activity_attempts(client.get_workflow_handle(handle.id), t.MODEL_CALL_ACTIVITY) == [1, 1]
