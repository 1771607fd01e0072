"""`connect()` and `AgentClient`: start runs and sessions, list runs, compare two, and get the
handle of one that exists (durable_agent_runner/client/handles.py: what a handle does).

The connection is the one `client.py` makes (durable_agent_runner/config/connection.py): address,
namespace, TLS and API key from the `temporal` CLI's profile and TEMPORAL_* variables, payloads
encrypted with PAYLOAD_CODEC_KEYS and stored as PAYLOAD_STORE says, runs started on
AGENT_TASK_QUEUE.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio.client import Client
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from durable_agent_runner.client import checks, listing
from durable_agent_runner.client.diff import RunDiff, diff_runs
from durable_agent_runner.client.errors import cli
from durable_agent_runner.client.evals import Evals
from durable_agent_runner.client.handles import RunHandle
from durable_agent_runner.client.listing import RunRow, RunsPage
from durable_agent_runner.client.schedules import Schedules
from durable_agent_runner.client.sessions import SessionHandle
from durable_agent_runner.client.updates import DEFAULT_WAIT, start_new
from durable_agent_runner.config import connection
from durable_agent_runner.config.env import ClientSettings
from durable_agent_runner.workflows import types as t

if TYPE_CHECKING:  # the class is loaded where agents are defined; a client that names them does not need it
    from durable_agent_runner.agents.agent import Agent

MAX_RUN_ID = checks.MAX_RUN_ID
SUMMARY_CHARS = 120  # of the prompt, in the run's summary in the Web UI
DETAILS_CHARS = 2000  # of the prompt, in the run's details in the Web UI


def new_run_id(agent: str, prompt: str) -> str:
    """Readable in the Web UI's list: `demo-whats-the-weather-in-3f2a1c9e`."""
    words = re.findall(r"[a-z0-9]+", prompt.lower().replace("'", ""))[:4]
    slug = "-".join(words)[:32].strip("-")
    return f"{agent}-{slug + '-' if slug else ''}{uuid.uuid4().hex[:8]}"


def session_id(agent: str) -> str:
    return f"{agent}-chat-{uuid.uuid4().hex[:8]}"


def check_settings(settings: t.ModelSettings | Mapping[str, Any] | None) -> t.ModelSettings | None:
    """Model settings checked before anything starts (checks.model_settings: unknown fields too)."""
    return checks.model_settings(settings)


def agent_name(agent: object) -> str:
    """The agent's name: given as it, or as an `Agent`; anything else is a TypeError."""
    from durable_agent_runner.agents.agent import Agent  # loaded already wherever an Agent was made

    if isinstance(agent, Agent):
        return agent.name
    if not isinstance(agent, str):
        raise TypeError(f"agent must be an agent's name or an Agent, not {type(agent).__name__}")
    return checks.agent(agent)


def output_types(agent: str | Agent, output_type: Any = None) -> dict[str, Any]:
    """By agent name, the output types a run of `agent` may answer with ("": the run's own)."""
    if output_type is not None:
        return {"": output_type}
    if isinstance(agent, str):
        return {}
    return {a.name: a.output_type for a in [agent, *agent.team()]} | {"": agent.output_type}


