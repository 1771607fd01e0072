"""A session's memory budget (machine/memory.py) and the transcript rewrites it causes in the run's
state (machine/state.py: which fork marks survive, where a fork may start), without Temporal."""

from __future__ import annotations

import re

import pytest

from durable_agent_runner.machine.memory import Compaction, compacted, plan, transcript_bytes
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.workflows import types as t

BIG = t.MemoryPolicy(budget_bytes=1_000_000, keep_exchanges=2)


def exchange(n: int, tools: int = 0, filler: str = "") -> list[t.Message]:
    """User message n, then (optionally) a reply with `tools` calls and their results, then the answer."""
    messages: list[t.Message] = [t.UserMessage(content=f"question {n} {filler}")]
    if tools:
        calls = [t.ToolCall(call_id=f"c{n}_{i}", name="lookup") for i in range(tools)]
        messages.append(t.AssistantMessage(tool_calls=calls))
        messages += [t.ToolMessage(call_id=c.call_id, name="lookup", content=f"result {filler}") for c in calls]
    messages.append(t.AssistantMessage(content=f"answer {n}"))
    return messages


def conversation(exchanges: int, tools: int = 0, filler: str = "") -> list[t.Message]:
    """`exchanges` answered exchanges, then the user message being answered now."""
    messages = [m for n in range(1, exchanges + 1) for m in exchange(n, tools, filler)]
    return [*messages, t.UserMessage(content=f"question {exchanges + 1}")]


def starts(messages: list[t.Message]) -> list[int]:
    return [i for i, m in enumerate(messages) if isinstance(m, t.UserMessage)]


# --------------------------------------------------------------------------------------- plan


def test_transcript_bytes_is_the_json_size_without_approval_records():
    messages = conversation(2, tools=1)
    assert transcript_bytes(messages) == sum(len(m.model_dump_json(exclude={"approval"})) for m in messages)
    with_record = [m.model_copy(deep=True) for m in messages]
    tool = next(m for m in with_record if isinstance(m, t.ToolMessage))
    tool.approval = t.ApprovalRecord(
        call_id=tool.call_id, tool="lookup", approved=True, by="x" * 500, at="2026-01-01T00:00:00Z"
    )
    assert transcript_bytes(with_record) == transcript_bytes(messages)


def test_under_both_budgets_nothing_is_compacted():
    messages = conversation(10, tools=2)
    size = transcript_bytes(messages)
    policy = t.MemoryPolicy(budget_bytes=size + 1, budget_tokens=5000)
    assert plan(messages, policy, last_input_tokens=4999) is None
    assert plan(messages, t.MemoryPolicy(budget_bytes=size + 1), last_input_tokens=10**9) is None  # no token budget


def test_over_the_byte_budget_cuts_at_a_user_message_keeping_the_last_exchanges_and_the_one_in_progress():
    messages = conversation(6, filler="x" * 300)
    size = transcript_bytes(messages)
    result = plan(messages, t.MemoryPolicy(budget_bytes=size, keep_exchanges=2, strategy="trim"))
    assert isinstance(result, Compaction)
    assert result.upto == starts(messages)[-3] == 8  # exchanges 5 and 6 and question 7 are kept
    assert isinstance(messages[result.upto], t.UserMessage) and messages[result.upto].content.startswith("question 5")
    assert result.strategy == "trim"
    assert result.reason == f"transcript {size:,} bytes ≥ budget {size:,}"


def test_over_the_token_budget_cuts_the_same_way_and_says_which_budget():
    messages = conversation(6)
    result = plan(messages, t.MemoryPolicy(budget_bytes=10**6, budget_tokens=1000, keep_exchanges=0), 1000)
    assert result is not None and result.upto == starts(messages)[-1] == 12  # only the one in progress is kept
    assert result.strategy == "summarize"
    assert result.reason == "last call read 1,000 tokens ≥ budget 1,000"


def test_over_both_budgets_the_reason_names_both():
    messages = conversation(4, filler="w" * 300)
    size = transcript_bytes(messages)
    result = plan(messages, t.MemoryPolicy(budget_bytes=1000, budget_tokens=10, keep_exchanges=1), 11)
    assert size > 1000 and result is not None
    assert result.reason == f"transcript {size:,} bytes ≥ budget 1,000; last call read 11 tokens ≥ budget 10"


