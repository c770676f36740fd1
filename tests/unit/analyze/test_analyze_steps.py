"""Step breakdown, throughput and memory, checked against numpy on the raw rows."""

from __future__ import annotations

import numpy as np
import pytest
from analysed import analysed  # noqa: E402
from analyze_runs import (
    expected_phases,
    expected_throughput,
    make_run,
    phase_row,
    synth_rank,
)

from scalescope.analyze import analyze_steps
from scalescope.events import PHASES

WARMUP = 2
STEPS = 8


def _approx(value: float) -> object:
    return pytest.approx(value, rel=1e-12, abs=1e-12)


def _synth(world_size: int = 2, **kwargs):
    return [synth_rank(r, STEPS, warmup_steps=WARMUP, **kwargs) for r in range(world_size)]


def test_phase_stats_match_independent_computation(tmp_path):
    ranks = _synth(squeeze_step=5)
    run = make_run(tmp_path, {r.rank: [r.rows] for r in ranks}, world_size=2, warmup_steps=WARMUP)
    steps = analysed(run).steps
    assert steps is not None
    assert [r.rank for r in steps.ranks] == [0, 1]
    for synth, got in zip(ranks, steps.ranks, strict=True):
        want = expected_phases(synth, first_step=WARMUP)
        assert [p.phase for p in got.phases] == [*PHASES, "other", "step"]
        assert got.missing_phases == ()
        for p in got.phases:
            for key, value in want[p.phase].items():
                assert getattr(p, key) == _approx(value), (synth.rank, p.phase, key)


def test_accumulated_forwards_are_summed_per_step(tmp_path):
    synth = synth_rank(0, STEPS, warmup_steps=WARMUP, accum=2)
    run = make_run(tmp_path, {0: [synth.rows]}, world_size=1, warmup_steps=WARMUP)
    forward = next(p for p in analysed(run).steps.ranks[0].phases if p.phase == "forward")
    rows = [(s, d) for s, name, d in synth.phases if name == "forward" and s >= WARMUP]
    per_step = {}
    for s, d in rows:
        per_step[s] = per_step.get(s, 0) + d
    assert len(rows) == 2 * len(per_step)  # two forward rows in every step
    assert forward.mean_ms == _approx(np.mean(list(per_step.values())) / 1e6)
    # the mean of single rows would be about half: per-step sums are what is reported
    assert forward.mean_ms > 1.5 * np.mean([d for _, d in rows]) / 1e6


def test_other_is_clamped_at_zero(tmp_path):
    synth = synth_rank(0, STEPS, warmup_steps=WARMUP, squeeze_step=4)
    run = make_run(tmp_path, {0: [synth.rows]}, world_size=1, warmup_steps=WARMUP)
    other = next(p for p in analysed(run).steps.ranks[0].phases if p.phase == "other")
    step4 = next(s for s in synth.steps if s[0] == 4)
    covered = sum(d for s, _, d in synth.phases if s == 4)
    assert step4[2] < covered  # the recorded step is shorter than its phases
    want = expected_phases(synth, first_step=WARMUP)["other"]
    assert other.p50_ms == _approx(want["p50_ms"])
    assert other.total_ms == _approx(want["total_ms"])
    assert other.total_ms >= 0


def test_warmup_steps_are_excluded(tmp_path):
    ranks = _synth()
    run = make_run(tmp_path, {r.rank: [r.rows] for r in ranks}, world_size=2, warmup_steps=WARMUP)
    steps = analysed(run).steps
    assert steps.warmup_steps == WARMUP
    assert not steps.warmup_fallback
    for synth, got in zip(ranks, steps.ranks, strict=True):
        assert got.num_steps == STEPS - WARMUP
        assert (got.first_step, got.last_step) == (WARMUP, STEPS - 1)
        measured = [d for s, _, d, _ in synth.steps if s >= WARMUP]
        warm = [d for s, _, d, _ in synth.steps if s < WARMUP]
        assert got.mean_step_ms == _approx(np.mean(measured) / 1e6)
        assert min(warm) > 10 * max(measured)  # warm-up would dominate if it were included
    every = [d for r in ranks for s, _, d, _ in r.steps if s >= WARMUP]
    assert steps.mean_step_ms == _approx(np.mean(every) / 1e6)


