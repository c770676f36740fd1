"""Step breakdown per rank: phase times, throughput and memory peaks over measured steps."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalescope.events import PHASES, EventTable, Kind

OTHER = "other"
"""Time of a step not covered by any recorded phase (Python, logging, ...)."""
STEP = "step"
"""The whole step, as the STEP row recorded it."""


@dataclass(frozen=True)
class PhaseStats:
    """One phase of one rank over its measured steps (per-step sums of the phase's rows)."""

    phase: str
    mean_ms: float
    p50_ms: float
    p95_ms: float
    total_ms: float
    share_pct: float | None
    """total_ms / total step time x 100; None when the steps took no time at all."""


@dataclass(frozen=True)
class MemoryPeak:
    name: str
    """rss_peak (CPU) or cuda_max_allocated."""
    peak_bytes: int


@dataclass(frozen=True)
class RankSteps:
    """Step statistics of one rank; None where the rank has no measured step."""

    rank: int
    num_steps: int
    first_step: int | None
    last_step: int | None
    samples: int
    span_s: float | None
    """From the start of the first measured step to the end of the last."""
    samples_per_s: float | None
    """None when no step recorded any sample (samples were not counted)."""
    mean_step_ms: float | None
    phases: tuple[PhaseStats, ...]
    """Recorded phases in PHASES order, then ``other`` and ``step``."""
    missing_phases: tuple[str, ...]
    """Phases of PHASES with no row in any measured step of this rank."""
    memory: tuple[MemoryPeak, ...]


@dataclass(frozen=True)
class StepAnalysis:
    warmup_steps: int
    warmup_fallback: bool
    """True when no step was >= warmup_steps, so every step was used (warm-up included)."""
    ranks: tuple[RankSteps, ...]
    total_samples: int
    """Samples of all ranks over measured steps."""
    span_s: float | None
    """The longest per-rank span: ranks run concurrently on their own clocks."""
    samples_per_s: float | None
    """total_samples / span_s."""
    mean_step_ms: float | None
    """Mean duration of every measured step of every rank."""
    steps_per_s: float | None = None
    """Global steps per second: the slowest rank's measured steps over its span (every
    rank steps once per step of the job). The unit of speed when samples were not counted."""


@dataclass(frozen=True)
class MeasuredSteps:
    """The STEP rows that statistics are taken over."""

    rows: EventTable
    warmup_fallback: bool


def by_rank(rows: EventTable) -> dict[int, EventTable]:
    """Each rank's rows, in their order (one stable sort, then slices: no mask per rank)."""
    if len(rows) == 0:
        return {}
    order = np.argsort(rows.rank, kind="stable")
    ordered = rows.select(order)
    ranks, first = np.unique(ordered.rank, return_index=True)
    ends = [*first[1:].tolist(), len(ordered)]
    return {int(r): ordered.select(slice(a, b)) for r, a, b in zip(ranks, first, ends, strict=True)}


def measured_steps(events: EventTable, warmup_steps: int) -> MeasuredSteps:
    """STEP rows with step >= warmup_steps, or all STEP rows when that leaves none."""
    steps = events.of_kind(Kind.STEP)
    mask = steps.step >= warmup_steps
    if mask.any() or len(steps) == 0:
        return MeasuredSteps(steps.select(mask), warmup_fallback=False)
    return MeasuredSteps(steps, warmup_fallback=True)


def per_step_sums(step_ids: np.ndarray, rows: EventTable) -> tuple[np.ndarray, np.ndarray]:
    """Sum ``rows.dur_ns`` into the slots of ``step_ids`` (sorted, unique).

    Returns the sums (float ns, one per step) and a mask of the rows that fell in a step;
    rows of steps not in ``step_ids`` (warm-up, or a step that never finished) are dropped.
    """
    if len(step_ids) == 0 or len(rows) == 0:
        return np.zeros(len(step_ids)), np.zeros(len(rows), dtype=bool)
    idx = np.searchsorted(step_ids, rows.step)
    clipped = np.minimum(idx, len(step_ids) - 1)
    inside = step_ids[clipped] == rows.step
    sums = np.bincount(
        clipped[inside], weights=rows.dur_ns[inside].astype(np.float64), minlength=len(step_ids)
    )
    return sums, inside


def _stats(phase: str, per_step_ns: np.ndarray, step_total_ns: float) -> PhaseStats:
    ms = per_step_ns / 1e6
    total_ns = float(per_step_ns.sum())
    share = 100.0 * total_ns / step_total_ns if step_total_ns > 0 else None
    p50, p95 = np.percentile(ms, (50, 95))
    return PhaseStats(
        phase=phase,
        mean_ms=float(ms.mean()),
        p50_ms=float(p50),
        p95_ms=float(p95),
        total_ms=total_ns / 1e6,
        share_pct=share,
    )


def _phase_breakdown(
    step_ids: np.ndarray, step_dur_ns: np.ndarray, phases: EventTable
) -> tuple[tuple[PhaseStats, ...], tuple[str, ...]]:
    step_total = float(step_dur_ns.sum())
    covered = np.zeros(len(step_ids))
    stats: list[PhaseStats] = []
    missing: list[str] = []
    for name in PHASES:
        sums, inside = per_step_sums(step_ids, phases.select(phases.where("name", name)))
        if not inside.any():
            missing.append(name)
            continue
        covered += sums
        stats.append(_stats(name, sums, step_total))
    other = np.maximum(step_dur_ns.astype(np.float64) - covered, 0.0)
    stats.append(_stats(OTHER, other, step_total))
    stats.append(_stats(STEP, step_dur_ns.astype(np.float64), step_total))
    return tuple(stats), tuple(missing)


def _memory(rows: EventTable) -> tuple[MemoryPeak, ...]:
    peaks = []
    for sid in np.unique(rows.name):
        peak = int(rows.nbytes[rows.name == sid].max())
        peaks.append(MemoryPeak(name=rows.symbols[int(sid)], peak_bytes=peak))
    return tuple(sorted(peaks, key=lambda p: p.name))


def rank_steps(rank: int, steps: EventTable, phases: EventTable, memory: EventTable) -> RankSteps:
    """Statistics of one rank from its measured STEP rows, PHASE rows and MEMORY rows."""
    mem = _memory(memory)
    if len(steps) == 0:
        return RankSteps(rank, 0, None, None, 0, None, None, None, (), PHASES, mem)
    order = np.argsort(steps.step, kind="stable")
    step_ids, first = np.unique(steps.step[order], return_index=True)
    dur_ns = steps.dur_ns[order][first]
    starts = steps.start_ns[order][first]
    samples = int(steps.count[order][first].sum())
    span_ns = int((starts + dur_ns).max() - starts.min())
    span_s = span_ns / 1e9 if span_ns > 0 else None
    rate = samples / span_s if span_s and samples > 0 else None
    breakdown, missing = _phase_breakdown(step_ids, dur_ns, phases)
    return RankSteps(
        rank=rank,
        num_steps=len(step_ids),
        first_step=int(step_ids[0]),
        last_step=int(step_ids[-1]),
        samples=samples,
        span_s=span_s,
        samples_per_s=rate,
        mean_step_ms=float(dur_ns.mean()) / 1e6,
        phases=breakdown,
        missing_phases=missing,
        memory=mem,
    )


def analyze_steps(events: EventTable, warmup_steps: int) -> StepAnalysis | None:
    """Per-rank step breakdown; None when no STEP row was ever recorded."""
    measured = measured_steps(events, warmup_steps)
    if len(measured.rows) == 0:
        return None
    steps = by_rank(measured.rows)
    phases = by_rank(events.of_kind(Kind.PHASE))
    memory = by_rank(events.of_kind(Kind.MEMORY))
    empty = EventTable.empty(events.symbols)
    ranks = tuple(
        rank_steps(r, steps.get(r, empty), phases.get(r, empty), memory.get(r, empty))
        for r in events.ranks()
    )
    spans = [r.span_s for r in ranks if r.span_s is not None]
    total_samples = sum(r.samples for r in ranks)
    span_s = max(spans) if spans else None
    rate = total_samples / span_s if span_s and total_samples > 0 else None
    step_rates = [r.num_steps / r.span_s for r in ranks if r.span_s]
    return StepAnalysis(
        warmup_steps=warmup_steps,
        warmup_fallback=measured.warmup_fallback,
        ranks=ranks,
        total_samples=total_samples,
        span_s=span_s,
        samples_per_s=rate,
        mean_step_ms=float(measured.rows.dur_ns.mean()) / 1e6,
        steps_per_s=min(step_rates) if step_rates else None,
    )
