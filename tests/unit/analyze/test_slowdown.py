"""analyze/watch/slowdown.py over generated step streams (benchmarks/slowdown_streams.py): a planted
slowdown is found soon after its onset and named (rank, node or the collectives, and the
phase), its end is noted, and steady streams with pauses, evaluations and warm-up raise
nothing. The false-alarm rate over 120 hours, with its bound, is
benchmarks/slowdown_false_alarms.py's; a new normal's re-baseline: test_slowdown_rebaseline.py."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

from scalescope.analyze.watch.slowdown import DetectorConfig, SlowdownDetector
from scalescope.analyze.watch.slowdown_cause import attribute
from scalescope.analyze.watch.slowdown_totals import FIELDS, TotalsRead, per_step_ms
from slowdown_streams import PROFILES, Plant, Profile, onset_time_s, replay  # noqa: E402

FAST = Profile()
SLOW = PROFILES["slow steps (3 s), unnamed evals"]
AT = 3_000


def onsets(alerts):
    return [a for a in alerts if a.event == "onset"]


def held(alerts):
    """The onset of a slowdown that lasts to the end of a 0.4 h stream: it held more than
    10 minutes, so the watch took it as the new normal, once."""
    assert [a.event for a in alerts] == ["onset", "rebaseline"]
    assert alerts[1].id == alerts[0].id
    return alerts[0]


@pytest.mark.parametrize("target", [0, 5])
def test_a_rank_30_pct_slower_in_forward_is_named_within_seconds(target):
    alert = held(replay(FAST, 0.4, seed=target, plant=Plant("rank", AT, 0.3, target=target)))
    assert (alert.event, alert.subject, alert.ranks) == ("onset", "rank", (target,))
    assert (alert.phase, alert.category) == ("forward", "compute")
    assert alert.nodes == (FAST.host(target),)
    assert abs(alert.since_step - AT) <= 2
    assert 0 < alert.detected_at - onset_time_s(FAST, target, AT) <= 15
    assert 20 <= alert.change_pct <= 35  # the job's step: +30 %, less the others' noise
    assert f"rank {target} on node {FAST.host(target)}: forward +" in alert.message


def test_a_slow_node_is_named_as_the_node():
    alert = held(replay(FAST, 0.4, seed=3, plant=Plant("node", AT, 0.3, target=1)))
    assert (alert.subject, alert.nodes, alert.phase) == ("node", ("node1",), "forward")
    assert alert.ranks == tuple(range(4, 8))


def test_slower_collectives_are_communication_on_every_rank():
    alert = held(replay(FAST, 0.4, seed=4, plant=Plant("comm", AT, 0.3)))
    assert (alert.subject, alert.category) == ("world", "communication")
    assert alert.ranks == tuple(range(FAST.ranks))


def test_an_input_slowdown_is_named_and_its_recovery_noted():
    plant = Plant("rank", AT, 0.15, target=2, phase="data", until=AT + 1_000)
    onset, recovery = replay(FAST, 0.4, seed=5, plant=plant)
    assert (onset.ranks, onset.phase, onset.category) == ((2,), "data", "input")
    assert (recovery.event, recovery.id, recovery.phase) == ("recovery", onset.id, "data")
    assert AT + 1_000 <= recovery.detected_step <= AT + 1_000 + 60
    assert abs(recovery.now_ms / recovery.baseline_ms - 1) < 0.05


def test_slow_steps_are_named_within_ten_steps():
    (alert,) = onsets(replay(SLOW, 1.0, seed=1, plant=Plant("rank", 601, 0.3, target=3)))
    assert (alert.ranks, alert.phase) == ((3,), "forward")
    assert alert.detected_step - 601 <= 10


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_steady_streams_raise_nothing(name):
    """Each profile holds warm-up, GC spikes, evaluations and checkpoint pauses (named and
    not) within its first half hour."""
    profile = PROFILES[name]
    hours = 0.5 if profile.step_ms < 1000 else 1.5
    assert replay(profile, hours, seed=11) == []


def test_a_drift_under_the_threshold_raises_nothing():
    assert replay(FAST, 0.4, seed=6, plant=Plant("rank", AT, 0.05, target=1)) == []


def test_a_warm_up_longer_than_its_steps_learns_the_baseline_again():
    """The first steps twice as long for 300 steps, past the detector's warm-up: the job
    speeding up re-learns the baseline, and a later slowdown is still found."""
    slow_start = Profile(warmup_steps=300)
    alert = held(replay(slow_start, 0.4, seed=7, plant=Plant("rank", AT, 0.3, target=6)))
    assert alert.ranks == (6,) and abs(alert.since_step - AT) <= 2
    assert alert.baseline_ms < 1.3 * (FAST.step_ms + FAST.comm_ms), "not the warm-up's"


def read(at_s: float, steps: list[int], **fields: list[float]) -> TotalsRead:
    """Two or more ranks' totals: ``steps`` per rank, each field's ms per rank."""
    values = np.zeros((len(steps), len(FIELDS)))
    values[:, FIELDS.index("steps")] = steps
    for name, ms in fields.items():
        values[:, FIELDS.index(name)] = np.array(ms) * 1e6
    return TotalsRead(at_s, np.arange(len(steps)), values)


def test_attribution_reads_each_ranks_own_time_by_hand():
    """Two ranks, 10 steps in each window. Before: both 100 ms steps, 80 ms forward, 20 ms
    waiting. After: rank 1's forward takes 120 ms; rank 0 waits 60 ms for it. Own time: rank 0
    80 -> 80, rank 1 80 -> 120: rank 1, forward +50 %."""
    t0 = read(0, [0, 0])
    t1 = read(1, [10, 10], step_ns=[1000, 1000], forward=[800, 800], comm_wait=[200, 200],
              collective_ns=[200, 200])  # fmt: skip
    t2 = read(2, [20, 20], step_ns=[2400, 2400], forward=[1600, 2000], comm_wait=[800, 400],
              collective_ns=[800, 400])  # fmt: skip
    who = attribute(per_step_ms(t0, t1), per_step_ms(t1, t2), {0: "a", 1: "b"})
    assert (who.subject, who.ranks, who.nodes, who.phase) == ("rank", (1,), ("b",), "forward")
    assert who.phase_change_pct == 50.0


def test_a_rank_without_totals_or_steps_is_left_out():
    detector = SlowdownDetector(DetectorConfig(warmup_steps=0, warmup_s=0))
    assert detector.observe_read(read(0, [0, 0])) == []
    assert detector.observe_read(read(1, [0, 0])) == []  # no step between: nothing to learn
    assert detector._state.baseline == []
