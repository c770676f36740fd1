"""Across ranks: one clock, collectives matched by (group, seq), waiting versus transfer,
stragglers, load imbalance, overlap of communication with backward, and the throughput the
same ranks would reach with no exposed communication and no waiting.

Result types are fixed here (``ClockAlignment`` and ``WaitStats`` live in ``clocks.py`` and
``matching.py`` and are re-exported); the renderers (terminal, JSON, HTML, timeline) read
them. Per-step figures use the measured steps (``step >= warmup_steps``, as in steps.py).

Thresholds (module constants, documented in docs/report-schema.md):

- ``TIE_FLOOR_NS``: an instance has a *clearly last* rank only when the last arrival is
  later than the second-to-last by more than max(50 µs, 2 × the largest clock
  uncertainty). Closer arrivals cannot be ordered reliably (clock error, queued buckets
  that all become ready when the one ahead completes).
- A rank is reported as the straggler when it is the clearly-last rank of the most
  instances, its share of the clearly-last instances is at least ``straggler_min_share_pct``
  = max(150 / num_ranks, 50) % (1.5 times its fair share, and a majority), and it was
  clearly last in at least ``MIN_LAST_FRACTION`` (10 %) of the measured instances it took
  part in (so a handful of jittery instances in a balanced run name no one).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalescope.analyze.clocks import ClockAlignment, align_clocks, tie_tolerance_ns
from scalescope.analyze.matching import Matched, WaitStats, match_collectives, wait_stats
from scalescope.analyze.step_slots import (
    BUSY_PHASES,
    StepSlots,
    measured_slots,
    overlap_per_slot,
    sync_wait_per_slot,
)
from scalescope.events import Run

__all__ = [
    "ClockAlignment",
    "CrossRankAnalysis",
    "IdealThroughput",
    "Overlap",
    "RankWaits",
    "Straggler",
    "WaitStats",
    "analyze_cross_rank",
    "straggler_min_share_pct",
]

TIE_FLOOR_NS = 50_000
MIN_LAST_FRACTION = 0.10


def straggler_min_share_pct(num_ranks: int) -> float:
    """Share of the clearly-last instances a rank needs to be named the straggler."""
    return max(150.0 / max(num_ranks, 1), 50.0)


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
    """data + forward + backward + optimizer per measured step (what the rank does itself)."""
    instances: int = 0
    """Added: matched instances of measured steps this rank took part in."""


@dataclass(frozen=True)
class Straggler:
    rank: int
    last_share_pct: float
    lateness_avg_ms: float
    phase: str | None
    """The phase in which it spends the most time above the other ranks' mean."""
    phase_excess_ms: float | None
    """Per step, that phase's time on the straggler minus the others' mean."""


@dataclass(frozen=True)
class Overlap:
    """Gradient communication of backward: hidden under it versus exposed after it."""

    comm_ms_per_step: float
    """Union of the gradient collectives' intervals per step, per rank, averaged."""
    hidden_ms_per_step: float
    exposed_ms_per_step: float
    """The comm_wait phase."""
    hidden_pct: float


@dataclass(frozen=True)
class IdealThroughput:
    achieved_samples_per_s: float
    ideal_samples_per_s: float
    """With zero exposed communication and zero waiting in collectives."""
    gain_pct: float


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
    """None when no rank is last clearly more often than the others."""
    overlap: Overlap | None
    ideal: IdealThroughput | None
    tie_tolerance_us: float = TIE_FLOOR_NS / 1e3
    """Added: arrivals closer than this have no clearly-last rank."""
    measured_instances: int = 0
    """Added: matched instances whose rows all lie in measured steps (what waits are over)."""


def _measured_instances(m: Matched, slots: StepSlots) -> np.ndarray:
    """Per instance: True when every one of its rows lies in a measured step of its rank."""
    if m.num_instances == 0:
        return np.zeros(0, dtype=bool)
    inside = (slots.slot_of(m.rank, m.step) >= 0).astype(np.int8)
    return np.minimum.reduceat(inside, m.first) > 0


def _rank_waits(rank: int, slots: StepSlots, m: Matched | None, inst_ok: np.ndarray) -> RankWaits:
    num_steps = int((slots.rank == rank).sum())
    busy_ms = slots.per_rank_mean_ms(rank, BUSY_PHASES)
    if m is None:
        return RankWaits(rank, 0, 0.0, 0.0, 0.0, busy_ms, 0)
    mine = (m.rank == rank) & inst_ok[m.inst]
    took_part = np.zeros(m.num_instances, dtype=bool)
    took_part[m.inst[mine]] = True
    clear = int((took_part & (m.last_rank >= 0)).sum())
    last = inst_ok & (m.last_rank == rank)
    last_count = int(last.sum())
    wait_ns = float(m.wait_ns[mine].sum())
    return RankWaits(
        rank=rank,
        last_count=last_count,
        last_share_pct=100.0 * last_count / clear if clear else 0.0,
        lateness_avg_us=float(m.lateness_ns[last].mean()) / 1e3 if last_count else 0.0,
        wait_ms_per_step=wait_ns / num_steps / 1e6 if num_steps else 0.0,
        busy_ms_per_step=busy_ms,
        instances=int(took_part.sum()),
    )


