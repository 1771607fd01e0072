"""Whole runs through the machine with no server (tests/pure_run.py): approval, reject, edit, in
doubt, budget pause, handoff, steer, fork and continue-as-new, each from the prompt to the answer,
checked as a person would: what status said while the run waited, what ran, what the model was
sent, and the answer. The server tests keep what only the server shows (history, replay, workers
that die, timers, updates through the door, the CLI and the console); a server test that showed
nothing more (a rejection's reason reaching the model) is here now."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from durable_agent_runner.machine.approvals import DecisionRefused
from durable_agent_runner.workflows import types as t
from tests.pure_run import LostAttempt, NobodyActs, PureRun, RunFailed, World, fork, reply

pytestmark = pytest.mark.pure

OPS = t.AgentSpec(
    name="ops",
    version="v1",
    max_turns=6,
    tools=[
        t.ToolSpec(name="get_weather"),
        t.ToolSpec(name="send_report", approval="always"),
        t.ToolSpec(name="charge", once=True),
    ],
    handoffs=[t.HandoffSpec(agent="billing", tool_name="transfer_to_billing")],
    team=[t.AgentSpec(name="billing", version="v1", tools=[t.ToolSpec(name="refund")])],
)
TOOLS = {
    "get_weather": lambda a: f"sunny in {a['city']}",
    "send_report": lambda a: f"sent to {a['to']}",
    "charge": lambda a: f"charged {a['cents']}",
    "refund": lambda a: "refunded",
}
REPORT = ("send_report", {"to": "ops@example.com"})


def start(world: World, agent: t.AgentSpec = OPS, prompt: str = "Weather in Tokyo, then email ops") -> PureRun:
    return PureRun(agent, world, t.RunInput(prompt=prompt, agent=agent.name))


def tool_messages(messages: list[t.Message]) -> list[t.ToolMessage]:
    return [m for m in messages if isinstance(m, t.ToolMessage)]


def in_order(kinds: list[str], *wanted: str) -> bool:
    """`wanted` appear in `kinds` in this order (others between them)."""
    it = iter(kinds)
    return all(any(k == w for k in it) for w in wanted)


# ----------------------------------------------------------------------------- approvals


def test_an_approval_turn_waits_for_a_person_then_runs_the_call_and_the_model_sees_its_result():
    def alice(run: PureRun) -> None:
        assert [name for name, _ in world.ran] == ["get_weather"]  # nothing ran before the decision
        run.approve(by="alice")

    world = World(
        replies=[reply(None, ("get_weather", {"city": "Tokyo"})), reply(None, REPORT), reply("Sent the report.")],
        tools=TOOLS,
        people=[alice],
    )
    run = start(world)
    result = run.run()

    (waiting,) = run.waits
    assert waiting.status == "awaiting_approval" and waiting.turn == 2
    (pending,) = waiting.pending_approvals
    assert pending.tool == "send_report" and pending.arguments == {"to": "ops@example.com"}
    assert "send_report" in waiting.last_step and "approv" in waiting.last_step
    assert world.ran == [("get_weather", {"city": "Tokyo"}), ("send_report", {"to": "ops@example.com"})]
    sent = tool_messages(world.seen[2])[-1]
    assert sent.content == "sent to ops@example.com" and sent.approval is not None and sent.approval.by == "alice"
    assert result.output == "Sent the report." and result.turns == 3
    done = run.status()
    assert done.status == "completed" and not done.pending_approvals
    assert [(d.tool, d.approved, d.by) for d in done.decisions] == [("send_report", True, "alice")]
    assert in_order(run.kinds(), "tool_started", "approval_requested", "approval_decided", "tool_finished", "final")


def test_sibling_calls_wait_at_once_and_status_names_both_while_the_third_runs():
    """Two calls to approve and a plain one in one turn: the plain one runs while both wait, status
    lists both waits, and a person may decide the second first; the model reads the results in
    the order it asked for the calls."""

    def bob_then_alice(run: PureRun) -> None:
        assert world.ran == [("get_weather", {"city": "Oslo"})]  # it ran while the others waited
        first, second = run.status().pending_approvals
        assert (first.arguments["to"], second.arguments["to"]) == ("a@example.com", "b@example.com")
        run.reject("not b", by="bob", call_id=second.call_id)
        assert [p.call_id for p in run.status().pending_approvals] == [first.call_id]
        run.approve(by="alice", call_id=first.call_id)

    asks = reply(None, ("send_report", {"to": "a@example.com"}), ("get_weather", {"city": "Oslo"}),
                 ("send_report", {"to": "b@example.com"}))  # fmt: skip
    world = World(replies=[asks, reply("Sent to a; b was refused.")], tools=TOOLS, people=[bob_then_alice])
    run = start(world)
    run.run()

    (waiting,) = run.waits  # one wait for people, with both calls in it
    assert waiting.status == "awaiting_approval" and len(waiting.pending_approvals) == 2
    assert world.ran[1:] == [("send_report", {"to": "a@example.com"})]
    results = tool_messages(world.seen[1])
    assert [m.call_id for m in results] == [c.call_id for c in asks.message.tool_calls]
    assert results[0].content == "sent to a@example.com" and "rejected by bob" in results[2].content


def test_a_pause_asked_while_a_sibling_waits_for_approval_leaves_that_wait_in_status():
    """A person asks for a pause while get_weather runs and send_report waits for approval: the
    run waits for the approval first, and status says both (until 1.4.8 it said only that the
    run would pause, hiding the approval it waited for); then it pauses, and goes on."""

    def ann(args: dict[str, object]) -> str:
        run.pause(by="ann")
        return "sunny"

    def alice(r: PureRun) -> None:
        status = r.status()
        assert status.phase == "awaiting_approval"
        assert (
            "waiting for approval of send_report" in status.last_step and "pause requested by ann" in status.last_step
        )
        r.approve(by="alice")

    asks = reply(None, REPORT, ("get_weather", {"city": "Oslo"}))

    def dave(r: PureRun) -> None:
        r.resume(by="dave")

    world = World(replies=[asks, reply("Sent.")], tools=TOOLS | {"get_weather": ann}, people=[alice, dave])
    run = start(world)
    assert run.run().output == "Sent."
    assert in_order(run.kinds(), "approval_decided", "paused", "resumed", "final")


def test_an_outside_wait_beside_an_approval_is_named_in_status_too():
    """send_report waits for approval; print_doc, beside it, waits for the printer to complete it
    from outside. Status's one line names both (until 1.4.8 it named only the approval)."""
    printer = t.ToolSpec(name="print_doc", outside=t.OutsideSpec(timeout_seconds=3600))

    def alice(r: PureRun) -> None:
        status = r.status()
        assert [p.tool for p in status.pending_approvals] == ["send_report"]
        assert [o.tool for o in status.outside] == ["print_doc"]
        assert "waiting for approval of send_report" in status.last_step
        assert f"waiting for outside completion of print_doc ({status.outside[0].call_id})" in status.last_step
        r.approve(by="alice")

    world = World(
        replies=[reply(None, REPORT, ("print_doc", {"doc": "q3.pdf"})), reply("Sent and printed.")],
        tools=TOOLS | {"print_doc": lambda a: "queued"},
        people=[alice, lambda r: r.complete('{"pages": 3}', by="printer")],
    )
    run = start(world, OPS.model_copy(update={"tools": [*OPS.tools, printer]}))
    assert run.run().output == "Sent and printed."


