"""The dev server the tests start: durable_agent_runner.testing.devserver (one definition, also
used by AgentTestEnv and the demo's tuning flags)."""

from durable_agent_runner.testing.devserver import (
    DYNAMIC_CONFIG,
    SQLITE_PRAGMAS,
    DevServer,
    free_port,
    temporal_cli,
    tuning_flags,
)

__all__ = ["DYNAMIC_CONFIG", "SQLITE_PRAGMAS", "DevServer", "free_port", "temporal_cli", "tuning_flags"]