def _straggler(waits: tuple[RankWaits, ...], slots: StepSlots) -> Straggler | None:
    """The rank clearly last most often, if it passes the thresholds of the module doc."""
    if not waits:
        return None
    top = max(waits, key=lambda w: (w.last_count, -w.rank))
    if (
        top.last_count == 0
        or top.last_share_pct < straggler_min_share_pct(len(waits))
        or top.last_count < MIN_LAST_FRACTION * top.instances
    ):
        return None
    phase, excess = slots.largest_excess(top.rank)
    return Straggler(
        rank=top.rank,
        last_share_pct=top.last_share_pct,
        lateness_avg_ms=top.lateness_avg_us / 1e3,
        phase=phase,
        phase_excess_ms=excess,
    )


def _load_imbalance(waits: tuple[RankWaits, ...], slots: StepSlots) -> float | None:
    busy = np.array([w.busy_ms_per_step for w in waits if (slots.rank == w.rank).any()])
    if len(busy) < 2 or busy.mean() <= 0:
        return None
    return float(100.0 * (busy.max() - busy.mean()) / busy.mean())


def _overlap(run: Run, slots: StepSlots) -> Overlap | None:
    per_slot = overlap_per_slot(run.events, slots)
    if per_slot is None:
        return None
    comm, hidden = per_slot
    exposed = slots.phase_ns["comm_wait"]
    ranks = np.unique(slots.rank)
    comm_ms = float(np.mean([comm[slots.rank == r].mean() for r in ranks])) / 1e6
    hidden_ms = float(np.mean([hidden[slots.rank == r].mean() for r in ranks])) / 1e6
    exposed_ms = float(np.mean([exposed[slots.rank == r].mean() for r in ranks])) / 1e6
    return Overlap(
        comm_ms_per_step=comm_ms,
        hidden_ms_per_step=hidden_ms,
        exposed_ms_per_step=exposed_ms,
        hidden_pct=100.0 * hidden_ms / comm_ms if comm_ms > 0 else 0.0,
    )


def _ideal(
    run: Run, slots: StepSlots, m: Matched | None, inst_ok: np.ndarray
) -> IdealThroughput | None:
    """Samples / the slowest rank's summed step time, as recorded and without waiting.

    A rank's ideal step drops its exposed communication (comm_wait) and its waits in
    collectives issued outside backward and comm_wait (sync ones, such as DDP's buffer
    broadcast in forward); waits of gradient buckets are either hidden or in comm_wait.
    """
    samples = int(slots.samples.sum())
    if samples == 0 or len(slots.keys) == 0:
        return None
    sync_wait = sync_wait_per_slot(run.events, slots, m, inst_ok)
    ideal = np.maximum(slots.dur_ns - slots.phase_ns["comm_wait"] - sync_wait, 0.0)
    ranks = np.unique(slots.rank)
    achieved_ns = max(float(slots.dur_ns[slots.rank == r].sum()) for r in ranks)
    ideal_ns = max(float(ideal[slots.rank == r].sum()) for r in ranks)
    if achieved_ns <= 0 or ideal_ns <= 0:
        return None
    achieved, best = samples / achieved_ns * 1e9, samples / ideal_ns * 1e9
    return IdealThroughput(achieved, best, 100.0 * (best / achieved - 1.0))


def analyze_cross_rank(run: Run, warmup_steps: int) -> CrossRankAnalysis | None:
    """Cross-rank analysis of a run; None when fewer than two ranks recorded events."""
    ranks = run.events.ranks()
    if len(ranks) < 2:
        return None
    clocks = align_clocks(run)
    tie_ns = tie_tolerance_ns(clocks, TIE_FLOOR_NS)
    slots = measured_slots(run.events, warmup_steps)
    m = match_collectives(run.events, clocks, tie_ns)
    inst_ok = _measured_instances(m, slots) if m is not None else np.zeros(0, dtype=bool)
    waits = tuple(_rank_waits(r, slots, m, inst_ok) for r in ranks)
    return CrossRankAnalysis(
        clocks=clocks,
        waits=wait_stats(m, inst_ok, run.events.symbols) if m is not None else (),
        ranks=waits,
        matched_instances=m.num_instances if m is not None else 0,
        unmatched_instances=m.unmatched if m is not None else 0,
        load_imbalance_pct=_load_imbalance(waits, slots),
        straggler=_straggler(waits, slots),
        overlap=_overlap(run, slots),
        ideal=_ideal(run, slots, m, inst_ok),
        tie_tolerance_us=tie_ns / 1e3,
        measured_instances=int(inst_ok.sum()),
    )
