"""Gemini's requests as the fake checks them (dialects.Dialect.auth calls `require_key`,
gemini.parse calls `check`). A request is refused as the real API refuses it, with Google's
error shape (gemini.error_body: `{"error": {"code", "message", "status"}}`, e.g. 400
INVALID_ARGUMENT):
- without the `x-goog-api-key` header (403 PERMISSION_DENIED; any key is accepted);
- with a field the API does not know, at the top level, in a content, a part, the
  generationConfig or its thinkingConfig ("Invalid JSON payload received. Unknown name ...");
  either spelling of a known field (camelCase or snake_case) is accepted, as the real API does;
- without contents, with a content whose role is not "user" or "model", or without parts;
- with a user content of `functionResponse` parts that does not answer the model content just
  before it: a call of that content for each response (by name, and by id when both have one),
  as many responses as calls;
- with a thinking budget and a thinking level at once, or a response schema without
  `responseMimeType: application/json`, or both response schema fields;
- with a thought signature that is not the one it issued (changed, moved to another call), or,
  when the request enables thinking, a step of the current turn (model contents since the last
  user text) whose first call carries none. Google's placeholder `skip_thought_signature_validator`
  passes, as on the real API.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from durable_agent_runner.testing.fake_llm.conversation import as_dict, as_list, canonical
from durable_agent_runner.testing.fake_llm.wire import ApiError

SKIP_SIGNATURE = "skip_thought_signature_validator"
_STATUS = {
    400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
    409: "ABORTED", 429: "RESOURCE_EXHAUSTED", 499: "CANCELLED", 500: "INTERNAL", 501: "UNIMPLEMENTED",
    503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED",
}  # fmt: skip


def _names(*camel: str) -> frozenset[str]:
    """Each field under both of the spellings the real API reads."""
    snake = ("".join(f"_{c.lower()}" if c.isupper() else c for c in name) for name in camel)
    return frozenset((*camel, *snake))


_REQUEST = _names(
    "model", "contents", "tools", "toolConfig", "safetySettings", "systemInstruction", "generationConfig",
    "cachedContent",
)  # fmt: skip
_CONTENT = _names("role", "parts")
_PART = _names(
    "text", "inlineData", "functionCall", "functionResponse", "fileData", "executableCode", "codeExecutionResult",
    "thought", "thoughtSignature", "videoMetadata", "partMetadata", "mediaResolution",
)  # fmt: skip
_CONFIG = _names(
    "stopSequences", "responseMimeType", "responseSchema", "responseJsonSchema", "responseModalities",
    "candidateCount", "maxOutputTokens", "temperature", "topP", "topK", "seed", "presencePenalty",
    "frequencyPenalty", "responseLogprobs", "logprobs", "enableEnhancedCivicAnswers", "speechConfig",
    "thinkingConfig", "imageConfig", "mediaResolution",
)  # fmt: skip
_THINKING = _names("includeThoughts", "thinkingBudget", "thinkingLevel")


def status_name(status: int) -> str:
    return _STATUS.get(status, "INTERNAL" if status >= 500 else "FAILED_PRECONDITION")


def invalid(message: str) -> ApiError:
    return ApiError(400, message)


def require_key(headers: dict[str, str]) -> None:
    """The real API answers a call without a key 403 (a key in the URL's `key=` is not read here)."""
    if not headers.get("x-goog-api-key"):
        raise ApiError(
            403,
            "Method doesn't allow unregistered callers (callers without established identity). "
            "Please use API Key or other form of API consumer identity to call this API.",
        )


def get(obj: dict[str, Any], camel: str) -> Any:
    """A field under either spelling."""
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)
    return obj.get(camel, obj.get(snake))


def _known(obj: dict[str, Any], fields: frozenset[str], where: str) -> None:
    unknown = sorted(set(obj) - fields)
    if unknown:
        at = f" at '{where}'" if where else ""
        raise invalid(f'Invalid JSON payload received. Unknown name "{unknown[0]}"{at}: Cannot find field.')


def _object(value: object, where: str) -> dict[str, Any]:
    obj = as_dict(value)
    if obj is None:
        raise invalid(f"Invalid JSON payload received. Invalid value at '{where}': expected an object.")
    return obj


def signature(name: str, args: object) -> str:
    """The thought signature the fake gives a call: the same for the same call, checkable later."""
    digest = hashlib.sha256(f"fake-gemini\n{name}\n{canonical(args if isinstance(args, dict) else {})}".encode())
    return base64.b64encode(digest.digest()[:24]).decode()


def same_signature(given: object, issued: str) -> bool:
    """A signature is bytes: the API reads base64 in either alphabet (Google's SDK writes it back
    URL-safe), so two spellings of the same bytes are the same signature."""
    if not isinstance(given, str):
        return False
    try:
        return base64.urlsafe_b64decode(given.replace("+", "-").replace("/", "_") + "==") == base64.b64decode(issued)
    except ValueError:
        return False


def thinking_enabled(body: dict[str, Any]) -> bool:
    config = as_dict(get(as_dict(get(body, "generationConfig")) or {}, "thinkingConfig")) or {}
    budget = get(config, "thinkingBudget")
    return bool(get(config, "thinkingLevel")) or (budget is not None and budget != 0)


