"""Deterministic orchestration only: the turn machine (turn.py, calls.py) and the AgentRun workflow
that carries it out (agent.py). Nothing here is public: user code imports `durable_agent_runner`."""

from workflows.agent import AgentRun

# durable_agent_runner looks for this line: a project's own `workflows` module would hide this one.
ENGINE = "durable-agent-runner"

__all__ = ["AgentRun"]
