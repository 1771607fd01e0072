"""fake_llm with its default scenarios: `default_responder` routes a request by its model name,
and `FakeLLMServer` is fake_llm's HTTP server answering with it (what the tests, the benchmark and
`python -m durable_agent_runner.testing.fake_llm` use).

  script:<id>   the steps registered over the control API (fake_llm/scripts.py)
  echo          "echo: <last user message>"                                   (basic.py)
  loop:<N>:<B>  N-1 turns of B filler characters plus a tool call, then text  (basic.py)
  recall        every user message it sees, in order                          (basic.py)
  team          every agent of the support team: handoffs, an agent as a tool, typed output
                (team.py, a FunctionModel)
  anything else the weather demo: get_weather in parallel, convert_temperature, the answer
                (weather.py, a FunctionModel); an agent without get_weather is told there is
                no script for it

Whatever the model, a request to summarize a session's transcript gets the summary (basic.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from durable_agent_runner.testing.fake_llm.conversation import Conversation
from durable_agent_runner.testing.fake_llm.scripts import Responder, Scripts, reply_of, script_reply
from durable_agent_runner.testing.fake_llm.server import LLMServer
from durable_agent_runner.testing.fake_llm.wire import Reply
from durable_agent_runner.testing.models import OfflineModel
from durable_agent_runner.testing.scenarios import basic
from durable_agent_runner.testing.scenarios.team import TEAM
from durable_agent_runner.testing.scenarios.weather import WEATHER

BUILTIN_MODELS = ("demo", "weather", "echo", "team", "recall")


def answer_with(model: OfflineModel, conv: Conversation) -> Reply:
    """`model`'s reply to the request (its functions must be sync: no event loop runs here)."""
    return reply_of(conv, model.answer(model.request(conv)))


def respond(conv: Conversation, scripts: Scripts) -> Reply:
    """The default scenarios' reply to this request; ApiError 404 for a model none serves."""
    if basic.is_summary_request(conv):
        return reply_of(conv, basic.summarize(conv))
    if conv.model.startswith("script:"):
        return script_reply(conv, scripts)
    if conv.model == "echo":
        return reply_of(conv, basic.echo(conv))
    if conv.model.startswith("loop:"):
        return reply_of(conv, basic.loop(conv))
    if conv.model == "recall":
        return reply_of(conv, basic.recall(conv))
    if conv.model == "team":
        return answer_with(TEAM, conv)
    return answer_with(WEATHER, conv)  # "weather", "demo", any other: the demo works whatever LLM_MODEL is


class FakeLLMServer(LLMServer):
    """fake_llm's server answering with the default scenarios (or the `responder` given):
    `with FakeLLMServer() as srv: srv.base_url`; see durable_agent_runner.testing.fake_llm."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        latency_ms: float = 0.0,
        verbose: bool = False,
        max_log: int = 1000,
        responder: Responder = respond,
        models: Sequence[str] = BUILTIN_MODELS,
    ) -> None:
        super().__init__(
            host, port, latency_ms=latency_ms, verbose=verbose, max_log=max_log, responder=responder, models=models
        )