def test_a_rejected_call_never_runs_and_the_model_is_told_who_rejected_it_and_why():
    world = World(
        replies=[reply(None, REPORT), reply("I did not send it.")],
        tools=TOOLS,
        people=[lambda run: run.reject("wrong address", by="bob")],
    )
    run = start(world)
    assert run.run().output == "I did not send it."
    assert world.ran == []
    (told,) = tool_messages(world.seen[1])
    assert told.is_error and "rejected by bob" in told.content and "wrong address" in told.content
    (decision,) = run.status().decisions
    assert decision.approved is False and decision.reason == "wrong address" and decision.by == "bob"


def test_edited_arguments_are_what_runs_and_the_model_is_told_of_the_edit():
    world = World(
        replies=[reply(None, REPORT), reply("Sent.")],
        tools=TOOLS,
        people=[lambda run: run.approve(by="alice", arguments={"to": "team@example.com"})],
    )
    run = start(world)
    run.run()
    assert world.ran == [("send_report", {"to": "team@example.com"})]
    (told,) = tool_messages(world.seen[1])
    assert "edited by alice" in told.content and "sent to team@example.com" in told.content


def test_a_decision_on_a_call_that_is_not_waiting_is_refused_at_the_door_and_the_run_still_waits():
    def wrong_call(run: PureRun) -> None:
        with pytest.raises(DecisionRefused, match="call_nope"):
            run.approve(call_id="call_nope")

    world = World(replies=[reply(None, REPORT)], tools=TOOLS, people=[wrong_call])
    run = start(world)
    with pytest.raises(NobodyActs):  # no approval of the real call came: the run would still wait
        run.run()
    assert world.ran == [] and run.status().status == "awaiting_approval"


