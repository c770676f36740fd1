"""The diagnosis agrees with the analysis: every analysis figure that has a finding's
threshold, walked across its threshold, fires its finding above and nothing below; with no
rule at all, the engine's net still refuses ``no clear bottleneck``.

Each case builds a quiet two-rank run (100 ms steps, nothing near a threshold) with one
figure set to a known value, so the figure the engine reads is checked against it too.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from diagnose_inputs import analysis, cross_rank, make_input, rank_steps

from scalescope.diagnose import DEFAULT_THRESHOLDS, DiagnosisInput, Thresholds, diagnose
from scalescope.diagnose.consistency import analysis_costs
from scalescope.diagnose.findings import NO_CLEAR_BOTTLENECK

QUIET = {"data": 2.0, "forward": 30.0, "backward": 40.0, "comm_wait": 3.0, "optimizer": 5.0}
"""Phases of a 100 ms step (20 ms outside them): every figure below its threshold."""
BUSY = 77.0
"""Each rank's own time per step: the step less comm_wait."""


def _ctx(thresholds: Thresholds, cr=None, **phase_ms: float) -> DiagnosisInput:
    phases = {**QUIET, **phase_ms}
    ranks = [rank_steps(r, **phases) for r in (0, 1)]
    cr = cr or cross_rank(busy_ms=[BUSY, BUSY], wait_ms=[1.0, 1.0])
    return make_input(analysis(ranks, cross_rank=cr), thresholds=thresholds)


def data_wait(v: float, t: Thresholds) -> DiagnosisInput:
    return _ctx(t, data=v, forward=QUIET["forward"] + QUIET["data"] - v)


def exposed_communication(v: float, t: Thresholds) -> DiagnosisInput:
    return _ctx(t, comm_wait=v, forward=QUIET["forward"] + QUIET["comm_wait"] - v)


def straggler_waiting(v: float, t: Thresholds) -> DiagnosisInput:
    """Rank 1 is busy ``v`` ms per step longer than rank 0, which waits ``2 v`` ms for it
    (waits at gradient buckets overlap rank 0's backward): the cost is ``v``, its extra time
    outside the recorded phases (the blind spot of issue 9)."""
    cr = cross_rank(busy_ms=[BUSY, BUSY + v], wait_ms=[2 * v, 0.0], straggler=1, phase_name="other")
    return _ctx(t, cr)


def load_imbalance(v: float, t: Thresholds) -> DiagnosisInput:
    busy = [BUSY * (1 - v / 100), BUSY * (1 + v / 100)]
    return _ctx(t, cross_rank(busy_ms=busy, wait_ms=[1.0, 1.0], imbalance_pct=v))


CASES: dict[str, Callable[[float, Thresholds], DiagnosisInput]] = {
    "data_share_pct": data_wait,
    "exposed_comm_share_pct": exposed_communication,
    "straggler_cost_pct": straggler_waiting,
    "imbalance_pct": load_imbalance,
}
"""Per threshold: a run whose figure compared with it is the given value."""
THRESHOLDS = (DEFAULT_THRESHOLDS, Thresholds(data_share_pct=25, exposed_comm_share_pct=25,
                                             straggler_cost_pct=25, imbalance_pct=25))  # fmt: skip


def _cost(ctx: DiagnosisInput, threshold: str):
    return next(c for c in analysis_costs(ctx) if c.threshold == threshold)


def test_every_figure_with_a_threshold_has_a_case():
    """A figure added to the analysis costs without a case here fails this test."""
    everything = straggler_waiting(20.0, DEFAULT_THRESHOLDS)
    assert {c.threshold for c in analysis_costs(everything)} == {
        "data_share_pct",
        "straggler_cost_pct",
        "imbalance_pct",
        "exposed_comm_share_pct",
    }
    assert set(CASES) == {c.threshold for c in analysis_costs(everything)}


