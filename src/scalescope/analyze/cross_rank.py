"""Across ranks: one clock, collectives matched by (group, seq), waiting versus transfer,
stragglers, load imbalance, overlap of communication with backward. What fixing a cause
would buy is the what-if's (whatif.py).

Result types are fixed here (``ClockAlignment`` and ``WaitStats`` live in ``clocks.py`` and
``matching.py`` and are re-exported); the renderers (terminal, JSON, HTML, timeline) read
them. Per-step figures use the measured steps (``step >= warmup_steps``, as in steps.py).

Thresholds (module constants, documented in docs/report-schema.md):

- ``TIE_FLOOR_NS``: an instance has a *clearly last* rank only when the last arrival is
  later than the second-to-last by more than max(50 µs, 2 × the largest clock
  uncertainty). Closer arrivals cannot be ordered reliably (clock error, queued buckets
  that all become ready when the one ahead completes).
- *Lateness* of a rank: the sum, over the instances it is clearly last at, of how much
  later it arrived than the second-to-last rank: the time it kept the others waiting.
- The straggler is the rank with the most lateness, named only when it holds at least
  ``straggler_min_share_pct`` = max(150 / num_ranks, 50) % of all ranks' lateness
  (1.5 times its fair share, and a majority), or, among ``DOMINANT_MIN_RANKS`` (8) ranks
  or more, max(150 / num_ranks, twice the next rank's share) (a clear leader: among 20
  time-sliced ranks a planted 20 ms sleeper causes 38 % of the lateness, the scheduling
  noise of 19 others the rest), and its lateness per measured step is at
  least ``STRAGGLER_MIN_STEP_PCT`` (10 %) of the mean step time and ``STRAGGLER_MIN_NS``
  (100 µs). Counting instances instead of weighing them misleads on real runs: after
  the one instance where a slow rank is 50 ms late, the next few are decided by
  sub-millisecond jitter in which rank is notified first.
- Busy time and a straggler's phase use each phase's *own* time: the phase less the
  waiting in blocking collectives issued inside it (forward holds DDP's buffer broadcast,
  so the ranks that wait for a late rank there would otherwise look slow in forward).
  Busy time includes the time outside every phase (``other``): host work between the
  phases (logging, a checkpoint, a garbage-collector pause) keeps the others waiting as
  surely as a slow forward. When the straggler's extra time is there, ``between`` says
  between which phases (analyze/gaps.py).
- On a pipeline, ranks of different stages are never compared as replicas: lateness is
  judged between stages along the sends and recvs, and the straggler is a rank of the
  bound stage or none (analyze/stage_lateness.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from scalescope.analyze.columns.sorting import index_in
from scalescope.analyze.comm_overlap import Overlap, comm_overlap
from scalescope.analyze.layouts.p2p import P2PSides, joined, p2p_sync_waits, pair_p2p
from scalescope.analyze.layouts.pipeline import PipelineAnalysis
from scalescope.analyze.ranks.clocks import ClockAlignment, align_clocks, tie_tolerance_ns
from scalescope.analyze.ranks.matching import (
    DimWaits,
    Matched,
    WaitStats,
    dim_waits,
    match_collectives,
    wait_stats,
)
from scalescope.analyze.ranks.summary_waits import summary_waits
from scalescope.analyze.stage_lateness import StageJudging, judge_stages, judged_lateness
from scalescope.analyze.steps.beyond_step import (
    BEYOND_SHARE_PCT,
    BEYOND_STEP,
    WaitBeyondStep,
    waits_beyond_step,
)
from scalescope.analyze.steps.extra_work import (
    ExtraWork,
    LatenessPattern,
    extra_work,
    lateness_pattern,
)
from scalescope.analyze.steps.gaps import Between, largest_gap
from scalescope.analyze.steps.phase_cpu import PhaseCpu, phase_cpu
from scalescope.analyze.steps.step_slots import (
    OTHER,
    OWN_PHASES,
    StepSlots,
    SyncWaits,
    measured_slots,
    sync_waits,
    with_sync_waits,
)
from scalescope.analyze.summarised import RankSums, rank_sums, summary_sync
from scalescope.events import EventTable, Run

__all__ = [
    "BEYOND_SHARE_PCT",
    "BEYOND_STEP",
    "WaitBeyondStep",
    "DOMINANT_MIN_RANKS",
    "STRAGGLER_MIN_NS",
    "STRAGGLER_MIN_STEP_PCT",
    "TIE_FLOOR_NS",
    "ClockAlignment",
    "CrossRankAnalysis",
    "Overlap",
    "RankWaits",
    "Straggler",
    "WaitStats",
    "analyze_cross_rank",
    "straggler_min_share_pct",
]

TIE_FLOOR_NS = 50_000
STRAGGLER_MIN_STEP_PCT = 10.0
STRAGGLER_MIN_NS = 100_000


DOMINANT_MIN_RANKS = 8


def straggler_min_share_pct(num_ranks: int, next_share_pct: float | None = None) -> float:
    """Share of all ranks' lateness a rank needs to be named the straggler, given the next
    rank's share (module doc)."""
    fair = 150.0 / max(num_ranks, 1)
    if num_ranks >= DOMINANT_MIN_RANKS and next_share_pct is not None:
        return max(fair, min(50.0, 2.0 * next_share_pct))
    return max(fair, 50.0)


