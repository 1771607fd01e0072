"""worker.skip_idle_payload_walks: temporalio's payload walks are skipped only where they could
change nothing (no codec, no reference in an activation, a completion below the storage
threshold), and still run, storing and resolving, where they could."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.bridge import worker as bridge_worker
from temporalio.bridge.proto.activity_result import ActivityResolution
from temporalio.bridge.proto.activity_result import Success as ActivitySuccess
from temporalio.bridge.proto.workflow_activation import ResolveActivity, WorkflowActivation, WorkflowActivationJob
from temporalio.bridge.proto.workflow_commands import CompleteWorkflowExecution, WorkflowCommand
from temporalio.bridge.proto.workflow_completion import Success, WorkflowActivationCompletion
from temporalio.converter import DataConverter
from temporalio.worker._command_aware_visitor import CommandAwarePayloadVisitor

import worker
from activities.connection import make_data_converter

THRESHOLD = 1024


@pytest.fixture
def converter(tmp_path: Path) -> DataConverter:
    worker.skip_idle_payload_walks()
    return make_data_converter({"PAYLOAD_STORE_DIR": str(tmp_path), "PAYLOAD_STORE_THRESHOLD": str(THRESHOLD)})


@pytest.fixture
def walks(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every walk temporalio starts, counted."""
    seen: list[object] = []
    visit = CommandAwarePayloadVisitor.visit

    async def counted(self: CommandAwarePayloadVisitor, fs: object, root: object) -> None:
        seen.append(root)
        await visit(self, fs, root)  # type: ignore[arg-type]

    monkeypatch.setattr(CommandAwarePayloadVisitor, "visit", counted)
    return seen


def completion(payload: Payload) -> WorkflowActivationCompletion:
    command = WorkflowCommand(complete_workflow_execution=CompleteWorkflowExecution(result=payload))
    return WorkflowActivationCompletion(run_id="run", successful=Success(commands=[command]))


def activation(payload: Payload) -> WorkflowActivation:
    result = ActivityResolution(completed=ActivitySuccess(result=payload))
    job = WorkflowActivationJob(resolve_activity=ResolveActivity(seq=1, result=result))
    return WorkflowActivation(run_id="run", jobs=[job])


def result_of(done: WorkflowActivationCompletion) -> Payload:
    return done.successful.commands[0].complete_workflow_execution.result


async def test_small_payloads_are_not_walked(converter: DataConverter, walks: list[object]) -> None:
    small = converter.payload_converter.to_payload("a short tool result")
    done = completion(small)
    await bridge_worker.encode_completion(done, converter, True, 4)
    act = activation(small)
    await bridge_worker.decode_activation(act, converter, True, 4)
    assert walks == []
    assert result_of(done) == small
    assert act.jobs[0].resolve_activity.result.completed.result == small


async def test_large_payloads_are_still_stored_and_resolved(converter: DataConverter, walks: list[object]) -> None:
    large = converter.payload_converter.to_payload("x" * (THRESHOLD * 4))
    done = completion(large)
    await bridge_worker.encode_completion(done, converter, True, 4)
    stored = result_of(done)
    assert stored.ByteSize() < THRESHOLD  # a reference took its place
    assert stored.metadata["messageType"] == b"temporal.api.sdk.v1.ExternalStorageReference"

    act = activation(stored)  # as the server hands it back with the next activation
    await bridge_worker.decode_activation(act, converter, True, 4)
    assert act.jobs[0].resolve_activity.result.completed.result == large
    assert len(walks) == 6  # three walks each way


async def test_a_codec_gets_every_walk(tmp_path: Path, walks: list[object]) -> None:
    worker.skip_idle_payload_walks()
    env = {"PAYLOAD_STORE_DIR": str(tmp_path), "PAYLOAD_CODEC_KEYS": "k1:" + base64.b64encode(bytes(32)).decode()}
    converter = make_data_converter(env)
    assert converter.payload_codec is not None
    small = converter.payload_converter.to_payload("a short tool result")
    done = completion(small)
    await bridge_worker.encode_completion(done, converter, True, 4)
    assert result_of(done).metadata["encoding"] != small.metadata["encoding"]  # encrypted
    act = activation(result_of(done))
    await bridge_worker.decode_activation(act, converter, True, 4)
    assert act.jobs[0].resolve_activity.result.completed.result == small
    assert len(walks) == 6
