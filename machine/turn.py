"""The whole turn as one pure state machine: the workflow carries out each step and feeds back
what happened; `Turn.next` chooses the next step. No Temporal, no I/O, no clocks, no randomness:
the time and what only Temporal knows come in as `Facts` (tests/test_turn.py).

    Ready ──▶ [RerunRecorded: a --live-tools fork's calls] ─▶ [Stop | Pause: budget] ─▶ [ContinueAsNew]
          ──▶ [Breakpoint] ─▶ [Pause before_model] ─▶ [Steer] ─▶ [Compact] ─▶ CallModel
    ModelFailed ──▶ CallModel (the agent's next model: machine/fallback.py)
    Replied ──▶ Stop | RunTools (after [Pause before_tools]) | CheckOutput | Guardrails | Done
    ToolsRan ──▶ HandOff | Ready …   Reran ──▶ Ready …   OutputChecked ──▶ Ready (retry) | Stop | Guardrails | Done

A lone routed call may make the next model call itself (`RunTools.ahead`, CallAhead): its reply
comes back with ToolsRan, and `CallModel.made` hands it on when the turn reaches exactly that
call; when it does not (a pause, a steer, anything that changed meanwhile), the reply is dropped
and its tokens still count.

The steps form one union (`NextStep`; `Done` and `Stop` come from `workflows.rules`, whose
`decide` `client.py export` re-runs offline on captured replies).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from durable_agent_runner.machine import edits, fallback, memory, requests, rerun
from durable_agent_runner.machine.budget import Ledger, spent_words
from durable_agent_runner.machine.calls import (
    PlannedCall,
    RunTools,
    answered,
    budget_spent,
    describe_call,
    plan_calls,
    taken,
    with_ran,
    with_reply,
    without_dropped,
)
from durable_agent_runner.machine.outcomes import (
    BreakpointRan,
    Compacted,
    Facts,
    GuardrailsRan,
    HandedOff,
    ModelFailed,
    Outcome,
    OutputChecked,
    Ready,
    Replied,
    Resumed,
    Steered,
    ToolsRan,
)
from durable_agent_runner.machine.rerun import Reran, RerunRecorded
from durable_agent_runner.machine.rules import Done, Final, Retry, Stop, after_output, decide
from durable_agent_runner.machine.state import RunState
from durable_agent_runner.workflows.patches import AHEAD_CONTINUE_PATCH
from durable_agent_runner.workflows.types import (
    AgentSpec,
    AheadReply,
    EventKind,
    HookResult,
    ModelReply,
    ModelSwitch,
    PauseWhere,
    ToolMessage,
    UserMessage,
    WithReply,
)

# ------------------------------------------------------------------------------------- steps


@dataclass(frozen=True)
class ContinueAsNew:
    """Carry the run's state into a new execution (history stays small)."""


@dataclass(frozen=True)
class Breakpoint:
    """Run the agent's breakpoint function before model call `turn`; its edits apply."""

    name: str
    turn: int


@dataclass(frozen=True)
class Pause:
    """Hold still, durably, until a person resumes; edits apply meanwhile."""

    where: PauseWhere
    turn: int
    why: str
    reason: Literal["", "budget"] = ""


@dataclass(frozen=True)
class Steer:
    """A session's queued messages join the answer in progress."""


@dataclass(frozen=True)
class Compact:
    """A session's transcript nears its budget: compact the earlier exchanges."""

    plan: memory.Compaction


@dataclass(frozen=True)
class CallModel:
    """Call `agent`'s model; `guard`: the input its input guardrails check alongside (no tool runs
    before their verdict); `with_reply`: the cheap calls it may run with its reply."""

    agent: AgentSpec
    guard: str | None
    with_reply: WithReply | None
    max_output_tokens: int | None = None  # lower than the agent's: all the budget had left
    made: AheadReply | None = None  # already made by the last tool's activity, for exactly this call


@dataclass(frozen=True)
class HandOff:
    """The next model call is the target's, with the conversation through the handoff's filter."""

    call: PlannedCall


@dataclass(frozen=True)
class CheckOutput:
    """Check the candidate final output against the agent's output type."""

    output: str


