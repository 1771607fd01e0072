"""Whether a run is stuck: its workflow task keeps failing. That is a bug in the workflow code a
worker runs, not the run's input (bad input fails the run or is told to the model), so Temporal
holds the run where it is and retries the task: a fixed worker carries it on from there. `status`
says so, with the error, and what to do.
"""

from __future__ import annotations

from typing import Any

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryReverseRequest
from temporalio.client import Client, WorkflowExecutionDescription

# The failed task's first attempt is in history; later attempts are not. It sits near the end.
LAST_EVENTS = 100
WHAT_TO_DO = (
    "a worker's workflow code fails on this run (a bug, not the run's input): fix it and deploy the worker, "
    "and the run goes on from where it stopped; `client.py cancel RUN_ID` ends it, "
    "`temporal workflow terminate` only if no worker can run it any more"
)


async def stuck(client: Client, desc: WorkflowExecutionDescription) -> dict[str, Any] | None:
    """The run's stuck workflow task (attempts, error, what to do), or None when it is not stuck."""
    raw = desc.raw_description
    if not raw.HasField("pending_workflow_task") or raw.pending_workflow_task.attempt < 2:
        return None
    request = GetWorkflowExecutionHistoryReverseRequest(
        namespace=client.namespace,
        execution=WorkflowExecution(workflow_id=desc.id, run_id=desc.run_id),
        maximum_page_size=LAST_EVENTS,
    )
    page = await client.workflow_service.get_workflow_execution_history_reverse(request)
    failed = next((e for e in page.history.events if e.HasField("workflow_task_failed_event_attributes")), None)
    error = failed.workflow_task_failed_event_attributes.failure.message if failed is not None else "not recorded"
    return {
        "attempts": raw.pending_workflow_task.attempt,
        "error": error.splitlines()[0][:500] if error else "no message",
        "what_to_do": WHAT_TO_DO,
    }
