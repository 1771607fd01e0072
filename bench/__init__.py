"""bench: what durability costs, measured on a local Temporal dev server and the fake_llm double.

    python -m bench --quick          # a one-minute smoke run
    python -m bench                  # the full run (under ten minutes on two cores)
    python -m bench --json out.json  # also write every figure as JSON

It starts its own dev server (tests/devserver.py) and FakeLLMServer, runs workers built by
`durable_agent_runner.worker.plugin.build_worker` (in a subprocess by default, see `bench.stack`), and
measures the same
scripted `loop:N:B` scenario durably, as a plain in-process loop (the floor), and through
Temporal's OpenAI Agents integration (the rival, `bench.rival`; needs the `bench` extra), all on
that one server. Sections: 1 time and CPU per turn (with bench-only workflow variants,
`bench.local_variant`), 2 history growth, 3 concurrent runs, 4 worker tuning knobs, 5 streaming
latency, 6 where a turn's time goes (`bench.timeline`); then every figure as a ratio against the
floor and the rival.

Workers import the code as it is on disk when they start, so benchmark a tree nobody is editing
(e.g. `git archive HEAD | tar -x -C DIR`, copy bench/ in, run from DIR).

`bench.local_variant` and `bench.variant_types` are workflow code: deterministic, and kept free of
heavy imports.
"""