@pytest.mark.parametrize("t", THRESHOLDS, ids=["defaults", "at 25"])
@pytest.mark.parametrize("threshold", list(CASES))
def test_the_finding_fires_exactly_when_its_figure_crosses_the_threshold(threshold, t):
    limit = getattr(t, threshold)
    for value in (0.8 * limit, limit, 1.2 * limit):
        ctx = CASES[threshold](value, t)
        cost = _cost(ctx, threshold)
        assert cost.value == pytest.approx(value), "the engine reads the figure as built"
        d = diagnose(ctx)
        warned = [f.code for f in d.findings if f.level == "warning"]
        if value >= limit:
            assert set(warned) & set(cost.codes), (value, warned)
            assert "UNEXPLAINED" not in warned, "a rule, not the net, accounts for it"
            assert not d.verdict.line.startswith(NO_CLEAR_BOTTLENECK)
        else:
            assert warned == [], (value, warned)
            assert d.verdict.line.startswith(NO_CLEAR_BOTTLENECK)


@pytest.mark.parametrize("threshold", list(CASES))
def test_with_no_rule_the_net_still_names_the_cost(threshold):
    limit = getattr(DEFAULT_THRESHOLDS, threshold)
    d = diagnose(CASES[threshold](1.5 * limit, DEFAULT_THRESHOLDS), rules=())
    assert [f.code for f in d.findings] == ["UNEXPLAINED"]
    f = d.findings[0]
    assert f.evidence[0].value == pytest.approx(1.5 * limit, abs=0.05)
    assert (f.evidence[0].threshold, f.evidence[0].comparison) == (limit, ">=")
    assert not d.verdict.line.startswith(NO_CLEAR_BOTTLENECK)
    assert d.verdict.line.startswith(f.bottleneck) and "no rule accounts for it" in d.verdict.line
    quiet = diagnose(CASES[threshold](0.5 * limit, DEFAULT_THRESHOLDS), rules=())
    assert quiet.findings == () and quiet.verdict.line == NO_CLEAR_BOTTLENECK


def test_imbalance_with_a_straggler_below_its_threshold_is_still_a_finding():
    """Rank 1 named straggler, the others wait 15 ms for it (under a straggler threshold of
    25%), busy time 20% uneven: the imbalance is reported, not lost between the rules."""
    t = Thresholds(straggler_cost_pct=25)
    cr = cross_rank(busy_ms=[70.0, 105.0], wait_ms=[15.0, 0.0], straggler=1, imbalance_pct=20)
    d = diagnose(_ctx(t, cr))
    assert [f.code for f in d.findings if f.level == "warning"] == ["LOAD_IMBALANCE"]


def test_straggler_outside_the_recorded_phases_is_named_with_where_and_what_to_look_for():
    """Issue 9: rank 1 does 80 ms of host work after the optimizer step, rank 0 waits."""
    ranks = [rank_steps(0, 100.0, **QUIET), rank_steps(1, 100.0, **{**QUIET, "comm_wait": 0.5})]
    cr = cross_rank(busy_ms=[18.0, 98.0], wait_ms=[80.0, 0.0], straggler=1, phase_name="other",
                    between=("optimizer", "data"))  # fmt: skip
    d = diagnose(make_input(analysis(ranks, cross_rank=cr)))
    first = d.findings[0]
    assert (first.code, first.rank, first.level) == ("STRAGGLER", 1, "warning")
    assert first.summary.startswith(
        "time outside the recorded phases of rank 1: 80 ms per step, between the optimizer "
        "step and the next batch; the others wait for it (80% of a step)"
    )
    assert first.share_pct == pytest.approx(80.0)
    assert first.remedies[0].startswith(
        "look for per-step host work on rank 1 (between the optimizer step and the next batch)"
    )
    for hint in ("logging", "`.item()`", "file I/O", "checkpointing", "garbage collection",
                 "--timeline", "`other` row of the step breakdown"):  # fmt: skip
        assert hint in first.remedies[0]
    where = next(e for e in first.evidence if e.name == "where it lies")
    assert where.value == "between the optimizer step and the next batch"
    assert d.verdict.line.startswith("straggler: time outside the recorded phases of rank 1")
