"""A rank's CPU time in a phase against the other ranks': what tells a rank that computes more
there (more work, slower cores) from one that waits there (asleep, on I/O or a lock, a device
sync, or runnable behind another process on its cores).

Read from the CPU rows the probe writes beside each phase row (events/schema.py ``Kind.CPU``);
a run without them (older, ingested, or a phase not timed by the probe) says nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalescope.analyze.columns.sorting import packed
from scalescope.analyze.steps.step_slots import StepSlots
from scalescope.events import EventTable
from scalescope.events.schema import Kind

MIN_COVERED = 0.9
"""Share of each rank's rows of the phase, in measured steps, that must have a CPU row."""


@dataclass(frozen=True)
class PhaseCpu:
    """Per measured step, one rank's phase above the mean of the other ranks', in ms."""

    phase: str
    wall_excess_ms: float
    """Its time in the phase on the host clock."""
    thread_excess_ms: float | None
    """Its training thread's CPU time in the phase; None where a rank's was unreadable."""
    process_excess_ms: float
    """Its process's CPU time in the phase (every thread: the intra-op pool, gloo's)."""

    @property
    def computed_ms(self) -> float:
        """What it computed more: the training thread's CPU time where known."""
        return (
            self.thread_excess_ms if self.thread_excess_ms is not None else self.process_excess_ms
        )

    @property
    def waited_ms(self) -> float:
        """Its time in the phase above the others' that was not the training thread's CPU
        time: off a CPU (asleep, blocked) or runnable but not running."""
        return self.wall_excess_ms - self.computed_ms


def _cpu_index(rows: EventTable, cpu: EventTable) -> np.ndarray:
    """Per PHASE row of ``rows``: the index in ``cpu`` of the CPU row of its rank and start,
    -1 where none."""
    keys = packed([np.r_[rows.rank, cpu.rank], np.r_[rows.start_ns, cpu.start_ns]])
    if keys is None:
        return np.full(len(rows), -1, dtype=np.int64)
    mine, theirs = keys[: len(rows)], keys[len(rows) :]
    order = np.argsort(theirs, kind="stable")
    at = np.minimum(np.searchsorted(theirs[order], mine), len(order) - 1)
    return np.where(theirs[order][at] == mine, order[at], -1)


def _matched(events: EventTable, phase: str) -> tuple[EventTable, EventTable, np.ndarray] | None:
    """The phase's PHASE rows, its CPU rows and, per PHASE row, the index of its CPU row (-1:
    none). A CPU row keeps the name its phase had when recorded: a batch an evaluation later
    claimed (``data`` renamed ``eval``) keeps ``data`` there, and goes unmatched."""
    cpu, rows = events.of_kind(Kind.CPU), events.of_kind(Kind.PHASE)
    if not len(cpu) or not len(rows):
        return None
    cpu, rows = (t.select(t.where("name", phase)) for t in (cpu, rows))
    if not len(cpu) or not len(rows):
        return None
    return rows, cpu, _cpu_index(rows, cpu)


def cpu_of_rows(events: EventTable, rows: EventTable) -> tuple[np.ndarray, np.ndarray]:
    """Per PHASE row of ``rows``: (the process's CPU ns, the training thread's) from the CPU
    row of its rank and start, -1 where it has none (matched by start alone: a batch an
    evaluation claimed keeps the name ``data`` on its CPU row)."""
    cpu = events.of_kind(Kind.CPU)
    if not len(cpu) or not len(rows):
        none = np.full(len(rows), -1, dtype=np.int64)
        return none, none.copy()
    idx = _cpu_index(rows, cpu)
    found = idx >= 0
    return (np.where(found, cpu.count[idx], -1).astype(np.int64),
            np.where(found, cpu.seq[idx], -1).astype(np.int64))  # fmt: skip


@dataclass(frozen=True)
class SlotCpu:
    """One phase's CPU rows summed per slot of ``StepSlots`` (ns), and which ranks of
    ``StepSlots.ranks`` have them for at least ``MIN_COVERED`` of their rows of the phase."""

    wall_ns: np.ndarray
    thread_ns: np.ndarray | None
    """None where any rank's training thread clock was unreadable."""
    process_ns: np.ndarray
    covered: np.ndarray
    present: np.ndarray
    """Ranks with rows of the phase in measured steps."""


def slot_cpu(events: EventTable, slots: StepSlots, phase: str) -> SlotCpu | None:
    """``phase``'s CPU rows per measured slot; None where no rank has any."""
    matched = _matched(events, phase)
    if matched is None:
        return None
    rows, cpu, cpu_at = matched
    slot = slots.slot_of(rows.rank, rows.step)
    measured = slot >= 0
    has = measured & (cpu_at >= 0)
    if not has.any():
        return None
    n = len(slots.keys)
    total, found = (
        slots.per_rank_sum(np.bincount(slot[m], minlength=n).astype(float)) for m in (measured, has)
    )
    at, where = cpu_at[has], slot[has]

    def summed(values: np.ndarray) -> np.ndarray:
        return np.bincount(where, weights=values.astype(np.float64), minlength=n)

    thread = cpu.seq[at]
    return SlotCpu(
        wall_ns=summed(cpu.dur_ns[at]),
        thread_ns=summed(thread) if (thread >= 0).all() else None,
        process_ns=summed(cpu.count[at]),
        covered=(total > 0) & (found >= MIN_COVERED * total),
        present=total > 0,
    )


def phase_cpu(events: EventTable, slots: StepSlots, rank: int, phase: str) -> PhaseCpu | None:
    """``rank``'s wall and CPU time in ``phase`` per measured step above the other ranks'
    mean; None without CPU rows for at least ``MIN_COVERED`` of every rank's rows."""
    sums = slot_cpu(events, slots, phase)
    if sums is None:
        return None
    me = slots.ranks == rank
    others = sums.present & ~me
    if not (sums.present & me).any() or not others.any() or (sums.present & ~sums.covered).any():
        return None

    def excess(per_slot: np.ndarray) -> float:
        ms = slots.per_rank_mean(per_slot) / 1e6
        return float(ms[me][0] - ms[others].mean())

    return PhaseCpu(
        phase=phase,
        wall_excess_ms=excess(sums.wall_ns),
        thread_excess_ms=excess(sums.thread_ns) if sums.thread_ns is not None else None,
        process_excess_ms=excess(sums.process_ns),
    )
