"""The eval's pure parts: the plan (case run ids, what starts next, when to continue as new) and
the report (rows, aggregates, spread over repeats, a baseline's diff, the gate, Markdown)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from durable_agent_runner.evals import Case, Dataset, EvaluationResult
from durable_agent_runner.evals.report import compare, gate, markdown, percentile, report
from durable_agent_runner.machine import eval_plan as plan
from durable_agent_runner.workflows.types import evals as te
from durable_agent_runner.workflows.types.transcript import Usage

pytestmark = pytest.mark.pure


def test_case_run_ids_are_derived_readable_and_distinct():
    a = plan.case_run_id("eval-x", "What is 2+2?", 1)
    assert a == plan.case_run_id("eval-x", "What is 2+2?", 1)  # a restart starts it under the same id
    assert a.startswith("eval-x.What_is_2_2-") and a.endswith("-1")
    assert a != plan.case_run_id("eval-x", "What is 2 2?", 1)  # the same once made safe: the hash tells them apart
    assert a != plan.case_run_id("eval-x", "What is 2+2?", 2)
    assert len(plan.case_run_id("e", "x" * 200, 3)) < 90


def test_the_plan_starts_what_is_neither_done_nor_in_flight_up_to_the_free_places():
    data = Dataset(name="d", cases=[Case(name=f"c{i}", inputs=f"q{i}") for i in range(5)])
    slots = plan.slots("e", data, repeat=2)
    assert [(s.case.name, s.repeat) for s in slots[:3]] == [("c0", 1), ("c0", 2), ("c1", 1)]
    done, flying = {slots[0].run_id}, {slots[1].run_id, slots[2].run_id}
    starts = plan.next_starts(slots, done, flying, concurrency=4, room=100)
    assert [s.run_id for s in starts] == [slots[3].run_id, slots[4].run_id]
    assert plan.next_starts(slots, done, flying, concurrency=4, room=1) == [slots[3]]
    assert plan.next_starts(slots, done, flying, concurrency=2, room=100) == []
    # a case being scored takes no place (taken=1 of the 2 in flight), but is never started again
    assert plan.next_starts(slots, done, flying, concurrency=2, room=100, taken=1) == [slots[3]]
    assert plan.should_drain(plan.MAX_STARTS_PER_RUN, False) and plan.should_drain(0, True)
    assert not plan.should_drain(3, False)
    # an eval started before eval-pace-1.4.4 replays with its bound of 100 starts a run
    assert plan.should_drain(100, False, plan.MAX_STARTS_BEFORE_PACE) and not plan.should_drain(100, False)


def test_the_progress_line_names_the_cases_being_scored_only_while_there_are_some():
    from durable_agent_runner.client.evals import progress_line

    status = te.EvalStatus(eval_id="e", dataset="d", agent="a", total=4, done=1, running=["r2"], scoring=["r3"])
    assert "0 waiting · 1 running · 1 scoring · 0 tokens" in progress_line(status)
    assert "scoring" not in progress_line(status.model_copy(update={"scoring": []}))


def test_the_console_s_eval_page_has_a_row_for_each_case_being_scored():
    from durable_agent_runner.console.views_evals import eval_section

    status = te.EvalStatus(eval_id="e", dataset="d", agent="a", total=3, running=["e.r2"], scoring=["e.r3"])
    page = eval_section(status, report(status), None)
    assert "1 running · 1 scoring" in page
    assert page.count('<tr class="running">') == 2 and ">scoring</td>" in page and "e.r3" in page


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 30), st.integers(1, 6), st.integers(1, 8), st.randoms(use_true_random=False))
def test_paced_starts_run_each_case_once_and_never_more_runs_at_once_than_asked(cases, concurrency, most, rnd):
    """EvalRun's loop since eval-pace-1.4.4, in any order of ends: a case's run ending frees its
    place while it is scored, and a run of the eval starts at most `most` cases before it drains
    and continues as new. Each case starts once, at most `concurrency` case runs go on at once,
    and the eval ends with every case scored."""
    data = Dataset(name="d", cases=[Case(name=f"c{i}", inputs=f"q{i}") for i in range(cases)])
    slots = plan.slots("e", data, repeat=1)
    done: set[str] = set()
    running: dict[str, str] = {}  # run id -> "run" (its child goes on) or "scoring"
    started: list[str] = []
    here = 0  # starts in this run of the eval
    while len(done) < len(slots):
        if plan.should_drain(here, False, most):
            if not running:
                here = 0  # continued as new: the results ride in the carry
        else:
            taken = sum(1 for stage in running.values() if stage == "run")
            for slot in plan.next_starts(slots, done, set(running), concurrency, most - here, taken):
                running[slot.run_id] = "run"
                started.append(slot.run_id)
                here += 1
        assert sum(1 for stage in running.values() if stage == "run") <= concurrency
        if not running:
            continue
        run_id = rnd.choice(sorted(running))  # the next thing that happens: a run ends, or a score comes back
        if running[run_id] == "run":
            running[run_id] = "scoring"
        else:
            del running[run_id]
            done.add(run_id)
    assert sorted(started) == sorted(s.run_id for s in slots) and len(started) == len(set(started))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.booleans(), st.integers(0, 10**6), st.floats(0, 5, allow_nan=False), st.integers(0, 30)),
        max_size=40,
    )
)
def test_results_keep_the_tally_a_count_from_scratch_gives_to_the_bit(ends):
    """The eval keeps its tally as cases end (O(1) an end, not O(cases)); its figures, which go to
    search attributes and budget decisions, must equal a tally from scratch exactly."""
    results = plan.Results()
    expected: dict[str, te.CaseResult] = {}
    for i, (good, tokens, usd, again) in enumerate(ends):
        run_id = f"r{again}" if again < 3 else f"r{i}"  # a few ids come twice: the last is kept
        r = te.CaseResult(
            case=f"c{i}",
            repeat=1,
            run_id=run_id,
            end="completed",
            passed=good,
            usage=Usage(input_tokens=tokens, cost_usd=usd),
        )
        results.add(r)
        expected[run_id] = r
        assert results.tally == plan.tally(expected.values())  # floats included: to the bit
    assert results.all() == list(expected.values()) and results.ids() == set(expected)
    assert len(results) == len(expected) and all(k in results for k in expected)
    t = results.tally
    assert (t.done, t.passed, t.failed) == (len(expected), sum(r.passed for r in expected.values()),
                                            sum(not r.passed for r in expected.values()))  # fmt: skip
    assert plan.Results(results.all()).tally == t  # carried across continue-as-new


def test_prompts_passes_and_output_json():
    assert plan.prompt_of(Case(name="a", inputs="hi")) == "hi"
    assert plan.prompt_of(Case(name="a", inputs={"q": 1})) == '{"q": 1}'
    ok, bad = EvaluationResult(name="a", value=True), EvaluationResult(name="b", value=False)
    err = EvaluationResult(name="c", error="boom")
    score = EvaluationResult(name="d", value=0.1)
    assert plan.passed([ok, score], "completed") and not plan.passed([ok, bad], "completed")
    assert not plan.passed([ok, err], "completed") and not plan.passed([ok], "failed")
    assert plan.output_json('{"a": 1}') == {"a": 1} and plan.output_json("plain") is None
    assert plan.output_json("{not json") is None


def result(case: str, passed: bool, score: float, *, repeat: int = 1, usd: float = 0.01, seconds: float = 1.0):
    scores = [EvaluationResult(name="Contains", value=passed), EvaluationResult(name="Judge", value=score)]
    return te.CaseResult(
        case=case, repeat=repeat, run_id=f"e.{case}-{repeat}", scores=scores, passed=passed, turns=1,
        usage=Usage(requests=1, input_tokens=10, output_tokens=5, cost_usd=usd), seconds=seconds,
    )  # fmt: skip


def status(eval_id: str, results: list[te.CaseResult], repeat: int = 1) -> te.EvalStatus:
    cases = len({r.case for r in results})
    return te.EvalStatus(
        eval_id=eval_id, dataset="d", agent="a", phase="completed", total=cases * repeat, done=len(results),
        repeat=repeat, results=results,
    )  # fmt: skip


def test_the_report_has_a_row_per_case_run_and_aggregates():
    rep = report(
        status("e1", [result("b", False, 0.2, seconds=3.0), result("a", True, 0.8, seconds=1.0)]), lambda r: f"u/{r}"
    )
    assert [r.case for r in rep.rows] == ["a", "b"] and rep.rows[0].link == "u/e.a-1"
    assert rep.rows[1].scores == {"Contains": False, "Judge": 0.2}
    assert (rep.passed, rep.pass_rate, rep.tokens, rep.usd) == (1, 0.5, 30, 0.02)
    assert (rep.p50_seconds, rep.p95_seconds) == (1.0, 3.0)
    by = {e.name: e for e in rep.evaluators}
    assert by["Contains"].pass_rate == 0.5 and by["Judge"].mean == 0.5 and by["Judge"].pass_rate is None
    text = markdown(rep)
    assert "| a | 1 | pass | ✔ | 0.8 | 1 | 15 | 0.0100 | 1.00 | [e.a-1](u/e.a-1) |" in text


def test_repeats_show_spread():
    rows = [result("a", True, 0.9, repeat=1), result("a", False, 0.5, repeat=2), result("a", True, 0.7, repeat=3)]
    rep = report(status("e", rows, repeat=3))
    (case,) = rep.cases
    assert (case.runs, case.passed) == (3, 2) and case.spread["Judge"] == 0.4 and case.means["Judge"] == 0.7
    assert "| a | 2/3 | Contains ±1, Judge ±0.4 |" in markdown(rep)


def test_a_report_with_no_scores_says_so_instead_of_an_empty_table():
    rep = report(status("e", [result("a", True, 0.5).model_copy(update={"scores": []})]))
    text = markdown(rep)
    assert "| evaluator |" not in text and "No scores (a case with no evaluators passes when its run answers)." in text
    assert "| a | 1 | pass |" in text


def test_a_baseline_diff_names_regressions_improvements_and_the_change_in_cost_and_latency():
    then = report(status("base", [result("a", True, 0.8), result("b", True, 0.5), result("gone", True, 1.0)]))
    now = report(
        status("new", [result("a", False, 0.8, usd=0.03), result("b", True, 0.9, seconds=2.0), result("new", True, 1)])
    )
    diff = compare(now, then)
    assert diff.regressed == ["a"] and diff.improved == ["b"]
    by = {c.case: c for c in diff.cases}
    assert by["a"].baseline_pass_rate == 1.0 and by["a"].pass_rate == 0.0 and by["a"].usd == 0.02
    assert by["b"].scores["Judge"] == 0.4 and by["b"].seconds == 1.0
    assert by["new"].change == "new" and by["gone"].change == "gone"
    assert gate(now, diff, fail_on_regression=True) == ["1 case(s) regressed against base: a"]
    assert gate(now, diff) == []  # no gate asked for
    assert gate(now, diff, min_pass_rate=0.5) == []
    assert "| a | regressed | 100% → 0% |" in markdown(now, diff)
    assert compare(then, then).regressed == [] and gate(then, compare(then, then), fail_on_regression=True) == []


def test_an_unfinished_eval_fails_the_gate_and_percentiles_are_nearest_rank():
    rep = report(status("e", [result("a", True, 1.0)]).model_copy(update={"total": 2}))
    assert gate(rep) == ["the eval finished 1 of 2 case runs"]
    assert percentile([], 50) == 0.0 and percentile([1, 2, 3, 4], 50) == 2 and percentile([1, 2, 3, 4], 95) == 4


def tables(text: str) -> list[list[int]]:
    """The cell count of each line of each Markdown table in `text` (escaped pipes are text)."""
    found: list[list[int]] = []
    previous = False
    for line in text.splitlines():
        is_row = line.startswith("|")
        if is_row:
            cells = len(re.split(r"(?<!\\)\|", line)) - 2
            found[-1:] = [found[-1] + [cells]] if previous else found[-1:]
            if not previous:
                found.append([cells])
        previous = is_row
    return found


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b|c", "case\nnew line"]),
            st.booleans(),
            st.sampled_from(["completed", "failed", "budget"]),
            st.booleans(),
        ),
        max_size=6,
    )
)
def test_every_row_of_the_markdown_report_has_its_headers_cells(runs):
    """Whatever finished (nothing yet, runs that failed before any score, cases whose names hold a
    pipe or a new line), each table's rows have as many cells as its header: a report a CI job
    posts renders as tables. (An eval with no scores yet once had a header one cell wider.)"""
    results = [
        result(case, passed, 0.5, repeat=i + 1).model_copy(
            update={"end": end, "scores": [] if unscored or end != "completed" else result(case, passed, 0.5).scores}
        )
        for i, (case, passed, end, unscored) in enumerate(runs)
    ]
    rep = report(status("e", results).model_copy(update={"phase": "running", "total": len(results) + 1}))
    for table in tables(markdown(rep)):
        assert len(set(table)) == 1, (table, markdown(rep))


def test_calls_to_a_model_without_a_price_are_said_beside_the_cost_on_every_face_of_an_eval():
    """A local model the price table lacks costs `$0.0000`: the report, `eval status` and the
    console's eval page say how many calls that sum leaves out, as `status` does for a run."""
    from durable_agent_runner.client.evals import progress_line
    from durable_agent_runner.console.views_evals import eval_section

    unpriced = result("a", True, 0.5, usd=0.0).model_copy(update={"usage": Usage(requests=3, unpriced=3)})
    done = status("e", [unpriced, result("b", True, 0.5)])
    done = done.model_copy(update={"usage": unpriced.usage + done.results[1].usage})
    words = "$0.0100 (+ 3 call(s) to models without a price)"
    rep = report(done)
    assert (rep.unpriced, rep.rows[0].unpriced) == (3, 3) and words in markdown(rep)
    assert words in progress_line(done) and words in plan.summary_line(plan.tally(done.results), 2)
    assert words in eval_section(done, rep, None)
    priced = report(status("e", [result("b", True, 0.5)]))
    assert "without a price" not in markdown(priced) and "$0.0100 ·" in markdown(priced)


def test_a_baseline_of_another_dataset_with_no_case_in_common_is_said_so():
    """Before: every case 'new' or 'gone', '0 regressed', and a --fail-on-regression gate passed
    without a word that nothing had been compared."""
    from durable_agent_runner.console.views import h
    from durable_agent_runner.console.views_evals import diff_section

    then = report(status("base", [result("x", True, 0.8)]).model_copy(update={"dataset": "weather"}))
    now = report(status("now", [result("a", True, 0.8), result("b", False, 0.1)]))
    diff = compare(now, then)
    said = "the baseline ran dataset 'weather', this eval 'd'; no case in common: each is new or gone, and none can"
    said += " regress"
    assert diff.note == said and diff.regressed == []
    assert f"Note: {said}." in markdown(now, diff).splitlines() and f"Note: {h(said)}." in diff_section(diff)
    assert compare(now, now).note == ""
