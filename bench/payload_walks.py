"""BENCH-ONLY: what temporalio's payload walks cost a worker, per activation and completion.

`python -m bench.payload_walks [--n N]`. temporalio 1.35 walks every activation it decodes and
every completion it encodes three times, in Python (codec, external storage, storage
references), also when no walk can change anything. This times those two SDK calls on messages
shaped like one turn of AgentRun (a model call scheduled, its reply resolved, the transcript
query answered), with the product's data converter (external storage on, no codec), against
the cost of just reading the messages' bytes. The figures back docs/upstream.md. It calls
`temporalio.bridge`, which the product must not: bench code only.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence

from temporalio.api.common.v1 import Payload
from temporalio.bridge import worker as bridge
from temporalio.bridge.proto.activity_result import ActivityResolution
from temporalio.bridge.proto.activity_result import Success as ActivitySuccess
from temporalio.bridge.proto.workflow_activation import (
    QueryWorkflow,
    ResolveActivity,
    WorkflowActivation,
    WorkflowActivationJob,
)
from temporalio.bridge.proto.workflow_commands import QueryResult, QuerySuccess, ScheduleActivity, WorkflowCommand
from temporalio.bridge.proto.workflow_completion import Success, WorkflowActivationCompletion
from temporalio.converter import DataConverter

from durable_agent_runner.config.connection import make_data_converter


def turn_messages(to_payload: Callable[[object], Payload]) -> list[WorkflowActivation | WorkflowActivationCompletion]:
    """One turn's activations and completions, their payloads of a realistic size."""
    reply = to_payload({"text": "x" * 200, "tool_calls": [{"name": "pad", "arguments": {"i": 1, "size": 200}}]})
    transcript = to_payload([{"role": "user", "content": "y" * 200}] * 8)
    call = to_payload({"turn": 3, "agent": "looper", "model": "loop:40:200"})
    resolve = WorkflowActivationJob(
        resolve_activity=ResolveActivity(seq=1, result=ActivityResolution(completed=ActivitySuccess(result=reply)))
    )
    query = WorkflowActivationJob(query_workflow=QueryWorkflow(query_id="q", query_type="transcript"))
    schedule = WorkflowCommand(schedule_activity=ScheduleActivity(seq=2, activity_type="call_model", arguments=[call]))
    answer = WorkflowCommand(respond_to_query=QueryResult(query_id="q", succeeded=QuerySuccess(response=transcript)))
    return [
        WorkflowActivation(run_id="r", jobs=[query]),
        WorkflowActivationCompletion(run_id="r", successful=Success(commands=[answer])),
        WorkflowActivation(run_id="r", jobs=[resolve]),
        WorkflowActivationCompletion(run_id="r", successful=Success(commands=[schedule])),
    ]


async def walk(message: WorkflowActivation | WorkflowActivationCompletion, converter: DataConverter) -> None:
    if isinstance(message, WorkflowActivation):
        await bridge.decode_activation(message, converter, True, 4)
    else:
        await bridge.encode_completion(message, converter, True, 4)


async def read_bytes(message: WorkflowActivation | WorkflowActivationCompletion, converter: DataConverter) -> None:
    message.SerializeToString()  # what a check "does this message hold a reference?" costs at most


async def per_turn_us(
    messages: Sequence[WorkflowActivation | WorkflowActivationCompletion],
    converter: DataConverter,
    step: Callable[[WorkflowActivation | WorkflowActivationCompletion, DataConverter], Awaitable[None]],
    n: int,
) -> float:
    for m in messages:
        await step(m, converter)  # warm up
    t0 = time.process_time()
    for _ in range(n):
        for m in messages:
            await step(m, converter)
    return (time.process_time() - t0) / n * 1e6


async def main_async(n: int) -> None:
    with tempfile.TemporaryDirectory() as store:
        converter = make_data_converter({"PAYLOAD_STORE_DIR": store})
        assert converter.payload_codec is None and converter.external_storage is not None
        messages = turn_messages(converter.payload_converter.to_payload)
        walked = await per_turn_us(messages, converter, walk, n)
        read = await per_turn_us(messages, converter, read_bytes, n)
    print(f"one turn's {len(messages)} messages (2 activations, 2 completions), {n} rounds, CPU time:")
    print(f"  temporalio's walks (3 per message): {walked:7.1f} µs a turn")
    print(f"  reading the messages' bytes once:   {read:7.1f} µs a turn")


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.payload_walks", description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=2000, help="rounds (default 2000)")
    asyncio.run(main_async(p.parse_args(argv).n))


if __name__ == "__main__":
    main()