@dataclass(frozen=True)
class Guardrails:
    """Run the agent's output guardrails on the answer."""

    answer: Done


Stage = Literal["begin", "model", "tools", "budget"]  # where an answer's turn is: what a Resumed goes on to

NextStep = (
    ContinueAsNew | Breakpoint | Pause | Steer | Compact | CallModel | RunTools | HandOff | CheckOutput | Guardrails
    | Done | Stop | RerunRecorded
)  # fmt: skip


# ------------------------------------------------------------------------------------ machine


class Turn:
    """One answer's turns over the run's state: `next(outcome, facts)` is the only way on.
    `guard`: the prompt the first call's input guardrails check (None: none). `ledger`: the
    run's budgets across its tree (machine/budget.py); None: none, or a run from before it."""

    def __init__(self, state: RunState, guard: str | None, ledger: Ledger | None = None) -> None:
        assert state.agent is not None
        self.s, self.ledger = state, ledger
        self.first = state.agent  # its limits (turns, budgets) and session settings hold for the run
        self.guard = guard
        self.base = state.answer_base()  # model calls before this answer (a session's earlier messages)
        self.calls = state.turn - self.base  # model calls this answer has made (in earlier executions too)
        self.plan: RunTools | None = None
        self.candidate = ""  # the final output the output type is checking
        self.answer: Done | None = None  # passed its output checks; its guardrails run
        self.stage: Stage = "begin"
        self.reruns: rerun.Reruns | None = None  # a fork's recorded calls, run again first (--live-tools)
        self.ahead: AheadReply | None = None  # a model call a tool's activity made ahead, not yet taken
        self.guarded: str | None = None  # the last model call's guard (a fallback makes it again)

    @property
    def number(self) -> int:
        """The model call's number within this answer (what max_turns counts)."""
        return self.s.turn - self.base

    def next(self, outcome: Outcome, facts: Facts) -> NextStep:
        s = self.s
        if isinstance(outcome, Ready):
            return self._begin(facts)
        if isinstance(outcome, BreakpointRan):
            return Pause("before_model", s.turn + 1, outcome.why) if outcome.why else self._model_turn()
        if isinstance(outcome, Resumed):
            if self.stage == "budget":  # a person raised the budget (or not): check it again
                return self._begin(facts)
            return self._replan() if self.stage == "tools" else self._model_turn()
        if isinstance(outcome, Steered):
            return self._fit_memory()
        if isinstance(outcome, Compacted):
            return self._call_model()
        if isinstance(outcome, Replied):
            return self._replied(outcome.reply, facts)
        if isinstance(outcome, ModelFailed):
            return self._fall_back(outcome, facts)
        if isinstance(outcome, ToolsRan):
            assert self.plan is not None
            for m in self._merge(outcome.results, facts):
                s.messages.append(m)
            handoff, self.plan = self.plan.handoff, None
            self.ahead = outcome.ahead
            step = HandOff(handoff) if handoff is not None else self._begin(facts)
            if self.ahead is not None:  # not the call the turn makes now: dropped, its tokens counted
                self._drop_ahead(self.ahead, facts)
            return step
        if isinstance(outcome, HandedOff):
            return self._begin(facts)
        if isinstance(outcome, Reran):
            s.replace_messages(rerun.merged(s.messages, outcome.results))
            return self._begin(facts)
        if isinstance(outcome, OutputChecked):
            return self._output_checked(outcome.check, facts)
        assert isinstance(outcome, GuardrailsRan)
        assert self.answer is not None
        return outcome.stop or self.answer

    # ---------------------------------------------------------------------- before the model

    def _begin(self, facts: Facts) -> NextStep:
        s, first = self.s, self.first
        if s.live_tools:  # a fork made with --live-tools: its recorded calls run again, before any model call
            s.live_tools, self.reruns = False, rerun.Reruns.of(s)
        if self.reruns is not None:
            again, self.reruns = self.reruns.next(s)
            if again is not None:
                return again
        if self.ledger is not None:  # spent or reserved: no model call after that
            over = self.ledger.stop(s.usage, f"before model call {s.turn + 1}", first=not self.calls)
            if over is not None and self.ledger.pauses(over):  # on_budget="pause": a person raises it
                self.stage = "budget"
                return Pause("before_model", s.turn + 1, f"budget: {over.message}", "budget")
            if over is not None:
                return over
        spent = budget_spent(first.token_budget, s.usage.total_tokens, first.cost_budget_usd, s.usage.cost_usd)
        if spent is not None and self.calls and self.ledger is None:  # child runs spent it
            return Stop(error=spent, message=f"{spent_words(first, s.usage)} before model call {s.turn + 1}")
        if should_continue(s, first, facts):
            return ContinueAsNew()
        self.stage = "begin"
        why = edits.before_model(s.breakpoints, s.turn + 1) or s.pause_reason()
        if why is not None:
            return Pause("before_model", s.turn + 1, why)
        agent = s.agent_now
        if agent.breakpoint:
            return Breakpoint(agent.breakpoint, s.turn + 1)
        return self._model_turn()

    def _model_turn(self) -> NextStep:
        s = self.s
        s.turn += 1
        s.turns_here += 1
        session = s.session
        if session is not None and self.calls and self.first.mid_turn == "steer" and session.queue:
            return Steer()
        return self._fit_memory()

    def _fit_memory(self) -> NextStep:
        if self.s.session is not None:
            plan = memory.plan(self.s.messages, self.first.memory, self.s.last_input_tokens)
            if plan is not None:
                return Compact(plan)
        return self._call_model()

    def _fall_back(self, failed: ModelFailed, facts: Facts) -> NextStep:
        """The same turn, on the agent's next model: the switch is in state and in the story."""
        s, agent = self.s, self.s.agent_now
        lost = fallback.thinking_lost(s.messages, agent.fallback_models[0])
        why = f"{failed.error}: {failed.message}"
        detail = fallback.switch_words(agent, why, lost)
        to = agent.fallback_models[0]
        s.switches.append(
            ModelSwitch(agent=agent.name, turn=s.turn, from_model=agent.model or "", to_model=to, why=why, at=facts.now)
        )
        # In the run's state: a worker killed after the switch resumes on the model the run reached.
        assert s.agent is not None
        s.agent = fallback.switched(s.agent, agent.name)
        s.event(facts.now, EventKind.MODEL_FALLBACK, detail=detail)
        self.calls -= 1  # the same model call, made again: max_turns counts it once
        self.guard = self.guarded
        return self._call_model()

    def _call_model(self) -> NextStep:
        s = self.s
        self.calls += 1
        s.mark()
        self.stage = "model"
        guard, self.guard = self.guard, None
        self.guarded = guard  # a fallback makes the call again, guardrails and all
        ahead = None
        if guard is None and s.pause_request is None:
            ahead = with_reply(
                s.agent_now,
                self.number,
                limits=self.limits,
                tokens_used=s.usage.total_tokens,
                cost_used=s.usage.cost_usd,
                breakpoints=s.breakpoints,
            )
        cap = self.ledger.reserve(s.agent_now, s.usage) if self.ledger is not None else None
        made = None
        if self.ahead is not None and requests.same_call(self.ahead.request, s, guard, ahead, cap):
            made, self.ahead = self.ahead, None
        return CallModel(s.agent_now, guard, ahead, cap, made)

    def _drop_ahead(self, made: AheadReply, facts: Facts) -> None:
        self.ahead = None
        self.s.add_usage(made.request.agent, made.reply.usage, made.request.model)
        why = "a model call made with the tool's result, not used: the run changed while the tool ran"
        self.s.event(facts.now, EventKind.MODEL_DROPPED, detail=why, usage=made.reply.usage)

    # ---------------------------------------------------------------------- after the model

    def _replied(self, reply: ModelReply, facts: Facts) -> NextStep:
        s, agent = self.s, self.s.agent_now
        asked = [c.call_id for c in reply.message.tool_calls]
        s.claim_call_ids(reply.message)
        ran = taken(asked, reply)
        s.messages.append(reply.message)
        s.add_usage(agent.name, reply.usage, agent.model)
        if self.ledger is not None:
            self.ledger.settle()
        s.last_input_tokens = reply.usage.input_tokens
        names = ", ".join(describe_call(c, 60) for c in reply.message.tool_calls)
        if reply.finish_reason in ("length", "content_filter"):  # cut short, or withheld by the provider
            names = ", ".join(filter(None, [names, f"stopped: {reply.finish_reason}"]))
        s.event(facts.now, EventKind.MODEL_FINISHED, text=reply.message.content or "", detail=names, usage=reply.usage)
        step = decide(
            agent,
            self.number,
            reply,
            limits=self.limits,
            tokens_used=s.usage.total_tokens,
            always=s.approvals.always,
            cost_used=s.usage.cost_usd,
        )
        over = None
        if isinstance(step, Stop) and self.ledger is not None and self.ledger.pauses(step):  # calls wait for a raise
            over = Pause("before_tools", s.turn, f"budget: {step.message}", "budget")
            step = plan_calls(agent, reply.message.tool_calls, s.approvals.always)
        if isinstance(step, Stop):
            return step
        if isinstance(step, Final):
            return self._final(step.output, facts)
        self.plan = with_ran(step, ran)
        self.stage = "tools"
        if over is not None:
            return over
        why = edits.before_tools(s.breakpoints, reply.message.tool_calls) or s.pause_reason()
        if why is not None:
            return Pause("before_tools", s.turn, why)
        made_ahead = requests.plan_ahead(
            self.plan, s, self.first, self.limits, self.number, planned=self.ledger is None and self.reruns is None
        )
        if made_ahead is not None and facts.continues(s.session is not None) and facts.patched(AHEAD_CONTINUE_PATCH):
            made_ahead = None  # the run continues as new before its next model call: a reply made ahead is dropped
        return self.plan.model_copy(update={"ahead": made_ahead})

    @property
    def limits(self) -> AgentSpec:
        """The run's limits: its first agent's, with the budgets its ledger holds."""
        return self.ledger.limits(self.first) if self.ledger is not None else self.first

    def _replan(self) -> NextStep:
        """After a pause before tools: the calls as the person left them (edited, dropped)."""
        s, plan = self.s, self.plan
        assert plan is not None
        edited = s.messages[-1]
        calls = getattr(edited, "tool_calls", [])
        if calls:  # the results brought back with the reply still count for unchanged arguments
            ran = {p.call.call_id: (p.ran_arguments, p.ran) for p in plan.calls if p.ran is not None}
            replan = with_ran(plan_calls(s.agent_now, calls, s.approvals.always), ran)
            plan = self.plan = without_dropped(replan, s.dropped_calls)
        return plan

    def _merge(self, results: dict[str, ToolMessage], facts: Facts) -> list[ToolMessage]:
        assert self.plan is not None
        messages = [results.get(p.call.call_id) or answered(p) for p in self.plan.calls]
        for m in messages:
            if m.call_id not in results:  # answered without running anything
                self.s.event(facts.now, EventKind.TOOL_FINISHED, call_id=m.call_id, tool=m.name, text=m.content)
        return messages

    # ------------------------------------------------------------------------------ output

    def _final(self, output: str, facts: Facts) -> NextStep:
        agent = self.s.agent_now
        if agent.output_schema is not None:
            self.candidate = output
            return CheckOutput(output)
        return self._checked(after_output(agent, output, None, 0), facts)

    def _output_checked(self, check: HookResult, facts: Facts) -> NextStep:
        s, agent = self.s, self.s.agent_now
        if check.invalid is not None:
            s.refusals[agent.name] = s.refusals.get(agent.name, 0) + 1
        return self._checked(after_output(agent, self.candidate, check, s.refusals.get(agent.name, 0)), facts)

    def _checked(self, outcome: Done | Retry | Stop, facts: Facts) -> NextStep:
        if isinstance(outcome, Retry):
            self.s.messages.append(UserMessage(content=outcome.feedback))
            self.s.event(facts.now, EventKind.OUTPUT_REFUSED, text=outcome.feedback)
            return self._begin(facts)
        if isinstance(outcome, Stop):
            return outcome
        self.answer = outcome
        return Guardrails(outcome) if self.s.agent_now.output_guardrails else outcome


def should_continue(s: RunState, first: AgentSpec, facts: Facts) -> bool:
    """Whether the run continues as new before its next model call (or a session's next message)."""
    return s.turns_here >= first.continue_as_new_after or facts.continues(s.session is not None)
