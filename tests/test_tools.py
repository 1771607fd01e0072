"""Tool definition and invocation, without Temporal."""

from __future__ import annotations

import asyncio
import enum
import json
import re
import threading
import time
from typing import Annotated, Literal

import httpx
import pytest
from pydantic import BaseModel, Field

from durable_agent_runner import Tool, ToolContext, ToolRetryableError, tool
from durable_agent_runner.agents.executor import ToolThreads, size_from_env
from durable_agent_runner.machine import bounds

CTX = ToolContext(run_id="wf-1", call_id="call-1", idempotency_key="wf-1/call-1", turn=1, attempt=1)


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Address(BaseModel):
    street: str
    zip_code: str | None = None


@tool
def get_weather(city: str, unit: Literal["C", "F"] = "C", days: int = 1) -> dict[str, object]:
    """Current weather for a city.

    Returns the temperature; this second paragraph is not part of the description.

    Args:
        city: City name,
            e.g. "Paris".
        unit (str): Temperature unit.

    Returns:
        A dict.
    """
    return {"city": city, "unit": unit, "days": days}


@tool(name="ship", description="Ship a parcel.", timeout_seconds=30, max_attempts=2)
async def ship_parcel(
    address: Address,
    weight_kg: Annotated[float, Field(gt=0, description="Weight in kilograms.")],
    color: Color,
    ctx: ToolContext,
    note: str | None = None,
) -> Address:
    """Ignored because an explicit description was given.

    :param address: Where to.
    :param weight_kg: Overridden by the Annotated description.
    :param note: Free text
        for the courier.
    :returns: The address.
    """
    return address


@tool
def fails(kind: str) -> str:
    """Raise what we are told to."""
    errors: dict[str, Exception] = {
        "value": ValueError("no such city"),
        "retry": ToolRetryableError("upstream busy"),
        "connection": ConnectionError("refused"),
        "timeout": TimeoutError(),
        "transport": httpx.ConnectError("down"),
    }
    raise errors[kind]


def test_sync_tool_schema_from_google_docstring() -> None:
    spec = get_weather.spec()
    assert spec.name == "get_weather"
    assert spec.description == "Current weather for a city."
    assert spec.parameters == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": 'City name, e.g. "Paris".'},
            "unit": {"type": "string", "enum": ["C", "F"], "default": "C", "description": "Temperature unit."},
            "days": {"type": "integer", "default": 1},
        },
        "required": ["city"],
        "additionalProperties": False,
    }
    assert (spec.timeout_seconds, spec.heartbeat_seconds, spec.max_attempts) == (300.0, 30.0, 5)


def test_async_tool_schema_from_sphinx_docstring_with_nested_model_and_enum() -> None:
    spec = ship_parcel.spec()
    assert (spec.name, spec.description, spec.timeout_seconds, spec.max_attempts) == ("ship", "Ship a parcel.", 30, 2)
    props = spec.parameters["properties"]
    assert isinstance(props, dict)
    assert set(props) == {"address", "weight_kg", "color", "note"}  # ctx is injected, not shown
    assert props["address"] == {"$ref": "#/$defs/Address", "description": "Where to."}
    assert props["weight_kg"] == {"type": "number", "exclusiveMinimum": 0, "description": "Weight in kilograms."}
    assert props["color"] == {"$ref": "#/$defs/Color"}
    assert props["note"]["description"] == "Free text for the courier."
    assert spec.parameters["required"] == ["address", "weight_kg", "color"]
    defs = spec.parameters["$defs"]
    assert isinstance(defs, dict)
    assert defs["Color"] == {"title": "Color", "type": "string", "enum": ["red", "blue"]}
    assert defs["Address"]["required"] == ["street"]
    assert defs["Address"]["properties"]["street"] == {"type": "string"}  # no generated field titles


@pytest.mark.asyncio
async def test_tool_is_still_callable_like_the_function() -> None:
    assert isinstance(get_weather, Tool)
    assert get_weather("Oslo") == {"city": "Oslo", "unit": "C", "days": 1}
    assert get_weather.__name__ == "get_weather"
    assert await ship_parcel(Address(street="a"), 1.0, Color.RED, CTX) == Address(street="a")


