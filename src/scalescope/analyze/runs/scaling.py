"""The scaling table of a study: samples/s, speedup, parallel efficiency and, per size, the
step breakdown that says why efficiency drops (compute, exposed comm, waiting, data).

Speedup and efficiency are against the smallest size that succeeded (usually 1 rank):
speedup = samples/s(N) / samples/s(base); efficiency = speedup / (N / base ranks). With
weak scaling (same per-rank batch) that is throughput per rank kept; with strong scaling
(same global batch) it is the classic T(base) / (T(N) · N / base).
"""

from __future__ import annotations

from dataclasses import dataclass

from scalescope.analyze.summary import RunAnalysis
from scalescope.events.study import ScalePoint, ScaleStudy

COMPUTE_PHASES = ("forward", "backward", "optimizer")


@dataclass(frozen=True)
class StepBreakdown:
    """Per measured step, averaged over ranks, in ms."""

    compute_ms: float | None
    """forward + backward + optimizer (backward includes gradient comm hidden under it)."""
    exposed_comm_ms: float | None
    """Exposed transfer after backward: the least comm_wait over ranks (the last rank's)."""
    waiting_ms: float | None
    """Waiting for other ranks inside collectives; None with one rank."""
    data_ms: float | None


@dataclass(frozen=True)
class ScalingRow:
    ranks: int
    nodes: int
    status: str
    error: str | None
    samples_per_s: float | None
    step_ms: float | None
    speedup: float | None
    efficiency_pct: float | None
    breakdown: StepBreakdown | None
    oversubscribed: bool
    threads_per_rank: int
    per_rank_batch: int | None
    run_dir: str


@dataclass(frozen=True)
class ScalingTable:
    mode: str
    workload: str
    base_ranks: int | None
    """The size speedup is measured against; None when no size succeeded."""
    rows: tuple[ScalingRow, ...]


def _mean_phase(a: RunAnalysis, names: tuple[str, ...]) -> float | None:
    ranks = a.steps.ranks if a.steps else ()
    per_rank = [
        sum(p.mean_ms for p in r.phases if p.phase in names)
        for r in ranks
        if any(p.phase in names for p in r.phases)
    ]
    return sum(per_rank) / len(per_rank) if per_rank else None


def step_breakdown(a: RunAnalysis) -> StepBreakdown | None:
    if a.steps is None or a.steps.mean_step_ms is None:
        return None
    cross = a.cross_rank
    waits = [r.wait_ms_per_step for r in cross.ranks] if cross else []
    exposed = cross.overlap.exposed_transfer_ms_per_step if cross and cross.overlap else None
    if exposed is None:
        exposed = _mean_phase(a, ("comm_wait",))
    return StepBreakdown(
        compute_ms=_mean_phase(a, COMPUTE_PHASES),
        exposed_comm_ms=exposed,
        waiting_ms=sum(waits) / len(waits) if waits else None,
        data_ms=_mean_phase(a, ("data",)),
    )


def scaling_efficiency(
    ranks: int, throughput: float, base_ranks: int, base_throughput: float
) -> float | None:
    """Throughput gained over the base run divided by the ranks added: 1.0 is linear scaling.

    One formula for both kinds of scaling: a fixed per-rank batch (weak scaling, the training
    workloads) and a fixed data set (strong scaling, the analytics) both ideally give
    ``throughput = base_throughput x ranks / base_ranks``. None without a usable base.
    """
    if base_throughput <= 0 or base_ranks <= 0 or ranks <= 0:
        return None
    return (throughput / base_throughput) / (ranks / base_ranks)


def _row(p: ScalePoint, a: RunAnalysis | None, base: ScalePoint | None) -> ScalingRow:
    speedup = efficiency = None
    if base is not None and p.samples_per_s and base.samples_per_s:
        speedup = p.samples_per_s / base.samples_per_s
        efficiency = 100.0 * scaling_efficiency(
            p.ranks, p.samples_per_s, base.ranks, base.samples_per_s
        )
    return ScalingRow(
        ranks=p.ranks,
        nodes=p.nodes,
        status=p.status,
        error=p.error,
        samples_per_s=p.samples_per_s,
        step_ms=p.step_ms,
        speedup=speedup,
        efficiency_pct=efficiency,
        breakdown=step_breakdown(a) if a is not None else None,
        oversubscribed=p.oversubscribed,
        threads_per_rank=p.threads_per_rank,
        per_rank_batch=p.per_rank_batch,
        run_dir=p.run_dir,
    )


def scaling_table(study: ScaleStudy, analyses: dict[int, RunAnalysis | None]) -> ScalingTable:
    """The table of ``study``; ``analyses`` maps a point's ranks to its run's analysis."""
    ok = [p for p in study.points if p.status == "ok" and p.samples_per_s]
    base = min(ok, key=lambda p: p.ranks) if ok else None
    rows = tuple(_row(p, analyses.get(p.ranks), base) for p in study.points)
    return ScalingTable(study.mode, study.workload, base.ranks if base else None, rows)
