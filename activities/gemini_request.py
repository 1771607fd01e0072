"""Gemini's generateContent request: the transcript, tools and settings as a body (its URL,
key and version are the caller's). activities.gemini_wire re-exports `build_request` and
`check_settings` beside its parsers, so the wire is one module to its users.

The transcript:
- the agent's instructions are `systemInstruction`; messages are `contents` with the roles
  "user" and "model"; contents of one role in a row become one content (tool results, then a
  user's text sent mid-turn), so the roles alternate whatever the transcript holds;
- an assistant message is a model content: its text, then one `functionCall` part per call.
  `args` is an object (a Struct): arguments that are not a JSON object (the model sent text that
  is not JSON; the tool already answered that) go back as `{}`. An assistant message with
  neither text nor calls is left out: Gemini refuses a content without parts;
- a tool result is a `functionResponse` part, `{"output": text}` (`{"error": text}` when the
  tool failed: the two keys the API's reference gives a meaning; Google's guides often write
  "result", which the API reads as a whole object of output), in a user content with the other
  results of that step;
- ids: Gemini 3 gives each call an `id` and asks for it back on the call and its response;
  Gemini 2.5 gives none. The provider's id goes back on both exactly as it came, and no id goes
  when the provider gave none (or gave one id twice in a step: it would pair nothing);
- thought signatures: a `Thinking(provider="gemini", kind="signature")` rides back, unchanged,
  as `thoughtSignature` on the part it came on (its call's `functionCall` part, or the text part
  when its `call_id` is ""; the last such one when there were several). Other providers'
  thinking is dropped. Gemini 3 refuses a step of the current turn (since the last user message)
  whose first call has no signature; a step that has none (it came from another provider after
  a fallback) gets Google's documented placeholder `skip_thought_signature_validator`.

Tools go out as `parametersJsonSchema` and typed output as `responseJsonSchema` (with
`responseMimeType: application/json`): both take JSON Schema as it is. The older `parameters` and
`responseSchema` take an OpenAPI subset that has no `$ref`/`$defs`, `additionalProperties` or
`title`, all of which pydantic's schemas use; converting would lose meaning (a recursive model
cannot be inlined), so the JSON Schema fields are used instead of a conversion.

Settings go to `generationConfig`: temperature, topP, maxOutputTokens, stopSequences, seed;
`thinking_tokens` is `thinkingConfig.thinkingBudget`; `reasoning_effort` is
`thinkingConfig.thinkingLevel` (MINIMAL/LOW/MEDIUM/HIGH: Gemini 3's control; which levels a
model takes is the model's to say, with a 400). Both at once are refused (`check_settings`): the
API refuses a budget and a level together. Thought summaries (`includeThoughts`) are not asked
for: the transcript keeps only signatures, never thought text. `tool_choice` is
`toolConfig.functionCallingConfig.mode` AUTO / ANY / NONE; a tool's name is ANY with
`allowedFunctionNames: [name]`. `parallel_tool_calls=False` is refused: Gemini has no switch
for it (True is what it does anyway). `extra_body` is merged last (never over `OWNED`); its
`generationConfig` is merged key by key into ours, so `{"generationConfig": {"topK": 40}}` adds
to the settings instead of replacing them.
"""

from __future__ import annotations

import json
from typing import Any

from durable_agent_runner.activities.wire import (
    OPENING,
    BadSettings,
    check_sendable,
    function_tools,
    output_format,
    settings_for,
)
from durable_agent_runner.workflows.types import (
    AgentSpec,
    AssistantMessage,
    Message,
    ModelSettings,
    ToolMessage,
)

__all__ = ["SKIP_SIGNATURE", "build_request", "check_settings"]

# Google's documented signature for a step the model did not write itself (another provider's).
SKIP_SIGNATURE = "skip_thought_signature_validator"
_MODES = {"auto": "AUTO", "required": "ANY", "none": "NONE"}
_LEVELS = {"minimal": "MINIMAL", "low": "LOW", "medium": "MEDIUM", "high": "HIGH"}


def check_settings(settings: ModelSettings) -> list[str]:
    """One line per setting Gemini's API cannot honour (the run is refused when it starts)."""
    problems: list[str] = []
    if settings.parallel_tool_calls is False:
        problems.append("parallel_tool_calls: Gemini's API has no switch to turn parallel function calls off")
    if settings.thinking_tokens is not None and settings.reasoning_effort is not None:
        problems.append(
            "thinking_tokens and reasoning_effort: Gemini takes a thinking budget or a thinking level, not both"
        )
    return problems


