"""Drawn whole runs through the machine with no server (tests/pure_run.py): every kind of call an
agent can make (a plain tool, one that needs approval, a `once` tool whose attempt may end without
a result, one completed from outside, a question to a person, an agent as a tool, a handoff, a
tool that does not exist, arguments that are not a JSON object), people who decide each wait one
way or another, breakpoints, a run paused while a tool runs, edits while it is paused (its text,
a pending call's arguments, a call dropped, the agent in charge), continue-as-new at
drawn turns, an optional budget that pauses, and then forks of the finished run at drawn turns,
some with `--live-tools`. Half of them run on workers that take the speed-ups the run offers (a
cheap call run with the model's reply, the next model call made by the lone tool's activity), and
some of the agent's models are down (each failed call sends the turn to its next model).

What must hold for any of them: the machine never raises (in a workflow that is a stuck run); a
run that waits for a person says in its status what it waits on, so there is always something to
act on; every call the model asked for is answered once, in order; a finished run leaves nothing
waiting; a model that failed for good is not called again by that agent in the run. A run may
fail only as runs are meant to (its turns spent, every model down)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from durable_agent_runner.machine.approvals import DecisionRefused
from durable_agent_runner.workflows import types as t
from tests.pure_run import LostAttempt, NobodyActs, PureRun, RunFailed, World, fork, reply

pytestmark = pytest.mark.pure

PRINTER = t.ToolSpec(name="print_doc", outside=t.OutsideSpec(timeout_seconds=3600))
CHARGE = t.ToolSpec(name="charge", once=True)
RESEARCHER = t.AgentSpec(name="researcher", version="v2", tools=[t.ToolSpec(name="get_weather")])
BILLING = t.AgentSpec(name="billing", version="v1", tools=[CHARGE, PRINTER])
OPS = t.AgentSpec(
    name="ops",
    version="v1",
    max_turns=8,
    tools=[
        t.ToolSpec(name="get_weather"),
        t.ToolSpec(name="lookup", local=True),  # cheap: run with the model's reply, where the workers may
        t.ToolSpec(name="send_report", approval="always"),
        CHARGE,
        PRINTER,
        t.ToolSpec(name="ask_person", ask=t.AskSpec()),
        t.ToolSpec(name="research", agent="researcher"),
    ],
    handoffs=[t.HandoffSpec(agent="billing", tool_name="transfer_to_billing")],
    team=[BILLING, RESEARCHER],
    model="primary",
    fallback_models=["backup", "spare"],  # a model down sends the turn to the next (drawn: `down`)
)
NAMES = [
    "get_weather",
    "lookup",
    "send_report",
    "charge",
    "print_doc",
    "ask_person",
    "research",
    "transfer_to_billing",
    "nope",
]
# How a drawn run may end without an answer: its turns spent, every model it may fall back to
# down, or (when people let waits run out) an approval's timeout that fails the run, or a call
# left in doubt past its limit.
RUNS_MAY_FAIL = {"MaxTurnsExceeded", "ModelHTTP503", "ApprovalTimedOut", "CallInDoubt"}
# ... and, for an agent with an output type and guardrails, as they say (class Checks).
CHECKS_MAY_FAIL = {"ModelBehaviorError", "InputGuardrailTripwireTriggered", "OutputGuardrailTripwireTriggered"}
LETS_IT_RUN_OUT = 5  # a person's pick that decides nothing: the wait's bound passes


class Checks:
    """The agent's output type and guardrails (its hooks), drawn: whether each output check finds
    the answer valid, in order (valid once the draws run out), whether the input guardrail trips,
    and whether each run of the output guardrail does."""

    def __init__(self, valid: list[bool], trips_input: bool, trips_output: list[bool]) -> None:
        self.valid, self.trips_input, self.trips_output = iter(valid), trips_input, iter(trips_output)
        self.checked: list[bool] = []  # what each output check said, in order

    def __call__(self, kind: t.HookKind, name: str) -> t.HookResult | None:
        if kind == "output_type":
            self.checked.append(next(self.valid, True))
            return t.HookResult(output={"ok": True}) if self.checked[-1] else t.HookResult(invalid="no field 'ok'")
        if kind == "input_guardrail":
            return t.HookResult(tripwire=self.trips_input, info={"why": "rude"})
        if kind == "output_guardrail":
            return t.HookResult(tripwire=next(self.trips_output, False), info={"why": "a secret"})
        return None

    def agent(self, agent: t.AgentSpec, retries: int) -> t.AgentSpec:
        checked = {"output_schema": {"type": "object"}, "output_name": "Report", "output_retries": retries}
        return agent.model_copy(update=checked | {"input_guardrails": ["polite"], "output_guardrails": ["no_secrets"]})

    def held(self, run: PureRun, failed: str | None) -> None:
        """What the checks mean for how `run` ended (`failed`: its error type, None: answered)."""
        if failed == "InputGuardrailTripwireTriggered":
            assert not run.world.ran and run.s.turn <= 1, "a tool ran before the input guardrail's verdict"
        elif failed == "ModelBehaviorError":
            assert self.checked[-1] is False and run.s.refusals.get("ops", 0) > run.s.agent_now.output_retries
        elif failed is None and run.s.agent_now.name == "ops":  # billing, handed to, has no output type
            assert self.checked and self.checked[-1], "an answer the output type did not pass"
            assert run.s.refusals.get("ops", 0) <= run.s.agent_now.output_retries


class Script:
    """The world of one drawn run: the model's replies, the tools, and a person whose choices
    (drawn) decide each wait; each call's arguments carry its number, so a tool knows which
    call it runs."""

    def __init__(
        self, turns: list[list[str]], lost: set[int], picks: list[int], garbled: set[int], pauses: set[int]
    ) -> None:
        self.count = itertools.count()
        self.lost, self.picks, self.garbled, self.pauses = lost, iter(picks), garbled, pauses
        self.replies = [self.reply(names) for names in turns]
        self.lost_once: set[int] = set()
        self.run: PureRun | None = None  # the top-level run: a person may pause it while a tool runs
        self.time_passes = False  # a wait nobody decides runs out (World.time_passes)
        self.speedups = False  # the workers take the speed-ups (World.speedups)
        self.check_pure = False  # each step is checked to leave its input as it was (World.check_pure)

    def reply(self, names: list[str]) -> t.ModelReply:
        """The model asks for these tools; a garbled call's arguments are not a JSON object."""
        r = reply(None, *((name, self.args()) for name in names))
        calls = []
        for c in r.message.tool_calls:
            n = int(json.loads(c.arguments)["n"])
            text = GARBLE[n % len(GARBLE)] if n in self.garbled else c.arguments
            calls.append(c.model_copy(update={"arguments": text}))
        return r.model_copy(update={"message": r.message.model_copy(update={"tool_calls": calls})})

    def args(self) -> dict[str, object]:
        n = next(self.count)
        return {"n": n, "city": "Oslo", "to": "ops@example.com", "cents": n, "doc": f"d{n}", "question": "ok?",
                "input": f"look up {n}"}  # fmt: skip

    def more(self, k: int) -> list[t.ModelReply]:
        """k more replies with a call each (a fork's or a child's)."""
        return [self.reply([NAMES[(i * 3) % len(NAMES)]]) for i in range(k)]

    def charge(self, args: dict[str, object]) -> str:
        n = int(str(args.get("n", -1)))  # a person may have edited the arguments
        if n in self.lost and n not in self.lost_once:
            self.lost_once.add(n)
            raise LostAttempt()
        return f"charged {n}"

    def weather(self, args: dict[str, object]) -> str:
        n = int(str(args.get("n", -1)))
        if n in self.pauses and self.run is not None and self.run.s.paused is None:
            try:  # a person asks for a pause while the tool runs: taken at the next safe point
                self.run.pause(by="ann")
            except DecisionRefused:
                pass  # already asked for, or the run is done
        return "sunny"

    def world(self, replies: list[t.ModelReply], answer: str) -> World:
        tools = {
            "get_weather": self.weather,
            "lookup": lambda a: f"found {a.get('n')}",
            "send_report": lambda a: "sent",
            "charge": self.charge,
            "print_doc": lambda a: "queued",
        }
        return World(
            replies=replies,
            tools=tools,
            people=[self.person] * 60,
            then_answer=answer,
            time_passes=self.time_passes,
            speedups=self.speedups,
            check_pure=self.check_pure,
        )

    def person(self, run: PureRun) -> None:
        """Acts on what status says the run waits for: there must be something."""
        status, pick = run.status(), next(self.picks, 0)
        if pick == LETS_IT_RUN_OUT and status.paused is None and run.world.time_passes:
            event("a wait ran out")
            return  # nobody decides: a bounded wait runs out (a pause has no bound: someone resumes)
        event(
            "a wait: "
            + ", ".join(
                k for k in ("pending_approvals", "in_doubt", "questions", "outside", "paused") if getattr(status, k)
            )
        )
        kinds = [k for k in ("pending_approvals", "in_doubt", "questions", "outside") if getattr(status, k)]
        if kinds:  # sibling calls may wait at once: the pick says which is decided first
            kind = kinds[pick % len(kinds)]
            waiting = getattr(status, kind)
            call_id = waiting[pick % len(waiting)].call_id
            if kind == "pending_approvals" and pick % 3 == 2:
                run.reject("no", call_id=call_id)
            elif kind == "pending_approvals":
                run.approve(call_id=call_id, arguments={"to": "team@example.com"} if pick % 3 == 1 else None)
            elif kind == "in_doubt":
                how = ("rerun", "result", "fail")[pick % 3]
                given = {"result": '"given"'} if how == "result" else {"reason": "no"} if how == "fail" else {}
                run.resolve(how, call_id=call_id, **given)  # type: ignore[arg-type]
            elif kind == "questions":
                run.answer(text=f"answer {pick}", call_id=call_id)
            else:
                run.complete(json.dumps({"pages": pick}), call_id=call_id)
        elif status.paused is not None:
            edit = EDITS[pick % len(EDITS)](run)
            if edit is not None:
                try:  # a person's edit while paused: taken, or refused with nothing changed
                    run.edit(edit)
                    event(f"edited: {edit.op}")
                except DecisionRefused:
                    event(f"edit refused: {edit.op}")
            try:
                run.resume(add_tokens=50_000) if status.paused.reason == "budget" else run.resume()
            except DecisionRefused:  # a child's raise past its parent's grant: nobody else can act
                pass
        else:
            raise AssertionError(f"the run waits for a person, and its status names nothing: {status.last_step}")


