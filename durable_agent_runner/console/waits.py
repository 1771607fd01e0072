"""What the console shows of a call waiting for an outside system's completion
(docs/outside-completion.md): on the run's page, with how to complete it. The inbox, a person's
to-do list, does not list it: a system completes it (one that times out to a person is in doubt,
and there)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from durable_agent_runner.workflows import types as t


@dataclass
class Outside:
    """A call waiting for an outside system's completion: shown with how to complete it (the run's
    page lists it; the inbox, a person's to-do list, does not: a system completes it)."""

    run_id: str
    agent: str
    call: t.PendingOutside

    @property
    def key(self) -> str:
        return f"{self.run_id}/{self.call.call_id}/outside"

    @property
    def since(self) -> datetime:
        return self.call.since
