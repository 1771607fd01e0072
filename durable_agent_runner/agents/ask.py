"""`ask_person`: a built-in tool whose call a person answers. Give it to an agent like any tool:

    from durable_agent_runner import Agent, ask_person

    agent = Agent(name="planner", tools=[ask_person])  # waits up to 30 days, then "nobody answered"
    agent = Agent(name="planner", tools=[ask_person.with_options(timeout_seconds=3600, default="Tuesday")])

The model calls it as `ask_person(question, choices=None)`. No activity runs it: the run waits
durably for a person's answer (`client.py answer`, `RunHandle.answer_question`, the console's inbox), and
that answer is the call's result (machine/questions.py). docs/ask-person.md says more.
"""

from __future__ import annotations

from durable_agent_runner.agents.tools import Tool, ToolContext
from durable_agent_runner.machine.questions import ASK_PERSON
from durable_agent_runner.workflows.types import AskSpec, ToolResult


def _ask_person(question: str, choices: list[str] | None = None) -> str:
    """Ask a person a question and wait for their answer, which comes back as this tool's result.
    Use it when only a person can decide or knows the answer; the wait may be long.

    Args:
        question: The question, complete enough to answer without seeing the conversation.
        choices: The answers a person may pick from (up to 20); leave it out for a free text answer.
    """
    raise RuntimeError("ask_person is answered by a person in a run, never called")


class AskPersonTool(Tool[[str, list[str] | None], str]):
    """The `ask_person` tool with its options: how long a question waits, and the default the
    model reads when nobody answers by then (None: it is told nobody answered)."""

    def __init__(self, ask: AskSpec | None = None) -> None:
        super().__init__(_ask_person, name=ASK_PERSON)
        self.ask = ask or AskSpec()
        self._spec = self._spec.model_copy(update={"ask": self.ask})

    def with_options(self, *, timeout_seconds: float | None = None, default: str | None = None) -> AskPersonTool:
        """A copy that waits at most `timeout_seconds` (default 30 days), then answers `default`."""
        given = {"timeout_seconds": timeout_seconds} if timeout_seconds is not None else {}
        return AskPersonTool(AskSpec.model_validate({**given, "default": default}))

    def __repr__(self) -> str:
        return f"ask_person(timeout_seconds={self.ask.timeout_seconds:g}, default={self.ask.default!r})"

    async def invoke(self, arguments_json: str, ctx: ToolContext, threads: object = None) -> ToolResult:
        """Never reached in a run (the workflow answers it with a person's answer); said plainly if called."""
        message = "error: ask_person is answered by a person while the run waits; no activity runs it"
        return ToolResult(call_id=ctx.call_id, tool=self.name, output=message, is_error=True)


ask_person = AskPersonTool()
