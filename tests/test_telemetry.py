"""OpenTelemetry (durable_agent_runner/telemetry.py): spans as a collector receives them, over OTLP/HTTP
from the project's worker and a traced client, for runs on the dev server: one trace per run
across a retried model call, continue-as-new and a second worker; GenAI attributes; no key, no
prompt, no completion unless content capture is asked for."""

from __future__ import annotations

import gzip
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from pydantic import SecretStr
from temporalio.worker import Replayer

from durable_agent_runner.config.connection import DATA_CONVERTER
from durable_agent_runner.telemetry import Telemetry, TelemetryConfigError, enabled, exporter_from_env
from durable_agent_runner.workflows import AgentRun
from tests.helpers import calls, script, start
from tests.test_agents import research_team
from tests.test_approvals import decide, pending, update
from tests.test_client import cli  # noqa: F401  (the fixture)

SECRET = "sk-otel-test-4f9c2a7be1d04c3a"
PROMPT = "Add two and three for the ledger PROMPT-7f3a"
ANSWER = "The ledger sum is 5 ANSWER-91c2"


# --------------------------------------------------------------------------- the receiver


@dataclass
class Received:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    status: int
    status_message: str
    resource: dict[str, Any]


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return tuple(_value(x) for x in v.array_value.values)
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind) if kind else None


class Receiver:
    """An OTLP/HTTP trace receiver: POST /v1/traces with an ExportTraceServiceRequest."""

    def __init__(self) -> None:
        self.spans: list[Received] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces":
                    self.send_response(404)
                    self.end_headers()
                    return
                receiver.take(ExportTraceServiceRequest.FromString(body))
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def take(self, request: ExportTraceServiceRequest) -> None:
        with self.lock:
            for rs in request.resource_spans:
                resource = {kv.key: _value(kv.value) for kv in rs.resource.attributes}
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        self.spans.append(
                            Received(
                                name=s.name,
                                trace_id=s.trace_id.hex(),
                                span_id=s.span_id.hex(),
                                parent_id=s.parent_span_id.hex(),
                                kind=s.kind,
                                attributes={kv.key: _value(kv.value) for kv in s.attributes},
                                events=[(e.name, {kv.key: _value(kv.value) for kv in e.attributes}) for e in s.events],
                                status=s.status.code,
                                status_message=s.status.message,
                                resource=resource,
                            )
                        )

    def trace_of(self, run_id: str) -> list[Received]:
        """Every span of the run's one trace (the test fails if the run spans several)."""
        with self.lock:
            spans = list(self.spans)
        traces = {s.trace_id for s in spans if s.attributes.get("temporalWorkflowID") == run_id}
        assert len(traces) == 1, f"run {run_id} is in {len(traces)} traces"
        return [s for s in spans if s.trace_id in traces]


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    r.thread.start()
    yield r
    r.server.shutdown()
    r.server.server_close()