@settings(max_examples=40, deadline=None)
@given(st.lists(st.booleans(), max_size=5))
def test_no_call_that_needs_approval_runs_without_one_and_every_call_gets_one_answer(decisions: list[bool]):
    people = [
        (lambda run: run.approve()) if yes else (lambda run: run.reject("no"))  # type: ignore[misc]
        for yes in decisions
    ]
    replies = [reply(None, REPORT) for _ in decisions] + [reply("done")]
    world = World(replies=replies, tools=TOOLS, people=people)
    run = PureRun(OPS.model_copy(update={"max_turns": 10}), world, t.RunInput(prompt="go", agent="ops"))
    assert run.run().output == "done"
    assert len(world.ran) == sum(decisions)
    asked = [c.call_id for m in run.s.messages if isinstance(m, t.AssistantMessage) for c in m.tool_calls]
    answered = [m.call_id for m in tool_messages(run.s.messages)]
    assert answered == asked  # each call answered once, in the order asked
    assert [d.approved for d in run.status().decisions] == decisions


# -------------------------------------------------------------------------------- in doubt


def flaky_charge(results: list[str | LostAttempt]):
    def charge(args: dict[str, object]) -> str:
        outcome = results.pop(0)
        if isinstance(outcome, LostAttempt):
            raise outcome
        return outcome

    return charge


@pytest.mark.parametrize(
    ("resolution", "runs", "model_sees", "is_error"),
    [
        ({"action": "rerun"}, 2, "charged 500", False),
        ({"action": "result", "result": '{"id": 42}'}, 1, '{"id": 42}', False),
        ({"action": "fail", "reason": "the bank has no such payment"}, 1, "the bank has no such payment", True),
    ],
)
def test_a_once_call_that_ended_without_a_result_waits_for_a_person_and_goes_on_as_they_resolve_it(
    resolution: dict[str, str], runs: int, model_sees: str, is_error: bool
):
    world = World(
        replies=[reply(None, ("charge", {"cents": 500})), reply("Done.")],
        tools=TOOLS | {"charge": flaky_charge([LostAttempt(), "charged 500"])},
        people=[lambda run: run.resolve(by="carol", **resolution)],  # type: ignore[arg-type]
    )
    run = start(world, prompt="charge 5 dollars")
    assert run.run().output == "Done."

    (waiting,) = run.waits
    (doubt,) = waiting.in_doubt
    assert doubt.tool == "charge" and doubt.arguments == {"cents": 500} and waiting.status == "running"
    assert "charge" in waiting.last_step
    assert len([r for r in world.ran if r[0] == "charge"]) == runs  # never again unless a person said so
    (told,) = tool_messages(world.seen[1])
    assert model_sees in told.content and told.is_error is is_error
    assert [r.action for r in run.status().resolutions] == [resolution["action"]]


def test_a_once_call_in_doubt_with_nobody_to_resolve_it_waits_and_runs_nothing_more():
    world = World(
        replies=[reply(None, ("charge", {"cents": 1}))], tools=TOOLS | {"charge": flaky_charge([LostAttempt()])}
    )
    run = start(world)
    with pytest.raises(NobodyActs):
        run.run()
    assert world.ran == [("charge", {"cents": 1})] and run.status().in_doubt[0].tool == "charge"


# ---------------------------------------------------------------------------------- budget


