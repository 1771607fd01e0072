"""The client checks its arguments at the door, with the rules the CLI's flags meet (one checker:
durable_agent_runner/client/checks.py): a wrong type is a TypeError, a value out of bounds a
ValueError naming the argument, and nothing reaches Temporal. No server: the client here holds a
stand-in that fails the test if anything is sent."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import durable_agent_runner as dar
from durable_agent_runner.client import checks
from durable_agent_runner.evals import Case, Dataset
from durable_agent_runner.workflows import types as t


class NothingSent:
    """A Temporal client that refuses every call: a check that lets a bad argument through fails."""

    namespace = "default"

    def get_workflow_handle(self, run_id: str, **_: Any) -> Any:
        return NothingSent()

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"a bad argument reached Temporal ({name})")


@pytest.fixture
def api() -> dar.AgentClient:
    return dar.AgentClient(NothingSent(), task_queue="nowhere")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        ({"max_turns": "3"}, TypeError, "max_turns must be an int"),
        ({"max_turns": True}, TypeError, "max_turns must be an int"),
        ({"max_turns": 0}, ValueError, "max_turns: must be between 1"),
        ({"model_settings": {"temprature": 1}}, ValueError, "unknown field temprature"),
        ({"model_settings": {"temperature": 9}}, ValueError, "temperature: Input should be less than"),
        ({"model_settings": {"extra_body": {"stream": False}}}, ValueError, "extra_body"),
        ({"model_settings": "hot"}, TypeError, "model_settings must be a ModelSettings or a dict"),
        ({"id": ""}, ValueError, "id: must be 1-255 printable characters"),
        ({"id": "a\nb"}, ValueError, "id: must be 1-255 printable characters"),
        ({"id": "x" * 256}, ValueError, "id: must be 1-255"),
        ({"id": " "}, ValueError, "id: must not begin or end with a space"),
        ({"id": "nightly "}, ValueError, "id: must not begin or end with a space"),
        ({"model": ""}, ValueError, "model: must be 1-200"),
        ({"capture": "yes"}, TypeError, "capture must be a bool"),
        ({"breakpoints": {"at_turns": [1]}}, TypeError, "breakpoints must be a Breakpoints"),
        ({"model_settings": {"stop": ["END", ""]}}, ValueError, "stop: a stop sequence may not be empty"),
        ({"fallback_models": ["m", "n", "m"]}, ValueError, "fallback_models: fallback model 'm' is listed twice"),
        ({"model": "m", "fallback_models": ["m"]}, ValueError, "fallback model 'm' is the model itself"),
        ({"fallback_models": ["gemini:"]}, ValueError, "names the provider gemini but no model"),
        (
            {"model": "anthropic:c", "model_settings": {"seed": 1}},
            ValueError,
            "model_settings: model anthropic:c: seed: Anthropic's Messages API has no seed",
        ),
        (
            {"fallback_models": ["m", "gemini:g"], "model_settings": {"parallel_tool_calls": False}},
            ValueError,
            "model gemini:g: parallel_tool_calls",
        ),
    ],
)
async def test_start_refuses_bad_options_before_anything_is_sent(api, kwargs, error, words):
    with pytest.raises(error, match=words):
        await api.start("demo", "hello", **kwargs)


@pytest.mark.parametrize(
    "agent, prompt, error, words",
    [
        (None, "hello", TypeError, "agent must be an agent's name or an Agent, not NoneType"),
        ("", "hello", ValueError, "agent: must be 1-200"),
        ("demo", 42, TypeError, "input must be a str, not int"),
        ("demo", "   ", ValueError, "input: is empty"),
    ],
)
async def test_start_refuses_a_bad_agent_or_prompt(api, agent, prompt, error, words):
    with pytest.raises(error, match=words):
        await api.start(agent, prompt)


def test_get_refuses_an_empty_or_unprintable_id_never_a_raw_rpc_error(api):
    for bad in ("", "tab\there", "x" * 1001):
        with pytest.raises(ValueError, match="run_id: must be 1-1000 printable characters"):
            api.get(bad)
    with pytest.raises(TypeError, match="run_id must be a str"):
        api.get(None)  # type: ignore[arg-type]
    assert api.get("x" * 1000).id == "x" * 1000  # a child run's id may be longer than one we start


def test_a_client_reads_its_environment_once_and_passes_it_to_every_handle(monkeypatch):
    """TEMPORAL_UI_URL and AGENT_TASK_QUEUE are read by the client's settings when it is made, and
    passed down: every link and queue of its handles, schedules and evals is what it read. Before,
    each link read the environment again (0.4 ms a read, once per row of a list)."""
    from types import SimpleNamespace

    monkeypatch.setenv("TEMPORAL_UI_URL", "https://ui.example.com/")
    monkeypatch.setenv("AGENT_TASK_QUEUE", "made-with")
    client = dar.AgentClient(SimpleNamespace(namespace="ns", get_workflow_handle=lambda *a, **k: None))  # type: ignore[arg-type]
    monkeypatch.setenv("TEMPORAL_UI_URL", "https://elsewhere.example.com")
    monkeypatch.setenv("AGENT_TASK_QUEUE", "changed")
    run = client.get("r 1")
    assert run.ui_url == "https://ui.example.com/namespaces/ns/workflows/r%201"
    assert client.task_queue == run.task_queue == client.schedules.task_queue == "made-with"
    assert client.evals.get("e").ui_url("c") == "https://ui.example.com/namespaces/ns/workflows/c"
    session = client.get_session("chat-1")  # before, a session's handle read the environment again
    assert session.ui_url == "https://ui.example.com/namespaces/ns/workflows/chat-1"
    assert session.task_queue == "made-with"


@pytest.mark.parametrize(
    "usd, tokens, words",
    [
        (None, 0, "budget_tokens: must be at least 1 (a cap of 0 stops every run at once)"),
        (0, None, "budget_usd: must be more than 0 (a cap of 0 stops every run at once)"),
        (-1.5, None, "budget_usd: must be more than 0"),
        (math.nan, None, "budget_usd"),
        (2e9, None, "budget_usd"),
    ],
)
async def test_a_cap_on_runs_of_zero_or_less_is_refused_as_an_agents_own_budget_is(api, usd, tokens, words):
    """Before, a schedule's or an eval's cap of 0 was taken: every run it started failed at once on
    its budget (an eval of 3 cases: 3 failed, 0 tokens). An Agent already refused its own."""
    given = {"budget_usd": usd, "budget_tokens": tokens}
    with pytest.raises(ValueError, match=re.escape(words)):
        await api.schedules.create("nightly", agent="a", input="go", every="1h", **given)
    with pytest.raises(ValueError, match=re.escape(words)):
        await api.evals.start(Dataset(name="d", cases=[Case(name="c", inputs="q")]), agent="a", **given)
    with pytest.raises(ValueError, match=re.escape(words)):
        await api.start("a", "go", **given)  # one run's cap, as `run --budget-usd/--budget-tokens`
    assert checks.budget_cap(0.01, 1) == t.Budget(usd=0.01, tokens=1)


@pytest.mark.parametrize("wait", [-1, 0, math.nan, math.inf, -math.inf, 3601, 10**9])
async def test_every_wait_is_bounded_and_finite(api, wait):
    run = api.get("some-run")
    session = api.get_session("some-chat")
    for attempt in (
        run.approve("call_1", wait=wait),
        run.reject("call_1", "no", wait=wait),
        run.resolve("call_1", "rerun", wait=wait),
        run.pause(wait=wait),
        run.resume(wait=wait),
        run.inspect(wait=wait),
        run.transcript(wait=wait),
        session.send("hi", wait=wait),
        session.end(wait=wait),
        api.diff("a", "b", wait=wait),
    ):
        with pytest.raises(ValueError, match=r"wait: must be a number of seconds in \(0, 3600\]"):
            await attempt


async def test_result_waits_at_most_a_bounded_time(api):
    for bad in (-1, math.nan, math.inf):
        with pytest.raises(ValueError, match=r"wait: must be a number of seconds in \[0, 3600\]"):
            await api.get("some-run").result(wait=bad)
    with pytest.raises(TypeError, match="wait must be a number of seconds, not str"):
        await api.get("some-run").outcome(wait="5")  # type: ignore[arg-type]


async def test_decisions_refuse_empty_reasons_and_bad_fields(api):
    run = api.get("some-run")
    with pytest.raises(ValueError, match="reason: is empty"):
        await run.reject("call_1", "  ")
    with pytest.raises(ValueError, match="call_id: must be 1-200"):
        await run.approve("")
    with pytest.raises(TypeError, match="args must be a dict"):
        await run.approve("call_1", '{"a": 1}')  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="always must be a bool"):
        await run.approve("call_1", always=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="reason: is empty"):
        await run.resolve("call_1", "fail")
    with pytest.raises(ValueError, match="result is not valid JSON"):
        await run.resolve("call_1", "result", "{not json")
    with pytest.raises(ValueError, match="action: must be rerun, result or fail"):
        await run.resolve("call_1", "retry")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="by: must be at most 200"):
        await run.approve("call_1", by="x" * 201)
    for blank in ("", "  "):  # was recorded: "approved by " named no one
        with pytest.raises(ValueError, match=r"^by: is empty: name who it is, or leave it out \(your login name\)$"):
            await run.approve("call_1", by=blank)
        with pytest.raises(ValueError, match=r"^by: is empty"):
            await run.pause(by=blank)


async def test_debugger_verbs_check_their_arguments(api):
    run = api.get("some-run")
    with pytest.raises(ValueError, match="add_usd: Input should be a finite number"):
        await run.resume(add_usd=math.nan)
    with pytest.raises(ValueError, match="add_tokens: Input should be greater than or equal to 1"):
        await run.resume(add_tokens=0)
    with pytest.raises(TypeError, match="add_tokens must be an int"):
        await run.resume(add_tokens=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="give exactly one edit"):
        await run.edit()
    with pytest.raises(ValueError, match="give exactly one edit"):
        await run.edit(drop=1, drop_call="call_1")
    with pytest.raises(ValueError, match="ROLE must be user or assistant"):
        await run.edit(insert=(1, "system", "hi"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at_turn: must be between 1"):
        await run.fork(0)
    with pytest.raises(ValueError, match="prompt: is empty"):
        await run.fork(2, "")
    with pytest.raises(ValueError, match="id: must not begin or end with a space"):
        await run.fork(2, id="fork ")
    with pytest.raises(ValueError, match="id: must not begin or end with a space"):
        await api.start_session("demo", id=" chat")
    with pytest.raises(ValueError, match="limit: must be between 1 and 1,000"):
        await api.list(0)
    with pytest.raises(ValueError, match="phase: must be one of"):
        await api.list(phase="sleeping")
    with pytest.raises(ValueError, match="page: that page token is not one this client made"):
        await api.runs_page("not base64!")
    with pytest.raises(TypeError, match="started_on_1x must be"):
        await api.list(started_on_1x="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="started_on_1x must be"):
        await api.evals.list(started_on_1x=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="schedule must be a str"):
        await api.list(schedule=7)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^schedule: 'a b' is not a schedule name"):
        await api.runs_page(schedule="a b")
    with pytest.raises(ValueError, match=r"^captures: /no/such/dir is not a directory$"):
        await run.export(captures="/no/such/dir")  # a typo exported every reply without its capture
    with pytest.raises(TypeError, match=r"^captures must be a directory's path, not int$"):
        await run.export(3)  # type: ignore[arg-type]


async def test_what_a_run_is_sent_past_its_bounds_is_one_line_naming_the_field(api):
    """Before: a 5,000-character reason to reject, pause or end printed pydantic's three lines
    (`1 validation error for ApprovalDecision …`) in the CLI and raised a raw ValidationError."""
    run, session = api.get("some-run"), api.get_session("some-chat")
    cases = [
        (lambda: run.reject("call_1", "r" * 4001), "reason", "at most 4000 characters"),
        (lambda: run.pause("r" * 1001), "reason", "at most 1000 characters"),
        (lambda: run.edit(text=(0, "x" * 200_001)), "text", "at most 200000 characters"),
        (lambda: session.end("r" * 1001), "reason", "at most 1000 characters"),
        (lambda: session.send("hi", message_id="m" * 201), "message_id", "must be 1-200 printable"),
    ]
    for send, field, words in cases:
        with pytest.raises(checks.BadArgument) as caught:
            await send()
        assert caught.value.field == field and words in str(caught.value) and "\n" not in str(caught.value)


async def test_arguments_a_person_edits_are_refused_naming_args_in_plain_words(api):
    """Was `arguments: Value error, arguments refused: NaN and infinities are not JSON`: the
    contract's field name and pydantic's prefix, where the caller wrote `args=`."""
    run = api.get("some-run")
    for send in (
        lambda: run.approve("call_1", args={"to": float("nan")}),
        lambda: run.edit(args=("call_1", {"n": [float("inf")]})),
    ):
        with pytest.raises(checks.BadArgument) as caught:
            await send()
        assert str(caught.value) == "args: NaN and infinities are not JSON"
    with pytest.raises(checks.BadArgument) as caught:  # a contract's own validator: its words alone
        checks.body(t.ApprovalDecision, call_id="c", approve=True, arguments={"x": float("nan")})
    assert str(caught.value) == "arguments: arguments refused: NaN and infinities are not JSON"


async def test_a_session_message_is_text_that_is_not_empty(api):
    session = api.get_session("some-chat")
    with pytest.raises(ValueError, match="text: is empty"):
        await session.send("")
    with pytest.raises(TypeError, match="text must be a str, not int"):
        await session.send(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="text: the message is longer than"):
        await session.send("x" * (t.MAX_MESSAGE_CHARS + 1))


@given(st.floats(allow_nan=True, allow_infinity=True) | st.integers(min_value=-(10**6), max_value=10**6))
def test_a_wait_is_accepted_exactly_when_it_is_a_finite_number_of_seconds_up_to_an_hour(value):
    ok = math.isfinite(value) and 0 < value <= checks.MAX_WAIT
    try:
        assert checks.seconds(value) == float(value) and ok
    except ValueError:
        assert not ok


@given(st.text(max_size=300))
def test_a_run_id_is_accepted_exactly_when_it_is_1_to_255_printable_characters(value):
    ok = 0 < len(value) <= 255 and value.isprintable()
    try:
        assert checks.run_id(value) == value and ok
    except ValueError:
        assert not ok


@given(st.text(max_size=300))
def test_a_new_run_id_is_a_run_id_with_no_space_at_either_end(value):
    """`start`, `start_session`, `fork` and `evals.start`: an id ending in a space is one a person
    cannot tell apart from the id without it, nor pass unquoted to the CLI."""
    ok = 0 < len(value) <= 255 and value.isprintable() and value == value.strip()
    try:
        assert checks.new_run_id(value) == value and ok
    except ValueError:
        assert not ok


@given(st.text(max_size=250) | st.text(max_size=20).map(lambda s: "/_sys/" + s))
def test_a_task_queue_is_accepted_exactly_when_a_worker_could_poll_it(value):
    """Temporal keeps `/_sys/` for itself: a worker polled such a queue, and no run could start on it."""
    ok = 0 < len(value) <= 200 and value.isprintable() and value == value.strip() and not value.startswith("/_sys/")
    try:
        assert checks.task_queue(value) == value and ok
    except ValueError:
        assert not ok


async def test_a_task_queue_given_in_code_is_checked_as_the_flag_is(api):
    with pytest.raises(ValueError, match="task_queue: must be 1-200 printable characters"):
        dar.AgentClient(NothingSent(), task_queue="")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="task_queue: must be 1-200 printable characters"):
        await api.start("demo", "hello", task_queue="ops\n")
    with pytest.raises(ValueError, match="task_queue: must be 1-200 printable characters"):
        await api.get("some-run").fork(1, task_queue=" ")


async def test_an_eval_id_and_an_eval_listing_are_checked_before_anything_is_sent(api):
    for bad in ("", "a\nb", "x" * 1001):
        with pytest.raises(ValueError, match="eval_id: must be 1-1000 printable characters"):
            api.evals.get(bad)
    with pytest.raises(TypeError, match="eval_id must be a str, not int"):
        api.evals.get(5)  # type: ignore[arg-type]
    dataset = Dataset(name="d", cases=[Case(name="c", inputs="hi")])
    for bad_id, words in (
        (" e", "eval_id: must not begin or end"),
        ("", "eval_id: must be 1-255"),
        ("x" * 256, "1-255"),
    ):
        with pytest.raises(ValueError, match=words):
            await api.evals.start(dataset, agent="demo", eval_id=bad_id)
    with pytest.raises(TypeError, match="eval_id must be a str, not int"):
        await api.evals.start(dataset, agent="demo", eval_id=123)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^dataset must be a Dataset or a YAML or JSON file's path, not int$"):
        await api.evals.start(42, agent="demo")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^concurrency: Input should be greater than or equal to 1$"):
        await api.evals.start(dataset, agent="demo", concurrency=0)
    for limit in (0, -1, 1001):
        with pytest.raises(ValueError, match="limit: must be between 1 and 1,000"):
            await api.evals.list(limit)
    with pytest.raises(TypeError, match="paused must be a bool"):
        await api.evals.list(paused="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize("inputs", ["", "  \n", None])
async def test_an_eval_whose_case_asks_nothing_does_not_start_as_a_run_with_an_empty_prompt_does_not(api, inputs):
    """A dataset loads such a case (an eval in flight must still decode its cases), but no eval
    starts with it: before, its case ran as a run with an empty prompt and was scored."""
    dataset = Dataset(name="d", cases=[Case(name="ok", inputs="hi"), Case(name="blank", inputs=inputs)])
    with pytest.raises(
        ValueError, match=r"^dataset: case 'blank' \(#2\), field inputs: is empty: give the agent a prompt$"
    ):
        await api.evals.start(dataset, agent="demo")
    with pytest.raises(ValueError, match="input: is empty: give the agent a prompt"):
        await api.start("demo", "  \n")  # the rule it keeps


@given(st.dictionaries(st.text(min_size=1, max_size=20), st.none(), max_size=4))
def test_model_settings_refuse_exactly_the_fields_they_do_not_know(fields):
    unknown = set(fields) - set(t.ModelSettings.model_fields)
    try:
        checks.model_settings(fields)
        assert not unknown
    except checks.BadArgument as err:
        assert unknown and err.field == "model_settings" and sorted(unknown)[0] in str(err)


def test_an_item_index_is_written_in_ascii_digits():
    """`edit --text 3 …` and the console's edit form: '٣' (Arabic-Indic three) is not an index."""
    from durable_agent_runner.client.control import item_index

    assert item_index("3") == 3
    for bad in ("٣", "²", "3.0", "-1", "", "1" * 10):
        with pytest.raises(checks.BadArgument):
            item_index(bad)


