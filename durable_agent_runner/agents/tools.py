"""Tools: typed Python functions an agent's model may call, each call run as one activity.

The JSON schema the model sees is built by pydantic from the signature and the docstring: its
first paragraph is the description, and Google (`Args:`) or Sphinx (`:param x:`) entries describe
the parameters. A parameter annotated `ToolContext` is injected at call time and never shown.
(An example user module is in `durable_agent_runner/agents/registry.py`'s docstring.)

Exception contract of `Tool.invoke` -- who hears about a failure:

- The model, as `ToolResult(is_error=True)`: arguments that are not JSON or fail validation, and
  any ordinary exception the tool raises (reported as "ValueError: message", no traceback).
  The model can read these and try again differently.
- Temporal, re-raised so the activity is retried with backoff: `ToolRetryableError`,
  `ConnectionError`, `TimeoutError` and `httpx.TransportError`, transient failures the model
  cannot fix. A tool with side effects should pass `ctx.idempotency_key` downstream so that a
  retried attempt does not repeat them.
- Cancellation (`asyncio.CancelledError`, `GeneratorExit`) passes through: it is Temporal's.
- The model again, for `SystemExit`, `KeyboardInterrupt` and other `BaseException`s the tool
  raises (a library calling `sys.exit()`): re-raised, they would stop the event loop and with it
  every run on the worker; retried, the same code would do the same. The worker handles SIGINT
  and SIGTERM itself, so one seen here came from the tool. It is logged as a WARNING too.

Sync tools run in `durable_agent_runner.agents.executor.ToolThreads`, so they do not stall the event loop; a
thread cannot be interrupted, so on cancellation a sync tool runs on, its result discarded.
"""

from __future__ import annotations

import asyncio
import difflib
import functools
import inspect
import logging
import re
import types
import typing
from collections.abc import Callable, Iterable
from typing import Annotated, Any, Generic, Literal, ParamSpec, TypedDict, TypeVar, Unpack, overload

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema

from durable_agent_runner.agents import executor
from durable_agent_runner.agents.outside import outside_spec
from durable_agent_runner.machine import bounds
from durable_agent_runner.machine.texts import said
from durable_agent_runner.workflows.types import ToolResult, ToolSpec

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what OpenAI-style function calling accepts