class AgentClient:
    """Starts and finds runs. `temporal` is the underlying temporalio Client (for what this does
    not cover); `task_queue` the workers' queue runs start on (default: AGENT_TASK_QUEUE);
    `settings` the client's environment, read once (default: now) and passed down."""

    def __init__(
        self, temporal: Client, *, task_queue: str | None = None, settings: ClientSettings | None = None
    ) -> None:
        self.temporal = temporal
        self.settings = settings if settings is not None else ClientSettings.load()
        default = task_queue is None
        self.task_queue = str(self.settings.task_queue) if default else checks.task_queue(task_queue)
        ui = self.ui = str(self.settings.ui_url)  # the Web UI (TEMPORAL_UI_URL) its links point at
        self.schedules = Schedules(temporal, self.task_queue, ui)  # runs that start themselves (client/schedules.py)
        self.evals = Evals(temporal, self.task_queue, ui)  # durable evals (client/evals.py)

    @classmethod
    async def connect(
        cls, *, target: str | None = None, namespace: str | None = None, task_queue: str | None = None
    ) -> AgentClient:
        """`connect()` as temporalio's `Client.connect` is reached for: the same client."""
        return await connect(target=target, namespace=namespace, task_queue=task_queue)

    async def start(
        self,
        agent: str | Agent,
        input: str,
        *,
        id: str | None = None,
        max_turns: int | None = None,
        model: str | None = None,
        model_settings: t.ModelSettings | Mapping[str, Any] | None = None,
        capture: bool = False,
        breakpoints: t.Breakpoints | None = None,
        task_queue: str | None = None,
        output_type: Any = None,
        fallback_models: list[str] | None = None,
        budget_usd: float | None = None,
        budget_tokens: int | None = None,
    ) -> RunHandle:
        """Start a run of `agent` (its name, or the Agent: a worker on the task queue must serve
        it) answering `input`. The options are `client.py run`'s: `id` (default: readable and
        new), `max_turns`, `model` ("anthropic:…", "gemini:…", "openai:…", or a model of the
        worker's LLM_BASE_URL server), `fallback_models` (tried in order when a call to the model
        fails for good) and `model_settings` over the agent's, `capture` each model call's raw
        request and response, `breakpoints`, `budget_usd` and `budget_tokens` (a cap on what it and
        its sub-agents spend, below its agent's own budgets). `output_type` types `result()` when the
        agent is given by name (an Agent brings its own). IdTaken if a run holds `id`, running
        or ended (updates.start_new)."""
        name = agent_name(agent)
        checks.prompt(input)
        turns = checks.max_turns(max_turns)
        if model is not None:
            checks.model(model)
        if breakpoints is not None and not isinstance(breakpoints, t.Breakpoints):
            raise TypeError(f"breakpoints must be a Breakpoints, not {type(breakpoints).__name__}")
        settings = checks.model_settings(model_settings)
        checks.flag(capture, "capture")
        fallbacks = checks.models(fallback_models, first=model) if fallback_models is not None else None
        checks.settings_fit([m for m in [model, *(fallbacks or [])] if m], settings)
        budget = checks.budget_cap(budget_usd, budget_tokens)
        run_id = checks.new_run_id(id) if id is not None else new_run_id(name, input)
        queue = self.task_queue if task_queue is None else checks.task_queue(task_queue)
        await start_new(
            self.temporal,
            t.WORKFLOW_NAME,
            t.RunInput(
                prompt=input,
                agent=name,
                max_turns=turns,
                model=model,
                fallback_models=fallbacks,
                capture=capture,
                model_settings=settings,
                breakpoints=breakpoints,
                budget=budget,
            ),
            id=run_id,
            task_queue=queue,
            result_type=t.RunResult,
            search_attributes=TypedSearchAttributes(
                [SearchAttributePair(t.SA_AGENT, name), SearchAttributePair(t.SA_PHASE, t.Phase.STARTING)]
            ),
            # The prompt itself travels once, in the run's input; the UI's summary shows an excerpt.
            static_summary=f"{name}: {input[:SUMMARY_CHARS]}",
            static_details=f"**prompt**\n\n{input[:DETAILS_CHARS]}" + ("…" if len(input) > DETAILS_CHARS else ""),
        )
        return RunHandle(
            self.temporal, run_id, output_types(agent, output_type), task_queue=self.task_queue, settings=self.settings
        )

    async def start_session(
        self,
        agent: str | Agent,
        *,
        id: str | None = None,
        model: str | None = None,
        task_queue: str | None = None,
        output_type: Any = None,
        budget_usd: float | None = None,
        budget_tokens: int | None = None,
    ) -> SessionHandle:
        """Start a session of `agent`: a run that answers each message `send` gives it until
        `end()`, its agent's idle timeout, or `cancel()`. `budget_usd`, `budget_tokens`: a cap on
        all it spends, every message's answer and sub-agents included, below its agent's own."""
        name = agent_name(agent)
        if model is not None:
            checks.model(model)
        budget = checks.budget_cap(budget_usd, budget_tokens)
        run_id = checks.new_run_id(id) if id is not None else session_id(name)
        queue = self.task_queue if task_queue is None else checks.task_queue(task_queue)
        await start_new(
            self.temporal,
            t.WORKFLOW_NAME,
            t.RunInput(prompt="", agent=name, model=model, session=True, budget=budget),
            id=run_id,
            task_queue=queue,
            result_type=t.RunResult,
            search_attributes=TypedSearchAttributes(
                [SearchAttributePair(t.SA_AGENT, name), SearchAttributePair(t.SA_PHASE, t.Phase.STARTING)]
            ),
            static_summary=f"{name}: a conversation ({cli()} chat {run_id})",
        )
        kinds = output_types(agent, output_type)
        return SessionHandle(self.temporal, run_id, kinds, task_queue=self.task_queue, settings=self.settings)

    def get(self, run_id: str, *, agent: Agent | None = None, output_type: Any = None) -> RunHandle:
        """The handle of a run that exists (RunNotFound at its first call if none does). `agent`
        or `output_type` type its `result()`. An empty or unprintable id is a ValueError here."""
        kinds = output_types(agent or "", output_type)
        return RunHandle(self.temporal, run_id, kinds, task_queue=self.task_queue, settings=self.settings)

    def get_session(self, run_id: str, *, agent: Agent | None = None, output_type: Any = None) -> SessionHandle:
        """The handle of a session that exists; `send` to a run that is not one is DecisionRefused."""
        kinds = output_types(agent or "", output_type)
        return SessionHandle(self.temporal, run_id, kinds, task_queue=self.task_queue, settings=self.settings)

    async def list(
        self,
        limit: int = 20,
        *,
        phase: str = "",
        agent: str = "",
        waiting: bool = False,
        started_on_1x: bool = False,
        schedule: str = "",
    ) -> list[RunRow]:
        """Recent runs (the visibility store's order), at most `limit` (1-1000): only those in
        `phase`, of `agent`, `waiting` (a call waits for a person to approve, answer or resolve it;
        a paused run is `phase="paused"`), running since they started on 1.x code
        (`started_on_1x`: docs/patches.md), or started by `schedule`, when given. No worker is needed."""
        checks.whole(limit, "limit", 1, listing.MAX_LIST)
        query = _query(phase, agent, waiting, started_on_1x, schedule)
        return await listing.list_runs(self.temporal, query, limit, self.ui)

    async def runs_page(
        self,
        page: str = "",
        *,
        phase: str = "",
        agent: str = "",
        waiting: bool = False,
        started_on_1x: bool = False,
        schedule: str = "",
        query: str | None = None,
        page_size: int = 50,
    ) -> RunsPage:
        """One page of runs, newest first within it, and the token of the next (`page` of a later
        call), filtered as `list` filters. A token this client did not make is a ValueError."""
        checks.whole(page_size, "page_size", 1, listing.MAX_LIST)
        if query is None:
            query = _query(phase, agent, waiting, started_on_1x, schedule)
        query = checks.string(query, "query")
        return await listing.runs_page(self.temporal, query, self.ui, checks.string(page, "page"), page_size)

    async def diff(self, run_a: str, run_b: str, *, wait: float = DEFAULT_WAIT) -> RunDiff:
        """Where two runs diverge (a fork and its origin, or any two): the first turn whose
        messages differ, and each side's messages from there."""
        a, b = checks.run_id(run_a, "run_a", checks.MAX_ANY_ID), checks.run_id(run_b, "run_b", checks.MAX_ANY_ID)
        found, _, _ = await diff_runs(self.temporal, a, b, timedelta(seconds=checks.seconds(wait)))
        return found


def _query(phase: object, agent: object, waiting: object, started_on_1x: object, schedule: object) -> str:
    checked = checks.string(phase, "phase"), checks.string(agent, "agent"), checks.flag(waiting, "waiting")
    return listing.runs_query(
        *checked, checks.flag(started_on_1x, "started_on_1x"), checks.string(schedule, "schedule")
    )


async def connect(
    *, target: str | None = None, namespace: str | None = None, task_queue: str | None = None
) -> AgentClient:
    """A client connected as `client.py` connects (see the module docstring). `target`: a plain
    connection to that server instead, without the profile's TLS and API key (tests)."""
    settings = ClientSettings.load()  # every variable the client reads, once: SettingsError names a bad one
    temporal = await connection.connect(target, namespace)
    return AgentClient(temporal, task_queue=task_queue, settings=settings)
