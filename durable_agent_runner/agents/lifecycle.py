"""Lifecycle hooks: user code told about each step of the runs a worker serves.

A module passed to `worker.py --tools` defines a subclass of `RunHooks` and an instance of it at
module level; the worker finds it there, as it finds tools and agents:

    from durable_agent_runner import RunHooks, Step

    class Metrics(RunHooks):
        async def on_tool_end(self, step: Step, tool: str, call_id: str, result: str) -> None:
            statsd.incr(f"tool.{tool}")

    hooks = Metrics()

Two kinds of delivery, told apart by name (see `RunHooks`). `HookCaller` calls them for the
worker: bounded in time, off the event loop when sync, never letting a hook's failure reach the
step it reports on.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from durable_agent_runner.agents.registry import (
    _import as import_module_ref,  # the Registry's loader: a module is imported once
)
from durable_agent_runner.redact import Redactor
from durable_agent_runner.workflows.types import AnyRunEvent, EventKind, ModelReply, Usage

log = logging.getLogger(__name__)

# Threads for each sync hook method: a pool per method, apart from the tools' and the loop's
# default, so a hook hung in every thread of its pool delays (by its timeout) only its own calls.
HOOK_THREADS = 4


@dataclass(frozen=True)
class Step:
    """One step of a run from its durable event log, as the exactly-once hooks see it. `run_id`
    and `seq` identify it for good (seq counts on across continue-as-new): a hook that must never
    see a step twice dedupes on them (see the README on the window after a worker crash)."""

    run_id: str
    seq: int
    turn: int
    agent: str  # the agent in charge at this step
    event: AnyRunEvent  # its kind's class (match on it): kind, text, detail, call_id, tool, usage, at

    @property
    def kind(self) -> EventKind | str:  # a StrEnum: step.kind == "final" holds (a newer kind: its str)
        return self.event.kind


@dataclass(frozen=True)
class ModelAttempt:
    """One attempt at a model call, as the at-least-once hooks see it: a retried call is
    reported again with the next `attempt`."""

    run_id: str
    agent: str
    turn: int
    attempt: int
    model: str
    api: str  # the path under the base URL: "chat/completions" or "responses"
    stream: bool


@dataclass(frozen=True)
class ModelResponse:
    """What the model server sent back. `body` is the parsed JSON body of a reply that was not
    streamed; `sse_lines` every raw line of a streamed one (held while it streams in, as a wire
    capture does); `reply` the message assembled from either; `usage` its token counts."""

    body: Any
    sse_lines: list[str] | None
    reply: ModelReply
    usage: Usage


@dataclass(frozen=True)
class ToolAttempt:
    """One attempt at a tool call, as the at-least-once hooks see it."""

    run_id: str
    agent: str
    turn: int
    attempt: int
    tool: str
    call_id: str
    idempotency_key: str  # stable across attempts and workers: the same call, retried


class RunHooks:
    """Override the methods you need; each may be `async def` or a plain `def` (run in a thread
    of the worker's hook pool, off the event loop). Each call is bounded by `timeout_seconds`;
    a hook that raises or runs over is logged and abandoned, and the run goes on unaffected.

    **Exactly once per step** (the default for logging and metrics). Fed from each run's durable,
    numbered event log by the worker's hook feed (durable_agent_runner/worker/hook_feed.py), in order, once per
    event, with a checkpoint after each, across worker crashes and continue-as-new:

        on_agent_start(step, agent)            a run's (or a session answer's) first model call; a handoff's target
        on_agent_end(step, agent, output)      final, failed, cancelled; a session's ended (step.kind says which)
        on_model_start(step, model)            model_started
        on_model_end(step, text, usage)        model_finished: the reply's text (tool calls in step.event.detail)
        on_tool_start(step, tool, call_id, call)    tool_started; call as shown: get_weather(city=Tokyo)
        on_tool_end(step, tool, call_id, result)    tool_finished; result: an excerpt
        on_handoff(step, from_agent, to_agent)
        on_approval_requested(step, tool, call_id, call)
        on_approval_decided(step, tool, call_id, decision)   "approved by alice", "rejected by bob: …"
        on_event(step)                         every event, of every kind, after the hook above

    **At least once** (`on_model_request`, `on_model_response`, `on_tool_call`, `on_tool_result`).
    Called inside the model and tool activities, with what only they see: the raw request body
    and response, a tool's arguments and whole result. An activity that is retried (a crashed
    worker, a 503, a tool's retryable error) calls them again, with the next `attempt`; a failed
    attempt gets no response or result call. The API key never reaches them (it travels in a
    header, and anything a server echoes is masked).
    """

    timeout_seconds: float = 5.0

    # ---------------------------------------------------------------- exactly once (event log)

    def on_agent_start(self, step: Step, agent: str) -> Awaitable[None] | None:
        return None

    def on_agent_end(self, step: Step, agent: str, output: str) -> Awaitable[None] | None:
        return None

    def on_model_start(self, step: Step, model: str) -> Awaitable[None] | None:
        return None

    def on_model_end(self, step: Step, text: str, usage: Usage | None) -> Awaitable[None] | None:
        return None

    def on_tool_start(self, step: Step, tool: str, call_id: str, call: str) -> Awaitable[None] | None:
        return None

    def on_tool_end(self, step: Step, tool: str, call_id: str, result: str) -> Awaitable[None] | None:
        return None

    def on_handoff(self, step: Step, from_agent: str, to_agent: str) -> Awaitable[None] | None:
        return None

    def on_approval_requested(self, step: Step, tool: str, call_id: str, call: str) -> Awaitable[None] | None:
        return None

    def on_approval_decided(self, step: Step, tool: str, call_id: str, decision: str) -> Awaitable[None] | None:
        return None

    def on_event(self, step: Step) -> Awaitable[None] | None:
        return None

    # ------------------------------------------------------------ at least once (in activities)

    def on_model_request(self, call: ModelAttempt, request: dict[str, Any]) -> Awaitable[None] | None:
        return None

    def on_model_response(self, call: ModelAttempt, response: ModelResponse) -> Awaitable[None] | None:
        return None

    def on_tool_call(self, call: ToolAttempt, arguments: dict[str, Any] | str) -> Awaitable[None] | None:
        return None

    def on_tool_result(self, call: ToolAttempt, result: str, is_error: bool) -> Awaitable[None] | None:
        return None


EXACTLY_ONCE = (
    "on_agent_start", "on_agent_end", "on_model_start", "on_model_end", "on_tool_start", "on_tool_end",
    "on_handoff", "on_approval_requested", "on_approval_decided", "on_event",
)  # fmt: skip
AT_LEAST_ONCE = ("on_model_request", "on_model_response", "on_tool_call", "on_tool_result")


def hooks_in_modules(refs: Iterable[str]) -> list[RunHooks]:
    """The RunHooks instances defined at module level in these modules (names or .py paths,
    as `--tools` takes them), each once."""
    found: list[RunHooks] = []
    for ref in refs:
        for value in list(vars(import_module_ref(ref)).values()):
            if isinstance(value, RunHooks) and not any(value is f for f in found):
                found.append(value)
    return found


class HookCaller:
    """Calls one method on every registered hooks object, each call bounded by its object's
    `timeout_seconds`. Never raises (cancellation of the caller aside) and never waits longer:
    an async hook still running is cancelled and left behind, a sync one's thread abandoned."""

    def __init__(self, hooks: Sequence[RunHooks] = (), redactor: Redactor | None = None) -> None:
        self.hooks = list(hooks)
        self._redactor = redactor or Redactor()  # the API key, should a server or a tool echo it
        self._pools: dict[tuple[int, str], ThreadPoolExecutor] = {}  # (id of the hooks object, method)
        self._left: set[asyncio.Task[BaseException | None]] = set()  # async hooks that ran over

    def wants(self, name: str) -> bool:
        """Whether any hooks object overrides `name`: if none does, nothing is prepared for it."""
        return any(_overrides(h, name) for h in self.hooks)

    @property
    def wants_feed(self) -> bool:
        return any(self.wants(name) for name in EXACTLY_ONCE)

    async def call(self, name: str, *args: object) -> None:
        hooks = [h for h in self.hooks if _overrides(h, name)]
        if hooks:
            masked = tuple(self._redactor.scrub(a) for a in args)
            for h in hooks:
                await self._one(h, name, masked)

    async def _one(self, hooks: RunHooks, name: str, args: tuple[object, ...]) -> None:
        fn = getattr(hooks, name)
        what = f"lifecycle hook {type(hooks).__name__}.{name}"
        limit = hooks.timeout_seconds
        if inspect.iscoroutinefunction(fn):
            task = asyncio.ensure_future(_guarded(fn(*args)))
        else:
            task = asyncio.ensure_future(_guarded(self._in_thread(self._pool(hooks, name), fn, args)))
        try:
            done, _ = await asyncio.wait({task}, timeout=limit)
        except asyncio.CancelledError:
            task.cancel()
            raise
        if not done:
            task.cancel()  # an async hook that ignores it is left behind, not awaited
            self._left.add(task)
            task.add_done_callback(self._left.discard)
            log.warning("%s did not return within %gs; left behind, the step goes on", what, limit)
            return
        err = task.result()
        if err is not None:
            message = self._redactor.text(f"{type(err).__name__}: {err}")[:500]
            log.warning("%s raised %s; the step goes on", what, message)

    def _pool(self, hooks: RunHooks, name: str) -> ThreadPoolExecutor:
        key = (id(hooks), name)
        pool = self._pools.get(key)
        if pool is None:  # threads start as calls need them
            pool = self._pools[key] = ThreadPoolExecutor(max_workers=HOOK_THREADS, thread_name_prefix=f"hook-{name}")
        return pool

    @staticmethod
    async def _in_thread(pool: ThreadPoolExecutor, fn: Callable[..., object], args: tuple[object, ...]) -> None:
        call = functools.partial(contextvars.copy_context().run, fn, *args)
        out = await asyncio.wrap_future(pool.submit(call))
        if inspect.isawaitable(out):  # a plain function that returned a coroutine
            await out

    def shutdown(self) -> None:
        """Drop queued sync hooks and leave hung threads behind (worker.py ends with os._exit)."""
        for pool in self._pools.values():
            pool.shutdown(wait=False, cancel_futures=True)
        for task in list(self._left):
            task.cancel()


async def _guarded(awaitable: Any) -> BaseException | None:
    """The hook's error, returned: a SystemExit or KeyboardInterrupt raised in a task would
    otherwise escape the event loop and stop the worker."""
    try:
        await awaitable
    except asyncio.CancelledError:
        raise
    except BaseException as err:
        return err
    return None


def _overrides(hooks: RunHooks, name: str) -> bool:
    fn = getattr(hooks, name, None)
    return fn is not None and getattr(fn, "__func__", fn) is not getattr(RunHooks, name)