@pytest.mark.parametrize("keep", [0, 1, 2, 3])
def test_a_cut_never_falls_between_a_tool_call_and_its_result(keep):
    messages = conversation(5, tools=3, filler="y" * 200)
    result = plan(messages, t.MemoryPolicy(budget_bytes=1000, keep_exchanges=keep))
    assert result is not None
    kept = messages[result.upto :]
    asked = {c.call_id for m in kept if isinstance(m, t.AssistantMessage) for c in m.tool_calls}
    answered = {m.call_id for m in kept if isinstance(m, t.ToolMessage)}
    assert asked == answered and isinstance(kept[0], t.UserMessage)
    assert sum(isinstance(m, t.UserMessage) for m in kept) == keep + 1


@pytest.mark.parametrize("exchanges", [0, 1, 2])
def test_too_few_exchanges_to_keep_means_nothing_to_compact(exchanges):
    messages = conversation(exchanges, filler="z" * 2000)
    policy = t.MemoryPolicy(budget_bytes=1000, budget_tokens=1, keep_exchanges=2)
    assert plan(messages, policy, last_input_tokens=5) is None  # over budget, yet nothing may go


def test_only_an_earlier_summary_before_the_kept_exchanges_means_nothing_to_compact():
    summary = t.UserMessage(content="Summary: " + "s" * 2000, summary_of=30)
    messages = [summary, *conversation(2, filler="z" * 2000)]
    assert plan(messages, t.MemoryPolicy(budget_bytes=1000, keep_exchanges=2)) is None
    messages = [summary, *conversation(3, filler="z" * 2000)]  # one more exchange: it is compacted with the summary
    result = plan(messages, t.MemoryPolicy(budget_bytes=1000, keep_exchanges=2))
    assert result is not None and result.upto == 3


def test_a_steered_message_does_not_split_the_exchange_in_progress():
    call = t.ToolCall(call_id="c4", name="lookup")
    in_progress: list[t.Message] = [
        t.UserMessage(content="question 4"),
        t.AssistantMessage(tool_calls=[call]),
        t.ToolMessage(call_id="c4", name="lookup", content="r"),
        t.UserMessage(content="and also this"),  # steered into the answer to question 4
    ]
    messages = [*conversation(3, filler="v" * 500)[:-1], *in_progress]
    result = plan(messages, t.MemoryPolicy(budget_bytes=1000, keep_exchanges=0))
    assert result is not None and messages[result.upto].content == "question 4"


# ---------------------------------------------------------------------------------- compacted


def test_compacted_replaces_the_head_with_one_summary_message():
    messages = conversation(3, tools=1)
    upto = starts(messages)[-2]
    result = compacted(messages, upto, "they asked three things")
    assert result[1:] == messages[upto:]
    head = result[0]
    assert isinstance(head, t.UserMessage) and head.summary_of == upto
    assert head.content == f"Summary of our conversation so far ({upto} earlier messages):\nthey asked three things"


def test_compacted_without_a_summary_leaves_a_note_that_they_were_dropped():
    messages = conversation(3)
    result = compacted(messages, 6, None)
    assert result[1:] == messages[6:]
    assert result[0] == t.UserMessage(
        content="[6 earlier messages of this conversation were dropped to keep it within its memory budget]",
        summary_of=6,
    )


def test_an_earlier_summary_counts_the_messages_it_stood_for():
    messages = [t.UserMessage(content="Summary…", summary_of=40), *conversation(3)]
    result = compacted(messages, 4, "newer")
    assert result[0].summary_of == 40 + 3
    assert "(43 earlier messages)" in result[0].content
    assert compacted(result, 3, None)[0].summary_of == 43 + 2


# ------------------------------------------------------------------------- state: fork marks


def run(turns: int) -> RunState:
    """A run after `turns` model calls, each marked before it read the transcript."""
    s = RunState()
    s.agent = t.AgentSpec(name="a")
    s.messages = [t.UserMessage(content="go")]
    for turn in range(1, turns + 1):
        s.turn = turn
        s.mark()
        call = t.ToolCall(call_id=f"c{turn}", name="lookup")
        result = t.ToolMessage(call_id=call.call_id, name="lookup", content="r")
        s.messages += [t.AssistantMessage(tool_calls=[call]), result]
    return s