@given(st.lists(st.sampled_from("abc"), min_size=1, max_size=6), st.booleans())
def test_a_json_object_a_person_gives_names_each_key_once(keys, nested):
    """`--model-settings '{"temperature": 0.5, "temperature": 1}'` ran at 1: JSON keeps the last
    of a repeated key without a word. A person meant one of them, so a repeat is refused, at any
    depth (`--args`' objects too), naming the key."""
    body = ", ".join(f'"{k}": {i}' for i, k in enumerate(keys))
    text = '{"x": {' + body + "}}" if nested else "{" + body + "}"
    repeated = next((k for i, k in enumerate(keys) if k in keys[:i]), None)
    if repeated is None:
        assert checks.json_object(text, "--args")
    else:
        with pytest.raises(checks.BadArgument, match=f"^--args gives '{repeated}' twice: give each key once$"):
            checks.json_object(text, "--args")


@pytest.mark.parametrize(
    "model, settings, refused",
    [
        ("anthropic:c", {"temperature": 1}, False),
        ("anthropic:c", {"temperature": 1.5}, True),
        ("gemini:g", {"seed": 3, "stop": ["END"]}, False),
        ("m", {"seed": 3}, False),  # the Responses API lacks it, Chat Completions has it: the worker knows which
        ("openai:gpt-4.1", {"stop": ["END"]}, False),
        ("m", {"thinking_tokens": 2048}, True),  # neither OpenAI wire has a thinking budget
    ],
)
def test_the_client_refuses_a_setting_only_where_the_named_model_lacks_it_on_every_api(model, settings, refused):
    """What the client cannot know (the agent's own `api`, its own settings) is left to the worker."""
    fit = t.ModelSettings.model_validate(settings)
    if refused:
        with pytest.raises(checks.BadArgument, match=re.escape(f"model {model}: ")):
            checks.settings_fit([model], fit)
    else:
        checks.settings_fit([model], fit)


async def test_a_bound_past_ten_thousand_is_said_with_its_digits_grouped(api):
    """Before: `budget_tokens: Input should be less than or equal to 1000000000000`."""
    with pytest.raises(ValueError, match=r"less than or equal to 1,000,000,000,000$"):
        await api.start("demo", "hi", budget_tokens=10**14)