@pytest.mark.asyncio
async def test_parameters_named_like_basemodel_attributes_are_aliased() -> None:
    @tool
    def parse(json: str, schema: str = "") -> str:
        """Parse."""
        return json + schema

    assert parse.spec().parameters["properties"] == {
        "json": {"type": "string"},
        "schema": {"type": "string", "default": ""},
    }
    result = await parse.invoke('{"json": "a", "schema": "b"}', CTX)
    assert result.output == "ab"


def test_bad_definitions_fail_at_decoration_time() -> None:
    with pytest.raises(TypeError, match="parameter 'city' has no type annotation"):

        @tool
        def untyped(city) -> str:  # type: ignore[no-untyped-def]
            return str(city)

    with pytest.raises(TypeError, match=r"\*args"):

        @tool
        def star(*cities: str) -> str:
            return ""

    with pytest.raises(TypeError, match=r"\*\*kwargs"):

        @tool
        def kw(**options: str) -> str:
            return ""

    with pytest.raises(ValueError, match="tool name"):
        tool(name="has spaces")(get_weather.fn)


@pytest.mark.asyncio
async def test_invoke_success_and_coercion() -> None:
    result = await get_weather.invoke('{"city": "Paris", "days": "3"}', CTX)
    assert not result.is_error
    assert (result.call_id, result.tool) == ("call-1", "get_weather")
    assert json.loads(result.output) == {"city": "Paris", "unit": "C", "days": 3}


@pytest.mark.asyncio
async def test_invoke_async_tool_gets_models_and_returns_model_json() -> None:
    result = await ship_parcel.invoke('{"address": {"street": "Main St"}, "weight_kg": 2, "color": "blue"}', CTX)
    assert not result.is_error, result.output
    assert json.loads(result.output) == {"street": "Main St", "zip_code": None}


@pytest.mark.asyncio
async def test_empty_arguments_mean_no_arguments() -> None:
    @tool
    def now() -> None:
        """Nothing to say."""

    result = await now.invoke("", CTX)
    assert (result.is_error, result.output) == (False, "null")


@pytest.mark.asyncio
async def test_invalid_json_is_an_error_result_quoting_the_input() -> None:
    result = await get_weather.invoke("{city: Paris", CTX)
    assert result.is_error
    assert result.output.startswith("invalid JSON in arguments for tool 'get_weather'")
    assert "'{city: Paris'" in result.output

    result = await get_weather.invoke('["Paris"]', CTX)
    assert result.is_error and "must be a JSON object" in result.output


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "arguments, why",
    [
        ('{"city": ' + "[" * 5000 + "]" * 5000 + "}", "nested deeper than 64 levels"),
        ('{"city": "Paris", "days": ' + "1" * 5000 + "}", "a number longer than 100 characters"),
        ('{"city": "Paris", "days": NaN}', "NaN is not JSON"),
        (bounds.refused("nested deeper than 64 levels"), "nested deeper than 64 levels"),
    ],
)
async def test_arguments_past_the_bounds_are_an_error_result_never_a_raise(arguments: str, why: str) -> None:
    """A deterministic argument error is the model's to hear: raised, Temporal would retry it."""
    result = await get_weather.invoke(arguments, CTX)
    assert result.is_error and result.output.startswith(f"arguments for tool 'get_weather' refused: {why}")
    assert len(result.output) < 300


@pytest.mark.asyncio
async def test_validation_errors_list_each_field() -> None:
    result = await get_weather.invoke('{"unit": "K", "days": "many", "country": "FR"}', CTX)
    assert result.is_error
    assert result.output.startswith("invalid arguments for tool 'get_weather': ")
    for expected in (
        "city: Field required",
        "unit: Input should be 'C' or 'F'",
        "days: Input should be a valid integer",
        "country: Extra inputs are not permitted",
        "(parameters: city, unit, days)",
    ):
        assert expected in result.output
    assert "errors.pydantic.dev" not in result.output


@pytest.mark.asyncio
async def test_ordinary_exception_becomes_error_result() -> None:
    result = await fails.invoke('{"kind": "value"}', CTX)
    assert (result.is_error, result.output) == (True, "ValueError: no such city")


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("kind", "error"),
    [
        ("retry", ToolRetryableError),
        ("connection", ConnectionError),
        ("timeout", TimeoutError),
        ("transport", httpx.TransportError),
    ],
)
async def test_infrastructure_errors_propagate_for_temporal_to_retry(kind: str, error: type[Exception]) -> None:
    with pytest.raises(error):
        await fails.invoke(json.dumps({"kind": kind}), CTX)


