"""The 2.0 core's pure machine (docs/design-2.0.md): every step of a run decided without Temporal.

Each transition takes a frozen record and what happened, and returns the new record, the steps
to carry out and the events watchers see; it never mutates its input. Nothing here imports
temporalio, reads a clock or the environment, or does I/O: the time comes in as `now`.

Built so far: `call`, one tool call's whole life (asked about, decided, run, in doubt,
resolved). The interpreter that carries it out is the next step of the plan.
"""

# One identity, as for the engine's other folders: `durable_agent_runner.machine`, never `machine`.
if __name__ != "durable_agent_runner.machine":
    raise ImportError(f"import durable_agent_runner.machine, not {__name__}: the engine is no top-level package")
