"""Which path a run takes at each 1.x patch: 2.0 as one new workflow version.

Each execution of a workflow with 1.x patches (AgentRun, EvalRun) asks `RELEASE_2_PATCH` first,
in its `@workflow.init` (`started_on_2_0`), before any command. A run started on 2.0 code records that
one marker and takes every 1.x patch's path without asking it, so its history holds no 1.x
marker: 2.0's histories are fresh (tests/histories/*_2_0*.json), and no 2.0 run records a marker
after its first workflow task, where a replay could ask too early. A run started on 1.x code
replays without the marker and asks each 1.x patch as 1.x did, so it finishes on these workers
where it stopped. A 1.x run that continues as new starts a fresh execution, which asks here
again and is a 2.0 run from then on.

The one module of workflows/ that calls `workflow.patched` (tests/test_patches.py). The SDK
keeps each answer for the rest of the execution, so asking the release again is free.
"""

from __future__ import annotations

from temporalio import workflow

from durable_agent_runner.workflows.patches import RELEASE_2_PATCH


def started_on_2_0() -> bool:
    """Whether the run started on 2.0 code. Asked first, in a workflow's init, so that its marker
    is the first command; asked again anywhere after, it adds nothing."""
    return workflow.patched(RELEASE_2_PATCH)


def patched_2x(patch_id: str) -> bool:
    """Whether the run takes 2.x patch `patch_id`'s path: a run started before it (on 1.x, or on
    2.x code that did not ask it) replays without its marker and keeps the old path. Asked in the
    run's first workflow task, as `started_on_2_0` is, before any await; or, for a path only a rare
    event takes (a cancel during a routed activity), where the workflow takes that event: the same
    activation on every replay, and no local activity's marker beside it (workflows/patches.py)."""
    return workflow.patched(patch_id)


def patched(patch_id: str) -> bool:
    """Whether the run takes 1.x patch `patch_id`'s path: always in 2.0, as its history says in 1.x."""
    return started_on_2_0() or workflow.patched(patch_id)