@dataclass(frozen=True)
class RankWaits:
    rank: int
    last_count: int
    """Matched instances (measured steps) this rank arrived at clearly last."""
    last_share_pct: float
    """last_count / the measured instances it took part in that had a clearly-last rank."""
    lateness_avg_us: float
    """When last: mean of (its arrival − the second-to-last arrival)."""
    wait_ms_per_step: float
    """Time this rank spent waiting for others in collectives, per measured step."""
    busy_ms_per_step: float
    """Own time per measured step: data + forward + backward + optimizer + the time outside
    every phase (``other``), less its waiting in blocking collectives issued in them; i.e.
    the step less comm_wait and that waiting."""
    instances: int = 0
    """Added: matched instances of measured steps this rank took part in."""
    lateness_ms_per_step: float = 0.0
    """Added: its lateness (summed over the instances it was clearly last at) per step."""
    lateness_share_pct: float = 0.0
    """Added: its share of the lateness of all ranks (0 when no rank was ever late)."""
    stage: int | None = None
    """Added: its pipeline stage; None off a pipeline."""


@dataclass(frozen=True)
class Straggler:
    rank: int
    last_share_pct: float
    """As RankWaits.last_share_pct: a share of instance counts, not of time."""
    lateness_avg_ms: float
    phase: str | None
    """The phase (data, forward, backward, optimizer, or other: outside every phase) in
    which it spends the most own time above the other ranks' mean."""
    phase_excess_ms: float | None
    """Per step, that phase's own time on the straggler minus the others' mean."""
    lateness_share_pct: float = 0.0
    """Added: its share of all ranks' lateness (what names it)."""
    lateness_ms_per_step: float = 0.0
    """Added: how long per measured step it kept the others waiting."""
    between: Between | None = None
    """Added: when ``phase`` is ``other``, the phases its extra time lies between (the one
    before, the one after; analyze/gaps.py); None otherwise or when not located."""
    share_needed_pct: float = 50.0
    """Added: the share of the lateness it needed to be named (``straggler_min_share_pct``)."""
    stage: int | None = None
    """Added: its pipeline stage (the bound stage); None off a pipeline."""
    cpu: PhaseCpu | None = None
    """Added: its wall and CPU time in ``phase`` above the others' (computing or waiting);
    None for ``other`` or a run without CPU rows."""


@dataclass(frozen=True)
class CrossRankAnalysis:
    clocks: tuple[ClockAlignment, ...]
    waits: tuple[WaitStats, ...]
    ranks: tuple[RankWaits, ...]
    matched_instances: int
    unmatched_instances: int
    load_imbalance_pct: float | None
    """(max − mean) / mean of per-rank busy time, × 100."""
    straggler: Straggler | None
    """None when no rank passes the straggler thresholds (module doc)."""
    overlap: Overlap | None
    tie_tolerance_us: float = TIE_FLOOR_NS / 1e3
    """Added: arrivals closer than this have no clearly-last rank."""
    measured_instances: int = 0
    """Added: matched instances whose rows all lie in measured steps (what waits are over)."""
    extra_work: tuple[ExtraWork, ...] = ()
    """Added: evaluation and checkpoints, who did them, when, and what they cost the others."""
    straggler_pattern: LatenessPattern | None = None
    """Added: the straggler's lateness step by step (every step, or at some steps only)."""
    inconsistent: tuple[WaitBeyondStep, ...] = ()
    """Added: ranks that wait longer than their steps last (the timelines do not fit)."""
    dims: tuple[DimWaits, ...] = ()
    """Added: waiting versus transfer per mesh dimension or role (groups.dims_of)."""


def _measured_instances(m: Matched, slots: StepSlots) -> np.ndarray:
    """Per instance: True when every one of its rows lies in a measured step of its rank."""
    if m.num_instances == 0:
        return np.zeros(0, dtype=bool)
    inside = (slots.slot_of(m.rank, m.step) >= 0).astype(np.int8)
    return np.minimum.reduceat(inside, m.first) > 0


