"""A session's own bookkeeping (machine/session.py), without Temporal: accepting messages once and
in order, refusing them, opening, steering and closing exchanges, finding message K's exchange in
this execution or an earlier one, the status, and the carry across continue-as-new."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from durable_agent_runner.machine.session import KEEP_EXCHANGES, MAX_QUEUED, MAX_QUEUED_CHARS, Refused, SessionState
from durable_agent_runner.workflows import types as t

NOW = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
USAGE = t.Usage(requests=1, input_tokens=10, output_tokens=5)


def msg(text: str = "hi", message_id: str = "", by: str = "alice") -> t.SessionMessage:
    return t.SessionMessage(text=text, by=by, message_id=message_id)


def send(s: SessionState, *texts: str, steer: bool = False) -> list[t.MessageReceipt]:
    receipts = []
    for text in texts:
        s.check(msg(text), ended=False)
        receipts.append(s.accept(msg(text), NOW, steer))
    return receipts


def answer(s: SessionState, execution: str, turn: int = 0, output: str = "ok") -> t.Exchange:
    """Opens the next queued message's exchange and closes it after one model call."""
    s.open(turn, NOW, execution)
    return s.close(NOW + timedelta(seconds=1), turn + 1, USAGE, output, None, None)


# ---------------------------------------------------------------------------------- accepting


def test_messages_are_numbered_from_1_and_told_how_many_are_queued_ahead():
    s = SessionState()
    receipts = send(s, "a", "b", "c")
    assert [(r.message, r.queued, r.steer, r.duplicate) for r in receipts] == [
        (1, 0, False, False),
        (2, 1, False, False),
        (3, 2, False, False),
    ]
    assert s.messages == 3
    assert [(q.message, q.text, q.by, q.at) for q in s.queue] == [(k, x, "alice", NOW) for k, x in enumerate("abc", 1)]


def test_a_receipt_says_steer_only_when_an_answer_is_in_progress():
    s = SessionState()
    assert send(s, "a", steer=True)[0].steer is False  # nothing is being answered: it opens the next
    s.open(0, NOW, "run-1")
    assert send(s, "b", steer=True)[0].steer is True
    assert send(s, "c", steer=False)[0].steer is False


def test_a_repeated_message_id_gets_the_first_number_back_and_records_nothing_new():
    s = SessionState()
    first = s.accept(msg("a", "id-1"), NOW, False)
    send(s, "b")
    s.open(0, NOW, "run-1")
    queue, ids = list(s.queue), list(s.recent_ids)
    s.check(msg("a", "id-1"), ended=True)  # a repeat passes the check, even once the session ended
    again = s.accept(msg("a", "id-1"), NOW, False)
    assert (again.message, again.duplicate) == (first.message, True) == (1, True)
    assert s.messages == 2 and s.queue == queue and s.recent_ids == ids


def test_a_message_id_used_again_for_other_text_is_refused_and_survives_continue_as_new():
    s = SessionState()
    s.accept(msg("pay the invoice", "id-1"), NOW, False)
    for state in (s, SessionState(s.to_carry("run-1"))):
        with pytest.raises(Refused) as refused:
            state.check(msg("cancel the invoice", "id-1"), ended=False)
        assert refused.value.kind == "MessageIdReused"
        assert str(refused.value).startswith("message id 'id-1' was already used for message 1, with other text")
        state.check(msg("pay the invoice", "id-1"), ended=False)  # the same text is a repeat


def test_a_repeat_keeps_the_steer_of_its_first_receipt():
    s = SessionState()
    send(s, "a")
    s.open(0, NOW, "run-1")
    first = s.accept(msg("b", "id-2"), NOW, True)
    assert first.steer
    again = s.accept(msg("b", "id-2"), NOW, False)
    assert (again.message, again.steer, again.duplicate) == (2, True, True)


