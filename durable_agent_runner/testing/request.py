"""What an offline model reads of a request: `ModelRequest`, and which agent sent it.

The runner sends no agent name (a real provider has no use for it), so the agent is recognized by
what its author wrote: its instructions and its tools (handoffs included), exactly as the runner's
own wire code renders them. Two agents with the same instructions and tools cannot be told apart.

The turn is counted from the request alone, so a retried model call gets the same answer: the
assistant messages this agent made before (after a handoff, the other agent's are not its own).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from durable_agent_runner.activities.wire import function_tools
from durable_agent_runner.agents.agent import Agent
from durable_agent_runner.agents.tools import tool_name_for
from durable_agent_runner.testing.fake_llm.conversation import Api, Conversation, as_dict, as_list, content_text
from durable_agent_runner.testing.fake_llm.dialects import DIALECTS
from durable_agent_runner.testing.fake_llm.scripts import Answer
from durable_agent_runner.testing.fake_llm.wire import ApiError
from durable_agent_runner.workflows.types import AssistantMessage, Message, ToolCall, ToolMessage, UserMessage

__all__ = ["AgentIndex", "Answer", "ModelRequest", "describe", "failure", "output_schema", "request_of"]


@dataclass(frozen=True)
class ModelRequest:
    """One model call as the runner sent it, typed: what a `FunctionModel`'s function gets, and
    what `ModelServer.requests` records."""

    agent: str  # the agent that asks; "" when it matches none the model knows
    turn: int  # this agent's model calls before this one in the run: 0 is its first
    messages: tuple[Message, ...]  # the conversation, oldest first (instructions are apart)
    tools: tuple[str, ...]  # the tools offered, transfer tools included, in order
    instructions: str = ""
    output_schema: Mapping[str, Any] | None = None  # the JSON schema asked for, when typed output
    model: str = ""
    api: Api = "chat"
    stream: bool = False
    body: Mapping[str, Any] = field(default_factory=lambda: {}, repr=False, compare=False)  # as sent

    @property
    def prompt(self) -> str:
        """The last user message's text ("" when there is none)."""
        return next((m.content for m in reversed(self.messages) if isinstance(m, UserMessage)), "")

    @property
    def tool_results(self) -> tuple[ToolMessage, ...]:
        """The tool results since the last user message, in order."""
        found: list[ToolMessage] = []
        for m in reversed(self.messages):
            if isinstance(m, UserMessage):
                break
            if isinstance(m, ToolMessage):
                found.append(m)
        return tuple(reversed(found))

    def result_of(self, tool: str) -> str | None:
        """The latest result of `tool` since the last user message, or None."""
        return next((m.content for m in reversed(self.tool_results) if m.name == tool), None)

    @property
    def turn_since_prompt(self) -> int:
        """The model turns (assistant messages) since the last user message."""
        turns = 0
        for m in reversed(self.messages):
            if isinstance(m, UserMessage):
                break
            turns += isinstance(m, AssistantMessage)
        return turns

    def call_of(self, call_id: str) -> ToolCall | None:
        """The tool call with this id in the conversation (the one a tool result answers), or None."""
        calls = (c for m in self.messages if isinstance(m, AssistantMessage) for c in m.tool_calls)
        return next((c for c in calls if c.call_id == call_id), None)

    @property
    def tool_schemas(self) -> dict[str, dict[str, Any]]:
        """Each offered tool's parameters (JSON schema), by name, in the order offered."""
        chat_like = self.api in ("anthropic", "gemini")
        return tool_parameters(DIALECTS[self.api].as_chat(dict(self.body)) if chat_like else self.body)


@dataclass(frozen=True)
class _Known:
    name: str
    instructions: str
    tools: frozenset[str]
    handoffs: Mapping[str, str]  # transfer tool name -> the agent it hands off to


class AgentIndex:
    """The agents a model knows (each with its team), to tell which one sent a request."""

    def __init__(self, agents: Iterable[Agent] = ()) -> None:
        self._known: dict[str, _Known] = {}
        for agent in agents:
            self.add(agent)

    def add(self, agent: Agent) -> None:
        for member in (agent, *agent.team()):
            if member.name in self._known:
                continue
            spec = member.spec()
            tools = frozenset(name for name, _, _ in function_tools(spec))
            handoffs = {h.tool_name: h.agent for h in spec.handoffs}
            self._known[member.name] = _Known(member.name, spec.instructions, tools, handoffs)

    def names(self) -> list[str]:
        return sorted(self._known)

    def identify(self, instructions: str, tools: Sequence[str]) -> str:
        """The agent these instructions and tools belong to; "" when none; ValueError when two fit."""
        offered = frozenset(tools)
        # Its own tools are all offered (an MCP server's are added when a run starts).
        fits = [k for k in self._known.values() if k.tools <= offered]
        ranked = sorted(
            ((k.instructions == instructions, k.tools == offered, len(k.tools)), k.name)
            for k in fits
            if k.instructions == instructions or (k.tools == offered and k.tools)
        )
        if not ranked:
            return ""
        best = ranked[-1]
        twins = [name for score, name in ranked if score == best[0]]
        if len(twins) > 1:
            raise ValueError(
                f"cannot tell agents {', '.join(repr(n) for n in twins)} apart: they have the same "
                "instructions and tools; give each its own instructions"
            )
        return best[1]

    def handoff_tool(self, agent: str, target: str, offered: Sequence[str]) -> str | None:
        """The tool `agent` calls to hand off to `target`, if it is offered."""
        known = self._known.get(agent)
        names = [tool for tool, to in (known.handoffs if known else {}).items() if to == target]
        names.append(tool_name_for(f"transfer_to_{target}"))
        return next((n for n in names if n in offered), None)

    def turn(self, agent: str, messages: Sequence[Message], offered: Sequence[str]) -> int:
        """How many assistant messages in `messages` `agent` made. A handoff call passes the run
        to the next agent; the run's first agent is the one offered the first handoff's tool."""
        owners: list[str | None] = []  # per assistant message; None: the run's first agent
        owner: str | None = None
        first_transfer = ""
        for m in messages:
            if not isinstance(m, AssistantMessage):
                continue
            owners.append(owner)
            target = next((t for c in m.tool_calls if (t := self._target(c))), "")
            if target:
                first_transfer = first_transfer or next(c.name for c in m.tool_calls if self._target(c))
                owner = target
        first = not first_transfer or first_transfer in offered
        return sum(1 for o in owners if o == agent or (o is None and first))

    def _target(self, c: ToolCall) -> str:
        for known in self._known.values():
            if c.name in known.handoffs:
                return known.handoffs[c.name]
        return c.name.removeprefix("transfer_to_") if c.name.startswith("transfer_to_") else ""


