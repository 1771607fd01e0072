"""The compaction activity (`agent.compact`): a session's older messages summarized by the model.

When a session's transcript nears its agent's memory budget, the workflow asks for a summary of
messages[:upto] and puts it in their place, as one `UserMessage(summary_of=upto)`. Like a model
call, the activity reads those messages from the workflow by query (`agent.model_context`) and
sends one request through the model activity's machinery (`ModelActivities.send`): the same
wire, bounds, heartbeats, retryable-or-not errors and masking of the key. The request offers no
tools: the instructions ask for a faithful summary, and the transcript is one user message, in
tags a reader can follow:

    <user>…</user>  <assistant>…</assistant>  <tool_call name="…" id="…">arguments</tool_call>
    <tool_result name="…" id="…">…</tool_result>  <summary of="N">an earlier summary</summary>

Both what is sent and what comes back are bounded. A blank summary fails the compaction for
good (`CompactionFailed`): the messages it would replace must not be lost for nothing.
"""

from __future__ import annotations

import json
import logging
import time

from temporalio import activity
from temporalio.exceptions import ApplicationError

from durable_agent_runner.activities.model import ModelActivities, build_request, endpoint_for
from durable_agent_runner.machine import texts
from durable_agent_runner.workflows.types import (
    COMPACT_ACTIVITY,
    AssistantMessage,
    CompactInput,
    CompactResult,
    Message,
    ToolMessage,
    UserMessage,
)

log = logging.getLogger(__name__)

COMPACTION_FAILED = "CompactionFailed"
# The first words of every summary request's instructions; fake_llm answers any model with a
# summary when it sees them (durable_agent_runner/testing/scenarios/basic.py).
SUMMARY_MARKER = "Summarize the conversation"
HEAD = (
    f"{SUMMARY_MARKER} in the user message below. Your summary will replace those messages: the "
    "assistant continues the conversation from it alone, so it must not lose anything that matters."
)
DEFAULT_GUIDANCE = (
    "Be faithful and specific. Keep every fact, name, number, date, identifier, decision and "
    "commitment; what the user asked for and prefers; what tools returned that still matters; and "
    "every question still open. An earlier summary (<summary>) counts like the messages it replaced: "
    "carry its content over. Invent nothing, and do not answer the user: write only the summary."
)
MAX_TRANSCRIPT_CHARS = 400_000  # of the rendered transcript sent: about 100 k tokens
MAX_SUMMARY_CHARS = 64 * 1024  # of the summary returned, which every later model call reads
CUT_NOTE_CHARS = 32  # room for `texts.cut`'s note in a text cut short: its count has up to 13 digits


class CompactionActivities:
    """The compaction activity, sharing one worker's `ModelActivities` (its settings, HTTP
    client, redactor and transcript reader; tests give it one whose `read_context` is fixed)."""

    def __init__(self, model: ModelActivities) -> None:
        self._model = model

    @activity.defn(name=COMPACT_ACTIVITY)
    async def compact(self, input: CompactInput) -> CompactResult:
        began = time.monotonic()
        agent, messages = await self._model.read_context(input.upto)
        if not messages:
            raise failed(f"nothing to summarize in messages[:{input.upto}]")
        settings = self._model.settings
        model = input.model or settings.model
        endpoint = endpoint_for(self._model.providers, model, agent)
        # The agent's model settings and bounds, without anything that asks for tools or a format.
        instructions = f"{HEAD}\n\n{input.instructions.strip() or DEFAULT_GUIDANCE}"
        plain: dict[str, object] = {
            "instructions": instructions,
            "tools": [],
            "handoffs": [],
            "output_schema": None,
            "team": [],
        }
        spec = agent.model_copy(update=plain)
        body = build_request(endpoint, spec, [UserMessage(content=render(messages))], settings.stream)
        reply, _ = await self._model.send(spec, endpoint, body, settings.stream, turn=input.turn, began=began)
        summary = (reply.message.content or "").strip()
        if not summary:
            why = f"finish reason {reply.finish_reason!r}" if reply.finish_reason else "no reason given"
            raise failed(f"model {model} returned a blank summary of {len(messages)} messages ({why})")
        if len(summary) > MAX_SUMMARY_CHARS:
            summary = cut(summary, MAX_SUMMARY_CHARS)
        log.info(
            "compaction ok: agent=%s model=%s turn=%d messages=%d summary_chars=%d tokens=%d",
            agent.name, model, input.turn, len(messages), len(summary), reply.usage.total_tokens,
        )  # fmt: skip
        return CompactResult(summary=summary, usage=reply.usage)


def failed(message: str) -> ApplicationError:
    return ApplicationError(f"compaction failed: {message}", type=COMPACTION_FAILED, non_retryable=True)


def render(messages: list[Message], limit: int = MAX_TRANSCRIPT_CHARS) -> str:
    """The messages as one text, in the tags of the module's docstring, at most `limit` characters.

    When they do not fit, each message keeps its head, and all get the same allowance: the
    largest length L such that the texts cut to L fit (the short ones stay whole; only the
    longest, typically tool results, are cut, each to L with a note saying how much went).
    Should the tags alone not fit, the whole text is cut at `limit`."""
    parts = [frame for m in messages for frame in _frames(m)]
    texts = [text for _, text, _ in parts]
    whole = _join(parts, texts)
    if len(whole) <= limit:
        return whole
    tags = len(whole) - sum(len(text) for text in texts)
    allowance = _allowance([len(text) for text in texts], limit - tags)
    return cut(_join(parts, [cut(text, allowance) for text in texts]), limit)


def cut(text: str, limit: int) -> str:
    """`text` when it fits in `limit` characters; else its head and a note, `limit` in all."""
    if len(text) <= limit:
        return text
    return texts.cut(text, max(limit - CUT_NOTE_CHARS, 0))


def _allowance(sizes: list[int], budget: int) -> int:
    """The largest L with sum(min(size, L)) <= budget (a size cut to L keeps its head)."""
    rest = max(budget, 0)
    ordered = sorted(sizes)
    for i, size in enumerate(ordered):
        share = rest // (len(ordered) - i)
        if size > share:
            return share
        rest -= size
    return ordered[-1] if ordered else 0  # all fit


def _join(parts: list[tuple[str, str, str]], texts: list[str]) -> str:
    return "\n".join(f"{open_}{text}{close}" for (open_, _, close), text in zip(parts, texts, strict=True))


def _frames(m: Message) -> list[tuple[str, str, str]]:
    """(opening tag, text, closing tag) for one message: an assistant's text and each of its
    calls have one each."""
    if isinstance(m, AssistantMessage):
        text = [("<assistant>\n", m.content, "\n</assistant>")] if m.content else []
        return text + [(f"<tool_call {_names(c.name, c.call_id)}>", c.arguments, "</tool_call>") for c in m.tool_calls]
    if isinstance(m, ToolMessage):
        error = ' error="true"' if m.is_error else ""
        return [(f"<tool_result {_names(m.name, m.call_id)}{error}>\n", m.content, "\n</tool_result>")]
    if m.summary_of > 0:
        return [(f'<summary of="{m.summary_of}">\n', m.content, "\n</summary>")]
    return [("<user>\n", m.content, "\n</user>")]


def _names(name: str, call_id: str) -> str:
    return f"name={json.dumps(name, ensure_ascii=False)} id={json.dumps(call_id, ensure_ascii=False)}"
