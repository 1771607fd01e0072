"""Activities of ours that run code of unknown length heartbeat, so a worker that dies while they
run is noticed within seconds (their heartbeat timeout), not after their start-to-close timeout:
the hook (an approval check that looks something up) and the routed resolve (MCP servers start).
tests/test_durability.py kills a worker mid approval check against a real server."""

from __future__ import annotations

import time
from typing import Any

from temporalio.testing import ActivityEnvironment

from durable_agent_runner import Agent, Registry, tool
from durable_agent_runner.activities.hooks import HookActivities
from durable_agent_runner.activities.tool_activities import ToolActivities
from durable_agent_runner.workflows import types as t


@tool
def send(label: str) -> str:
    """Send it.

    Args:
        label: What.
    """
    return label


def _slow_check(args: Any) -> bool:
    time.sleep(2.5)  # a policy that looks something up: in a tool thread, the loop beats on
    return True


SLOW = Agent(name="slow", tools=[send], approvals={"send": _slow_check})


async def test_the_hook_heartbeats_while_a_slow_approval_check_runs() -> None:
    env, beats = ActivityEnvironment(), []
    env.on_heartbeat = lambda *details: beats.append(details)
    hook = t.HookInput(agent="slow", kind="approval", name="send", turn=1, arguments='{"label": "x"}')
    result = await env.run(HookActivities(Registry(agents=[SLOW])).run_hook, hook)
    assert result.needs_approval and beats, "no heartbeat while the check ran"


async def test_a_routed_resolve_heartbeats() -> None:
    routed, beats = ActivityEnvironment(), []
    routed.on_heartbeat = lambda *details: beats.append(details)
    request = t.ResolveAgentInput(agent="slow")
    spec = await routed.run(ToolActivities(Registry(agents=[SLOW])).resolve_agent, request)
    assert spec.name == "slow" and beats, "the routed resolve sent no heartbeat"