def _per_rank(ranks: np.ndarray, of: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Count (or sum ``weights``) per rank of ``ranks`` for entries owned by ranks ``of``."""
    return np.bincount(index_in(ranks, of), weights=weights, minlength=len(ranks))


def _rank_waits(
    slots: StepSlots,
    m: Matched | None,
    inst_ok: np.ndarray,
    coll_ok: np.ndarray | None = None,
    p2p: SyncWaits | None = None,
    staged: StageJudging | None = None,
    sums: RankSums | None = None,
) -> tuple[RankWaits, ...]:
    """Figures of every rank of ``slots.ranks``, all ranks at once. Waits are those of the
    instances of ``coll_ok`` (default ``inst_ok``) and the sends' and recvs' of ``p2p``;
    lateness on a pipeline as ``staged`` judges it; ``sums``: the summarised steps'."""
    ranks = slots.ranks
    steps = slots.steps_per_rank().astype(np.float64)
    busy = slots.own_ms_per_step(OWN_PHASES)
    stages = staged.layout.of(ranks) if staged else np.full(len(ranks), -1)
    stage = [int(s) if s >= 0 else None for s in stages]
    if m is None and sums is None:
        return tuple(
            RankWaits(int(r), 0, 0.0, 0.0, 0.0, float(b), stage=s)
            for r, b, s in zip(ranks, busy, stage, strict=True)
        )
    took_part, wait_ns, clear, last_count, late_ns = _matched_sums(
        ranks, m, inst_ok, coll_ok, staged
    )
    if p2p is not None:
        wait_ns = wait_ns + _per_rank(ranks, p2p.rank, p2p.wait_ns)
    if sums is not None:  # the summarised steps' estimates (summarised.py)
        wait_ns = wait_ns + sums.wait_ns
        if staged is None:
            clear, last_count = clear + sums.clear, last_count + sums.late_count
            late_ns = late_ns + sums.late_ns
    late_total = float(late_ns.sum())
    per_step = np.where(steps > 0, 1e6 * steps, np.inf)  # ns per rank-step -> ms per step
    return tuple(
        RankWaits(
            rank=int(ranks[i]),
            last_count=int(last_count[i]),
            last_share_pct=float(100.0 * last_count[i] / clear[i]) if clear[i] else 0.0,
            lateness_avg_us=float(late_ns[i] / last_count[i] / 1e3) if last_count[i] else 0.0,
            wait_ms_per_step=float(wait_ns[i] / per_step[i]),
            busy_ms_per_step=float(busy[i]),
            instances=int(took_part[i]),
            lateness_ms_per_step=float(late_ns[i] / per_step[i]),
            lateness_share_pct=float(100.0 * late_ns[i] / late_total) if late_total > 0 else 0.0,
            stage=stage[i],
        )
        for i in range(len(ranks))
    )


def _matched_sums(
    ranks: np.ndarray,
    m: Matched | None,
    inst_ok: np.ndarray,
    coll_ok: np.ndarray | None,
    staged: StageJudging | None,
) -> tuple[np.ndarray, ...]:
    """Per rank: matched instances, wait (ns), clearly-last instances, times last, lateness."""
    if m is None:
        zero = np.zeros(len(ranks))
        return zero, zero, zero, zero, zero
    rows = inst_ok[m.inst]  # rows of measured instances
    took_part = _per_rank(ranks, m.rank[rows])
    waited = (coll_ok if coll_ok is not None else inst_ok)[m.inst]
    wait_ns = _per_rank(ranks, m.rank[waited], m.wait_ns[waited].astype(np.float64))
    return took_part, wait_ns, *judged_lateness(ranks, m, inst_ok, staged)


def _straggler(
    waits: tuple[RankWaits, ...],
    slots: StepSlots,
    events: EventTable,
    sync: SyncWaits | None,
    bound_stage: int | None = None,
) -> Straggler | None:
    """The rank with the most lateness, if it passes the thresholds of the module doc and,
    on a pipeline, holds the ``bound_stage``."""
    if not waits or len(slots.keys) == 0:
        return None
    top = max(waits, key=lambda w: (w.lateness_share_pct, -w.rank))
    if bound_stage is not None and top.stage != bound_stage:
        return None
    need = straggler_min_share_pct(len(waits), _next_share(waits, top))
    mean_step_ms = float(slots.dur_ns.mean()) / 1e6
    floor_ms = max(STRAGGLER_MIN_STEP_PCT / 100.0 * mean_step_ms, STRAGGLER_MIN_NS / 1e6)
    if top.lateness_share_pct < need or top.lateness_ms_per_step < floor_ms:
        return None
    phase, excess = slots.largest_excess(top.rank)
    between = largest_gap(events, slots, top.rank, sync) if phase == OTHER else None
    cpu = phase_cpu(events, slots, top.rank, phase) if phase not in (None, OTHER) else None
    return Straggler(
        rank=top.rank,
        last_share_pct=top.last_share_pct,
        lateness_avg_ms=top.lateness_avg_us / 1e3,
        phase=phase,
        phase_excess_ms=excess,
        lateness_share_pct=top.lateness_share_pct,
        lateness_ms_per_step=top.lateness_ms_per_step,
        between=between,
        share_needed_pct=need,
        stage=top.stage,
        cpu=cpu,
    )


def _next_share(waits: tuple[RankWaits, ...], top: RankWaits) -> float:
    """The largest lateness share of the ranks other than ``top``."""
    return max((w.lateness_share_pct for w in waits if w is not top), default=0.0)


def _load_imbalance(waits: tuple[RankWaits, ...], slots: StepSlots) -> float | None:
    busy = np.array([w.busy_ms_per_step for w in waits])[slots.steps_per_rank() > 0]
    if len(busy) < 2 or busy.mean() <= 0:
        return None
    return float(100.0 * (busy.max() - busy.mean()) / busy.mean())


def analyze_cross_rank(
    run: Run,
    warmup_steps: int,
    slots: StepSlots | None = None,
    sides: P2PSides | None = None,
    dims: Mapping[str, str] | None = None,
    clocks: tuple[ClockAlignment, ...] | None = None,
    pipeline: PipelineAnalysis | None = None,
) -> CrossRankAnalysis | None:
    """Cross-rank analysis of a run; None when fewer than two ranks recorded events.
    ``slots``: the run's measured slots when the caller has them (``measured_slots``);
    ``sides``: its sends and recvs paired (``pair_p2p``), likewise. Their waiting for the
    peer replaces their ``(group, seq)`` instances' waits. ``dims``: group label -> mesh
    dimension or role, for the waits' rows (``groups.dims_of``); ``clocks``: the run's
    alignment when the caller has it (``align_clocks``); ``pipeline``: its stages, when the
    caller has them (else found as the pipeline analysis finds them)."""
    if len(run.events.ranks()) < 2:
        return None
    clocks = clocks if clocks is not None else align_clocks(run)
    tie_ns = tie_tolerance_ns(clocks, TIE_FLOOR_NS)
    slots = slots if slots is not None else measured_slots(run.events, warmup_steps)
    m = match_collectives(run.events, clocks, tie_ns)
    est = summary_waits(run.events, clocks, tie_ns)
    inst_ok = _measured_instances(m, slots) if m is not None else np.zeros(0, dtype=bool)
    sides = sides if sides is not None else pair_p2p(run.events, clocks)
    coll_ok = inst_ok & ~_p2p_instances(run.events, m, sides)
    sync = sync_waits(run.events, slots, m, coll_ok) if m is not None else None
    p2p_sync = p2p_sync_waits(run.events, slots, sides) if sides is not None else None
    sync = joined(joined(sync, p2p_sync), summary_sync(run.events, slots, est))
    staged = judge_stages(run, warmup_steps, slots, sides, m, sync, tie_ns, pipeline)
    slots = with_sync_waits(run.events, slots, sync)
    waits = _rank_waits(slots, m, inst_ok, coll_ok, p2p_sync, staged, rank_sums(slots, est))
    bound = staged.layout.bound_stage if staged is not None else None
    straggler = _straggler(waits, slots, run.events, sync, bound)
    return CrossRankAnalysis(
        clocks=clocks,
        waits=wait_stats(m, inst_ok, run.events.symbols, dims) if m is not None else (),
        ranks=waits,
        matched_instances=m.num_instances if m is not None else 0,
        unmatched_instances=m.unmatched if m is not None else 0,
        load_imbalance_pct=_load_imbalance(waits, slots),
        straggler=straggler,
        overlap=comm_overlap(run, slots),
        tie_tolerance_us=tie_ns / 1e3,
        measured_instances=int(inst_ok.sum()),
        extra_work=extra_work(run.events, slots),
        straggler_pattern=None if straggler is None else lateness_pattern(slots, straggler.rank),
        inconsistent=waits_beyond_step(waits, slots, m, inst_ok),
        dims=dim_waits(m, inst_ok, run.events.symbols, dims) if m is not None else (),
    )


def _p2p_instances(events: EventTable, m: Matched | None, sides: P2PSides | None) -> np.ndarray:
    """Per instance of ``m``: a send or recv whose waits the pairs measure instead (a
    ``(group, seq)`` instance is a pair only on a 2-rank group issuing nothing else)."""
    if m is None:
        return np.zeros(0, dtype=bool)
    if sides is None or sides.pairs == 0:
        return np.zeros(m.num_instances, dtype=bool)
    p2p = [s for s in (events.symbols.id_of(n) for n in ("send", "recv")) if s >= 0]
    return np.isin(m.op, p2p)