def test_a_budget_pause_holds_the_run_until_a_person_raises_it_and_a_resume_without_a_raise_is_refused():
    def resume_without_raise(run: PureRun) -> None:
        with pytest.raises(DecisionRefused):
            run.resume()

    world = World(
        replies=[reply(None, ("get_weather", {"city": "Oslo"}), tokens=1500), reply("Cold.", tokens=1000)],
        tools=TOOLS,
        people=[resume_without_raise, lambda run: run.resume(by="dave", add_tokens=5000)],
    )
    agent = OPS.model_copy(update={"token_budget": 1500, "on_budget": "pause"})
    run = start(world, agent)
    assert run.run().output == "Cold."
    (waiting,) = run.waits
    assert waiting.status == "paused" and waiting.paused is not None and waiting.paused.reason == "budget"
    assert waiting.budget is not None and waiting.budget.tokens is not None
    assert waiting.budget.tokens.limit == 1500 and waiting.budget.tokens.spent == 1650  # spent: it paused
    assert in_order(run.kinds(), "paused", "budget_raised", "resumed", "model_started", "final")
    after = run.status().budget
    assert after is not None and after.tokens is not None and after.tokens.limit == 6500


def test_a_budget_spent_with_on_budget_fail_ends_the_run_before_its_next_model_call():
    world = World(replies=[reply(None, ("get_weather", {"city": "Oslo"}), tokens=1000)], tools=TOOLS)
    run = start(world, OPS.model_copy(update={"token_budget": 1000}))
    with pytest.raises(RunFailed) as failed:
        run.run()
    assert failed.value.kind == "TokenBudgetExceeded" and len(world.seen) == 1
    assert run.status().status == "failed"


# ------------------------------------------------------------------- handoffs and sessions


def test_a_handoff_puts_the_target_in_charge_with_the_conversation_and_status_says_so():
    world = World(
        replies=[reply(None, ("transfer_to_billing", {})), reply(None, ("refund", {})), reply("Refunded.")],
        tools=TOOLS,
    )
    run = start(world, prompt="refund my order")
    assert run.run().output == "Refunded."
    status = run.status()
    assert status.agent == "billing" and [(h.from_agent, h.to_agent) for h in status.handoffs] == [("ops", "billing")]
    assert world.ran == [("refund", {})]  # billing's own tool: the handoff made it available
    assert world.seen[1][0] == t.UserMessage(content="refund my order")  # the conversation came along
    assert in_order(run.kinds(), "handoff", "tool_started", "final")


def test_a_session_that_steers_puts_a_message_sent_mid_turn_into_the_answer_in_progress():
    box: dict[str, PureRun] = {}

    def weather(args: dict[str, object]) -> str:
        box["run"].send("and Paris?")  # arrives while the tool runs
        return "sunny in Tokyo"

    world = World(
        replies=[reply(None, ("get_weather", {"city": "Tokyo"})), reply("Tokyo is sunny; Paris is too.")],
        tools=TOOLS | {"get_weather": weather},
        people=[lambda run: run.end(by="erin")],
    )
    agent = OPS.model_copy(update={"mid_turn": "steer"})
    run = box["run"] = PureRun(agent, world, t.RunInput(prompt="Weather in Tokyo?", agent="ops", session=True))
    result = run.converse()
    users = [m.content for m in world.seen[1] if isinstance(m, t.UserMessage)]
    assert users == ["Weather in Tokyo?", "and Paris?"]  # steered in: one answer for both
    assert len(world.seen) == 2 and result.output == "Tokyo is sunny; Paris is too."
    session = run.status().session
    assert session is not None and session.state == "ended" and session.messages == session.answered == 2


def test_a_session_answers_queued_messages_in_order_and_ends_when_idle_with_nobody_left():
    world = World(replies=[reply("one"), reply("two")], tools=TOOLS, people=[lambda run: run.send("second")])
    run = PureRun(OPS, world, t.RunInput(prompt="first", agent="ops", session=True))
    result = run.converse()
    assert [e.text for e in run.s.events if e.kind == "answered"] == ["one", "two"]
    assert result.output == "two" and run.status().session.state == "ended"  # type: ignore[union-attr]


# ----------------------------------------------------------------- forks and continue-as-new


def charged_run() -> PureRun:
    world = World(replies=[reply(None, ("charge", {"cents": 500})), reply("Charged.")], tools=dict(TOOLS))
    run = start(world, prompt="charge 5 dollars")
    run.run()
    return run