def test_a_repeat_is_accepted_even_after_the_session_ended_or_is_ending():
    s = SessionState()
    s.accept(msg("a", "id-1"), NOW, False)
    s.ending = t.EndSession(by="bob")
    s.check(msg("a", "id-1"), ended=True)  # no Refused
    assert s.accept(msg("a", "id-1"), NOW, False).duplicate


def test_messages_without_an_id_are_never_duplicates():
    s = SessionState()
    assert [r.message for r in send(s, "same", "same")] == [1, 2]
    assert s.recent_ids == []


def test_recent_ids_are_bounded_and_keep_the_latest():
    from durable_agent_runner.machine.session import RECENT_IDS

    s = SessionState(t.SessionCarry(recent={f"old-{i}": i + 1 for i in range(RECENT_IDS)}))
    s.accept(msg("a", "new"), NOW, False)
    assert len(s.recent_ids) == RECENT_IDS and s.recent_ids[-1] == "new" and "old-0" not in s.recent_ids


# ---------------------------------------------------------------------------------- refusals


def test_an_ended_session_refuses_messages():
    with pytest.raises(Refused) as info:
        SessionState().check(msg(), ended=True)
    assert info.value.kind == "SessionEnded"


def test_an_ending_session_refuses_messages_naming_who_ended_it():
    s = SessionState()
    s.ending = t.EndSession(by="bob")
    with pytest.raises(Refused) as info:
        s.check(msg(), ended=False)
    assert info.value.kind == "SessionEnding" and "bob" in str(info.value)


def test_a_full_queue_by_count_refuses_messages():
    s = SessionState()
    send(s, *(str(i) for i in range(MAX_QUEUED)))
    with pytest.raises(Refused) as info:
        s.check(msg(), ended=False)
    assert info.value.kind == "SessionQueueFull" and f"{MAX_QUEUED} messages" in str(info.value)
    s.open(0, NOW, "run-1")  # one leaves the queue: room again
    s.check(msg(), ended=False)


def test_a_full_queue_by_characters_refuses_messages():
    s = SessionState()
    size = t.MAX_MESSAGE_CHARS - 1
    count = MAX_QUEUED_CHARS // size  # 5 messages, just under the limit together
    send(s, *("x" * size for _ in range(count)))
    rest = MAX_QUEUED_CHARS - count * size
    assert 0 < rest < 100 and count < MAX_QUEUED
    s.check(msg("y" * rest), ended=False)  # exactly at the limit: accepted
    with pytest.raises(Refused) as info:
        s.check(msg("y" * (rest + 1)), ended=False)
    assert info.value.kind == "SessionQueueFull"


# ------------------------------------------------------------------------ open / steer / close


def test_open_steer_and_close_keep_the_counts_straight():
    s = SessionState()
    send(s, "first", "second")
    assert (s.answered, s.current) == (0, None)
    opened = s.open(4, NOW, "run-1")
    assert (opened.message, opened.text) == (1, "first")
    current = s.current
    assert current is not None
    assert (current.message, current.prompt, current.by, current.first_turn, current.execution) == (
        1,
        "first",
        "alice",
        5,
        "run-1",
    )
    assert s.answered == 0 and [q.message for q in s.queue] == [2]
    send(s, "third")
    joined = s.steer()
    assert [q.message for q in joined] == [2, 3] and s.queue == []
    assert current.steered == [] and s.current is not None and s.current.steered == [2, 3]  # a new record
    current = s.current
    assert s.answered == 0
    assert s.steer() == []  # nothing left to join
    closed = s.close(NOW + timedelta(minutes=1), 7, USAGE, "done", {"k": 1}, None)
    assert closed is s.exchanges[-1] and closed is not current and current.finished is None  # a new record
    assert (closed.output, closed.output_object, closed.error, closed.turns, closed.usage) == (
        "done",
        {"k": 1},
        None,
        3,
        USAGE,
    )
    assert closed.finished == NOW + timedelta(minutes=1) and s.idle_since == closed.finished
    assert s.current is None and s.answered == 3


