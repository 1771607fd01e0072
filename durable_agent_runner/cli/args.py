"""A JSON object from a command-line argument (`run --model-settings`, `approve --args`, `edit
--args`, chat's edited arguments): the client's own check (durable_agent_runner/client/checks.py),
bounded by the one parser of outside data (machine/bounds.py) and nested at most MAX_DEPTH
levels. A bad one is a ValueError whose text names the flag: one line for the user."""

from __future__ import annotations

from durable_agent_runner.client.checks import MAX_JSON_DEPTH as MAX_DEPTH
from durable_agent_runner.client.checks import json_object

__all__ = ["MAX_DEPTH", "json_object"]
