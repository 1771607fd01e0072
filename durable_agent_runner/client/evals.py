"""Durable evals from Python: start one, follow its progress, read its report, compare it with a
baseline. The CLI's `eval` verbs and the console are thin shells over this.

    client = await dar.connect()
    ev = await client.evals.start("evals/support.yaml", agent="support", concurrency=4)
    status = await ev.status()                     # done, passed, failed, waiting, tokens, USD
    final = await ev.wait(3600)            # the eval's final status
    report, diff = await ev.report(baseline="eval-support-1a2b3c4d")

An eval is an `EvalRun` workflow (workflows/eval_run.py); each of its cases is a child run of the
agent with an id of its own (`{eval id}.{case}-{hash}-{repeat}`), which `client.py status/watch`
and the console reach as any run.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import uuid
from pathlib import Path
from typing import Any

from pydantic import BaseModel, JsonValue, ValidationError
from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
)
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError, RPCStatusCode

from durable_agent_runner.client import checks, stuck
from durable_agent_runner.client.checks import BadArgument
from durable_agent_runner.client.errors import STATUS_NAMES, StillRunning, kind_of, run_failed
from durable_agent_runner.client.eval_cases import add_case, case_from_run
from durable_agent_runner.client.listing import MAX_LIST, READ_TIMEOUT, STARTED_ON_1X
from durable_agent_runner.client.status import ui_url
from durable_agent_runner.client.updates import cancel, describe, start_new, update
from durable_agent_runner.evals.cases import Case, Dataset
from durable_agent_runner.evals.files import load_dataset
from durable_agent_runner.evals.report import Diff, Report, compare, report
from durable_agent_runner.machine.texts import cost_words
from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.types import evals as te

MAX_DATASET_BYTES = 2 * 2**20  # the dataset rides in the eval's history: a larger one belongs in several evals
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")
LIVE = (WorkflowExecutionStatus.RUNNING, WorkflowExecutionStatus.CONTINUED_AS_NEW)
MAX_IN_FLIGHT = 100  # cases in flight read from visibility (an eval runs at most MAX_CONCURRENCY, 50)


class EvalRow(BaseModel):
    """One eval in a list: what the Web UI's list shows, from its search attributes."""

    eval_id: str
    status: str
    agent: str = ""
    started_at: str = ""
    tokens: int = 0
    usd: float = 0.0
    details: str = ""


def new_eval_id(dataset: str) -> str:
    return f"eval-{_SAFE.sub('_', dataset)[:40].strip('_') or 'dataset'}-{uuid.uuid4().hex[:8]}"


def check_dataset(dataset: Dataset, repeat: int) -> None:
    """An eval's dataset within its bounds, else BadArgument (one line)."""
    if not dataset.cases:
        raise BadArgument("dataset", f"{dataset.name!r} has no cases to run")
    # A case asks something, as a run's prompt must (checks.prompt). Here, not in Case: an eval in
    # flight carries its cases in its input, which must still decode.
    for i, case in enumerate(dataset.cases, 1):
        if case.inputs is None or (isinstance(case.inputs, str) and not case.inputs.strip()):
            raise BadArgument("dataset", f"case {case.name!r} (#{i}), field inputs: is empty: give the agent a prompt")
    runs = len(dataset.cases) * repeat
    if runs > te.MAX_EVAL_RUNS:
        raise BadArgument("dataset", f"{runs} case runs (cases × repeat): at most {te.MAX_EVAL_RUNS} per eval")
    size = len(dataset.model_dump_json())
    if size > MAX_DATASET_BYTES:
        raise BadArgument("dataset", f"{size:,} bytes as JSON: at most {MAX_DATASET_BYTES:,} per eval")


