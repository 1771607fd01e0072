"""Agents inside your own Temporal workflow: each call is a child run of `AgentRun`, a durable step.

    import asyncio

    from temporalio import workflow

    # The runner is no workflow code of yours (its types are pydantic models, its package holds
    # the plugin): pass it through temporalio's sandbox rather than import it afresh per run.
    with workflow.unsafe.imports_passed_through():
        from durable_agent_runner.workflow import run_agent


    @workflow.defn
    class Report:
        @workflow.run
        async def run(self, topic: str) -> str:
            outline = await run_agent("outline", topic)  # one agent, then the next
            drafts = await asyncio.gather(*(run_agent("writer", f"{outline}\\nPart {i}") for i in (1, 2, 3)))
            return "\\n\\n".join(drafts)

Each call starts the agent as an ordinary `AgentRun` (its own history, approvals, budgets,
retries), with the readable id `{your workflow's id}/{agent}-{n}` (n counts that agent's calls in
this workflow run, from 1), so `client.py approve/status/watch` reach it by that id. A finished
child is in your workflow's history: after a worker crash your workflow replays its result and
does not run that agent again. Cancelling your workflow cancels the children it waits on, and
`run_agent` then raises asyncio.CancelledError (your workflow ends cancelled, as it asked).

What comes back: the final answer's text, or, when the agent has typed output and you give
`output_type=` (or pass the `Agent` itself, whose `output_type` is used), an instance of that
type. A name alone gives the typed output as JSON data (a dict): your workflow cannot see the
worker's registry deterministically. `run_agent_result` returns the whole `RunResult` (usage,
turns, handoffs). A child that fails raises `AgentFailed` (its `error_type`: MaxTurnsExceeded,
TokenBudgetExceeded, CostBudgetExceeded, ApprovalTimedOut, ...); one that was cancelled raises
`AgentCancelled`. Both are `AgentError`s, ApplicationErrors: uncaught, they fail your workflow
with that one line. So does a bad option (`AgentFailed`, error_type InvalidAgentOptions), checked
before the child starts, and an `id=` a running run holds (AgentRunIdTaken): never a raw error
that would fail your workflow's task over and over.

Determinism: this module imports only temporalio's workflow API, pydantic and the runner's pure
contracts, does no I/O at import, and reads no clock; ids come from a per-run counter.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import Counter
from collections.abc import Mapping
from typing import Any, Protocol, TypeVar, overload

from pydantic import TypeAdapter, ValidationError
from temporalio import workflow
from temporalio.exceptions import (
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
    FailureError,
    WorkflowAlreadyStartedError,
)
from temporalio.workflow import ParentClosePolicy

from durable_agent_runner.machine.texts import said
from durable_agent_runner.workflows import types as t

T = TypeVar("T")

__all__ = ["AgentCancelled", "AgentError", "AgentFailed", "run_agent", "run_agent_result"]


class AgentLike(Protocol):
    """An `Agent` (or anything with its name): its `output_type`, when it has one, types the result."""

    @property
    def name(self) -> str: ...


class AgentError(ApplicationError):
    """An agent run from a workflow did not give an answer. `run_id` is the child run's id."""

    def __init__(self, message: str, *, run_id: str, agent: str, error_type: str, usage: t.ChildUsage | None = None):
        super().__init__(message, type=error_type, non_retryable=True)
        self.run_id, self.agent, self.error_type = run_id, agent, error_type
        self.usage = usage  # what the child spent, by agent, when it said


class AgentFailed(AgentError):
    """The child run failed: `error_type` is its failure's type (e.g. TokenBudgetExceeded)."""


class AgentCancelled(AgentError):
    """The child run was cancelled (by `client.py cancel` on its id, for one)."""


# Each workflow run's count of calls per agent, for readable ids. A workflow run is its own event
# loop in temporalio: keyed by it, a replay after eviction counts again from zero, as it must.
_CALLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Counter[str]] = weakref.WeakKeyDictionary()


def _next_id(name: str) -> str:
    counts = _CALLS.setdefault(asyncio.get_running_loop(), Counter())
    counts[name] += 1
    return f"{workflow.info().workflow_id}/{name}-{counts[name]}"


