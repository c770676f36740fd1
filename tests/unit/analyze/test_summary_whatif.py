"""The what-if of a run recorded as summaries (``--record summary``) against the same run
recorded in full, on hand-built 2-rank runs whose costs are known: each step both ranks
compute 18 ms and meet in an all-reduce (1 ms of transfer); rank 1 computes 10 ms more at
some steps. The windows hold steps 0-11 (warm-up 4), the run 30 steps
(analyze/model/window_sample.py, run_gain.py)."""

from __future__ import annotations

import pytest
from analyze_runs import coll_row, make_run, phase_row, step_row

from scalescope.analyze.model.whatif import what_if
from scalescope.probe.summary import fold_step

MS = 1_000_000
BASE, STEPS, WINDOW, WARMUP = 1_000 * MS, 30, 12, 4
OWN, EXTRA, TRANSFER = 18 * MS, 10 * MS, MS


def recorded(tmp_path, slow_at, summary: bool):
    """The run, rank 1 slower by ``EXTRA`` at the steps ``slow_at`` says."""
    rows: dict[int, list] = {0: [], 1: []}
    t0 = BASE
    for step in range(STEPS):
        own = {0: OWN, 1: OWN + (EXTRA if slow_at(step) else 0)}
        done = t0 + max(own.values()) + TRANSFER
        for rank in (0, 1):
            arrive = t0 + own[rank]
            colls = [coll_row(step, "all_reduce", arrive, done - arrive, 4096, step, tag="sync")]
            rows[rank] += [
                phase_row(step, "forward", t0, own[rank] - 8 * MS),
                phase_row(step, "backward", t0 + own[rank] - 8 * MS, 8 * MS),
                step_row(step, t0, done + MS - t0, 8),
            ]
            if not summary or step < WINDOW:
                rows[rank] += colls
            if summary:
                rows[rank] += [r[:11] for r in fold_step(step, t0, [(*c, -1) for c in colls])]
        t0 = done + MS
    return make_run(tmp_path, {r: [v] for r, v in rows.items()}, world_size=2,
                    warmup_steps=WARMUP)  # fmt: skip


def rank_fix(tmp_path, slow_at, summary: bool):
    result = what_if(recorded(tmp_path, slow_at, summary), WARMUP, causes=["rank:1"])
    return result, result.fixes[0]


def test_a_rank_slow_every_other_step_is_costed_over_the_run(tmp_path) -> None:
    """Late at every other step: over the windows' 8 measured steps alone the peer test
    cannot tell it from noise; with the summarised steps' own time it can, and the replayed
    gain per ms of its excess, carried to the run's excess, is the full run's gain."""
    _full, a = rank_fix(tmp_path, lambda s: s % 2 == 0, summary=False)
    result, b = rank_fix(tmp_path, lambda s: s % 2 == 0, summary=True)
    assert result.windows == tuple(range(WARMUP, WINDOW))
    assert "rank:1" in result.beyond_spread
    assert a.gain_ms == pytest.approx(EXTRA / MS / 2, rel=0.05)
    assert b.gain_ms == pytest.approx(a.gain_ms, rel=0.05)
    assert 0 < b.gain_low_ms <= b.gain_ms <= b.gain_high_ms


def test_a_rank_slow_after_the_windows_is_costed_from_the_summaries(tmp_path) -> None:
    """Slow from step 20, after every window: the steps since against the steps before,
    from every step's STEP rows, as the replay judges an onset in full rows."""
    _full, a = rank_fix(tmp_path, lambda s: s >= 20, summary=False)
    _result, b = rank_fix(tmp_path, lambda s: s >= 20, summary=True)
    assert a.since_step == b.since_step == 20
    assert b.gain_ms == pytest.approx(EXTRA / MS, rel=0.05)
    assert b.gain_ms == pytest.approx(a.gain_ms, rel=0.05)
    assert "after the full-row windows" in b.note