class EvalHandle:
    """One eval, by id: its progress, its end, its report."""

    def __init__(self, temporal: Client, eval_id: str, ui: str) -> None:
        self.temporal = temporal
        self.ui = ui  # the Web UI's base URL (TEMPORAL_UI_URL), its case runs' links
        self.eval_id = checks.run_id(eval_id, "eval_id", checks.MAX_ANY_ID)
        self._handle: WorkflowHandle[Any, te.EvalResult] = temporal.get_workflow_handle(
            eval_id, result_type=te.EvalResult
        )

    def ui_url(self, run_id: str) -> str:
        """A case run's page in the Web UI, in the namespace this client is connected to."""
        return ui_url(self.ui, run_id, self.temporal.namespace)

    async def status(self) -> te.EvalStatus:
        """The eval's progress, with the cases in flight that wait for a person."""
        desc = await describe(self._handle, te.EVAL_WORKFLOW)  # RunNotFound; NotThatKind: a run's id
        if desc.status == WorkflowExecutionStatus.COMPLETED:
            return (await self._handle.result(rpc_timeout=READ_TIMEOUT)).status
        if desc.status == WorkflowExecutionStatus.CANCELED:
            return await self._cancelled()
        if desc.status not in LIVE:
            try:
                await self._handle.result(rpc_timeout=READ_TIMEOUT)
            except WorkflowFailureError as err:
                raise run_failed(self.eval_id, err, "eval") from None
        status: te.EvalStatus = await self._handle.query(
            te.EVAL_STATUS_QUERY, result_type=te.EvalStatus, rpc_timeout=READ_TIMEOUT
        )
        return (await self._in_flight(status)).model_copy(update={"unserved": await _unserved(self.temporal, desc)})

    async def _cancelled(self) -> te.EvalStatus:
        """A cancelled eval's status as it stood: the cases it finished keep their results (its
        cases in flight were cancelled with it). Read by query, which a worker answers from the
        eval's history; RunCancelled when no worker does."""
        try:
            status: te.EvalStatus = await self._handle.query(
                te.EVAL_STATUS_QUERY, result_type=te.EvalStatus, rpc_timeout=READ_TIMEOUT
            )
        except (RPCError, WorkflowQueryFailedError):
            try:
                await self._handle.result(rpc_timeout=READ_TIMEOUT)
            except WorkflowFailureError as err:
                raise run_failed(self.eval_id, err, "eval") from None
            raise
        return status.model_copy(update={"phase": "cancelled", "running": [], "scoring": [], "waiting": []})

    async def _in_flight(self, status: te.EvalStatus) -> te.EvalStatus:
        """`status` with its running cases that wait for a person and what they spent so far, from
        their search attributes (the inbox's; a moment behind)."""
        if not status.running:
            return status
        query = f"ParentWorkflowId={json.dumps(self.eval_id)} AND ExecutionStatus='Running'"
        waiting, tokens, usd = [], 0, 0.0
        try:
            async for wf in self.temporal.list_workflows(query, limit=MAX_IN_FLIGHT, rpc_timeout=READ_TIMEOUT):
                sa = wf.typed_search_attributes
                if (sa.get(t.SA_PENDING) or 0) > 0 or sa.get(t.SA_IN_DOUBT) or sa.get(t.SA_PHASE) == t.Phase.PAUSED:
                    waiting.append(wf.id)
                tokens, usd = tokens + (sa.get(t.SA_TOKENS) or 0), usd + (sa.get(t.SA_COST) or 0.0)
        except RPCError:
            return status  # visibility is a view: progress goes on without it
        return status.model_copy(update={"waiting": waiting, "in_flight_tokens": tokens, "in_flight_usd": usd})

    async def wait(self, seconds: float | None = None) -> te.EvalStatus:
        """The eval's final status once it ends; StillRunning after `seconds`."""
        await describe(self._handle, te.EVAL_WORKFLOW)  # RunNotFound, NotThatKind: before any wait
        try:
            result = await asyncio.wait_for(self._handle.result(), seconds)
        except TimeoutError:
            raise StillRunning(self.eval_id, []) from None
        except WorkflowFailureError as err:
            raise run_failed(self.eval_id, err, "eval") from None
        return result.status

    async def report(self, baseline: str | None = None) -> tuple[Report, Diff | None]:
        """The report (of what has finished so far), and its diff against `baseline` (an eval id;
        None: the baseline the eval was started with, if any)."""
        status = await self.status()
        now = report(status, self.ui_url)
        other = baseline or status.baseline
        if not other:
            return now, None
        then = report(await EvalHandle(self.temporal, other, self.ui).status(), self.ui_url)
        return now, compare(now, then)

    async def resume(
        self, *, add_usd: float | None = None, add_tokens: int | None = None, wait: float | None = None
    ) -> t.BudgetStatus:
        """Raise the budget of an eval paused on it (bounded as a run's raise); the cases left start
        again. `wait`: seconds a worker has to take it, else NoWorkerAnswered (None: no bound)."""
        raised = checks.budget_raise(add_tokens, add_usd)
        bound = checks.seconds(wait) if wait is not None else None
        status: t.BudgetStatus = await update(
            self._handle, te.EVAL_RESUME_UPDATE, raised, t.BudgetStatus, "its budget can no longer be raised",
            wait=bound, of=te.EVAL_WORKFLOW,
        )  # fmt: skip
        return status

    async def cancel(self) -> None:
        """Cancel the eval: its cases in flight are cancelled too; finished ones keep their results.
        RunNotFound for an unknown id, NotThatKind for a run's, DecisionRefused if it has ended."""
        await cancel(self._handle, te.EVAL_WORKFLOW)