class ToolRetryableError(Exception):
    """Raise this from a tool to have the call retried by Temporal rather than shown to the model.

    `retry_after` (seconds), when given, replaces the retry policy's next backoff.
    """

    def __init__(self, message: str = "", *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


RETRYABLE: tuple[type[BaseException], ...] = (ToolRetryableError, ConnectionError, TimeoutError, httpx.TransportError)


class ToolContext(BaseModel):
    """Injected into a tool parameter annotated `ToolContext`; hidden from the model."""

    model_config = ConfigDict(frozen=True)

    run_id: str  # the workflow id
    call_id: str
    idempotency_key: str  # the same on every retry of this call: workflow id + call id
    turn: int
    attempt: int
    # A tool that completes outside (`completes="outside"`): the signed URL its outside system
    # POSTs the completion to (docs/outside-completion.md); None without COMPLETION_* settings.
    completion_url: str | None = None


class ToolOptions(TypedDict, total=False):
    """Options of `@tool(...)`; unset ones take `ToolSpec`'s defaults."""

    name: str
    description: str  # default: the docstring's first paragraph
    timeout_seconds: float
    heartbeat_seconds: float
    max_attempts: int
    # Cheap and idempotent (a pure lookup, a conversion): run as a local activity, in the same
    # workflow task as the model's reply. No heartbeats; keep it to a few seconds at most.
    local: bool
    # Running it twice is harmful (a payment, an email): one attempt, never retried. An attempt
    # that ends without a result (its worker killed, a timeout, a lost heartbeat) puts the call
    # in doubt and a person decides (`client.py resolve`); an error the tool raises goes to the
    # model. Not with `local` (a local activity is re-run after a crash).
    once: bool
    # Seconds a wait for a person on a call of it may last before the escalation webhook hears of
    # it (docs/notifications.md); default: the agent's `notify.escalate_after`.
    escalate_after: float
    # "outside": the tool starts the work and returns; the call waits until an outside system
    # completes it (`client.py complete`, `RunHandle.complete_call`, `ctx.completion_url`), at most
    # `outside_timeout_seconds` (default 7 days), then `on_outside_timeout`: "tell_model" (default)
    # or "person" (the call goes in doubt). `outside_result`: the completion's type (default: any JSON).
    completes: Literal["inside", "outside"]
    outside_timeout_seconds: float
    on_outside_timeout: Literal["tell_model", "person"]
    outside_result: Any


def refuse_unknown(what: str, given: Iterable[str], known: Iterable[str]) -> None:
    """TypeError naming each of `given` not in `known`, with the close match when there is one
    (`unknown agent option(s): max_turn (did you mean max_turns?)`): a typo is never dropped."""
    names = sorted(set(known))
    unknown = sorted(set(given) - set(names))
    if unknown:
        parts, unmatched = [], False
        for name in unknown:
            close = difflib.get_close_matches(name, names, n=1)
            parts.append(f"{name} (did you mean {close[0]}?)" if close else name)
            unmatched = unmatched or not close
        known_list = f"; known: {', '.join(names)}" if unmatched else ""
        raise TypeError(f"unknown {what}(s): {', '.join(parts)}{known_list}")


LISTS = ("tools", "handoffs", "mcp_servers", "input_guardrails", "output_guardrails")  # an Agent's


def refuse_slips(agent: object, data: dict[str, Any]) -> None:
    """The commonest slips of an Agent's lists, named with their fix, where pydantic said each
    item was an instance of neither of two classes: one item where a list belongs (a model is
    iterable: `mcp_servers=McpServer(...)` was ten errors), a plain function in `tools=[...]`,
    and an agent's name in `handoffs=[...]`."""
    for key in LISTS:
        one = data.get(key)
        if isinstance(one, BaseModel | Tool) or callable(one):
            raise TypeError(f"agent {agent!r}: {key} is a list: {key}=[{type(one).__name__}(...)], not the one item")
    tools, handoffs = (v if isinstance(v := data.get(k), list | tuple) else [] for k in ("tools", "handoffs"))
    for i, item in enumerate(tools):  # anything else but a list is pydantic's to say
        if inspect.isfunction(item) or inspect.ismethod(item) or isinstance(item, functools.partial):
            what = getattr(item, "__name__", "")
            raise TypeError(f"agent {agent!r}: tools[{i}] is the plain function {what}: decorate it with @tool")
    for i, item in enumerate(handoffs):
        if isinstance(item, str):
            raise TypeError(f"agent {agent!r}: handoffs[{i}] is the name {item!r}: give the Agent itself")


class Tool(Generic[P, R]):
    """A function the model may call. Calling the `Tool` calls the function unchanged."""

    __name__: str  # copied from the function, with its docstring, by functools.update_wrapper

    def __init__(self, fn: Callable[P, R], /, **options: Unpack[ToolOptions]) -> None:
        refuse_unknown("tool option", options, ToolOptions.__optional_keys__)
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.name: str = options.get("name") or str(getattr(fn, "__name__", ""))
        if not TOOL_NAME.match(self.name):
            raise ValueError(f"tool name {self.name!r} must be 1-64 letters, digits, '_' or '-'")
        if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):  # it would hand back the generator
            raise TypeError(f"tool '{self.name}' is a generator: a tool returns one value (collect what it yields)")
        summary, param_docs = _parse_docstring(inspect.getdoc(fn) or "")
        self.args_model, self._params, self._context_param = _args_model(fn, self.name, param_docs)
        self._is_async = inspect.iscoroutinefunction(fn)
        limits = {k: v for k, v in options.items() if k in ("timeout_seconds", "heartbeat_seconds", "max_attempts")}
        if any(not isinstance(v, int | float) or v <= 0 for v in limits.values()):
            raise ValueError(f"tool '{self.name}': {', '.join(limits)} must be positive numbers")
        once = bool(options.get("once", False))
        if once and options.get("local"):
            raise ValueError(f"tool '{self.name}': once=True cannot be local (a local activity re-runs after a crash)")
        # Built once, so a bad tool fails when its module is imported, not in the middle of a run.
        self._spec = ToolSpec.model_validate(
            {"name": self.name, "description": options.get("description", summary), **limits}
            | {"parameters": parameters_schema(self.args_model), "local": bool(options.get("local", False))}
            | {"once": once, "outside": outside_spec(self.name, options)}
            | ({"escalate_after": options["escalate_after"]} if "escalate_after" in options else {})
        )

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"

    def spec(self) -> ToolSpec:
        return self._spec.model_copy(deep=True)

    def validate(self, arguments_json: str) -> BaseModel | str:
        """The validated arguments, or a message saying what is wrong with them."""
        return validate_arguments(self.name, self.args_model, arguments_json)

    async def invoke(
        self, arguments_json: str, ctx: ToolContext, threads: executor.ToolThreads | None = None
    ) -> ToolResult:
        """Run the tool on the model's raw JSON arguments; see the module docstring for errors.
        A sync tool runs in `threads` (default: a pool shared by tools invoked outside a worker)."""

        def error(message: str) -> ToolResult:  # an exception's text may hold a lone surrogate too
            return ToolResult(call_id=ctx.call_id, tool=self.name, output=bounds.clean_text(message), is_error=True)

        args = self.validate(arguments_json)
        if isinstance(args, str):
            return error(args)
        kwargs: dict[str, Any] = {param: getattr(args, field) for field, param in self._params.items()}
        if self._context_param:
            kwargs[self._context_param] = ctx
        fn: Callable[..., Any] = self.fn
        try:
            if self._is_async:
                result = await fn(**kwargs)
            else:
                result = await (threads or executor.shared()).run(fn, **kwargs)
                if inspect.isawaitable(result):
                    result = await result
            return ToolResult(call_id=ctx.call_id, tool=self.name, output=bounds.result_text(result))
        except RETRYABLE:
            raise
        except Exception as exc:
            return error(describe_exception(exc))
        except (asyncio.CancelledError, GeneratorExit):
            raise
        except BaseException as exc:  # SystemExit, KeyboardInterrupt, ...: see the module docstring
            log.warning("tool %s call %s raised %s; the model is told", self.name, ctx.call_id, type(exc).__name__)
            return error(f"{describe_exception(exc)} (the tool tried to stop the worker; it did not)")


