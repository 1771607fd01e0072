"""The speed-ups change what a turn costs, never what the run does (issue 32, item 2: they stay as
options of the one path). With no server (tests/pure_run.py), one scripted world runs twice: on
workers that take the speed-ups the run offers (a cheap call run with the model's reply; the next
model call made by the lone routed tool's activity) and on workers that do not. The model's reply
is a function of the transcript it is sent, so the two runs can be compared: the same answer, the
same transcript, the model sent the same transcripts, the same tools run with the same arguments.
What may differ is only what a dropped reply made ahead cost (a person paused the run while its
tool ran), and a cheap, idempotent call run again with the next reply."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from durable_agent_runner.workflows import types as t
from tests.pure_run import LostAttempt, PureRun, RunFailed, World

pytestmark = pytest.mark.pure

AGENT = t.AgentSpec(
    name="ops",
    version="v1",
    model="primary",
    fallback_models=["backup"],  # a model down (drawn) sends the turn to the next; the call ahead fails alone
    max_turns=8,
    tools=[
        t.ToolSpec(name="lookup", local=True),  # cheap: may run with the model's reply
        t.ToolSpec(name="get_weather"),  # routed: its activity may make the next model call
        t.ToolSpec(name="send_report", approval="always"),
        t.ToolSpec(name="charge", once=True),
    ],
)
CHEAP = "lookup"


class Model:
    """Replies to the transcript: model call k (counted by the replies in it) asks for the tools
    of `turns[k]`, with fixed ids and arguments; after them it answers with every result it read."""

    def __init__(self, turns: list[list[str]]) -> None:
        self.turns = turns

    def __call__(self, messages: list[t.Message]) -> t.ModelReply:
        k = sum(isinstance(m, t.AssistantMessage) for m in messages)
        usage = t.Usage(input_tokens=10 * len(messages), output_tokens=5, total_tokens=10 * len(messages) + 5)
        if k < len(self.turns):
            calls = [
                t.ToolCall(call_id=f"call_{k}_{i}", name=name, arguments=json.dumps(self.args(k, i)))
                for i, name in enumerate(self.turns[k])
            ]
            return t.ModelReply(message=t.AssistantMessage(tool_calls=calls), usage=usage)
        read = "; ".join(m.content for m in messages if isinstance(m, t.ToolMessage))
        return t.ModelReply(message=t.AssistantMessage(content=f"I read: {read}"), usage=usage)

    @staticmethod
    def args(k: int, i: int) -> dict[str, object]:
        return {"n": 10 * k + i, "city": "Oslo", "to": "ops@example.com", "cents": k}


class Script:
    """The tools and the people of one world; `pauses`: the calls of get_weather (by `n`) during
    which a person asks the run to pause; `lost`: the charge calls whose first attempt is lost."""

    def __init__(
        self,
        turns: list[list[str]],
        picks: list[int] | None = None,
        pauses: set[int] | None = None,
        lost: set[int] | None = None,
        agent: t.AgentSpec = AGENT,
        breakpoints: t.Breakpoints | None = None,
        continue_at: set[int] | None = None,
        down: set[str | None] | None = None,
    ) -> None:
        self.turns, self.picks, self.pauses, self.lost = turns, list(picks or []), pauses or set(), lost or set()
        self.agent, self.breakpoints, self.continue_at = agent, breakpoints, continue_at or set()
        self.down = down or set()
        self.run: PureRun | None = None
        self.lost_once: set[int] = set()
        self.paused_mid_tool = False  # a person asked for a pause while a tool ran

    def weather(self, args: dict[str, object]) -> str:
        n = int(str(args["n"]))
        if n in self.pauses and self.run is not None and self.run.s.pause_request is None:
            self.run.pause(by="ann")
            self.paused_mid_tool = True
        return f"sunny {n}"

    def charge(self, args: dict[str, object]) -> str:
        n = int(str(args["n"]))
        if n in self.lost and n not in self.lost_once:
            self.lost_once.add(n)
            raise LostAttempt()
        return f"charged {n}"

    def person(self, run: PureRun) -> None:
        status, pick = run.status(), (self.picks.pop(0) if self.picks else 0)
        if status.paused is not None:
            if status.paused.where == "before_tools" and status.paused.reason != "budget":  # a breakpoint holds them
                held = [json.loads(c.arguments) for c in run.s.pending_calls]
                assert not [args for _, args in run.world.ran if args in held], "a held call ran before the resume"
            run.resume(add_tokens=2_000) if status.paused.reason == "budget" else run.resume()
        elif status.pending_approvals:
            call_id = status.pending_approvals[0].call_id
            if pick % 3 == 2:
                run.reject("not now", call_id=call_id)
            else:
                run.approve(call_id=call_id, arguments={"to": "team@example.com"} if pick % 3 == 1 else None)
        else:
            assert status.in_doubt, f"the run waits, and status names nothing: {status.last_step}"
            run.resolve("rerun", call_id=status.in_doubt[0].call_id)

    def go(self, speedups: bool) -> PureRun:
        tools = {"lookup": lambda a: f"found {a['n']}", "get_weather": self.weather, "charge": self.charge}
        tools["send_report"] = lambda a: f"sent to {a['to']}"
        people = [self.person] * 40
        model = Model(self.turns)
        world = World(replies=[], tools=tools, people=people, model=model, speedups=speedups, down=self.down)
        world.check_pure = False  # the fuzz checks it (tests/test_machine_fuzz.py)
        self.run = PureRun(self.agent, world, t.RunInput(prompt="go", agent="ops", breakpoints=self.breakpoints))
        self.run.continue_at = set(self.continue_at)
        try:
            self.run.run()
        except RunFailed as failed:  # a turn limit or budget: the same with the speed-ups, checked by the caller
            assert failed.kind in ("MaxTurnsExceeded", "TokenBudgetExceeded", "ModelHTTP503"), failed
        return self.run


def timeless(messages: list[t.Message]) -> list[object]:
    """The transcript without the times of the decisions in it: the clock here is a counter of
    steps, and a speed-up saves steps."""

    def drop(value: object) -> object:
        if isinstance(value, dict):
            return {k: drop(v) for k, v in value.items() if k != "at"}
        return [drop(v) for v in value] if isinstance(value, list) else value

    return [drop(m.model_dump(mode="json")) for m in messages]


def both(turns: list[list[str]], **script: object) -> tuple[PureRun, PureRun]:
    """The same world run without the speed-ups, then with them (people deciding the same)."""
    off, on = compared(turns, **script)
    assert on.run is not None
    return off, on.run


def compared(turns: list[list[str]], **script: object) -> tuple[PureRun, Script]:
    """`both`, with the script of the run with the speed-ups (what its people and tools did)."""
    off, on = Script(turns, **script).go(False), Script(turns, **script)  # type: ignore[arg-type]
    on.go(True)
    return off, on


def budgeted(tokens: int | None) -> t.AgentSpec:
    return AGENT if tokens is None else AGENT.model_copy(update={"token_budget": tokens, "on_budget": "pause"})


def test_with_the_speedups_the_run_does_what_it_does_without_them():
    off, on = both([[CHEAP], ["get_weather"]])

    assert on.world.with_reply == ["call_0_0"]  # lookup ran with the first reply: no dispatch of its own
    assert on.world.made_ahead == ["call_1_0"]  # get_weather's activity made the last model call
    assert off.world.with_reply == off.world.made_ahead == []
    assert on.s.output == off.s.output == "I read: found 0; sunny 10"
    assert on.s.messages == off.s.messages
    assert on.world.seen == off.world.seen  # the model was sent the same transcripts, as often
    assert on.world.ran == off.world.ran == [("lookup", Model.args(0, 0)), ("get_weather", Model.args(1, 0))]
    assert on.s.usage == off.s.usage
    assert on.kinds() == off.kinds()


def test_a_pause_asked_while_the_tool_runs_drops_the_reply_made_ahead_and_counts_its_tokens():
    off, on = both([["get_weather"]], pauses={0})

    assert on.world.made_ahead == ["call_0_0"]
    assert "model_dropped" in on.kinds() and "model_dropped" not in off.kinds()
    assert on.s.output == off.s.output == "I read: sunny 0"
    assert on.s.messages == off.s.messages
    made, again = on.world.seen[1], on.world.seen[2]  # the transcript made ahead, sent again after the pause
    assert made == again == off.world.seen[1] and len(on.world.seen) == len(off.world.seen) + 1
    dropped = next(e for e in on.s.events if e.kind == "model_dropped")
    assert dropped.usage is not None
    assert on.s.usage.total_tokens == off.s.usage.total_tokens + dropped.usage.total_tokens


def test_a_cheap_call_a_person_edits_while_paused_runs_again_with_the_edited_arguments():
    """The reply's cheap call ran with it; a pause asked during the model call holds the turn
    before its tools, a person edits that call, and the run takes nothing of the first run: the
    call runs again as edited, and the model reads that result."""
    script = Script([[CHEAP]])
    model = Model(script.turns)

    def asked_mid_call(messages: list[t.Message]) -> t.ModelReply:
        if script.run is not None and not any(isinstance(m, t.AssistantMessage) for m in messages):
            script.run.pause(by="ann")
        return model(messages)

    def edits_then_resumes(run: PureRun) -> None:
        run.edit(t.Edit(op="args", call_id="call_0_0", arguments={"n": 99}, by="ann"))
        run.resume()

    tools = {"lookup": lambda a: f"found {a['n']}"}
    world = World(replies=[], tools=tools, people=[edits_then_resumes], model=asked_mid_call, speedups=True)
    run = script.run = PureRun(AGENT, world, t.RunInput(prompt="go", agent="ops"))
    run.run()

    assert world.with_reply == ["call_0_0"]
    assert world.ran == [("lookup", Model.args(0, 0)), ("lookup", {"n": 99})]
    assert run.s.output == "I read: found 99"


@settings(max_examples=150, deadline=None)
@given(
    turns=st.lists(
        st.lists(st.sampled_from([CHEAP, "get_weather", "send_report", "charge"]), min_size=1, max_size=3),
        min_size=1,
        max_size=4,
    ),
    picks=st.lists(st.integers(0, 2), max_size=12),
    pauses=st.sets(st.integers(0, 35), max_size=2),
    lost=st.sets(st.integers(0, 35), max_size=2),
    tokens=st.sampled_from([None, 300, 1_000]),
    breakpoints=st.one_of(
        st.none(),
        st.builds(t.Breakpoints, at_turns=st.lists(st.integers(1, 5), max_size=2), before_tools=st.booleans()),
        st.builds(t.Breakpoints, tools=st.lists(st.sampled_from([CHEAP, "get_weather"]), min_size=1, max_size=1)),
    ),
    continue_at=st.sets(st.integers(1, 5), max_size=2),
    down=st.sets(st.sampled_from(["primary", "backup"]), max_size=2),
)
@example(  # Temporal suggested continue-as-new at the reply: until 1.4.8 a call was made ahead, then dropped
    turns=[["get_weather"]],
    picks=[],
    pauses=set(),
    lost=set(),
    tokens=None,
    breakpoints=None,
    continue_at={1},
    down=set(),
)
def test_any_drawn_run_with_the_speedups_answers_and_runs_as_it_does_without_them(
    turns: list[list[str]],
    picks: list[int],
    pauses: set[int],
    lost: set[int],
    tokens: int | None,
    breakpoints: t.Breakpoints | None,
    continue_at: set[int],
    down: set[str | None],
):
    """Also with a budget that pauses (no call is made ahead then: the turn reserves first), a
    breakpoint (none before a call a breakpoint holds) and continue-as-new at drawn turns."""
    off, on_script = compared(
        turns, picks=picks, pauses=pauses, lost=lost, agent=budgeted(tokens), breakpoints=breakpoints,
        continue_at=continue_at, down=down,
    )  # fmt: skip
    on = on_script.run
    assert on is not None

    assert on.status().status == off.status().status and on.s.error == off.s.error
    assert on.s.output == off.s.output
    assert timeless(on.s.messages) == timeless(off.s.messages)
    assert [r for r in on.world.ran if r[0] != CHEAP] == [r for r in off.world.ran if r[0] != CHEAP]
    cheap_on, cheap_off = (Counter(json.dumps(r[1]) for r in w.ran if r[0] == CHEAP) for w in (on.world, off.world))
    assert cheap_on >= cheap_off  # a cheap call may run again with a reply made after a dropped one
    assert on.s.usage.total_tokens >= off.s.usage.total_tokens
    assert len(on.world.seen) >= len(off.world.seen)
    if not on_script.paused_mid_tool:  # only a pause between a tool and its reply made ahead drops it
        assert len(on.world.seen) == len(off.world.seen), "a reply made ahead was dropped, with no pause between"
    if len(on.world.seen) == len(off.world.seen):  # no reply made ahead was dropped (a pause came between)
        assert [timeless(m) for m in on.world.seen] == [timeless(m) for m in off.world.seen]
        assert on.s.usage == off.s.usage and cheap_on == cheap_off
        if tokens is None and breakpoints is None and on.status().status == "completed":
            lookups = [f"call_{k}_{i}" for k, ns in enumerate(turns) for i, name in enumerate(ns) if name == CHEAP]
            lone = [f"call_{k}_0" for k, ns in enumerate(turns) if ns == ["get_weather"] and k + 1 not in continue_at]
            assert on.world.with_reply == lookups  # every cheap call ran with its reply
            # every lone routed call's activity made the next model call, but where Temporal had
            # already suggested continue-as-new: it comes before that call
            assert on.world.made_ahead == lone
