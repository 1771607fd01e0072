"""What both wires share (activities.chat_wire, activities.responses_wire): their errors, the
fields the runner owns, the functions and output schema an agent offers, and how a server's
values are taken in.

Every byte of a reply is untrusted: whatever arrives, parsing ends in a `ModelReply` or in
`MalformedResponse` / `StreamFailed`, never in another exception that would be retried blindly.
`Reader` is how both wires take in a server's values; bodies and events are parsed by
`parse_body`, within workflows.bounds. A call's arguments past those bounds (too deep, too long,
a number too long) are replaced by text saying why (`bounds.refused`): the workflow treats it as
any unparseable arguments, and the model is told.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from durable_agent_runner.machine import bounds
from durable_agent_runner.workflows.types import (
    EMPTY_PARAMETERS,
    AgentSpec,
    Message,
    ModelReply,
    ModelSettings,
    ToolCall,
    ToolMessage,
)

Mask = Callable[[str], str]  # hides secrets in a server's text (durable_agent_runner.redact.Redactor.text)

MAX_LABEL = 200  # finish_reason, model, response_id
MAX_NAME = 128  # a longer tool name is cut: the workflow answers unknown names with an error
MAX_PROVIDER_ID = 64
MAX_COUNT = 10**9  # a token count above this is a lie
MAX_TOOL_CALLS = 128  # per reply: more is a server gone wrong, not a plan
SAMPLE = 200  # characters of an offending value quoted in an error
# A body's or event's own nesting is under ten: the rest is room for arguments sent as an object,
# which are then bounded as text are (`Reader.arguments`), so that the model hears why.
BODY_DEPTH = 2 * bounds.MAX_DEPTH


class MalformedResponse(ValueError):
    """The server answered 200 with something that is not a usable completion."""


class StreamFailed(RuntimeError):
    """The stream ended early or carried an error event: the call must be retried whole."""


class BadSettings(ValueError):
    """The agent's model settings cannot be sent as they are: its author's mistake, which no
    retry mends. `field` names the setting, when one is to blame."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


# What the runner itself sets, on either wire: `extra_body` may not replace it (a `stream` or a
# `messages` from there would break parsing or replace the transcript; `previous_response_id`
# or `conversation` would make the server add a second copy of the context). One set for both
# wires, so an agent's settings are valid whichever API a worker speaks.
OWNED = frozenset(
    {
        "model", "messages", "input", "instructions", "tools", "stream", "stream_options", "store",
        "response_format", "text", "previous_response_id", "conversation",
        # Gemini's (the REST API reads either spelling): the transcript, and server-side context
        "contents", "systemInstruction", "system_instruction", "cachedContent", "cached_content",
        "system",  # Anthropic's instructions (activities.anthropic_wire)
    }
)  # fmt: skip
TOOL_CHOICES = ("auto", "required", "none")  # any other tool_choice names a tool
# The user's turn the Anthropic and Gemini wires put first when the transcript begins with the
# model's (an edit dropped the prompt, a handoff filter kept only replies): Anthropic refuses a
# first message that is not the user's, Gemini a function call that follows no user turn.
OPENING = "(continued)"


