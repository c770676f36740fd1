"""Work beside training that some ranks do at some steps, and lateness that comes in bursts.

Rank-0-only evaluation, metric gathering and checkpoints are among the commonest causes of
waiting in data-parallel jobs: while one rank evaluates, the others wait in their next
collective. The probe records evaluation forwards (and the batches fetched for them) as
``eval`` and ``torch.save`` as ``checkpoint``; this module finds, per kind, the ranks that
did it, the measured steps where it happened, their period, its time per occurrence, and what
it cost the ranks that did not: their extra waiting at those steps over their typical step.

``lateness_pattern`` tells a rank that is slower at the same work (every step: its median
excess shifted) from one that is late only at some steps (its excess concentrated there,
with their period), whatever the late work was.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalescope.analyze.columns.sorting import distinct, index_in
from scalescope.analyze.steps.extra_spans import whole_work
from scalescope.analyze.steps.step_slots import OWN_PHASES, StepSlots
from scalescope.events import EventTable, Kind
from scalescope.events.schema import EXTRA_PHASES


@dataclass(frozen=True)
class ExtraWork:
    kind: str
    """``eval`` or ``checkpoint``."""
    ranks: tuple[int, ...]
    """The ranks that did it."""
    steps: tuple[int, ...]
    """The measured steps where any of them did it."""
    period: int | None
    """Steps between occurrences when they are evenly spaced (two or more)."""
    ms_per_occurrence: float
    """Its mean time on a rank that did it, per occurrence."""
    nbytes_per_occurrence: float
    """Bytes written per occurrence (checkpoints)."""
    others: tuple[int, ...]
    """The ranks that did not: they wait for it."""
    others_wait_ms_per_occurrence: float | None
    """Their mean waiting in collectives at those steps above their median at the other steps;
    None when every rank did it."""
    others_wait_ms_per_step: float | None
    """The same spread over every measured step."""
    measured_steps: int


@dataclass(frozen=True)
class LatenessPattern:
    """One rank's own time above the others' median, step by step."""

    median_excess_ms: float
    """Its median excess per step: a rank slower at the same work has it shifted."""
    late_steps: tuple[int, ...]
    """Steps whose excess stands out (over 5x the median, a quarter of a step, and the
    median by 8 median absolute deviations); empty when the excess is spread over every
    step."""
    period: int | None
    ms_per_occurrence: float
    """Its mean excess at the late steps."""
    late_share_pct: float
    """Share of its positive excess that falls in the late steps."""

    @property
    def periodic(self) -> bool:
        return bool(self.late_steps) and self.late_share_pct >= BURST_SHARE_PCT


BURST_SHARE_PCT = 60.0
"""Share of a rank's excess in a few steps for its lateness to come in bursts."""


def period_of(steps: tuple[int, ...]) -> int | None:
    """The common spacing of two or more steps, or None when they are not evenly spaced."""
    if len(steps) < 2:
        return None
    gaps = set(np.diff(np.asarray(steps)).tolist())
    return gaps.pop() if len(gaps) == 1 else None


def stands_out(excess: np.ndarray, step_ns: float) -> np.ndarray:
    """bool per step of a rank's ``excess`` over its peers (ns; (steps,) or (steps, ranks),
    each column apart): over 5x its median, a quarter of ``step_ns``, and its median by 8
    median absolute deviations. A rank slower at the same work has its median shifted and
    none stands out; a stall at a few steps does."""
    median = np.median(excess, axis=0)
    spread = np.median(np.abs(excess - median), axis=0)
    floor = np.maximum(np.maximum(5 * np.maximum(median, 0.0), 0.25 * step_ns), median + 8 * spread)
    return excess > floor


