"""The Temporal activities that resolve agents and run their tools on a worker.

Each takes one pydantic model and returns one; names come from `workflows.types`.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import time
from collections.abc import Awaitable, Callable, Collection
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from durable_agent_runner import telemetry
from durable_agent_runner.activities import wire
from durable_agent_runner.activities.context_cache import ContextCache
from durable_agent_runner.activities.mcp_tools import FrozenTools, McpTool, freeze
from durable_agent_runner.activities.prices import PriceTable
from durable_agent_runner.activities.providers import settings_problems
from durable_agent_runner.agents.agent import Agent
from durable_agent_runner.agents.executor import ToolThreads
from durable_agent_runner.agents.lifecycle import HookCaller, ToolAttempt
from durable_agent_runner.agents.registry import Registry
from durable_agent_runner.agents.tools import Tool, ToolContext, ToolRetryableError
from durable_agent_runner.config import completion
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.machine import bounds
from durable_agent_runner.machine.bounds import json_object
from durable_agent_runner.machine.calls import cheap_calls
from durable_agent_runner.workflows.types import (
    AGENT_NOT_HERE,
    RESOLVE_AGENT_ACTIVITY,
    TOOL_CALL_ACTIVITY,
    TOOL_NOT_HERE,
    AgentSpec,
    AheadReply,
    ModelReply,
    ModelSettings,
    ResolveAgentInput,
    ToolCall,
    ToolCallInput,
    ToolResult,
    UserMessage,
    WithReply,
    idempotency_key,
)


class ToolActivities:
    """Activities bound to one worker's `Registry`."""

    def __init__(
        self,
        registry: Registry,
        heartbeat_interval: float = 5.0,
        default_model: str | None = None,
        cache: ContextCache | None = None,
        settings: LLMSettings | None = None,
        threads: ToolThreads | None = None,
        hooks: HookCaller | None = None,
        prices: PriceTable | None = None,
    ) -> None:
        self.registry = registry
        self.prices = prices or PriceTable()  # a model's output price is frozen into the run (budgets)
        self.hooks = hooks or HookCaller()  # the at-least-once lifecycle hooks (agents/lifecycle.py)
        self.heartbeat_interval = heartbeat_interval
        self.cache = cache  # shared with the model activity: tool results feed the next turn
        # The worker's LLM_MODEL, pinned into runs that name none.
        self.default_model = default_model or (settings.model if settings else None)
        self.model_bounds = model_bounds(settings or LLMSettings())  # no settings: the defaults
        self.default_api = (settings or LLMSettings()).api
        self.notify = (settings or LLMSettings()).notify  # which channels a run's waits reach (names only)
        self.completion = (settings or LLMSettings()).completion  # signs completion URLs (never in history)
        self.threads = threads  # None: executor.shared(), for tests
        self.mcp = FrozenTools()  # MCP tools, as each run froze them
        self._versions: dict[str, str | None] = {}  # agent name -> the version this worker holds
        # Makes the model call a tool's activity is asked to make once the tool has run
        # (ToolCallInput.then; activities/ahead.py), set by the worker; None: the turn makes it.
        self.ahead: Callable[[ToolCallInput, ToolResult], Awaitable[AheadReply | None]] | None = None

    def _version_of(self, agent: str) -> str | None:
        """The version of the agent this worker holds, hashed once: the registry is fixed."""
        if agent not in self._versions:
            held = self.registry.agent(agent)
            self._versions[agent] = held.version if held is not None else None
        return self._versions[agent]

    @activity.defn(name=TOOL_CALL_ACTIVITY)
    async def call_tool(self, input: ToolCallInput) -> ToolResult:
        """Run one tool call. Errors the model can fix come back as `is_error` results."""
        if activity.info().is_local and input.agent_version is not None:  # run where the workflow runs
            if self._version_of(input.agent) != input.agent_version:
                raise ApplicationError(
                    f"this worker does not hold agent '{input.agent}' version {input.agent_version}",
                    type=TOOL_NOT_HERE,
                    non_retryable=True,
                )
        found = self.registry.find_tool(input.agent, input.tool)
        tool = await self.mcp.find(self.registry.agent(input.agent), input.tool) if isinstance(found, str) else found
        if tool is None:
            return ToolResult(call_id=input.call_id, tool=input.tool, output=str(found), is_error=True)
        info = activity.info()
        result = ran_before(input)  # an attempt lost during the call ahead: the tool ran
        if result is None:
            heartbeat = asyncio.create_task(self._heartbeat(info.heartbeat_timeout))
            try:  # the hooks inside the heartbeat: a tool's heartbeat timeout may be shorter than theirs
                result = await self._bounded(tool, input, info.workflow_id or "", info.attempt)
            finally:
                heartbeat.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await heartbeat
        if self.cache is not None:
            self.cache.remember_tool(info.workflow_id or "", result)
        if input.then is not None and self.ahead is not None:
            result.ahead = await self.ahead(input, result)
        return result

    async def _bounded(
        self, tool: Tool[..., Any] | McpTool, input: ToolCallInput, run: str, attempt: int
    ) -> ToolResult:
        """One attempt; with a call ahead, within the tool's own timeout (Temporal's covers both)."""
        if input.then is None:
            return await self._attempt(tool, input, run, attempt)
        limit = input.then.tool_timeout_seconds
        bound = asyncio.timeout(limit)
        try:
            async with bound:
                return await self._attempt(tool, input, run, attempt)
        except TimeoutError:
            if not bound.expired():  # the tool's own
                raise
            raise ApplicationError(
                f"tool {input.tool} ran past its timeout of {limit:g}s", type="ToolTimedOut"
            ) from None

    async def _attempt(
        self, tool: Tool[..., Any] | McpTool, input: ToolCallInput, run: str, attempt: int
    ) -> ToolResult:
        """One attempt at a call, between the at-least-once lifecycle hooks; a failure worth a
        retry comes out as Temporal's (ToolRetryableError's delay kept), any other as is."""
        ctx = ToolContext(
            run_id=run, call_id=input.call_id, idempotency_key=input.idempotency_key, turn=input.turn, attempt=attempt,
            completion_url=self._completion_url(tool, run, input.call_id),
        )  # fmt: skip
        # Argument values may hold secrets, so only their size is logged.
        what = f"tool {tool.name} call {input.call_id} (args {len(input.arguments_json())} chars, attempt {attempt})"
        started = time.monotonic()
        at = ToolAttempt(
            run_id=run, agent=input.agent, turn=input.turn, attempt=attempt, tool=tool.name,
            call_id=input.call_id, idempotency_key=input.idempotency_key,
        )  # fmt: skip
        try:
            if self.hooks.wants("on_tool_call"):
                await self.hooks.call("on_tool_call", at, _arguments(input))
            result = await tool.invoke(input.arguments_json(), ctx, self.threads)  # its output is text (bounds)
            if self.hooks.wants("on_tool_result"):
                await self.hooks.call("on_tool_result", at, result.output, result.is_error)
        except ToolRetryableError as exc:
            activity.logger.info("%s: retryable failure %s", what, exc)
            delay = timedelta(seconds=exc.retry_after) if exc.retry_after is not None else None
            message = bounds.clean_text(str(exc))  # a failure's text is a protobuf string: valid text only
            raise ApplicationError(message, type="ToolRetryableError", next_retry_delay=delay) from exc
        except Exception as exc:
            activity.logger.info("%s: %s, will be retried", what, type(exc).__name__)
            raise
        outcome = "error result" if result.is_error else "ok"
        activity.logger.info("%s: %s in %.2fs", what, outcome, time.monotonic() - started)
        return result

    def _completion_url(self, tool: Tool[..., Any] | McpTool, run: str, call_id: str) -> str | None:
        """The signed URL that completes this call, for a tool that completes outside (with
        COMPLETION_SECRET and COMPLETION_BASE_URL set): good past the call's longest wait."""
        spec = tool.spec() if isinstance(tool, Tool) else None
        if spec is None or spec.outside is None:  # an ordinary tool: no key is read for it
            return None
        key, base = self.completion.key(), self.completion.base_url
        if key is None or base is None:
            return None
        expires = time.time() + spec.timeout_seconds + spec.outside.timeout_seconds + completion.MARGIN_SECONDS
        return completion.url(base, key, run, call_id, expires)

    async def run_with_reply(
        self,
        agent: AgentSpec,
        turn: int,
        within: WithReply,
        reply: ModelReply,
        bound: float,
        earlier: Collection[str] = (),
    ) -> list[ToolResult]:
        """Inside a model call, once its reply is whole: the reply's calls it may run (`within`,
        see WithReply), each one attempt bounded by its tool's timeout and by `bound` seconds (what
        the model call's attempt has left), all at once. A call that fails, or runs out of time,
        is left out: the turn runs it as before, with its retries. So is a call whose id an
        `earlier` reply of the run used: the run gives it a new id, and its idempotency key with
        it. The results feed the context cache as a tool activity's do."""
        if self._version_of(agent.name) != within.version:
            return []
        run = activity.info().workflow_id or ""

        async def one(call: ToolCall) -> ToolResult | None:
            tool, spec = self.registry.find_tool(agent.name, call.name), agent.tool(call.name)
            if isinstance(tool, str) or spec is None:
                return None
            args = json_object(call.arguments)
            input = ToolCallInput(
                call_id=call.call_id, tool=call.name, arguments="" if args is not None else call.arguments,
                args=args, idempotency_key=idempotency_key(run, call.call_id), turn=turn, agent=agent.name,
            )  # fmt: skip
            try:
                async with asyncio.timeout(min(spec.timeout_seconds, bound)):
                    with telemetry.tool_with_reply(input) as traced:
                        result = await self._attempt(tool, input, run, 1)
                        traced(result)
                        return result
            except Exception:  # a failure or the bound: logged by _attempt; the turn runs it as before
                return None

        results = await asyncio.gather(*(one(c) for c in cheap_calls(within, reply, earlier)))
        ran = [r for r in results if r is not None]
        if self.cache is not None:
            for result in ran:
                self.cache.remember_tool(run, result)
        return ran

    async def _heartbeat(self, heartbeat_timeout: timedelta | None) -> None:
        """Heartbeat while the tool runs: a dead worker is then noticed within the heartbeat
        timeout, and cancellation reaches the activity."""
        if heartbeat_timeout is None and activity.info().is_local:
            return  # a local activity has no heartbeats: it is bound by its start-to-close timeout
        interval = self.heartbeat_interval
        if heartbeat_timeout:
            interval = min(interval, heartbeat_timeout.total_seconds() / 3)
        # Each beat says when the attempt began: a `once` call whose attempt is lost shows it.
        beat = {"started_at": datetime.now(UTC).isoformat()}
        activity.heartbeat(beat)
        while True:
            await asyncio.sleep(interval)
            activity.heartbeat(beat)

    @activity.defn(name=RESOLVE_AGENT_ACTIVITY)
    async def resolve_agent(self, input: ResolveAgentInput) -> AgentSpec:
        """The agent's spec with its team (every agent it reaches) and the run's overrides, to be
        frozen into the run's history: max_turns for the run (its first agent's), the model and
        model settings for every member (as the Agents SDK's RunConfig does), the worker's
        defaults wherever an agent leaves one open, and the tools its MCP servers list now.
        A server that cannot be reached fails the attempt (retried).

        Run locally, on the run's own worker, it resolves only agents this worker serves whose
        team has no MCP servers (no I/O while the run's workflow task is open), else says so
        (AGENT_NOT_HERE) and the run resolves routed; and it leaves the first model call's
        context (the agent and the prompt) in the worker's cache."""
        agent = self.registry.agent(input.agent)
        info = activity.info()
        if info.is_local and (agent is None or any(a.mcp_servers for a in (agent, *agent.team()))):
            why = "does not serve it" if agent is None else "would have to reach its MCP servers"
            message = f"agent '{input.agent}' is not resolved here: this worker {why}"
            raise ApplicationError(message, type=AGENT_NOT_HERE, non_retryable=True)
        if agent is None:
            known = ", ".join(self.registry.agent_names()) or "no agents"
            raise ApplicationError(
                f"unknown agent '{input.agent}'; this worker knows: {known}",
                type="UnknownAgent",
                non_retryable=True,
            )
        # Routed, it heartbeats (starting MCP servers takes a while): a worker that dies mid-resolve
        # is noticed within the workflow's heartbeat timeout, not its 60 s start-to-close.
        beats = None if info.is_local else asyncio.create_task(self._heartbeat(info.heartbeat_timeout))
        try:
            members = [(agent, agent.spec(max_turns=input.max_turns, model=input.model))]
            members += [(member, member.spec(model=input.model)) for member in agent.team()]
            filled = [self._filled(a, spec, input.model_settings, input.fallback_models) for a, spec in members]
            frozen = await asyncio.gather(*(freeze(a, spec) for (a, _), spec in zip(members, filled, strict=True)))
        except ValueError as exc:  # wire.BadSettings among them
            raise ApplicationError(str(exc), type="InvalidRunInput", non_retryable=True) from exc
        except ToolRetryableError as exc:  # an MCP server down: the run cannot know its tools yet
            raise ApplicationError(str(exc), type="McpServerUnavailable") from None
        finally:
            if beats is not None:
                beats.cancel()
        spec = frozen[0].model_copy(update={"team": frozen[1:]})
        if info.is_local and input.prompt is not None and self.cache is not None and info.workflow_id:
            self.cache.seed(info.workflow_id, spec, [UserMessage(content=input.prompt)])
        return spec

    def _filled(
        self, agent: Agent, spec: AgentSpec, settings: ModelSettings | None, fallbacks: list[str] | None = None
    ) -> AgentSpec:
        """`spec` with the run's model settings (and fallback models) on top of its own and the
        worker's defaults in what the agent leaves open; settings that no wire may send, or that
        the provider of one of its models lacks, are refused now, not mid-run."""
        fill: dict[str, object] = {k: v for k, v in self.model_bounds.items() if getattr(spec, k) is None}
        if agent.model_timeout_seconds is None:
            fill["model_timeout_seconds"] = self.model_bounds["model_timeout_seconds"]
        if spec.model is None and self.default_model:
            fill["model"] = self.default_model
        price = self.prices.price(str(fill.get("model") or spec.model or ""))
        if price is not None:  # what a model call reserves of a cost budget (machine/budget.py)
            fill["output_price"] = price.output
        if settings is not None:
            fill["settings"] = settings.over(spec.settings)
        if fallbacks:
            fill["fallback_models"] = list(fallbacks)
        plan = self.notify.plan(spec.notify)
        if plan is not None:  # None: the run notifies no one and schedules nothing (docs/notifications.md)
            fill["notify_plan"] = plan
        filled = spec.model_copy(update=fill)
        try:
            wire.check_sendable(filled.settings)
        except wire.BadSettings as exc:
            raise ValueError(f"agent '{agent.name}': {exc}") from None
        problems: list[str] = []
        for model in [filled.model or "", *filled.fallback_models]:
            try:
                problems += settings_problems(model, filled.api or self.default_api, filled.settings_now())
            except ValueError as exc:  # "anthropic:" with no model after it
                problems.append(str(exc))
        if problems:
            raise ValueError(f"agent '{agent.name}': " + "; ".join(problems))
        return filled


