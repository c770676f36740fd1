"""Collectives by op and by message size, with nccl-tests algbw/busbw, and traffic per step.

Counts and totals are per rank: every rank of a data-parallel job issues the same
collectives, so one all_reduce recorded on 4 ranks is 1 call of 4 participants, not 4 calls.
Each row says over how many ranks it was averaged (``num_ranks``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from scalescope.analyze.steps import measured_steps
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


def _groups(*columns: np.ndarray) -> list[tuple[tuple[int, ...], np.ndarray]]:
    """Distinct combinations of integer columns, each with its row mask."""
    if len(columns[0]) == 0:
        return []
    keys = np.stack([np.asarray(c, dtype=np.int64) for c in columns], axis=1)
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    return [(tuple(int(v) for v in key), inverse == i) for i, key in enumerate(uniq)]


def calls_range(rows: EventTable) -> dict[str, int]:
    """Fewest and most calls of one rank among the ranks in ``rows``."""
    if len(rows) == 0:
        return {"calls_min": 0, "calls_max": 0}
    _, counts = np.unique(rows.rank, return_counts=True)
    return {"calls_min": int(counts.min()), "calls_max": int(counts.max())}


def _op_totals(done: EventTable, pending: EventTable) -> list[OpTotals]:
    out = []
    keys = {k for k, _ in _groups(done.name, done.tag)} | {
        k for k, _ in _groups(pending.name, pending.tag)
    }
    for name_id, tag_id in keys:
        rows = done.select((done.name == name_id) & (done.tag == tag_id))
        n = len(np.unique(rows.rank))
        incomplete = int(((pending.name == name_id) & (pending.tag == tag_id)).sum())
        out.append(
            OpTotals(
                op=done.symbols[name_id],
                tag=done.symbols[tag_id],
                num_ranks=n,
                calls=len(rows),
                calls_per_rank=len(rows) / n if n else 0.0,
                total_ms_per_rank=float(rows.dur_ns.sum()) / 1e6 / n if n else 0.0,
                nbytes_per_rank=float(rows.nbytes.sum()) / n if n else 0.0,
                incomplete_calls=incomplete,
                **calls_range(rows),
            )
        )
    return sorted(out, key=lambda o: (-o.total_ms_per_rank, o.op, o.tag))


def _size_stats(op: str, nbytes: int, rows: EventTable, world_size: int) -> SizeStats:
    n = len(np.unique(rows.rank))
    dur = rows.dur_ns.astype(np.float64)
    avg_ns = float(dur.mean())
    algbw = nbytes / avg_ns if nbytes > 0 and avg_ns > 0 else None  # bytes/ns == GB/s
    factor = bus_factor(op, world_size)
    return SizeStats(
        op=op,
        nbytes=nbytes,
        num_ranks=n,
        calls=len(rows),
        calls_per_rank=len(rows) / n,
        time_avg_us=avg_ns / 1e3,
        time_min_us=float(dur.min()) / 1e3,
        time_max_us=float(dur.max()) / 1e3,
        total_ms_per_rank=float(dur.sum()) / 1e6 / n,
        algbw_gbps=algbw,
        busbw_gbps=algbw * factor if algbw is not None and factor is not None else None,
        **calls_range(rows),
    )


def _sizes(done: EventTable, world_size: int) -> list[SizeStats]:
    out = [
        _size_stats(done.symbols[name_id], nbytes, done.select(mask), world_size)
        for (name_id, nbytes), mask in _groups(done.name, done.nbytes)
    ]
    return sorted(out, key=lambda s: (s.op, s.nbytes))


def _per_step(done: EventTable, events: EventTable, warmup_steps: int) -> list[TagPerStep]:
    """Bytes and calls per measured step of each rank, averaged over ranks with such steps."""
    steps = measured_steps(events, warmup_steps).rows
    ranks = [int(r) for r in np.unique(steps.rank)]
    in_step = np.zeros(len(done), dtype=bool)
    for r in ranks:
        mine = done.rank == r
        in_step |= mine & np.isin(done.step, steps.step[steps.rank == r])
    rows = done.select(in_step)
    out = []
    for tag_id in np.unique(rows.tag):
        tagged = rows.select(rows.tag == tag_id)
        nbytes, calls, ms = [], [], []
        for r in ranks:
            num_steps = len(np.unique(steps.step[steps.rank == r]))
            mine = tagged.rank == r
            nbytes.append(float(tagged.nbytes[mine].sum()) / num_steps)
            calls.append(float(mine.sum()) / num_steps)
            ms.append(float(tagged.dur_ns[mine].sum()) / 1e6 / num_steps)
        out.append(
            TagPerStep(
                tag=rows.symbols[int(tag_id)],
                num_ranks=len(ranks),
                nbytes_per_step=float(np.mean(nbytes)),
                calls_per_step=float(np.mean(calls)),
                ms_per_step=float(np.mean(ms)),
            )
        )
    return sorted(out, key=lambda t: t.tag)


def _incomplete(pending: EventTable) -> list[IncompleteCalls]:
    out = []
    for (rank, name_id, tag_id), mask in _groups(pending.rank, pending.name, pending.tag):
        seqs = pending.seq[mask]
        valid = seqs[seqs >= 0]
        out.append(
            IncompleteCalls(
                rank=rank,
                op=pending.symbols[name_id],
                tag=pending.symbols[tag_id],
                calls=int(mask.sum()),
                first_seq=int(valid.min()) if len(valid) else -1,
                first_step=int(pending.step[mask].min()),
            )
        )
    return sorted(out, key=lambda i: (i.rank, i.op, i.tag))


def analyze_collectives(
    events: EventTable, world_size: int, warmup_steps: int
) -> CollectiveAnalysis | None:
    """Collective statistics; None when no collective was recorded at all."""
    rows = events.of_kind(Kind.COLLECTIVE)
    if len(rows) == 0:
        return None
    done = rows.select(rows.dur_ns >= 0)
    pending = rows.select(rows.dur_ns < 0)
    return CollectiveAnalysis(
        world_size=world_size,
        num_ranks=len(np.unique(rows.rank)),
        calls=len(done),
        incomplete_calls=len(pending),
        ops=tuple(_op_totals(done, pending)),
        sizes=tuple(_sizes(done, world_size)),
        per_step=tuple(_per_step(done, events, warmup_steps)),
        incomplete=tuple(_incomplete(pending)),
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
