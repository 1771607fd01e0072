"""Every workflow patch the workflow code asks (`workflow.patched`), and its life: the one place
each patch id is written.

A patch lets changed workflow code carry on the runs older code started: the new path runs behind
`workflow.patched(ID)`, which records a marker in the runs that take it and answers False when a
history recorded before the change is replayed. A patch lives through three releases:

1. `added_in`: the code asks `workflow.patched(ID)` and keeps the old path for runs started
   before; a history recorded with the marker is checked in (`history`, under tests/histories/)
   and must keep replaying.
2. `deprecate_in`: no run started before `added_in` is running any more, so the old path goes and
   the call becomes `workflow.deprecate_patch(ID)` (runs that recorded the marker still replay).
3. `remove_in`: no run started before `deprecate_in` is running any more, so the call goes.

2.0 is a new workflow version (`RELEASE_2_PATCH`, asked first by every execution:
workflows/versions.py). A run started on 2.0 code takes every 1.x patch's path without asking it,
so its history holds that one marker: 2.0's histories are fresh. A run started on 1.x code still
asks each 1.x patch, and finishes on 2.0 workers. So the 1.x patches skip step 2: their old paths
go together in 2.1, once no run started on 1.x is running (docs/patches.md says how to tell).

Temporal-free (no temporalio import), so the tests read it without a worker:
tests/test_patches.py holds every entry to the code, the histories, the package's version and
docs/patches.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# The ids, each written once: the workflow code asks them by these names.
IN_DOUBT_PATCH = "in-doubt-1.1"
TREE_BUDGET_PATCH = "tree-budget-1.1"
FORK_LIVE_TOOLS_PATCH = "fork-live-tools-1.1"
CALL_AHEAD_PATCH = "call-ahead-1.2"
FORK_ONCE_PATCH = "fork-once-asks-1.3"
GIVEN_BUDGET_PATCH = "given-budget-first-1.3"
MODEL_FALLBACK_PATCH = "model-fallback-1.4"
SESSION_PROMPT_PATCH = "session-prompt-first-1.4"
NOTIFY_PATCH = "notify-1.4"
ASK_PERSON_PATCH = "ask-person-1.4"
OUTSIDE_PATCH = "outside-completion-1.4"
EVAL_CANCEL_PATCH = "eval-cancel-resolve-1.4.2"
EVAL_PACE_PATCH = "eval-pace-1.4.4"
EVAL_INLINE_PATCH = "eval-inline-score-1.4.5"
EVAL_BEAT_PATCH = "eval-score-beat-1.4.5"
AHEAD_CONTINUE_PATCH = "no-ahead-before-continue-1.4.8"
RELEASE_2_PATCH = "release-2.0"
EVAL_LANES_PATCH = "eval-lanes-2.0.1"
BREAK_TOOLS_PATCH = "break-tools-2.0.2"
SESSION_RAISE_PATCH = "session-raise-2.0.4"
CANCEL_RESOLVE_PATCH = "cancel-in-resolve-2.0.5"

# What 1.x patches share: each ends with the 1.x runs (see the module's docstring).
_WITH_1X = (
    "no deprecate_patch step: every run started on 2.0 takes it without asking (release-2.0); its old path goes in "
    "2.1 with the other 1.x paths, once `client.py list --started-on-1x` and `client.py eval list --started-on-1x` "
    "show nothing running"
)


@dataclass(frozen=True)
class Patch:
    id: str  # the marker's id, as recorded in history
    changes: str  # what the patched path does, in one line
    added_in: str  # the release whose workflow code first asked it
    history: str  # tests/histories/<history>.json: a run recorded with its marker
    deprecate_in: str | None  # the release that turns it into deprecate_patch; None: skipped (see plan)
    remove_in: str  # the release whose workflow code no longer names it
    plan: str  # how the runs that still need it finish before `remove_in`


PATCHES: tuple[Patch, ...] = (
    Patch(
        id=IN_DOUBT_PATCH,
        changes="a `once` tool's attempt that ends without a result puts the call in doubt for a person",
        added_in="1.1",
        history="in_doubt_1_1",
        deprecate_in=None,
        remove_in="2.1",
        plan=_WITH_1X,
    ),
    Patch(
        id=TREE_BUDGET_PATCH,
        changes="budgets across a tree of runs: a run handed a budget keeps a ledger",
        added_in="1.1",
        history="budget_children_1_1.call_1_0",
        deprecate_in=None,
        remove_in="2.1",
        plan=_WITH_1X,
    ),
    Patch(
        id=FORK_LIVE_TOOLS_PATCH,
        changes="a fork made with --live-tools runs its recorded calls again before its first model call",
        added_in="1.1",
        history="fork_live_tools_1_1.fork",
        deprecate_in=None,
        remove_in="2.1",
        plan=_WITH_1X,
    ),
    Patch(
        id=CALL_AHEAD_PATCH,
        changes="a lone routed tool's activity makes the next model call too",
        added_in="1.2",
        history="call_ahead_1_2",
        deprecate_in=None,
        remove_in="2.1",
        plan=_WITH_1X,
    ),
    Patch(
        id=FORK_ONCE_PATCH,
        changes="a --live-tools fork asks a person before it runs a `once` call again, as for a call in doubt",
        added_in="1.3",
        history="fork_once_1_3.fork",
        deprecate_in=None,
        remove_in="2.1",
        plan=_WITH_1X,
    ),
    # `patched` right after the resolve, a local activity, is not replay-safe, and runs handed a
    # budget asked `tree-budget-1.1` there before 1.3: a status query that reaches the run while
    # the resolve runs makes the worker complete the first workflow task with the resolve's marker
    # alone, so the code after the resolve asks in the second task and its marker is recorded
    # there. A replay resolves the local activity from the first task and asks before the second
    # task's markers are announced: False, and the replay fails on the marker
    # (tests/test_budget_given_replay.py). Such runs only replay where the marker came in the
    # resolve's task; those recorded before 1.3 still ask there (`first` False in AgentRun._budget).
    Patch(
        id=GIVEN_BUDGET_PATCH,
        changes="a run handed a budget that resolves its agent asks its budget's patch before the resolve, not after",
        added_in="1.3",
        history="budget_given_1_3",
        deprecate_in=None,
        remove_in="2.1",
        plan=_WITH_1X,
    ),
    Patch(
        id=MODEL_FALLBACK_PATCH,
        changes="a model call that failed for good sends the turn to the agent's next model (fallback_models)",
        added_in="1.4",
        history="model_fallback_1_4",
        deprecate_in=None,
        remove_in="2.1",
        plan=_WITH_1X,
    ),
    Patch(
        id=SESSION_PROMPT_PATCH,
        changes="a session takes its opening prompt as message 1 when it starts, before any message's handler runs",
        added_in="1.4",
        history="session_prompt_1_4",
        deprecate_in=None,
        remove_in="2.1",
        plan=_WITH_1X,
    ),
    Patch(
        id=NOTIFY_PATCH,
        changes="a wait for a person (approval, doubt, budget pause) notifies the run's channels and escalates",
        added_in="1.4",
        history="notify_1_4",
        deprecate_in=None,
        remove_in="2.1",
        plan=_WITH_1X,
    ),
    Patch(
        id=ASK_PERSON_PATCH,
        changes="an `ask_person` call waits for a person's answer (a timer for its timeout), which is its result",
        added_in="1.4",
        history="ask_person_1_4",
        deprecate_in=None,
        remove_in="2.1",
        plan=_WITH_1X,
    ),
    Patch(
        id=OUTSIDE_PATCH,
        changes="a call of a tool that completes outside waits for its completion (a timer for its timeout)",
        added_in="1.4",
        history="outside_completion_1_4",
        deprecate_in=None,
        remove_in="2.1",
        plan=_WITH_1X,
    ),
    Patch(
        id=AHEAD_CONTINUE_PATCH,
        changes=(
            "a lone routed tool's activity makes no model call ahead when the run already knows it continues as new "
            "before that call (Temporal suggested it, or a session's history passed its bound)"
        ),
        added_in="1.4.8",
        history="ahead_continue_1_4_8",
        deprecate_in=None,
        remove_in="2.1",
        plan=_WITH_1X,
    ),
    Patch(
        id=EVAL_CANCEL_PATCH,
        changes="an eval cancelled while its agent's resolve waits ends cancelled, not failed (EvalRun)",
        added_in="1.4.2",
        history="eval_cancel_resolve_1_4_2",
        deprecate_in=None,
        remove_in="2.1",
        plan=_WITH_1X,
    ),
    Patch(
        id=EVAL_PACE_PATCH,
        changes=(
            "an eval starts its next case when a case's run ends, beside that case's scoring, and continues as new "
            "after 300 case starts, not 100 (EvalRun)"
        ),
        added_in="1.4.4",
        history="eval_pace_1_4_4",
        deprecate_in=None,
        remove_in="2.1",
        plan=_WITH_1X,
    ),
    Patch(
        id=EVAL_INLINE_PATCH,
        changes=(
            "an eval started with inline_scoring scores a case whose evaluators are all cheap pure built-ins "
            "(Contains, Equals, ...) in its workflow task, with no scoring activity (EvalRun)"
        ),
        added_in="1.4.5",
        history="eval_inline_1_4_5",
        deprecate_in=None,
        remove_in="2.1",
        plan=_WITH_1X,
    ),
    Patch(
        id=EVAL_BEAT_PATCH,
        changes="an eval's scoring activity has a heartbeat timeout of 10 s, not 30: a dead worker's is retried sooner",
        added_in="1.4.5",
        history="eval_score_beat_1_4_5",
        deprecate_in=None,
        remove_in="2.1",
        plan=_WITH_1X,
    ),
    Patch(
        id=EVAL_LANES_PATCH,
        changes=(
            "each of an eval's places is a lane that schedules a case's scoring and starts its next case in the step "
            "its run's end woke, so its commands do not depend on how Temporal's core splits a workflow task's events "
            "into activations (EvalRun)"
        ),
        added_in="2.0.1",
        history="eval_lanes_2_0_1",
        deprecate_in="2.1",
        remove_in="2.2",
        plan=(
            "once `client.py eval list` shows no eval running that started before 2.0.1 (a 2.0.0 eval that "
            "continues as new starts its next run on lanes), 2.1 drops the loop before lanes and asks "
            "deprecate_patch; 2.2 drops the call once no eval started before 2.1 is running"
        ),
    ),
    Patch(
        id=BREAK_TOOLS_PATCH,
        changes=(
            "a run whose breakpoints name a tool no agent of its team has fails at its start (BreakpointInvalid), "
            "before any model call, instead of never pausing there"
        ),
        added_in="2.0.2",
        history="break_tools_2_0_2",
        deprecate_in="2.1",
        remove_in="2.2",
        plan=(
            "asked only by a run started with breakpoints before named tools; once `client.py list` shows no run "
            "running that started before 2.0.2 with such breakpoints, 2.1 drops the old path and asks deprecate_patch; "
            "2.2 drops the call once no run started before 2.1 is running"
        ),
    ),
    Patch(
        id=SESSION_RAISE_PATCH,
        changes=(
            "a session waiting for its next message takes a budget raise (`resume --add-tokens N`) with no pause: "
            "before, a session whose budget was spent failed every later message, and a raise was refused "
            "(the run is not paused)"
        ),
        added_in="2.0.4",
        history="session_raise_2_0_4",
        deprecate_in="2.1",
        remove_in="2.2",
        plan=(
            "asked by every session at its start (each execution); once `client.py list --phase waiting_for_message` "
            "shows no session that started before 2.0.4, 2.1 drops the refusal and asks deprecate_patch; 2.2 drops the "
            "call once no session started before 2.1 is running"
        ),
    ),
    Patch(
        id=CANCEL_RESOLVE_PATCH,
        changes=(
            "a run cancelled while a worker that serves its agent resolves it (routed) ends cancelled: before, it "
            "failed with `ResolveAgentFailed: Cancelled`"
        ),
        added_in="2.0.5",
        history="cancel_resolve_2_0_5",
        deprecate_in="2.1",
        remove_in="2.2",
        plan=(
            "asked only where such a cancel is taken, so no other run records its marker; 2.1 drops the failure and "
            "asks deprecate_patch (a run cancelled mid-resolve has ended: no run is left to need the old path); 2.2 "
            "drops the call"
        ),
    ),
    Patch(
        id=RELEASE_2_PATCH,
        changes=(
            "a run or eval started on 2.0 code takes every 1.x patch's path without asking it, so its history holds "
            "this marker alone (workflows/versions.py)"
        ),
        added_in="2.0",
        history="weather_2_0",
        deprecate_in="2.1",
        remove_in="2.2",
        plan=(
            "once `client.py list --started-on-1x` and `client.py eval list --started-on-1x` show nothing running, "
            "2.1 drops every 1.x patch's old path and asks deprecate_patch here (2.0's histories still replay); 2.2 "
            "drops the call once no run started before 2.1 is running"
        ),
    ),
)


def release(version: str) -> tuple[int, ...]:
    """'1.2' or '1.2.0' as a comparable tuple, (1, 2) or (1, 2, 0); a suffix (`rc1`, `+local`) is dropped."""
    found = re.match(r"\d+(?:\.\d+)*", version)
    return tuple(int(part) for part in found.group().split(".")) if found else ()
