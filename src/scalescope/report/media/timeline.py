"""A merged Chrome trace-event timeline of all ranks, on one clock, bounded by steps.

The JSON object form of the Trace Event Format, which Perfetto (ui.perfetto.dev) and
chrome://tracing load: one process per rank, tracks (threads) for steps, phases and
collectives, complete events (``"ph": "X"``) with ``ts``/``dur`` in microseconds.

Events of a track must nest or not overlap; asynchronous collectives (DDP's gradient
buckets) overlap each other, so each track is split into lanes ("collectives",
"collectives 2", ...) where no two events overlap.

Process ids are ``rank + 1``: Perfetto gives pid 0 (the Linux idle task) special handling
(google/perfetto#394), so no rank is put there; the process name and sort index carry the
rank.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np

from scalescope.events import EventTable, Kind, Run
from scalescope.events.tags import tag_unit

DEFAULT_NUM_STEPS = 10
"""Steps shown when none are asked for: the first measured ones after warm-up."""
PID_BASE = 1
"""pid = rank + PID_BASE (pid 0 is special in Perfetto)."""
TRACKS: dict[Kind, tuple[str, int, str]] = {
    Kind.STEP: ("steps", 1, "step"),
    Kind.PHASE: ("phases", 10, "phase"),
    Kind.COLLECTIVE: ("collectives", 100, "collective"),
}
"""kind -> (track name, tid of its first lane, event category)."""

TraceEvent = dict[str, Any]


def pid_of(rank: int) -> int:
    return rank + PID_BASE


def default_steps(
    events: EventTable, warmup_steps: int, num_steps: int = DEFAULT_NUM_STEPS
) -> range:
    """The first ``num_steps`` steps from the first one after warm-up that has any event.

    Falls back to the first recorded step when every event is in warm-up.
    """
    rows = events.kind != int(Kind.MEMORY)
    recorded = events.step[rows]
    if len(recorded) == 0:
        return range(0)
    after = recorded[recorded >= warmup_steps]
    first = int(after.min()) if len(after) else int(recorded.min())
    return range(first, first + num_steps)


def _lanes(starts: list[int], ends: list[int]) -> list[int]:
    """Greedy lane per event (in input order) so events of one lane never overlap."""
    lane_end: list[int] = []
    lanes = [0] * len(starts)
    for i in sorted(range(len(starts)), key=lambda j: (starts[j], -ends[j])):
        for lane, end in enumerate(lane_end):
            if end <= starts[i]:
                lanes[i] = lane
                lane_end[lane] = ends[i]
                break
        else:
            lanes[i] = len(lane_end)
            lane_end.append(ends[i])
    return lanes


def _hostname(run: Run, rank: int) -> str:
    meta = run.ranks.get(rank) or run.meta.ranks.get(str(rank))
    return meta.hostname if meta is not None else ""


def _args(rows: EventTable, i: int, kind: Kind) -> dict[str, Any]:
    args: dict[str, Any] = {"step": int(rows.step[i])}
    if kind == Kind.COLLECTIVE:
        symbols = rows.symbols
        args |= {
            "bytes": int(rows.nbytes[i]),
            "dtype": symbols[int(rows.dtype[i])],
            "group": symbols[int(rows.group[i])],
            "seq": int(rows.seq[i]),
            "tag": symbols[int(rows.tag[i])],
        }
        if rows.peer[i] >= 0:
            args["peer"] = int(rows.peer[i])
    elif kind == Kind.STEP:
        args["samples"] = int(rows.count[i])
    return args


def _track_events(rows: EventTable, kind: Kind, pid: int, ts_ns: np.ndarray) -> list[TraceEvent]:
    """Events of one rank and kind; ``ts_ns`` are the rows' start times on the trace clock."""
    _track, base_tid, cat = TRACKS[kind]
    done = [i for i in range(len(rows)) if rows.dur_ns[i] >= 0]
    starts = [int(ts_ns[i]) for i in done]
    lanes = _lanes(starts, [s + int(rows.dur_ns[i]) for s, i in zip(starts, done, strict=True)])
    out: list[TraceEvent] = []
    for i, lane in zip(done, lanes, strict=True):
        name = rows.symbols[int(rows.name[i])]
        if kind == Kind.STEP:
            name = f"step {int(rows.step[i])}"
        elif kind == Kind.COLLECTIVE and (unit := tag_unit(rows.symbols[int(rows.tag[i])])):
            name = f"{name} {unit}"  # an FSDP unit's all-gather or reduce-scatter
        out.append(
            {
                "name": name,
                "cat": cat,
                "ph": "X",
                "pid": pid,
                "tid": base_tid + lane,
                "ts": round(float(ts_ns[i]) / 1e3, 3),
                "dur": round(float(rows.dur_ns[i]) / 1e3, 3),
                "args": _args(rows, i, kind),
            }
        )
    for i in range(len(rows)):
        if rows.dur_ns[i] < 0 and kind == Kind.COLLECTIVE:
            name = f"{rows.symbols[int(rows.name[i])]} (never completed)"
            out.append(
                {
                    "name": name,
                    "cat": cat,
                    "ph": "i",
                    "s": "t",
                    "pid": pid,
                    "tid": base_tid,
                    "ts": round(float(ts_ns[i]) / 1e3, 3),
                    "args": _args(rows, i, kind),
                }
            )
    return out


