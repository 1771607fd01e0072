"""What the client raises: one small tree, so `except AgentRunError` catches all of it.

    AgentRunError              anything the client says went wrong with a run (one readable line)
    ├── RunNotFound            no run has that id (in this namespace)
    │   └── NotThatKind        the id is of another kind: an eval's given for a run's, or back
    ├── IdTaken                a new run, session, fork or eval's id is held, running or ended
    │                          (also temporalio's WorkflowAlreadyStartedError)
    ├── DecisionRefused        the run refused what was asked, and recorded nothing: an approval
    │                          for a call that is not waiting (unknown id, already decided),
    │                          edited arguments its tool refuses, a message to a run that is not a
    │                          session, anything sent to a run that has ended
    ├── StillRunning           `result(timeout=...)`: the run had not ended in time;
    │                          `waiting_for` says what it waits for a person on, if anything
    ├── NoWorkerAnswered       no worker took what was sent within `wait` seconds. It is not
    │                          recorded: a worker that starts soon may still apply it, once, or
    │                          never; sending the same again is safe (it counts once)
    ├── RunFailed              the run ended without an answer; `error_type` is the run's own:
    │   │                      MaxTurnsExceeded, InputGuardrailTripwireTriggered, a budget, the
    │   │                      provider's error, TerminatedError, TimeoutError, ...
    │   └── RunCancelled       someone cancelled it
    └── EventsUnavailable      `events()` gave up: its reads failed `give_up_after` times in a row

Arguments that are wrong before anything is sent (a bad run id, bad model settings, a wait that
is not a finite number of seconds) are `ValueError`s (`checks.BadArgument`, naming the argument),
and arguments of the wrong type `TypeError`s, as Python's own are (durable_agent_runner/client/checks.py).

The words these say are defined here once, for the CLI and the console too: a workflow's kind
(`noun`, `KINDS`), a status (`STATUS_NAMES`), and a command a person can type (`cli`, `worker`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError, WorkflowAlreadyStartedError

from durable_agent_runner.workflows import types as t
from durable_agent_runner.workflows.types import evals as te
from durable_agent_runner.workflows.types import live_scores as tl


class AgentRunError(Exception):
    """The base of every error the client raises about a run."""


def noun(of: str) -> str:
    """What a message calls a workflow of type `of` before its id: "eval", else "run"."""
    return "eval" if of == te.EVAL_WORKFLOW else "run"


class RunNotFound(AgentRunError):
    """No run with this id (`of`: the workflow type looked for; an eval's says "no eval")."""

    def __init__(self, run_id: str, of: str = t.WORKFLOW_NAME) -> None:
        super().__init__(f"no {noun(of)} with id '{run_id}'")
        self.run_id = run_id


# How the CLI was started, so that its usage, errors and hints name what a person types: the
# installed script, unless its run() says otherwise (`client.py` in the repo, `python -m ...`).
_prog = ["durable-agent-runner"]


def started_as(prog: str) -> None:
    _prog[0] = prog


def prog() -> str:
    """The CLI's name in its usage and errors (`client.py: error: ...`)."""
    return _prog[0]


def cli(command: str = "") -> str:
    """`command` (a verb and its arguments) as a person types it here: `durable-agent-runner
    approve R C`, or, run from the repo's shell, `python client.py approve R C`; the CLI alone
    without one."""
    typed = "python client.py" if _prog[0] == "client.py" else _prog[0]
    return f"{typed} {command}" if command else typed


_RUNS_HINT = re.compile(r"(?:python )?client\.py ([a-z][a-z-]*) RUN_ID\b")


def naming(text: str, run_id: str) -> str:
    """A run's own hint (`client.py pause RUN_ID`: the run knows neither how this CLI was started
    nor, where it refuses, its own id) as a person types it here (`python client.py pause R`)."""
    return _RUNS_HINT.sub(lambda m: cli(f"{m.group(1)} {run_id}"), text)


def worker(flags: str = "") -> str:
    """The worker's command beside this CLI: `python worker.py --task-queue Q` in the repo, else the
    installed `durable-agent-runner-worker` (or `python -m durable_agent_runner.worker`)."""
    forms = {"client.py": "python worker.py", "python -m durable_agent_runner": "python -m durable_agent_runner.worker"}
    typed = forms.get(_prog[0], "durable-agent-runner-worker")
    return f"{typed} {flags}" if flags else typed


# Temporal's execution statuses, named as `status` shows them: an ended run's is its final phase,
# unless the server ended it (ServerEnding).
STATUS_NAMES: dict[WorkflowExecutionStatus, str] = {
    WorkflowExecutionStatus.RUNNING: "running",
    WorkflowExecutionStatus.COMPLETED: t.Phase.COMPLETED.value,
    WorkflowExecutionStatus.FAILED: t.Phase.FAILED.value,
    WorkflowExecutionStatus.CANCELED: t.Phase.CANCELLED.value,
    WorkflowExecutionStatus.TERMINATED: t.ServerEnding.TERMINATED.value,
    WorkflowExecutionStatus.CONTINUED_AS_NEW: "running",
    WorkflowExecutionStatus.TIMED_OUT: t.ServerEnding.TIMED_OUT.value,
}

# Each of Temporal's workflow types here, as a person calls it, and the verb that shows one.
KINDS = {
    t.WORKFLOW_NAME: ("an agent run", "status"),
    te.EVAL_WORKFLOW: ("an eval", "eval status"),
    tl.SCORE_WORKFLOW: ("an eval case's scoring", ""),
    t.DELIVER_WORKFLOW: ("a message's delivery to a session", ""),
}


def kind_of(workflow_type: str) -> str:
    """A workflow type as a person says it: "an agent run", "an eval", ..."""
    return KINDS.get(workflow_type, (f"a {workflow_type} workflow", ""))[0]


class NotThatKind(RunNotFound):
    """The id is of a workflow of another kind than the verb acts on: an eval's id given to a
    run's verb (`result`, `inspect`, `approve`, ...), or a run's to an eval's."""

    def __init__(self, run_id: str, found: str, wanted: str) -> None:
        super().__init__(run_id)
        verb = KINDS.get(found, ("", ""))[1]
        how = f": `{cli(f'{verb} {run_id}')}` shows it" if verb else ""
        self.args = (f"'{run_id}' is {kind_of(found)}, not {KINDS.get(wanted, (wanted, ''))[0]}{how}",)
        self.found, self.wanted = found, wanted


class IdTaken(AgentRunError, WorkflowAlreadyStartedError):
    """A run, session, fork or eval was to start under an id a workflow holds, running or ended
    (checks.NEW_ID): nothing started. `holder`: that workflow's type; `how`: its status, as
    `status` names it. A WorkflowAlreadyStartedError too, which the client raised before."""

    def __init__(self, taken: WorkflowAlreadyStartedError, holder: str, how: str) -> None:
        WorkflowAlreadyStartedError.__init__(
            self, taken.workflow_id, taken.workflow_type, run_id=taken.run_id, first_run_id=taken.first_run_id
        )
        what = "an eval" if noun(holder) == "eval" else "a run"
        self.args = (f"{what} with id '{taken.workflow_id}' exists already ({how})",)
        self.holder, self.how = holder, how


class DecisionRefused(AgentRunError):
    """The run refused what was asked (its reason is the message); nothing was recorded. `kind`:
    the run's name for the refusal when it gave one (`InvalidArguments`, `InvalidDecision`, ...)."""

    def __init__(self, message: str, kind: str = "") -> None:
        super().__init__(message)
        self.kind = kind


class NoWorkerAnswered(AgentRunError):
    """No worker took it in time; see the module docstring for what becomes of it."""


class StillRunning(AgentRunError):
    """The run had not ended within the time given. `waiting_for`: what it waits for a person on
    (`WaitingFor`s: a call's approval, a call in doubt, a resume, a session's next message); empty
    when it is working, or when no worker answered to say. `unserved`: what it waits for that no
    worker takes (`no worker serves agent 'triage' …`), said after the rest."""

    def __init__(
        self, run_id: str, waiting_for: Sequence[object], phase: str | None = None, unserved: Sequence[str] = ()
    ) -> None:
        if waiting_for:
            text = f"run {run_id} waits for a person: " + "; ".join(str(w) for w in waiting_for)
        else:
            text = f"run {run_id} is still running" + (f" ({phase})" if phase else "")
        super().__init__(text + "".join(f"; {u}" for u in unserved))
        self.run_id, self.waiting_for, self.phase, self.unserved = run_id, list(waiting_for), phase, list(unserved)


class RunFailed(AgentRunError):
    """The run ended without an answer. `status`: failed, cancelled, terminated or timed_out;
    `error_type` and `message`: the run's own error."""

    def __init__(self, run_id: str, status: str, error_type: str, message: str, what: str = "run") -> None:
        super().__init__(f"{what} {run_id} {status}: {error_type}: {message}")
        self.run_id, self.status, self.error_type, self.message = run_id, status, error_type, message


class RunCancelled(RunFailed):
    """The run was cancelled."""


class EventsUnavailable(AgentRunError):
    """`events()` stopped after reads failed too many times in a row; `next` is the event number
    to resume from (`events(since=next)`), `error` what the last read met, `attempts` how many
    failed in a row."""

    def __init__(self, next: int, error: str, attempts: int) -> None:
        super().__init__(f"giving up after {attempts} failed polls: {error}")
        self.next, self.error, self.attempts = next, error, attempts


def failure(err: WorkflowFailureError) -> tuple[str, dict[str, str]]:
    """How a run ended without an answer: its status, and the error as {type, message}: the type a
    guardrail, a limit or the provider gave (`InputGuardrailTripwireTriggered`, ...)."""
    cause = err.cause
    kinds = {"CancelledError": "cancelled", "TerminatedError": "terminated", "TimeoutError": "timed_out"}
    status = kinds.get(type(cause).__name__, "failed")
    while isinstance(cause, ActivityError | ChildWorkflowError) and cause.cause is not None:
        cause = cause.cause  # "Activity task failed" says nothing: what the activity (or child) met does
    message = getattr(cause, "message", None) or str(cause or err)
    kind = cause.type if isinstance(cause, ApplicationError) and cause.type else type(cause).__name__
    return status, {"type": kind, "message": message}


def run_failed(run_id: str, err: WorkflowFailureError, what: str = "run") -> RunFailed:
    """The run's failure as the client's error: RunCancelled when it was cancelled. `what` names
    it in the message: a run, or an eval."""
    status, error = failure(err)
    kind = RunCancelled if status == "cancelled" else RunFailed
    return kind(run_id, status, error["type"], error["message"], what)
