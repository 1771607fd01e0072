"""Gemini's safety blocks and stop reasons other than STOP, in whole runs on the dev server (issue
33, item 2): each reaches the run as a clear outcome, an answer that says what Gemini said or a
one-line failure, with the stop in the run's story, never a crash, a traceback or an empty
answer. tests/test_gemini_wire.py checks the wire's reading of each reply alone."""

from __future__ import annotations

import asyncio
import logging

import pytest
from temporalio.client import WorkflowFailureError

from durable_agent_runner.client import AgentClient
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.workflows import types as t
from tests.helpers import calls, replay, script, start, transcript

GEMINI_KEY = "g-Sf7Tq2Lm9Wc4"
FILTERED, CUT = "stopped: content_filter", "stopped: length"  # the story's words (machine/turn.py)


@pytest.fixture
def settings(llm) -> LLMSettings:
    return LLMSettings(
        base_url=llm.base_url, model="demo", gemini_base_url=llm.url, gemini_api_key=GEMINI_KEY, max_attempts=2
    )


async def finished(handle) -> list[t.RunEvent]:
    page = await handle.query(t.EVENTS_QUERY, t.EventsQuery(), result_type=t.EventsPage)
    return [e for e in page.events if e.kind == t.EventKind.MODEL_FINISHED]


def no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    assert "Traceback" not in caplog.text
    assert not [r for r in caplog.records if r.exc_info and r.levelno >= logging.ERROR]


# (what the case is, Gemini's reply in turn 2, the answer the run ends with, the stop in its story)
STOPS = [
    ("safety", {"finish": "SAFETY"}, "[Gemini withheld the reply: SAFETY]", FILTERED),
    ("safety after some text", {"content": "Here is how to", "finish": "SAFETY"}, "Here is how to", FILTERED),
    ("recitation", {"finish": "RECITATION"}, "[Gemini withheld the reply: RECITATION]", FILTERED),
    ("blocked prompt", {"blocked": "PROHIBITED_CONTENT"}, "[Gemini blocked the prompt: PROHIBITED_CONTENT]", FILTERED),
    ("max tokens", {"content": "It is sunny in Paris and", "finish": "MAX_TOKENS"}, "It is sunny in Paris and", CUT),
]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_reply_gemini_stopped_ends_the_run_with_a_clear_answer(
    client, task_queue, worker_factory, llm, settings, caplog, stream
):
    """Every stop at once, one run each on one worker (stopped in turn 2, after a tool ran)."""
    caplog.set_level(logging.INFO)
    models = [script(llm, calls(("get_weather", {"city": "Paris"})), step) for _, step, _, _ in STOPS]
    agents = AgentClient(client, task_queue=task_queue)
    async with worker_factory(settings=settings.model_copy(update={"stream": stream})):
        handles = [await start(client, task_queue, "Weather in Paris?", model=f"gemini:{m}") for m in models]
        results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 90)
        for (case, _, answer, stop), model, handle, result in zip(STOPS, models, handles, results, strict=True):
            info = await agents.get(handle.id).status()
            events = await finished(handle)
            messages = await transcript(handle)
            await replay(handle)
            assert result.output == answer and result.turns == 2, case
            assert info.status == "completed", case
            assert [stop in e.detail for e in events] == [False, True], case  # turn 1 called a tool; turn 2 stopped
            assert events[-1].text == answer, case
            assert isinstance(messages[-1], t.AssistantMessage) and messages[-1].content == answer, case
            sent = [r for r in llm.requests() if r["model"] == model]
            assert len(sent) == 2 and all(r["api"] == "gemini" and r["stream"] is stream for r in sent), case
    no_traceback(caplog)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_call_gemini_failed_to_write_is_tried_again_then_fails_the_run_in_one_line(
    client, task_queue, worker_factory, llm, settings, caplog, stream
):
    caplog.set_level(logging.INFO)
    model = script(llm, {"finish": "MALFORMED_FUNCTION_CALL"})
    async with worker_factory(settings=settings.model_copy(update={"stream": stream})):
        handle = await start(client, task_queue, "Weather in Paris?", model=f"gemini:{model}")
        with pytest.raises(WorkflowFailureError) as failure:
            await asyncio.wait_for(handle.result(), 60)
        status = await handle.query(t.STATUS_QUERY, result_type=t.RunStatus)
    cause = str(failure.value.cause)
    assert "Gemini stopped with MALFORMED_FUNCTION_CALL" in cause and "\n" not in cause
    assert "Traceback" not in cause
    assert status.status == "failed"
    assert len([r for r in llm.requests() if r["model"] == model]) == 2  # the worker's retry bound (max_attempts)