def test_a_fork_reuses_the_recorded_results_and_runs_nothing_before_its_fork_point():
    origin = charged_run()
    world = World(replies=[reply("Charged, again.")], tools=dict(TOOLS))
    forked = fork(origin, 2, world, prompt="say it again")
    assert forked.run().output == "Charged, again."
    assert world.ran == []  # the charge is not made twice
    assert tool_messages(world.seen[0])[0].content == "charged 500"
    assert forked.status().forked_from is not None and forked.status().forked_from.run_id == "run-1"


def test_a_live_tools_fork_asks_a_person_before_it_runs_a_once_call_again():
    origin = charged_run()
    world = World(replies=[reply("Charged twice.")], tools=dict(TOOLS), people=[lambda run: run.resolve("rerun")])
    forked = fork(origin, 2, world, live_tools=True)
    assert forked.run().output == "Charged twice."
    (waiting,) = forked.waits
    assert waiting.in_doubt[0].tool == "charge" and world.ran == [("charge", {"cents": 500})]

    nobody = World(replies=[reply("never")], tools=dict(TOOLS))
    with pytest.raises(NobodyActs):  # with no person, the once call does not run again
        fork(origin, 2, nobody, live_tools=True).run()
    assert nobody.ran == []


def test_a_run_continued_as_new_goes_on_from_its_carry_with_its_transcript_and_always_approvals():
    world = World(
        replies=[reply(None, REPORT), reply(None, REPORT), reply("Sent twice.")],
        tools=TOOLS,
        people=[lambda run: run.approve(by="alice", always=True)],
    )
    run = start(world)
    run.continue_at = {1}  # Temporal suggests continue-as-new after the first turn
    assert run.run().output == "Sent twice."
    assert run.executions == 2 and len(run.waits) == 1  # the second report was approved by "always"
    assert len(world.ran) == 2 and world.seen[2][: len(world.seen[1])] == world.seen[1]
    status = run.status()
    assert status.turn == 3 and status.usage.total_tokens == 3 * 110
    assert status.decisions[0].always and status.decisions[0].by == "alice"


def test_a_paused_run_can_be_edited_and_the_model_sees_the_edit_when_it_goes_on():
    def pause_then_edit(run: PureRun) -> None:
        run.edit(t.Edit(op="text", index=0, text="Weather in Oslo", by="dave"))
        run.resume(by="dave")

    world = World(replies=[reply("Oslo is cold.")], tools=TOOLS, people=[pause_then_edit])
    run = start(world, prompt="Weather in Tokyo")
    run.pause(by="dave")  # asked before the first model call
    assert run.run().output == "Oslo is cold."
    assert run.waits[0].status == "paused"
    assert world.seen[0][0] == t.UserMessage(content="Weather in Oslo")
    assert in_order(run.kinds(), "paused", "edited", "resumed", "model_started")


# ------------------------------------------------------------- agents as tools, outside waits

RESEARCHER = t.AgentSpec(name="researcher", version="v3", tools=[t.ToolSpec(name="search")])
LEAD = t.AgentSpec(
    name="lead",
    version="v1",
    token_budget=20_000,
    tools=[t.ToolSpec(name="research", agent="researcher")],
    team=[RESEARCHER],
)


def test_an_agent_as_a_tool_runs_as_a_child_whose_answer_the_model_reads_and_whose_tokens_count_here():
    world = World(
        replies=[
            reply(None, ("research", {"input": "find the refund policy"})),  # the lead
            reply(None, ("search", {"q": "refunds"}), tokens=300),  # the child
            reply("30 days.", tokens=200),  # the child's answer
            reply("Refunds within 30 days."),  # the lead's
        ],
        tools={"search": lambda a: "refunds: 30 days"},
    )
    lead = start(world, LEAD, prompt="What is the refund policy?")
    assert lead.run().output == "Refunds within 30 days."
    (child,) = lead.children
    assert child.run_id.startswith("run-1.call_") and child.s.agent_now.name == "researcher"
    assert child.input.budget is not None and child.input.budget.tokens is not None  # its share of the lead's
    told = tool_messages(world.seen[3])[-1]
    assert told.content == "30 days." and not told.is_error
    status = lead.status()
    assert status.usage_by_agent["researcher"].total_tokens == 330 + 220
    assert status.budget is not None and status.budget.tokens is not None
    assert status.budget.tokens.spent == 2 * 110 + 330 + 220 and status.budget.tokens.reserved == 0


