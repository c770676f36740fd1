"""Step breakdown per rank: phase times, throughput and memory peaks over measured steps."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from scalescope.analyze.columns.slot_index import measured_steps
from scalescope.analyze.steps.phase_cpu import slot_cpu
from scalescope.analyze.steps.step_slots import StepSlots, measured_slots
from scalescope.events import PHASES, EventTable, Kind
from scalescope.events.schema import OPTIONAL_PHASES

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
    on_cpu_pct: float | None = None
    """Added: the training thread's CPU time in the phase, % of the phase's time on the host
    clock (its CPU rows: analyze/steps/phase_cpu.py; the process's where the thread's is
    unreadable); None where the probe recorded none (older runs, ingested traces, ``other``)."""


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
    sample_copies: int = 1
    """Ranks that load the same samples (a tensor- or context-parallel group's, named by its
    DeviceMesh): ``total_samples`` and ``samples_per_s`` count each sample once; the
    per-rank figures are each rank's own."""


SAME_SAMPLES_DIMS = ("tp", "cp")
"""Mesh dimensions whose ranks all load the same batch (tensor parallel: the same inputs;
context parallel: shards of the same sequences). A pipeline's later stages load none, and
data-parallel ranks load their own."""


def counted_once(steps: StepAnalysis, dims: dict[str, int]) -> StepAnalysis:
    """``steps`` with each sample counted once across the ranks of ``SAME_SAMPLES_DIMS``
    (``dims``: mesh dimension -> ranks per group, from the groups' DeviceMesh names)."""
    copies = 1
    for dim in SAME_SAMPLES_DIMS:
        copies *= max(dims.get(dim, 1), 1)
    if copies == 1:
        return steps
    rate = steps.samples_per_s / copies if steps.samples_per_s is not None else None
    return replace(
        steps, total_samples=steps.total_samples // copies, samples_per_s=rate,
        sample_copies=copies,
    )  # fmt: skip


def first_stage_only(steps: StepAnalysis, first_stage: set[int]) -> StepAnalysis:
    """``steps`` with the samples of a pipeline's first stage only (``first_stage``: its
    ranks): a later stage processes the same samples again (a hand-written loop's later
    stages count their inputs' leading dimension; torch.distributed.pipelining's count none),
    each counted once across the copies ``counted_once`` found (a tp group's ranks)."""
    total = sum(r.samples for r in steps.ranks if r.rank in first_stage) // steps.sample_copies
    if total == steps.total_samples:
        return steps
    rate = total / steps.span_s if steps.span_s and total > 0 else None
    return replace(steps, total_samples=total, samples_per_s=rate)


@dataclass(frozen=True)
class _Runs:
    """Each rank's run of slots (slots are sorted by rank, then step): statistics of all
    ranks in a few array operations instead of a loop over ranks."""

    ranks: np.ndarray
    """The ranks with measured steps, ascending."""
    first: np.ndarray
    """Index of each rank's first slot."""
    count: np.ndarray
    """Slots of each rank."""

    @classmethod
    def of(cls, slots: StepSlots) -> _Runs:
        return cls(*np.unique(slots.rank, return_index=True, return_counts=True))

    def per_rank_sum(self, per_slot: np.ndarray) -> np.ndarray:
        return np.add.reduceat(per_slot, self.first) if len(per_slot) else per_slot

    def percentiles(self, per_slot: np.ndarray, qs: tuple[float, ...]) -> list[np.ndarray]:
        """Each rank's percentiles ``qs`` of ``per_slot`` (numpy's linear method, computed
        as ``np.percentile`` computes it)."""
        values = per_slot[self._order_within_ranks(per_slot)]
        out = []
        for q in qs:
            at = (q / 100) * (self.count - 1)
            below = np.floor(at)
            t = at - below
            lo = self.first + below.astype(np.int64)
            hi = self.first + np.minimum(below.astype(np.int64) + 1, self.count - 1)
            a, b = values[lo], values[hi]
            diff = b - a
            out.append(np.where(t >= 0.5, b - diff * (1 - t), a + diff * t))
        return out

    def _order_within_ranks(self, per_slot: np.ndarray) -> np.ndarray:
        """The slots in (rank, value) order: one float sort of the values lifted by their
        rank's index times the values' range (a rank's slots are contiguous), several times
        faster than ``lexsort``. Values closer than the lift's rounding (about 1e-16 of the
        range times the ranks) may swap, which moves a percentile by less than that."""
        if len(per_slot) == 0:
            return np.zeros(0, dtype=np.int64)
        low, span = float(per_slot.min()), float(np.ptp(per_slot))
        owner = np.repeat(np.arange(len(self.ranks), dtype=np.float64), self.count)
        return np.argsort((per_slot - low) + owner * (2 * span + 1))


def _phase_stats(
    runs: _Runs, phase: str, per_slot_ns: np.ndarray, step_total: np.ndarray
) -> list[PhaseStats]:
    """One phase's statistics for each rank of ``runs``."""
    ms = per_slot_ns / 1e6
    total_ns = runs.per_rank_sum(per_slot_ns)
    mean = runs.per_rank_sum(ms) / runs.count
    p50, p95 = runs.percentiles(ms, (50, 95))
    return [
        PhaseStats(
            phase=phase,
            mean_ms=float(mean[i]),
            p50_ms=float(p50[i]),
            p95_ms=float(p95[i]),
            total_ms=float(total_ns[i]) / 1e6,
            share_pct=100.0 * float(total_ns[i] / step_total[i]) if step_total[i] > 0 else None,
        )  # fmt: skip
        for i in range(len(runs.ranks))
    ]


