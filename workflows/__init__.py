"""The interpreter: the workflows that carry out what the pure machine (`durable_agent_runner.machine`)
decides: AgentRun (agent.py and its steps), EvalRun, ScoreRun, DeliverMessage; their contracts
(types/) and every patch (patches.py). Nothing here is public: user code imports `durable_agent_runner`."""

# One identity: the engine is `durable_agent_runner.workflows` (a link in that package), never a top-level
# `workflows`, so a user's own `workflows` package and ours never meet, and no class is loaded twice.
if __name__ != "durable_agent_runner.workflows":
    raise ImportError(f"import durable_agent_runner.workflows, not {__name__}: the engine is no top-level package")

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from durable_agent_runner.workflows.agent import AgentRun
    from durable_agent_runner.workflows.deliver import DeliverMessage

__all__ = ["AgentRun", "DeliverMessage"]


def __getattr__(name: str) -> object:
    """The workflow classes on first use: a client that only reads the types and rules here
    (`client.py status`) does not load the whole interpreter (about a third of its start-up)."""
    if name == "AgentRun":
        from durable_agent_runner.workflows.agent import AgentRun

        return AgentRun
    if name == "DeliverMessage":
        from durable_agent_runner.workflows.deliver import DeliverMessage

        return DeliverMessage
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
