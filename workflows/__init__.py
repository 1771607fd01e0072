"""Deterministic orchestration only: the agent loop workflow and the pure turn logic."""

from workflows.agent import AgentRun

__all__ = ["AgentRun"]
