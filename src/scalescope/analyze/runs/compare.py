"""Two runs side by side (two builds, two node counts, two settings): the same tables with
the ratio B / A. Pure functions over two RunAnalysis results; nothing is re-measured.

A ratio is None when either side was not measured or A is 0; a row that exists in only one
run is listed as such rather than compared with an invented zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalescope.analyze.cross_rank import CrossRankAnalysis
from scalescope.analyze.steps.steps import STEP
from scalescope.analyze.summary import RunAnalysis


@dataclass(frozen=True)
class Pair:
    """One figure in run A and run B."""

    a: float | None
    b: float | None
    ratio: float | None
    """b / a; None when either is None or a is 0."""


def pair(a: float | None, b: float | None) -> Pair:
    ratio = b / a if a is not None and b is not None and a != 0 else None
    return Pair(a, b, ratio)


@dataclass(frozen=True)
class RunFacts:
    run_id: str
    workload: str
    command: tuple[str, ...]
    world_size: int
    nproc_per_node: int
    num_hosts: int
    status: str
    warmup_steps: int
    measured_steps: int | None
    """Measured steps of the rank with the most; None without step events."""
    windows: tuple[int, ...] = ()
    """The steps its collectives' counts come from where it recorded the others as summaries
    (``CollectiveAnalysis.windows``); () in full."""


@dataclass(frozen=True)
class PhaseComparison:
    phase: str
    """A phase, or ``other``; mean per step, averaged over the ranks that recorded it."""
    mean_ms: Pair


@dataclass(frozen=True)
class SizeKey:
    op: str
    nbytes: int


@dataclass(frozen=True)
class SizeComparison:
    op: str
    nbytes: int
    calls_per_rank: Pair
    time_avg_us: Pair
    busbw_gbps: Pair


@dataclass(frozen=True)
class WaitComparison:
    op: str
    tag: str
    nbytes: int
    instances: Pair
    skew_avg_us: Pair
    wait_avg_us: Pair
    transfer_avg_us: Pair
    wait_share_pct: Pair


@dataclass(frozen=True)
class CrossRankComparison:
    """Whole-run cross-rank figures; per-rank ones are averaged over ranks."""

    wait_ms_per_step: Pair
    busy_ms_per_step: Pair
    load_imbalance_pct: Pair
    hidden_ms_per_step: Pair
    exposed_ms_per_step: Pair
    best_fix_step_ms: Pair
    """The replayed step with the what-if's largest gain fixed (analyze/model/whatif.py)."""
    straggler_a: int | None
    straggler_b: int | None
    waits: tuple[WaitComparison, ...]
    """(op, tag, nbytes) present in both runs, sorted."""


@dataclass(frozen=True)
class RunComparison:
    """Run B against run A; every ``ratio`` is B / A."""

    a: RunFacts
    b: RunFacts
    samples_per_s: Pair
    mean_step_ms: Pair
    phases: tuple[PhaseComparison, ...]
    sizes: tuple[SizeComparison, ...]
    """(op, nbytes) present in both runs, sorted."""
    sizes_only_a: tuple[SizeKey, ...]
    sizes_only_b: tuple[SizeKey, ...]
    cross_rank: CrossRankComparison | None
    """None unless both runs have a cross-rank analysis."""


def _facts(a: RunAnalysis) -> RunFacts:
    steps = max((r.num_steps for r in a.steps.ranks), default=0) if a.steps else None
    return RunFacts(
        run_id=a.run_id,
        workload=a.workload,
        command=a.command,
        world_size=a.world_size,
        nproc_per_node=a.nproc_per_node,
        num_hosts=len(a.hostnames),
        status=a.status,
        warmup_steps=a.warmup_steps,
        measured_steps=steps,
        windows=a.collectives.windows if a.collectives is not None else (),
    )


def phase_means(a: RunAnalysis) -> dict[str, float]:
    """Mean ms per step of each phase (and ``other``), averaged over the ranks with it."""
    if a.steps is None:
        return {}
    values: dict[str, list[float]] = {}
    for rank in a.steps.ranks:
        for p in rank.phases:
            if p.phase != STEP:
                values.setdefault(p.phase, []).append(p.mean_ms)
    return {phase: float(np.mean(v)) for phase, v in values.items()}


def _phases(a: RunAnalysis, b: RunAnalysis) -> tuple[PhaseComparison, ...]:
    ma, mb = phase_means(a), phase_means(b)
    order = list(ma) + [p for p in mb if p not in ma]
    return tuple(PhaseComparison(p, pair(ma.get(p), mb.get(p))) for p in order)