def _pending(run: PureRun) -> str | None:
    return next((c.call_id for c in run.s.pending_calls), None)


# What a person may edit at a pause (None: nothing): each may be refused, which changes nothing.
EDITS = [
    lambda run: None,
    lambda run: t.Edit(op="text", index=0, text="go, but in Paris", by="ann"),
    lambda run: t.Edit(op="insert", index=len(run.s.messages), role="user", text="and be brief", by="ann"),
    lambda run: t.Edit(op="drop_call", call_id=_pending(run), by="ann") if _pending(run) else None,
    lambda run: (
        t.Edit(op="args", call_id=_pending(run), arguments={"city": "Rome"}, by="ann") if _pending(run) else None
    ),
    lambda run: t.Edit(op="agent", agent="billing", by="ann"),
]
# A model's arguments that are not a JSON object: the model is told, nothing runs.
GARBLE = ["not json", "[1, 2]", '{"n": ', '""', '{"n": 1e999}', "null"]


def checked(run: PureRun, checks: Checks | None = None) -> str | None:
    """Runs `run` to its end and checks what must hold; its answer, or None if it failed as allowed."""
    try:
        result = run.run()
    except RunFailed as failed:
        event(f"failed: {failed.kind}")
        assert failed.kind in RUNS_MAY_FAIL | (CHECKS_MAY_FAIL if checks else set()), failed
        assert run.status().status == "failed"
        if checks is not None:
            checks.held(run, failed.kind)
        return None
    except NobodyActs:  # only a paused child a person could not raise: the run waits, as it should
        paused = [c for c in _all(run) if c.s.paused is not None]
        assert paused and all(c.s.paused is not None and c.s.paused.reason == "budget" for c in paused)
        return None
    event(f"answered after {run.s.turn} turns, {len(list(_all(run))) - 1} children, {run.executions} executions")
    if checks is not None:
        checks.held(run, None)
        assert run.s.agent_now.name != "ops" or result.output_object == {"ok": True}
    if run.s.switches:
        event(f"fell back to {run.s.switches[-1].to_model}")
    if run.world.speedups:
        event(f"speed-ups taken: with the reply {bool(run.world.with_reply)}, made ahead {bool(run.world.made_ahead)}")
    for each in _all(run):
        status = each.status()
        assert not (status.pending_approvals or status.in_doubt or status.questions or status.outside)
        if each is not run and status.status == "failed":  # a child that failed (its share spent): told to the model
            event(f"a child failed: {status.error_type}")
            assert status.error_type in RUNS_MAY_FAIL | {"TokenBudgetExceeded"}, status.error
            continue
        asked = [c.call_id for m in each.s.messages if isinstance(m, t.AssistantMessage) for c in m.tool_calls]
        answered = [m.call_id for m in each.s.messages if isinstance(m, t.ToolMessage)]
        assert answered == asked, f"{each.run_id}: calls answered {answered}, asked {asked}"
        assert status.status == "completed"
    return result.output


