"""Everything that touches the world: model calls, tools, and how user code defines them.

User modules need only this package's public names::

    from activities import Agent, ToolContext, tool
"""

from activities.registry import Agent, Registry
from activities.tools import Tool, ToolContext, ToolRetryableError, tool

__all__ = ["Agent", "Registry", "Tool", "ToolContext", "ToolRetryableError", "tool"]
