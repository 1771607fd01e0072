"""The hook activity (`agent.hook`): runs one piece of the code an agent's author wrote.

The workflow knows agents only as frozen data. Whenever it needs the author's code, it calls
this one activity on the agent's version queue, with `HookInput.kind` saying which piece:

    approval          a call's arguments, validated by the tool (an MCP tool's against the
                      schema the run froze), then the tool's approval policy
    input_guardrail   a guardrail on the run's input           (`HookResult.tripwire`, `info`)
    output_guardrail  a guardrail on the final output
    output_type       the final output, validated against the agent's output type (`output`)
    input_filter      a handoff's filter on the transcript so far, read by query (`messages`)
    breakpoint        the agent's breakpoint function, before a model call (`edits`, `pause`)

Who hears about a failure:
- the model, through the workflow: invalid arguments or an invalid output (`HookResult.invalid`);
- a person: an approval predicate that raises asks for a decision, to be safe;
- the run: author's code that raises fails the activity with a non-retryable `AgentHookFailed`
  naming the hook and the error. `SystemExit`, `KeyboardInterrupt` and other `BaseException`s
  are caught alike (never a dead worker); cancellation passes through;
- Temporal, which retries: transient errors (`ToolRetryableError`, connection errors,
  timeouts), and a guardrail's `ask_model` failing as a model call would (activities/errors.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import re
import time
from collections.abc import Iterator

import httpx
from pydantic import TypeAdapter, ValidationError
from pydantic_core import to_jsonable_python
from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from durable_agent_runner.activities.mcp_tools import FrozenTools
from durable_agent_runner.activities.model import (
    ModelActivities,
    build_request,
    endpoint_for,
    heartbeating,
    read_context,
)
from durable_agent_runner.agents import executor
from durable_agent_runner.agents.agent import Agent, approval_check
from durable_agent_runner.agents.breakpoints import BreakpointState, verdict
from durable_agent_runner.agents.guardrails import GuardrailContext, ModelCaller
from durable_agent_runner.agents.registry import Registry
from durable_agent_runner.agents.tools import RETRYABLE, describe_errors, describe_exception
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.workflows.types import (
    HOOK_ACTIVITY,
    AgentSpec,
    AssistantMessage,
    HookInput,
    HookResult,
    Message,
    ToolMessage,
    UserMessage,
)

log = logging.getLogger(__name__)

HOOK_FAILED = "AgentHookFailed"
_MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message])


def unpaired(messages: list[Message]) -> str | None:
    """Why a model API would refuse `messages` as a conversation: a tool call with no result after
    it, or a tool result of no call before it (None: every call has its result)."""
    asked: dict[str, str] = {}
    for m in messages:
        if isinstance(m, AssistantMessage):
            asked.update((c.call_id, c.name) for c in m.tool_calls)
        elif isinstance(m, ToolMessage):
            if asked.pop(m.call_id, None) is None:
                return f"a result of call {m.call_id} ({m.name}), which no message before it asks for"
    if asked:
        call_id, name = next(iter(asked.items()))
        return f"call {call_id} ({name}) has no result"
    return None


# A reply wrapped in a Markdown code fence, as models that ignore the response format send it.
_FENCE = re.compile(r"\A\s*```[\w-]*[ \t]*\n(.*?)\n?```\s*\Z", re.DOTALL)


class HookActivities:
    """The hook activity, bound to one worker's agents, Temporal client (to read a run's
    transcript), model settings and HTTP client (for guardrails' `ask_model`), and tool threads."""

    def __init__(
        self,
        registry: Registry,
        client: Client | None = None,
        settings: LLMSettings | None = None,
        http: httpx.AsyncClient | None = None,
        threads: executor.ToolThreads | None = None,
    ) -> None:
        self.registry = registry
        self.client = client
        self.settings = settings or LLMSettings()
        self.http = http
        self.threads = threads  # None: executor.shared(), for tests
        # A guardrail's `ask_model` goes through the model activity's own send (one way to call a model).
        self.model = ModelActivities(client, self.settings, http) if http is not None else None
        self.mcp = FrozenTools(client)  # MCP tools, as each run froze them

    @activity.defn(name=HOOK_ACTIVITY)
    async def run_hook(self, input: HookInput) -> HookResult:
        agent = self.registry.agent(input.agent)
        if agent is None:
            known = ", ".join(self.registry.agent_names()) or "no agents"
            message = f"unknown agent '{input.agent}'; this worker knows: {known}"
            raise ApplicationError(message, type="UnknownAgent", non_retryable=True)
        what = f"{input.kind.replace('_', ' ')} '{input.name}' of agent '{agent.name}'"
        # Heartbeats while the author's code runs: a worker that dies mid-hook is noticed within
        # the workflow's heartbeat timeout (HOOK_HEARTBEAT_TIMEOUT), not its 300 s start-to-close.
        async with heartbeating():
            with _authors_code(what):
                if input.kind == "approval":
                    result = await self._approval(agent, input)
                elif input.kind == "output_type":
                    result = check_output(agent, input.text)
                elif input.kind == "input_filter":
                    result = await self._input_filter(agent, input)
                elif input.kind == "breakpoint":
                    result = await self._breakpoint(agent, input)
                else:
                    result = await self._guardrail(agent, input)
        activity.logger.info("%s: done (turn %d)", what, input.turn)
        return result

    async def _approval(self, agent: Agent, input: HookInput) -> HookResult:
        tool = agent.tool(input.name) or await self.mcp.find(agent, input.name)  # MCP: checked on the frozen schema
        if tool is None:
            return HookResult(invalid=f"unknown tool '{input.name}' for agent '{agent.name}'")
        # In a tool thread: a policy that looks something up must not hold the event loop (and
        # with it this worker's heartbeats).
        check = functools.partial(approval_check, agent, tool, input.arguments)
        return await (self.threads or executor.shared()).run(check)

    async def _guardrail(self, agent: Agent, input: HookInput) -> HookResult:
        guards = agent.input_guardrails if input.kind == "input_guardrail" else agent.output_guardrails
        guard = next((g for g in guards if g.name == input.name), None)
        if guard is None:
            raise hook_failed(f"agent '{agent.name}' has no {input.kind.replace('_', ' ')} '{input.name}' here")
        run_id = activity.info().workflow_id or ""
        ctx = GuardrailContext(agent=agent.name, run_id=run_id, turn=input.turn, model_caller=self._caller(agent))
        verdict = await guard.run(ctx, input.text, self.threads)
        return HookResult(
            tripwire=verdict.tripwire_triggered, info=to_jsonable_python(verdict.output_info, fallback=str)
        )

    async def _input_filter(self, agent: Agent, input: HookInput) -> HookResult:
        fn = agent.input_filter(input.name)
        if fn is None:
            raise hook_failed(f"agent '{agent.name}' has no handoff input filter '{input.name}' here")
        assert self.client is not None, "a worker's hook activity has a Temporal client"
        _, messages = await read_context(self.client, input.transcript_len)
        if inspect.iscoroutinefunction(fn):
            out = await fn(messages)
        else:
            out = await (self.threads or executor.shared()).run(functools.partial(fn, messages))
            if inspect.isawaitable(out):
                out = await out
        try:
            messages = _MESSAGES.validate_python(out)
        except ValidationError as exc:
            raise TypeError(f"returned {type(out).__name__}, not a list of messages: {describe_errors(exc)}") from None
        if (why := unpaired(messages)) is not None:  # the next agent's first model call would be refused
            raise ValueError(f"returned a conversation a model would refuse: {why}")
        return HookResult(messages=messages)

    async def _breakpoint(self, agent: Agent, input: HookInput) -> HookResult:
        fn = agent.breakpoint
        if fn is None or agent.breakpoint_name != input.name:
            raise hook_failed(f"agent '{agent.name}' has no breakpoint function '{input.name}' here")
        assert self.client is not None, "a worker's hook activity has a Temporal client"
        _, messages = await read_context(self.client, input.transcript_len)
        state = BreakpointState(activity.info().workflow_id or "", input.agent, input.turn + 1, messages)
        if inspect.iscoroutinefunction(fn):
            out = await fn(state)
        else:
            out = await (self.threads or executor.shared()).run(functools.partial(fn, state))
            if inspect.isawaitable(out):
                out = await out
        return verdict(out)

    # ------------------------------------------------------------------------- ask_model

    def _caller(self, agent: Agent) -> ModelCaller:
        return functools.partial(self._ask_model, agent)

    async def _ask_model(self, agent: Agent, prompt: str, instructions: str, model: str | None) -> str:
        """One model call for a guardrail: no tools, no stream, no retries here (the hook's). It
        goes through the model activity's own `send`, so a guardrail's call meets the same
        endpoints, bounds, masking and retry rules as a turn's."""
        s = self.settings
        if self.model is None:
            raise RuntimeError("this hook activity has no model activities to ask a model with")
        spec = AgentSpec(
            name=agent.name, instructions=instructions, api=agent.api or s.api, model_timeout_seconds=s.timeout
        )
        endpoint = endpoint_for(self.model.providers, model or s.model, spec)
        body = build_request(endpoint, spec, [UserMessage(content=prompt)], False)
        reply, _ = await self.model.send(spec, endpoint, body, False, turn=0, began=time.monotonic())
        return reply.message.content or ""


def check_output(agent: Agent, text: str) -> HookResult:
    """The final output validated against the agent's output type: the object as JSON, or why
    not, in a line the model can act on. A reply in a ```json fence is read inside the fence."""
    adapter = agent.output_adapter
    if adapter is None:
        raise hook_failed(f"agent '{agent.name}' has no output type here")
    fenced = _FENCE.match(text)
    try:
        value = adapter.validate_json(fenced[1] if fenced else text)
    except ValidationError as exc:
        return HookResult(invalid=describe_errors(exc, whole="output"))
    return HookResult(output=adapter.dump_python(value, mode="json"))


def hook_failed(message: str) -> ApplicationError:
    return ApplicationError(message, type=HOOK_FAILED, non_retryable=True)


@contextlib.contextmanager
def _authors_code(what: str) -> Iterator[None]:
    """Author's code that raises fails the hook, non-retryable; see the module docstring."""
    try:
        yield
    except ApplicationError:  # ours (hook_failed), or a model call's (errors.py): as they are
        raise
    except RETRYABLE:  # transient: Temporal retries the hook
        raise
    except Exception as exc:
        raise hook_failed(f"{what} failed: {describe_exception(exc)}") from exc
    except (asyncio.CancelledError, GeneratorExit):
        raise
    except BaseException as exc:
        log.warning("%s raised %s; the run is told", what, type(exc).__name__)
        raise hook_failed(
            f"{what} failed: {describe_exception(exc)} (it tried to stop the worker; it did not)"
        ) from None