def _all(run: PureRun) -> Iterator[PureRun]:
    yield run
    for child in run.children:
        yield from _all(child)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    turns=st.lists(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3), min_size=1, max_size=8),
    lost=st.sets(st.integers(0, 15), max_size=4),
    picks=st.lists(st.integers(0, 5), max_size=30),
    continue_at=st.sets(st.integers(1, 6), max_size=2),
    budget=st.sampled_from([None, 800, 3000]),
    forks=st.lists(st.tuples(st.integers(1, 6), st.booleans()), max_size=2),
    garbled=st.sets(st.integers(0, 15), max_size=3),
    pauses=st.sets(st.integers(0, 15), max_size=2),
    patience=st.sampled_from([None, "reject", "fail"]),
    speedups=st.booleans(),
    pure=st.sampled_from([True, False, False, False]),  # the check is slow: one run in four
    down=st.sets(st.sampled_from(["primary", "backup", "spare"]), max_size=3),
    handoff_filter=st.sampled_from([None, "remove_tools", "last_user_message"]),
    checks=st.one_of(
        st.none(),
        st.tuples(
            st.integers(0, 2),
            st.lists(st.booleans(), max_size=4),
            st.sampled_from([False, False, False, True]),  # a tripped input guardrail ends the run at once
            st.lists(st.booleans(), max_size=2),
        ),
    ),
    breakpoints=st.one_of(
        st.none(),
        st.builds(t.Breakpoints, at_turns=st.lists(st.integers(1, 6), max_size=2), before_tools=st.booleans()),
        st.builds(t.Breakpoints, tools=st.lists(st.sampled_from(NAMES), min_size=1, max_size=2)),
    ),
)
def test_any_drawn_run_and_its_forks_end_as_runs_should_with_every_call_answered_once(
    turns: list[list[str]],
    lost: set[int],
    picks: list[int],
    continue_at: set[int],
    budget: int | None,
    forks: list[tuple[int, bool]],
    garbled: set[int],
    pauses: set[int],
    patience: str | None,
    speedups: bool,
    pure: bool,
    down: set[str | None],
    handoff_filter: str | None,
    checks: tuple[int, list[bool], bool, list[bool]] | None,
    breakpoints: t.Breakpoints | None,
):
    """`patience`: an approval waits at most 10 minutes, then is rejected or fails the run; people
    may then let a wait run out (a question's, an outside call's, a doubt's, an approval's)."""
    script = Script(turns, lost, picks, garbled, pauses)
    agent = OPS if budget is None else OPS.model_copy(update={"token_budget": budget, "on_budget": "pause"})
    if patience is not None:
        agent = agent.model_copy(update={"approval_timeout_seconds": 600.0, "approval_timeout_outcome": patience})
    script.time_passes, script.speedups, script.check_pure = patience is not None, speedups, pure
    world = script.world(script.replies, "done")
    world.down = down
    handoffs = [t.HandoffSpec(agent="billing", tool_name="transfer_to_billing", input_filter=handoff_filter)]
    agent = agent.model_copy(update={"handoffs": handoffs})  # a built-in filter: what billing sees
    drawn = None
    if checks is not None:  # an output type (each check drawn valid or not) and guardrails that may trip
        retries, valid, trips_input, trips_output = checks
        drawn = world.hook_fn = Checks(valid, trips_input, trips_output)
        agent = drawn.agent(agent, retries)
    run = script.run = PureRun(agent, world, t.RunInput(prompt="go", agent="ops", breakpoints=breakpoints))
    run.continue_at = continue_at
    if checked(run, drawn) is None:
        return
    for at, live in forks:
        if at > run.s.turn:
            continue
        try:
            forked = script.run = fork(run, at, script.world(script.more(2), "forked"), live_tools=live)
        except ValueError as refused:  # an edit or a handoff filter rewrote the transcript before `at`
            rewritten = run.s.edits or (handoff_filter and run.s.handoffs)
            assert "cannot fork before model call" in str(refused) and rewritten, refused
            event("fork refused: rewritten before it")
            continue
        event(f"fork, live tools: {live}")
        checked(forked)


