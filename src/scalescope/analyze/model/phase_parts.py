"""Each phase's time inside each part of a rank's own time in the step model (step_grid.py):
what ``phase:NAME`` takes out. Work beside training (``eval``, ``checkpoint``) is taken whole,
from its first row to its last (analyze/steps/extra_spans.py), as the rank-only work finding
counts it: the host work between an evaluation's forwards goes with it."""

from __future__ import annotations

import numpy as np

from scalescope.analyze.ranks.clocks import ClockAlignment, aligned_start_ns
from scalescope.analyze.steps.extra_spans import Intervals, whole_work
from scalescope.events import EventTable, Kind
from scalescope.events.schema import EXTRA_PHASES


def phase_parts(
    events: EventTable, clocks: tuple[ClockAlignment, ...], steps: np.ndarray, ranks: np.ndarray,
    starts: np.ndarray, ends: np.ndarray, names: tuple[str, ...],
) -> dict[str, np.ndarray]:  # fmt: skip
    """Per phase of ``names`` recorded: its time's overlap with each part of each rank's
    step (``starts``, ``ends``: (steps, ranks, parts) on the common clock)."""
    phases = events.of_kind(Kind.PHASE)
    wanted = [n for n in names if events.symbols.id_of(n) >= 0]
    if not wanted or len(phases) == 0:
        return {}
    phases = phases.select(np.isin(phases.step, steps) & np.isin(phases.rank, ranks))
    begin = aligned_start_ns(phases, clocks).astype(np.float64)
    finish = begin + phases.dur_ns
    out = {}
    for name in wanted:
        mine = phases.where("name", name)
        if not mine.any():
            continue
        if name in EXTRA_PHASES:
            spans = whole_work(phases.rank, phases.step, begin, finish, mine)
        else:
            spans = Intervals(phases.rank[mine], phases.step[mine], begin[mine], finish[mine],
                              np.ones(int(mine.sum())))  # fmt: skip
        out[name] = _overlaps(spans, steps, ranks, starts, ends)
    return out


def _overlaps(
    spans: Intervals, steps: np.ndarray, ranks: np.ndarray, starts: np.ndarray, ends: np.ndarray
) -> np.ndarray:
    """(steps, ranks, parts): the signed intervals' overlap with each part."""
    where = (np.searchsorted(steps, spans.step), np.searchsorted(ranks, spans.rank))
    parts = np.zeros(starts.shape)
    for j in range(starts.shape[2]):
        lo = np.maximum(spans.start, starts[:, :, j][where])
        hi = np.minimum(spans.end, ends[:, :, j][where])
        np.add.at(parts[:, :, j], where, spans.sign * np.maximum(hi - lo, 0.0))
    return np.maximum(parts, 0.0)