def test_steer_without_an_answer_in_progress_takes_nothing():
    s = SessionState()
    send(s, "a")
    assert s.steer() == [] and len(s.queue) == 1


def test_a_failed_answer_is_closed_with_its_error():
    s = SessionState()
    send(s, "a")
    s.open(0, NOW, "run-1")
    closed = s.close(NOW, 2, USAGE, None, None, "MaxTurnsExceeded: …")
    assert (closed.output, closed.error, closed.turns) == (None, "MaxTurnsExceeded: …", 2)
    assert s.answered == 1 and s.current is None


def test_close_without_an_open_exchange_is_a_programming_error():
    with pytest.raises(AssertionError):
        SessionState().close(NOW, 1, USAGE, "x", None, None)


def test_a_long_prompt_is_kept_as_an_excerpt():
    s = SessionState()
    send(s, "x" * 1000)
    opened = s.open(0, NOW, "run-1")
    assert len(opened.text) == 1000
    assert s.current is not None and len(s.current.prompt) == 300 and s.current.prompt.endswith("…")


# -------------------------------------------------------------------------------------- find


def test_find_answers_from_this_execution_by_number_steered_number_or_the_last():
    s = SessionState()
    send(s, "a")
    answer(s, "run-1", output="A")
    send(s, "b")
    s.open(1, NOW, "run-1")
    send(s, "c")
    s.steer()
    for k, expected in [(1, 1), (2, 2), (3, 2), (0, 2)]:
        found = s.find(k)
        assert found.exchange is not None and found.exchange.message == expected
        assert (found.messages, found.execution) == (3, None)
    assert s.find(1).exchange.output == "A"


def test_find_says_nothing_yet_for_queued_unknown_and_future_messages():
    s = SessionState()
    assert s.find(0) == t.ExchangeAnswer(messages=0)
    send(s, "a", "b")
    answer(s, "run-1")
    for k in (2, 3, 99):
        assert s.find(k) == t.ExchangeAnswer(messages=2)


def test_find_points_to_the_earlier_execution_for_messages_no_longer_held_here():
    a = SessionState()
    for i in range(KEEP_EXCHANGES + 3):
        send(a, f"m{i + 1}")
        answer(a, "run-A", turn=i)
    b = SessionState(a.to_carry("run-A"))
    assert b.exchanges[0].message == 4
    for k in (1, 2, 3):
        assert b.find(k) == t.ExchangeAnswer(messages=13, execution="run-A")
    found = b.find(4)
    assert found.exchange is not None and found.exchange.message == 4 and found.execution is None
    send(b, "m14")
    assert b.find(14) == t.ExchangeAnswer(messages=14)  # queued: not answered anywhere yet


def test_find_after_two_continues_points_each_old_message_to_the_execution_that_answered_it():
    a = SessionState()
    for _ in range(KEEP_EXCHANGES + 2):  # 1-12 in run-A
        send(a, "x")
        answer(a, "run-A")
    b = SessionState(a.to_carry("run-A"))
    for _ in range(KEEP_EXCHANGES + 3):  # 13-25 in run-B
        send(b, "x")
        answer(b, "run-B")
    c = SessionState(b.to_carry("run-B"))
    assert [sp.model_dump() for sp in c.spans] == [
        {"first": 1, "execution": "run-A"},
        {"first": 13, "execution": "run-B"},
    ]
    assert c.exchanges[0].message == 16
    assert {k: c.find(k).execution for k in (1, 12, 13, 15, 16)} == {
        1: "run-A",
        12: "run-A",
        13: "run-B",
        15: "run-B",
        16: None,
    }


def test_an_exchange_answered_across_a_continue_as_new_is_found_where_it_was_finished():
    a = SessionState()
    send(a, "long question")
    a.open(0, NOW, "run-A")  # continue-as-new mid-answer (continue_as_new_after turns)
    b = SessionState(a.to_carry("run-A"))
    b.close(NOW, 5, USAGE, "long answer", None, None, "run-B")
    for _ in range(KEEP_EXCHANGES):
        send(b, "x")
        answer(b, "run-B")
    c = SessionState(b.to_carry("run-B"))
    assert all(ex.message != 1 for ex in c.exchanges)
    assert c.find(1).execution == "run-B"  # only run-B holds message 1's answer