def messages_of(body: Mapping[str, Any], api: Literal["chat", "responses"]) -> list[Message]:
    """The conversation in a request body, as the runner's own message types (either wire)."""
    out: list[Message] = []
    names: dict[str, str] = {}  # call id -> tool name, for the results
    if api == "chat":
        for raw in as_list(body.get("messages")) or []:
            m = as_dict(raw) or {}
            role = m.get("role")
            if role == "user":
                out.append(UserMessage(content=content_text(m.get("content"))))
            elif role == "assistant":
                calls = [_call(as_dict(c) or {}) for c in as_list(m.get("tool_calls")) or []]
                names |= {c.call_id: c.name for c in calls}
                out.append(AssistantMessage(content=content_text(m.get("content")) or None, tool_calls=calls))
            elif role == "tool":
                call_id = str(m.get("tool_call_id", ""))
                out.append(
                    ToolMessage(call_id=call_id, name=names.get(call_id, ""), content=content_text(m.get("content")))
                )
        return out
    items = body.get("input")
    for raw in [{"role": "user", "content": items}] if isinstance(items, str) else as_list(items) or []:
        item = as_dict(raw) or {}
        kind, role = item.get("type"), item.get("role")
        if kind == "function_call":
            c = ToolCall(
                call_id=str(item.get("call_id", "")),
                name=str(item.get("name", "")),
                arguments=str(item.get("arguments", "{}")),
            )
            names[c.call_id] = c.name
            last = out[-1] if out else None
            if isinstance(last, AssistantMessage):  # one response: its text and its calls
                last.tool_calls.append(c)
            else:
                out.append(AssistantMessage(tool_calls=[c]))
        elif kind == "function_call_output":
            call_id = str(item.get("call_id", ""))
            out.append(
                ToolMessage(call_id=call_id, name=names.get(call_id, ""), content=content_text(item.get("output")))
            )
        elif role == "user":
            out.append(UserMessage(content=content_text(item.get("content"))))
        elif role == "assistant":
            out.append(AssistantMessage(content=content_text(item.get("content")) or None))
    return out


def _call(raw: Mapping[str, Any]) -> ToolCall:
    fn = as_dict(raw.get("function")) or {}
    return ToolCall(
        call_id=str(raw.get("id", "")), name=str(fn.get("name", "")), arguments=str(fn.get("arguments", "{}"))
    )


def request_of(conv: Conversation, index: AgentIndex) -> ModelRequest:
    """The typed view of a parsed request; raises ValueError when two known agents fit it."""
    body = conv.request
    chat_like = conv.api in ("anthropic", "gemini")  # read through its Chat Completions equivalent
    seen = DIALECTS[conv.api].as_chat(body) if chat_like else body
    messages = messages_of(seen, "chat" if chat_like else cast(Literal["chat", "responses"], conv.api))
    agent = index.identify(conv.instructions, conv.tool_names)
    return ModelRequest(
        agent=agent,
        turn=index.turn(agent, messages, conv.tool_names) if agent else conv.turn,
        messages=tuple(messages),
        tools=conv.tool_names,
        instructions=conv.instructions,
        output_schema=output_schema(seen),
        model=conv.model,
        api=conv.api,
        stream=conv.stream,
        body=body,
    )


def tool_parameters(body: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Each offered tool's parameters schema, by name, in the order offered (either wire)."""
    out: dict[str, dict[str, Any]] = {}
    for raw in as_list(body.get("tools")) or []:
        spec = as_dict(raw) or {}
        fn = as_dict(spec.get("function")) or spec  # Chat nests it under "function"
        name = fn.get("name")
        if isinstance(name, str):
            out[name] = as_dict(fn.get("parameters")) or {}
    return out


def output_schema(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The JSON schema the reply must match: Chat's response_format, or the Responses API's
    text.format; None when plain text is asked for."""
    chat = as_dict(body.get("response_format")) or {}
    if chat.get("type") == "json_schema":
        return as_dict((as_dict(chat.get("json_schema")) or {}).get("schema"))
    text = as_dict((as_dict(body.get("text")) or {}).get("format")) or {}
    return as_dict(text.get("schema")) if text.get("type") == "json_schema" else None


def describe(request: ModelRequest) -> str:
    """The agent of a request, for messages: its name and turn, or what it offers."""
    if request.agent:
        return f"agent '{request.agent}' at its turn {request.turn}"
    tools = ", ".join(request.tools) or "no tools"
    return f"an agent it does not know (instructions {request.instructions[:60]!r}, tools: {tools})"


def failure(model: str, text: str) -> ApiError:
    return ApiError(400, f"{model}: {text}", code="offline_model_error")
