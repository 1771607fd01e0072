"""Every workflow the client starts (a run, a session, a fork, an eval) takes an id no workflow has
held, running or ended (checks.NEW_ID): under an ended run's id a new one would shadow it in
`status`, `export`, `diff` and the Web UI. An id that is taken is `IdTaken`, which says by what."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from durable_agent_runner.client import checks
from durable_agent_runner.client.errors import STATUS_NAMES, IdTaken

LOOK = timedelta(seconds=5)  # the read of what holds a taken id: its words, not worth a long wait


async def start_new(
    temporal: Client, workflow: str, input: Any, *, id: str, **options: Any
) -> WorkflowHandle[Any, Any]:
    """temporalio's start_workflow under an id no workflow has held; IdTaken if one has."""
    try:
        return await temporal.start_workflow(workflow, input, id=id, id_reuse_policy=checks.NEW_ID, **options)
    except WorkflowAlreadyStartedError as err:
        raise IdTaken(err, *await _holder(temporal, id)) from None


async def _holder(temporal: Client, id: str) -> tuple[str, str]:
    """The type and status (as `status` names it) of the workflow that holds `id`."""
    try:
        desc = await temporal.get_workflow_handle(id).describe(rpc_timeout=LOOK)
    except RPCError:  # the server away, or the holder gone since
        return "", "running or ended"
    return desc.workflow_type, STATUS_NAMES.get(desc.status, "ended") if desc.status is not None else "ended"
