"""fake_llm: a TEST DOUBLE for model servers. Never used in production.

A local HTTP server speaking the OpenAI wire format (Chat Completions and the Responses API) and
Anthropic's Messages API (`anthropic`: signed thinking, prompt caching), streamed or not, with
the real status codes, error bodies, SSE framing, tool-call deltas and usage, scripted by model
name and able to inject faults. The project's tests and its offline
demo point the runtime at it by base URL (e.g. LLM_BASE_URL=http://127.0.0.1:8400/v1); the
runtime code never knows it exists.

In-process:
    with FakeLLMServer() as srv:        # 127.0.0.1, a free port, a background thread
        srv.base_url                    # "http://127.0.0.1:PORT/v1"
        srv.add_script("abc", [{"content": "hi"}])   # then use model "script:abc"
        srv.add_faults([{"kind": "status", "status": 429, "retry_after": 1}])
        srv.requests()                  # what the client sent

As a process: python -m durable_agent_runner.testing.fake_llm --host 127.0.0.1 --port 8400
(the default scenarios), or `--model module:attr` to answer with your own ScriptedModel or
FunctionModel (docs/testing.md).

This package is the HTTP layer, and knows no scenario: the server (`server.LLMServer`) answers
with the responder it is given (`scripts`), the control API lives under /_control/ (`control`,
`handler`), faults are a FIFO queue (`faults`). Models named `hostile:<case>` and the `echo_key`
and `stall` faults attack the client instead: they echo its key back, reuse tool-call ids, send
odd fields, and stall (`hostile`). The default scenarios (the weather demo and the support team,
as FunctionModels; echo, recall, loop) are in durable_agent_runner/testing/scenarios/, and
`FakeLLMServer` is the server with them.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from durable_agent_runner.testing.fake_llm.server import LLMServer
    from durable_agent_runner.testing.scenarios.default import FakeLLMServer

__all__ = ["FakeLLMServer", "LLMServer"]


def __getattr__(name: str) -> Any:
    # Imported on first use (PEP 562): the default scenarios are offline models, which import this
    # package's HTTP layer; importing the package itself loads neither.
    if name == "FakeLLMServer":
        from durable_agent_runner.testing.scenarios.default import FakeLLMServer

        return FakeLLMServer
    if name == "LLMServer":
        from durable_agent_runner.testing.fake_llm.server import LLMServer

        return LLMServer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