def test_a_raise_on_a_paused_child_is_refused_past_its_parents_grant_and_one_within_it_goes_on():
    def search(args: dict[str, object]) -> str:
        lead.children[-1].pause(by="ann")  # a person pauses the child while its tool runs
        return "tides: the moon"

    def ann(child: PureRun) -> None:
        with pytest.raises(DecisionRefused, match="may be raised by at most"):
            child.resume(by="ann", add_tokens=1_000_000_000)
        assert child.status().paused is not None  # refused: nothing recorded, still paused
        child.resume(by="ann", add_tokens=1_000)

    world = World(
        replies=[
            reply(None, ("research", {"input": "explain tides"})),
            reply(None, ("search", {"q": "tides"})),
            reply("The moon pulls the sea."),
            reply("Tides come from the moon."),
        ],
        tools={"search": search},
        people=[ann],
    )
    thrifty = RESEARCHER.model_copy(update={"token_budget": 500})  # its own budget, below its share
    lead = start(world, LEAD.model_copy(update={"team": [thrifty]}), prompt="Explain tides")
    assert lead.run().output == "Tides come from the moon."
    (child,) = lead.children
    assert child.waits[0].paused is not None and child.waits[0].paused.where == "before_model"
    after = child.status().budget
    assert after is not None and after.tokens is not None and after.tokens.limit == 1_500
    assert in_order(child.kinds(), "paused", "budget_raised", "resumed", "final")


def test_a_call_completed_from_outside_waits_for_the_completion_and_the_model_reads_its_result():
    printer = t.ToolSpec(name="print_doc", outside=t.OutsideSpec(timeout_seconds=3600))
    agent = OPS.model_copy(update={"tools": [*OPS.tools, printer]})
    world = World(
        replies=[reply(None, ("print_doc", {"doc": "q3.pdf"})), reply("Printed 12 pages.")],
        tools={"print_doc": lambda a: "queued"},
        people=[lambda run: run.complete('{"pages": 12}', by="printer")],
    )
    run = start(world, agent, prompt="print the q3 report")
    assert run.run().output == "Printed 12 pages."
    (waiting,) = run.waits
    assert [o.tool for o in waiting.outside] == ["print_doc"] and not run.status().outside
    told = tool_messages(world.seen[1])[-1]
    assert '"pages": 12' in told.content and not told.is_error
    assert [c.by for c in run.status().completions] == ["printer"]


# ------------------------------------------------------------------ a property of whole runs

# What happens to one call: a plain tool runs; a call that needs approval is approved, edited or
# rejected; a once call ends with a result or without one, and is then run again, given a
# result, or failed by a person.
FATES = {
    "get_weather": st.just("ran"),
    "send_report": st.sampled_from(["approve", "edit", "reject"]),
    "charge": st.sampled_from(["ran", "lost-rerun", "lost-result", "lost-fail"]),
}


@st.composite
def scripts(draw: st.DrawFn) -> list[list[tuple[str, str]]]:
    """Turns of tool calls, each call a (tool, fate); 0-4 turns of 1-3 calls."""
    call = st.sampled_from(sorted(FATES)).flatmap(lambda tool: FATES[tool].map(lambda fate: (tool, fate)))
    return draw(st.lists(st.lists(call, min_size=1, max_size=3), max_size=4))