class Evals:
    """`client.evals`: start evals, reach them by id, list them."""

    def __init__(self, temporal: Client, task_queue: str, ui: str) -> None:
        self.temporal = temporal
        self.task_queue = task_queue
        self.ui = ui  # the Web UI's base URL (TEMPORAL_UI_URL)

    async def start(
        self,
        dataset: Dataset | str | Path,
        *,
        agent: str,
        concurrency: int = 4,
        repeat: int = 1,
        budget_usd: float | None = None,
        budget_tokens: int | None = None,
        on_budget: t.OnBudget | None = None,
        model: str | None = None,
        baseline: str | None = None,
        eval_id: str | None = None,
        inline_scoring: bool = False,
    ) -> EvalHandle:
        """Start an eval of `agent` on `dataset` (a Dataset, or a YAML/JSON file's path).
        `inline_scoring`: a case scored only by cheap pure built-ins (Contains, Equals, ...) is
        scored in the eval's workflow task, with no activity (docs/eval-runs.md)."""
        if not isinstance(inline_scoring, bool):
            raise BadArgument("inline_scoring", "must be True or False")
        checks.budget_cap(budget_usd, budget_tokens)  # a cap of 0 would fail every case at once
        if not isinstance(dataset, Dataset | str | os.PathLike):
            raise TypeError(f"dataset must be a Dataset or a YAML or JSON file's path, not {type(dataset).__name__}")
        data = dataset if isinstance(dataset, Dataset) else load_dataset(dataset)
        check_dataset(data, repeat)
        try:
            input = te.EvalInput(
                dataset=data,
                agent=agent,
                concurrency=concurrency,
                repeat=repeat,
                budget_usd=budget_usd,
                budget_tokens=budget_tokens,
                on_budget=on_budget,
                model=model,
                baseline=baseline,
                inline_scoring=inline_scoring,
            )
        except ValidationError as err:
            field, said = checks.first_error(err)
            raise BadArgument(field or "eval", said) from None
        if baseline:
            await self._check_baseline(baseline)
        eid = checks.new_run_id(eval_id, "eval_id") if eval_id is not None else new_eval_id(data.name)
        handle = await start_new(
            self.temporal,
            te.EVAL_WORKFLOW,
            input,
            id=eid,
            task_queue=self.task_queue,
            result_type=te.EvalResult,
            # its agent from the start, so a list names it before the eval resolves it (or never does)
            search_attributes=TypedSearchAttributes([SearchAttributePair(t.SA_AGENT, input.agent)]),
            static_summary=f"eval {data.name[:80]} on {agent}: {len(data.cases)} cases × {repeat}",
        )
        return EvalHandle(self.temporal, handle.id, self.ui)

    async def _check_baseline(self, baseline: str) -> None:
        """A baseline that is no eval is refused before anything starts (no case is paid for a
        comparison that cannot be made)."""
        try:
            desc = await self.temporal.get_workflow_handle(baseline).describe(rpc_timeout=READ_TIMEOUT)
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            raise BadArgument("baseline", f"no eval with id {baseline[:200]!r}") from None
        if desc.workflow_type != te.EVAL_WORKFLOW:
            raise BadArgument("baseline", f"{baseline[:200]!r} is {kind_of(desc.workflow_type)}, not an eval")

    def get(self, eval_id: str) -> EvalHandle:
        return EvalHandle(self.temporal, eval_id, self.ui)

    async def add_case(
        self,
        dataset: str | Path,
        run_id: str,
        *,
        at_turn: int | None = None,
        expected: JsonValue = None,
        name: str | None = None,
    ) -> Case:
        """Make recorded run `run_id` a case of the dataset file (made if missing): the run's
        transcript before model call `at_turn` (default: its last), so an eval asks only the model
        again from there (eval_cases.py). Returns the case added."""
        case = await case_from_run(self.temporal, run_id, at_turn=at_turn, expected=expected, name=name)
        add_case(dataset, case)
        return case

    async def list(self, limit: int = 20, *, paused: bool = False, started_on_1x: bool = False) -> list[EvalRow]:
        """The latest evals, newest first; `paused`: only those paused on their budget;
        `started_on_1x`: only those running since they started on 1.x code (docs/patches.md)."""
        checks.whole(limit, "limit", 1, MAX_LIST)
        rows = []
        query = f'WorkflowType="{te.EVAL_WORKFLOW}"'
        if checks.flag(started_on_1x, "started_on_1x"):
            query += f" AND {STARTED_ON_1X}"
        if checks.flag(paused, "paused"):  # the eval sets AgentPhase while it waits for a raise (workflows/eval_run.py)
            query += f' AND ExecutionStatus="Running" AND {t.SA_PHASE.name}="{t.Phase.PAUSED}"'
        async for wf in self.temporal.list_workflows(query, limit=limit, rpc_timeout=READ_TIMEOUT):
            sa = wf.typed_search_attributes
            rows.append(
                EvalRow(
                    eval_id=wf.id,
                    status=STATUS_NAMES.get(wf.status, "unknown") if wf.status else "unknown",
                    agent=sa.get(t.SA_AGENT) or "",
                    started_at=wf.start_time.isoformat() if wf.start_time else "",
                    tokens=sa.get(t.SA_TOKENS) or 0,
                    usd=sa.get(t.SA_COST) or 0.0,
                )
            )
        return rows


