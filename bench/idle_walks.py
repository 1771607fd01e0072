"""BENCH-ONLY: temporalio's payload walks skipped where they can change nothing, to measure
what they cost a turn (the per-turn section's "idle walks skipped" row, against the product's
worker in the same interleaved run).

The product used to do this (issue 24 removed it: it replaces functions of the SDK's private
`temporalio.bridge` module); docs/upstream.md proposes it to the SDK. With no codec, an
activation is walked only when its bytes hold a storage reference's mark, and a completion only
when it is as large as the storage threshold. temporalio 1.35 only.
"""

from __future__ import annotations

from temporalio.bridge import worker as bridge_worker
from temporalio.bridge.proto.workflow_activation import WorkflowActivation
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.converter import DataConverter
from temporalio.converter import _extstore as extstore
from temporalio.converter._extstore import StorageOperationMetrics

OPTION = "bench_skip_idle_walks"  # the worker option (bench.worker_proc) that installs it

# What marks a payload stored elsewhere: its encoding, its message type or its marker key.
_REFERENCE_MARKS = (
    extstore._REFERENCE_ENCODING,
    extstore._REFERENCE_MESSAGE_TYPE,
    extstore._REFERENCE_MARKER_KEY.encode(),
)


def install() -> None:
    """Replace the two bridge functions in this (worker) process; the SDK calls them by keyword."""
    decode, encode = bridge_worker.decode_activation, bridge_worker.encode_completion

    async def decode_activation(
        activation: WorkflowActivation,
        data_converter: DataConverter,
        decode_headers: bool,
        storage_concurrency_limit: int,
    ) -> StorageOperationMetrics:
        if data_converter.payload_codec is None and not any(
            mark in activation.SerializeToString() for mark in _REFERENCE_MARKS
        ):
            return StorageOperationMetrics()
        return await decode(activation, data_converter, decode_headers, storage_concurrency_limit)

    async def encode_completion(
        completion: WorkflowActivationCompletion,
        data_converter: DataConverter,
        encode_headers: bool,
        storage_concurrency_limit: int,
    ) -> StorageOperationMetrics:
        storage = data_converter.external_storage
        if data_converter.payload_codec is None and (
            storage is None or completion.ByteSize() < storage.payload_size_threshold
        ):
            return StorageOperationMetrics()
        return await encode(completion, data_converter, encode_headers, storage_concurrency_limit)

    bridge_worker.decode_activation, bridge_worker.encode_completion = decode_activation, encode_completion