@overload
def tool(fn: Callable[P, R], /, **options: Unpack[ToolOptions]) -> Tool[P, R]: ...
@overload
def tool(**options: Unpack[ToolOptions]) -> Callable[[Callable[P, R]], Tool[P, R]]: ...
def tool(
    fn: Callable[P, R] | None = None, /, **options: Unpack[ToolOptions]
) -> Tool[P, R] | Callable[[Callable[P, R]], Tool[P, R]]:
    """Make a `Tool` of a typed function: `@tool`, `@tool(name=..., ...)` or `tool(fn, name=...)`."""
    if fn is None:
        return lambda f: Tool(f, **options)
    return Tool(fn, **options)


def tool_name_for(text: str) -> str:
    """`text` as a function name models accept: letters, digits, '_' and '-', at most 64."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", text)[:64] or "_"


def parse_arguments(tool: str, arguments_json: str) -> dict[str, Any] | str:
    """The model's raw JSON arguments for `tool` as an object, or a message for the model saying
    why they are not one (shared by every kind of tool, MCP tools included)."""
    try:  # within workflows.bounds: too deep, too long or a number too long is a bound, not a crash
        raw: object = bounds.parse_json(arguments_json) if arguments_json.strip() else {}
    except bounds.OutsideDataError as exc:
        if exc.bound is None:
            return f"invalid JSON in arguments for tool '{tool}': {exc}; got {_excerpt(arguments_json)}"
        got = "" if exc.bound == "refused" else f"; got {_excerpt(arguments_json)}"  # refused: the text is why
        return f"arguments for tool '{tool}' refused: {exc}{got}"
    if not isinstance(raw, dict):
        return f"arguments for tool '{tool}' must be a JSON object, got {_excerpt(arguments_json)}"
    return typing.cast(dict[str, Any], raw)


def validate_arguments(tool: str, model: type[BaseModel], arguments_json: str) -> BaseModel | str:
    """The model's raw JSON arguments for `tool` as `model`, or a message for the model saying
    what is wrong with them (shared by tools and agents offered as tools)."""
    raw = parse_arguments(tool, arguments_json)
    if isinstance(raw, str):
        return raw
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        expected = ", ".join(f.alias or name for name, f in model.model_fields.items()) or "none"
        return f"invalid arguments for tool '{tool}': {describe_errors(exc)} (parameters: {expected})"


# ----------------------------------------------------------------------------------- schema

_ARGS_SECTIONS = {"Args", "Arguments", "Parameters", "Params", "Keyword Args", "Keyword Arguments"}
_SECTIONS = _ARGS_SECTIONS | {
    "Returns", "Return", "Yields", "Raises", "Example", "Examples", "Note", "Notes",
    "Warning", "Warnings", "See Also", "Todo", "Attributes", "Other Parameters",
}  # fmt: skip
_GOOGLE_ARG = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_PARAM = re.compile(r"^:param\s+(?:[^:]+\s+)?(\w+)\s*:\s*(.*)$")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """(summary, {param: description}) from a Google- or Sphinx-style docstring."""
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    for line in lines:
        if not line.strip() or line.strip().rstrip(":") in _SECTIONS or line.startswith(":"):
            break
        summary.append(line.strip())
    params: dict[str, str] = {}
    current: str | None = None
    cont_indent = 1  # a continuation line must be indented at least this much
    header_indent: int | None = None  # set while inside a Google args section
    for line in lines:
        text, indent = line.strip(), len(line) - len(line.lstrip())
        if not text:
            continue
        if header_indent is not None and indent <= header_indent:
            header_indent = None  # left the args section
        if m := _SPHINX_PARAM.match(text):
            current, cont_indent, params[m[1]] = m[1], 1, m[2]
        elif text.endswith(":") and text[:-1] in _SECTIONS:
            current, header_indent = None, indent if text[:-1] in _ARGS_SECTIONS else None
        elif header_indent is not None and (current is None or indent < cont_indent) and (m := _GOOGLE_ARG.match(text)):
            current, cont_indent, params[m[1]] = m[1], indent + 1, m[2]
        elif current is not None and indent >= cont_indent and not text.startswith(":"):
            params[current] = f"{params[current]} {text}".strip()
        else:
            current = None
    return " ".join(summary), params


def _is_context(annotation: Any) -> bool:
    if isinstance(annotation, type):
        return issubclass(annotation, ToolContext)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):  # `ToolContext | None`
        return [a for a in typing.get_args(annotation) if a is not type(None)] == [ToolContext]
    return False


def _args_model(
    fn: Callable[..., Any], tool_name: str, param_docs: dict[str, str]
) -> tuple[type[BaseModel], dict[str, str], str | None]:
    """The pydantic model of the parameters, {model field: parameter}, and the context param."""
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise TypeError(f"tool '{tool_name}': cannot resolve its type annotations: {exc}") from exc
    fields: dict[str, Any] = {}
    params: dict[str, str] = {}
    context_param: str | None = None
    for p in inspect.signature(fn).parameters.values():
        where = f"tool '{tool_name}', parameter '{p.name}'"
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            raise TypeError(f"{where}: *args, **kwargs and positional-only parameters are not supported")
        if p.name not in hints:
            raise TypeError(f"{where} has no type annotation; the model needs one to know what to send")
        annotation = hints[p.name]
        if _is_context(annotation):
            context_param = p.name
            continue
        meta: list[Any] = []
        described = [m for m in (*getattr(annotation, "__metadata__", ()), p.default) if isinstance(m, FieldInfo)]
        if p.name in param_docs and not any(m.description for m in described):
            meta.append(Field(description=param_docs[p.name]))
        field = p.name
        if field.startswith("_") or hasattr(BaseModel, field):  # e.g. `json`, `schema`: alias them
            field = f"arg_{p.name.lstrip('_')}"
            meta.append(Field(alias=p.name))
        fields[field] = (
            Annotated[(annotation, *meta)] if meta else annotation,
            ... if p.default is p.empty else p.default,
        )
        params[field] = p.name
    try:
        model = create_model(
            f"{tool_name}_arguments",
            __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=False, protected_namespaces=()),
            **fields,
        )
        model.model_json_schema()
    except Exception as exc:
        raise TypeError(f"tool '{tool_name}': cannot build a JSON schema for its parameters: {exc}") from exc
    return model, params, context_param


class _NoFieldTitles(GenerateJsonSchema):
    """Leaves out pydantic's generated field titles: noise the model would pay tokens for."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def parameters_schema(model: type[BaseModel]) -> dict[str, object]:
    """The JSON schema the model sees for arguments validated by `model`."""
    raw = model.model_json_schema(schema_generator=_NoFieldTitles)
    defs = {"$defs": raw["$defs"]} if "$defs" in raw else {}  # nested models and enums
    properties, required = raw.get("properties", {}), raw.get("required", [])
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False, **defs}


# ------------------------------------------------------------------------------- formatting


def describe_errors(exc: ValidationError, limit: int = 10, whole: str = "arguments") -> str:
    """Validation errors in one line a model can act on: `where: what; ...` (`whole`: the name
    of an error that is about the value as a whole)."""
    errors = exc.errors(include_url=False)
    parts = [f"{'.'.join(map(str, e['loc'])) or whole}: {said(e)}" for e in errors[:limit]]
    if len(errors) > limit:
        parts.append(f"... and {len(errors) - limit} more")
    return "; ".join(parts)


def describe_exception(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _excerpt(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")
