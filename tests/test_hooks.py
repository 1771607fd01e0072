"""The hook activity, called directly (no workflow): approvals, guardrails (one asking fake_llm),
typed output, and handoff input filters (the transcript query answered by a fake client)."""

from __future__ import annotations

import asyncio
import datetime
import threading
from typing import Any, cast

import pytest
from pydantic import BaseModel, Field
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from durable_agent_runner import (
    Agent,
    GuardrailContext,
    GuardrailResult,
    Registry,
    handoff,
    input_guardrail,
    output_guardrail,
    tool,
)
from durable_agent_runner.activities.hooks import HookActivities
from durable_agent_runner.activities.model import new_http_client
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.testing.fake_llm import FakeLLMServer
from durable_agent_runner.workflows.types import (
    MODEL_CONTEXT_QUERY,
    AgentSpec,
    AssistantMessage,
    HookInput,
    HookKind,
    HookResult,
    Message,
    ModelContext,
    ModelContextQuery,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from tests.fixtures import team_agents


@tool
def transfer(amount: int, to: str) -> str:
    """Move money.

    Args:
        amount: Whole units.
        to: The receiving account.
    """
    return f"moved {amount} to {to}"


@tool
def send(label: str) -> str:
    """Send something."""
    return label


def crash(args: Any) -> bool:
    raise RuntimeError("cannot tell")


def stop_worker(args: Any) -> bool:
    raise SystemExit(3)


class Refund(BaseModel):
    amount: int = Field(ge=1)
    reason: str
    on: datetime.date | None = None


researcher = Agent(name="researcher", instructions="Find facts.")
BANK = Agent(
    name="bank",
    tools=[transfer, send, researcher.as_tool(name="research")],
    approvals={"send": "always", "transfer": lambda a: a.amount > 100, "research": lambda a: "secret" in a.input},
    output_type=Refund,
)
ODD = Agent(name="odd", tools=[transfer, send], approvals={"transfer": crash, "send": stop_worker})


def hook(kind: HookKind, name: str, agent: str = "bank", **fields: Any) -> HookInput:
    return HookInput(agent=agent, kind=kind, name=name, turn=3, **fields)


async def run(activities: HookActivities, input: HookInput) -> HookResult:
    return await ActivityEnvironment().run(activities.run_hook, input)


async def failure(activities: HookActivities, input: HookInput) -> ApplicationError:
    with pytest.raises(ApplicationError) as info:
        await run(activities, input)
    return info.value


# ------------------------------------------------------------------------------- approval


async def test_approval_validates_the_arguments_then_asks_the_policy() -> None:
    hooks = HookActivities(Registry(agents=[BANK]))
    small = await run(hooks, hook("approval", "transfer", arguments='{"amount": 5, "to": "bob"}', call_id="c1"))
    assert small == HookResult(needs_approval=False, arguments={"amount": 5, "to": "bob"})
    large = await run(hooks, hook("approval", "transfer", arguments='{"amount": 500, "to": "bob"}'))
    assert large == HookResult(needs_approval=True, arguments={"amount": 500, "to": "bob"})
    always = await run(hooks, hook("approval", "send", arguments='{"label": "x"}'))
    assert (always.needs_approval, always.arguments) == (True, {"label": "x"})


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"amount": "lots", "to": "bob"}', "invalid arguments for tool 'transfer': amount: Input should be"),
        ('{"amount": 5}', "invalid arguments for tool 'transfer': to: Field required (parameters: amount, to)"),
        ('{"amount": 5, ', "invalid JSON in arguments for tool 'transfer'"),
        ("[1]", "arguments for tool 'transfer' must be a JSON object"),
    ],
)
async def test_approval_of_invalid_arguments_asks_no_one(arguments: str, expected: str) -> None:
    result = await run(HookActivities(Registry(agents=[BANK])), hook("approval", "transfer", arguments=arguments))
    assert result.invalid is not None and result.invalid.startswith(expected)
    assert (result.needs_approval, result.arguments) == (False, None)


