"""A slowdown of the collectives named as a link from the ranks' time per group, computed by
hand: three hosts, one rank each, in a ring of pairs {0,1}, {1,2}, {0,2} (the topology of
tests/e2e/test_slow_link_live.py)."""

from __future__ import annotations

import numpy as np

from scalescope.analyze.watch.slowdown import DetectorConfig, SlowdownDetector
from scalescope.analyze.watch.slowdown_cause import attribute
from scalescope.analyze.watch.slowdown_link import group_field, group_members, slow_link
from scalescope.analyze.watch.slowdown_totals import FIELDS, TotalsRead, per_step_ms
from scalescope.events.live_state import parse_live_state
from scalescope.events.live_state_writer import LiveStateWriter

HOSTS = {0: "host0", 1: "host1", 2: "host2"}
P01, P12, P02 = (0, 1, 2), (1, 1, 2), (0, 2, 2)
"""(first, stride, size) of each pair."""


def read(at_s, steps, groups=None, **fields) -> TotalsRead:
    """Totals (ns) from ms per rank; ``groups``: {key: {rank: ms}}."""
    values = np.zeros((len(steps), len(FIELDS)))
    values[:, FIELDS.index("steps")] = steps
    for name, ms in fields.items():
        values[:, FIELDS.index(name)] = np.array(ms) * 1e6
    per_group = {}
    for key, by_rank in (groups or {}).items():
        column = per_group[key] = np.full(len(steps), np.nan)
        for rank, ms in by_rank.items():
            column[rank] = ms * 1e6
    return TotalsRead(at_s, np.arange(len(steps)), values, per_group)


def windows(after_groups, collective_after=(550, 550, 550)):
    """10 steps of 100 ms, 30 ms of it in collectives, 10 ms per rank and pair; then 10 steps
    of 125 ms with ``after_groups`` (ms per step) and ``collective_after`` (ms per 10 steps),
    each rank's own time unchanged (70 ms)."""
    g0 = {P01: {0: 0, 1: 0}, P12: {1: 0, 2: 0}, P02: {0: 0, 2: 0}}
    g1 = {k: {r: 100 for r in v} for k, v in g0.items()}
    g2 = {k: {r: 100 + 10 * after_groups[k][r] for r in v} for k, v in g1.items()}
    t0 = read(0, [0, 0, 0], g0)
    t1 = read(1, [10] * 3, g1, step_ns=[1000] * 3, collective_ns=[300] * 3)
    t2 = read(
        2, [20] * 3, g2, step_ns=[2250] * 3, collective_ns=[300 + c for c in collective_after]
    )
    return per_step_ms(t0, t1), per_step_ms(t1, t2)


def test_the_pair_that_slowed_names_the_link():
    """Pair {0,1}: rank 1's receive from rank 0 10 -> 30 ms a step (+20: the bytes crossing
    the slow link; rank 0's send returned as soon as they were buffered). The others: rank 2
    waits +5 ms longer for its peers, who are late from the slow pair."""
    after = {P01: {0: 10, 1: 30}, P12: {1: 10, 2: 15}, P02: {0: 10, 2: 15}}
    who = attribute(*windows(after), HOSTS)
    assert (who.subject, who.ranks, who.nodes) == ("link", (0, 1), ("host0", "host1"))
    assert (who.category, who.phase_change_pct) == ("communication", 200.0)


def test_slower_collectives_of_the_world_name_no_link():
    """Every rank +25 ms a step in the world's all-reduce; each pair as before."""
    after = {P01: {0: 10, 1: 10}, P12: {1: 10, 2: 11}, P02: {0: 12, 2: 10}}
    who = attribute(*windows(after), HOSTS)
    assert (who.subject, who.category) == ("world", "communication")


def test_two_pairs_slowed_alike_are_not_told_apart():
    after = {P01: {0: 10, 1: 30}, P12: {1: 10, 2: 28}, P02: {0: 10, 2: 10}}
    assert attribute(*windows(after), HOSTS).subject == "world"


