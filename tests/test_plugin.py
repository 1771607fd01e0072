"""The AgentPlugin: durable agents in a worker and a client a team already has, in two lines."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import uuid
from asyncio.subprocess import PIPE, STDOUT
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.worker import Worker

from durable_agent_runner import AgentPlugin
from durable_agent_runner.client.export import local_result
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.worker import plugin as plugin_module
from durable_agent_runner.workflows import types as t
from tests.fixtures.team_workflow import TeamClockReader
from tests.helpers import replay

pytestmark = pytest.mark.asyncio


async def test_two_lines_add_durable_agents_to_a_worker_and_client(temporal_server: Any, llm: Any) -> None:
    settings = LLMSettings(base_url=llm.base_url, model="demo")
    plugin = AgentPlugin(["examples.demo_agent"], settings=settings)
    client = await Client.connect(temporal_server.target, namespace="default", plugins=[plugin])
    queue = f"team-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue):  # the team's own worker: nothing else configured
        handle = await client.start_workflow(
            t.WORKFLOW_NAME,
            t.RunInput(prompt="Weather in Tokyo and Paris?"),
            id=f"plugin-{uuid.uuid4().hex[:8]}",
            task_queue=queue,
            result_type=t.RunResult,
        )
        result = await handle.result()
        # The plugin runs the per-agent workers too: work only a worker holding the agent may do
        # (a routed resolve, a tool of that very version) has pollers on their queues.
        spec = await agent_spec(client, handle)
        for agent_queue in (t.agent_task_queue(queue, "demo"), t.agent_task_queue(queue, "demo", spec.version)):
            request = DescribeTaskQueueRequest(
                namespace="default",
                task_queue=TaskQueue(name=agent_queue),
                task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
            )
            described = await client.workflow_service.describe_task_queue(request)
            assert described.pollers, f"nothing polls {agent_queue}"
    assert "Tokyo" in result.output and result.turns >= 2
    history = await handle.fetch_history()
    resolved = [found[0] for e in history.events if (found := local_result(e)) is not None]
    assert resolved[0] == t.RESOLVE_AGENT_ACTIVITY  # the team's worker serves the agent: resolved there
    await replay(handle)


async def agent_spec(client: Client, handle: Any) -> t.AgentSpec:
    """The agent the run froze at its start."""
    for e in (await handle.fetch_history()).events:
        found = local_result(e)
        if found is not None and found[0] == t.RESOLVE_AGENT_ACTIVITY:
            (spec,) = await client.data_converter.decode(found[1].payloads, [t.AgentSpec])
            return spec
    raise AssertionError("no resolve in the run's history")


async def test_one_plugin_serves_one_worker(temporal_server: Any, llm: Any) -> None:
    plugin = AgentPlugin(["examples.demo_agent"], settings=LLMSettings(base_url=llm.base_url, model="demo"))
    client = await Client.connect(temporal_server.target, namespace="default", plugins=[plugin])
    Worker(client, task_queue=f"a-{uuid.uuid4().hex[:8]}")
    with pytest.raises(ValueError, match="serves one worker"):
        Worker(client, task_queue=f"b-{uuid.uuid4().hex[:8]}")


async def test_the_teams_own_workflows_stay_in_the_sandbox(temporal_server: Any, llm: Any) -> None:
    plugin = AgentPlugin(["examples.demo_agent"], settings=LLMSettings(base_url=llm.base_url, model="demo"))
    client = await Client.connect(temporal_server.target, namespace="default", plugins=[plugin])
    queue = f"team-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, workflows=[TeamClockReader]):
        agent = await client.start_workflow(
            t.WORKFLOW_NAME, t.RunInput(prompt="Weather in Tokyo?"), id=f"plugin-{uuid.uuid4().hex[:8]}",
            task_queue=queue, result_type=t.RunResult,
        )  # fmt: skip
        team = await client.start_workflow(TeamClockReader.run, id=f"team-{uuid.uuid4().hex[:8]}", task_queue=queue)
        assert "Tokyo" in (await agent.result()).output  # AgentRun, outside the sandbox, runs

        async def refused() -> str:
            async for event in team.fetch_history_events():
                if event.HasField("workflow_task_failed_event_attributes"):
                    return event.workflow_task_failed_event_attributes.failure.message
            return ""

        async with asyncio.timeout(20):
            while not (message := await refused()):
                await asyncio.sleep(0.2)
        await team.terminate("test done")
    assert "Cannot access datetime.datetime.now" in message  # the team's workflow is still sandboxed


# A team's project: its own client.py, a module of the runner's name, which the runner must never
# import in place of its own; its agents; and, as its worker.py, the plugin's documented snippet.
TEAM_CLIENT = '''"""The team's own client: nothing to do with the agent runner."""
raise SystemExit("the team's client.py was imported by the runner")
'''
TEAM_AGENTS = '''from durable_agent_runner import Agent, tool


