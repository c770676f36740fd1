"""A run's tables as Arrow: steps, phases, collectives, waits and ranks (docs/api.md).

Each is built from the event table's numpy columns and the analysis' results at once (sorts,
``bincount`` and segment reductions; no Python loop over rows): a 1,024-rank run has tens of
millions of rows. String columns are dictionary-encoded (pandas categoricals), holding only
the strings their rows use. Times are in ns on each rank's own clock unless a name says
otherwise (``waits``' figures are on the common clock of the cross-rank analysis).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from scalescope.analyze import RunAnalysis
from scalescope.analyze.columns.slot_index import measured_steps, slot_lookup, step_key
from scalescope.analyze.columns.sorting import packed
from scalescope.analyze.cross_rank import TIE_FLOOR_NS
from scalescope.analyze.ranks.clocks import tie_tolerance_ns
from scalescope.analyze.ranks.matching import match_collectives
from scalescope.analyze.steps.phase_cpu import cpu_of_rows
from scalescope.analyze.summary import without_pauses
from scalescope.events import PHASES, EventTable, Kind, Run, SymbolTable

STEP_PHASE_COLUMNS = tuple(f"{p}_ns" for p in PHASES)
"""``steps``' phase columns, in the order a step runs them."""


def strings(ids: np.ndarray, symbols: SymbolTable) -> pa.DictionaryArray:
    """Symbol ids as an Arrow dictionary of the strings they use (one gather, no sort)."""
    n = len(symbols.strings)
    used = np.flatnonzero(np.bincount(ids, minlength=n)) if len(ids) else np.zeros(0, np.int64)
    remap = np.full(n, -1, dtype=np.int32)
    remap[used] = np.arange(len(used), dtype=np.int32)
    dictionary = pa.array([symbols[int(i)] for i in used], type=pa.string())
    return pa.DictionaryArray.from_arrays(pa.array(remap[ids]), dictionary)


def _step_slots(events: EventTable) -> tuple[np.ndarray, EventTable]:
    """Sorted unique (rank, step) keys of the STEP rows, and the first STEP row of each."""
    rows = events.of_kind(Kind.STEP)
    keys, first = np.unique(step_key(rows.rank, rows.step), return_index=True)
    return keys, rows.select(first)


def measured_keys(run: Run, analysis: RunAnalysis) -> np.ndarray:
    """Sorted ``step_key`` of every (rank, step) the analysis measured: past warm-up (or all
    steps when none is), not a pause."""
    events = without_pauses(run, analysis.pauses).events
    rows = measured_steps(events, run.meta.warmup_steps).rows
    return np.unique(step_key(rows.rank, rows.step))


