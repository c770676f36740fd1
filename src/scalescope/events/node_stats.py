"""A node's summary (events/node_file.py) from its ranks' rows: what a node relay computes as
a window ends, and what ``build_node_files`` writes from the node's rank files.

``collective_stats`` is the one reduction: every writer of ``colls`` rows (the relay, the
builder, the synthetic generator's test of its own fast path) goes through it or is checked
against it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from scalescope.events.files import events_path, node_file_path
from scalescope.events.node_file import (
    COLLS_SCHEMA,
    STEPS_SCHEMA,
    NodeEntry,
    NodeFileError,
    NodeManifest,
    write_manifest,
    write_node_table,
)
from scalescope.events.reader import read_event_stream
from scalescope.events.run import load_meta
from scalescope.events.schema import WAIT_PREFIX, Kind

WINDOW_STEPS = 500
"""Steps a node file holds by default (a relay's window)."""


@dataclass(frozen=True)
class Calls:
    """A node's completed collective calls, one entry per call (all arrays of one length)."""

    rank: np.ndarray
    step: np.ndarray
    group: np.ndarray
    """Codes into ``groups``."""
    op: np.ndarray
    """Codes into ``ops``."""
    nbytes: np.ndarray
    dur_ns: np.ndarray
    """Issue to completion."""
    arrive_ns: np.ndarray
    """Arrival (issue, or the previous call on the group's completion) less the step start."""
    transfer_ns: np.ndarray
    """Completion less arrival."""
    groups: Sequence[str]
    ops: Sequence[str]


def size_class(nbytes: np.ndarray) -> np.ndarray:
    """floor(log2(bytes)), exactly for integers; -1 for no bytes."""
    exponent = np.frexp(np.maximum(nbytes, 1).astype(np.float64))[1] - 1
    return np.where(nbytes > 0, exponent, -1).astype(np.int8)


def _combos(c: Calls, cls: np.ndarray) -> tuple[np.ndarray, list[tuple[str, str, int]]]:
    """Per call, the rank of its (group, op, class) among the node's combinations in label
    order, and those combinations."""
    raw = (c.group.astype(np.int64) * len(c.ops) + c.op) * 256 + (cls.astype(np.int64) + 1)
    distinct, inverse = np.unique(raw, return_inverse=True)
    labels = [(c.groups[int(r // 256) // len(c.ops)], c.ops[int(r // 256) % len(c.ops)],
               int(r % 256) - 1) for r in distinct]  # fmt: skip
    order = sorted(range(len(labels)), key=labels.__getitem__)
    place = np.empty(len(order), np.int64)
    place[order] = np.arange(len(order))
    return place[inverse.ravel()], [labels[i] for i in order]


def collective_stats(c: Calls) -> pa.Table:
    """The ``colls`` rows of ``c``, ordered by step, group, op and size class."""
    if len(c.rank) == 0:
        return COLLS_SCHEMA.empty_table()
    cls = size_class(c.nbytes)
    combo, labels = _combos(c, cls)
    key = c.step.astype(np.int64) * len(labels) + combo
    order = np.lexsort((c.rank, -c.arrive_ns, key))
    key, rank = key[order], c.rank[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    first = key[starts]
    pairs = np.unique(key * (int(rank.max()) + 1) + rank) // (int(rank.max()) + 1)
    ranks = np.diff(np.r_[np.searchsorted(pairs, first), len(pairs)])

    def red(ufunc: np.ufunc, values: np.ndarray) -> np.ndarray:
        return ufunc.reduceat(values[order], starts)

    combo_of = first % len(labels)
    cols = {
        "step": (first // len(labels)).astype(np.int32),
        "group": [labels[i][0] for i in combo_of],
        "op": [labels[i][1] for i in combo_of],
        "size_class": np.array([labels[i][2] for i in combo_of], np.int8),
        "ranks": ranks.astype(np.int32),
        "calls": np.diff(np.r_[starts, len(key)]).astype(np.int32),
        "bytes": red(np.add, c.nbytes.astype(np.int64)),
        "call_sum_ns": red(np.add, c.dur_ns.astype(np.int64)),
        "call_max_ns": red(np.maximum, c.dur_ns.astype(np.int64)),
        "transfer_min_ns": red(np.minimum, c.transfer_ns.astype(np.int64)),
        "arrive_min_ns": red(np.minimum, c.arrive_ns.astype(np.int64)),
        "arrive_max_ns": c.arrive_ns[order][starts].astype(np.int64),
        "arrive_sum_ns": red(np.add, c.arrive_ns.astype(np.int64)),
        "last_rank": rank[starts].astype(np.int32),
    }
    return pa.table({f.name: pa.array(cols[f.name], f.type) for f in COLLS_SCHEMA},
                    schema=COLLS_SCHEMA)  # fmt: skip


def summarised_rows(t: pa.Table, kind: np.ndarray) -> np.ndarray:
    """The SUMMARY rows of collectives (``--record summary``; not the waits on a send or
    recv), as a mask of ``t``'s rows."""
    summary = kind == int(Kind.SUMMARY)
    if not summary.any():
        return summary
    waits = pc.starts_with(t.column("name"), WAIT_PREFIX).to_numpy(zero_copy_only=False)
    return summary & ~waits


def folded_calls(col: dict[str, np.ndarray], rows: np.ndarray) -> dict[str, np.ndarray]:
    """SUMMARY rows (``rows``, a mask of ``col``'s) as their calls, each one of its row's
    ``count`` calls at the row's means (as analyze/ranks/summary_waits.py takes them): its
    bytes and time split evenly (the remainder on the first calls, so that sums are exact),
    its arrival the mean offset from the step's start, its transfer its time. ``row``: each
    call's row among ``rows``."""
    count = np.maximum(col["count"][rows].astype(np.int64), 1)
    row = np.repeat(np.arange(len(count)), count)
    nth = np.arange(len(row)) - np.r_[0, np.cumsum(count)[:-1]][row]

    def split(name: str) -> np.ndarray:
        each, left = np.divmod(col[name][rows].astype(np.int64), count)
        return each[row] + (nth < left[row])

    dur = split("dur_ns")
    return {"step": col["step"][rows][row], "nbytes": split("nbytes"), "dur_ns": dur,
            "arrive_ns": split("start_ns"), "transfer_ns": dur, "row": row}  # fmt: skip


@dataclass(frozen=True)
class RankRows:
    """One rank's step rows and completed calls, from its rank file."""

    steps: pa.Table
    calls: dict[str, np.ndarray]


def _arrivals(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Each call's arrival: its issue, or its previous call on the group's completion."""
    order = np.lexsort((np.arange(len(group)), group))
    g, s, e = group[order], start[order], end[order]
    prev = np.r_[np.iinfo(np.int64).min, e[:-1]]
    prev[np.r_[True, g[1:] != g[:-1]]] = np.iinfo(np.int64).min
    arrive = np.empty_like(start)
    arrive[order] = np.maximum(s, prev)
    return arrive


def rank_rows(path: Path, rank: int) -> RankRows:
    """The rank's steps (``STEPS_SCHEMA``) and its calls of completed steps, completed."""
    read = read_event_stream(path)
    if read.problem is not None and read.table.num_rows == 0:
        raise NodeFileError(f"{path}: {read.problem}")
    t = read.table
    kind = t.column("kind").to_numpy()
    col = {n: t.column(n).to_numpy() for n in ("step", "start_ns", "dur_ns", "nbytes", "count")}
    is_step = kind == int(Kind.STEP)
    steps = pa.table({"rank": pa.array(np.full(int(is_step.sum()), rank, np.int32)),
                      "step": col["step"][is_step], "start_ns": col["start_ns"][is_step],
                      "dur_ns": col["dur_ns"][is_step], "samples": col["count"][is_step]},
                     schema=STEPS_SCHEMA)  # fmt: skip
    is_call = kind == int(Kind.COLLECTIVE)
    group = np.array(t.column("group").to_pylist(), dtype=object)[is_call]
    name = np.array(t.column("name").to_pylist(), dtype=object)[is_call]
    start, dur = col["start_ns"][is_call], col["dur_ns"][is_call]
    done = dur >= 0
    _, gcode = np.unique(group.astype(str), return_inverse=True)
    arrive = _arrivals(gcode.ravel(), start, np.where(done, start + dur, start))
    step_of = col["step"][is_call]
    step_starts = dict(zip(steps.column("step").to_pylist(),
                           steps.column("start_ns").to_pylist(), strict=True))  # fmt: skip
    known = np.array([s in step_starts for s in step_of.tolist()], dtype=bool)
    keep = done & known
    base = np.array([step_starts.get(s, 0) for s in step_of[keep].tolist()], np.int64)
    calls = {"step": step_of[keep], "group": group[keep], "op": name[keep],
             "nbytes": col["nbytes"][is_call][keep], "dur_ns": dur[keep],
             "arrive_ns": arrive[keep] - base,
             "transfer_ns": start[keep] + dur[keep] - arrive[keep]}  # fmt: skip
    return RankRows(steps, with_folded(calls, t, kind, col, step_starts))


def with_folded(
    calls: dict[str, np.ndarray],
    t: pa.Table,
    kind: np.ndarray,
    col: dict[str, np.ndarray],
    step_starts: dict[int, int],
) -> dict[str, np.ndarray]:
    """``calls`` and the calls of the rank's steps recorded as summaries only (a window step
    is summarised as well: its calls are counted once, from their own rows)."""
    rows = summarised_rows(t, kind)
    if not rows.any():
        return calls
    folded = folded_calls(col, rows)
    keep = ~np.isin(folded["step"], calls["step"])
    keep &= np.array([s in step_starts for s in folded["step"].tolist()], dtype=bool)
    at = np.flatnonzero(rows)[folded["row"][keep]]
    group = np.array(t.column("group").take(pa.array(at)).to_pylist(), dtype=object)
    name = np.array(t.column("name").take(pa.array(at)).to_pylist(), dtype=object)
    more = {"group": group, "op": name, **{n: folded[n][keep] for n in
            ("step", "nbytes", "dur_ns", "arrive_ns", "transfer_ns")}}  # fmt: skip
    return {n: np.concatenate([calls[n], more[n].astype(calls[n].dtype)]) for n in calls}


def node_calls(rows: dict[int, RankRows]) -> Calls:
    """The node's calls, its ranks' together, with group and op labels coded."""
    ranks = [np.full(len(r.calls["step"]), k, np.int32) for k, r in rows.items()]
    cat = {n: np.concatenate([r.calls[n] for r in rows.values()]) for n in
           ("step", "group", "op", "nbytes", "dur_ns", "arrive_ns", "transfer_ns")}  # fmt: skip
    groups, gcode = np.unique(cat["group"].astype(str), return_inverse=True)
    ops, ocode = np.unique(cat["op"].astype(str), return_inverse=True)
    return Calls(np.concatenate(ranks), cat["step"], gcode.ravel(), ocode.ravel(),
                 cat["nbytes"], cat["dur_ns"], cat["arrive_ns"], cat["transfer_ns"],
                 [str(g) for g in groups], [str(o) for o in ops])  # fmt: skip


def _window(c: Calls, first: int, last: int) -> Calls:
    keep = (c.step >= first) & (c.step < last)
    return Calls(c.rank[keep], c.step[keep], c.group[keep], c.op[keep], c.nbytes[keep],
                 c.dur_ns[keep], c.arrive_ns[keep], c.transfer_ns[keep], c.groups,
                 c.ops)  # fmt: skip


def build_node_files(
    run_dir: Path,
    entry: NodeEntry,
    windows: Sequence[int],
    window_steps: int,
    out: Path | None = None,
) -> list[Path]:
    """The node's files of every window, from its ranks' rank files (what the node relay
    writes live), into ``out``'s node_events (default: the run's): the paths written."""
    rows = {r: rank_rows(events_path(run_dir, r), r) for r in entry.ranks}
    steps = pa.concat_tables([r.steps for r in rows.values()])
    order = np.lexsort((steps.column("rank").to_numpy(), steps.column("step").to_numpy()))
    steps = steps.take(pa.array(order))
    calls = node_calls(rows)
    step_col = steps.column("step").to_numpy()
    written = []
    for first in windows:
        last = first + window_steps
        in_window = steps.filter(pa.array((step_col >= first) & (step_col < last)))
        colls = collective_stats(_window(calls, first, last))
        for table, data in (("steps", in_window), ("colls", colls)):
            path = node_file_path(out or run_dir, first, entry.node, table)
            written.append(write_node_table(path, table, data))
    return written


def build_run_node_files(
    run_dir: Path, window_steps: int = WINDOW_STEPS, out: Path | None = None
) -> NodeManifest:
    """Node files of a whole run from its rank files (every rank's), and their manifest."""
    meta = load_meta(run_dir)
    hosts: dict[str, list[int]] = {}
    for key, rank in sorted(meta.ranks.items(), key=lambda kv: int(kv[0])):
        hosts.setdefault(rank.hostname, []).append(int(key))
    steps = max((r.steps or 0) for r in meta.ranks.values()) + 1
    windows = list(range(0, steps, window_steps))
    entries = [NodeEntry(node=i, host=h, ranks=r) for i, (h, r) in enumerate(hosts.items())]
    for entry in entries:
        build_node_files(run_dir, entry, windows, window_steps, out)
    manifest = NodeManifest(window_steps=window_steps, windows=windows, nodes=entries,
                            world_size=meta.world_size)  # fmt: skip
    write_manifest(out or run_dir, manifest)
    return manifest
