"""Oversubscribed ranks measured by their run-queue wait: the oversubscription comes first
with its cost, and exposed communication that the wait accounts for is time-slicing, not
the network. Without the wait (older runs) or without oversubscription nothing changes."""

from __future__ import annotations

import msgspec
import pytest
from diagnose_inputs import analysis, collectives, good_ranks, make_input, rank_meta, rank_steps

from scalescope.diagnose import diagnose
from scalescope.diagnose.findings import Finding
from scalescope.diagnose.rank_cpu import rank_wait_ms
from scalescope.diagnose.rules_placement import OversubscribedRule, time_slicing
from scalescope.events import RankMeta

STEP_PHASES = {"forward": 10.0, "backward": 15.0, "comm_wait": 60.0, "optimizer": 5.0}
"""A 100 ms step with 60 ms of exposed communication, in small messages."""
LIFE_S = 10.0


def waiting(ranks: dict[int, RankMeta], wait_s: float | None) -> dict[int, RankMeta]:
    """Each rank lived LIFE_S seconds and waited ``wait_s`` of them for a cpu."""
    return {
        r: msgspec.structs.replace(
            m,
            start_time=1000.0,
            end_time=1000.0 + LIFE_S,
            runqueue_wait_s=wait_s,
            involuntary_switches=2000 + r,
        )
        for r, m in ranks.items()
    }


def oversubscribed(n: int = 8) -> dict[int, RankMeta]:
    """n one-thread ranks bound to the same 2 cpus."""
    return {r: rank_meta(r, [0, 1], 1) for r in range(n)}


def comm_input(ranks: dict[int, RankMeta]):
    steps = [rank_steps(r, **STEP_PHASES) for r in ranks]
    a = analysis(steps, collectives=collectives([(64 * 1024, 60.0, 0.1)], calls_per_step=4))
    return make_input(a, ranks=ranks)


def by_code(findings: tuple[Finding, ...], code: str) -> Finding:
    return next(f for f in findings if f.code == code)


def value(f: Finding, name: str) -> float | str:
    return next(e.value for e in f.evidence if e.name.startswith(name))


def test_oversubscribed_ranks_that_wait_for_a_cpu_come_first_with_their_share():
    d = diagnose(comm_input(waiting(oversubscribed(), 7.0)))
    first = d.findings[0]
    assert first.code == "OVERSUBSCRIBED" and first.level == "warning"
    assert first.saved_ms_per_step == pytest.approx(70.0), "7 s of 10 s: 70% of a 100 ms step"
    assert first.share_pct == pytest.approx(70.0)
    assert first.basis.startswith("measured: run-queue wait")
    assert "wait 70% of each step for a cpu" in first.summary
    assert value(first, "run-queue wait per step") == 70.0
    assert value(first, "involuntary context switches per rank") == 2004
    assert value(first, "threads of the 8 ranks") == 8
    assert value(first, "physical cores they run on") == 2
    assert value(first, "exposed communication the run-queue wait accounts for") == 100.0
    comm = by_code(d.findings, "COMM_LATENCY")
    assert comm.level == "info" and comm.saved_ms_per_step is None
    assert comm.basis.startswith("explained by OVERSUBSCRIBED: time-slicing")
    assert d.verdict.line.startswith("CPU placement: 8 compute threads on 2 physical cores")
    assert not any(f.code == "UNEXPLAINED" for f in d.findings), "the comm figure is accounted"


def test_a_small_wait_leaves_the_communication_finding_first():
    """1 s of 10: 10 ms/step of wait can explain at most 17% of 60 ms of exposed comm."""
    d = diagnose(comm_input(waiting(oversubscribed(), 1.0)))
    assert [f.code for f in d.findings[:2]] == ["COMM_LATENCY", "OVERSUBSCRIBED"]
    assert d.findings[0].level == "warning" and d.findings[0].saved_ms_per_step == 60.0
    over = d.findings[1]
    assert over.saved_ms_per_step == pytest.approx(10.0)
    assert value(over, "exposed communication the run-queue wait accounts for") == 16.7
    assert next(e for e in over.evidence if e.name.startswith("exposed")).comparison == "<"


def test_without_the_wait_an_oversubscribed_run_is_judged_as_before():
    d = diagnose(comm_input(waiting(oversubscribed(), None)))
    assert d.findings[0].code == "COMM_LATENCY" and d.findings[0].level == "warning"
    over = by_code(d.findings, "OVERSUBSCRIBED")
    assert over.basis.startswith("rough estimate")
    assert over.saved_ms_per_step == pytest.approx(30.0 * (1 - 2 / 8))
    assert not any("run-queue" in e.name for e in over.evidence)
    assert time_slicing(comm_input(waiting(oversubscribed(), None))) is None


def test_one_rank_without_the_wait_leaves_the_host_unmeasured():
    ranks = waiting(oversubscribed(), 7.0)
    ranks[3] = msgspec.structs.replace(ranks[3], runqueue_wait_s=None)
    ctx = comm_input(ranks)
    assert time_slicing(ctx) is None
    assert OversubscribedRule().evaluate(ctx).basis.startswith("rough estimate")


def test_a_run_that_is_not_oversubscribed_is_unchanged_by_the_wait():
    """Ranks that waited for a cpu on cores of their own (another process): no finding of
    oversubscription, and the communication finding stays the warning it was."""
    quiet = diagnose(comm_input(waiting(good_ranks(2), None)))
    loaded = diagnose(comm_input(waiting(good_ranks(2), 7.0)))
    assert loaded == quiet
    assert loaded.findings[0].code == "COMM_LATENCY" and loaded.findings[0].level == "warning"
    assert not any(f.code == "OVERSUBSCRIBED" for f in loaded.findings)


def test_a_ranks_wait_per_step_is_its_share_of_its_life_at_most_the_step():
    meta = RankMeta(rank=0, start_time=100.0, end_time=110.0, runqueue_wait_s=2.5)
    assert rank_wait_ms(meta, 80.0) == pytest.approx(20.0)
    many_threads = msgspec.structs.replace(meta, runqueue_wait_s=25.0)
    assert rank_wait_ms(many_threads, 80.0) == 80.0
    assert rank_wait_ms(msgspec.structs.replace(meta, end_time=None), 80.0) is None
    assert rank_wait_ms(msgspec.structs.replace(meta, runqueue_wait_s=None), 80.0) is None