async def _unserved(temporal: Client, desc: WorkflowExecutionDescription) -> list[dict[str, str]]:
    """What a live eval waits for that no worker takes, as `RunHandle.unserved` says it: its next
    step (no worker polls its queue), its agent's resolve (no worker serves that agent) or a
    case's scoring. A view: [] when it cannot be read within stuck.LOOK_BOUND."""
    try:
        async with asyncio.timeout(stuck.LOOK_BOUND.total_seconds()):
            return await stuck.unserved(temporal, desc)
    except (TimeoutError, RPCError):
        return []


def progress_line(s: te.EvalStatus) -> str:
    """`running · 12/50 done · 10 passed · 2 failed · 1 waiting · 3 running · 1 scoring · 12,345 tokens · $0.0123`
    (`scoring` only while a case is being scored)."""
    parts = [s.phase + (f" ({s.why})" if s.why else ""), f"{s.done}/{s.total} done", f"{s.passed} passed"]
    parts += [f"{s.failed} failed", f"{len(s.waiting)} waiting", f"{len(s.running)} running"]
    if s.scoring:
        parts.append(f"{len(s.scoring)} scoring")
    parts += [f"{s.usage.total_tokens:,} tokens", cost_words(s.usage.cost_usd, s.usage.unpriced)]
    if s.in_flight_tokens or s.in_flight_usd:
        parts.append(f"+{s.in_flight_tokens:,} tokens ${s.in_flight_usd:.4f} in flight")
    return " · ".join(parts)


__all__ = ["EvalHandle", "EvalRow", "Evals", "progress_line"]