def _thread_metadata(pid: int, events: list[TraceEvent]) -> list[TraceEvent]:
    """thread_name and thread_sort_index for every tid used in ``events``."""
    out: list[TraceEvent] = []
    for tid in sorted({int(e["tid"]) for e in events}):
        track, base, _ = next(
            t for t in sorted(TRACKS.values(), key=lambda t: -t[1]) if tid >= t[1]
        )
        name = track if tid == base else f"{track} {tid - base + 1}"
        out.append(
            {"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}
        )
        out.append(
            {
                "name": "thread_sort_index",
                "ph": "M",
                "pid": pid,
                "tid": tid,
                "args": {"sort_index": tid},
            }
        )
    return out


def _process_metadata(run: Run, rank: int) -> list[TraceEvent]:
    host = _hostname(run, rank)
    label = f"rank {rank} ({host})" if host else f"rank {rank}"
    pid = pid_of(rank)
    return [
        {"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": label}},
        {
            "name": "process_sort_index",
            "ph": "M",
            "pid": pid,
            "tid": 0,
            "args": {"sort_index": rank},
        },
    ]


def _selected(run: Run, steps: range, ranks: Collection[int] | None) -> EventTable:
    events = run.events
    keep = np.isin(events.kind, [int(k) for k in TRACKS])
    keep &= (events.step >= steps.start) & (events.step < steps.stop)
    if steps.step != 1:
        keep &= np.isin(events.step, np.asarray(steps, dtype=np.int64))
    if ranks is not None:
        keep &= np.isin(events.rank, np.asarray(list(ranks), dtype=np.int64))
    return events.select(keep)


def _aligned_ns(rows: EventTable, offsets_ns: dict[int, int]) -> np.ndarray:
    offsets = np.zeros(len(rows), dtype=np.int64)
    for rank, offset in offsets_ns.items():
        offsets[rows.rank == rank] = offset
    return rows.start_ns.astype(np.int64) + offsets


def chrome_trace(
    run: Run,
    offsets_ns: dict[int, int] | None = None,
    steps: range | None = None,
    ranks: Collection[int] | None = None,
    windows: Collection[int] = (),
) -> dict[str, Any]:
    """The trace of ``steps`` (default: the first 10 measured steps) of ``ranks`` (default:
    every rank that recorded events or wrote a meta file). ``windows``: on a run recorded as
    summaries, the steps recorded in full (``CollectiveAnalysis.windows``); the trace's other
    steps have no calls to draw, and its metadata's ``summarised_steps`` lists them.

    ``offsets_ns[rank]`` (``analyze.ranks.clocks.clock_offsets``) is added to the rank's
    ``start_ns`` to put it on the common clock (missing ranks: 0); times are then shifted so
    the earliest event is at 0.
    """
    offsets_ns = offsets_ns or {}
    if steps is None:
        steps = default_steps(run.events, run.meta.warmup_steps)
    rows = _selected(run, steps, ranks)
    aligned = _aligned_ns(rows, offsets_ns)
    origin = int(aligned.min()) if len(rows) else 0
    if ranks is None:
        ranks = set(run.events.ranks()) | set(run.ranks)
    ranks = sorted(ranks)
    trace_events: list[TraceEvent] = []
    for rank in ranks:
        pid, mine = pid_of(rank), rows.rank == rank
        per_rank: list[TraceEvent] = []
        for kind in TRACKS:
            sel = mine & (rows.kind == int(kind))
            per_rank += _track_events(rows.select(sel), kind, pid, aligned[sel] - origin)
        trace_events += _process_metadata(run, rank) + _thread_metadata(pid, per_rank) + per_rank
    drawn = rows.step[rows.kind == int(Kind.STEP)]
    summarised = sorted(set(drawn.tolist()) - set(windows)) if windows else []
    metadata = {
        "tool": "scalescope",
        "run_id": run.meta.run_id,
        "steps": [steps.start, steps.stop],
        "summarised_steps": summarised,
        "clock": "rank 0's perf_counter_ns; ts = (start_ns + offset_ns - origin_ns) / 1000",
        "origin_ns": origin,
        "offsets_ns": {str(r): int(offsets_ns.get(r, 0)) for r in ranks},
        "pid": f"rank + {PID_BASE}",
    }
    return {"traceEvents": trace_events, "displayTimeUnit": "ms", "metadata": metadata}