async def test_approval_of_an_agent_used_as_a_tool_validates_its_input() -> None:
    hooks = HookActivities(Registry(agents=[BANK]))
    plain = await run(hooks, hook("approval", "research", arguments='{"input": "rates"}'))
    assert plain == HookResult(needs_approval=False, arguments={"input": "rates"})
    secret = await run(hooks, hook("approval", "research", arguments='{"input": "the secret rates"}'))
    assert secret.needs_approval
    for bad, why in (
        ('{"query": "x"}', "input: Field required"),
        ('{"input": 1}', "input: Input should be a valid string, not a number: quote it"),
    ):
        result = await run(hooks, hook("approval", "research", arguments=bad))
        assert result.invalid is not None and why in result.invalid


async def test_a_predicate_that_raises_asks_a_person_even_one_that_exits() -> None:
    hooks = HookActivities(Registry(agents=[ODD]))
    raised = await run(hooks, hook("approval", "transfer", agent="odd", arguments='{"amount": 1, "to": "a"}'))
    exited = await run(hooks, hook("approval", "send", agent="odd", arguments='{"label": "x"}'))
    assert raised.needs_approval and exited.needs_approval


async def test_unknown_tool_and_unknown_agent() -> None:
    hooks = HookActivities(Registry(agents=[BANK]))
    result = await run(hooks, hook("approval", "nope", arguments="{}"))
    assert result.invalid == "unknown tool 'nope' for agent 'bank'"
    err = await failure(hooks, hook("approval", "send", agent="ghost"))
    assert (err.type, err.non_retryable) == ("UnknownAgent", True)
    assert err.message == "unknown agent 'ghost'; this worker knows: bank, researcher"


# ----------------------------------------------------------------------------- guardrails


async def test_a_sync_guardrail_runs_in_the_tool_threads_with_its_context() -> None:
    seen: list[tuple[str, str, int, str]] = []

    @input_guardrail
    def no_secrets(ctx: GuardrailContext, text: str) -> bool:
        seen.append((ctx.agent, ctx.run_id, ctx.turn, threading.current_thread().name))
        return "secret" in text

    hooks = HookActivities(Registry(agents=[Agent(name="a", input_guardrails=[no_secrets])]))
    passed = await run(hooks, hook("input_guardrail", "no_secrets", agent="a", text="hello"))
    tripped = await run(hooks, hook("input_guardrail", "no_secrets", agent="a", text="a secret"))
    assert (passed.tripwire, tripped.tripwire, tripped.info) == (False, True, None)
    assert seen[0][:3] == ("a", "test", 3)  # ActivityEnvironment's workflow id
    assert all(name.startswith("tool") for *_, name in seen)


async def test_an_async_guardrail_returns_its_info_as_json() -> None:
    class Finding(BaseModel):
        words: int
        when: datetime.date

    @output_guardrail(name="length")
    async def too_long(ctx: GuardrailContext, text: str) -> GuardrailResult:
        words = len(text.split())
        return GuardrailResult(
            tripwire_triggered=words > 3, output_info=Finding(words=words, when=datetime.date(2026, 1, 2))
        )

    hooks = HookActivities(Registry(agents=[Agent(name="a", output_guardrails=[too_long])]))
    result = await run(hooks, hook("output_guardrail", "length", agent="a", text="one two three four"))
    assert (result.tripwire, result.info) == (True, {"words": 4, "when": "2026-01-02"})
    # The same name as an input guardrail is another guardrail: there is none.
    err = await failure(hooks, hook("input_guardrail", "length", agent="a"))
    assert (err.type, err.non_retryable) == ("AgentHookFailed", True)
    assert err.message == "agent 'a' has no input guardrail 'length' here"


