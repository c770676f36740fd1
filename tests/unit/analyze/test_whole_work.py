"""Work beside training taken whole (analyze/steps/extra_spans.py): by hand, the span of an
evaluation's rows less the training phases inside it; on the recorded nanoGPT-style run
where rank 0 evaluates every 5 steps (tests/data/faultbench/gpt-rank0-eval), the what-if's
``phase:eval`` takes out what the rank-only work finding counts, the host work between the
evaluation's forwards included, and its gain holds the gain measured by re-runs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from scalescope.analyze.model.step_grid import build_grid
from scalescope.analyze.model.whatif import what_if
from scalescope.analyze.steps.extra_spans import whole_work
from scalescope.analyze.steps.extra_work import extra_work
from scalescope.analyze.steps.step_slots import measured_slots
from scalescope.events import load_run

RECORDED = Path(__file__).resolve().parents[2] / "data" / "faultbench" / "gpt-rank0-eval"


def test_the_span_less_the_training_phases_inside_it() -> None:
    """Rank 0, step 3: eval rows at 0-3 and 8-10 with a 2 ms training forward at 5-7 between
    them: 10 - 2 = 8 ms. Rank 1's lone eval row is its own span; a row of another step and
    one outside the span are left alone."""
    rank = np.array([0, 0, 0, 0, 1, 0])
    step = np.array([3, 3, 3, 4, 3, 3])
    start = np.array([0.0, 8.0, 5.0, 6.0, 1.0, 11.0])
    end = np.array([3.0, 10.0, 7.0, 7.5, 2.0, 12.0])
    mine = np.array([True, True, False, False, True, False])
    spans = whole_work(rank, step, start, end, mine)
    work = {}
    for r, s, a, b, sign in zip(spans.rank, spans.step, spans.start, spans.end, spans.sign,
                                strict=True):  # fmt: skip
        work[(int(r), int(s))] = work.get((int(r), int(s)), 0.0) + sign * (b - a)
    assert work == {(0, 3): 8.0, (1, 3): 1.0}


def test_no_rows_of_the_kind_no_intervals() -> None:
    spans = whole_work(np.array([0]), np.array([1]), np.array([0.0]), np.array([1.0]),
                       np.array([False]))  # fmt: skip
    assert len(spans.rank) == 0


def test_the_whatif_takes_out_the_evaluation_the_finding_counts() -> None:
    run = load_run(RECORDED / "run")
    grid, _ = build_grid(run)
    assert grid is not None
    per_step = grid.phase_ns["eval"].sum(axis=2)[:, 0] / 1e6
    at = per_step > 0
    slots = measured_slots(run.events, int(grid.steps[0]))
    (work,) = [w for w in extra_work(run.events, slots) if w.kind == "eval"]
    assert tuple(int(s) for s in grid.steps[at]) == work.steps == (5, 10, 15, 20)
    assert per_step[at].mean() == pytest.approx(work.ms_per_occurrence)
    events = run.events.where("name", "eval")
    rows_ms = run.events.dur_ns[events].sum() / 1e6 / len(work.steps)
    assert per_step[at].mean() > 1.1 * rows_ms  # the loss and .item() between the forwards


def test_the_evaluations_fix_holds_the_gain_measured_by_re_runs() -> None:
    """Within the fault matrix's tolerance (20 %) of the gain the interleaved re-runs without
    the evaluation measured when the run was recorded: 16.8 against 21.4 ms (22 % low) when
    only the evaluation's rows were taken out."""
    measured = json.loads((RECORDED / "truth.json").read_text())["score"]["measured_ms"]
    found = what_if(load_run(RECORDED / "run"), warmup_steps=4, causes=["phase:eval"])
    assert found is not None
    (fix,) = found.fixes
    assert abs(fix.gain_ms - measured) <= 0.2 * measured
