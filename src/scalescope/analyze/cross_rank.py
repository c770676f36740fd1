"""Across ranks: one clock, collectives matched by (group, seq), waiting versus transfer,
stragglers, load imbalance, overlap of communication with backward, and the throughput the
same ranks would reach with no exposed communication and no waiting.

Result types are fixed here; the renderers (terminal, JSON, HTML, timeline) read them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ClockAlignment:
    """How one rank's event times are put on the common (rank 0's) clock."""

    rank: int
    offset_ns: int
    """Added to the rank's ``start_ns`` values."""
    uncertainty_ns: int | None
    """± bound of the offset; None when unknown (wall-clock fallback)."""
    drift_ns: int | None
    """End offset minus start offset; None without an end measurement."""
    method: str
    """ping-pong (probe's exchange with rank 0), wall-clock (each rank's time.time_ns), or
    reference (rank 0 itself)."""


@dataclass(frozen=True)
class WaitStats:
    """Waiting versus transfer for one (op, tag, message size) over its matched instances."""

    op: str
    tag: str
    nbytes: int
    instances: int
    """Instances seen on every rank of the group (unmatched ones are left out)."""
    skew_avg_us: float
    """Mean over instances of (last arrival − first arrival) on the common clock."""
    skew_max_us: float
    wait_avg_us: float
    """Mean over instances and ranks of (last arrival − this rank's arrival)."""
    transfer_avg_us: float
    """Mean over instances and ranks of (completion − last arrival): moving the bytes."""
    wait_share_pct: float
    """wait / (wait + transfer) × 100."""


@dataclass(frozen=True)
class RankWaits:
    rank: int
    last_count: int
    """Matched instances this rank arrived at last."""
    last_share_pct: float
    lateness_avg_us: float
    """When last: mean of (its arrival − the second-to-last arrival)."""
    wait_ms_per_step: float
    """Time this rank spent waiting for others in collectives, per measured step."""
    busy_ms_per_step: float
    """data + forward + backward + optimizer per measured step (what the rank does itself)."""


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
