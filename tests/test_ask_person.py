"""`ask_person` on the dev server: a question answered with a choice (the model reads the choice's
text, the run completes, who and when are recorded), with text, a bad answer refused with nothing
recorded, the timeout's default, an answer given after the worker restarted mid-wait, and
`client.py answer`'s exit codes. Records tests/histories/ask_person_1_4.json on request."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from durable_agent_runner import Agent, Registry, ask_person
from durable_agent_runner.client import AgentClient, DecisionRefused
from durable_agent_runner.client.status import waiting_for
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.patches import ASK_PERSON_PATCH, RELEASE_2_PATCH
from tests.helpers import calls, replay, script, start, transcript
from tests.test_client import cli  # noqa: F401  (a fixture: client.py as a subprocess)

HISTORIES = Path(__file__).parent / "histories"
DAYS = {"question": "Which day suits the team?", "choices": ["Monday", "Tuesday", "Friday"]}


def asker(**options) -> Registry:
    return Registry(agents=[Agent(name="asker", instructions="Ask.", tools=[ask_person.with_options(**options)])])


async def status(handle) -> t.RunStatus:
    return await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)


async def question(handle, timeout: float = 30.0) -> t.PendingQuestion:
    deadline = time.monotonic() + timeout
    while True:
        s = await status(handle)
        if s.questions:
            return s.questions[0]
        assert time.monotonic() < deadline, f"no question waits; status: {s}"
        await asyncio.sleep(0.1)


async def answer(handle, **body) -> t.AnswerReceipt:
    return await handle.execute_update(t.ANSWER_UPDATE, t.AnswerQuestion(**body), result_type=t.AnswerReceipt)


async def refusal(handle, **body) -> str:
    """The validator's refusal of an answer sent as a raw update (the Web UI's way), as `type: message`."""
    with pytest.raises(WorkflowUpdateFailedError) as failed:
        await answer(handle, **body)
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError)
    return f"{cause.type}: {cause.message}"


def tool_results_sent(llm) -> list[str]:
    """What the model was told of tool calls, as the fake model received it in its last request."""
    (last,) = llm.requests(last=1)
    return [m.get("content") for m in (last.get("body") or {}).get("messages", []) if m.get("role") == "tool"]


async def test_ask_person_answered_with_a_choice(client, task_queue, worker_factory, llm):
    model = script(llm, calls(("ask_person", DAYS)), {"content": "Booked for Tuesday."})
    async with worker_factory(registry=asker(timeout_seconds=600)):
        handle = await start(client, task_queue, "Book the offsite", agent="asker", model=model)
        asked = await question(handle)
        live = await status(handle)
        assert live.phase == "awaiting_approval" and live.status == "awaiting_approval"
        assert live.last_step == "turn 1: waiting for an answer to: Which day suits the team?"
        assert asked.choices == ["Monday", "Tuesday", "Friday"] and asked.deadline is not None
        (wait,) = waiting_for(handle.id, live)
        assert wait.kind == "question" and wait.choices == asked.choices
        assert str(wait).startswith("an answer to: Which day suits the team?: durable-agent-runner answer")

        run = AgentClient(client).get(handle.id)
        receipt = await run.answer_question(asked.call_id, choice=2, by="alice")
        assert (receipt.answer, receipt.choice, receipt.by) == ("Tuesday", 2, "alice")
        result = await handle.result()
        exported = [line for line in await run.export() if line["type"] == "answer"]
        done = await status(handle)
        story = (await handle.query(t.EVENTS_QUERY, t.EventsQuery(), result_type=t.EventsPage)).events
        await replay(handle)
        messages = await transcript(handle)
        if os.environ.get("RECORD_HISTORIES"):  # re-record only on purpose (tests/test_patches.py reads it)
            (HISTORIES / "ask_person_2_0.json").write_text((await handle.fetch_history()).to_json())
    assert result.output == "Booked for Tuesday."
    assert tool_results_sent(llm) == ["Tuesday (choice 2)"]  # what the model read
    (message,) = [m for m in messages if isinstance(m, t.ToolMessage)]
    assert message.answer is not None and message.answer.by == "alice" and message.answer.choice == 2
    assert done.questions == [] and [(a.answer, a.by) for a in done.answers] == [("Tuesday", "alice")]
    assert done.answers[0].at == receipt.recorded_at
    assert [(x["call_id"], x["answer"], x["choice"], x["by"]) for x in exported] == [
        (asked.call_id, "Tuesday", 2, "alice")
    ]
    kinds = [e.kind for e in story]
    assert kinds.count(t.EventKind.QUESTION_ASKED) == 1 and kinds.count(t.EventKind.QUESTION_ANSWERED) == 1
    answered = next(e for e in story if e.kind == t.EventKind.QUESTION_ANSWERED)
    assert answered.detail == "choice 2: Tuesday (by alice)"
    markers = [e for e in (await handle.fetch_history()).events if e.HasField("marker_recorded_event_attributes")]
    # a 2.0 run takes the 1.x patch's path with no marker of it: the release's alone (workflows/versions.py)
    recorded = b"".join(m.SerializeToString() for m in markers)
    assert RELEASE_2_PATCH.encode() in recorded and ASK_PERSON_PATCH.encode() not in recorded


async def test_answered_with_text_and_a_bad_answer_is_refused_with_nothing_recorded(
    client, task_queue, worker_factory, llm
):
    model = script(
        llm,
        calls(("ask_person", {"question": "Where should we go?"})),
        calls(("ask_person", DAYS)),
        {"content": "Lisbon on Friday."},
    )
    async with worker_factory(registry=asker()):
        handle = await start(client, task_queue, "Plan it", agent="asker", model=model)
        free = await question(handle)
        empty = await refusal(handle, call_id=free.call_id, text="   ", by="eve")
        assert empty == f"InvalidAnswer: an answer to call {free.call_id} may not be empty"
        assert "has no choices" in await refusal(handle, call_id=free.call_id, choice=1, by="eve")
        assert (await status(handle)).answers == []  # nothing recorded
        await answer(handle, call_id=free.call_id, text="Lisbon", by="bob")

        picked = await question(handle)
        assert picked.call_id != free.call_id
        run = AgentClient(client).get(handle.id)
        with pytest.raises(DecisionRefused, match=r"choice 4 is not one of 1\.\.3"):
            await run.answer_question(picked.call_id, choice=4, by="eve")
        with pytest.raises(DecisionRefused, match="'Sunday' is not one of the choices"):
            await run.answer_question(picked.call_id, "Sunday", by="eve")
        with pytest.raises(DecisionRefused, match="already answered by bob"):
            await run.answer_question(free.call_id, "Porto", by="eve")
        assert [a.by for a in (await status(handle)).answers] == ["bob"]  # still only bob's
        await run.answer_question(picked.call_id, "friday", by="carol")  # a choice's own text
        assert (await handle.result()).output == "Lisbon on Friday."
        history = await handle.fetch_history()
    assert tool_results_sent(llm) == ["Lisbon", "Friday (choice 3)"]
    updates = [e for e in history.events if e.HasField("workflow_execution_update_accepted_event_attributes")]
    assert len(updates) == 2  # the refused answers never reached history


async def test_a_timeout_gives_the_model_the_default(client, task_queue, worker_factory, llm):
    model = script(llm, calls(("ask_person", DAYS)), {"content": "Going with Tuesday."})
    async with worker_factory(registry=asker(timeout_seconds=2, default="Tuesday")):
        handle = await start(client, task_queue, "Book it", agent="asker", model=model)
        asked = await question(handle)
        assert (await asyncio.wait_for(handle.result(), 30)).output == "Going with Tuesday."
        done = await status(handle)
        run = AgentClient(client).get(handle.id)
        with pytest.raises(DecisionRefused, match="has ended"):
            await run.answer_question(asked.call_id, choice=1, by="late")
    assert tool_results_sent(llm) == ["no answer within 2s; the default applies: Tuesday"]
    (record,) = done.answers
    assert record.automatic and record.by == "timeout"


async def test_the_answer_survives_a_worker_restart_mid_wait(client, task_queue, worker_factory, llm):
    model = script(llm, calls(("ask_person", DAYS)), {"content": "Monday it is."})
    async with worker_factory(registry=asker()):
        handle = await start(client, task_queue, "Book it", agent="asker", model=model)
        asked = await question(handle)
    # The first worker is gone; a new one (no cache) replays the run's history and takes the answer.
    async with worker_factory(registry=asker()):
        await AgentClient(client).get(handle.id).answer_question(asked.call_id, choice=1, by="dana")
        assert (await asyncio.wait_for(handle.result(), 30)).output == "Monday it is."
        await replay(handle)
    assert tool_results_sent(llm) == ["Monday (choice 1)"]


async def test_client_py_answer_and_its_exit_codes(client, task_queue, worker_factory, llm, cli):
    model = script(llm, calls(("ask_person", DAYS)), {"content": "Friday."})
    async with worker_factory(registry=asker()):
        handle = await start(client, task_queue, "Book it", agent="asker", model=model)
        asked = await question(handle)
        shown = await cli("status", handle.id)
        assert f"question: {asked.call_id}  Which day suits the team?" in shown.out, shown
        assert "2. Tuesday" in shown.out and f"answer: python client.py answer {handle.id} {asked.call_id}" in shown.out
        bad = await cli("answer", handle.id, asked.call_id, "--choice", "9")
        assert bad.code == 2 and "choice 9 is not one of 1..3" in bad.out + bad.err, bad
        assert len((await cli("answer", handle.id, asked.call_id)).err) > 0  # neither text nor --choice: usage
        both = await cli("answer", handle.id, asked.call_id, "Monday", "--text", "Friday")
        assert both.code == 2 and "argument --text: not allowed with argument TEXT" in both.err, both
        unknown = await cli("answer", handle.id, "call_9_9", "--text", "Monday")  # --text: as people also write it
        assert unknown.code == 2 and "no question waits with call call_9_9" in unknown.out + unknown.err, unknown
        good = await cli("answer", handle.id, asked.call_id, "--choice", "3", "--by", "ops", "--json")
        assert good.code == 0 and json.loads(good.out)["answer"] == "Friday", good
        assert (await asyncio.wait_for(handle.result(), 30)).output == "Friday."
        again = await cli("answer", handle.id, asked.call_id, "Monday")
        assert again.code == 2 and "has ended (completed): no question of it waits" in again.err, again
