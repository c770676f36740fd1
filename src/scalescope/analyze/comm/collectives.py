"""Collectives by op and by message size, with nccl-tests algbw/busbw, and traffic per step.

Counts and totals are per rank: every rank of a data-parallel job issues the same
collectives, so one all_reduce recorded on 4 ranks is 1 call of 4 participants, not 4 calls.
Each row says over how many ranks it was averaged (``num_ranks``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from scalescope.analyze.columns.grouping import group_by, rank_calls
from scalescope.analyze.columns.slot_index import STEP_BITS, measured_steps, slot_lookup, step_key
from scalescope.analyze.columns.sorting import distinct, index_in
from scalescope.analyze.ranks.groups import dim_lookup
from scalescope.analyze.ranks.summary_waits import summarised_steps
from scalescope.events import EventTable, Kind
from scalescope.events.tags import REDUCE_GRADS, ROOT_UNIT, UNSHARD, tag_kind, tag_unit

BUS_FACTORS: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "gather": lambda n: (n - 1) / n,
    "scatter": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "send": lambda n: 1.0,
    "recv": lambda n: 1.0,
}
"""busbw = algbw x factor(n), n ranks, as nccl-tests computes it (src/*.cu ``GetBw``).
Ops not listed (barrier) move no payload and have no bus bandwidth."""


def bus_factor(op: str, num_ranks: int) -> float | None:
    """The nccl-tests bus-bandwidth factor of ``op`` for ``num_ranks``; None if it has none."""
    factor = BUS_FACTORS.get(op)
    return factor(num_ranks) if factor is not None and num_ranks > 0 else None


@dataclass(frozen=True)
class OpTotals:
    """All completed calls of one op with one tag."""

    op: str
    tag: str
    num_ranks: int
    """Ranks that recorded this op and tag: the divisor of the per-rank figures."""
    calls: int
    """Completed calls summed over ranks."""
    calls_per_rank: float
    total_ms_per_rank: float
    nbytes_per_rank: float
    incomplete_calls: int
    calls_min: int = 0
    """Fewest completed calls of one rank (of the ranks that recorded the op)."""
    calls_max: int = 0
    """Most completed calls of one rank: differs from ``calls_min`` when ranks disagree."""
    """Calls that never completed (dur_ns == -1), summed over ranks; not in the times."""
    dim: str = ""
    """The mesh dimension (or role) of its groups (analyze/ranks/groups.py); "" when unknown."""


@dataclass(frozen=True)
class SizeStats:
    """Completed calls of one op with one message size (a row of an nccl-tests table)."""

    op: str
    nbytes: int
    num_ranks: int
    calls: int
    calls_per_rank: float
    time_avg_us: float
    """Mean time of one call over every call of every rank, issue to completion."""
    time_min_us: float
    time_max_us: float
    total_ms_per_rank: float
    algbw_gbps: float | None
    """nbytes / time_avg, GB/s with GB = 1e9 bytes; None when nbytes is 0."""
    busbw_gbps: float | None
    """algbw x bus factor of the op for world size ranks; None for ops without one."""
    calls_min: int = 0
    calls_max: int = 0
    group_ranks: int = 0
    """The ranks of its groups: the n of the bus-bandwidth factor (the world's for
    collectives over every rank)."""


@dataclass(frozen=True)
class TagPerStep:
    """Traffic of one tag per measured step and per rank, averaged over ranks."""

    tag: str
    num_ranks: int
    """Ranks with measured steps: the divisor."""
    nbytes_per_step: float
    calls_per_step: float
    ms_per_step: float = 0.0
    """Time in these collectives per step, issue to completion."""


@dataclass(frozen=True)
class UnitTraffic:
    """One FSDP unit's collectives per measured step and per rank (tags ``unshard:UNIT``
    and ``reduce_grads:UNIT``)."""

    unit: str
    gathers_per_step: float
    gathered_bytes_per_step: float
    gather_ms_per_step: float
    reductions_per_step: float
    reduced_bytes_per_step: float
    reduce_ms_per_step: float


@dataclass(frozen=True)
class IncompleteCalls:
    """Collectives one rank issued that never completed: where a hang or crash stopped it."""

    rank: int
    op: str
    tag: str
    calls: int
    first_seq: int
    """Lowest sequence number among them (-1 if none was recorded)."""
    first_step: int


@dataclass(frozen=True)
class CollectiveAnalysis:
    world_size: int
    """n of the bus factors (subgroups are not distinguished)."""
    num_ranks: int
    """Ranks that recorded any collective."""
    calls: int
    """Completed calls summed over ranks."""
    incomplete_calls: int
    ops: tuple[OpTotals, ...]
    """Largest total time first."""
    sizes: tuple[SizeStats, ...]
    """By op, then message size."""
    per_step: tuple[TagPerStep, ...]
    incomplete: tuple[IncompleteCalls, ...]
    windows: tuple[int, ...] = ()
    """The steps whose calls the tables hold where the run recorded its other steps as
    summaries (``--record summary``: every call's row only in the windows); () for a run
    recorded in full."""
    summarised_steps: int = 0
    """Steps recorded as summaries only, whose calls are not in the tables."""

    @property
    def units(self) -> tuple[UnitTraffic, ...]:
        """The FSDP units of ``per_step`` (``fsdp_units``): kept out of the report JSON,
        which holds their rows already."""
        return fsdp_units(self.per_step)


def _op_totals(done: EventTable, pending: EventTable, dims: dict[str, str]) -> list[OpTotals]:
    """Per op, tag and dimension (``dims``: group label -> dimension)."""
    lookup, found = dim_lookup(done.symbols, dims)  # one table, not a pass per group
    names = ["", *found]  # 0: a group ``dims`` does not name
    g = group_by(done.name, done.tag, lookup[done.group] + 1)
    calls, dur, nbytes = g.count(), g.sum(done.dur_ns), g.sum(done.nbytes)
    per_rank = rank_calls(g, done.rank)
    found = {(int(a), int(b), int(d)): i for i, (a, b, d) in enumerate(g.keys)}
    p = group_by(pending.name, pending.tag, lookup[pending.group] + 1)
    waiting = {
        (int(a), int(b), int(d)): int(c) for (a, b, d), c in zip(p.keys, p.count(), strict=True)
    }
    out = []
    for key in found.keys() | waiting.keys():
        name_id, tag_id, dim_id = key
        i = found.get(key)
        n = int(per_rank.ranks[i]) if i is not None else 0
        out.append(
            OpTotals(
                op=done.symbols[name_id],
                tag=done.symbols[tag_id],
                dim=names[dim_id],
                num_ranks=n,
                calls=int(calls[i]) if i is not None else 0,
                calls_per_rank=float(calls[i]) / n if n else 0.0,
                total_ms_per_rank=float(dur[i]) / 1e6 / n if n else 0.0,
                nbytes_per_rank=float(nbytes[i]) / n if n else 0.0,
                incomplete_calls=waiting.get(key, 0),
                calls_min=int(per_rank.fewest[i]) if i is not None else 0,
                calls_max=int(per_rank.most[i]) if i is not None else 0,
            )
        )
    return sorted(out, key=lambda o: (-o.total_ms_per_rank, o.op, o.tag, o.dim))


def _group_ranks(rows: EventTable) -> np.ndarray:
    """Per row, the number of ranks that recorded collectives on its group."""
    if len(rows) == 0:
        return np.zeros(0, dtype=np.int64)
    keys = group_by(rows.group, rows.rank).keys[:, 0]
    counts = np.bincount(keys, minlength=int(rows.group.max()) + 1)
    return counts[rows.group]


def _sizes(done: EventTable, world_size: int) -> list[SizeStats]:
    """Per op, message size and group size: the bus factor's n is the group's ranks (the
    world's where every rank recorded the group; a run of one rank's file keeps the
    world size)."""
    members = _group_ranks(done)
    if len(distinct(done.rank)) < world_size:
        members = np.where(members == len(distinct(done.rank)), world_size, members)
    g = group_by(done.name, done.nbytes, members)
    calls, total = g.count(), g.sum(done.dur_ns)
    low, high = g.min(done.dur_ns), g.max(done.dur_ns)
    per_rank = rank_calls(g, done.rank)
    out = []
    for i, (name_id, nbytes, group_ranks) in enumerate(g.keys.tolist()):
        op, n = done.symbols[name_id], int(per_rank.ranks[i])
        avg_ns = float(total[i]) / int(calls[i])
        algbw = nbytes / avg_ns if nbytes > 0 and avg_ns > 0 else None  # bytes/ns == GB/s
        factor = bus_factor(op, group_ranks)
        out.append(
            SizeStats(
                op=op, nbytes=nbytes, num_ranks=n, calls=int(calls[i]),
                calls_per_rank=int(calls[i]) / n, time_avg_us=avg_ns / 1e3,
                time_min_us=float(low[i]) / 1e3, time_max_us=float(high[i]) / 1e3,
                total_ms_per_rank=float(total[i]) / 1e6 / n, algbw_gbps=algbw,
                busbw_gbps=algbw * factor if algbw is not None and factor is not None else None,
                calls_min=int(per_rank.fewest[i]), calls_max=int(per_rank.most[i]),
                group_ranks=group_ranks,
            )
        )  # fmt: skip
    return sorted(out, key=lambda s: (s.op, s.nbytes, s.group_ranks))


def _per_step(done: EventTable, events: EventTable, warmup_steps: int) -> list[TagPerStep]:
    """Bytes and calls per measured step of each rank, averaged over ranks with such steps;
    on a run recorded as summaries, over its windows recorded in full."""
    steps = measured_steps(events, warmup_steps).rows
    summarised = summarised_steps(events)
    if len(summarised):
        steps = steps.select(~np.isin(steps.step, summarised))
    measured = distinct(step_key(steps.rank, steps.step))
    ranks, num_steps = np.unique(measured >> STEP_BITS, return_counts=True)
    if len(ranks) == 0:
        return []
    inside = slot_lookup(measured, done.rank, done.step) >= 0
    tag, rank = done.tag[inside], done.rank[inside]
    if len(tag) == 0:
        return []
    tags = np.flatnonzero(np.bincount(tag))  # symbol ids: small, non-negative
    cell = index_in(tags, tag) * len(ranks) + index_in(ranks, rank)
    shape = (len(tags), len(ranks))

    def per_step(weights: np.ndarray | None) -> np.ndarray:
        total = np.bincount(cell, weights=weights, minlength=len(tags) * len(ranks))
        return (total.reshape(shape) / num_steps).mean(axis=1)

    nbytes, calls = per_step(done.nbytes[inside].astype(np.float64)), per_step(None)
    ms = per_step(done.dur_ns[inside].astype(np.float64)) / 1e6
    out = [
        TagPerStep(
            tag=done.symbols[int(t)], num_ranks=len(ranks), nbytes_per_step=float(nbytes[i]),
            calls_per_step=float(calls[i]), ms_per_step=float(ms[i]),
        )
        for i, t in enumerate(tags)
    ]  # fmt: skip
    return sorted(out, key=lambda t: t.tag)


def _incomplete(pending: EventTable) -> list[IncompleteCalls]:
    g = group_by(pending.rank, pending.name, pending.tag)
    out = []
    for (rank, name_id, tag_id), rows in zip(g.keys.tolist(), g.rows_of(), strict=True):
        seqs = pending.seq[rows]
        valid = seqs[seqs >= 0]
        out.append(
            IncompleteCalls(
                rank=rank,
                op=pending.symbols[name_id],
                tag=pending.symbols[tag_id],
                calls=len(rows),
                first_seq=int(valid.min()) if len(valid) else -1,
                first_step=int(pending.step[rows].min()),
            )
        )
    return sorted(out, key=lambda i: (i.rank, i.op, i.tag))


def analyze_collectives(
    events: EventTable, world_size: int, warmup_steps: int, dims: dict[str, str] | None = None
) -> CollectiveAnalysis | None:
    """Collective statistics; None when no collective was recorded at all. ``dims``: group
    label -> mesh dimension or role (analyze/ranks/groups.py), for the per-op totals."""
    rows = events.of_kind(Kind.COLLECTIVE)
    if len(rows) == 0:
        return None
    done = rows.select(rows.dur_ns >= 0)
    pending = rows.select(rows.dur_ns < 0)
    summarised = summarised_steps(events)
    windows = distinct(rows.step[rows.step >= 0]) if len(summarised) else ()
    return CollectiveAnalysis(
        world_size=world_size,
        num_ranks=len(distinct(rows.rank)),
        calls=len(done),
        incomplete_calls=len(pending),
        ops=tuple(_op_totals(done, pending, dims or {})),
        sizes=tuple(_sizes(done, world_size)),
        per_step=tuple(_per_step(done, events, warmup_steps)),
        incomplete=tuple(_incomplete(pending)),
        windows=tuple(int(s) for s in windows),
        summarised_steps=len(summarised),
    )


def fsdp_units(per_step: tuple[TagPerStep, ...]) -> tuple[UnitTraffic, ...]:
    """Each FSDP unit's all-gathers and reduce-scatters per step, by name, the root last."""
    gathers: dict[str, TagPerStep] = {}
    reductions: dict[str, TagPerStep] = {}
    for t in per_step:
        unit = tag_unit(t.tag)
        if unit is not None and tag_kind(t.tag) == UNSHARD:
            gathers[unit] = t
        elif unit is not None and tag_kind(t.tag) == REDUCE_GRADS:
            reductions[unit] = t
    none = TagPerStep("", 0, 0.0, 0.0, 0.0)
    units = sorted(gathers.keys() | reductions.keys(), key=lambda u: (u == ROOT_UNIT, u))
    return tuple(
        UnitTraffic(
            unit=u,
            gathers_per_step=gathers.get(u, none).calls_per_step,
            gathered_bytes_per_step=gathers.get(u, none).nbytes_per_step,
            gather_ms_per_step=gathers.get(u, none).ms_per_step,
            reductions_per_step=reductions.get(u, none).calls_per_step,
            reduced_bytes_per_step=reductions.get(u, none).nbytes_per_step,
            reduce_ms_per_step=reductions.get(u, none).ms_per_step,
        )
        for u in units
    )