def _raising(exc: BaseException) -> Any:
    def guard(ctx: GuardrailContext, text: str) -> bool:
        raise exc

    return guard


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (_raising(ValueError("bad text")), "input guardrail 'g' of agent 'a' failed: ValueError: bad text"),
        (
            _raising(SystemExit(2)),
            "input guardrail 'g' of agent 'a' failed: SystemExit: 2 (it tried to stop the worker; it did not)",
        ),
        (
            _raising(KeyboardInterrupt()),
            "input guardrail 'g' of agent 'a' failed: KeyboardInterrupt (it tried to stop the worker; it did not)",
        ),
        (
            lambda ctx, text: 7,
            "input guardrail 'g' of agent 'a' failed: TypeError: returned int, not a GuardrailResult",
        ),
    ],
)
async def test_a_guardrail_that_raises_fails_the_hook_for_good(fn: Any, message: str) -> None:
    hooks = HookActivities(Registry(agents=[Agent(name="a", input_guardrails=[input_guardrail(fn, name="g")])]))
    err = await failure(hooks, hook("input_guardrail", "g", agent="a", text="x"))
    assert (err.type, err.non_retryable) == ("AgentHookFailed", True)
    assert err.message.startswith(message)


async def test_a_transient_error_in_a_guardrail_is_retried() -> None:
    @input_guardrail
    async def flaky(ctx: GuardrailContext, text: str) -> bool:
        raise ConnectionError("moderation service unreachable")

    hooks = HookActivities(Registry(agents=[Agent(name="a", input_guardrails=[flaky])]))
    with pytest.raises(ConnectionError):  # not an ApplicationError: Temporal retries it
        await run(hooks, hook("input_guardrail", "flaky", agent="a", text="x"))


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_guardrail_asks_the_model(llm: FakeLLMServer, api: str) -> None:
    settings = LLMSettings(base_url=llm.base_url, model="demo", api=api)  # type: ignore[arg-type]
    registry = Registry.from_modules(["tests.fixtures.team_agents"])
    async with new_http_client(settings) as http:
        hooks = HookActivities(registry, settings=settings, http=http)
        fine = await run(hooks, hook("input_guardrail", "model_judge", agent="gatekeeper", text="hello there"))
        tripped = await run(hooks, hook("input_guardrail", "model_judge", agent="gatekeeper", text="a forbidden plan"))
    assert (fine.tripwire, fine.info) == (False, {"model_said": "echo: hello there"})
    assert (tripped.tripwire, tripped.info) == (True, {"model_said": "echo: a forbidden plan"})
    sent = llm.requests()[-1]["body"]
    assert sent["model"] == "echo" and "tools" not in sent
    assert (sent.get("instructions") or sent["messages"][0]["content"]) == "Repeat the text."


async def test_ask_model_failures_keep_the_model_activitys_retry_rules(llm: FakeLLMServer) -> None:
    settings = LLMSettings(base_url=llm.base_url, model="echo")
    registry = Registry.from_modules(["tests.fixtures.team_agents"])
    judge = hook("input_guardrail", "model_judge", agent="gatekeeper", text="hi")
    async with new_http_client(settings) as http:
        hooks = HookActivities(registry, settings=settings, http=http)
        llm.add_faults([{"kind": "status", "status": 429, "retry_after": 2}])
        busy = await failure(hooks, judge)
        llm.add_faults([{"kind": "status", "status": 401}])
        refused = await failure(hooks, judge)
    assert (busy.type, busy.non_retryable) == ("ModelHTTP429", False)
    assert busy.next_retry_delay == datetime.timedelta(seconds=2)
    assert (refused.type, refused.non_retryable) == ("ModelHTTP401", True)


async def test_ask_model_outside_a_worker_says_so() -> None:
    with pytest.raises(RuntimeError, match="no model to ask"):
        await GuardrailContext(agent="a", run_id="r", turn=1).ask_model("hi")


# ---------------------------------------------------------------------------- output type