def _sizes(
    a: RunAnalysis, b: RunAnalysis
) -> tuple[tuple[SizeComparison, ...], tuple[SizeKey, ...], tuple[SizeKey, ...]]:
    sa = {(s.op, s.nbytes): s for s in (a.collectives.sizes if a.collectives else ())}
    sb = {(s.op, s.nbytes): s for s in (b.collectives.sizes if b.collectives else ())}
    both = sorted(sa.keys() & sb.keys())
    rows = tuple(
        SizeComparison(
            op=op,
            nbytes=nbytes,
            calls_per_rank=pair(sa[op, nbytes].calls_per_rank, sb[op, nbytes].calls_per_rank),
            time_avg_us=pair(sa[op, nbytes].time_avg_us, sb[op, nbytes].time_avg_us),
            busbw_gbps=pair(sa[op, nbytes].busbw_gbps, sb[op, nbytes].busbw_gbps),
        )
        for op, nbytes in both
    )
    only_a = tuple(SizeKey(*k) for k in sorted(sa.keys() - sb.keys()))
    only_b = tuple(SizeKey(*k) for k in sorted(sb.keys() - sa.keys()))
    return rows, only_a, only_b


def _waits(a: CrossRankAnalysis, b: CrossRankAnalysis) -> tuple[WaitComparison, ...]:
    wa = {(w.op, w.tag, w.nbytes): w for w in a.waits}
    wb = {(w.op, w.tag, w.nbytes): w for w in b.waits}
    out = []
    for key in sorted(wa.keys() & wb.keys()):
        x, y = wa[key], wb[key]
        out.append(
            WaitComparison(
                *key,
                instances=pair(x.instances, y.instances),
                skew_avg_us=pair(x.skew_avg_us, y.skew_avg_us),
                wait_avg_us=pair(x.wait_avg_us, y.wait_avg_us),
                transfer_avg_us=pair(x.transfer_avg_us, y.transfer_avg_us),
                wait_share_pct=pair(x.wait_share_pct, y.wait_share_pct),
            )
        )
    return tuple(out)


def _rank_mean(c: CrossRankAnalysis, field: str) -> float | None:
    values = [getattr(r, field) for r in c.ranks]
    return float(np.mean(values)) if values else None


def _cross_rank(a: RunAnalysis, b: RunAnalysis) -> CrossRankComparison | None:
    x, y = a.cross_rank, b.cross_rank
    if x is None or y is None:
        return None

    def overlap(c: CrossRankAnalysis, field: str) -> float | None:
        return getattr(c.overlap, field) if c.overlap is not None else None

    def best_fix(r: RunAnalysis) -> float | None:
        best = r.whatif.best if r.whatif is not None else None
        return best.prediction.step_ms if best is not None else None

    return CrossRankComparison(
        wait_ms_per_step=pair(_rank_mean(x, "wait_ms_per_step"), _rank_mean(y, "wait_ms_per_step")),
        busy_ms_per_step=pair(_rank_mean(x, "busy_ms_per_step"), _rank_mean(y, "busy_ms_per_step")),
        load_imbalance_pct=pair(x.load_imbalance_pct, y.load_imbalance_pct),
        hidden_ms_per_step=pair(overlap(x, "hidden_ms_per_step"), overlap(y, "hidden_ms_per_step")),
        exposed_ms_per_step=pair(
            overlap(x, "exposed_ms_per_step"), overlap(y, "exposed_ms_per_step")
        ),
        best_fix_step_ms=pair(best_fix(a), best_fix(b)),
        straggler_a=x.straggler.rank if x.straggler else None,
        straggler_b=y.straggler.rank if y.straggler else None,
        waits=_waits(x, y),
    )


def compare_runs(a: RunAnalysis, b: RunAnalysis) -> RunComparison:
    """Run B against run A: every ratio is B / A (above 1: B is larger)."""
    sizes, only_a, only_b = _sizes(a, b)
    return RunComparison(
        a=_facts(a),
        b=_facts(b),
        samples_per_s=pair(
            a.steps.samples_per_s if a.steps else None, b.steps.samples_per_s if b.steps else None
        ),
        mean_step_ms=pair(
            a.steps.mean_step_ms if a.steps else None, b.steps.mean_step_ms if b.steps else None
        ),
        phases=_phases(a, b),
        sizes=sizes,
        sizes_only_a=only_a,
        sizes_only_b=only_b,
        cross_rank=_cross_rank(a, b),
    )
