"""A run's state, and the read-only views of it that queries serve. Pure: no Temporal calls, so
the views are tested without a server; the workflow passes in ids and the time.

Everything here is rebuilt from history on replay. `to_carry` / `from_carry` move it across
continue-as-new, so a run id keeps its transcript, approvals, token ledger and event numbering.
"""

from __future__ import annotations

import json
from datetime import datetime

from durable_agent_runner.machine import doubts, outside, questions, texts
from durable_agent_runner.machine.approvals import Approvals
from durable_agent_runner.machine.calls import describe_call
from durable_agent_runner.machine.edits import Editable
from durable_agent_runner.machine.session import SessionState
from durable_agent_runner.machine.texts import EVENTS_PAGE_BYTES, event_text, excerpt, spans, turn_words
from durable_agent_runner.workflows import types as t


class RunState:
    def __init__(self) -> None:
        self.agent: t.AgentSpec | None = None  # the run's first agent, holding the frozen team
        self.current: str | None = None  # the agent in charge now (None: the first)
        self.handoffs: list[t.HandoffRecord] = []
        self.refusals: dict[str, int] = {}  # refused final outputs, per agent
        self.messages: list[t.Message] = []
        self.turn = 0
        self.usage = t.Usage()
        self.usage_by_agent: dict[str, t.Usage] = {}
        self.usage_by_model: dict[str, t.Usage] = {}  # the run's own model calls, by model string
        self.switches: list[t.ModelSwitch] = []  # durable fallbacks (machine/fallback.py)
        self.phase = t.Phase.STARTING
        self.last_step = "starting"
        self.output: str | None = None
        self.error: str | None = None
        self.error_type: str | None = None
        self.approvals = Approvals()
        self.doubts = doubts.Doubts()  # calls whose one attempt ended without a result
        self.questions = questions.Questions()  # `ask_person` calls waiting for an answer, and answers
        self.outside = outside.Outside()  # calls waiting for an outside completion, and completions
        self.events: list[t.KnownRunEvent] = []
        self.first_event = 0  # seq of events[0]: earlier ones live in previous executions
        self.previous_run_id: str | None = None
        self.executions = 1
        self._digest = ("", 0)  # (hash of messages[:n], n), extended as messages are appended
        self._call_ids: set[str] = set()  # every tool-call id this run has used, carried ones too
        self.session: SessionState | None = None  # set for a session run
        self.last_input_tokens = 0  # what the last model call read: a session's memory budget
        # Breakpoints and edits (machine/edits.py)
        self.breakpoints: t.Breakpoints | None = None
        self.pause_request: t.PauseRequest | None = None  # `client.py pause`: at the next safe point
        self.paused: t.PauseInfo | None = None
        self.resumed_by: str | None = None
        self.before_pause = ""  # the run's step when a pause was asked for (said again if it is withdrawn)
        self.edits: list[t.EditRecord] = []
        self.dropped_calls: dict[str, str] = {}
        self.marks: dict[int, int] = {}  # turn → transcript length before that model call
        self.forked_from: t.ForkLink | None = None
        self.fork_base = 0  # a fork of a session's answer: the model calls before that answer
        self.live_tools = False  # a fork that runs its carried calls again first (machine/rerun.py)
        self.turns_here = 0  # model calls in this execution (not carried): when to continue as new

    @property
    def agent_now(self) -> t.AgentSpec:
        """The agent in charge: the first one, or the frozen member the run was handed to."""
        assert self.agent is not None
        member = self.agent.member(self.current or self.agent.name)
        assert member is not None, f"agent {self.current} is not in this run's frozen team"
        return member

    def answer_base(self) -> int:
        """The model calls made before the answer in progress: a session's earlier messages, or
        those of the session a fork was taken from. `max_turns` counts the calls after them."""
        session = self.session
        if session is not None:
            return session.current.first_turn - 1 if session.current is not None else self.turn
        return self.fork_base

    def pause_reason(self) -> str | None:
        """Why the run pauses at its next safe point, if a person asked it to."""
        asked = self.pause_request
        return None if asked is None else f"paused by {asked.by}" + (f": {asked.reason}" if asked.reason else "")

    def replace_messages(self, messages: list[t.Message]) -> None:
        """The one way to rewrite the transcript besides appending (a handoff's input filter, a
        compaction, an edit). Its digest is rebuilt; a turn mark past the first changed message
        no longer holds (a fork can't start there); call ids stay claimed, never reused."""
        same = 0  # the marks of calls that read only the unchanged head still hold
        for before, after in zip(self.messages, messages, strict=False):
            if before != after:
                break
            same += 1
        self.messages = list(messages)
        self._digest = ("", 0)
        self.marks = {turn: n for turn, n in self.marks.items() if n <= same}

    def mark(self) -> None:
        """Model call `turn` is about to read the transcript as it is: a fork may start here."""
        self.marks[self.turn] = len(self.messages)

    @property
    def pending_calls(self) -> list[t.ToolCall]:
        """Paused before tools: the calls the last reply asked for, about to run."""
        last = self.messages[-1] if self.messages else None
        if self.paused is None or self.paused.where != "before_tools" or not isinstance(last, t.AssistantMessage):
            return []
        return last.tool_calls

    def editable(self) -> Editable:
        """A deep copy of what an edit may change (the validator tries edits on it)."""
        assert self.agent is not None
        messages = [m.model_copy(deep=True) for m in self.messages]
        last = messages[-1] if messages and self.pending_calls else None
        pending = last.tool_calls if isinstance(last, t.AssistantMessage) else []
        return Editable(messages, self.agent, self.agent_now.name, pending, dict(self.dropped_calls))

    def take_edit(self, edited: Editable) -> None:
        self.replace_messages(edited.messages)
        self.dropped_calls = edited.dropped
        self.current = None if edited.current == (self.agent.name if self.agent else None) else edited.current

    def digest(self) -> str:
        value, n = self._digest
        for message in self.messages[n:]:
            value = t.chain_digest(value, message)
        self._digest = (value, len(self.messages))
        return value

    # ------------------------------------------------------------------------------ updates

    def claim_call_ids(self, message: t.AssistantMessage) -> None:
        """Make each call id of a new reply unique across the run, so an approval or an
        idempotency key can never be bound to an earlier call that happened to share its id."""
        if not self._call_ids:
            replies = [m for m in self.messages if isinstance(m, t.AssistantMessage)]
            self._call_ids = {c.call_id for m in replies for c in m.tool_calls}
        for i, call in enumerate(message.tool_calls):
            if call.call_id in self._call_ids:
                call.call_id = f"call_{self.turn}_{i}"
                while call.call_id in self._call_ids:
                    call.call_id += "_"
            self._call_ids.add(call.call_id)

    def add_usage(self, agent: str, usage: t.Usage, model: str | None = None) -> None:
        """Counts `usage` for the run and `agent`, and for `model` when one of the run's own
        model calls made it (a child's usage has its own run's books)."""
        self.usage = self.usage + usage
        self.usage_by_agent[agent] = self.usage_by_agent.get(agent, t.Usage()) + usage
        if model:
            self.usage_by_model[model] = self.usage_by_model.get(model, t.Usage()) + usage

    def event(self, now: datetime, kind: t.EventKind, **fields: object) -> None:
        seq = self.first_event + len(self.events)
        for key in ("text", "detail"):
            if isinstance(fields.get(key), str):
                fields[key] = event_text(str(fields[key]))
        self.events.append(
            t.RUN_EVENT.validate_python({"seq": seq, "at": now, "kind": kind, "turn": self.turn, **fields})
        )

    @property
    def done(self) -> bool:
        return self.phase in t.FINAL_PHASES

    # ----------------------------------------------------------------------- continue-as-new

    def to_carry(self, run_id: str) -> t.Carry:
        assert self.agent is not None
        return t.Carry(
            agent=self.agent,
            current=self.current,
            handoffs=self.handoffs,
            refusals=self.refusals,
            messages=self.messages,
            turn=self.turn,
            usage=self.usage,
            usage_by_agent=self.usage_by_agent,
            usage_by_model=self.usage_by_model,
            switches=self.switches,
            decisions=self.approvals.decisions,
            answers=self.questions.answers,
            completions=self.outside.records,
            next_event=self.first_event + len(self.events),
            previous_run_id=run_id,
            executions=self.executions + 1,
            session=self.session.to_carry(run_id) if self.session is not None else None,
            breakpoints=self.breakpoints,
            edits=self.edits,
            marks=self.marks,
            forked_from=self.forked_from,
            dropped_calls=self.dropped_calls,
            answer_base=self.fork_base,
        )

    def from_carry(self, carry: t.Carry) -> None:
        self.agent = carry.agent
        self.current = carry.current
        self.handoffs = list(carry.handoffs)
        self.refusals = dict(carry.refusals)
        self.messages = list(carry.messages)
        self.turn = carry.turn
        self.usage = carry.usage
        self.usage_by_agent = dict(carry.usage_by_agent)
        self.usage_by_model = dict(carry.usage_by_model)
        self.switches = list(carry.switches)
        self.approvals.decisions = list(carry.decisions)
        self.approvals.always = {d.tool: d for d in carry.decisions if d.always}
        self.questions.answers = list(carry.answers)
        self.outside.records = list(carry.completions)
        self.first_event = carry.next_event
        self.previous_run_id = carry.previous_run_id
        self.executions = carry.executions
        if carry.session is not None:
            self.session = SessionState(carry.session)
        self.breakpoints = carry.breakpoints
        self.edits = list(carry.edits)
        self.marks = dict(carry.marks)
        self.forked_from = carry.forked_from
        self.dropped_calls = dict(carry.dropped_calls)
        self.fork_base = carry.answer_base
        self.live_tools = carry.live_tools

    # ------------------------------------------------------------------------------- views

    def step_words(self) -> str:
        """What the run does now, as status and the Web UI say it: and, while a pause asked for
        is not yet reached, that request, though a call's progress has been said since."""
        asked = self.pause_request
        if asked is None or self.paused is not None:
            return self.last_step
        words = texts.pause_requested(asked.by)
        return self.last_step if self.last_step.endswith(words) else f"{self.last_step}; {words}"

    def details(self) -> str:
        """The run's "current details" in the Web UI (markdown): where it is, and, while calls
        wait, each call's arguments and the signal that decides it."""
        turn = turn_words(self.turn, self.agent.max_turns if self.agent else None, self.session is not None)
        lines = [f"**{self.phase}** · turn {turn} · {self.usage.total_tokens} tokens", "", self.step_words()]
        prompt = next((m.content for m in self.messages if isinstance(m, t.UserMessage)), "")
        if self.session is not None:
            lines += ["", self.session.details()]
        elif prompt:
            lines += ["", f"**prompt:** {excerpt(prompt, 200)}"]
        if self.executions > 1:
            lines += ["", f"continued as new: execution {self.executions} of this run"]
        if self.handoffs:
            path = " → ".join([self.handoffs[0].from_agent, *(h.to_agent for h in self.handoffs)])
            lines += ["", f"**agent:** {self.agent_now.name} (handed off: {path})"]
        if self.paused is not None:
            point = "model call" if self.paused.where == "before_model" else "the tool calls of turn"
            lines += [
                "",
                f"**Paused** before {point} {self.paused.turn}: {self.paused.why}",
                "Look: `python client.py inspect RUN_ID` · change: `python client.py edit RUN_ID …` · go on: "
                f'`python client.py resume RUN_ID`, or Send an Update → `{t.RESUME_UPDATE}` with `{{"by": "you"}}`',
            ]
            for call in self.pending_calls:
                by = self.dropped_calls.get(call.call_id)
                dropped = f" (dropped by {by})" if by else ""
                lines.append(f"- pending `{call.call_id}` {describe_call(call)}{dropped}")
        if self.edits:
            lines += ["", f"**edits:** {len(self.edits)}; last: {excerpt(self.edits[-1].summary, 200)}"]
        if self.forked_from is not None:
            live = ", its earlier calls run again" if self.forked_from.live_tools else ""
            lines += ["", f"**fork of** {self.forked_from.run_id} before model call {self.forked_from.turn}{live}"]
        for p in self.approvals.pending.values():
            body = json.dumps({"call_id": p.call_id, "approve": True, "by": "your-name"})
            lines += [
                "",
                f"**Waiting for approval:** `{p.tool}` ({p.call_id}), since {p.since:%Y-%m-%d %H:%M:%S} UTC",
                f"```json\n{json.dumps(p.arguments, ensure_ascii=False, indent=2)}\n```",
                f"Approve: Send a Signal → `{t.APPROVAL_SIGNAL}` with `{body}`"
                ' (reject: `"approve": false, "reason": "…"`), or `python client.py approve RUN_ID CALL_ID`',
            ]
        waits = doubts.details(self.doubts.pending) + questions.details(self.questions.pending)
        return "\n".join(lines + waits + outside.details(self.outside.pending))

    def abandon(self) -> None:  # the run (or a session's answer) ended: no call waits for anyone any more
        for book in (self.approvals, self.doubts, self.questions, self.outside):
            book.abandon()

    def status(self, run_id: str) -> t.RunStatus:
        # The final phases and awaiting_approval show as they are, two waits by a shorter name.
        named = {t.Phase.WAITING_FOR_MESSAGE: "waiting", t.Phase.PAUSED: "paused"}
        shown = self.phase in t.FINAL_PHASES or self.phase == t.Phase.AWAITING_APPROVAL
        status: str = self.phase.value if shown else named.get(self.phase, "running")
        session = None
        if self.session is not None:
            agent = self.agent
            idle = agent.idle_timeout_seconds if agent else 0.0
            session = self.session.status(idle, self.done, agent.mid_turn if agent else "queue")
        return t.RunStatus(
            run_id=run_id,
            agent=self.agent_now.name if self.agent else None,
            status=status,
            phase=self.phase,
            turn=self.turn,
            max_turns=self.agent.max_turns if self.agent else None,
            usage=self.usage,
            last_step=self.step_words(),
            output=event_text(self.output) if self.output is not None else None,
            error=self.error,
            error_type=self.error_type,
            handoffs=self.handoffs,
            pending_approvals=list(self.approvals.pending.values()),
            decisions=self.approvals.decisions,
            ignored_signals=self.approvals.ignored,
            usage_by_agent=self.usage_by_agent,
            usage_by_model=self.usage_by_model,
            model=self.agent_now.model if self.agent is not None else None,
            switches=self.switches,
            session=session,
            paused=self.paused,
            forked_from=self.forked_from,
            in_doubt=list(self.doubts.pending.values()),
            resolutions=self.doubts.resolutions,
            questions=list(self.questions.pending.values()),
            answers=self.questions.answers,
            outside=list(self.outside.pending.values()),
            completions=self.outside.records,
        )

    def inspection(self, run_id: str) -> t.Inspection:
        dropped = self.dropped_calls
        pending = [
            t.PendingCall(
                call_id=c.call_id,
                tool=c.name,
                arguments=c.args if c.args is not None else c.arguments,
                dropped_by=dropped.get(c.call_id),
            )
            for c in self.pending_calls
        ]
        return t.Inspection(
            run_id=run_id,
            agent=self.agent_now.name if self.agent else None,
            agents=[self.agent.name, *(a.name for a in self.agent.team)] if self.agent else [],
            turn=self.turn,
            phase=self.phase,
            paused=self.paused,
            items=[t.Item(index=i, message=m) for i, m in enumerate(self.messages)],
            pending_calls=pending,
            edits=self.edits,
            breakpoints=self.breakpoints,
        )

    def fork_point(self, turn: int) -> t.ForkPoint:
        """The state just before model call `turn`; ValueError if it can no longer be rebuilt."""
        assert self.agent is not None
        if turn == self.turn + 1 and not self.done:
            upto = len(self.messages)  # the call this run is about to make (paused, or between turns)
        elif turn in self.marks:
            upto = self.marks[turn]
        else:
            span = f"turns {spans(sorted(self.marks))}" if self.marks else "no earlier turn"
            later = "" if self.done else f" or turn {self.turn + 1}"
            raise ValueError(
                f"cannot fork before model call {turn}: this run made {self.turn} model call(s), and its transcript "
                f"as it was then is kept for {span}{later} (a handoff filter, compaction or edit rewrites it)"
            )
        messages = self.messages[:upto]
        last = messages[-1] if messages else None
        if isinstance(last, t.AssistantMessage) and last.tool_calls:
            raise ValueError(
                f"cannot fork before model call {turn}: the calls of model call {turn - 1} have no results yet "
                f"(this run made {self.turn} model call(s); fork at {turn - 1} or earlier)"
            )
        base = 0
        if self.session is not None:  # the answer the fork continues: its turns count from its start
            base = next((ex.first_turn - 1 for ex in reversed(self.session.exchanges) if ex.first_turn <= turn), 0)
        handoffs = [h for h in self.handoffs if h.turn < turn]
        return t.ForkPoint(
            agent=self.agent,
            current=handoffs[-1].to_agent if handoffs else None,
            messages=messages,
            turn=turn - 1,
            handoffs=handoffs,
            answer_base=base,
        )

    def events_page(self, query: t.EventsQuery) -> t.EventsPage:
        start = max(query.since - self.first_event, 0)
        page: list[t.AnyRunEvent] = []
        size = 0
        for ev in self.events[start : start + query.limit]:
            size += len(ev.text) + len(ev.detail) + 200
            if page and size > EVENTS_PAGE_BYTES:
                break
            page.append(ev)
        nxt = page[-1].seq + 1 if page else max(query.since, self.first_event)
        more = start + len(page) < len(self.events)
        return t.EventsPage(
            events=page,
            next=nxt,
            first=self.first_event,
            previous_run_id=self.previous_run_id,
            done=self.done and not more,
        )

    def model_context(self, query: t.ModelContextQuery) -> t.ModelContext:
        """The agent and messages[start:upto] for the model activity, paged by size."""
        if self.agent is None or query.upto > len(self.messages):
            raise ValueError(f"transcript has {len(self.messages)} messages, asked for {query.upto}")
        page: list[t.Message] = []
        size = 0
        index = query.start
        while index < query.upto:
            message = self.messages[index]
            size += len(message.model_dump_json())
            if page and size > query.max_bytes:
                break
            page.append(message)
            index += 1
        return t.ModelContext(agent=self.agent_now, messages=page, next_start=index if index < query.upto else None)
