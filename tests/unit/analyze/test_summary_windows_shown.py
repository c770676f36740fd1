"""At ``--record summary`` (the default) the collectives' tables and the timeline hold the
windows' calls only, and say so: ``CollectiveAnalysis.windows`` and its line in the report
and the dashboard, the timeline's ``summarised_steps`` and its title, a comparison's counts.
A hand-built 2-rank run of 30 steps, one all-reduce of 4 KiB a step, its first 12 steps
written in full."""

from __future__ import annotations

from analysed import analysed
from analyze_runs import make_run
from run_builders import coll_row, phase_row, step_row

from scalescope.analyze.comm.collectives import analyze_collectives
from scalescope.analyze.runs.compare import compare_runs
from scalescope.events.units import number_ranges
from scalescope.probe.summary import fold_step
from scalescope.report.media.charts import timeline_chart
from scalescope.report.media.timeline import chrome_trace
from scalescope.report.views.collectives import windows_note
from scalescope.report.views.compare import comparison_document

MS = 1_000_000
STEPS, WINDOW = 30, 12


def recorded(tmp_path, summary: bool):
    rows: dict[int, list] = {0: [], 1: []}
    for step in range(STEPS):
        t0 = (1_000 + 20 * step) * MS
        for rank in (0, 1):
            call = coll_row(step, "all_reduce", t0 + 10 * MS, 2 * MS, 4096, step, tag="sync")
            rows[rank] += [phase_row(step, "forward", t0, 10 * MS), step_row(step, t0, 19 * MS, 8)]
            if not summary or step < WINDOW:
                rows[rank].append(call)
            if summary:
                rows[rank] += [r[:11] for r in fold_step(step, t0, [(*call, -1)])]
    return make_run(tmp_path, {r: [v] for r, v in rows.items()}, world_size=2)


def test_a_run_in_full_holds_every_call_and_says_nothing(tmp_path) -> None:
    run = recorded(tmp_path, summary=False)
    c = analyze_collectives(run.events, 2, 1)
    assert (c.calls, c.windows, c.summarised_steps) == (2 * STEPS, (), 0)
    assert windows_note(c) is None
    assert chrome_trace(run, steps=range(10, 14))["metadata"]["summarised_steps"] == []


def test_the_tables_name_the_windows_their_calls_come_from(tmp_path) -> None:
    c = analyze_collectives(recorded(tmp_path, summary=True).events, 2, 1)
    assert (c.calls, c.windows, c.summarised_steps) == (2 * WINDOW, tuple(range(WINDOW)), 18)
    assert windows_note(c).text == (
        "Calls of steps 0-11 only, the windows recorded in full; 18 other steps recorded as "
        "summaries (--record summary; --record full writes every call)."
    )


def test_the_timeline_names_the_steps_it_draws_without_calls(tmp_path) -> None:
    run = recorded(tmp_path, summary=True)
    windows = analyze_collectives(run.events, 2, 1).windows
    trace = chrome_trace(run, steps=range(10, 14), windows=windows)
    assert trace["metadata"]["summarised_steps"] == [12, 13]
    drawn = {e["args"]["step"] for e in trace["traceEvents"] if e.get("cat") == "collective"}
    assert drawn == {10, 11}
    title = timeline_chart(trace).title
    assert title.endswith(
        "; no calls drawn in steps 12-13, recorded as summaries (--record summary)"
    )
    inside = chrome_trace(run, steps=range(2, 6), windows=windows)
    assert inside["metadata"]["summarised_steps"] == []


def test_steps_read_as_ranges() -> None:
    assert number_ranges((0, 1, 2, 5, 7, 8, 100)) == "0-2, 5, 7-8, 100"
    assert number_ranges(()) == ""


def test_a_comparison_says_whose_counts_are_the_windows(tmp_path) -> None:
    full, summary = (analysed(recorded(tmp_path, level)) for level in (False, True))
    c = compare_runs(full, summary)
    assert (c.a.windows, c.b.windows) == ((), tuple(range(WINDOW)))
    (sizes,) = [
        b for b in comparison_document(c).blocks if getattr(b, "title", "") == "Collectives"
    ]
    assert sizes.blocks[0].caption.endswith("; B's counts: steps 0-11 only (--record summary)")
    assert [s.calls_per_rank.a for s in c.sizes] == [STEPS]
