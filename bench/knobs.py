"""Worker tuning knobs as JSON-safe specs (they cross into `bench.worker_proc`), and how a spec
becomes keyword arguments of temporalio 1.35's `Worker`.

A spec maps a Worker argument to a plain value: durations in seconds, poller behaviours as
"max:N" (PollerBehaviorSimpleMaximum) or "auto[:min:max:initial]" (PollerBehaviorAutoscaling),
AgentRun's runner by name (`runner`). "patch:MODULE.NAME" keys set a module attribute in the
worker's process instead (bench-only what-ifs).
The deprecated `max_concurrent_workflow_task_polls` / `max_concurrent_activity_task_polls` are
"max:N" of the `*_poller_behavior` arguments, so only the latter are used.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

Spec = dict[str, Any]


def poller(text: str) -> object:
    from temporalio.worker import PollerBehaviorAutoscaling, PollerBehaviorSimpleMaximum

    kind, _, rest = text.partition(":")
    if kind == "max":
        return PollerBehaviorSimpleMaximum(maximum=int(rest))
    if kind == "auto":
        if not rest:
            return PollerBehaviorAutoscaling()
        low, high, initial = (int(x) for x in rest.split(":"))
        return PollerBehaviorAutoscaling(minimum=low, maximum=high, initial=initial)
    raise ValueError(f"poller behaviour must be max:N or auto[:min:max:initial], not {text!r}")


def runner(name: str) -> object:
    """The runner AgentRun runs in, by name (as the Worker's `unsandboxed_workflow_runner`, since
    AgentRun is `sandboxed=False`): "passthrough" (temporalio's sandbox with pydantic and all of
    workflows/ passed through, as before AgentRun left the sandbox; without the cheaper entry
    worker.py had then) or "sandbox" (temporalio's sandbox with only pydantic passed through, as
    the tests replay: workflows/ imported afresh for every run)."""
    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

    passed = {"passthrough": ("pydantic", "durable_agent_runner.workflows"), "sandbox": ("pydantic",)}
    if name not in passed:
        raise ValueError(f"AgentRun's runner must be passthrough or sandbox, not {name!r}")
    return SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_modules(*passed[name]))


def patch(target: str, value: object) -> None:
    """BENCH-ONLY: set a module attribute in the worker's process ("package.module.NAME")."""
    import importlib

    module, _, attr = target.rpartition(".")
    setattr(importlib.import_module(module), attr, value)


def worker_kwargs(spec: Spec) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in spec.items():
        if name.startswith("patch:"):
            patch(name.removeprefix("patch:"), value)
        elif name == RUNNER:
            out[name] = runner(str(value))
        elif name.endswith("_poller_behavior"):
            out[name] = poller(str(value))
        elif name.endswith(("_interval", "_timeout")):
            out[name] = timedelta(seconds=float(value))
        else:
            out[name] = value
    return out


@contextmanager
def overriding(module: Any, attr: str, wrap: Callable[[Any], Any]) -> Iterator[None]:
    original = getattr(module, attr)
    setattr(module, attr, wrap(original))
    try:
        yield
    finally:
        setattr(module, attr, original)


# ------------------------------------------------------------------------------ experiments


@dataclass(frozen=True)
class Experiment:
    knob: str  # the group it belongs to, for the table
    label: str
    options: Spec = field(default_factory=dict)
    why: str = ""


RUNNER = "unsandboxed_workflow_runner"  # the Worker argument AgentRun's runner is (see runner)


def experiments(quick: bool) -> list[Experiment]:
    """Most telling first: later rounds, and a short budget, favour the top of the list."""
    sandbox = "workflow sandbox"
    base = [
        Experiment("baseline", "default"),
        Experiment(sandbox, "sandboxed, workflows/ passed through (before)", {RUNNER: "passthrough"}),
        Experiment(sandbox, "sandboxed, workflows/ imported per run", {RUNNER: "sandbox"}),
        Experiment("sticky cache", "max_cached_workflows=0", {"max_cached_workflows": 0}),
    ]
    if quick:
        return base[:2]
    wf, act = "workflow_task_poller_behavior", "activity_task_poller_behavior"
    return [
        *base,
        Experiment("eager", "eager activities off", {"disable_eager_activity_execution": True}),
        Experiment("baseline", "default again (noise)"),
        Experiment("workflow slots", "max_concurrent_workflow_tasks=10", {"max_concurrent_workflow_tasks": 10}),
        Experiment("activity slots", "max_concurrent_activities=10", {"max_concurrent_activities": 10}),
        Experiment("workflow pollers", "workflow pollers max:2", {wf: "max:2"}),
        Experiment("activity pollers", "activity pollers autoscaling", {act: "auto"}),
        Experiment("sticky cache", "max_cached_workflows=10", {"max_cached_workflows": 10}),
    ]