@pytest.mark.parametrize(
    "text",
    [
        '{"amount": 5, "reason": "twice", "on": "2026-03-01"}',
        '```json\n{"amount": 5, "reason": "twice", "on": "2026-03-01"}\n```',
        '  ```\n{"amount": 5, "reason": "twice", "on": "2026-03-01"}```  ',
    ],
)
async def test_output_type_validates_the_final_output(text: str) -> None:
    result = await run(HookActivities(Registry(agents=[BANK])), hook("output_type", "Refund", text=text))
    assert result == HookResult(output={"amount": 5, "reason": "twice", "on": "2026-03-01"})


@pytest.mark.parametrize(
    ("text", "invalid"),
    [
        ('{"amount": 0}', "amount: Input should be greater than or equal to 1; reason: Field required"),
        ("Sure! Here is your refund.", "output: Invalid JSON: expected value at line 1 column 1"),
        ("[]", "output: Input should be an object"),
    ],
)
async def test_an_invalid_output_says_why_in_a_line(text: str, invalid: str) -> None:
    result = await run(HookActivities(Registry(agents=[BANK])), hook("output_type", "Refund", text=text))
    assert (result.invalid, result.output) == (invalid, None)


async def test_output_types_other_than_models() -> None:
    listed = Agent(name="listed", output_type=list[int])
    hooks = HookActivities(Registry(agents=[listed, researcher]))
    assert (await run(hooks, hook("output_type", "list", agent="listed", text="[1, 2]"))).output == [1, 2]
    err = await failure(hooks, hook("output_type", "x", agent="researcher", text="{}"))
    assert (err.type, err.message) == ("AgentHookFailed", "agent 'researcher' has no output type here")


# --------------------------------------------------------------------------- input filter


class FakeHandle:
    """Answers the model-context query from a fixed transcript, two messages a page."""

    def __init__(self, messages: list[Message], queries: list[ModelContextQuery]) -> None:
        self.messages = messages
        self.queries = queries

    async def query(self, name: str, arg: ModelContextQuery, *, result_type: type[ModelContext]) -> ModelContext:
        assert name == MODEL_CONTEXT_QUERY and result_type is ModelContext
        self.queries.append(arg)
        end = min(arg.start + 2, arg.upto)
        more = end if end < arg.upto else None
        return ModelContext(agent=AgentSpec(name="triage"), messages=self.messages[arg.start : end], next_start=more)


class FakeClient:
    def __init__(self, messages: list[Message]) -> None:
        self.messages = messages
        self.queries: list[ModelContextQuery] = []
        self.handles: list[tuple[str, str | None]] = []

    def get_workflow_handle(self, workflow_id: str, *, run_id: str | None = None) -> FakeHandle:
        self.handles.append((workflow_id, run_id))
        return FakeHandle(self.messages, self.queries)


TRANSCRIPT: list[Message] = [
    UserMessage(content="I was charged twice"),
    AssistantMessage(tool_calls=[ToolCall(call_id="c1", name="lookup_invoice", arguments='{"invoice_id": "1"}')]),
    ToolMessage(call_id="c1", name="lookup_invoice", content="paid twice"),
    UserMessage(content="refund one, please"),
    AssistantMessage(tool_calls=[ToolCall(call_id="c2", name="transfer_to_refunds")]),
    UserMessage(content="a later message the filter must not see"),
]


async def test_input_filter_runs_on_the_transcript_read_by_query() -> None:
    client = FakeClient(TRANSCRIPT)
    hooks = HookActivities(Registry.from_modules(["tests.fixtures.team_agents"]), cast(Client, client))
    result = await run(hooks, hook("input_filter", "customer_messages", agent="triage", transcript_len=5))
    assert result.messages == [TRANSCRIPT[0], TRANSCRIPT[3]]
    assert client.handles == [("test", "test-run")]
    assert [(q.start, q.upto) for q in client.queries] == [(0, 5), (2, 5), (4, 5)]


