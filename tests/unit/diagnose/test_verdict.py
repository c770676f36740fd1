"""The one verdict from ranked findings: the top cause and its culprit, its cost and range,
a second cause only when the two cannot be told apart, and the states of a run that failed,
hung or was recorded without the probe. Findings and analyses built by hand."""

from __future__ import annotations

from diagnose_inputs import analysis

from scalescope.analyze.model.replay import Prediction
from scalescope.analyze.model.whatif import WhatIf
from scalescope.analyze.rank_status import RankStatus
from scalescope.diagnose.findings import Finding
from scalescope.diagnose.verdict import ESTIMATE_FACTOR, noise_ms, verdict_of


def finding(code: str, ms: float | None, basis: str = "estimate: x", **kw) -> Finding:
    return Finding(code=code, bottleneck=code.lower(), summary=f"{code} costs", share_pct=10.0,
                   saved_ms_per_step=ms, evidence=(), remedies=(), basis=basis, **kw)  # fmt: skip


def replayed(low_ms: float, high_ms: float, steps: int) -> WhatIf:
    """A what-if whose replayed steps spread from ``low_ms`` to ``high_ms`` (10th-90th)."""
    step = Prediction("as measured", 100.0, 100.0, low_ms, high_ms, ())
    return WhatIf(100.0, step, (), steps, 2, 4)


def test_the_top_cause_alone_when_the_second_is_clearly_smaller() -> None:
    a = analysis([])
    v = verdict_of((finding("STRAGGLER", 40.0, rank=1), finding("COMM_LATENCY", 9.0)), a, "s")
    assert v.state == "bottleneck" and [c.code for c in v.causes] == ["STRAGGLER"]
    cost = v.top.cost
    assert (cost.low_ms, cost.high_ms) == (40.0 / ESTIMATE_FACTOR, 40.0 * ESTIMATE_FACTOR)
    assert v.culprit.words == "rank 1" and not cost.replayed
    assert v.line == "straggler [rank 1]: STRAGGLER costs (~40 ms/step to gain, estimate)"


def test_two_causes_whose_ranges_overlap_ordered_by_their_lower_bounds() -> None:
    a = analysis([]).replaced(whatif=replayed(90.0, 110.0, 16))
    first = finding("INPUT_BOUND", 30.0, basis="replayed without it: no data wait")
    second = finding("OVERSUBSCRIBED", 25.0)
    v = verdict_of((first, second), a, "s")
    assert [c.code for c in v.causes] == ["INPUT_BOUND", "OVERSUBSCRIBED"]
    assert v.causes[0].cost.replayed and v.causes[0].cost.low_ms > v.causes[1].cost.low_ms
    assert "; beside it, oversubscribed: " in v.line


def test_a_replayed_gain_within_the_steps_spread_is_no_cause() -> None:
    a = analysis([]).replaced(whatif=replayed(60.0, 140.0, 4))
    noise = noise_ms(a.whatif)
    assert noise == 2 * (80.0 / 2.563) / 2
    small = finding("STRAGGLER", noise / 2, basis="replayed without it: at the pace", rank=0)
    v = verdict_of((small,), a, "s")
    assert v.state == "no bottleneck" and v.causes == () and v.noise_ms == noise
    assert v.line == f"no clear bottleneck: straggler [rank 0] (~16 ms/step to gain, replayed) " \
        f"is within the steps' own spread (±{noise:.1f} ms)"  # fmt: skip


def test_a_failed_run_names_the_first_rank_to_fail_then_its_cause() -> None:
    failed = RankStatus(1, "node-a", "failed", 1, "RuntimeError: boom", 3)
    peer = RankStatus(0, "node-a", "failed", 1, "Connection closed by peer", 3)
    a = analysis([]).replaced(ranks=(peer, failed))
    v = verdict_of((finding("COMM_LATENCY", 7.0),), a, "s")
    assert v.state == "failed" and v.note == "rank 1 failed first (exit code 1)"
    assert v.line == "failed: rank 1 failed first (exit code 1); comm_latency: COMM_LATENCY " \
        "costs (~7 ms/step to gain, estimate)"  # fmt: skip


def test_a_hang_and_a_run_without_the_probe() -> None:
    hang = finding("HANG", None)
    v = verdict_of((hang, finding("STRAGGLER", 40.0, rank=1)), analysis([]), "s")
    assert v.state == "hung" and [c.code for c in v.causes] == ["HANG"]
    assert v.line == "hang: HANG costs"
    off = verdict_of((), analysis([]).replaced(probe=False), "s")
    assert off.state == "probe off" and off.causes == ()


def test_an_ingested_trace_says_where_it_came_from() -> None:
    v = verdict_of((finding("COMM_LATENCY", 7.0),), analysis([]), "kineto")
    assert v.source == "kineto" and v.state == "bottleneck"