@pytest.mark.asyncio
async def test_sync_tool_runs_in_the_tool_threads_not_the_loops_default_executor() -> None:
    @tool
    def which_thread() -> str:
        """The thread this runs in."""
        return threading.current_thread().name

    threads = ToolThreads(2)
    try:
        result = await which_thread.invoke("{}", CTX, threads)
    finally:
        threads.shutdown()
    assert result.output.startswith("tool")
    assert (await which_thread.invoke("{}", CTX)).output.startswith("tool")  # outside a worker: a shared pool


class Escape(BaseException):
    pass


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["exit", "interrupt", "base"])
@pytest.mark.parametrize("is_async", [False, True])
async def test_a_tool_raising_systemexit_or_any_baseexception_is_an_error_result(
    kind: str, is_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    error = {"exit": SystemExit(3), "interrupt": KeyboardInterrupt(), "base": Escape("out")}[kind]

    def bail() -> str:
        """Try to stop the worker."""
        raise error

    async def bail_async() -> str:
        """Try to stop the worker."""
        raise error

    quitter = tool(bail_async if is_async else bail, name="quitter")
    result = await quitter.invoke("{}", CTX)
    expected = {"exit": "SystemExit: 3", "interrupt": "KeyboardInterrupt", "base": "Escape: out"}[kind]
    assert result.is_error
    assert result.output == f"{expected} (the tool tried to stop the worker; it did not)"
    assert f"tool quitter call call-1 raised {type(error).__name__}" in caplog.text


@pytest.mark.asyncio
async def test_cancellation_still_reaches_the_caller() -> None:
    @tool
    async def forever() -> str:
        """Never returns."""
        await asyncio.Event().wait()
        return ""

    task = asyncio.create_task(forever.invoke("{}", CTX))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.asyncio
async def test_idempotency_key_reaches_the_tool_through_context() -> None:
    @tool
    def charge(amount: int, context: ToolContext | None = None) -> str:
        """Charge a card once."""
        assert context is not None
        return f"{context.idempotency_key} attempt {context.attempt}"

    assert "context" not in json.dumps(charge.spec().parameters)
    result = await charge.invoke('{"amount": 5}', CTX)
    assert result.output == "wf-1/call-1 attempt 1"


@pytest.mark.asyncio
async def test_a_hung_sync_tool_holds_one_thread_and_queued_calls_can_be_cancelled() -> None:
    release = threading.Event()
    ran: list[str] = []

    def hang() -> None:
        release.wait(30)

    def quick(label: str) -> str:
        ran.append(label)
        return label

    threads = ToolThreads(2)
    try:
        hung = asyncio.create_task(threads.run(hang))
        assert await threads.run(quick, label="beside") == "beside"  # the other slot still works
        second_hang = asyncio.create_task(threads.run(hang))
        await asyncio.sleep(0.05)
        assert threads.busy == 2
        queued = asyncio.create_task(threads.run(quick, label="queued"))
        await asyncio.sleep(0.05)
        queued.cancel()  # as its activity timeout would: dropped from the queue, never run
        for task in (hung, second_hang):
            task.cancel()  # returns at once; the threads run on
        await asyncio.gather(hung, second_hang, queued, return_exceptions=True)
        assert all(t.cancelled() for t in (hung, second_hang, queued))
        release.set()
        await asyncio.sleep(0.1)
        assert ran == ["beside"]
        assert await threads.run(quick, label="after") == "after"
    finally:
        release.set()
        threads.shutdown()


def test_shutdown_does_not_wait_for_a_hung_thread() -> None:
    release = threading.Event()
    threads = ToolThreads(1)
    threads._pool.submit(release.wait, 30)
    try:
        started = time.monotonic()
        threads.shutdown()
        assert time.monotonic() - started < 0.5
    finally:
        release.set()


def test_tool_threads_setting() -> None:
    assert size_from_env({}) == 16
    assert size_from_env({"TOOL_THREADS": "4"}) == 4
    for bad in ("0", "-1", "many", "1025"):  # 1025: the settings' bound, which this reader once skipped
        with pytest.raises(ValueError, match=re.escape("TOOL_THREADS must be a whole number in [1, 1024]")):
            size_from_env({"TOOL_THREADS": bad})