def test_a_run_recorded_in_full_is_replayed_as_before(tmp_path) -> None:
    """No summarised step: no sample, and the gain is the replay's alone."""
    result, fix = rank_fix(tmp_path, lambda s: s % 2 == 0, summary=False)
    assert result.windows == ()
    assert fix.note == "at the pace of the other ranks"


def test_a_stall_every_ten_steps_is_costed_over_the_run(tmp_path) -> None:
    """Late at steps 9, 19 and 29 only (the windows hold one of them): its bursts make it a
    cause (peers.py), and its gain's interval, carried to the run, stays above 0
    (bootstrap.period_of: 26 steps hold 3 blocks of 10)."""
    _full, a = rank_fix(tmp_path / "full", lambda s: s % 10 == 9, summary=False)
    result, b = rank_fix(tmp_path / "summary", lambda s: s % 10 == 9, summary=True)
    assert "rank:1" in result.beyond_spread
    assert a.gain_ms == pytest.approx(3 * EXTRA / MS / (STEPS - WARMUP), rel=0.05)
    assert b.gain_ms == pytest.approx(a.gain_ms, rel=0.05)
    assert 0 < b.gain_low_ms <= b.gain_ms <= b.gain_high_ms


def test_the_whatif_command_replays_the_model_the_report_does(tmp_path) -> None:
    """``scalescope whatif`` of a run recorded as summaries costs a rank's fix over the run,
    as the report's what-if (``replay_grid``): the windows alone put it at 0."""
    import json

    from typer.testing import CliRunner

    from scalescope.cli import app

    run = recorded(tmp_path, lambda s: s % 2 == 0, summary=True)
    expected = what_if(run, WARMUP, causes=["rank:1"]).fixes[0]
    out = tmp_path / "whatif.json"
    args = ["whatif", str(run.path), "--fix", "rank:1", "--json", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.stdout
    printed = json.loads(out.read_text())["fixes"][0]
    assert printed["gain_ms"] == pytest.approx(expected.gain_ms)
    assert printed["gain_low_ms"] == pytest.approx(expected.gain_low_ms)
    assert printed["gain_ms"] == pytest.approx(EXTRA / MS / 2, rel=0.05)


def test_a_stall_every_ten_steps_has_a_rerun_interval_over_the_run(tmp_path) -> None:
    """The re-run's interval from the run's steps (the STEP rows), not the windows' 8 with one
    stall in them: it holds the gain and stays within a stall's share of it either side."""
    _result, fix = rank_fix(tmp_path, lambda s: s % 10 == 9, summary=True)
    stall_share = EXTRA / MS / (STEPS - WARMUP)
    assert fix.rerun_low_ms <= fix.gain_ms <= fix.rerun_high_ms
    assert fix.rerun_high_ms - fix.rerun_low_ms < 6 * stall_share


UNIT_BYTES = (1024, 2048, 4096, 8192)
ALPHA, BETA = 0.5 * MS, 100  # a unit's all-gather: 0.5 ms + 100 ns a byte


def fsdp_recorded(tmp_path, slower_from: int, summary: bool):
    """A unit a layer: each step both ranks compute ``OWN``, then gather their 4 units one
    after the other; every call takes twice as long from step ``slower_from`` on (the
    calls slower, the compute not)."""
    rows: dict[int, list] = {0: [], 1: []}
    t0 = BASE
    for step in range(STEPS):
        slower = 2 if step >= slower_from else 1
        at, colls = t0 + OWN, []
        for k, nbytes in enumerate(UNIT_BYTES):
            took = int(slower * (ALPHA + BETA * nbytes))
            colls.append(coll_row(step, "all_gather", at, took, nbytes, step * len(UNIT_BYTES) + k,
                                  tag=f"unshard:layers.{k}"))  # fmt: skip
            at += took
        for rank in (0, 1):
            rows[rank] += [phase_row(step, "forward", t0, OWN), step_row(step, t0, at + MS - t0, 8)]
            if not summary or step < WINDOW:
                rows[rank] += colls
            if summary:
                rows[rank] += [r[:11] for r in fold_step(step, t0, [(*c, -1) for c in colls])]
        t0 = at + MS
    return make_run(tmp_path, {r: [v] for r, v in rows.items()}, world_size=2,
                    warmup_steps=WARMUP)  # fmt: skip


def test_units_merged_are_costed_over_the_run_where_the_calls_slow_after_the_windows(
    tmp_path,
) -> None:
    """The units' calls twice as slow after the windows: the gain of merging them follows
    the time in them (run_gain.py ``fused_gain``), and the windows alone, their calls fast,
    would say too little. Merged, a step's 4 calls, each α + β·bytes, become one of
    α + β·Σbytes: (4 - 1)·α a step less, twice that at the slower steps (the α-β line's
    share of the call kept is the same at either pace)."""
    slower = [2 if s >= WINDOW else 1 for s in range(WARMUP, STEPS)]
    expected = sum(m * (len(UNIT_BYTES) - 1) * ALPHA for m in slower) / len(slower) / MS
    windows_alone = (len(UNIT_BYTES) - 1) * ALPHA / MS
    full = what_if(fsdp_recorded(tmp_path, WINDOW, summary=False), WARMUP, causes=["comm:fused"])
    result = what_if(fsdp_recorded(tmp_path, WINDOW, summary=True), WARMUP, causes=["comm:fused"])
    a, b = full.fixes[0], result.fixes[0]
    assert result.windows == tuple(range(WARMUP, WINDOW))
    assert a.gain_ms == pytest.approx(expected, rel=0.02)
    assert b.gain_ms == pytest.approx(expected, rel=0.02)
    assert b.gain_ms > 1.5 * windows_alone
    assert b.gain_low_ms <= b.gain_ms <= b.gain_high_ms
    assert "FSDP units merged" in b.note


def test_units_merged_at_one_pace_are_the_windows_gain(tmp_path) -> None:
    """The calls alike at every step: carried to the run, the windows' gain is unchanged."""
    result = what_if(fsdp_recorded(tmp_path, STEPS, summary=True), WARMUP, causes=["comm:fused"])
    assert result.fixes[0].gain_ms == pytest.approx((len(UNIT_BYTES) - 1) * ALPHA / MS, rel=0.02)


def test_a_gain_its_excess_cannot_hold_is_not_carried() -> None:
    """Per ms of a rank's excess over its median peer its fix buys at most that ms (within the
    replay's own error): where the windows' gain per ms is above it beyond the ratio's spread
    (held-out seed 4911's FSDP2 straggler before its peer's waits were kept: 39 ms replayed
    against 1-14 ms of excess), carrying it by the run's excess would multiply that excess's
    noise: it is not carried. A gain its excess holds is."""
    import numpy as np

    from scalescope.analyze.model.run_gain import PER_MS_MOST, _ratio

    measured = np.full(8, 60.0)
    excess = np.array([2.0, 5.4, 0.9, 5.3, 4.6, 7.0, 3.7, 5.6])
    run_excess = np.r_[excess, [1.8, 7.2, 8.3, 3.7, 10.4, 12.2, 8.1, 11.8, 19.5, 8.0]]
    steps = np.full(len(run_excess), 60.0)
    asleep = measured - np.array([38.4, 40.0, 38.1, 38.8, 39.4, 39.3, 38.8, 38.6])
    assert _ratio(measured, asleep, excess, run_excess, steps) is not None  # as before
    assert _ratio(measured, asleep, excess, run_excess, steps, PER_MS_MOST) is None
    held = _ratio(measured, measured - 0.95 * excess, excess, run_excess, steps, PER_MS_MOST)
    assert held is not None and held.gain_ms == pytest.approx(0.95 * run_excess.mean())