def test_all_steps_used_when_none_is_past_warmup(tmp_path):
    ranks = [synth_rank(r, 3, warmup_steps=10) for r in range(2)]
    run = make_run(tmp_path, {r.rank: [r.rows] for r in ranks}, world_size=2, warmup_steps=10)
    steps = analysed(run).steps
    assert steps.warmup_fallback
    for synth, got in zip(ranks, steps.ranks, strict=True):
        assert got.num_steps == 3
        want = expected_phases(synth, first_step=0)
        assert got.phases[-1].mean_ms == _approx(want["step"]["mean_ms"])


def test_throughput_over_longest_rank_span(tmp_path):
    ranks = _synth(world_size=3)
    rows = {r.rank: [r.rows] for r in ranks}
    steps = analysed(make_run(tmp_path, rows, world_size=3, warmup_steps=WARMUP)).steps
    expected = [expected_throughput(r, WARMUP) for r in ranks]
    for (samples, span_s), got in zip(expected, steps.ranks, strict=True):
        assert got.samples == samples == (STEPS - WARMUP) * 32
        assert got.span_s == _approx(span_s)
        assert got.samples_per_s == _approx(samples / span_s)
    total = sum(s for s, _ in expected)
    longest = max(span for _, span in expected)
    assert steps.total_samples == total
    assert steps.span_s == _approx(longest)
    assert steps.samples_per_s == _approx(total / longest)


def test_memory_peak_per_rank(tmp_path):
    ranks = _synth()
    run = make_run(tmp_path, {r.rank: [r.rows] for r in ranks}, world_size=2, warmup_steps=WARMUP)
    for synth, got in zip(ranks, analysed(run).steps.ranks, strict=True):
        peaks = [row[5] for row in synth.rows if row[2] == "rss_peak"]
        assert [(m.name, m.peak_bytes) for m in got.memory] == [("rss_peak", max(peaks))]


def test_phase_rows_of_unfinished_step_are_ignored(tmp_path):
    synth = synth_rank(0, STEPS, warmup_steps=WARMUP)
    # a step that started but never reached optimizer.step(): phases, no STEP row
    unfinished = [phase_row(STEPS, "data", 0, 10**9), phase_row(STEPS, "forward", 0, 10**9)]
    run = make_run(tmp_path, {0: [synth.rows + unfinished]}, world_size=1, warmup_steps=WARMUP)
    got = analysed(run).steps.ranks[0]
    assert got.num_steps == STEPS - WARMUP
    want = expected_phases(synth, first_step=WARMUP)
    for p in got.phases:
        assert p.mean_ms == _approx(want[p.phase]["mean_ms"])


def test_missing_phase_is_reported_not_zeroed(tmp_path):
    synth = synth_rank(0, STEPS, warmup_steps=WARMUP)
    rows = [row for row in synth.rows if row[2] != "comm_wait"]
    synth.phases = [p for p in synth.phases if p[1] != "comm_wait"]
    run = make_run(tmp_path, {0: [rows]}, world_size=1, warmup_steps=WARMUP)
    got = analysed(run).steps.ranks[0]
    assert got.missing_phases == ("comm_wait",)
    assert "comm_wait" not in [p.phase for p in got.phases]
    want = expected_phases(synth, first_step=WARMUP)
    other = next(p for p in got.phases if p.phase == "other")
    assert other.total_ms == _approx(want["other"]["total_ms"])


def test_no_step_rows_abstains(tmp_path):
    synth = synth_rank(0, STEPS, warmup_steps=WARMUP)
    rows = [row for row in synth.rows if row[2] != "step"]
    run = make_run(tmp_path, {0: [rows]}, world_size=1, warmup_steps=WARMUP)
    assert analyze_steps(run.events, WARMUP) is None


def test_ranks_with_different_step_counts_get_their_own_percentiles(tmp_path):
    """All ranks' statistics come out of one pass over their slots: ranks of 1, 2, 3 and 9
    measured steps (percentiles between and on the slots) each match numpy on their own."""
    ranks = [
        synth_rank(r, WARMUP + n, warmup_steps=WARMUP, seed=r) for r, n in enumerate((1, 2, 3, 9))
    ]
    run = make_run(tmp_path, {r.rank: [r.rows] for r in ranks}, world_size=4, warmup_steps=WARMUP)
    got = analyze_steps(run.events, WARMUP)
    for synth, rank in zip(ranks, got.ranks, strict=True):
        assert rank.num_steps == len(synth.steps) - WARMUP
        want = expected_phases(synth, first_step=WARMUP)
        for p in rank.phases:
            for key, value in want[p.phase].items():
                assert getattr(p, key) == _approx(value), (synth.rank, p.phase, key)