# ------------------------------------------------------------------------------------ status


def test_status_while_answering_waiting_ending_and_ended():
    s = SessionState()
    s.compactions = 2
    send(s, "a")
    status = s.status(60, ended=False, mid_turn="steer")
    assert (status.state, status.messages, status.answered, status.queued, status.last) == ("answering", 1, 0, 1, None)
    assert (status.compactions, status.mid_turn, status.idle_deadline) == (2, "steer", None)
    s.open(0, NOW, "run-1")
    status = s.status(60, ended=False, mid_turn="queue")
    assert status.state == "answering" and status.last is not None and status.last.message == 1
    s.close(NOW, 1, USAGE, "A", None, None)
    status = s.status(60, ended=False, mid_turn="queue")
    assert (status.state, status.answered, status.queued) == ("waiting", 1, 0)
    assert status.idle_deadline == NOW + timedelta(seconds=60)
    assert status.last is not None and status.last.output == "A"
    s.ending = t.EndSession(by="bob")
    status = s.status(60, ended=False, mid_turn="queue")
    assert (status.state, status.idle_deadline) == ("ending", None)
    status = s.status(60, ended=True, mid_turn="queue")
    assert (status.state, status.idle_deadline) == ("ended", None)


def test_status_is_answering_while_ending_with_messages_left():
    s = SessionState()
    send(s, "a")
    s.ending = t.EndSession(by="bob")
    assert s.status(60, ended=False, mid_turn="queue").state == "answering"


def test_waiting_without_an_idle_start_has_no_deadline():
    assert SessionState().status(60, ended=False, mid_turn="queue").idle_deadline is None


# ---------------------------------------------------------------------------- continue-as-new


def test_the_carry_round_trip_keeps_the_queue_ids_and_last_exchanges_and_adds_this_executions_span():
    s = SessionState(t.SessionCarry(spans=[t.ExchangeSpan(first=1, execution="run-0")], messages=0))
    for i in range(KEEP_EXCHANGES + 2):
        s.accept(msg(f"m{i + 1}", f"id-{i + 1}"), NOW, False)
        answer(s, "run-1", turn=i)
    s.accept(msg("queued-1", "id-q1"), NOW, False)
    s.accept(msg("queued-2"), NOW, False)
    s.open(KEEP_EXCHANGES + 2, NOW, "run-1")  # message 13 is being answered
    s.ending = t.EndSession(by="bob", reason="done")
    s.compactions = 3
    s.idle_since = NOW

    carry = s.to_carry("run-1")
    again = SessionState(t.SessionCarry.model_validate_json(carry.model_dump_json()))  # as it travels

    assert again.messages == 14
    assert [(q.message, q.text, q.message_id) for q in again.queue] == [(14, "queued-2", "")]
    assert again.recent_ids == [*(f"id-{i}" for i in range(1, 13)), "id-q1"]
    assert [ex.message for ex in again.exchanges] == list(range(4, 14))
    assert len(again.exchanges) == KEEP_EXCHANGES
    assert again.current is not None and again.current.message == 13  # still being answered
    assert [ex.model_dump() for ex in again.exchanges] == [ex.model_dump() for ex in s.exchanges[-KEEP_EXCHANGES:]]
    assert [(sp.first, sp.execution) for sp in again.spans] == [(1, "run-0"), (1, "run-1")]
    assert (again.ending, again.compactions, again.idle_since) == (t.EndSession(by="bob", reason="done"), 3, NOW)
    assert again.answered == s.answered == 12
    assert again.accept(msg("m1 again", "id-1"), NOW, False).duplicate
    assert again.messages == 14