@settings(max_examples=100, deadline=None)
@given(scripts())
def test_any_run_asks_before_it_acts_runs_a_once_call_again_only_when_told_and_answers_every_call(
    turns: list[list[tuple[str, str]]],
):
    fates: dict[str, str] = {}  # call id -> its fate
    replies, n = [], 0
    for calls in turns:
        asks = []
        for tool, _ in calls:  # each call's arguments name it (`n`): the tools see only those
            asks.append((tool, {"city": "Oslo", "to": "ops@example.com", "cents": n, "n": n}))
            n += 1
        r = reply(None, *asks)
        fates.update({c.call_id: fate for c, (_, fate) in zip(r.message.tool_calls, calls, strict=True)})
        replies.append(r)
    replies.append(reply("done"))
    by_n = {json.loads(c.arguments)["n"]: c.call_id for r in replies for c in r.message.tool_calls}
    by_tool = {c.call_id: c.name for r in replies for c in r.message.tool_calls}
    lost: set[str] = set()

    def charge(args: dict[str, object]) -> str:
        call_id = by_n[args["n"]]  # type: ignore[index]
        if fates[call_id].startswith("lost") and call_id not in lost:
            lost.add(call_id)
            raise LostAttempt()  # its one attempt ended without a result
        return f"charged {args['cents']}"

    def person(r: PureRun) -> None:
        """Decides each call that waits (sibling calls wait at once) as its fate says, having read
        what status says."""
        status = r.status()
        assert status.pending_approvals or status.in_doubt
        if not status.in_doubt:
            assert status.status == "awaiting_approval"
        for p in status.pending_approvals:
            assert p.tool == "send_report"
            if fates[p.call_id] == "reject":
                r.reject("no", call_id=p.call_id)
            else:
                edited = {"to": "team@example.com", "n": p.arguments["n"]} if fates[p.call_id] == "edit" else None
                r.approve(call_id=p.call_id, arguments=edited)
        for d in status.in_doubt:
            assert d.tool == "charge" and fates[d.call_id].startswith("lost")
            how = fates[d.call_id].removeprefix("lost-")
            more = {"result": '"given"'} if how == "result" else {"reason": "refused"} if how == "fail" else {}
            r.resolve(how, call_id=d.call_id, **more)  # type: ignore[arg-type]

    world = World(replies=replies, tools=TOOLS | {"charge": charge}, people=[person] * 20)
    run = PureRun(OPS.model_copy(update={"max_turns": 10}), world, t.RunInput(prompt="go", agent="ops"))
    assert run.run().output == "done"

    asked = [c.call_id for m in run.s.messages if isinstance(m, t.AssistantMessage) for c in m.tool_calls]
    assert [m.call_id for m in tool_messages(run.s.messages)] == asked  # each answered once, in order
    ran = [(tool, by_n[args["n"]]) for tool, args in world.ran]  # type: ignore[index]
    reports = [(c, args["to"]) for (tool, c), (_, args) in zip(ran, world.ran, strict=True) if tool == "send_report"]
    to = {"approve": "ops@example.com", "edit": "team@example.com"}
    want = [(c, to[f]) for c, f in fates.items() if f in to]
    assert sorted(reports) == sorted(want)  # nothing that needs approval ran without one; an edit is what ran
    charges = [c for c in asked if by_tool[c] == "charge"]
    again = [c for c in charges if fates[c] == "lost-rerun"]  # run again only when a person said so
    assert sorted(call_id for tool, call_id in ran if tool == "charge") == sorted(charges + again)
    status = run.status()
    assert len(status.decisions) == sum(f in ("approve", "edit", "reject") for f in fates.values())
    doubted = [fates[c].removeprefix("lost-") for c in asked if fates[c].startswith("lost")]
    assert [r.action for r in status.resolutions] == doubted
    assert not status.pending_approvals and not status.in_doubt and status.status == "completed"


def test_a_live_tools_fork_reruns_an_outside_call_of_an_agent_no_longer_in_charge():
    """The call runs again as the agent that made it (it had handed off since): its wait for the
    outside completion is that agent's tool's, not the one in charge's (which lacks the tool)."""
    printer = t.ToolSpec(name="print_doc", outside=t.OutsideSpec(timeout_seconds=3600))
    agent = OPS.model_copy(update={"tools": [*OPS.tools, printer]})
    world = World(
        replies=[
            reply(None, ("print_doc", {"doc": "q3.pdf"})),
            reply(None, ("transfer_to_billing", {})),
            reply("Billing here: printed."),
        ],
        tools={"print_doc": lambda a: "queued"},
        people=[lambda run: run.complete('{"pages": 12}', by="printer")],
    )
    origin = start(world, agent, prompt="print the q3 report, then bill it")
    origin.run()
    again = World(
        replies=[reply("Printed again.")],
        tools={"print_doc": lambda a: "queued"},
        people=[lambda run: run.complete('{"pages": 13}', by="printer")],
    )
    forked = fork(origin, 3, again, live_tools=True)
    assert forked.run().output == "Printed again."
    assert again.ran == [("print_doc", {"doc": "q3.pdf"})] and forked.status().agent == "billing"
    assert '"pages": 13' in tool_messages(again.seen[0])[0].content