def _generation_config(s: ModelSettings, typed: tuple[str, dict[str, Any]] | None) -> dict[str, Any]:
    plain = {"temperature": s.temperature, "topP": s.top_p, "maxOutputTokens": s.max_output_tokens, "seed": s.seed}
    out: dict[str, Any] = {field: value for field, value in plain.items() if value is not None}
    if s.stop:
        out["stopSequences"] = list(s.stop)
    thinking: dict[str, Any] = {}
    if s.thinking_tokens is not None:
        thinking["thinkingBudget"] = s.thinking_tokens
    if s.reasoning_effort is not None:
        thinking["thinkingLevel"] = _LEVELS[s.reasoning_effort]
    if thinking:
        out["thinkingConfig"] = thinking
    if typed is not None:
        out["responseMimeType"] = "application/json"
        out["responseJsonSchema"] = typed[1]
    return out


def _tool_config(choice: str) -> dict[str, Any]:
    mode = _MODES.get(choice)
    config: dict[str, Any] = {"mode": mode} if mode else {"mode": "ANY", "allowedFunctionNames": [choice]}
    return {"functionCallingConfig": config}


def _args(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _provider_ids(message: AssistantMessage) -> dict[str, str]:
    """The run's call id -> the id the provider gave it, when each call has its own."""
    ids = [c.provider_id for c in message.tool_calls]
    if not all(ids) or len(set(ids)) != len(ids):
        return {}
    return {c.call_id: c.provider_id for c in message.tool_calls}


def _model_parts(message: AssistantMessage, ids: dict[str, str], current: bool) -> list[dict[str, Any]]:
    signed = [t for t in message.thinking if t.provider == "gemini" and t.kind == "signature" and t.signature]
    by_call = {t.call_id: t.signature for t in signed if t.call_id}
    on_text = next((t.signature for t in reversed(signed) if not t.call_id), None)
    parts: list[dict[str, Any]] = []
    if message.content or on_text:
        parts.append({"text": message.content or ""} | ({"thoughtSignature": on_text} if on_text else {}))
    for i, call in enumerate(message.tool_calls):
        fc: dict[str, Any] = {"name": call.name, "args": _args(call.arguments)}
        if call.call_id in ids:
            fc["id"] = ids[call.call_id]
        part: dict[str, Any] = {"functionCall": fc}
        signature = by_call.get(call.call_id) or (SKIP_SIGNATURE if current and i == 0 else None)
        if signature:
            part["thoughtSignature"] = signature
        parts.append(part)
    return parts


def _contents(messages: list[Message]) -> list[dict[str, Any]]:
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    ids: dict[str, str] = {}  # run call id -> provider id, for the results that answer them
    out: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        if isinstance(m, AssistantMessage):
            own = _provider_ids(m)
            ids |= own
            role, parts = "model", _model_parts(m, own, current=i > last_user)
        elif isinstance(m, ToolMessage):
            fr: dict[str, Any] = {"name": m.name, "response": {"error" if m.is_error else "output": m.content}}
            if m.call_id in ids:
                fr["id"] = ids[m.call_id]
            role, parts = "user", [{"functionResponse": fr}]
        else:
            role, parts = "user", [{"text": m.content}]
        if not parts:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["parts"].extend(parts)
        else:
            out.append({"role": role, "parts": parts})
    if out and out[0]["role"] != "user":
        out.insert(0, {"role": "user", "parts": [{"text": OPENING}]})
    return out


def build_request(agent: AgentSpec, messages: list[Message], model: str, stream: bool) -> dict[str, Any]:
    """The body of a generateContent / streamGenerateContent call (`model` and `stream` are the
    URL's, not the body's)."""
    settings = settings_for(agent, messages)
    problems = check_settings(settings)
    if problems:
        raise BadSettings("; ".join(problems))
    check_sendable(settings)
    body: dict[str, Any] = {"contents": _contents(messages)}
    if agent.instructions:
        body["systemInstruction"] = {"parts": [{"text": agent.instructions}]}
    tools = function_tools(agent)
    if tools:
        declarations = [
            {"name": name, "description": text, "parametersJsonSchema": parameters} for name, text, parameters in tools
        ]
        body["tools"] = [{"functionDeclarations": declarations}]
        if settings.tool_choice is not None:
            body["toolConfig"] = _tool_config(settings.tool_choice)
    config = _generation_config(settings, output_format(agent))
    extra = dict(settings.extra_body)
    if isinstance(extra.get("generationConfig"), dict):
        config |= extra.pop("generationConfig")
    if config:
        body["generationConfig"] = config
    return body | extra  # last: a provider's own options win over ours
