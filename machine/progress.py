"""What the interpreter feeds back about the run's progress, written into its state here: how it
began (its breakpoints and session, the agent the resolve froze, its prompt), what status says it
does (its phase and step), and how it ended. With these, no module of workflows/ changes the run's
state itself: it carries out steps and reports what happened (tests/test_layout.py holds that).

What status says the run is doing is decided here too (`Status`): the phase a wait for a person
puts the run in (and the one it goes back to), the words for the calls under way, and when the
run's search attributes are written (a change a person filters on, the counters at most once per
turn and every COUNTERS_EVERY_SECONDS by the reply clock).

Pure: the workflow passes in what only it knows (a patch asked, the time), says it and writes them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal, get_args

from durable_agent_runner.machine.approvals import decision_words
from durable_agent_runner.machine.calls import describe_call
from durable_agent_runner.machine.doubts import resolution_words
from durable_agent_runner.machine.outside import waiting_words as outside_words
from durable_agent_runner.machine.questions import waiting_words
from durable_agent_runner.machine.session import SessionState
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.workflows import types as t

# ------------------------------------------------------------------------------------ the start


def begin(s: RunState, input: t.RunInput) -> None:
    """A run's first execution (not one continued as new: `RunState.from_carry`)."""
    s.breakpoints = input.breakpoints
    s.session = SessionState() if input.session else None


def resolved(s: RunState, agent: t.AgentSpec) -> t.AgentSpec:
    """The agent the run answers with, its team frozen (by the resolve, or given by a parent)."""
    s.agent = agent
    return agent


def prompted(s: RunState, prompt: str) -> None:
    """A single run's prompt: the transcript's first message."""
    s.messages.append(t.UserMessage(content=prompt))


def live_tools(s: RunState, knows_how: bool) -> None:
    """A --live-tools fork runs its carried calls again first only on code that knows how (its
    patch); a history recorded before it ran none."""
    s.live_tools = s.live_tools and knows_how


# -------------------------------------------------------------------------- what status says


def set_phase(s: RunState, phase: t.Phase, step: str) -> t.Phase:
    """The run's phase and step; returns the phase before (`Status.writes`: whether the search
    attributes are due)."""
    before, s.phase = s.phase, phase
    s.last_step = step
    return before


def continuing(s: RunState) -> tuple[t.Phase, str]:
    """What status says as the run continues as new (set once its handlers have finished)."""
    return t.Phase.CONTINUING, f"turn {s.turn}: continuing as new to keep history small"


def say(s: RunState, step: str) -> None:
    """What the run does now, within its phase."""
    s.last_step = step


def decided(s: RunState, record: t.ApprovalRecord) -> None:
    say(s, f"turn {s.turn}: {record.tool} {record.call_id} {decision_words(record)}")


def resolved_doubt(s: RunState, record: t.CallResolution) -> None:
    say(s, f"turn {s.turn}: {record.tool} {record.call_id} in doubt: {resolution_words(record)}")


# The counters (turn, tokens, pending, cost) are written at most every COUNTERS_EVERY_SECONDS
# off the model replies' `received_at`, recorded in history: `workflow.now()` is not replay-stable
# here (a worker that takes a run over from its full history sees the previous task's time in its
# first activation, a replay the task's own).
COUNTERS_EVERY_SECONDS = 5.0
# What a call of the turn is doing, as status says it: its approval checked (by the agent's policy,
# in the hook activity), run, or waiting for an outside completion.
CallDoing = Literal["checking", "running", "outside"]
CALL_DOINGS: tuple[CallDoing, ...] = get_args(CallDoing)
FILTERED_PHASES: frozenset[t.Phase] = t.FINAL_PHASES | {
    t.Phase.AWAITING_APPROVAL, t.Phase.PAUSED, t.Phase.WAITING_FOR_MESSAGE, t.Phase.IN_DOUBT,
}  # fmt: skip


def person_waits(s: RunState) -> tuple[t.Phase, str] | None:
    """The phase the run's waits for people put it in, and their words: every call that waits for
    an approval, an answer or a resolution (siblings wait at once), and a sibling's outside
    completion meanwhile; None: no one is waited for."""
    doubts = ", ".join(f"{d.tool} ({d.call_id})" for d in s.doubts.pending.values())
    in_doubt = [f"in doubt, waiting for a person to resolve {doubts}"] if doubts else []
    outside = [outside_words(p) for p in s.outside.pending.values()]
    if s.approvals.pending or s.questions.pending:  # an `ask_person` question waits as an approval does
        calls = ", ".join(f"{p.tool} ({p.call_id})" for p in s.approvals.pending.values())
        waits = [f"waiting for approval of {calls}"] if calls else []
        waits += [waiting_words(q) for q in s.questions.pending.values()]
        return t.Phase.AWAITING_APPROVAL, f"turn {s.turn}: " + "; ".join(waits + in_doubt + outside)
    return (t.Phase.IN_DOUBT, f"turn {s.turn}: " + "; ".join(in_doubt + outside)) if in_doubt else None