@pytest.fixture(scope="module")
def telemetry(receiver: Receiver) -> Iterator[Telemetry]:
    """The worker's telemetry, from the environment as worker.py builds it."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
        env.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
        env.delenv(CAPTURE, raising=False)
        env.setenv("OTEL_SERVICE_NAME", "test-worker")
        made = Telemetry.from_env("agent-worker")
    assert made is not None and not made.capture_content
    yield made
    made.shutdown()


CAPTURE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


def flushed(*telemetries: Telemetry) -> None:
    for t in telemetries:
        assert t.provider.force_flush(10_000)


def one(spans: list[Received], name: str, **attributes: Any) -> Received:
    found = [s for s in spans if s.name == name and all(s.attributes.get(k) == v for k, v in attributes.items())]
    assert len(found) == 1, f"{len(found)} spans named {name!r} with {attributes}: {[s.name for s in spans]}"
    return found[0]


def leaks(spans: list[Received], *texts: str) -> list[str]:
    """Where any of `texts` appears: attribute values, events, status messages, resources."""
    found = []
    for s in spans:
        places = {**s.attributes, **s.resource, "status": s.status_message}
        places |= {f"event {name}": attrs for name, attrs in s.events}
        found += [f"{s.name}: {k}" for k, v in places.items() for text in texts if text in repr(v)]
    return found


ERROR = 2  # Status.STATUS_CODE_ERROR
CLIENT, INTERNAL = 3, 1  # Span.SPAN_KIND_CLIENT, SPAN_KIND_INTERNAL


# ------------------------------------------------------------------------------ tests


async def test_a_run_is_one_trace_of_turns_model_calls_and_tool_calls(
    client, task_queue, worker_factory, llm, settings, telemetry, receiver
):
    model = script(llm, calls(("add", {"a": 2, "b": 3})), {"content": ANSWER})
    llm.add_fault("status", status=503, count=1)  # the first model call fails once, then is retried
    keyed = settings.model_copy(update={"api_key": SecretStr(SECRET)})
    traced = telemetry.client(client)
    async with worker_factory(settings=keyed, telemetry=telemetry):
        handle = await start(traced, task_queue, PROMPT, agent="scripted", model=model)
        result = await handle.result()
    assert result.output == ANSWER
    flushed(telemetry)
    spans = receiver.trace_of(handle.id)

    root = one(spans, "StartWorkflow:AgentRun", temporalWorkflowID=handle.id)
    assert root.parent_id == "" and root.kind == CLIENT and root.attributes["gen_ai.agent.name"] == "scripted"
    run = one(spans, "invoke_agent scripted")
    assert run.parent_id == root.span_id
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.conversation.id"] == handle.id
    assert run.resource["service.name"] == "test-worker"
    turns = {n: one(spans, f"turn {n}") for n in (1, 2)}
    assert all(t.parent_id == run.span_id and t.attributes["agent.turn"] == n for n, t in turns.items())

    chats = sorted((s for s in spans if s.name == f"chat {model}"), key=lambda s: s.attributes["agent.turn"])
    assert [(s.attributes["agent.turn"], s.attributes["temporalActivityAttempt"]) for s in chats] == [
        (1, 1), (1, 2), (2, 1),
    ]  # fmt: skip
    failed, first, second = chats
    tool = one(spans, "execute_tool add")
    assert failed.status == ERROR and failed.attributes["error.type"] == "ModelHTTP503"
    assert "gen_ai.usage.input_tokens" not in failed.attributes
    # the second call is made by the tool's activity, once the tool has run (machine/requests.py)
    for span, parent, finish in ((first, turns[1], "tool_calls"), (second, tool, "stop")):
        a = span.attributes
        assert span.parent_id == parent.span_id and span.kind == CLIENT and span.status != ERROR
        assert a["gen_ai.operation.name"] == "chat"
        assert a["gen_ai.provider.name"] == a["gen_ai.system"] == "openai"
        assert a["gen_ai.request.model"] == model and a["gen_ai.response.model"]
        assert a["gen_ai.response.finish_reasons"] == (finish,)
        assert a["gen_ai.usage.input_tokens"] > 0 and a["gen_ai.usage.output_tokens"] > 0
        assert a["server.address"] == "127.0.0.1" and a["server.port"] == llm.port
        assert a["gen_ai.request.stream"] is keyed.stream
        assert a["temporalWorkflowID"] == handle.id
    assert failed.parent_id == turns[1].span_id  # each attempt under the same turn

    assert tool.parent_id == turns[1].span_id and tool.kind == INTERNAL
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "add" and tool.attributes["gen_ai.tool.call.id"] == "call_1_0"

    assert len({s.span_id for s in spans}) == len(spans)  # nothing exported twice
    assert leaks(spans, SECRET, SECRET[-12:], "PROMPT-7f3a", "ANSWER-91c2", "ledger") == []
    assert not any(k.startswith(("gen_ai.input", "gen_ai.output", "gen_ai.tool.call.arg", "gen_ai.tool.call.res"))
                   for s in spans for k in s.attributes)  # fmt: skip

    # Replaying the run under the same interceptors repeats no command and sends no span.
    before = len(receiver.spans)
    history = await handle.fetch_history()
    replayer = Replayer(
        workflows=[AgentRun], data_converter=DATA_CONVERTER, interceptors=telemetry.worker_interceptors(keyed)
    )
    await replayer.replay_workflow(history)
    flushed(telemetry)
    assert len(receiver.spans) == before


async def test_continue_as_new_keeps_the_run_in_one_trace(client, task_queue, worker_factory, llm, telemetry, receiver):
    # Started by a client that does not trace: the first execution's span is the root.
    async with worker_factory(telemetry=telemetry):
        handle = await start(client, task_queue, "go", agent="relay", model="loop:5:10")
        result = await handle.result()
    assert result.turns == 5
    flushed(telemetry)
    spans = receiver.trace_of(handle.id)

    runs = [s for s in spans if s.name == "invoke_agent relay"]
    assert len(runs) == 3 and len({s.attributes["temporalRunID"] for s in runs}) == 3
    (first,) = [s for s in runs if s.parent_id == ""]
    assert "temporalContinuedRunID" not in first.attributes
    later = [s for s in runs if s is not first]
    assert all(s.parent_id == first.span_id and s.attributes["temporalContinuedRunID"] for s in later)
    assert sum(1 for s in runs if s.attributes.get("agent.continued_as_new")) == 2
    by_run = {s.attributes["temporalRunID"]: s for s in runs}
    for n in range(1, 6):
        turn = one(spans, f"turn {n}")
        assert turn.parent_id == by_run[turn.attributes["temporalRunID"]].span_id
        (chat,) = [s for s in spans if s.name == "chat loop:5:10" and s.attributes["agent.turn"] == n]
        tools = [s for s in spans if s.name == "execute_tool pad" and s.attributes["agent.turn"] == n]
        assert [t.parent_id for t in tools] == ([turn.span_id] if n < 5 else [])
        # an execution's first call is the model activity's; its second, the first tool's call ahead
        # (none before a continue-as-new: machine/requests.py)
        before = [s for s in spans if s.name == "execute_tool pad" and s.attributes["agent.turn"] == n - 1]
        assert chat.parent_id == (before[0].span_id if n in (2, 4) else turn.span_id)
    turns_of = [sorted(t.attributes["agent.turn"] for t in spans if t.parent_id == r.span_id and t.name[:5] == "turn ")
                for r in runs]  # fmt: skip
    assert sorted(turns_of) == [[1, 2], [3, 4], [5]]


async def test_a_second_worker_goes_on_in_the_same_trace(
    client, task_queue, worker_factory, llm, counter_file, telemetry, receiver
):
    model = script(llm, calls(("send", {"label": "report"})), {"content": "sent"})
    traced = telemetry.client(client)
    async with worker_factory(telemetry=telemetry):  # the first worker stops while the run waits
        handle = await start(traced, task_queue, "send the report", agent="guarded", model=model)
        (waiting,) = await pending(handle)
    async with worker_factory(telemetry=telemetry):  # a new worker: replays the run, then goes on
        await update(handle, decide(waiting.call_id, by="ops"))
        assert (await handle.result()).output == "sent"
    flushed(telemetry)
    spans = receiver.trace_of(handle.id)
    turn = one(spans, "turn 1")  # started on the first worker, re-made and ended by the second
    (chat, _) = sorted((s for s in spans if s.name.startswith("chat ")), key=lambda s: s.attributes["agent.turn"])
    tool = one(spans, "execute_tool send")
    assert chat.parent_id == tool.parent_id == turn.span_id
    assert one(spans, "turn 2").parent_id == turn.parent_id == one(spans, "invoke_agent guarded").span_id
    assert len({s.span_id for s in spans}) == len(spans)


async def test_an_agent_used_as_a_tool_runs_in_the_turn_that_called_it(
    client, task_queue, worker_factory, llm, telemetry, receiver
):
    registry = research_team(
        llm, [{"content": "Tides follow the moon."}], [calls(("ask", {"input": "tides"})), {"content": "done"}]
    )
    async with worker_factory(registry=registry, telemetry=telemetry):
        handle = await start(client, task_queue, "Explain tides", agent="lead")
        await handle.result()
    flushed(telemetry)
    spans = receiver.trace_of(handle.id)
    assert receiver.trace_of(f"{handle.id}.call_1_0") == spans
    lead_turn = one(spans, "turn 1", **{"gen_ai.agent.name": "lead"})
    child = one(spans, "invoke_agent scholar")
    assert child.parent_id == lead_turn.span_id and child.attributes["temporalWorkflowID"] == f"{handle.id}.call_1_0"
    assert one(spans, "turn 1", **{"gen_ai.agent.name": "scholar"}).parent_id == child.span_id


async def test_content_is_captured_only_when_asked_and_masked(
    client, task_queue, worker_factory, llm, settings, receiver
):
    capturing = Telemetry.exporting(
        OTLPSpanExporter(endpoint=f"{receiver.url}/v1/traces"), service_name="capture", capture_content=True
    )
    model = script(llm, calls(("add", {"a": 2, "b": 3})), {"content": ANSWER})
    keyed = settings.model_copy(update={"api_key": SecretStr(SECRET)})
    try:
        async with worker_factory(settings=keyed, telemetry=capturing):
            handle = await start(client, task_queue, f"{PROMPT} (my key is {SECRET})", agent="scripted", model=model)
            await handle.result()
        flushed(capturing)
    finally:
        capturing.shutdown()
    spans = receiver.trace_of(handle.id)
    chat = next(s for s in spans if s.name == f"chat {model}" and s.attributes["agent.turn"] == 2)
    sent = chat.attributes["gen_ai.input.messages"]
    assert "PROMPT-7f3a" in sent and "my key is ***" in sent and '"tool_call_response"' in sent
    assert "ANSWER-91c2" in chat.attributes["gen_ai.output.messages"]
    assert "test agent driven by a script" in chat.attributes["gen_ai.system_instructions"]
    tool = one(spans, "execute_tool add")
    assert tool.attributes["gen_ai.tool.call.arguments"] == '{"a": 2, "b": 3}'
    assert tool.attributes["gen_ai.tool.call.result"] == '"5"'
    assert leaks(spans, SECRET, SECRET[-12:]) == []


async def test_a_cheap_call_run_with_the_reply_is_a_span_inside_its_model_call(
    client, task_queue, worker_factory, llm, settings, receiver
):
    capturing = Telemetry.exporting(
        OTLPSpanExporter(endpoint=f"{receiver.url}/v1/traces"), service_name="cheap", capture_content=True
    )
    model = script(llm, calls(("quick_add", {"a": 2, "b": 3})), {"content": "5"})
    try:
        async with worker_factory(telemetry=capturing):
            handle = await start(client, task_queue, "add", agent="quick", model=model)
            await handle.result()
        flushed(capturing)
    finally:
        capturing.shutdown()
    spans = receiver.trace_of(handle.id)
    chat = one(spans, f"chat {model}", **{"agent.turn": 1})
    tool = one(spans, "execute_tool quick_add")
    assert tool.parent_id == chat.span_id and tool.kind == INTERNAL and tool.status != ERROR
    a = tool.attributes
    assert a["agent.tool.with_reply"] is True and a["agent.turn"] == 1 and a["gen_ai.agent.name"] == "quick"
    assert a["gen_ai.tool.call.arguments"] == '{"a": 2, "b": 3}' and a["gen_ai.tool.call.result"] == '"5"'


async def test_client_py_sends_the_root_span_and_warns_on_a_bad_setting(
    cli, task_queue, worker_factory, llm, telemetry, receiver
):
    model = script(llm, {"content": "hi"}, {"content": "hi"})
    run_id, untraced = f"otel-{uuid.uuid4().hex[:8]}", f"otel-{uuid.uuid4().hex[:8]}"
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}
    bad = {"OTEL_EXPORTER_OTLP_ENDPOINT": "localhost:4318"}
    async with worker_factory(telemetry=telemetry):
        done = await cli("run", "--wait", "--id", run_id, "--agent", "scripted", "--model", model, "hello", env=env)
        warned = await cli("run", "--wait", "--id", untraced, "--agent", "scripted", "--model", model, "hi", env=bad)
    assert done.code == 0 and done.out.strip() == "hi", done.err
    assert warned.code == 0 and warned.out.strip() == "hi"
    assert warned.err.strip() == (
        "warning: OpenTelemetry off: OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL with a host, "
        "and no blanks, not 'localhost:4318'"
    )
    flushed(telemetry)
    spans = receiver.trace_of(run_id)  # client.py sent its span before it exited
    root = one(spans, "StartWorkflow:AgentRun", temporalWorkflowID=run_id)
    assert root.resource["service.name"] == "agent-client" and root.parent_id == ""
    assert one(spans, "invoke_agent scripted").parent_id == root.span_id
    assert not [s for s in receiver.trace_of(untraced) if s.name.startswith("StartWorkflow")]


def test_settings_turn_tracing_on_and_are_checked(monkeypatch):
    assert not enabled({})
    assert enabled({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert enabled({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"})
    assert not enabled({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"})
    assert not enabled({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"})
    with pytest.raises(TelemetryConfigError, match="OTEL_EXPORTER_OTLP_ENDPOINT must be an http"):
        exporter_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"})
    with pytest.raises(TelemetryConfigError, match="OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf or grpc"):
        exporter_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})
    with pytest.raises(TelemetryConfigError, match="pip install opentelemetry-exporter-otlp-proto-grpc"):
        exporter_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"})
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    assert Telemetry.from_env("agent-worker") is None  # nothing is built without an endpoint


def test_worker_refuses_a_bad_setting_in_one_line(monkeypatch, capsys):
    import worker

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4318")
    assert worker.main([]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "worker.py: error: OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL with a host, and no blanks, "
        "not 'localhost:4318'"
    )


async def test_a_fallback_is_an_event_on_its_turn_and_each_call_names_its_provider(
    client, task_queue, worker_factory, llm, settings, telemetry, receiver
):
    down, up = script(llm, {"content": "x"}), script(llm, {"content": ANSWER})
    llm.add_faults([{"kind": "status", "status": 529, "count": 1000, "model": down}])
    keyed = settings.model_copy(
        update={"openai_base_url": llm.base_url, "openai_api_key": SecretStr(SECRET), "max_attempts": 1}
    )
    async with worker_factory(settings=keyed, telemetry=telemetry):
        handle = await start(
            telemetry.client(client), task_queue, PROMPT, agent="scripted", model=f"openai:{down}", fallback_models=[up]
        )
        assert (await handle.result()).output == ANSWER
    flushed(telemetry)
    spans = receiver.trace_of(handle.id)
    turn = one(spans, "turn 1")
    assert turn.events == [("model_fallback", {"agent.model.from": f"openai:{down}", "agent.model.to": up})]
    failed, answered = one(spans, f"chat openai:{down}"), one(spans, f"chat {up}")
    assert failed.status == ERROR and failed.attributes["error.type"] == "ModelHTTP529"
    assert failed.attributes["gen_ai.provider.name"] == answered.attributes["gen_ai.provider.name"] == "openai"
    assert answered.status != ERROR and answered.parent_id == failed.parent_id == turn.span_id
    assert leaks(spans, SECRET, SECRET[-12:]) == []


async def test_a_live_runs_scores_are_a_span_naming_the_run(
    client, task_queue, worker_factory, llm, telemetry, receiver
):
    from durable_agent_runner import Agent, Registry
    from durable_agent_runner.evals import Contains
    from durable_agent_runner.workflows.types.live_scores import scores_id
    from tests.test_live_scores import scores

    model = script(llm, {"content": ANSWER})
    scored = Agent(name="scored", model=model, evaluators=[Contains(value="ANSWER"), "EqualsExpected"], eval_sample=1)
    async with worker_factory(registry=Registry(agents=[scored]), telemetry=telemetry):
        handle = await start(telemetry.client(client), task_queue, PROMPT, agent="scored")
        await handle.result()
        await scores(client, handle.id)
    flushed(telemetry)
    with receiver.lock:
        spans = list(receiver.spans)
    span = one(spans, "eval.score", temporalWorkflowID=scores_id(handle.id))
    assert span.attributes["agent.scored_run_id"] == handle.id
    assert span.attributes["eval.score.Contains"] is True and span.attributes["eval.score.EqualsExpected"] is True
