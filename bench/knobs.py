"""Worker tuning knobs as JSON-safe specs (they cross into `bench.worker_proc`), and how a spec
becomes keyword arguments of temporalio 1.35's `Worker`.

A spec maps a Worker argument to a plain value: durations in seconds, poller behaviours as
"max:N" (PollerBehaviorSimpleMaximum) or "auto[:min:max:initial]" (PollerBehaviorAutoscaling).
The deprecated `max_concurrent_workflow_task_polls` / `max_concurrent_activity_task_polls` are
"max:N" of the `*_poller_behavior` arguments, so only the latter are used.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

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


def worker_kwargs(spec: Spec) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in spec.items():
        if name.endswith("_poller_behavior"):
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

Scenario = Literal["standard", "streamed"]


@dataclass(frozen=True)
class Experiment:
    knob: str  # the group it belongs to, for the table
    label: str
    options: Spec = field(default_factory=dict)
    scenario: Scenario = "standard"
    why: str = ""


def experiments(quick: bool) -> list[Experiment]:
    """Most telling first: later rounds, and a short budget, favour the top of the list."""
    base = [
        Experiment("baseline", "default"),
        Experiment("sticky cache", "max_cached_workflows=0", {"max_cached_workflows": 0}),
        Experiment("eager", "eager activities off", {"disable_eager_activity_execution": True}),
    ]
    if quick:
        return base
    wf, act = "workflow_task_poller_behavior", "activity_task_poller_behavior"
    throttle = "max_heartbeat_throttle_interval"
    return [
        *base,
        Experiment("baseline", "default again (noise)"),
        Experiment("heartbeat throttle", "streamed, default", scenario="streamed"),
        Experiment("heartbeat throttle", "streamed, throttle 60 s (SDK)", {throttle: 60}, "streamed"),
        Experiment("heartbeat throttle", "streamed, throttle 1 s", {throttle: 1}, "streamed"),
        Experiment("workflow slots", "max_concurrent_workflow_tasks=10", {"max_concurrent_workflow_tasks": 10}),
        Experiment("activity slots", "max_concurrent_activities=10", {"max_concurrent_activities": 10}),
        Experiment("workflow pollers", "workflow pollers max:2", {wf: "max:2"}),
        Experiment("workflow pollers", "workflow pollers autoscaling", {wf: "auto"}),
        Experiment("activity pollers", "activity pollers max:1", {act: "max:1"}),
        Experiment("activity pollers", "activity pollers autoscaling", {act: "auto"}),
        Experiment("sticky cache", "max_cached_workflows=10", {"max_cached_workflows": 10}),
    ]