def _phase_breakdown(
    slots: StepSlots, runs: _Runs
) -> tuple[list[list[PhaseStats]], list[list[str]]]:
    """Per rank of ``runs``: its phases' statistics, and the phases it has no row of."""
    step_total = runs.per_rank_sum(slots.dur_ns)
    n = len(runs.ranks)
    stats: list[list[PhaseStats]] = [[] for _ in range(n)]
    missing: list[list[str]] = [[] for _ in range(n)]
    for name in PHASES:
        present = runs.per_rank_sum(slots.phase_rows[name]) > 0
        for i, st in enumerate(_phase_stats(runs, name, slots.phase_ns[name], step_total)):
            if present[i]:
                stats[i].append(st)
            elif name not in OPTIONAL_PHASES:
                missing[i].append(name)
    other = np.maximum(slots.dur_ns - sum(slots.phase_ns[p] for p in PHASES), 0.0)
    for extra, per_slot in ((OTHER, other), (STEP, slots.dur_ns)):
        for i, st in enumerate(_phase_stats(runs, extra, per_slot, step_total)):
            stats[i].append(st)
    return stats, missing


def _memory(rows: EventTable) -> dict[int, tuple[MemoryPeak, ...]]:
    """Each rank's peaks, one per memory name (sorted by name)."""
    if len(rows) == 0:
        return {}
    order = np.lexsort((rows.nbytes, rows.name, rows.rank))
    rank, name = rows.rank[order], rows.name[order]
    last = np.flatnonzero(np.r_[(rank[1:] != rank[:-1]) | (name[1:] != name[:-1]), True])
    out: dict[int, list[MemoryPeak]] = {}
    for i in last.tolist():
        peak = MemoryPeak(name=rows.symbols[int(name[i])], peak_bytes=int(rows.nbytes[order[i]]))
        out.setdefault(int(rank[i]), []).append(peak)
    return {r: tuple(sorted(p, key=lambda m: m.name)) for r, p in out.items()}


def _rank_steps(slots: StepSlots) -> dict[int, RankSteps]:
    """Statistics of every rank with measured steps."""
    runs = _Runs.of(slots)
    stats, missing = _phase_breakdown(slots, runs)
    end = np.maximum.reduceat(slots.start_ns + slots.dur_ns.astype(np.int64), runs.first)
    start = np.minimum.reduceat(slots.start_ns, runs.first)
    samples = runs.per_rank_sum(slots.samples)
    steps = slots.step
    mean = runs.per_rank_sum(slots.dur_ns) / runs.count
    out = {}
    for i, rank in enumerate(runs.ranks.tolist()):
        span_ns = int(end[i] - start[i])
        span_s = span_ns / 1e9 if span_ns > 0 else None
        n = int(samples[i])
        rate = n / span_s if span_s and n > 0 else None
        out[rank] = RankSteps(
            rank=rank, num_steps=int(runs.count[i]), first_step=int(steps[runs.first[i]]),
            last_step=int(steps[runs.first[i] + runs.count[i] - 1]), samples=n, span_s=span_s,
            samples_per_s=rate, mean_step_ms=float(mean[i]) / 1e6,
            phases=tuple(stats[i]), missing_phases=tuple(missing[i]), memory=(),
        )  # fmt: skip
    return out


def _with_cpu(found: dict[int, RankSteps], events: EventTable, slots: StepSlots) -> dict:
    """Each rank's phases with their share on a CPU, where its CPU rows cover them."""
    shares: dict[tuple[int, str], float] = {}
    for name in PHASES:
        sums = slot_cpu(events, slots, name)
        if sums is None:
            continue
        on_cpu = slots.per_rank_sum(
            sums.thread_ns if sums.thread_ns is not None else sums.process_ns
        )
        wall = slots.per_rank_sum(sums.wall_ns)
        for i, rank in enumerate(slots.ranks.tolist()):
            if sums.covered[i] and wall[i] > 0:
                shares[rank, name] = 100.0 * float(on_cpu[i] / wall[i])
    if not shares:
        return found
    return {
        rank: replace(
            r, phases=tuple(replace(p, on_cpu_pct=shares.get((rank, p.phase))) for p in r.phases)
        )
        for rank, r in found.items()
    }


def analyze_steps(
    events: EventTable, warmup_steps: int, slots: StepSlots | None = None
) -> StepAnalysis | None:
    """Per-rank step breakdown; None when no STEP row was ever recorded. ``slots``: the
    measured slots of ``events`` when the caller has them (the cross-rank analysis uses
    the same)."""
    measured = measured_steps(events, warmup_steps)
    if len(measured.rows) == 0:
        return None
    slots = slots if slots is not None else measured_slots(events, warmup_steps)
    found = _with_cpu(_rank_steps(slots), events, slots)
    memory = _memory(events.of_kind(Kind.MEMORY))
    ranks = tuple(
        replace(found[r], memory=memory.get(r, ()))
        if r in found
        else RankSteps(r, 0, None, None, 0, None, None, None, (), PHASES, memory.get(r, ()))
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