def test_a_group_with_no_other_of_its_shape_tells_nothing():
    """Ranks 1 and 2 share host1: {0,1} spans two hosts, {1,2} one; no class of two."""
    ranks, hosts = np.arange(3), {0: "host0", 1: "host1", 2: "host1"}
    before = {group_field(P01): np.array([10.0, 10.0, np.nan])}
    before[group_field(P12)] = np.array([np.nan, 10.0, 10.0])
    after = {group_field(P01): np.array([30.0, 30.0, np.nan])}
    after[group_field(P12)] = np.array([np.nan, 10.0, 10.0])
    assert slow_link(ranks, before, after, hosts, grew_ms=20.0) is None
    assert slow_link(ranks, before, after, HOSTS, grew_ms=20.0).hosts == ("host0", "host1")


def test_the_link_explains_a_share_of_the_step_or_is_none():
    ranks = np.arange(3)
    before = {group_field(P01): np.array([10.0, 10.0, np.nan])}
    before[group_field(P12)] = np.array([np.nan, 10.0, 10.0])
    after = {group_field(P01): np.array([11.0, 11.0, np.nan])}
    after[group_field(P12)] = np.array([np.nan, 10.0, 10.0])
    assert slow_link(ranks, before, after, HOSTS, grew_ms=1.0).ranks == (0, 1)
    assert slow_link(ranks, before, after, HOSTS, grew_ms=25.0) is None  # 1 ms of 25


def test_group_fields_name_their_members():
    assert group_members(group_field((3, 4, 3))).tolist() == [3, 7, 11]


def test_the_detector_alerts_with_the_link_and_says_it():
    """A steady ring, then pair {0,1}'s transfer +20 ms a step from read 30 on."""
    detector = SlowdownDetector(DetectorConfig(warmup_steps=0, warmup_s=0), HOSTS)
    totals = np.zeros(3)
    groups = {P01: np.zeros(3), P12: np.zeros(3), P02: np.zeros(3)}
    members = {P01: [0, 1], P12: [1, 2], P02: [0, 2]}
    alerts = []
    for i in range(60):
        slow = i >= 30
        step, coll = (125.0, 55.0) if slow else (100.0, 30.0)
        totals += 10 * np.array([step, coll, 1])
        for key, ranks in members.items():
            groups[key][ranks] += 10 * (30.0 if slow and key == P01 else 10.0)
        values = np.zeros((3, len(FIELDS)))
        values[:, FIELDS.index("steps")] = totals[2]
        values[:, FIELDS.index("step_ns")] = totals[0] * 1e6
        values[:, FIELDS.index("collective_ns")] = totals[1] * 1e6
        per_group = {}
        for key, ranks in members.items():
            column = per_group[key] = np.full(3, np.nan)
            column[ranks] = groups[key][ranks] * 1e6
        alerts += detector.observe_read(TotalsRead(i * 0.5, np.arange(3), values, per_group))
    (alert,) = alerts
    assert (alert.subject, alert.nodes, alert.ranks) == ("link", ("host0", "host1"), (0, 1))
    assert "link host0 <-> host1 (the collectives of ranks 0, 1)" in alert.message


def test_the_live_state_keeps_a_slot_per_evenly_spaced_group(tmp_path):
    w = LiveStateWriter(tmp_path / "rank-0.state", pid=1, wall_minus_perf_ns=0)
    assert w.group_slot([0, 1, 2, 3], world_size=4) == 0  # the world: nothing to compare
    assert w.group_slot([0, 1, 3], world_size=8) == 0  # unevenly spaced
    pair = w.group_slot([4, 0], world_size=8)
    assert pair > 0 and w.group_slot([0, 4], world_size=8) == pair
    slots = [w.group_slot([0, k], world_size=16) for k in range(1, 9)]
    assert slots.count(pair) == 1 and slots[-1] == 0  # 7 slots: the pair and six more
    w.add_group_time(pair, 250)
    w.add_group_time(pair, 50)
    w.add_group_time(0, 1_000)  # a group without a slot: nowhere
    totals = parse_live_state(0, (tmp_path / "rank-0.state").read_bytes()).totals
    assert totals.group_ns[(0, 4, 2)] == 300 and len(totals.group_ns) == 7
    w.close()