def ran_before(input: ToolCallInput) -> ToolResult | None:
    """The result an earlier attempt's tool returned before its call ahead was lost (its
    heartbeat's second detail, activities/ahead.py), if it was this call's."""
    details = activity.info().heartbeat_details if input.then is not None else []
    if len(details) < 2 or not isinstance(details[1], dict):
        return None
    try:
        result = ToolResult.model_validate(details[1])
    except ValueError:
        return None
    return result if result.call_id == input.call_id and result.ahead is None else None


def _arguments(input: ToolCallInput) -> dict[str, Any] | str:
    """The call's arguments for a hook: a copy of the object, or the model's text when it is not one."""
    if input.args is not None:
        return copy.deepcopy(input.args)
    try:
        parsed = bounds.parse_json(input.arguments or "{}")
    except bounds.OutsideDataError:
        return input.arguments
    return parsed if isinstance(parsed, dict) else input.arguments


def model_bounds(settings: LLMSettings) -> dict[str, float | int]:
    """The worker's bounds on a model call, by AgentSpec field."""
    return {
        "model_timeout_seconds": settings.timeout,
        "model_read_timeout_seconds": settings.read_timeout,
        "model_max_attempts": settings.max_attempts,
        "model_retry_seconds": settings.retry_seconds,
    }
