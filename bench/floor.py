"""The floor: the same agent loop with no Temporal. Call the model over raw httpx, run the tool
in-process, append, repeat, using the product's own wire mapping, `decide` and tool code, so
the only difference from a durable run is durability."""

from __future__ import annotations

from durable_agent_runner import Registry, ToolContext
from durable_agent_runner.activities import chat_wire
from durable_agent_runner.activities.model import new_http_client
from durable_agent_runner.config.llm import LLMSettings
from durable_agent_runner.machine.calls import RunTools
from durable_agent_runner.machine.rules import Final, decide
from durable_agent_runner.workflows.types import Message, ToolMessage, UserMessage


async def floor_run(settings: LLMSettings, registry: Registry, agent: str, model: str, prompt: str, turns: int) -> int:
    """Runs the loop to its final answer; returns the number of model calls."""
    found = registry.agent(agent)
    assert found is not None, f"agent {agent} is not registered"
    spec = found.spec(max_turns=turns, model=model)
    messages: list[Message] = [UserMessage(content=prompt)]
    url = f"{settings.base_url}/chat/completions"
    async with new_http_client(settings) as http:
        for turn in range(1, turns + 1):
            response = await http.post(url, json=chat_wire.build_request(spec, messages, model, False))
            response.raise_for_status()
            reply = chat_wire.parse_response(response.json(), turn)
            messages.append(reply.message)
            step = decide(spec, turn, reply)
            if isinstance(step, Final):
                return turn
            if not isinstance(step, RunTools):
                raise RuntimeError(f"floor loop stopped early: {step.error}")
            for call in (p.call for p in step.calls if p.action == "tool"):
                tool = registry.tool(call.name)
                assert tool is not None
                ctx = ToolContext(run_id="floor", call_id=call.call_id, idempotency_key=f"floor:{call.call_id}",
                                  turn=turn, attempt=1)  # fmt: skip
                result = await tool.invoke(call.arguments, ctx)
                messages.append(ToolMessage(call_id=call.call_id, name=call.name, content=result.output,
                                            is_error=result.is_error))  # fmt: skip
    raise RuntimeError(f"floor loop did not finish in {turns} turns")
