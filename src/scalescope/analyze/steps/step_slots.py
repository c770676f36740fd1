"""Measured steps of all ranks as one sorted array of (rank, step) slots, with per-slot sums.

Rows of any kind are put in their slot with one ``searchsorted``, so per-step figures of
every rank come out of a single ``bincount`` instead of a loop over ranks and steps.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from scalescope.analyze.columns.slot_index import (
    STEP_BITS,
    Dense,
    dense_table,
    find,
    key_step,
    measured_steps,
    slot_lookup,
    step_key,
)
from scalescope.analyze.columns.sorting import distinct, index_in, sort_order
from scalescope.analyze.ranks.matching import Matched
from scalescope.events import PHASES, EventTable, Kind

BUSY_PHASES = ("data", "to_device", "forward", "backward", "optimizer")
"""The recorded phases a rank works in; comm_wait is waiting for the others or the network."""
OTHER = "other"
"""Step time outside every recorded phase; a straggler may lose its time there too."""
OWN_PHASES = (*BUSY_PHASES, OTHER)
"""What a rank does itself: the step less comm_wait (and less waiting in blocking
collectives, see ``StepSlots.own_ns``). Host work between the phases (logging, ``.item()``,
file I/O, checkpoints, garbage collection) is the rank's own time as much as forward is."""


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
    ranks: np.ndarray
    """Every rank of the event table, sorted (some may have no measured step)."""
    sync_wait_ns: dict[str, np.ndarray] = field(default_factory=dict)
    """Per-slot waiting in blocking collectives (all but gradient buckets), by the phase
    they were issued in (``other``: outside every phase); see ``with_sync_waits``."""
    start_ns: np.ndarray | None = None
    """The STEP row's start (its rank's clock); None in slots made by hand."""
    phase_rows: dict[str, np.ndarray] = field(default_factory=dict)
    """Per-slot count of each phase's rows (a phase may have rows that took no time)."""
    _cache: dict = field(default_factory=dict, compare=False, repr=False)

    def slot_of(self, rank: np.ndarray, step: np.ndarray) -> np.ndarray:
        """Slot index of each (rank, step); -1 where it is not a measured step."""
        return find(self.keys, self._dense(), rank, step)

    @property
    def step(self) -> np.ndarray:
        """The step number of each slot."""
        return key_step(self.keys)

    def _dense(self) -> Dense:
        """A (rank, step) -> slot table, made once, when it is small enough (a gather per
        query instead of a binary search: the analysis asks for the slots of millions of
        rows several times)."""
        if "table" not in self._cache:
            self._cache["table"] = dense_table(self.keys)
        return self._cache["table"]

    def own_ns(self, phase: str) -> np.ndarray:
        """Per slot: the phase (or ``other``) less the waiting for other ranks inside it,
        so a rank kept waiting in forward's buffer broadcast does not look slow in forward."""
        if phase == OTHER:
            covered = sum(self.phase_ns[p] for p in PHASES)
            return np.maximum(self.dur_ns - covered - self._waits_in_other(), 0.0)
        raw = self.phase_ns[phase]
        wait = self.sync_wait_ns.get(phase)
        return raw if wait is None else np.maximum(raw - wait, 0.0)

    def _waits_in_other(self) -> np.ndarray:
        """Per slot: the waiting in collectives issued outside every phase, and the part of
        a phase's waiting that outlasts the phase. A collective issued in forward whose wait
        comes after forward ends (a tensor-parallel all-reduce that DTensor issues
        asynchronously and waits for later) waits in the time outside the phases: left in a
        phase that could not hold it, it counted as the waiting rank's own busy time."""
        out = np.zeros(len(self.keys))
        for phase, wait in self.sync_wait_ns.items():
            raw = self.phase_ns.get(phase) if phase != OTHER else None
            out += wait if raw is None else np.maximum(wait - raw, 0.0)
        return out

    def blocking_wait_ns(self) -> np.ndarray:
        """Per slot: waiting in blocking collectives issued outside backward and comm_wait
        (waits of those two are hidden or already in comm_wait)."""
        total = np.zeros(len(self.keys))
        for phase, wait in self.sync_wait_ns.items():
            if phase not in ("backward", "comm_wait"):
                total += wait
        return total

    def steps_per_rank(self) -> np.ndarray:
        """Measured steps of each rank of ``ranks``."""
        return np.bincount(index_in(self.ranks, self.rank), minlength=len(self.ranks))

    def per_rank_sum(self, per_slot: np.ndarray) -> np.ndarray:
        """Sum of a per-slot value over each rank's slots, for each rank of ``ranks``."""
        idx = index_in(self.ranks, self.rank)
        return np.bincount(idx, weights=per_slot, minlength=len(self.ranks))

    def per_rank_mean(self, per_slot: np.ndarray) -> np.ndarray:
        """Mean of a per-slot value over each rank's slots; 0 for a rank without steps."""
        steps = self.steps_per_rank()
        return self.per_rank_sum(per_slot) / np.maximum(steps, 1)

    def least_over_ranks(self, per_slot: np.ndarray) -> np.ndarray:
        """Per step number that every rank with measured steps has: the least value of
        ``per_slot`` over the ranks (in step order)."""
        if len(self.keys) == 0:
            return np.zeros(0)
        numbers, idx = np.unique(self.step, return_inverse=True)
        least = np.full(len(numbers), np.inf)
        np.minimum.at(least, idx, per_slot)
        everyone = np.bincount(idx, minlength=len(numbers)) == len(distinct(self.rank))
        return least[everyone]

    def own_sum_ns(self, phases: tuple[str, ...]) -> np.ndarray:
        """Per slot: the own time of ``phases`` together."""
        return sum((self.own_ns(p) for p in phases), np.zeros(len(self.keys)))

    def whole_own_ns(self) -> np.ndarray:
        """Per slot: the whole of a rank's own time (OWN_PHASES), less also the waiting that
        neither its phase nor the time outside the phases could hold. For waits placed by
        estimate: a summarised cell's at its calls' mean arrival (summary_sync.py), where
        FSDP2's root unshard, in forward and again in backward, put a 38 ms wait of backward
        in a 4 ms forward. Matched rows place each wait where it was, and keep
        ``own_sum_ns``."""
        own = self.own_sum_ns(OWN_PHASES)
        if not self.sync_wait_ns:
            return own
        covered = sum(self.phase_ns[p] for p in PHASES)
        outside = np.maximum(self.dur_ns - covered, 0.0)
        return np.maximum(own - np.maximum(self._waits_in_other() - outside, 0.0), 0.0)

    def own_ms_per_step(self, phases: tuple[str, ...]) -> np.ndarray:
        """Per rank of ``ranks``: mean own time of ``phases`` per measured step, in ms."""
        return self.per_rank_mean(self.own_sum_ns(phases)) / 1e6

    def largest_excess(self, rank: int) -> tuple[str | None, float | None]:
        """The phase (busy phases and ``other``) where ``rank`` spends the most own time per
        step above the mean of the other ranks, and that excess in ms; None when it spends
        no more anywhere or no other rank has measured steps."""
        has_steps = self.steps_per_rank() > 0
        me = self.ranks == rank
        others = has_steps & ~me
        if not others.any() or not (has_steps & me).any():
            return None, None
        excess = {}
        for p in OWN_PHASES:
            ms = self.own_ms_per_step((p,))
            excess[p] = float(ms[me][0] - ms[others].mean())
        phase = max(excess, key=lambda p: excess[p])
        return (phase, excess[phase]) if excess[phase] > 0 else (None, None)


