"""`export` of a session: every message sent to it and every compaction, so that the whole
transcript stays retrievable after compaction replaced older messages in the run's memory.

First from a history built by hand (decoded through a data converter with a payload codec, as
export must: never by reading payload bytes), then from a real session on the dev server."""

from __future__ import annotations

import base64
import dataclasses
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp
from temporalio.api.common.v1 import ActivityType, Payload, Payloads, WorkflowType
from temporalio.api.enums.v1 import EventType
from temporalio.api.failure.v1 import Failure
from temporalio.api.history.v1 import (
    ActivityTaskCompletedEventAttributes,
    ActivityTaskScheduledEventAttributes,
    ChildWorkflowExecutionCompletedEventAttributes,
    HistoryEvent,
    StartChildWorkflowExecutionInitiatedEventAttributes,
    WorkflowExecutionStartedEventAttributes,
    WorkflowExecutionUpdateAcceptedEventAttributes,
    WorkflowExecutionUpdateCompletedEventAttributes,
)
from temporalio.api.update.v1 import Input, Meta, Outcome, Request
from temporalio.client import Client
from temporalio.converter import DataConverter, PayloadCodec
from temporalio.exceptions import ApplicationError

from durable_agent_runner.activities.capture import CaptureStore
from durable_agent_runner.cli.session import end_session, send_message, wait_answer
from durable_agent_runner.client.export import _lines, export_run
from durable_agent_runner.config.connection import data_converter
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.types import live_scores as tl
from tests.helpers import transcript

E = EventType
AT = datetime(2026, 5, 4, 12, 30, tzinfo=UTC)


class Base64Codec(PayloadCodec):
    """A codec that changes every payload's bytes: whoever parses them by hand reads nonsense."""

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [
            Payload(metadata={"encoding": b"test/base64"}, data=base64.b64encode(p.SerializeToString()))
            for p in payloads
        ]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [Payload.FromString(base64.b64decode(p.data)) for p in payloads]


class History:
    """Events of one execution, numbered as a server would."""

    def __init__(self, converter: DataConverter) -> None:
        self.converter = converter
        self.events: list[HistoryEvent] = []

    async def payloads(self, *values: Any) -> Payloads:
        return Payloads(payloads=await self.converter.encode(list(values)))

    def add(self, kind: EventType.ValueType, **attributes: Any) -> int:
        event = HistoryEvent(event_id=len(self.events) + 1, event_type=kind, event_time=Timestamp(), **attributes)
        event.event_time.FromDatetime(AT)
        self.events.append(event)
        return event.event_id

    async def send(self, message: t.SessionMessage, outcome: t.MessageReceipt | str | None) -> None:
        update_id = uuid.uuid4().hex
        request = Request(
            meta=Meta(update_id=update_id), input=Input(name=t.SESSION_SEND_UPDATE, args=await self.payloads(message))
        )
        await self.update(request, outcome)

    async def update(self, request: Request, outcome: Any) -> None:
        accepted = self.add(
            E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
            workflow_execution_update_accepted_event_attributes=WorkflowExecutionUpdateAcceptedEventAttributes(
                protocol_instance_id=request.meta.update_id, accepted_request=request
            ),
        )
        if outcome is None:
            return
        if isinstance(outcome, str):
            failure = Failure()
            await self.converter.encode_failure(ApplicationError(outcome), failure)
            result = Outcome(failure=failure)
        else:
            result = Outcome(success=await self.payloads(outcome))
        self.add(
            E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED,
            workflow_execution_update_completed_event_attributes=WorkflowExecutionUpdateCompletedEventAttributes(
                meta=request.meta, accepted_event_id=accepted, outcome=result
            ),
        )

    async def activity(self, name: str, input: Any, result: Any) -> None:
        scheduled = self.add(
            E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
            activity_task_scheduled_event_attributes=ActivityTaskScheduledEventAttributes(
                activity_type=ActivityType(name=name), input=await self.payloads(input)
            ),
        )
        self.add(
            E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
            activity_task_completed_event_attributes=ActivityTaskCompletedEventAttributes(
                scheduled_event_id=scheduled, result=await self.payloads(result)
            ),
        )


