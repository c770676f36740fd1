"""What a report of many ranks shows instead of a row per rank: the ranks from the slowest to
the fastest, and each per-rank figure's distribution over every rank (min, p10, p50, p90,
max), phases included with the rank where each is longest."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from scalescope.analyze.cross_rank import CrossRankAnalysis
from scalescope.analyze.steps.steps import StepAnalysis

PERCENTILES = (("min", 0.0), ("p10", 10.0), ("p50", 50.0), ("p90", 90.0), ("max", 100.0))
STEP_COLUMNS = ("mean_step_ms", "samples_per_s", "span_s")
"""The fields of ``RankSteps`` whose spread ``rank_spreads`` gives."""
CROSS_RANK_COLUMNS = (
    "busy_ms_per_step",
    "wait_ms_per_step",
    "lateness_ms_per_step",
    "lateness_share_pct",
    "last_share_pct",
)
"""The fields of ``RankWaits`` whose spread ``rank_spreads`` gives."""


@dataclass(frozen=True)
class Spread:
    """One figure over the ranks that have it, at ``PERCENTILES`` (numpy's linear method)."""

    values: tuple[float, float, float, float, float]


def spread(values: Iterable[float | None]) -> Spread | None:
    """None when no rank has the figure."""
    known = np.array([v for v in values if v is not None], dtype=np.float64)
    if len(known) == 0:
        return None
    p = tuple(float(np.percentile(known, q)) for _, q in PERCENTILES)
    return Spread((p[0], p[1], p[2], p[3], p[4]))


@dataclass(frozen=True)
class RankOrder:
    """Ranks from the slowest to the fastest by one metric (ties: the lower rank first)."""

    metric: str
    """What the order is by, as a phrase ("busy time per step")."""
    ranks: tuple[int, ...]
    values: Mapping[int, float]


def rank_order(steps: StepAnalysis | None, cross: CrossRankAnalysis | None) -> RankOrder | None:
    """By busy time per step (the step less its waiting for other ranks) when the cross-rank
    analysis has it, else by mean step time; only ranks with measured steps; None without
    either."""
    measured = None if steps is None else {r.rank for r in steps.ranks if r.num_steps}
    if cross is not None and cross.ranks:
        values = {
            r.rank: r.busy_ms_per_step
            for r in cross.ranks
            if measured is None or r.rank in measured
        }
        metric = "busy time per step"
    elif steps is not None:
        values = {r.rank: r.mean_step_ms for r in steps.ranks if r.mean_step_ms is not None}
        metric = "mean step time"
    else:
        return None
    if not values:
        return None
    ranks = tuple(sorted(values, key=lambda r: (-values[r], r)))
    return RankOrder(metric, ranks, values)


@dataclass(frozen=True)
class PhaseSpread:
    """A phase's mean ms per measured step over the ranks that recorded it."""

    phase: str
    spread: Spread
    slowest_rank: int
    """Where it is longest (ties: the lower rank)."""


@dataclass(frozen=True)
class RankSpreads:
    columns: Mapping[str, Spread | None]
    """By field name (``STEP_COLUMNS``, and ``CROSS_RANK_COLUMNS`` with a cross-rank
    analysis)."""
    phases: tuple[PhaseSpread, ...]
    """In the order the ranks list them."""
    unrecorded: tuple[tuple[str, tuple[int, ...]], ...]
    """Each phase some ranks with measured steps did not record, with those ranks."""


def _phases(steps: StepAnalysis) -> tuple[tuple[PhaseSpread, ...], tuple]:
    by_phase: dict[str, list[tuple[float, int]]] = {}
    missing: dict[str, list[int]] = {}
    for r in steps.ranks:
        for p in r.phases:
            by_phase.setdefault(p.phase, []).append((p.mean_ms, r.rank))
        for name in r.missing_phases if r.num_steps else ():
            missing.setdefault(name, []).append(r.rank)
    phases = []
    for phase, means in by_phase.items():
        found = spread(m for m, _ in means) or Spread((0.0, 0.0, 0.0, 0.0, 0.0))
        phases.append(PhaseSpread(phase, found, max(means, key=lambda m: (m[0], -m[1]))[1]))
    return tuple(phases), tuple((name, tuple(ranks)) for name, ranks in missing.items())


def rank_spreads(steps: StepAnalysis | None, cross: CrossRankAnalysis | None) -> RankSpreads:
    columns: dict[str, Spread | None] = {}
    phases: tuple[PhaseSpread, ...] = ()
    unrecorded: tuple[tuple[str, tuple[int, ...]], ...] = ()
    if steps is not None:
        for name in STEP_COLUMNS:
            columns[name] = spread(getattr(r, name) for r in steps.ranks)
        phases, unrecorded = _phases(steps)
    if cross is not None:
        for name in CROSS_RANK_COLUMNS:
            columns[name] = spread(getattr(r, name) for r in cross.ranks)
    return RankSpreads(columns, phases, unrecorded)
