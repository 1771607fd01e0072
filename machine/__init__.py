"""The pure machine: every decision of a run, made without Temporal. The interpreter (workflows/)
carries out its steps and feeds back what happened.

1.x's machine: the turn (`turn.Turn.next`, fed `outcomes.Outcome`), what a reply means (`rules`),
a turn's calls (`calls`), budgets (`budget`), the run's state and views (`state`), the bounds on
outside data (`bounds`), approvals, doubts, questions, outside completions, edits, sessions,
compaction, forks' reruns, fallback, and an eval's plan. 2.0's (docs/design-2.0.md): `call`, one
tool call's whole life (asked about, decided, run, in doubt, resolved) as frozen records and
transitions that never mutate their input.

Nothing here imports temporalio, reads a clock or the environment, or does I/O (machine/ruff.toml
bans them): the time comes in as `now`.
"""

# One identity, as for the engine's other folders: `durable_agent_runner.machine`, never `machine`.
if __name__ != "durable_agent_runner.machine":
    raise ImportError(f"import durable_agent_runner.machine, not {__name__}: the engine is no top-level package")
