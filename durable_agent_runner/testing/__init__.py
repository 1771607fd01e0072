"""Test your own agents offline: models that answer from Python, on a real OpenAI-compatible
server, and a Temporal dev server with a worker for your agents (docs/testing.md).

    from durable_agent_runner.testing import ScriptedModel, FunctionModel, reply, call, hand_off, output

    model = ScriptedModel({"assistant": [call("get_weather", city="Paris"), reply("Sunny in Paris.")]})
    async with model.serve(agents=[assistant]) as server:   # server.base_url, server.requests
        ...

`AgentTestEnv` (and the pytest plugin's `agent_env` fixture) runs your agents on a worker against
such a model. `fake_llm` is the lower-level test double the models are served by.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from durable_agent_runner.testing.env import AgentTestEnv
    from durable_agent_runner.testing.models import FunctionModel, OfflineModel, ScriptedModel
    from durable_agent_runner.testing.request import ModelRequest
    from durable_agent_runner.testing.server import ModelServer
    from durable_agent_runner.testing.steps import Call, HandOff, Output, Reply, Step, call, hand_off, output, reply

_EXPORTS = {
    "AgentTestEnv": "durable_agent_runner.testing.env",
    "FunctionModel": "durable_agent_runner.testing.models",
    "OfflineModel": "durable_agent_runner.testing.models",
    "ScriptedModel": "durable_agent_runner.testing.models",
    "ModelRequest": "durable_agent_runner.testing.request",
    "ModelServer": "durable_agent_runner.testing.server",
    "Call": "durable_agent_runner.testing.steps",
    "HandOff": "durable_agent_runner.testing.steps",
    "Output": "durable_agent_runner.testing.steps",
    "Reply": "durable_agent_runner.testing.steps",
    "Step": "durable_agent_runner.testing.steps",
    "call": "durable_agent_runner.testing.steps",
    "hand_off": "durable_agent_runner.testing.steps",
    "output": "durable_agent_runner.testing.steps",
    "reply": "durable_agent_runner.testing.steps",
}

__all__ = [
    "AgentTestEnv",
    "Call",
    "FunctionModel",
    "HandOff",
    "ModelRequest",
    "ModelServer",
    "OfflineModel",
    "Output",
    "Reply",
    "ScriptedModel",
    "Step",
    "call",
    "hand_off",
    "output",
    "reply",
]


def __getattr__(name: str) -> Any:
    # Imported on first use (PEP 562): fake_llm's scenarios use the models, and the models use
    # fake_llm's wire modules, so neither package imports the other when it is imported.
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