# --------------------------------------------------------------------------------- sessions

CHATTY = OPS.model_copy(update={"max_turns": 4, "idle_timeout_seconds": 600.0})


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    plans=st.lists(st.lists(st.sampled_from(NAMES[:6]), max_size=2), min_size=1, max_size=6),
    messages=st.integers(1, 6),
    mid_turn=st.sets(st.integers(0, 12), max_size=3),
    steer=st.booleans(),
    continue_at=st.sets(st.integers(1, 12), max_size=3),
    memory=st.sampled_from([None, "trim", "summarize"]),
    picks=st.lists(st.integers(0, 5), max_size=30),
    patience=st.sampled_from([None, "reject", "fail"]),
    forks=st.lists(st.tuples(st.integers(1, 12), st.booleans()), max_size=2),
    speedups=st.booleans(),
    pure=st.sampled_from([True, False, False, False]),
    down=st.sets(st.sampled_from(["primary", "backup", "spare"]), max_size=3),
)
@example(  # found by a drawn session: an answer stopped at its turn limit with its calls unanswered (1.4.7)
    plans=[["get_weather", "get_weather"]], messages=2, mid_turn={0, 2, 4}, steer=True, continue_at=set(),
    memory=None, picks=[], patience=None, forks=[], speedups=False, pure=True, down=set(),
)  # fmt: skip
def test_any_drawn_session_answers_every_message_it_accepted_once_and_ends_with_nothing_waiting(
    plans: list[list[str]],
    messages: int,
    mid_turn: set[int],
    steer: bool,
    continue_at: set[int],
    memory: str | None,
    picks: list[int],
    patience: str | None,
    forks: list[tuple[int, bool]],
    speedups: bool,
    pure: bool,
    down: set[str | None],
):
    """A session: `messages` sent one after another by a person while it waits, more sent while a
    tool runs (`mid_turn`: queued, or steering the answer in progress), continue-as-new and
    compaction at drawn points. The model asks for the tools of plan k (cycling) on its first call
    for a message, then answers."""
    script = Script([], set(), picks, set(), set())
    script.time_passes = patience is not None  # people may let a wait run out: that answer fails alone
    script.speedups, script.check_pure = speedups, pure
    sent = itertools.count(1)

    def model(transcript: list[t.Message]) -> t.ModelReply:
        since = next(i for i in range(len(transcript) - 1, -1, -1) if isinstance(transcript[i], t.UserMessage))
        asked = sum(isinstance(m, t.AssistantMessage) for m in transcript[since:])
        plan = plans[since % len(plans)]
        return script.reply(plan) if asked == 0 and plan else reply(f"answer {since}")

    world = script.world([], "unused")
    world.model, world.down = model, down  # every model down: each answer fails, and the session goes on

    def weather(args: dict[str, object]) -> str:
        n = int(str(args.get("n", -1)))
        if n in mid_turn and session.s.session is not None and not session.s.done:
            session.send(f"mid-turn {n}")
            event("a message sent while a tool ran")
        return "sunny"

    world.tools["get_weather"] = weather

    def person(run: PureRun) -> None:
        if run.s.phase == t.Phase.WAITING_FOR_MESSAGE:  # the session waits for its next message
            k = next(sent)
            run.send(f"message {k}") if k < messages else run.end()
        else:
            script.person(run)

    world.people = [person] * 80
    agent = CHATTY.model_copy(update={"mid_turn": "steer" if steer else "queue"})
    if patience is not None:
        agent = agent.model_copy(update={"approval_timeout_seconds": 600.0, "approval_timeout_outcome": patience})
    if memory is not None:  # a small budget: compacted every few exchanges
        policy = t.MemoryPolicy(budget_bytes=1_000, strategy=memory, keep_exchanges=1)  # type: ignore[arg-type]
        agent = agent.model_copy(update={"memory": policy})
    session = PureRun(agent, world, t.RunInput(prompt="message 0", agent="ops", session=True))
    session.continue_at = continue_at
    session.converse()

    status = session.status()
    assert status.session is not None and status.session.state == "ended"
    assert status.session.answered == status.session.messages  # every accepted message answered
    assert not (status.pending_approvals or status.in_doubt or status.questions or status.outside)
    asked = [c.call_id for m in session.s.messages if isinstance(m, t.AssistantMessage) for c in m.tool_calls]
    answered = [m.call_id for m in session.s.messages if isinstance(m, t.ToolMessage)]
    assert answered == asked
    event(
        f"{status.session.messages} messages, {session.executions} executions, {status.session.compactions} compactions"
    )
    for at, live in forks:  # a fork of one of its answers, before model call `at`: a run of its own
        try:
            forked = fork(session, at, script.world([], "forked answer"), live_tools=live)
        except ValueError as refused:  # compaction or a rewrite dropped that point, or it is past the end
            assert "cannot fork before model call" in str(refused), refused
            event("session fork refused")
            continue
        event(f"session fork, live tools: {live}")
        checked(forked)