def test_an_execution_that_answered_nothing_adds_no_span():
    s = SessionState(t.SessionCarry(spans=[t.ExchangeSpan(first=1, execution="run-0")]))
    send(s, "a")
    assert s.to_carry("run-1").spans == [t.ExchangeSpan(first=1, execution="run-0")]


def test_a_repeat_after_a_continue_as_new_still_gets_its_first_number():
    s = SessionState()
    send(s, "a", "b")
    first = s.accept(msg("c", "id-3"), NOW, False)
    again = SessionState(s.to_carry("run-1")).accept(msg("c", "id-3"), NOW, False)
    assert again.duplicate and again.message == first.message == 3


def test_status_says_a_sessions_turn_limit_holds_for_each_message_not_for_the_turns_it_has_made():
    """A session's turns add up over its messages, and `max_turns` holds for each answer: status
    said "turn 9 of 8" after three answers of three turns each."""
    from durable_agent_runner.cli.status import render_status
    from durable_agent_runner.machine.state import RunState

    usage, ui = {"total_tokens": 10}, "http://localhost:8233/…"
    single = {"run_id": "r", "agent": "a", "status": "running", "turn": 3, "max_turns": 8, "usage": usage, "ui_url": ui}
    assert "turn:    3 of 8" in render_status(single)
    session = {**single, "turn": 9, "session": {"state": "waiting", "messages": 3, "answered": 3, "queued": 0}}
    assert "turn:    9 · at most 8 a message" in render_status(session)
    s = RunState()
    s.agent = t.AgentSpec(name="a", max_turns=8)
    s.turn = 9
    assert "turn 9 of 8" in s.details()
    s.session = SessionState()
    assert "turn 9 · at most 8 a message" in s.details()


def test_the_web_uis_details_say_a_message_was_not_answered_and_how_to_raise_a_spent_budget():
    """The run's current details in the Web UI showed a failed message's prompt alone; they say it
    was not answered, and for a spent budget the update that raises it for the next message."""
    s = SessionState()
    send(s, "weather?")
    s.open(0, NOW, "run-1")
    s.close(NOW, 2, USAGE, None, None, "TokenBudgetExceeded: token budget spent: 916 of 600", "run-1")
    shown = s.details()
    assert "**message 1** (alice): weather?\n\n**not answered:** TokenBudgetExceeded: token budget spent" in shown
    assert 'Send an Update → `agent.resume`, `{"by": "you", "add_tokens": 50000}`' in shown
    send(s, "again?")
    s.open(2, NOW, "run-1")
    s.close(NOW, 3, USAGE, None, None, "ModelBehaviorError: no reply", "run-1")
    assert "**not answered:** ModelBehaviorError" in s.details() and "Raise" not in s.details()


def test_status_says_a_failed_answer_is_not_the_agents_and_how_to_raise_a_spent_budget():
    """`client.py status` of a session whose last answer failed printed the error as `agent: …`,
    as if the agent had said it; it says it was not answered and, for a budget, how to raise it."""
    from durable_agent_runner.cli.status import render_status
    from durable_agent_runner.client.errors import cli

    usage, ui = {"total_tokens": 916}, "http://localhost:8233/…"
    last = {"message": 1, "by": "cli", "prompt": "weather?", "output": None, "error": "TokenBudgetExceeded: spent"}
    session = {"state": "waiting", "messages": 1, "answered": 1, "queued": 0, "last": last}
    s = {
        "run_id": "chat-1",
        "agent": "a",
        "status": "waiting",
        "turn": 2,
        "usage": usage,
        "ui_url": ui,
        "session": session,
    }
    shown = render_status(s)
    assert "  ✗ not answered: TokenBudgetExceeded: spent\n" in shown and "agent: Token" not in shown
    assert f"raise its budget for the next message: {cli()} resume chat-1 --add-tokens N" in shown
    answering = {**s, "session": {**session, "state": "answering", "last": {**last, "error": None}}}
    assert "  agent: (answering…)" in render_status(answering)