@tool
def get_weather(city: str) -> dict[str, object]:
    """The weather at the team's own station.

    Args:
        city: The city's name.
    """
    return {"city": city, "condition": "station drizzle", "temperature_c": 7.5}


demo = Agent(name="demo", instructions="Answer from the station's readings.", tools=[get_weather])
'''


def snippet() -> str:
    """The complete worker in durable_agent_runner.worker.plugin's docstring, as a user would copy it."""
    doc = plugin_module.__doc__ or ""
    block = doc.split("::\n\n", 1)[1]
    lines = []
    for line in block.splitlines():
        if line and not line.startswith("    "):
            break
        lines.append(line)
    return textwrap.dedent("\n".join(lines)).strip() + "\n"


async def test_the_documented_worker_runs_an_agent_in_a_teams_project(
    temporal_server: Any, llm: Any, client: Client, tmp_path: Path
) -> None:
    project = tmp_path / "team"
    project.mkdir()
    (project / "client.py").write_text(TEAM_CLIENT)
    (project / "my_agents.py").write_text(TEAM_AGENTS)
    (project / "worker.py").write_text(snippet())
    queue = f"team-{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the runner comes from its install
    env |= {"TEMPORAL_ADDRESS": temporal_server.target, "TASK_QUEUE": queue,
            "LLM_BASE_URL": llm.base_url, "LLM_MODEL": "demo", "LLM_API_KEY": ""}  # fmt: skip
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "worker.py", cwd=project, env=env, stdout=PIPE, stderr=STDOUT
    )
    try:
        ask = asyncio.ensure_future(
            client.execute_workflow(
                "AskTheAgent", "Weather in Tokyo?", id=f"team-{uuid.uuid4().hex[:8]}", task_queue=queue,
                result_type=str, execution_timeout=timedelta(seconds=60),
            )
        )  # fmt: skip
        exited = asyncio.ensure_future(proc.wait())
        done, _ = await asyncio.wait({ask, exited}, timeout=60, return_when=asyncio.FIRST_COMPLETED)
        if ask not in done:
            ask.cancel()
            output = (await proc.stdout.read()).decode() if exited in done and proc.stdout else ""
            raise AssertionError(f"the team's worker gave no answer; it printed: {output[-2000:]}")
        answer = ask.result()
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(30):  # the snippet stops on SIGTERM
            await proc.wait()
    assert answer == "Tokyo: station drizzle, 7.5°C."  # the team's own tool answered, through its agent


async def test_a_project_with_its_own_workflows_and_activities_imports_both(tmp_path: Path) -> None:
    """A project laid out as Temporal teams lay one out keeps its own `workflows` and `activities`:
    the engine is `durable_agent_runner.workflows`, and the two never meet."""
    for name in ("workflows", "activities"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"TEAM = {name!r}\n")
    script = (
        "import workflows, activities\n"
        "from durable_agent_runner import AgentPlugin, RunInput\n"
        "import durable_agent_runner.workflows as engine\n"
        "assert (workflows.TEAM, activities.TEAM) == ('workflows', 'activities')\n"
        "assert engine.AgentRun and AgentPlugin and RunInput\n"
        "print('both')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "both"