def measured_slots(events: EventTable, warmup_steps: int) -> StepSlots:
    """Slots of the measured steps (``measured_steps``' rule), with their phase sums: what
    the step statistics and the cross-rank analysis are both taken over."""
    rows = measured_steps(events, warmup_steps).rows
    keys, first = np.unique(step_key(rows.rank, rows.step), return_index=True)
    phases = events.of_kind(Kind.PHASE)
    slot = slot_lookup(keys, phases.rank, phases.step)
    n = len(keys)
    phase_ns, phase_rows = {}, {}
    for name in PHASES:
        mask = (slot >= 0) & phases.where("name", name)
        phase_ns[name] = np.bincount(
            slot[mask], weights=phases.dur_ns[mask].astype(np.float64), minlength=n
        )
        phase_rows[name] = np.bincount(slot[mask], minlength=n)
    return StepSlots(
        keys=keys,
        rank=(keys >> STEP_BITS).astype(np.int64),
        dur_ns=rows.dur_ns[first].astype(np.float64),
        samples=rows.count[first].astype(np.int64),
        phase_ns=phase_ns,
        ranks=np.asarray(events.ranks(), dtype=np.int64),
        start_ns=rows.start_ns[first].astype(np.int64),
        phase_rows=phase_rows,
    )


def _covered(
    slot_a: np.ndarray, a: tuple[np.ndarray, np.ndarray],
    slot_b: np.ndarray, b: tuple[np.ndarray, np.ndarray], n: int,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Per slot: length of the union of the B intervals, and of (union A) ∩ (union B).

    Times become one key per slot (slot x 2^k plus the time since the slot's first start),
    so every slot's intervals lie in a range of their own. Each union is merged in one
    sort; (union A) ∩ (union B) is, for each merged A interval, the B union's cumulative
    length at its end less at its start (a binary search): no sweep over every end point
    of millions of intervals. Every interval opens and closes in its own slot."""
    base = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(base, slot_a, a[0])
    np.minimum.at(base, slot_b, b[0])
    longest = max(_longest(slot_a, a, base), _longest(slot_b, b, base))
    shift = max(int(longest).bit_length(), 1)
    if shift + max(n, 1).bit_length() > 62:
        return _covered_by_sweep(slot_a, a, slot_b, b, n)
    ua, ub = _union(slot_a, a, base, shift), _union(slot_b, b, base, shift)
    b_len = np.bincount(ub[0] >> shift, weights=(ub[1] - ub[0]).astype(np.float64), minlength=n)
    covered = np.r_[0, np.cumsum(ub[1] - ub[0])]
    both = _covered_until(ub, covered, ua[1]) - _covered_until(ub, covered, ua[0])
    return b_len, np.bincount(ua[0] >> shift, weights=both.astype(np.float64), minlength=n)


def _longest(slot: np.ndarray, iv: tuple[np.ndarray, np.ndarray], base: np.ndarray) -> int:
    return int((iv[1] - base[slot]).max()) if len(slot) else 0


def _union(
    slot: np.ndarray, iv: tuple[np.ndarray, np.ndarray], base: np.ndarray, shift: int
) -> tuple[np.ndarray, np.ndarray]:
    """The merged intervals of each slot as sorted (start, end) keys."""
    offset = slot.astype(np.int64) << shift
    start = offset + (iv[0] - base[slot])
    end = offset + (iv[1] - base[slot])
    order = np.argsort(start, kind="stable")  # rows come nearly in order: cheap
    start, end = start[order], end[order]
    if len(start) == 0:
        return start, end
    reach = np.maximum.accumulate(end)
    first = np.flatnonzero(np.r_[True, start[1:] > reach[:-1]])
    return start[first], np.maximum.reduceat(end, first)


def _covered_until(
    u: tuple[np.ndarray, np.ndarray], covered: np.ndarray, x: np.ndarray
) -> np.ndarray:
    """Length of the union ``u`` (sorted, disjoint; ``covered``: its cumulative lengths)
    that lies before each key ``x``."""
    if len(u[0]) == 0:
        return np.zeros(len(x), dtype=np.int64)
    i = np.searchsorted(u[0], x, side="right") - 1
    j = np.maximum(i, 0)
    inside = np.clip(x - u[0][j], 0, u[1][j] - u[0][j])
    return np.where(i >= 0, covered[j] + inside, 0)


def _covered_by_sweep(
    slot_a: np.ndarray, a: tuple[np.ndarray, np.ndarray],
    slot_b: np.ndarray, b: tuple[np.ndarray, np.ndarray], n: int,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """``_covered`` by a sweep over all interval ends sorted by (slot, time): running
    counts of open A and B intervals; for slots whose times do not fit one key."""
    slot = np.concatenate([slot_a, slot_a, slot_b, slot_b])
    t = np.concatenate([a[0], a[1], b[0], b[1]]).astype(np.int64)
    na, nb = len(slot_a), len(slot_b)
    da = np.concatenate([np.ones(na), -np.ones(na), np.zeros(2 * nb)]).astype(np.int64)
    db = np.concatenate([np.zeros(2 * na), np.ones(nb), -np.ones(nb)]).astype(np.int64)
    order = sort_order(slot, t)
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
    colls = events.of_kind(Kind.COLLECTIVE)
    coll = colls.select(colls.where("tag", "gradients") & (colls.dur_ns >= 0))
    c_slot = slots.slot_of(coll.rank, coll.step)
    coll, c_slot = coll.select(c_slot >= 0), c_slot[c_slot >= 0]
    if len(coll) == 0:
        return None
    phases = events.of_kind(Kind.PHASE)
    bwd = phases.select(phases.where("name", "backward"))
    b_slot = slots.slot_of(bwd.rank, bwd.step)
    bwd, b_slot = bwd.select(b_slot >= 0), b_slot[b_slot >= 0]
    return _covered(
        b_slot, (bwd.start_ns, bwd.start_ns + bwd.dur_ns),
        c_slot, (coll.start_ns, coll.start_ns + coll.dur_ns), len(slots.keys),
    )  # fmt: skip


def phase_at(events: EventTable, rank: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Name id of the PHASE row of the same rank containing each own-clock time; -1 if none.

    A rank's phases follow each other without overlapping, so the only candidate is the
    row of that rank that started last at or before ``t``: found for all queries at once
    by sorting phase starts and queries by (rank, time) and carrying the position of the
    latest phase start forward.
    """
    phases = events.of_kind(Kind.PHASE)
    n_p = len(phases)
    out = np.full(len(t), -1, dtype=np.int64)
    if n_p == 0 or len(t) == 0:
        return out
    ranks = np.concatenate([phases.rank, rank]).astype(np.int64)
    times = np.concatenate([phases.start_ns, t]).astype(np.int64)
    is_query = np.concatenate([np.zeros(n_p, np.int8), np.ones(len(t), np.int8)])
    order = sort_order(ranks, times, is_query)  # a phase starting at t comes first
    pos = np.where(order < n_p, np.arange(len(order)), -1)
    latest = np.maximum.accumulate(pos)
    queries = np.flatnonzero(order >= n_p)
    q, found = order[queries] - n_p, latest[queries]
    row = np.where(found >= 0, order[np.maximum(found, 0)], 0)  # a phase row when found
    hit = (
        (found >= 0)
        & (phases.rank[row] == rank[q])
        & (t[q] <= (phases.start_ns + phases.dur_ns)[row])
    )
    out[q[hit]] = phases.name[row[hit]]
    return out


@dataclass(frozen=True)
class SyncWaits:
    """Waiting in blocking collectives (all but gradient buckets) of measured instances,
    one entry per row: its slot, its rank, its issue on the rank's clock, the phase it was
    issued in (name id, -1 outside every phase) and the wait (ns)."""

    slot: np.ndarray
    rank: np.ndarray
    start_ns: np.ndarray
    phase: np.ndarray
    wait_ns: np.ndarray


def sync_waits(events: EventTable, slots: StepSlots, m: Matched, inst_ok: np.ndarray) -> SyncWaits:
    """The rows of ``m`` that are blocking collectives of measured steps, with their waits."""
    rows = np.flatnonzero(inst_ok[m.inst] & (m.tag != events.symbols.id_of("gradients")))
    slot = slots.slot_of(m.rank[rows], m.step[rows])
    rows, slot = rows[slot >= 0], slot[slot >= 0]
    rank, start = m.rank[rows], m.local_start_ns[rows]
    phase = phase_at(events, rank, start)
    return SyncWaits(slot, rank, start, phase, m.wait_ns[rows].astype(np.float64))


def with_sync_waits(events: EventTable, slots: StepSlots, sw: SyncWaits | None) -> StepSlots:
    """``slots`` with the waiting in blocking collectives (everything but gradient buckets,
    whose waiting overlaps backward or shows in comm_wait) per slot and phase of issue."""
    if sw is None:
        return slots
    n = len(slots.keys)
    waits = {}
    for name in (*PHASES, OTHER):
        sid = events.symbols.id_of(name) if name != OTHER else -1
        if sid == -1 and name != OTHER:
            continue  # no row has this phase
        mask = sw.phase == sid
        if mask.any():
            waits[name] = np.bincount(sw.slot[mask], weights=sw.wait_ns[mask], minlength=n)
    return replace(slots, sync_wait_ns=waits)
