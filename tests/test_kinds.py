"""Phases and event kinds are enums whose values are the strings 1.2 wrote: payloads, search
attribute values, status and watch output are byte for byte what they were, and the final sets are
defined once, as they were."""

from datetime import UTC, datetime

from temporalio.converter import encode_typed_search_attribute_value

from durable_agent_runner import client as public
from durable_agent_runner.client import listing
from durable_agent_runner.config.connection import make_data_converter
from durable_agent_runner.console import data as console_data
from durable_agent_runner.machine.progress import FILTERED_PHASES
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.workflows import types as t
from tests.helpers import event

NOW = datetime(2026, 12, 2, 5, 0, tzinfo=UTC)
# The strings 1.2 wrote, in its order (its `Phase` and `EventKind` were Literals).
OLD_PHASES = (
    "starting", "calling_model", "running_tools", "awaiting_approval", "continuing", "completed", "failed", "cancelled",
    "waiting_for_message", "compacting", "paused", "in_doubt",
)  # fmt: skip
OLD_KINDS = (
    "model_started", "model_finished", "model_dropped", "tool_started", "tool_finished", "approval_requested",
    "approval_decided", "final", "failed", "cancelled", "handoff", "guardrail", "output_refused", "message", "answered",
    "compacted", "waiting", "ended", "paused", "edited", "resumed", "budget_raised", "call_in_doubt", "call_resolved",
)  # fmt: skip
NEW_KINDS = (
    "model_fallback", "notified", "notify_failed", "question_asked", "question_answered",
    "outside_waiting", "outside_completed",
)  # fmt: skip  # 1.4: appended


def test_the_enums_values_are_the_strings_1_2_wrote():
    assert tuple(p.value for p in t.Phase) == OLD_PHASES
    assert tuple(k.value for k in t.EventKind) == OLD_KINDS + NEW_KINDS
    assert all(p == p.value and str(p) == p.value and f"{p}" == p.value for p in t.Phase)
    assert all(k == k.value and str(k) == k.value and f"{k}" == k.value for k in t.EventKind)
    # the `--phase` filters of the CLI and the console offer every phase, in that order
    assert listing.PHASES == console_data.PHASES == OLD_PHASES
    assert (public.Phase, public.EventKind) == (t.Phase, t.EventKind)  # what docs/python-client.md imports


def test_the_final_sets_are_what_they_were():
    assert t.FINAL_PHASES == {"completed", "failed", "cancelled"}
    assert t.ENDED_STATUSES == {"completed", "failed", "cancelled", "terminated", "timed_out"}
    assert {e.value for e in t.ServerEnding} == {"terminated", "timed_out"}
    assert not t.FINAL_PHASES & set(t.ServerEnding)  # a run's phase is never Temporal's status
    assert t.RUN_END_KINDS == {"final", "failed", "cancelled"}
    assert t.SESSION_END_KINDS == {"ended", "failed", "cancelled"}
    assert t.END_KINDS == {"final", "failed", "cancelled", "ended"}
    assert t.STOP_KINDS == {"failed", "cancelled"}
    assert FILTERED_PHASES == {
        "awaiting_approval", "paused", "waiting_for_message", "completed", "failed", "cancelled", "in_doubt",
    }  # fmt: skip


def test_status_shows_each_phase_as_1_2_did():
    def old(phase: str) -> str:  # 1.2's RunState.status, word for word
        status = phase if phase in ("completed", "failed", "cancelled", "awaiting_approval") else "running"
        return "waiting" if phase == "waiting_for_message" else "paused" if phase == "paused" else status

    for phase in t.Phase:
        s = RunState()
        s.phase = phase
        status = s.status("run-1")
        assert (status.status, status.phase) == (old(phase.value), phase.value)
        assert type(status.status) is str and type(status.phase) is str  # plain strings in the payload


async def test_a_status_and_an_event_cross_the_data_converter_as_the_same_json():
    converter = make_data_converter({})
    usage = t.Usage(input_tokens=3, output_tokens=4, total_tokens=7, requests=1)
    for kind in t.EventKind:
        typed = event(kind, seq=3, at=NOW, turn=2, text="Tokyo: 18°C", usage=usage)
        plain = t.RUN_EVENT.validate_python({**typed.model_dump(), "kind": kind.value})
        page = t.EventsPage(events=[typed], next=4, first=0)
        [payload] = await converter.encode([page])
        assert payload.data == (await converter.encode([page.model_copy(update={"events": [plain]})]))[0].data
        assert f'"kind":"{kind.value}"'.encode() in payload.data
        [back] = await converter.decode([payload], [t.EventsPage])
        assert back.events == [typed] and back.events[0].kind is kind and type(back.events[0]) is type(typed)
    for phase in t.Phase:
        s = RunState()
        s.phase = phase
        [payload] = await converter.encode([s.status("run-1")])
        assert f'"phase":"{phase.value}"'.encode() in payload.data
        [back] = await converter.decode([payload], [t.RunStatus])
        assert back.phase == phase.value


def test_an_event_recorded_as_text_decodes_to_its_member():
    """What an older worker sent (query results, the watch stream) still decodes, as its kind's class."""
    old = '{"seq":0,"at":"2026-12-02T05:00:00Z","kind":"answered","turn":1,"detail":"message 1"}'
    ev = t.RUN_EVENT.validate_json(old)
    assert ev.kind is t.EventKind.ANSWERED and ev.kind == "answered" and type(ev) is t.AnsweredEvent
    assert ev.model_dump_json(exclude_defaults=True, exclude={"kind"}) == old.replace(',"kind":"answered"', "")
    assert ev.model_dump(mode="json")["kind"] == "answered"  # and encodes as it came


def test_the_phase_search_attribute_is_the_plain_string():
    for phase in t.Phase:
        assert encode_typed_search_attribute_value(t.SA_PHASE, phase) == encode_typed_search_attribute_value(
            t.SA_PHASE, phase.value
        )