def _check_config(body: dict[str, Any]) -> None:
    config = get(body, "generationConfig")
    if config is None:
        return
    config = _object(config, "generation_config")
    _known(config, _CONFIG, "generation_config")
    thinking = get(config, "thinkingConfig")
    if thinking is not None:
        thinking = _object(thinking, "generation_config.thinking_config")
        _known(thinking, _THINKING, "generation_config.thinking_config")
        if get(thinking, "thinkingBudget") is not None and get(thinking, "thinkingLevel") is not None:
            raise invalid("You can only set only one of thinking budget and thinking level.")
    schema, json_schema = get(config, "responseSchema"), get(config, "responseJsonSchema")
    if schema is not None and json_schema is not None:
        raise invalid("response_schema and response_json_schema cannot both be set.")
    if (schema is not None or json_schema is not None) and get(config, "responseMimeType") != "application/json":
        raise invalid("response_mime_type must be application/json when a response schema is set.")


def _calls(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [fc for p in parts if (fc := as_dict(get(p, "functionCall"))) is not None]


def _check_contents(body: dict[str, Any]) -> list[dict[str, Any]]:
    raw = get(body, "contents")
    if raw is None:
        raise invalid("* GenerateContentRequest.contents: contents is not specified")
    items = as_list(raw)
    if items is None:
        raise invalid("Invalid JSON payload received. Invalid value at 'contents': expected a list.")
    if not items:
        raise invalid("* GenerateContentRequest.contents: contents is not specified")
    contents: list[dict[str, Any]] = []
    for i, item in enumerate(items):
        content = _object(item, f"contents[{i}]")
        _known(content, _CONTENT, f"contents[{i}]")
        if content.get("role") not in ("user", "model"):
            raise invalid(f"Please use a valid role: user, model. (contents[{i}].role: {content.get('role')!r})")
        parts = as_list(content.get("parts"))
        if not parts:
            raise invalid(f"* GenerateContentRequest.contents[{i}].parts: contents.parts must not be empty.")
        for j, part in enumerate(parts):
            _known(_object(part, f"contents[{i}].parts[{j}]"), _PART, f"contents[{i}].parts[{j}]")
        contents.append(content)
    if contents[0]["role"] == "model" and _calls(contents[0]["parts"]):
        raise invalid(
            "Please ensure that function call turn comes immediately after a user turn or after a function "
            "response turn."
        )
    for i in range(len(contents)):
        _check_responses(contents, i)
    return contents


def _check_responses(contents: list[dict[str, Any]], i: int) -> None:
    """A user content of function responses answers the calls of the model content before it."""
    responses = [fr for p in contents[i]["parts"] if (fr := as_dict(get(p, "functionResponse"))) is not None]
    if not responses:
        return
    calls = _calls(contents[i - 1]["parts"]) if i > 0 and contents[i - 1]["role"] == "model" else []
    if not calls:
        raise invalid(
            f"Please ensure that function response turn comes immediately after a function call turn. (contents[{i}])"
        )
    if len(responses) != len(calls):
        raise invalid(
            "Please ensure that the number of function response parts is equal to the number of function "
            f"call parts of the function call turn. (contents[{i}]: {len(responses)} responses, {len(calls)} calls)"
        )
    open_calls = list(calls)
    for fr in responses:
        match = next(
            (
                c
                for c in open_calls
                if c.get("name") == fr.get("name") and (not c.get("id") or not fr.get("id") or c["id"] == fr["id"])
            ),
            None,
        )
        if match is None:
            raise invalid(
                f"Function response {fr.get('name')!r} in contents[{i}] answers no function call of the "
                "previous model turn."
            )
        open_calls.remove(match)


def _check_signatures(contents: list[dict[str, Any]], thinking: bool) -> None:
    last_user_text = max(
        (i for i, c in enumerate(contents) if c["role"] == "user" and any("text" in p for p in c["parts"])),
        default=-1,
    )
    for i, content in enumerate(contents):
        if content["role"] != "model":
            continue
        first = True
        for part in content["parts"]:
            fc = as_dict(get(part, "functionCall"))
            if fc is None:
                continue
            given = get(part, "thoughtSignature")
            issued = signature(str(fc.get("name")), fc.get("args"))
            if given is not None and given != SKIP_SIGNATURE and not same_signature(given, issued):
                raise invalid(f"Corrupted thought signature. (contents[{i}], function call {fc.get('name')!r})")
            if first and given is None and thinking and i > last_user_text:
                raise invalid(
                    f"Function call `{fc.get('name')}` in the `{i}.` content block is missing a `thought_signature`."
                )
            first = False


def check(body: dict[str, Any], model: str) -> list[dict[str, Any]]:
    """The request's contents, once it passed every check (ApiError otherwise)."""
    _known(body, _REQUEST, "")
    if body.get("model") not in (None, model, f"models/{model}"):
        raise invalid(f"The model in the body ({body.get('model')!r}) is not the path's ({model!r}).")
    contents = _check_contents(body)
    _check_config(body)
    _check_signatures(contents, thinking_enabled(body))
    return contents