def contained(sorted_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Per key: whether it is one of ``sorted_keys`` (ascending, unique)."""
    if len(sorted_keys) == 0:
        return np.zeros(len(keys), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
    return sorted_keys[at] == keys


def steps_table(run: Run, analysis: RunAnalysis) -> pa.Table:
    """One row per rank and recorded step, sorted by rank then step: the STEP row's start and
    duration, each phase's summed rows, ``other_ns`` (the step outside every phase), samples,
    and ``measured`` (what the report's step statistics are taken over)."""
    keys, rows = _step_slots(run.events)
    phases = run.events.of_kind(Kind.PHASE)
    slot = slot_lookup(keys, phases.rank, phases.step)
    dur = rows.dur_ns.astype(np.int64)
    covered = np.zeros(len(keys), dtype=np.int64)
    columns: dict[str, pa.Array] = {
        "rank": pa.array(rows.rank, pa.int32()),
        "step": pa.array(rows.step, pa.int32()),
        "start_ns": pa.array(rows.start_ns, pa.int64()),
        "dur_ns": pa.array(dur),
    }
    for name, column in zip(PHASES, STEP_PHASE_COLUMNS, strict=True):
        mask = (slot >= 0) & phases.where("name", name)
        sums = np.bincount(slot[mask], weights=phases.dur_ns[mask], minlength=len(keys))
        columns[column] = pa.array(np.rint(sums).astype(np.int64))
        covered += np.rint(sums).astype(np.int64)
    columns["other_ns"] = pa.array(np.maximum(dur - covered, 0))
    columns["samples"] = pa.array(rows.count, pa.int64())
    columns["measured"] = pa.array(contained(measured_keys(run, analysis), keys))
    return pa.table(columns)


def _phase_order(symbols: SymbolTable) -> np.ndarray:
    """Per symbol id: its sort position, PHASES in the order a step runs them, then by name."""
    names = symbols.strings
    known = {p: i for i, p in enumerate(PHASES)}
    by_name = sorted(range(len(names)), key=lambda i: (known.get(names[i], len(PHASES)), names[i]))
    order = np.empty(len(names), dtype=np.int64)
    order[by_name] = np.arange(len(names))
    return order


def phases_table(run: Run) -> pa.Table:
    """Long form: one row per rank, step and phase name (eval and checkpoint too), the
    durations of its rows summed, sorted by rank, step, then phase in the order a step runs
    them."""
    rows = run.events.of_kind(Kind.PHASE)
    if len(rows) == 0:
        return _empty(PHASES_SCHEMA)
    position = _phase_order(rows.symbols)[rows.name]
    key = packed([rows.rank, rows.step, position])
    if key is None:
        raise ValueError("phase rows' rank and step numbers are too far apart to sort")
    order = np.argsort(key, kind="stable")
    key = key[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    first = order[starts]
    process, thread = (c[order] for c in cpu_of_rows(run.events, rows))

    def cpu_sum(values: np.ndarray) -> pa.Array:
        """Summed per group; null where a row of it has no CPU time."""
        missing = np.add.reduceat((values < 0).astype(np.int64), starts) > 0
        return pa.array(np.add.reduceat(np.maximum(values, 0), starts), pa.int64(), mask=missing)

    return pa.table(
        {
            "rank": pa.array(rows.rank[first], pa.int32()),
            "step": pa.array(rows.step[first], pa.int32()),
            "phase": strings(rows.name[first], rows.symbols),
            "dur_ns": pa.array(np.add.reduceat(rows.dur_ns[order], starts), pa.int64()),
            "rows": pa.array(np.diff(np.r_[starts, len(order)]), pa.int64()),
            "cpu_ns": cpu_sum(process),
            "thread_cpu_ns": cpu_sum(thread),
        }
    )


def collectives_table(run: Run) -> pa.Table:
    """One row per rank and collective call as recorded (each rank's calls in the order it
    issued them); ``dur_ns`` is null for a call that never completed."""
    rows = run.events.of_kind(Kind.COLLECTIVE)
    return pa.table(
        {
            "rank": pa.array(rows.rank, pa.int32()),
            "step": pa.array(rows.step, pa.int32()),
            "op": strings(rows.name, rows.symbols),
            "group": strings(rows.group, rows.symbols),
            "seq": pa.array(rows.seq, pa.int64(), mask=rows.seq < 0),
            "tag": strings(rows.tag, rows.symbols),
            "dtype": strings(rows.dtype, rows.symbols),
            "nbytes": pa.array(rows.nbytes, pa.int64()),
            "elements": pa.array(rows.count, pa.int64()),
            "start_ns": pa.array(rows.start_ns, pa.int64()),
            "dur_ns": pa.array(rows.dur_ns, pa.int64(), mask=rows.dur_ns < 0),
        }
    )


def waits_table(run: Run, analysis: RunAnalysis) -> pa.Table:
    """One row per matched collective instance and rank, as the cross-rank analysis matches
    them (analyze/ranks/matching.py): sorted by instance, then arrival (the last to arrive last).
    Empty with fewer than two ranks or no sequence numbers."""
    cross = analysis.cross_rank
    if cross is None:
        return _empty(WAITS_SCHEMA)
    measured = without_pauses(run, analysis.pauses)
    m = match_collectives(
        measured.events, cross.clocks, tie_tolerance_ns(cross.clocks, TIE_FLOOR_NS)
    )
    if m is None:
        return _empty(WAITS_SCHEMA)
    in_step = contained(measured_keys(run, analysis), step_key(m.rank, m.step))
    inst_measured = np.minimum.reduceat(in_step.astype(np.int8), m.first) > 0
    symbols = run.events.symbols
    return pa.table(
        {
            "instance": pa.array(m.inst, pa.int64()),
            "op": strings(m.op[m.inst], symbols),
            "tag": strings(m.inst_tag[m.inst], symbols),
            "nbytes": pa.array(m.nbytes[m.inst], pa.int64()),
            "rank": pa.array(m.rank, pa.int32()),
            "step": pa.array(m.step, pa.int32()),
            "wait_ns": pa.array(m.wait_ns, pa.int64()),
            "transfer_ns": pa.array(m.transfer_ns, pa.int64()),
            "skew_ns": pa.array(m.skew_ns[m.inst], pa.int64()),
            "last": pa.array(m.last_rank[m.inst] == m.rank),
            "measured": pa.array(inst_measured[m.inst]),
        }
    )


def ranks_table(analysis: RunAnalysis, steps: pa.Table) -> pa.Table:
    """One row per rank of the world: how it ended (analysis), its measured steps, samples
    and mean step from ``steps``, and its waiting, busy time and lateness per measured step
    (the cross-rank analysis; null with fewer than two ranks)."""
    world = np.array([r.rank for r in analysis.ranks], dtype=np.int64)
    measured = steps.column("measured").to_numpy()
    rank = steps.column("rank").to_numpy()[measured].astype(np.int64)
    n = int(max(world.max(initial=-1), rank.max(initial=-1))) + 1
    count = np.bincount(rank, minlength=n)[world]
    dur = steps.column("dur_ns").to_numpy()[measured]
    total_ns = np.bincount(rank, weights=dur, minlength=n)[world]
    samples = np.bincount(rank, weights=steps.column("samples").to_numpy()[measured], minlength=n)
    by_rank = {s.rank: s for s in analysis.steps.ranks} if analysis.steps else {}
    cross = {w.rank: w for w in analysis.cross_rank.ranks} if analysis.cross_rank else {}

    def figure(source: dict, name: str) -> pa.Array:
        return pa.array([getattr(source[r], name, None) if r in source else None for r in world],
                        pa.float64())  # fmt: skip

    return pa.table(
        {
            "rank": pa.array(world, pa.int32()),
            "host": pa.array([r.hostname for r in analysis.ranks], pa.string()),
            "status": pa.array([r.status for r in analysis.ranks], pa.string()),
            "exit_code": pa.array([r.exit_code for r in analysis.ranks], pa.int64()),
            "steps_reported": pa.array([r.steps for r in analysis.ranks], pa.int64()),
            "measured_steps": pa.array(count, pa.int64()),
            "samples": pa.array(samples[world].astype(np.int64), pa.int64()),
            "mean_step_ms": pa.array(total_ns / np.maximum(count, 1) / 1e6, mask=count == 0),
            "samples_per_s": figure(by_rank, "samples_per_s"),
            "wait_ms_per_step": figure(cross, "wait_ms_per_step"),
            "busy_ms_per_step": figure(cross, "busy_ms_per_step"),
            "lateness_ms_per_step": figure(cross, "lateness_ms_per_step"),
        }
    )


PHASES_SCHEMA = pa.schema(
    [("rank", pa.int32()), ("step", pa.int32()), ("phase", pa.dictionary(pa.int32(), pa.string())),
     ("dur_ns", pa.int64()), ("rows", pa.int64()), ("cpu_ns", pa.int64()),
     ("thread_cpu_ns", pa.int64())]
)  # fmt: skip
WAITS_SCHEMA = pa.schema(
    [("instance", pa.int64()), ("op", pa.dictionary(pa.int32(), pa.string())),
     ("tag", pa.dictionary(pa.int32(), pa.string())), ("nbytes", pa.int64()),
     ("rank", pa.int32()), ("step", pa.int32()), ("wait_ns", pa.int64()),
     ("transfer_ns", pa.int64()), ("skew_ns", pa.int64()), ("last", pa.bool_()),
     ("measured", pa.bool_())]
)  # fmt: skip


def _empty(schema: pa.Schema) -> pa.Table:
    return schema.empty_table()
