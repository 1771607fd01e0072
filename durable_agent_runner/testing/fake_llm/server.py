"""The in-process `LLMServer` handle: the HTTP server (handler.py) on a background thread,
answering with the responder it is given, with helpers that act on its state exactly as the
control API does. `durable_agent_runner.testing.fake_llm.FakeLLMServer` is this server with the
default scenarios; `durable_agent_runner.testing.serve()` is it with an offline model.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from durable_agent_runner.testing.fake_llm.control import State, apply_control
from durable_agent_runner.testing.fake_llm.handler import HTTPServer, bind
from durable_agent_runner.testing.fake_llm.scripts import Responder, scripts_only


class LLMServer:
    """The fake server in a background thread: `with LLMServer(responder=...) as srv: srv.base_url`.

    `responder` answers every model call (default: the control API's scripts only); `models` are
    the names GET /v1/models lists besides the scripts'. The helper methods act on the server's
    state directly, exactly as the control API does.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        latency_ms: float = 0.0,
        verbose: bool = False,
        max_log: int = 1000,
        responder: Responder = scripts_only,
        models: Sequence[str] = (),
    ) -> None:
        self.host = host
        self._port = port
        self._verbose = verbose
        self.state = State(latency_ms, max_log, responder, models)
        self._httpd: HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle
    def start(self) -> LLMServer:
        if self._httpd is not None:
            return self
        httpd = bind(self.host, self._port, self.state, verbose=self._verbose)
        self.state.stopping.clear()
        self._httpd = httpd
        self._port = int(httpd.server_address[1])
        self._thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), name="fake_llm", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self.state.stopping.set()
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> LLMServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # addresses
    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self._port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    # control (mirrors /_control/*)
    def add_script(self, script_id: str, steps: Sequence[dict[str, Any]]) -> str:
        """Register steps for model `script:<script_id>`; returns that model name."""
        return str(apply_control(self.state, "scripts", {"id": script_id, "steps": list(steps)})["model"])

    def add_faults(self, faults: Sequence[dict[str, Any]]) -> None:
        apply_control(self.state, "faults", {"faults": list(faults)})

    def add_fault(self, kind: str, **fields: Any) -> None:
        self.add_faults([{"kind": kind, **fields}])

    def pending_faults(self) -> list[dict[str, Any]]:
        return self.state.faults.pending()

    def set_latency(self, ms: float, stream_event_ms: float = 0.0) -> None:
        apply_control(self.state, "latency", {"ms": ms, "stream_event_ms": stream_event_ms})

    def requests(self, last: int | None = None) -> list[dict[str, Any]]:
        """The request log, oldest first (only the `last` entries if given)."""
        return self.state.requests(last)

    def reset(self) -> None:
        self.state.reset()
