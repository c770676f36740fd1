"""A slowdown that becomes the new normal (analyze/watch/slowdown.py): on hand-made streams,
a step-up that holds gets one onset, then one re-baseline note once it has held
``rebaseline_s``, and a second step-up on top of it is an onset of its own; a step-up that
ends before is a recovery, and pure noise raises nothing."""

from __future__ import annotations

import numpy as np

from scalescope.analyze.watch.slowdown import DetectorConfig, SlowdownDetector
from scalescope.analyze.watch.slowdown_alerts import latest_alert
from scalescope.analyze.watch.slowdown_totals import FIELDS, TotalsRead
from scalescope.report.views.live import alert_style

COL = {name: i for i, name in enumerate(FIELDS)}
POLL_S, STEPS_PER_READ, RANKS = 0.5, 2, 4
STEP_MS = 250.0 / STEPS_PER_READ


def stream(minutes: float, extra: dict[float, float], seed: int = 0) -> list[TotalsRead]:
    """Reads of a 4-rank job, 2 steps a read, 2 % noise; from each minute in ``extra`` on
    (until the next), rank 1's forward takes that share of the step more (the others wait
    for it)."""
    rng = np.random.default_rng(seed)
    totals = np.zeros((RANKS, len(FIELDS)))
    out = []
    for i in range(int(minutes * 60 / POLL_S)):
        passed = [v for at, v in sorted(extra.items()) if i * POLL_S >= at * 60]
        share = passed[-1] if passed else 0.0
        step = STEP_MS * rng.lognormal(0.0, 0.02) * STEPS_PER_READ
        forward = np.full(RANKS, 0.4 * step)
        forward[1] += share * step
        grow = np.zeros((RANKS, len(FIELDS)))
        grow[:, COL["steps"]] = STEPS_PER_READ
        grow[:, COL["step_ns"]] = (step + share * step) * 1e6
        grow[:, COL["forward"]] = forward * 1e6
        grow[:, COL["backward"]] = 0.5 * step * 1e6
        grow[:, COL["comm_wait"]] = (forward[1] - forward) * 1e6
        totals = totals + grow
        out.append(TotalsRead(i * POLL_S, np.arange(RANKS), totals.copy()))
    return out


def events(reads: list[TotalsRead], config: DetectorConfig | None = None):
    detector = SlowdownDetector(config, {r: "vm" for r in range(RANKS)})
    return [a for read in reads for a in detector.observe_read(read)]


def test_a_new_normal_is_noted_once_and_a_later_slowdown_is_found_again():
    alerts = events(stream(28, {2: 0.3, 20: 0.7}))
    assert [a.event for a in alerts] == ["onset", "rebaseline", "onset"]
    first, note, second = alerts
    assert (first.ranks, first.phase) == ((1,), "forward")
    assert note.id == first.id and second.id == first.id + 1
    assert 600 <= note.detected_at - first.detected_at <= 602
    assert abs(note.now_ms / note.baseline_ms - 1.3) < 0.03
    assert "is the new normal" in note.message and "rank 1" in note.message
    assert (second.ranks, second.phase) == ((1,), "forward")
    assert abs(second.baseline_ms / note.now_ms - 1) < 0.03  # measured against the new step
    assert 25 <= second.change_pct <= 35  # 1.7 / 1.3
    assert 20 * 60 < second.detected_at < 20 * 60 + 30
    assert latest_alert(alerts[:2]) is note, "a re-baselined onset is no longer open"
    assert latest_alert(alerts) is second
    styles = [alert_style(a.message) for a in alerts]
    assert styles == ["bold red", "green", "bold red"], "top's header: open, closed, open"


def test_a_slowdown_that_ends_within_the_hold_is_a_recovery():
    alerts = events(stream(12, {2: 0.3, 8: 0.0}))
    assert [a.event for a in alerts] == ["onset", "recovery"]


def test_the_hold_is_a_setting():
    alerts = events(stream(6, {1: 0.3}), DetectorConfig(rebaseline_s=60.0))
    assert [a.event for a in alerts] == ["onset", "rebaseline"]
    assert 60 <= alerts[1].detected_at - alerts[0].detected_at <= 62


def test_pure_noise_raises_nothing():
    assert events(stream(40, {}, seed=3)) == []