async def run_agent_result(
    agent: str | AgentLike,
    input: str,
    *,
    id: str | None = None,
    model: str | None = None,
    max_turns: int | None = None,
    model_settings: t.ModelSettings | Mapping[str, Any] | None = None,
    capture: bool = False,
    agent_wait_seconds: float = 120.0,
    task_queue: str | None = None,
    budget: t.Budget | None = None,
) -> t.RunResult:
    """Runs `agent` (its name, or the Agent) on `input` as a child run and returns its RunResult.
    The options are `client.py run`'s; `task_queue` defaults to your workflow's (the worker
    that carries the AgentPlugin); `id` to `{workflow id}/{agent}-{n}`. `budget` caps what the
    child and its own tree may spend, below its agent's budgets (docs/what-runs-once.md); a
    workflow that gathers several agents splits its budget among them as it sees fit."""
    name = agent if isinstance(agent, str) else agent.name
    child_id = id or _next_id(name)
    if not isinstance(input, str) or not input.strip():
        message = f"run_agent({name!r}): the input must be a non-empty string, not {input!r:.80}"
        raise AgentFailed(message, run_id=child_id, agent=name, error_type="InvalidAgentInput")
    # Checked here, in the caller's workflow: a raw ValidationError would fail its workflow task
    # over and over (the run wedged); AgentFailed fails the workflow, or is caught, as it chooses.
    try:
        if isinstance(model_settings, Mapping) and (unknown := set(model_settings) - set(t.ModelSettings.model_fields)):
            raise ValueError(f"model_settings: unknown setting(s) {', '.join(sorted(map(str, unknown)))}")
        if max_turns is not None and (isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1):
            raise ValueError(f"max_turns: must be a whole number of at least 1, not {max_turns!r:.40}")
        run = t.RunInput(
            prompt=input,
            agent=name,
            model=model,
            max_turns=max_turns,
            model_settings=model_settings,
            capture=capture,
            agent_wait_seconds=agent_wait_seconds,
            budget=budget,
        )
    except (ValidationError, ValueError) as err:
        message = f"run_agent({name!r}): {_why(err)}"
        raise AgentFailed(message[:2000], run_id=child_id, agent=name, error_type="InvalidAgentOptions") from None
    try:
        result: t.RunResult = await workflow.execute_child_workflow(
            t.WORKFLOW_NAME,
            run,
            id=child_id,
            task_queue=task_queue,
            result_type=t.RunResult,
            # A parent that ends otherwise than by awaiting (terminated, timed out) still cancels
            # its children, so each says what it spent and stops what it waits for.
            parent_close_policy=ParentClosePolicy.REQUEST_CANCEL,
            static_summary=f"{name}: {input[:100]}",
        )
    except WorkflowAlreadyStartedError:
        message = (
            f"run_agent({name!r}): a run with id {child_id!r} is already running: give each call its own id= "
            "(or none: each call then gets its own, {workflow id}/{agent}-{n})"
        )
        raise AgentFailed(message, run_id=child_id, agent=name, error_type="AgentRunIdTaken") from None
    except ChildWorkflowError as err:
        task = asyncio.current_task()
        if isinstance(err.cause, CancelledError) and task is not None and task.cancelling():
            raise asyncio.CancelledError(f"cancelled while agent {name!r} (run {child_id}) ran") from err
        raise _error(err, child_id, name) from err
    return result


def _why(err: ValueError) -> str:
    """A bad option as one line: `field: what is wrong; ...`."""
    if not isinstance(err, ValidationError):
        return str(err)
    parts = [f"{'.'.join(map(str, e['loc'])) or 'options'}: {said(e)}" for e in err.errors(include_url=False)[:5]]
    return "; ".join(parts)


def _error(err: ChildWorkflowError, child_id: str, name: str) -> AgentError:
    cause = err.cause
    why = cause.message if isinstance(cause, FailureError) else err.message
    if isinstance(cause, CancelledError):
        return AgentCancelled(f"agent {name!r} (run {child_id}) was cancelled", run_id=child_id, agent=name,
                              error_type="AgentCancelled")  # fmt: skip
    kind = (cause.type if isinstance(cause, ApplicationError) else None) or type(cause).__name__
    usage = None
    if isinstance(cause, ApplicationError) and cause.details:
        try:
            usage = t.ChildUsage.model_validate(cause.details[0])
        except ValidationError:
            usage = None
    message = f"agent {name!r} (run {child_id}) failed: {kind}: {why}"
    return AgentFailed(message, run_id=child_id, agent=name, error_type=kind, usage=usage)


@overload
async def run_agent(
    agent: str | AgentLike, input: str, *, output_type: type[T], **options: Any
) -> T: ...  # fmt: skip
@overload
async def run_agent(agent: str | AgentLike, input: str, *, output_type: None = None, **options: Any) -> Any: ...
async def run_agent(agent: str | AgentLike, input: str, *, output_type: Any = None, **options: Any) -> Any:
    """Runs `agent` on `input` as a child run and returns its answer: an instance of
    `output_type` (or of the Agent's own `output_type`), else the typed output as JSON data when
    the agent has one, else the answer's text. `options`: those of `run_agent_result`."""
    kind = output_type if output_type is not None else getattr(agent, "output_type", None)
    result = await run_agent_result(agent, input, **options)
    if kind is None:
        return result.output if result.output_object is None else result.output_object
    if kind is str and result.output_object is None:
        return result.output
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(kind)
        if result.output_object is not None:
            return adapter.validate_python(result.output_object)
        return adapter.validate_json(result.output)
    except ValidationError as err:
        message = f"agent {result.agent!r} (run {result.run_id}) answered, but not as {kind!r}: {err}"
        raise AgentFailed(
            message[:2000], run_id=result.run_id, agent=result.agent, error_type="OutputTypeMismatch"
        ) from None