async def test_messages_and_compactions_decoded_from_a_history(tmp_path):
    converter = dataclasses.replace(data_converter(), payload_codec=Base64Codec())
    h = History(converter)
    h.add(
        E.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
        workflow_execution_started_event_attributes=WorkflowExecutionStartedEventAttributes(
            input=await h.payloads(t.RunInput(prompt="", agent="forgetful", session=True))
        ),
    )
    await h.send(
        t.SessionMessage(text="my name is Ada", by="alice", message_id="m1"), t.MessageReceipt(message=1, queued=0)
    )
    await h.send(
        t.SessionMessage(text="my name is Ada", by="alice", message_id="m1"),
        t.MessageReceipt(message=1, queued=0, duplicate=True),
    )
    await h.update(
        Request(
            meta=Meta(update_id="end"), input=Input(name=t.SESSION_END_UPDATE, args=await h.payloads(t.EndSession()))
        ),
        t.EndReceipt(messages=1, unanswered=0),
    )  # not a message: a control's line
    compact = t.CompactInput(agent="forgetful", model=None, turn=4, upto=6)
    await h.activity(t.COMPACT_ACTIVITY, compact, t.CompactResult(summary="SUMMARY: my name is Ada"))
    await h.send(t.SessionMessage(text="my order?", by="bob"), "it failed")
    await h.send(t.SessionMessage(text="still open"), None)  # its update has not completed yet

    lines = [line async for line in _lines(converter, h.events, CaptureStore(tmp_path))]

    at = AT.isoformat()
    assert [line for line in lines if line["type"] != "start"] == [
        {"type": "message", "message": 1, "text": "my name is Ada", "by": "alice", "at": at},
        {"type": "message", "message": 1, "text": "my name is Ada", "by": "alice", "at": at, "duplicate": True},
        {"type": "control", "update": "end", "turn": None, "at": at, "by": "someone", "reason": ""},
        {"type": "compaction", "turn": 4, "upto": 6, "summary": "SUMMARY: my name is Ada"},
        {"type": "message", "message": None, "text": "my order?", "by": "bob", "at": at, "error": "it failed"},
        {"type": "message", "message": None, "text": "still open", "by": "someone", "at": at},
    ]  # fmt: skip


async def test_a_compacted_session_exports_every_message_and_its_summaries(
    client: Client, task_queue: str, worker_factory: Any, tmp_path
) -> None:
    facts = ["my name is Ada", "I live in Oslo", "my order is 4417", "I like tea", "what do you remember?"]
    async with worker_factory():
        handle = await client.start_workflow(
            t.WORKFLOW_NAME,
            t.RunInput(prompt="", agent="forgetful", model="recall", session=True),
            id=f"chat-{uuid.uuid4().hex[:12]}",
            task_queue=task_queue,
            result_type=t.RunResult,
        )
        answers = []
        for k, text in enumerate(facts, start=1):
            await send_message(client, handle.id, f"{text} {'.' * 300}", by="alice")
            answers.append((await wait_answer(client, handle.id, k)).output)
        memory = await transcript(handle)
        await end_session(client, handle.id, by="alice")
        await handle.result()

    # The run's memory lost the first message word for word, but kept it in a summary …
    assert isinstance(memory[0], t.UserMessage) and memory[0].summary_of > 0
    assert not any(isinstance(m, t.UserMessage) and m.content.startswith(facts[0]) for m in memory)
    assert answers[-1] is not None and facts[0] in answers[-1] and facts[-1] in answers[-1]
    # … and the export holds every message as sent, and each summary that replaced some.
    lines = await export_run(client, handle.id, CaptureStore(tmp_path))
    sent = [line for line in lines if line["type"] == "message"]
    assert [(m["message"], m["text"].split(" .")[0], m["by"]) for m in sent] == [
        (k, text, "alice") for k, text in enumerate(facts, start=1)
    ]
    compactions = [line for line in lines if line["type"] == "compaction"]
    assert compactions and all(c["upto"] > 0 for c in compactions)
    assert compactions[0]["summary"].startswith("SUMMARY: ") and facts[0] in compactions[0]["summary"]


