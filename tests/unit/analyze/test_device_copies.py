"""The batches' copies to the device: per-rank figures against plain sums of the rows, and the
PAGEABLE_COPY finding with the what-if's saving, on runs written and loaded back."""

from __future__ import annotations

import pytest
from analysed import analysed  # noqa: E402
from analyze_runs import make_run
from run_builders import coll_row, phase_row, step_row

from scalescope.diagnose.engine import diagnose_run
from scalescope.events.schema import Kind

MS = 1_000_000
WARMUP, STEPS = 2, 10
BATCH_BYTES = 64 * 3 * 224 * 224 * 4 + 64 * 8


def copy_row(step: int, start: int, dur: int, nbytes: int, tag: str) -> tuple:
    return (step, int(Kind.PHASE), "to_device", start, dur, nbytes, 2, "", "", -1, tag)


def rank_rows(rank: int, copy_ms: float, tag: str) -> list[tuple]:
    rows, t = [], 0
    for step in range(STEPS):
        start = t
        copy = int((copy_ms + 0.1 * (step % 3)) * MS)
        parts = [("data", 1 * MS), ("to_device", copy), ("forward", 5 * MS),
                 ("backward", 8 * MS), ("optimizer", 2 * MS)]  # fmt: skip
        for name, dur in parts:
            if name == "to_device":
                rows.append(copy_row(step, t, dur, BATCH_BYTES, tag))
            else:
                rows.append(phase_row(step, name, t, dur))
            if name == "backward":
                rows.append(coll_row(step, "all_reduce", t + dur - MS, MS, 1 << 20, step))
            t += dur
        rows.append(step_row(step, start, t - start, 64))
    return rows


def run_of(tmp_path, copy_ms: float, tags: tuple[str, str]):
    rows = {r: [rank_rows(r, copy_ms, tags[r])] for r in (0, 1)}
    return make_run(tmp_path, rows, world_size=2, warmup_steps=WARMUP)


def test_per_rank_copies_are_the_rows_sums(tmp_path) -> None:
    run = run_of(tmp_path, 4.0, ("pageable", "pinned"))
    copies = analysed(run).copies
    assert [c.rank for c in copies] == [0, 1]
    measured = range(WARMUP, STEPS)
    want_ms = sum(4.0 + 0.1 * (s % 3) for s in measured) / len(measured)
    for c in copies:
        assert c.steps == STEPS - WARMUP
        assert c.nbytes_per_step == BATCH_BYTES and c.tensors_per_step == 2
        assert c.ms_per_step == pytest.approx(want_ms)
    assert [c.pageable_nbytes_per_step for c in copies] == [BATCH_BYTES, 0]


def test_pageable_copies_are_a_finding_whose_saving_is_replayed(tmp_path) -> None:
    run = run_of(tmp_path, 4.0, ("pageable", "pageable"))
    analysis = analysed(run)
    finding = next(f for f in diagnose_run(run, analysis).findings if f.code == "PAGEABLE_COPY")
    fix = next(f for f in analysis.whatif.fixes if f.cause == "phase:to_device")
    assert finding.saved_ms_per_step == pytest.approx(fix.gain_ms)
    assert fix.gain_ms > 3.5, "the copies are on every rank's critical path"
    assert "pageable memory" in finding.summary and "38.5 MB" in finding.summary
    assert any("non_blocking=True" in r for r in finding.remedies)


@pytest.mark.parametrize(
    ("copy_ms", "tags"), [(4.0, ("pinned", "pinned")), (0.5, ("pageable", "pageable"))]
)
def test_no_finding_for_pinned_or_cheap_copies(tmp_path, copy_ms, tags) -> None:
    run = run_of(tmp_path, copy_ms, tags)
    codes = [f.code for f in diagnose_run(run, analysed(run)).findings]
    assert "PAGEABLE_COPY" not in codes


def test_no_copies_no_figures(tmp_path) -> None:
    rows = {r: [[row for row in rank_rows(r, 1.0, "") if row[2] != "to_device"]] for r in (0, 1)}
    assert analysed(make_run(tmp_path, rows, world_size=2, warmup_steps=WARMUP)).copies == ()
