"""Measured steps of all ranks as one sorted array of (rank, step) slots, with per-slot sums.

Rows of any kind are put in their slot with one ``searchsorted``, so per-step figures of
every rank come out of a single ``bincount`` instead of a loop over ranks and steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalescope.analyze.matching import Matched
from scalescope.analyze.steps import measured_steps
from scalescope.events import PHASES, EventTable, Kind

BUSY_PHASES = ("data", "forward", "backward", "optimizer")
"""What a rank does itself; comm_wait is waiting for the others or for the network."""
OTHER = "other"
"""Step time outside every recorded phase; a straggler may lose its time there too."""
STEP_BITS = 32


def step_key(rank: np.ndarray, step: np.ndarray) -> np.ndarray:
    return (rank.astype(np.int64) << STEP_BITS) + step.astype(np.int64)


def _slot_of(keys: np.ndarray, rank: np.ndarray, step: np.ndarray) -> np.ndarray:
    if len(keys) == 0:
        return np.full(len(rank), -1, dtype=np.int64)
    wanted = step_key(rank, step)
    idx = np.minimum(np.searchsorted(keys, wanted), len(keys) - 1)
    return np.where(keys[idx] == wanted, idx, -1)


@dataclass(frozen=True)
class StepSlots:
    keys: np.ndarray
    """Sorted, unique ``step_key`` of every measured step of every rank."""
    rank: np.ndarray
    dur_ns: np.ndarray
    """The STEP row's duration (float)."""
    samples: np.ndarray
    phase_ns: dict[str, np.ndarray]
    """Per-slot sum of each phase of PHASES (float ns; 0 where a step has no such row)."""

    def slot_of(self, rank: np.ndarray, step: np.ndarray) -> np.ndarray:
        """Slot index of each (rank, step); -1 where it is not a measured step."""
        return _slot_of(self.keys, rank, step)

    def per_rank_mean_ms(self, rank: int, phases: tuple[str, ...]) -> float:
        """Mean per measured step of the summed ``phases`` of one rank (0 without steps)."""
        mine = self.rank == rank
        if not mine.any():
            return 0.0
        total = sum(float(self._phase(p)[mine].sum()) for p in phases)
        return total / int(mine.sum()) / 1e6

    def _phase(self, phase: str) -> np.ndarray:
        if phase == OTHER:
            covered = sum(self.phase_ns[p] for p in PHASES)
            return np.maximum(self.dur_ns - covered, 0.0)
        return self.phase_ns[phase]

    def largest_excess(self, rank: int) -> tuple[str | None, float | None]:
        """The phase (busy phases and ``other``) where ``rank`` spends the most time per step
        above the mean of the other ranks, and that excess in ms; None when it spends no
        more anywhere or no other rank has measured steps."""
        others = [int(r) for r in np.unique(self.rank) if r != rank]
        if not others or not (self.rank == rank).any():
            return None, None
        excess = {
            p: self.per_rank_mean_ms(rank, (p,))
            - float(np.mean([self.per_rank_mean_ms(r, (p,)) for r in others]))
            for p in (*BUSY_PHASES, OTHER)
        }
        phase = max(excess, key=lambda p: excess[p])
        return (phase, excess[phase]) if excess[phase] > 0 else (None, None)


def measured_slots(events: EventTable, warmup_steps: int) -> StepSlots:
    """Slots of the measured steps (steps.py's rule), with their phase sums."""
    rows = measured_steps(events, warmup_steps).rows
    keys, first = np.unique(step_key(rows.rank, rows.step), return_index=True)
    phases = events.of_kind(Kind.PHASE)
    slot = _slot_of(keys, phases.rank, phases.step)
    n = len(keys)
    phase_ns = {}
    for name in PHASES:
        mask = (slot >= 0) & phases.where("name", name)
        phase_ns[name] = np.bincount(
            slot[mask], weights=phases.dur_ns[mask].astype(np.float64), minlength=n
        )
    return StepSlots(
        keys=keys,
        rank=(keys >> STEP_BITS).astype(np.int64),
        dur_ns=rows.dur_ns[first].astype(np.float64),
        samples=rows.count[first].astype(np.int64),
        phase_ns=phase_ns,
    )