async def test_a_sessions_failed_answer_its_raise_and_its_end_are_exported(
    client: Client, task_queue: str, worker_factory: Any, llm: Any, tmp_path
) -> None:
    """Export left out what watch and status show of a session's budget: the message whose answer
    failed on it (no history event says so: the run's events do), the raise that let it go on,
    and the controls people sent (pause, resume, edit, end)."""
    from durable_agent_runner import AgentClient
    from durable_agent_runner.client.errors import RunFailed
    from tests.helpers import script

    async with worker_factory():
        chat = await AgentClient(client, task_queue=task_queue).start_session(
            "chatter", model=script(llm, {"content": "one"}, {"content": "two"}), budget_tokens=1
        )
        assert await chat.ask("first", wait=30) == "one"
        try:
            await chat.ask("second", wait=30)
        except RunFailed:
            pass
        else:
            raise AssertionError("message 2 was answered past a spent budget")
        await chat.resume(add_tokens=100_000, by="alice")
        assert await chat.ask("third", wait=30) == "two"
        await chat.end(by="alice", reason="done")
        lines = await export_run(client, chat.id, CaptureStore(tmp_path))
    assert lines[0]["session"] is True and lines[0]["budget"]["tokens"] == 1 and lines[0]["forked_from"] is None
    (failed,) = [line for line in lines if line["type"] == "answer_failed"]
    assert failed["message"] == 2 and failed["error_type"] == "TokenBudgetExceeded", failed
    assert failed["error"].startswith("token budget spent") and failed["via"] == "run"
    controls = [
        {k: v for k, v in line.items() if k not in ("at", "turn")} for line in lines if line["type"] == "control"
    ]
    assert controls == [
        {"type": "control", "update": "resume", "add_tokens": 100_000, "by": "alice"},
        {"type": "control", "update": "end", "by": "alice", "reason": "done"},
    ], controls


async def test_a_runs_scoring_child_is_not_read_as_an_agent_used_as_a_tool(tmp_path):
    """Before: a run whose ScoreRun (online scoring) ended before the run did had that child's
    end in its history, and `export` read it as an agent's answer: pydantic's `3 validation
    errors for RunResult`, and no export at all (seen as a flake of tests/test_live_scores.py)."""
    converter = data_converter()
    h = History(converter)
    h.add(
        E.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
        workflow_execution_started_event_attributes=WorkflowExecutionStartedEventAttributes(
            input=await h.payloads(t.RunInput(prompt="Weather in Paris?", agent="scored"))
        ),
    )
    for kind, child, result in (
        (tl.SCORE_WORKFLOW, "run-1.score", {"run_id": "run-1", "scores": []}),
        (
            t.WORKFLOW_NAME,
            "run-1.call_1_0",
            t.RunResult(run_id="run-1.call_1_0", agent="helper", output="42", turns=1, usage=t.Usage()),
        ),
    ):
        initiated = h.add(
            E.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED,
            start_child_workflow_execution_initiated_event_attributes=StartChildWorkflowExecutionInitiatedEventAttributes(
                workflow_type=WorkflowType(name=kind), workflow_id=child
            ),
        )
        h.add(
            E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED,
            child_workflow_execution_completed_event_attributes=ChildWorkflowExecutionCompletedEventAttributes(
                initiated_event_id=initiated, result=await h.payloads(result)
            ),
        )

    lines = [line async for line in _lines(converter, h.events, CaptureStore(tmp_path))]

    answered = [line for line in lines if line["type"] == "tool_result"]
    assert [(a["child_run_id"], a["output"], a["agent"]) for a in answered] == [("run-1.call_1_0", "42", "helper")]
