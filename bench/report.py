"""Printing the bench's figures as plain-text tables."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench.sections import BARE, FLOOR, OURS, OURS_ACTIVITY, OURS_LOCAL_MODEL, RIVAL

# Against Temporal's OpenAI Agents integration on the same server: ours ≤ this × the rival's.
TARGETS: dict[str, float | None] = {"time per turn": 0.35, "worker CPU per turn": 0.30, "server CPU per turn": 0.70}
# A tool that is a regular activity costs its own task on the server: a looser bar (issue 24).
ROW_TARGETS: dict[str, dict[str, float | None]] = {
    OURS_ACTIVITY: {"time per turn": 0.5, "worker CPU per turn": None, "server CPU per turn": 0.8},
}
MAX_EVENTS_PER_TURN = 8
FLAT = 1.10  # "flat": the last full turn adds at most 10% more history than turn 5


def fmt(v: Any, digits: int = 1, signed: bool = False) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:+.{digits}f}" if signed else f"{v:.{digits}f}"
    return str(v)


def ratio(v: float | None, base: float | None) -> float | None:
    return v / base if v is not None and base is not None and base > 0 else None


def fmt_x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers], *[[str(c) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(r: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))

    return "\n".join([line(cells[0]), "  ".join("-" * w for w in widths), *(line(r) for r in cells[1:])])


def _find(rows: list[dict[str, Any]], name: str, latency: float) -> dict[str, Any] | None:
    return next((r for r in rows if r["name"] == name and r["latency_ms"] == latency), None)


def _get(row: dict[str, Any] | None, key: str) -> float | None:
    return None if row is None else row.get(key)


def _signed(v: float | None, base: float | None) -> str:
    return "-" if v is None or base is None else f"{v - base:+.1f}"


def per_turn(data: dict[str, Any]) -> str:
    rows = data["rows"]
    out = []
    for r in rows:
        floor = _get(_find(rows, FLOOR, r["latency_ms"]), "ms_per_turn_median")
        rival = _find(rows, RIVAL, r["latency_ms"])
        m = r["ms_per_turn_median"]
        durable = r["name"] != FLOOR
        out.append([
            r["name"], f"{r['latency_ms']:g}", r["runs"], fmt(m), fmt(r["turn_gap_p90_ms"]),
            fmt_x(ratio(m, floor)) if durable else "", fmt_x(ratio(m, _get(rival, "ms_per_turn_median"))),
            fmt(r.get("worker_cpu_ms")), fmt(r.get("server_cpu_ms")),
            fmt(r.get("events_per_turn")), fmt(r.get("bytes_per_turn"), 0),
        ])  # fmt: skip
    head = ["", "latency ms", "runs", "ms/turn", "p90 turn", "x floor", "x rival", "worker CPU", "server CPU",
            "events", "bytes"]  # fmt: skip
    text = [
        f"1. TIME AND CPU PER TURN  ({data['scenario']}, every row the same scripted loop on one dev server; model\n"
        "   latency taken off; median of runs; x floor / x rival: ms/turn against the floor's and the OpenAI Agents\n"
        "   integration's at that latency; CPU: ms per turn, worker process / dev server process; events and bytes:\n"
        "   history per turn, over the last run's turns)",
        table(head, out),
    ]
    if data.get("rival_error"):
        text.append(f"   no rival rows: {data['rival_error']}")
    if loops := data.get("event_loops"):
        text.append("   event loops: " + ", ".join(f"{name} {loop}" for name, loop in loops.items()))
    mirror = next((r for r in rows if r["name"].startswith("BENCH-ONLY mirror: as AgentRun")), None)
    if mirror is not None:
        text.append("   BENCH-ONLY variants against the mirror of AgentRun (ms/turn; CPU ms/turn worker, server):")
        for r in rows:
            if r["name"].startswith("BENCH-ONLY") and r is not mirror and r["latency_ms"] == mirror["latency_ms"]:
                text.append(
                    f"     {r['name'].removeprefix('BENCH-ONLY mirror: '):<40} "
                    f"{_signed(r['ms_per_turn_median'], mirror['ms_per_turn_median'])} ms/turn; CPU "
                    f"{_signed(r.get('worker_cpu_ms'), mirror.get('worker_cpu_ms'))}, "
                    f"{_signed(r.get('server_cpu_ms'), mirror.get('server_cpu_ms'))}"
                )
    if short := data.get("short"):
        rival = next((r for r in short["rows"] if r["name"] == RIVAL), None)
        cells = ("first_request_ms", "result_ms", "wall_ms", "worker_cpu_ms", "server_cpu_ms")
        head = ["", "runs", "start → 1st request ms", "last reply → result ms", "whole run ms", "worker CPU ms",
                "server CPU ms", "whole run vs rival"]  # fmt: skip
        lines = [
            [r["name"], r["runs"], *(fmt(r[k]) for k in cells), fmt_x(ratio(r["wall_ms"], _get(rival, "wall_ms")))]
            for r in short["rows"]
        ]
        text.append(
            f"   a short run ({short['scenario']}, {short['latency_ms']:g} ms model latency; medians, CPU the mean "
            f"a run): what a run costs besides its turns\n{table(head, lines)}"
        )
    idle = data.get("idle") or {}
    text.append(
        f"   idle burn (worker up, no runs): dev server {fmt(idle.get('server_ms_per_s'))} ms CPU/s, "
        f"worker {fmt(idle.get('worker_ms_per_s'))} ms CPU/s"
    )
    return "\n".join(text)


def history(data: dict[str, Any]) -> str:
    at = [str(a) for a in data["at"]]
    head = ["", "turns", "exec"]
    for a in at:
        head += [f"bytes@{a}", f"events@{a}"]
    head += ["slope B/turn²", "total KB", "CAN carry B", "ms/turn first 20", "last 20"]
    out = []
    for r in data["rows"]:
        row: list[Any] = [r["name"], r["turns"], r["executions"]]
        for a in at:
            got = r["at"].get(a, {})
            row += [fmt(got.get("bytes")), fmt(got.get("events"))]
        carry = ",".join(str(c) for c in r["carry_bytes"]) or "-"
        row += [fmt(r["bytes_per_turn_slope"], 2), fmt(r["total_bytes"] / 1024), carry,
                fmt(r.get("ms_per_turn_first")), fmt(r.get("ms_per_turn_last"))]  # fmt: skip
        out.append(row)
    text = [
        f"2. HISTORY PER TURN  ({data['scenario']} for AgentRun, shorter for the rival, whose history grows with\n"
        "   turns²; events from one model call to the next; median ms per turn over the first and last 20 turns,\n"
        "   at 0 ms latency)",
        table(head, out),
    ]
    for r in data["rows"][:1]:
        for a in at:
            kinds = r["at"].get(a, {}).get("kinds")
            if kinds:
                text.append(f"   {r['name']} turn {a}: " + ", ".join(f"{k.lower()} x{v}" for k, v in kinds.items()))
    return "\n".join(text)


def concurrency(data: dict[str, Any]) -> str:
    head = ["runs", "allowed s", "completed", "failed", "timed out", "wall s", "turns/s", "ms/turn p50", "p90",
            "run s p50", "worker CPU", "server CPU", "bench CPU"]  # fmt: skip
    out = []
    for r in data["rows"]:
        if "skipped" in r:
            out.append([r["runs"], "-", r["skipped"], *[""] * (len(head) - 3)])
            continue
        out.append([
            r["runs"], fmt(r.get("allowed_s"), 0), r["completed"], r["failed"], r["timed_out"], fmt(r["wall_s"], 2),
            fmt(r["turns_per_s"]), fmt(r["per_turn_ms_p50"]), fmt(r["per_turn_ms_p90"]), fmt(r["run_s_p50"], 2),
            fmt(r["worker_cpu_ms_per_turn"]), fmt(r["server_cpu_ms_per_turn"]), fmt(r["bench_cpu_ms_per_turn"]),
        ])  # fmt: skip
    text = [
        f"3. CONCURRENT RUNS  ({data['scenario']} at {data['latency_ms']:g} ms model latency, AgentRun with its local "
        f"tool, one worker, all started at once, at most {data['timeout_s']:g} s each;",
        "   ms/turn: latency taken off; CPU: ms per turn of the worker, the dev server, and this process (fake model "
        "server + client))",
        table(head, out),
    ]
    for r in data["rows"]:
        for e in r.get("errors", []):
            text.append(f"   {r['runs']} runs, error: {e}")
    return "\n".join(text)


def _delta(v: float | None, base: float | None, digits: int = 1) -> str:
    if v is None:
        return "-"
    if base is None:
        return fmt(v, digits)
    return f"{fmt(v, digits)} ({v - base:+.{digits}f})"


def tuning(data: dict[str, Any]) -> str:
    rows = data["rows"]
    base = next((r for r in rows if r.get("rounds") and "error" not in r), None)
    head = ["knob", "setting", "rounds", "single ms/turn", "conc turns/s", "conc ms/turn p50", "server CPU/turn",
            "worker CPU/turn"]  # fmt: skip
    out = []
    for r in rows:
        if "error" in r or not r.get("rounds"):
            out.append([r["knob"], r["label"], 0, r.get("error", "skipped: time budget"), "", "", "", ""])
            continue
        c = r["concurrent"]
        bc = base["concurrent"] if base is not None and base is not r else None

        def d(key: str, c: dict[str, Any] = c, bc: dict[str, Any] | None = bc) -> str:
            return _delta(c[key], bc[key] if bc else None)

        single_base = base["single_ms_per_turn"] if base is not None and base is not r else None
        label = r["label"] + (f" [{c['completed']}/{c['runs']} runs done]" if c["completed"] < c["runs"] else "")
        out.append([
            r["knob"], label, r["rounds"], _delta(r["single_ms_per_turn"], single_base), d("turns_per_s"),
            d("per_turn_ms_p50"), d("server_cpu_ms_per_turn"), d("worker_cpu_ms_per_turn"),
        ])  # fmt: skip
    return "\n".join([
        "4. TUNING  (one worker per setting, all up at once, measured in rounds; medians over rounds;",
        "   delta against the first default row in brackets; 'default' = build_worker as is)",
        f"   single: {data['single']};  concurrent: {data['concurrent']}",
        table(head, out),
    ])  # fmt: skip


def streaming(data: dict[str, Any]) -> str:
    head = ["setting", "pieces", "p50 ms", "p95 ms", "max ms"]
    out = [
        [r["label"], r["pieces"], fmt(r["p50_ms"], 0), fmt(r["p95_ms"], 0), fmt(r["max_ms"], 0)] for r in data["rows"]
    ]
    shipped = data["rows"][0]["p50_ms"] if data["rows"] else None
    target = data["target_p50_ms"]
    verdict = (
        "" if shipped is None else (" -> MEETS" if shipped <= target else " -> MISSES") + f" the {target:g} ms target"
    )
    errors = [f"   {r['label']}: {e}" for r in data["rows"] for e in r.get("errors", [])]
    return "\n".join([
        f"5. STREAMING LATENCY  (model server sends a piece of text -> `client.py watch` prints it; frames "
        f"{data['frame_ms']:g} ms apart;\n   a streaming worker on the same dev server; as shipped: p50 "
        f"{fmt(shipped, 0)} ms{verdict})",
        table(head, out),
        *errors,
    ])  # fmt: skip


def _verdict(x: float | None, target: float | None) -> str:
    if x is None:
        return "-"
    if target is None:
        return f"{x:.2f}x"
    return f"{x:.2f}x (target <= {target:.2f}x: {'MEETS' if x <= target else 'MISSES'})"


def comparison(per: dict[str, Any], hist: dict[str, Any] | None) -> str:
    """Every figure the brief asks for, each as a ratio, from this one run."""
    rows = per["rows"]
    lines = ["COMPARISON  (this run, one dev server; rival = Temporal's OpenAI Agents integration, its tool an "
             "activity)"]  # fmt: skip
    if per.get("rival_error"):
        lines.append(f"  no ratios against the rival: {per['rival_error']}")
    for latency in sorted({r["latency_ms"] for r in rows}):
        floor, rival = _find(rows, FLOOR, latency), _find(rows, RIVAL, latency)
        for name in (OURS, OURS_LOCAL_MODEL, OURS_ACTIVITY, BARE):
            ours = _find(rows, name, latency)
            if ours is None:
                continue
            lines.append(f"  at {latency:g} ms model latency, {name.removeprefix('durable (').removesuffix(')')}:")
            if name == BARE:
                lines.append(f"    the least a loop of this shape costs here; {_above_bare(rows, latency)}")
            t_ours, t_floor = ours["ms_per_turn_median"], _get(floor, "ms_per_turn_median")
            lines.append(f"    time per turn: {fmt(t_ours)} ms = {fmt_x(ratio(t_ours, t_floor))} the raw-httpx floor's "
                         f"{fmt(t_floor)} ms")  # fmt: skip
            if rival is None:
                continue
            for label, key in (("time per turn", "ms_per_turn_median"), ("worker CPU per turn", "worker_cpu_ms"),
                               ("server CPU per turn", "server_cpu_ms")):  # fmt: skip
                x = ratio(_get(ours, key), _get(rival, key))
                lines.append(f"    {label}: {fmt(_get(ours, key))} vs {fmt(_get(rival, key))} ms = "
                             f"{_verdict(x, ROW_TARGETS.get(name, TARGETS)[label])}")  # fmt: skip
            for label, key in (("events per turn", "events_per_turn"), ("bytes per turn", "bytes_per_turn")):
                lines.append(f"    {label}: {fmt(_get(ours, key), 1)} vs {fmt(_get(rival, key), 1)} = "
                             f"{fmt_x(ratio(_get(ours, key), _get(rival, key)))}")  # fmt: skip
            events = _get(ours, "events_per_turn")
            if events is not None and name != BARE:
                verdict = "MEETS" if events <= MAX_EVENTS_PER_TURN else "MISSES"
                lines[-2] += f" (target <= {MAX_EVENTS_PER_TURN} events: {verdict})"
    if hist is not None:
        lines += _history_lines(hist)
    return "\n".join(lines)


def _above_bare(rows: list[dict[str, Any]], latency: float) -> str:
    ours, bare = _find(rows, OURS, latency), _find(rows, BARE, latency)
    above = ", ".join(
        f"{_signed(_get(ours, key), _get(bare, key))} {label}"
        for label, key in (("ms a turn", "ms_per_turn_median"), ("ms worker CPU", "worker_cpu_ms"),
                           ("ms server CPU", "server_cpu_ms"))
    )  # fmt: skip
    return f"AgentRun with a local tool: {above} above it"


def _history_lines(hist: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for product in hist["rows"]:
        turns = [a for a in hist["at"] if str(a) in product["at"] and a < product["turns"]]
        if len(turns) < 2:
            continue
        first, last = (product["at"][str(a)]["bytes"] for a in (turns[0], turns[-1]))
        verdict = "FLAT" if last / first <= FLAT else "GROWING"
        lines.append(
            f"  history, {product['name']}: turn {turns[0]} adds {first} B, turn {turns[-1]} adds {last} B "
            f"(x{last / first:.2f}) -> {verdict}; total {product['total_bytes'] / 1024:.0f} KB over {product['turns']} "
            "turns"
        )
        for carry in product["carry_bytes"]:
            lines.append(
                f"    continue-as-new: {carry / 1024:.0f} KB of carried state written once per hand-over "
                f"({product['executions']} executions), not per turn"
            )
    return lines


def timeline(data: dict[str, Any]) -> str:
    head = "6. WHERE A TURN'S TIME GOES"
    if "skipped" in data:
        return f"{head}: skipped, {data['skipped']}"
    if not data["rows"]:
        return f"{head}: no turn to read"
    rows = [[r["from"], r["to"], fmt(r["ms"], 2), r["side"]] for r in data["rows"]]
    total = sum(r["ms"] for r in data["rows"])
    sides = ", ".join(f"{name} {ms:.1f} ms" for name, ms in data["by_side"].items())
    return "\n".join([
        f"{head}  (one traced run at {data['latency_ms']:g} ms model latency, AgentRun with its local tool; median ms "
        f"between consecutive points\n   of a turn over {data['turns']} of {data['of']} middle turns; the worker's "
        "points are BENCH-ONLY stamps, the server's its history event times)",
        table(["from", "to", "ms", "side"], rows),
        f"   a turn above the model's latency: {total:.1f} ms = {sides}",
    ])  # fmt: skip