def _covered(
    slot_a: np.ndarray, a: tuple[np.ndarray, np.ndarray],
    slot_b: np.ndarray, b: tuple[np.ndarray, np.ndarray], n: int,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Per slot: length of the union of the B intervals, and of (union A) ∩ (union B).

    A sweep over all interval ends sorted by (slot, time): running counts of open A and B
    intervals; the gap to the next point is covered by B while B's count is positive.
    Every interval opens and closes in its own slot, so the counts are 0 between slots.
    """
    slot = np.concatenate([slot_a, slot_a, slot_b, slot_b])
    t = np.concatenate([a[0], a[1], b[0], b[1]]).astype(np.int64)
    na, nb = len(slot_a), len(slot_b)
    da = np.concatenate([np.ones(na), -np.ones(na), np.zeros(2 * nb)]).astype(np.int64)
    db = np.concatenate([np.zeros(2 * na), np.ones(nb), -np.ones(nb)]).astype(np.int64)
    order = np.lexsort((t, slot))
    slot, t = slot[order], t[order]
    open_a, open_b = np.cumsum(da[order])[:-1], np.cumsum(db[order])[:-1]
    gap = np.where(slot[1:] == slot[:-1], np.diff(t), 0).astype(np.float64)
    in_b = gap * (open_b > 0)
    both = in_b * (open_a > 0)
    return (
        np.bincount(slot[:-1], weights=in_b, minlength=n),
        np.bincount(slot[:-1], weights=both, minlength=n),
    )


def overlap_per_slot(events: EventTable, slots: StepSlots) -> tuple[np.ndarray, np.ndarray] | None:
    """Per slot: gradient communication time (union of the gradient collectives' intervals)
    and the part of it under the step's backward rows; None without gradient collectives
    in measured steps. Each rank's own clock: no alignment is needed within a rank."""
    coll = events.select(
        (events.kind == int(Kind.COLLECTIVE))
        & events.where("tag", "gradients")
        & (events.dur_ns >= 0)
    )
    c_slot = slots.slot_of(coll.rank, coll.step)
    coll, c_slot = coll.select(c_slot >= 0), c_slot[c_slot >= 0]
    if len(coll) == 0:
        return None
    bwd = events.select((events.kind == int(Kind.PHASE)) & events.where("name", "backward"))
    b_slot = slots.slot_of(bwd.rank, bwd.step)
    bwd, b_slot = bwd.select(b_slot >= 0), b_slot[b_slot >= 0]
    return _covered(
        b_slot, (bwd.start_ns, bwd.start_ns + bwd.dur_ns),
        c_slot, (coll.start_ns, coll.start_ns + coll.dur_ns), len(slots.keys),
    )  # fmt: skip


def _inside(
    events: EventTable, rank: np.ndarray, t: np.ndarray, names: tuple[str, ...]
) -> np.ndarray:
    """Whether each (rank, own-clock time) falls in a PHASE row of ``names`` of that rank."""
    phases = events.of_kind(Kind.PHASE)
    phases = phases.select(np.isin(phases.name, [phases.symbols.id_of(n) for n in names]))
    out = np.zeros(len(t), dtype=bool)
    for r in np.unique(rank):
        mine = phases.select(phases.rank == r)
        if len(mine) == 0:
            continue
        order = np.argsort(mine.start_ns, kind="stable")
        starts = mine.start_ns[order]
        ends = np.maximum.accumulate((mine.start_ns + mine.dur_ns)[order])
        sel = rank == r
        idx = np.searchsorted(starts, t[sel], side="right") - 1
        out[sel] = (idx >= 0) & (t[sel] <= ends[np.maximum(idx, 0)])
    return out


def sync_wait_per_slot(
    events: EventTable, slots: StepSlots, m: Matched | None, inst_ok: np.ndarray
) -> np.ndarray:
    """Per slot: waiting in collectives that block the step (not gradient buckets, issued
    outside backward and comm_wait), over the matched instances of measured steps."""
    n = len(slots.keys)
    if m is None:
        return np.zeros(n)
    rows = inst_ok[m.inst] & (m.tag != events.symbols.id_of("gradients"))
    rank, step, t = m.rank[rows], m.step[rows], m.local_start_ns[rows]
    slot = slots.slot_of(rank, step)
    keep = (slot >= 0) & ~_inside(events, rank, t, ("backward", "comm_wait"))
    return np.bincount(slot[keep], weights=m.wait_ns[rows][keep].astype(np.float64), minlength=n)
