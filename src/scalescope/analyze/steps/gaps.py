"""Where a rank's time outside every recorded phase lies: between which two phases.

A straggler whose extra time is in none of the phases (``other``: logging, ``.item()``,
file I/O, a checkpoint, a garbage-collector pause) is told where it is. With scalescope's
probe a step ends with the optimizer step, so "between the optimizer step and the next
batch" is the end of the training loop's body, "between the batch and forward" its start,
"between forward and backward" the loss.

A gap is the time between the latest end of a rank's phase rows so far and the start of
its next phase row; it counts in the measured step of that next row. Waiting in blocking
collectives issued inside a gap (a loss ``all_reduce``) is taken out: it is the others'
waiting, not their work.
"""

from __future__ import annotations

import numpy as np

from scalescope.analyze.columns.sorting import distinct
from scalescope.analyze.steps.step_slots import StepSlots, SyncWaits
from scalescope.events import EventTable, Kind

Between = tuple[str, str]
"""The phase before a gap and the phase after it."""
WORDS_BEFORE = {
    "data": "the batch",
    "optimizer": "the optimizer step",
    "comm_wait": "the gradient wait",
}
WORDS_AFTER = {**WORDS_BEFORE, "data": "the next batch"}


def describe(between: Between) -> str:
    """``between the optimizer step and the next batch``."""
    before, after = between
    return f"between {WORDS_BEFORE.get(before, before)} and {WORDS_AFTER.get(after, after)}"


def _gaps(
    events: EventTable, slots: StepSlots, sync: SyncWaits | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per gap: its slot, the name ids before and after it, and its length less the waits
    in blocking collectives issued inside it (ns); gaps outside measured steps dropped."""
    ph = events.of_kind(Kind.PHASE)
    order = np.lexsort((ph.start_ns, ph.rank))
    rank, name, step = ph.rank[order], ph.name[order], ph.step[order]
    start = ph.start_ns[order].astype(np.int64)
    end = start + ph.dur_ns[order].astype(np.int64)
    first = np.r_[True, rank[1:] != rank[:-1]]
    group = np.cumsum(first) - 1
    # running maximum of the ends within each rank: each rank's keys exceed all the previous
    # rank's, so one accumulate serves every rank; ``holder`` is the row that set it
    rel_end = end - start[np.maximum.accumulate(np.where(first, np.arange(len(rank)), 0))]
    key = group * (int(rel_end.max(initial=0)) + 1) + rel_end
    run_max = np.maximum.accumulate(key)
    holder = np.maximum.accumulate(np.where(key == run_max, np.arange(len(key)), 0))
    length = np.maximum(start[1:] - end[holder[:-1]], 0).astype(np.float64)
    length[first[1:]] = 0.0  # no gap across ranks
    if sync is not None:
        _take_out_waits(length, rank, start, sync)
    slot = slots.slot_of(rank[1:], step[1:])
    keep = (slot >= 0) & ~first[1:] & (length > 0)
    return slot[keep], name[holder[:-1]][keep], name[1:][keep], length[keep]


def _take_out_waits(
    length: np.ndarray, rank: np.ndarray, start: np.ndarray, sync: SyncWaits
) -> None:
    """Subtract from each gap the waits of blocking collectives issued inside it: the gap
    before the first phase row of the same rank that starts at or after the issue."""
    outside = sync.phase == -1
    if not outside.any() or len(rank) < 2:
        return
    t0 = min(int(start.min()), int(sync.start_ns[outside].min()))
    span = max(int(start.max()), int(sync.start_ns[outside].max())) - t0 + 1
    ranks = distinct(rank)
    keys = np.searchsorted(ranks, rank).astype(np.int64) * span + (start - t0)
    q_rank = sync.rank[outside]
    q_pos = np.minimum(np.searchsorted(ranks, q_rank), len(ranks) - 1)
    q_keys = q_pos.astype(np.int64) * span + (sync.start_ns[outside].astype(np.int64) - t0)
    nxt = np.searchsorted(keys, q_keys)
    ok = (nxt > 0) & (nxt < len(rank)) & (ranks[q_pos] == q_rank)
    nxt = np.minimum(nxt, len(rank) - 1)
    ok &= (rank[nxt] == q_rank) & (rank[nxt - 1] == q_rank)
    np.subtract.at(length, nxt[ok] - 1, sync.wait_ns[outside][ok])
    np.maximum(length, 0.0, out=length)


def gap_ms_per_step(
    events: EventTable, slots: StepSlots, sync: SyncWaits | None = None
) -> dict[Between, np.ndarray]:
    """Per (phase before, phase after): each rank's (``slots.ranks``) mean time per
    measured step in gaps between those two phases, ms."""
    if len(events.of_kind(Kind.PHASE)) < 2 or len(slots.keys) == 0:
        return {}
    slot, before, after, length = _gaps(events, slots, sync)
    out = {}
    for b, a in sorted(set(zip(before.tolist(), after.tolist(), strict=True))):
        mask = (before == b) & (after == a)
        per_slot = np.bincount(slot[mask], weights=length[mask], minlength=len(slots.keys))
        out[events.symbols[b], events.symbols[a]] = slots.per_rank_mean(per_slot) / 1e6
    return out


def largest_gap(
    events: EventTable, slots: StepSlots, rank: int, sync: SyncWaits | None = None
) -> Between | None:
    """Where ``rank`` spends the most time outside the phases above the other ranks' mean
    (ranks with measured steps); None when nowhere more."""
    has_steps = slots.steps_per_rank() > 0
    me, others = slots.ranks == rank, has_steps & (slots.ranks != rank)
    if not others.any() or not (has_steps & me).any():
        return None
    excess = {
        between: float(ms[me][0] - ms[others].mean())
        for between, ms in gap_ms_per_step(events, slots, sync).items()
    }
    if not excess:
        return None
    best = max(excess, key=lambda b: excess[b])
    return best if excess[best] > 0 else None
