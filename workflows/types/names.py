"""The names that are contracts (workflow, activities, signals, updates, queries, search
attributes), the phases, the models' defaults, and the task queues.

Pure data, safe inside the workflow sandbox. A field added after a release carries a default, so
histories recorded by older code still decode and replay."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from temporalio.common import SearchAttributeIndexedValueType, SearchAttributeKey, SearchAttributeUpdate

from durable_agent_runner.workflows.patches import FORK_LIVE_TOOLS_PATCH as FORK_LIVE_TOOLS_PATCH  # re-exported

# ---------------------------------------------------------------------------------------------
# Names are contracts: renaming a Python function must never break a run already in flight.

WORKFLOW_NAME = "AgentRun"
RESOLVE_AGENT_ACTIVITY = "agent.resolve"
RESOLVE_SECONDS = 60  # an attempt of it, start to close: MCP servers are started and listed within it
MODEL_CALL_ACTIVITY = "agent.model_call"
TOOL_CALL_ACTIVITY = "agent.tool_call"
# Runs worker-side code an agent declares (approval predicates, guardrails, its output type,
# handoff input filters): one activity for all of them, so the tool activity does one thing.
HOOK_ACTIVITY = "agent.hook"
STATUS_QUERY = "agent.status"
TRANSCRIPT_QUERY = "agent.transcript"
MODEL_CONTEXT_QUERY = "agent.model_context"
EVENTS_QUERY = "agent.events"
# A person's decision on a tool call. The signal is for `temporal workflow signal` and the Web UI;
# client.py sends the update, whose validator refuses a bad decision before anything is recorded.
APPROVAL_SIGNAL = "approval"
APPROVAL_UPDATE = "approval_update"
# A person's decision on a call in doubt (ResolveCall): the signal for the Web UI and
# `temporal workflow signal`, the update (validated before anything is recorded) for client.py.
RESOLVE_SIGNAL = "resolve_call"
RESOLVE_UPDATE = "resolve_call_update"
# A person's answer to an `ask_person` call (AnswerQuestion), validated before anything is recorded.
ANSWER_UPDATE = "answer_question"
# An outside system's completion of a call waiting for one (CompleteCall), validated the same way.
COMPLETE_UPDATE = "complete_call"
# Sessions: one run per conversation. A message and the end of a session are updates, so a
# closed run refuses them at once; each message's answer is read back by query.
SESSION_SEND_UPDATE = "session.send"
SESSION_END_UPDATE = "session.end"
EXCHANGE_QUERY = "session.exchange"
NOT_A_SESSION = "this run is not a session"  # how a run that is not one refuses a session's update or query
# Summarizes a session's older turns when its transcript nears the agent's memory budget.
COMPACT_ACTIVITY = "agent.compact"
# Breakpoints: a paused run holds still until resumed; while paused, its state can be inspected
# and edited (each edit validated by the update's validator, then recorded).
PAUSE_UPDATE = "agent.pause"
RESUME_UPDATE = "agent.resume"
EDIT_UPDATE = "agent.edit"
INSPECT_QUERY = "agent.inspect"
# The state just before model call N, read by `client.py fork` to start a new run from it.
FORK_POINT_QUERY = "agent.fork_point"
# Tells people a run waits for them (a webhook, Slack, an email), once per wait and channel
# (activities/notify.py); its failure shows in the run's story and never fails the run.
NOTIFY_ACTIVITY = "agent.notify"
# A cancelled child run tells its parent what it spent (ChildUsage), so the parent's budget counts it.
CHILD_USAGE_SIGNAL = "agent.child_usage"

# The run's search attributes, each key with its type, defined once: the workflow writes them,
# the CLI filters on them, and the dev server, the worker and docker-compose.yml register
# SEARCH_ATTRIBUTES (the compose file's copy is checked against it by tests/test_compose.py).
SearchWrite = SearchAttributeUpdate[Any]  # one key's new value, as the run writes it (machine/progress.py)
SA_AGENT = SearchAttributeKey.for_keyword("AgentName")
SA_PHASE = SearchAttributeKey.for_keyword("AgentPhase")  # one of Phase
SA_TURN = SearchAttributeKey.for_int("AgentTurn")
SA_TOKENS = SearchAttributeKey.for_int("AgentTotalTokens")
SA_PENDING = SearchAttributeKey.for_int("AgentPendingApprovals")
SA_VERSION = SearchAttributeKey.for_keyword("AgentVersion")  # the frozen agent's: runs an old deploy must finish
SA_COST = SearchAttributeKey.for_float("AgentCostUsd")  # what the run has cost so far, sub-agents included
SA_FORKED_FROM = SearchAttributeKey.for_keyword("AgentForkedFrom")  # the run a fork started from
# A call waits for a person to resolve it (a Bool: the dev server's SQLite holds three Ints, all taken).
SA_IN_DOUBT = SearchAttributeKey.for_bool("AgentInDoubt")
_KINDS = {SearchAttributeIndexedValueType.KEYWORD: "Keyword", SearchAttributeIndexedValueType.INT: "Int",
          SearchAttributeIndexedValueType.DOUBLE: "Double", SearchAttributeIndexedValueType.BOOL: "Bool"}  # fmt: skip
SEARCH_ATTRIBUTES: dict[str, str] = {
    k.name: _KINDS[k.indexed_value_type]
    for k in (SA_AGENT, SA_PHASE, SA_TURN, SA_TOKENS, SA_PENDING, SA_VERSION, SA_FORKED_FROM, SA_COST, SA_IN_DOUBT)
}


# A run's phase: the AgentPhase search attribute and `status`. Each value is a contract (search
# attribute values, status payloads, `--phase` filters): a StrEnum, so it is its string on the wire.
class Phase(StrEnum):
    STARTING = "starting"
    CALLING_MODEL = "calling_model"
    RUNNING_TOOLS = "running_tools"
    AWAITING_APPROVAL = "awaiting_approval"
    CONTINUING = "continuing"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    WAITING_FOR_MESSAGE = "waiting_for_message"
    COMPACTING = "compacting"
    PAUSED = "paused"
    IN_DOUBT = "in_doubt"  # a call's attempt ended without a result: a person resolves it (not final)


# The phases a run ends in, defined once: a run in one records nothing more.
FINAL_PHASES: frozenset[Phase] = frozenset({Phase.COMPLETED, Phase.FAILED, Phase.CANCELLED})


# How Temporal ended a run's execution beyond those: the server ended it (a terminate, a run
# timeout), so the run recorded no final phase. Execution statuses, not phases: `status` shows them.
class ServerEnding(StrEnum):
    TERMINATED = "terminated"
    TIMED_OUT = "timed_out"


# Every status of a run that has ended, whoever ended it.
ENDED_STATUSES: frozenset[str] = frozenset({*FINAL_PHASES, *ServerEnding})

# The two wires a model is reached over: Chat Completions and the Responses API (one name each,
# for the agent's `api`, LLM_API and the wire chosen per call).
WireName = Literal["chat", "responses"]

# Who a model string names: a prefix picks a provider ("anthropic:claude-sonnet-4-5"); a model
# without one ("gpt-4.1-mini", Ollama's "llama3:8b") goes to the worker's LLM_BASE_URL server, "llm".
Provider = Literal["llm", "openai", "anthropic", "gemini"]
PROVIDER_PREFIXES: tuple[Provider, ...] = ("openai", "anthropic", "gemini")


def split_model(model: str) -> tuple[Provider, str]:
    """(provider, the provider's own model name) of a model string; ValueError for a prefix
    with no name after it ("anthropic:")."""
    prefix, colon, name = model.partition(":")
    for provider in PROVIDER_PREFIXES:
        if colon and prefix == provider:
            if not name.strip():
                raise ValueError(f"model {model!r} names the provider {provider} but no model")
            return provider, name
    return "llm", model


def check_models(model: str | None, fallbacks: list[str]) -> None:
    """Refuses (ValueError) a run's models when one names a provider but no model, or when they
    repeat: a fallback that is the model itself, or one listed twice, would only try again what
    just failed."""
    seen: list[str] = []
    for fallback in [model or "", *fallbacks]:
        split_model(fallback)
        if fallback in seen:
            what = "the model itself" if fallback == model else "listed twice"
            raise ValueError(f"fallback model {fallback!r} is {what}: it would only try again what just failed")
        seen += [fallback] if fallback else []


DEFAULT_AGENT = "demo"
EMPTY_PARAMETERS: dict[str, object] = {"type": "object", "properties": {}}

# Bounds on a model call, used when neither the agent nor the worker's environment sets one
# (LLM_READ_TIMEOUT, LLM_TIMEOUT, LLM_MAX_ATTEMPTS, LLM_RETRY_SECONDS). A run never retries forever.
DEFAULT_MODEL_READ_TIMEOUT = 60.0  # seconds without a byte from the server end the attempt
DEFAULT_MODEL_TIMEOUT = 300.0  # seconds for one attempt, start to finish
DEFAULT_MODEL_MAX_ATTEMPTS = 8  # attempts of one model call, the first included
DEFAULT_MODEL_RETRY_SECONDS = 900.0  # seconds from a call's first attempt to giving up on it


def agent_task_queue(base: str, agent: str, version: str | None = None) -> str:
    """The task queue for work only a worker that knows `agent` can do.

    A worker polls `base` (workflows and model calls, which need no user code) and, for every
    agent it serves, `base@agent` (resolving the agent when a run starts) and
    `base@agent@version` (its tools and hooks). A run's tool calls therefore only ever reach
    workers that hold the exact agent the run froze, during a rolling deploy too.
    """
    return f"{base}@{agent}" if version is None else f"{base}@{agent}@{version}"