class Status:
    """The turn's calls under way, and the bookkeeping of the run's search-attribute writes."""

    def __init__(self) -> None:
        self.calls_now: dict[str, tuple[str, CallDoing]] = {}  # call id -> (the call, in words; what it does)
        self.due: list[t.SearchWrite] = []  # written with the next write (the agent in charge, …)
        self.searched_turn = -1
        self.searched_at: datetime | None = None  # the reply clock when the counters were last written
        self.replied_at: datetime | None = None  # the last model reply's received_at

    # ------------------------------------------------------------------------------- calls

    def doing(self, s: RunState, call_id: str, doing: CallDoing | None, call: t.ToolCall | None) -> str | None:
        """Call `call_id` does `doing` now (None: nothing, it waits or ended); what status says
        then, while the run runs tools (a wait for a person has its own words: `waiting`)."""
        if doing is None:
            self.calls_now.pop(call_id, None)
        else:
            assert call is not None
            self.calls_now[call_id] = (describe_call(call, 60), doing)
        return self.calls_words(s.turn) if s.phase == t.Phase.RUNNING_TOOLS and self.calls_now else None

    def calls_words(self, turn: int) -> str:
        """`turn 2: checking whether send(label=a) needs approval; running lookup(q=b)`."""
        checking, running, outside = ([w for w, doing in self.calls_now.values() if doing == d] for d in CALL_DOINGS)
        parts = [f"running {', '.join(running)}"] if running else []
        parts += [f"waiting for outside completion of {what}" for what in outside]
        if checking:
            verb = "needs" if len(checking) == 1 else "need"
            parts.insert(0, f"checking whether {', '.join(checking)} {verb} approval")
        return f"turn {turn}: " + "; ".join(parts)

    def waiting(self, s: RunState) -> tuple[t.Phase, str] | None:
        """The phase the run's waits for people put it in, or the one it goes back to when the
        last has been answered; None: no change."""
        waits = person_waits(s)
        if waits is not None:
            return waits
        if s.phase == t.Phase.AWAITING_APPROVAL:
            step = self.calls_words(s.turn) if self.calls_now else f"turn {s.turn}: running approved tools"
            return t.Phase.RUNNING_TOOLS, step
        if s.phase == t.Phase.IN_DOUBT:
            return t.Phase.RUNNING_TOOLS, s.last_step  # what the person decided
        return None

    # ---------------------------------------------------------------------- search attributes

    def clocked(self, reply: t.ModelReply) -> None:
        """Notes when `reply` arrived (the reply clock), as its history records it; the clock
        starts with the first reply."""
        self.replied_at = reply.received_at or self.replied_at
        self.searched_at = self.searched_at or self.replied_at

    def writes(self, s: RunState, before: t.Phase) -> list[t.SearchWrite] | None:
        """What to write as the run's phase changes from `before` to `s.phase` (None: nothing):
        when a person would filter on the change (FILTERED_PHASES, in or out), and the counters
        at most once per turn, in one upsert with whatever else is due."""
        phase = s.phase
        counters: list[t.SearchWrite] = [
            t.SA_TURN.value_set(s.turn),
            t.SA_TOKENS.value_set(s.usage.total_tokens),
            t.SA_PENDING.value_set(len(s.approvals.pending) + len(s.questions.pending)),  # questions wait too
        ]
        if s.usage.cost_usd:  # priced calls only (runs recorded before prices upsert as they did)
            counters.append(t.SA_COST.value_set(s.usage.cost_usd))
        if s.doubts.pending or s.doubts.resolutions:  # runs with a call in doubt only
            counters.append(t.SA_IN_DOUBT.value_set(bool(s.doubts.pending)))
        if not (phase in FILTERED_PHASES or before in FILTERED_PHASES or self._counters_due(s.turn) or self.due):
            return None
        written = [*self.due, t.SA_PHASE.value_set(phase), *counters]
        self.due, self.searched_turn, self.searched_at = [], s.turn, self.replied_at
        return written

    def _counters_due(self, turn: int) -> bool:
        """A new turn's counters, unless they were written less than COUNTERS_EVERY_SECONDS
        ago by the reply clock."""
        if turn == self.searched_turn:
            return False
        if self.searched_turn < 0:
            return True  # never written
        if self.replied_at is None or self.searched_at is None:
            return False  # no reply yet: nothing new to count
        return (self.replied_at - self.searched_at).total_seconds() >= COUNTERS_EVERY_SECONDS


# -------------------------------------------------------------------------------------- the end


def failed(s: RunState, message: str, kind: str, now: datetime) -> t.Phase | None:
    """The run (or, in a session, the answer in progress) failed with `message`. When the run
    itself ends with it, it ends failed (`ended`), and the phase before is returned; None: a
    session's answer failed alone, and the session goes on."""
    s.error, s.error_type = message, kind
    if s.session is not None and s.session.current is not None:
        return None
    return ended(s, t.Phase.FAILED, message, now)


def cancelled(s: RunState, now: datetime) -> t.Phase:
    """The run was cancelled, while doing what status last said: it ends so (`ended`)."""
    return ended(s, t.Phase.CANCELLED, "cancelled: " + (s.last_step or "while starting"), now)


def ended(s: RunState, phase: t.Phase, message: str, now: datetime) -> t.Phase:
    """The run is over: nothing waits any more, and the story and status say how it ended. The
    phase before, for `Status.writes` (the search attributes a final phase writes)."""
    s.abandon()
    s.event(now, t.EventKind.FAILED if phase == t.Phase.FAILED else t.EventKind.CANCELLED, text=message)
    return set_phase(s, phase, message)


def answered(s: RunState, output: str) -> None:
    """A single run's final answer."""
    s.output = output


def result(s: RunState, run_id: str, output: str, output_object: object, **session: object) -> t.RunResult:
    """What the run returns: its answer (or, for a session, its last), its usage and handoffs."""
    return t.RunResult.model_validate(
        {
            "run_id": run_id,
            "agent": s.agent_now.name,
            "output": output,
            "output_object": output_object,
            "turns": s.turn,
            "usage": s.usage,
            "usage_by_agent": s.usage_by_agent,
            "usage_by_model": s.usage_by_model,
            "handoffs": s.handoffs,
            **session,
        }
    )