def test_marks_record_the_transcript_length_before_each_model_call():
    assert run(3).marks == {1: 1, 2: 3, 3: 5}


def test_replacing_the_transcript_keeps_only_the_marks_whose_head_is_unchanged():
    s = run(4)  # marks {1: 1, 2: 3, 3: 5, 4: 7}; 9 messages
    edited = [m.model_copy(deep=True) for m in s.messages]
    edited[4] = edited[4].model_copy(update={"content": "edited"})
    s.replace_messages(edited)
    assert s.marks == {1: 1, 2: 3}  # turn 3 read item 4 as it was
    assert s.messages == edited and s.messages is not edited


def test_appending_through_replace_keeps_every_mark_and_a_new_head_keeps_none():
    s = run(3)
    s.replace_messages([*s.messages, t.UserMessage(content="more")])
    assert s.marks == {1: 1, 2: 3, 3: 5}
    s.replace_messages(s.messages[:5])  # the tail after turn 3's read is gone: turn 3 still read the same
    assert s.marks == {1: 1, 2: 3, 3: 5}
    s.replace_messages(s.messages[:4])
    assert s.marks == {1: 1, 2: 3}
    s.replace_messages(compacted(s.messages, 3, "summary"))
    assert s.marks == {}


def test_replace_messages_resets_the_digest():
    s = run(2)
    before = s.digest()
    s.replace_messages(s.messages[:3])
    assert s.digest() != before and s.digest() == run(1).digest()


# ------------------------------------------------------------------------- state: fork point


def test_a_fork_before_a_marked_turn_starts_from_the_transcript_that_call_read():
    s = run(3)
    s.handoffs = [t.HandoffRecord(from_agent="a", to_agent="b", turn=2, at="2026-01-01T00:00:00Z", call_id="c2")]
    point = s.fork_point(2)
    assert (point.turn, point.messages, point.current, point.handoffs) == (1, s.messages[:3], None, [])
    point = s.fork_point(3)
    assert (point.turn, point.messages, point.current) == (2, s.messages[:5], "b")
    assert point.handoffs == s.handoffs and point.agent == s.agent


def test_a_fork_before_the_next_call_of_a_live_run_takes_the_whole_transcript():
    s = run(3)
    s.messages.append(t.UserMessage(content="inserted while paused"))
    point = s.fork_point(4)
    assert (point.turn, point.messages) == (3, s.messages)


def test_a_finished_run_has_no_next_call_to_fork_before():
    s = run(3)
    s.phase = "completed"
    with pytest.raises(ValueError) as info:
        s.fork_point(4)
    assert "kept for turns 1-3 (a handoff filter" in str(info.value)


def test_a_fork_before_an_unmarked_earlier_turn_is_refused_saying_which_turns_are_kept():
    s = run(4)
    s.replace_messages(compacted(s.messages, 3, "summary"))  # a compaction drops every mark
    s.turn = 5
    s.mark()
    with pytest.raises(ValueError) as info:
        s.fork_point(2)
    message = str(info.value)
    assert message.startswith("cannot fork before model call 2: this run made 5 model call(s)")
    assert re.search(r"kept for turns? 5(-5)? or turn 6 \(", message), message


def test_a_fork_with_no_turn_kept_says_so():
    s = run(2)
    s.replace_messages([t.UserMessage(content="rewritten")])
    with pytest.raises(ValueError) as info:
        s.fork_point(1)
    assert "kept for no earlier turn or turn 3 (" in str(info.value)


def test_the_refusal_does_not_claim_a_turn_it_refuses_is_kept():
    s = run(4)  # marks {1: 1, 2: 3, 3: 5, 4: 7}
    edited = list(s.messages)
    edited.insert(3, t.UserMessage(content="note"))  # paused before model call 5, a person inserted at item 3
    s.replace_messages(edited)
    s.turn = 5
    s.mark()
    assert s.marks == {1: 1, 2: 3, 5: 10}
    with pytest.raises(ValueError) as info:
        s.fork_point(3)
    assert "turns 1-5" not in str(info.value)