def check_extra_body(extra: Mapping[str, Any]) -> None:
    """Refuses an `extra_body` that sets a field the runner owns, or is not plain JSON."""
    taken = sorted(OWNED.intersection(extra))
    if taken:
        raise BadSettings(f"extra_body may not set {', '.join(taken)}: the runner sets them itself", "extra_body")
    try:  # what no server could parse: NaN and infinities, values that are not JSON at all
        json.dumps(extra, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as err:
        raise BadSettings(f"extra_body must be plain JSON: {err}", "extra_body") from None


def check_sendable(settings: ModelSettings) -> None:
    """Refuses settings no wire may send: an `extra_body` the runner owns or that is not plain
    JSON, or an empty stop sequence (it matches at once: every reply would end before it began)."""
    check_extra_body(settings.extra_body)
    if settings.stop is not None and "" in settings.stop:
        raise BadSettings("stop: a stop sequence may not be empty (every reply would end at once)", "stop")


def handoff_description(agent: str) -> str:
    """What a transfer tool says when its HandoffSpec gives no description."""
    return f"Hand off to the {agent} agent to handle the request."


def function_tools(agent: AgentSpec) -> list[tuple[str, str, dict[str, object]]]:
    """(name, description, parameters) of every function the model may call: the agent's tools,
    then one transfer tool per handoff, which takes no arguments."""
    tools = [(s.name, s.description, s.parameters) for s in agent.tools]
    tools += [
        (h.tool_name, h.description or handoff_description(h.agent), dict(EMPTY_PARAMETERS)) for h in agent.handoffs
    ]
    return tools


def output_format(agent: AgentSpec) -> tuple[str, dict[str, Any]] | None:
    """The typed output's (name, JSON schema), or None. The name is cut to what OpenAI accepts
    (letters, digits, _ and -, at most 64). Sent with `strict: false` on both wires: strict mode
    needs every property required and no open objects, which pydantic's schemas (defaults,
    optional fields, dicts) often are not; the hook activity validates the output anyway."""
    if agent.output_schema is None:
        return None
    name = re.sub(r"[^A-Za-z0-9_-]", "_", agent.output_name)[:64] or "output"
    return name, agent.output_schema


def settings_for(agent: AgentSpec, messages: list[Message]) -> ModelSettings:
    """The agent's settings for this request. A forced tool_choice ("required" or a tool's name)
    applies until a tool has answered: after that the model may reply in text, or it would be
    made to call tools until max_turns (the Agents SDK's `reset_tool_choice`). A choice that names
    no function of the agent's is refused, as OpenAI refuses it: some servers (llama.cpp) would
    ignore it, and the run would go on unforced, unsaid."""
    settings = agent.settings_now()
    choice = settings.tool_choice
    if choice is not None and choice not in TOOL_CHOICES:
        names = [name for name, _, _ in function_tools(agent)]
        if choice not in names:
            known = ", ".join(names[:20]) + (", …" if len(names) > 20 else "") if names else "it has none"
            raise BadSettings(f"tool_choice names {choice!r}, which is no tool of this agent's ({known})")
    forced = settings.tool_choice not in (None, "auto", "none")
    if forced and messages and isinstance(messages[-1], ToolMessage):
        return settings.model_copy(update={"tool_choice": None})
    return settings


@dataclass(frozen=True)
class Reader:
    """Takes in a server's values: strings made valid UTF-8 (a lone surrogate from a `\\ud800`
    escape would fail the reply's serialization), masked, and only then cut."""

    mask: Mask | None = None

    def text(self, value: str) -> str:
        return self.mask(utf8(value)) if self.mask is not None else utf8(value)

    def label(self, value: object, limit: int = MAX_LABEL) -> str | None:
        if not isinstance(value, str):
            return None
        return self.text(value)[:limit] or None

    def name(self, value: object) -> str | None:
        if isinstance(value, int | float) and not isinstance(value, bool):
            value = str(value)  # a name sent as a number is only an unknown name
        return self.label(value, MAX_NAME)

    def sample(self, value: object, limit: int = SAMPLE) -> str:
        """An excerpt of an offending value, for an error message."""
        try:
            text = value if isinstance(value, str) else json.dumps(value, default=repr)
        except (ValueError, RecursionError):
            text = f"<{type(value).__name__}>"
        return self.text(text)[:limit]

    def arguments(self, raw: object) -> str:
        """A tool call's arguments as JSON text: servers send text, objects or nothing. Text
        past the bounds becomes `bounds.refused(why)`; text that is merely not JSON stays."""
        if raw is None or raw == "":
            return "{}"
        try:
            text = self.text(raw if isinstance(raw, str) else json.dumps(raw))
        except (ValueError, RecursionError) as err:
            raise MalformedResponse(f"tool-call arguments cannot be read: {self.sample(raw)}") from err
        try:
            value = bounds.parse_json(text)
        except bounds.OutsideDataError as err:
            return text if err.bound in (None, "refused") else bounds.refused(str(err))
        # A "\ud800" escape would come out of the workflow's own parse as a lone surrogate,
        # which no payload can carry: such text is written again from the clean value.
        return json.dumps(value, ensure_ascii=False) if bounds.escapes_surrogates(text) else text

    def content(self, raw: object) -> str | None:
        """Text from a string, or from a list of content parts (their text joined)."""
        if isinstance(raw, str):
            return self.text(raw)
        if not isinstance(raw, list):
            return None
        return self.text("".join(part_text(p) for p in raw)) or None

    def call(self, provider_id: object, name: object, arguments: object) -> ToolCall:
        """A tool call without its run id yet (see `run_ids`)."""
        named = self.name(name)
        if named is None:
            raise MalformedResponse(f"tool call without a function name: {self.sample(name)}")
        pid = provider_id if isinstance(provider_id, str) else ""
        return ToolCall(
            call_id="",
            name=named,
            arguments=self.arguments(arguments),
            provider_id=self.label(pid, MAX_PROVIDER_ID) or "",
        )

    def json_object(self, data: str) -> dict[str, Any]:
        """One stream event's JSON object."""
        event = parse_body(data, "stream event", self.mask)
        if not isinstance(event, dict):
            raise MalformedResponse("stream event is not a JSON object")
        return event


def parse_body(text: str, what: str = "body", mask: Mask | None = None) -> object:
    """A reply's body or one stream event, parsed within the bounds (its size is the caller's:
    it bounds what it reads), or MalformedResponse saying why not."""
    try:
        return bounds.parse_json(text, max_chars=len(text), max_depth=BODY_DEPTH, max_items=None)
    except bounds.OutsideDataError as err:
        raise MalformedResponse(f"{what} is not JSON ({err}): {Reader(mask).sample(text)!r}") from None


def utf8(text: str) -> str:
    """`text` as valid UTF-8: JSON can carry lone surrogates, which no payload can."""
    return bounds.clean_text(text)


def part_text(part: object) -> str:
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return ""
    text = part.get("text") if part.get("type") != "refusal" else part.get("refusal")
    return text if isinstance(text, str) else ""


def count(value: object) -> int:
    """A token count: an integer in [0, MAX_COUNT]; anything that is not a number counts 0."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:  # NaN
        return 0
    return int(min(max(value, 0), MAX_COUNT))


def run_ids(calls: list[ToolCall], turn: int) -> list[ToolCall]:
    """Give each call the run's own id, `call_{turn}_{index}`: unique in the run, whatever ids
    the provider sent (missing, repeated, reused across turns, numbered per reply, huge)."""
    if len(calls) > MAX_TOOL_CALLS:
        raise MalformedResponse(f"{len(calls)} tool calls in one reply (at most {MAX_TOOL_CALLS})")
    return [c.model_copy(update={"call_id": f"call_{turn}_{i}"}) for i, c in enumerate(calls)]


@dataclass
class Budget:
    """Characters of text and arguments a streamed reply may assemble: what the reply will hold,
    not the stream's framing (which wraps each delta of a few characters in a hundred or more)."""

    limit: int | None = None
    used: int = 0

    def take(self, piece: str) -> str:
        self.used += len(piece)
        if self.limit is not None and self.used > self.limit:
            raise MalformedResponse(f"reply longer than {self.limit} characters")
        return piece


class Wire(Protocol):
    """What every wire module provides (chat_wire, responses_wire, anthropic_wire, gemini_wire):
    pure functions from the transcript to a request body and from a body or a stream to a reply,
    and the settings it cannot send. activities/providers.py chooses one per model."""

    def check_settings(self, settings: ModelSettings) -> list[str]: ...

    def build_request(self, agent: AgentSpec, messages: list[Message], model: str, stream: bool) -> dict[str, Any]: ...
    def parse_response(self, body: object, turn: int, *, mask: Mask | None = None) -> ModelReply: ...
    async def parse_stream(
        self,
        lines: AsyncIterator[str],
        turn: int,
        *,
        on_delta: Callable[[str], None] | None = None,
        mask: Mask | None = None,
        limit: int | None = None,
    ) -> ModelReply: ...