async def test_an_async_input_filter_and_one_that_returns_garbage() -> None:
    async def last_two(messages: list[Message]) -> list[Message]:
        await asyncio.sleep(0)
        return messages[-2:]  # a call and its result, or none split: a model takes it

    def garbage(messages: list[Message]) -> Any:
        return "everything"

    def broken(messages: list[Message]) -> list[Message]:
        raise KeyError("role")

    target = Agent(name="target")
    source = Agent(
        name="source",
        handoffs=[
            handoff(target, input_filter=last_two),
            handoff(target, tool_name="t2", input_filter=garbage),
            handoff(target, tool_name="t3", input_filter=broken),
        ],
    )
    hooks = HookActivities(Registry(agents=[source]), cast(Client, FakeClient(TRANSCRIPT)))
    result = await run(hooks, hook("input_filter", "last_two", agent="source", transcript_len=3))
    assert result.messages == TRANSCRIPT[1:3]
    err = await failure(hooks, hook("input_filter", "garbage", agent="source", transcript_len=4))
    assert (err.type, err.non_retryable) == ("AgentHookFailed", True)
    assert err.message.startswith(
        "input filter 'garbage' of agent 'source' failed: TypeError: returned str, not a list of messages"
    )
    err = await failure(hooks, hook("input_filter", "broken", agent="source", transcript_len=4))
    assert err.message == "input filter 'broken' of agent 'source' failed: KeyError: 'role'"
    err = await failure(hooks, hook("input_filter", "remove_tools", agent="source", transcript_len=4))
    assert err.message == "agent 'source' has no handoff input filter 'remove_tools' here"


async def test_an_input_filter_that_splits_a_call_from_its_result_fails_clearly_at_the_handoff() -> None:
    """A conversation a model API refuses (a result with no call, a call with no result) fails the
    handoff with the filter's name, not the next agent's first model call with a provider's 400."""

    def results_only(messages: list[Message]) -> list[Message]:
        return messages[2:]  # keeps c1's result, drops the call

    def calls_only(messages: list[Message]) -> list[Message]:
        return messages[:2]  # keeps c1's call, drops its result

    target = Agent(name="target")
    source = Agent(
        name="source",
        handoffs=[
            handoff(target, input_filter=results_only),
            handoff(target, tool_name="t2", input_filter=calls_only),
        ],
    )
    hooks = HookActivities(Registry(agents=[source]), cast(Client, FakeClient(TRANSCRIPT)))
    err = await failure(hooks, hook("input_filter", "results_only", agent="source", transcript_len=4))
    assert (err.type, err.non_retryable) == ("AgentHookFailed", True)
    assert err.message == (
        "input filter 'results_only' of agent 'source' failed: ValueError: returned a conversation a model would "
        "refuse: a result of call c1 (lookup_invoice), which no message before it asks for"
    )
    err = await failure(hooks, hook("input_filter", "calls_only", agent="source", transcript_len=4))
    assert err.message.endswith("refuse: call c1 (lookup_invoice) has no result"), err.message
    whole = await run(hooks, hook("input_filter", "results_only", agent="source", transcript_len=1))
    assert whole.messages == []  # nothing split: taken as it is


# ---------------------------------------------------------------------------------- team


def test_the_fixture_team_registers_every_member() -> None:
    registry = Registry.from_modules(["tests.fixtures.team_agents"])
    assert registry.agent_names() == [
        "billing", "censor", "gatekeeper", "invoicer", "refunds", "relaxed", "researcher", "triage",
    ]  # fmt: skip
    spec = team_agents.triage.spec()
    assert [h.tool_name for h in spec.handoffs] == ["transfer_to_billing", "transfer_to_refunds"]
    assert [h.input_filter for h in spec.handoffs] == [None, "hook:customer_messages"]
    assert [(t.name, t.agent, t.approval) for t in spec.tools] == [("research", "researcher", "conditional")]
    assert team_agents.billing.spec().handoffs[0].input_filter == "remove_tools"
    assert [a.name for a in team_agents.triage.team()] == ["billing", "refunds", "researcher"]