def _per_slot(events: EventTable, slots: StepSlots, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Per slot: the kind's time (ns) and bytes.

    Its time is its span less the other phases inside it (extra_spans.py: an evaluation's
    host work between its forwards is part of it; the sum of its rows alone left 6-13 % of
    a small model's evaluation out). Never less than that sum.
    """
    phases = events.of_kind(Kind.PHASE)
    mine = phases.where("name", kind)
    n = len(slots.keys)
    spans = whole_work(phases.rank, phases.step, phases.start_ns,
                       phases.start_ns + phases.dur_ns, mine)  # fmt: skip
    at = slots.slot_of(spans.rank, spans.step)
    ok = at >= 0
    span = np.bincount(at[ok], weights=((spans.end - spans.start) * spans.sign)[ok], minlength=n)
    rows = phases.select(mine)
    slot = slots.slot_of(rows.rank, rows.step)
    ok = slot >= 0
    own = np.bincount(slot[ok], weights=rows.dur_ns[ok].astype(np.float64), minlength=n)
    nbytes = np.bincount(slot[ok], weights=rows.nbytes[ok].astype(np.float64), minlength=n)
    return np.maximum(span, own), nbytes


def _waiting(slots: StepSlots) -> np.ndarray:
    """Per slot: waiting in collectives (comm_wait and blocking collectives), ns."""
    return slots.phase_ns["comm_wait"] + slots.blocking_wait_ns()


def median_by(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sorted unique keys and the median of ``values`` for each (one sort, no loop)."""
    order = np.lexsort((values, keys))
    k, v = keys[order], values[order]
    uniq, first, counts = np.unique(k, return_index=True, return_counts=True)
    return uniq, (v[first + (counts - 1) // 2] + v[first + counts // 2]) / 2


def _others_extra_wait(slots: StepSlots, others: np.ndarray, steps: np.ndarray) -> float:
    """Mean over the others of their waiting at ``steps`` above their median elsewhere, ms."""
    wait, step = _waiting(slots), slots.step
    theirs = np.isin(slots.rank, others)
    at = theirs & np.isin(step, steps)
    rest = theirs & ~at
    ranks, typical = median_by(slots.rank[rest], wait[rest])
    at_ranks, at_sum = np.unique(slots.rank[at], return_inverse=True)
    mean_at = np.bincount(at_sum, weights=wait[at]) / np.bincount(at_sum)
    both = np.isin(at_ranks, ranks)
    if not both.any():
        return 0.0
    extra = mean_at[both] - typical[index_in(ranks, at_ranks[both])]
    return max(float(extra.mean()), 0.0) / 1e6


def extra_work(events: EventTable, slots: StepSlots) -> tuple[ExtraWork, ...]:
    """Each kind of extra work recorded in the measured steps."""
    out = []
    step = slots.step
    measured = int(len(distinct(step)))
    for kind in EXTRA_PHASES:
        dur, nbytes = _per_slot(events, slots, kind)
        doing = dur > 0
        if not doing.any():
            continue
        ranks = distinct(slots.rank[doing])
        steps = distinct(step[doing])
        others = np.setdiff1d(slots.ranks, ranks)
        per_occ = per_step = None
        if len(others):
            per_occ = _others_extra_wait(slots, others, steps)
            per_step = per_occ * len(steps) / max(measured, 1)
        out.append(
            ExtraWork(
                kind=kind, ranks=tuple(ranks.tolist()), steps=tuple(steps.tolist()),
                period=period_of(tuple(steps.tolist())),
                ms_per_occurrence=float(dur[doing].mean()) / 1e6,
                nbytes_per_occurrence=float(nbytes[doing].mean()),
                others=tuple(others.tolist()), others_wait_ms_per_occurrence=per_occ,
                others_wait_ms_per_step=per_step, measured_steps=measured,
            )
        )  # fmt: skip
    return tuple(out)


def lateness_pattern(slots: StepSlots, rank: int) -> LatenessPattern | None:
    """``rank``'s own time per step against the others' median at the same step."""
    own, step = slots.own_sum_ns(OWN_PHASES), slots.step
    mine = slots.rank == rank
    if not mine.any() or mine.all():
        return None
    numbers, typical = median_by(step[~mine], own[~mine])
    mine_steps, mine_own = step[mine], own[mine]
    keep = np.isin(mine_steps, numbers)
    if not keep.any():
        return None
    steps_kept = mine_steps[keep]
    excess = mine_own[keep] - typical[np.searchsorted(numbers, steps_kept)]
    median = float(np.median(excess))
    late = stands_out(excess, float(np.median(slots.dur_ns[mine])))
    positive = float(excess[excess > 0].sum())
    few = late.any() and late.sum() <= len(late) / 2
    late_steps = tuple(int(s) for s in steps_kept[late]) if few else ()
    return LatenessPattern(
        median_excess_ms=median / 1e6,
        late_steps=late_steps,
        period=period_of(late_steps),
        ms_per_occurrence=float(excess[late].mean()) / 1e6 if late.any() else 0.0,
        late_share_pct=100.0 * float(excess[late].sum()) / positive if few and positive else 0.0,
    )
