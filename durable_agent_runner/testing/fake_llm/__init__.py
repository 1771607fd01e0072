"""fake_llm: a TEST DOUBLE for OpenAI-compatible model servers. Never used in production.

A local HTTP server speaking the OpenAI wire format (Chat Completions and the Responses API,
streamed or not, with the real status codes, error bodies, SSE framing, tool-call deltas and
usage), scripted by model name and able to inject faults. The project's tests and its offline
demo point the runtime at it by base URL (e.g. LLM_BASE_URL=http://127.0.0.1:8400/v1); the
runtime code never knows it exists.

In-process:
    with FakeLLMServer() as srv:        # 127.0.0.1, a free port, a background thread
        srv.base_url                    # "http://127.0.0.1:PORT/v1"
        srv.add_script("abc", [{"content": "hi"}])   # then use model "script:abc"
        srv.add_faults([{"kind": "status", "status": 429, "retry_after": 1}])
        srv.requests()                  # what the client sent

As a process: python -m durable_agent_runner.testing.fake_llm --host 127.0.0.1 --port 8400

Replies are a pure function of the request (see `scenarios` here); faults are a FIFO queue (see
`faults`); the control API lives under /_control/ (see `handler`).
Models named `hostile:<case>` and the `echo_key` and `stall` faults attack the client instead:
they echo its key back, reuse tool-call ids, send odd fields, and stall (see `hostile`).
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from durable_agent_runner.testing.fake_llm.server import FakeLLMServer

__all__ = ["FakeLLMServer"]


def __getattr__(name: str) -> Any:
    # Imported on first use (PEP 562): the offline models import this package's wire modules,
    # and its server imports them back (scenarios answer through durable_agent_runner.testing).
    if name == "FakeLLMServer":
        from durable_agent_runner.testing.fake_llm.server import FakeLLMServer

        return FakeLLMServer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
