"""A node's files written while its ranks run: what a node relay does (issue 50, item 2).

``NodeFollower`` reads each of the node's rank files incrementally (events/tail.py's
``StreamTail``: only the bytes appended since the last look) and keeps, per rank, the rows of
the windows not yet written: its steps and its completed calls, each call's arrival computed
as it is read (the previous call on its group's completion is carried from one batch to the
next). A window is written once every rank of the node has a step past the window's last
one; ``finish`` writes the rest, what was recorded (a rank that crashed stops where its file
stops). The rows are those events/node_stats.py's ``build_node_files`` computes from the
whole files: the same reduction (``collective_stats``), the same rows kept.

Each node also writes its part of the manifest (``node_events/parts/node-NNNNN.json``: its
host, ranks and windows written) and merges every node's parts into ``nodes.json``: a window
is listed once every node wrote it or ended (an ended node's missing windows are written
empty: it has nothing more to add). Both are written to a temporary name and renamed, so the
manifest names only files that exist, at every moment.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from scalescope.events.files import NODE_EVENTS_DIR, events_path, node_file_path
from scalescope.events.node_file import (
    COLLS_SCHEMA,
    STEPS_SCHEMA,
    NodeEntry,
    NodeManifest,
    write_manifest,
    write_node_table,
)
from scalescope.events.node_stats import Calls, collective_stats, folded_calls, summarised_rows
from scalescope.events.schema import Kind, upgraded
from scalescope.events.tail import StreamTail

PARTS_DIR = "parts"
NO_END = np.iinfo(np.int64).min
CALL_FIELDS = ("step", "group", "op", "nbytes", "dur_ns", "arrive_ns", "transfer_ns", "folded")
"""``folded``: 1 for a call of a SUMMARY row, its arrival already from its step's start."""


class NodePart(msgspec.Struct, kw_only=True):
    """One node's share of the manifest."""

    entry: NodeEntry
    window_steps: int
    world_size: int
    windows: list[int]
    ended: bool = False
    cpu_s: float = 0.0
    """The CPU time the node's relay spent on its node files so far (what they cost)."""


def part_path(run_dir: Path, node: int) -> Path:
    return Path(run_dir) / NODE_EVENTS_DIR / PARTS_DIR / f"node-{node:05d}.json"


class Labels:
    """Group and op names as codes, one coding for the node (a string is coded once)."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self._codes: dict[str, int] = {}

    def codes(self, column: pa.ChunkedArray, rows: np.ndarray) -> np.ndarray:
        """The codes of ``column``'s ``rows``, through Arrow's dictionary encoding (the
        strings are compared in C++, each distinct one looked up here once)."""
        encoded = pc.dictionary_encode(column.combine_chunks(), null_encoding="encode")
        names = encoded.dictionary.to_pylist()
        local = np.array([self._code(str(n)) for n in names], np.int64)
        indices = encoded.indices.to_numpy(zero_copy_only=False)
        return local[indices[rows]] if len(local) else np.zeros(int(rows.sum()), np.int64)

    def _code(self, name: str) -> int:
        code = self._codes.get(name)
        if code is None:
            code = self._codes[name] = len(self.names)
            self.names.append(name)
        return code


@dataclass
class RankFollow:
    """One rank's file read so far, and its rows of the windows not yet written."""

    tail: StreamTail
    labels: Labels
    last_end: dict[int, int] = field(default_factory=dict)
    """Per group code, its last call's completion (its issue when it never completed)."""
    steps: list[pa.Table] = field(default_factory=list)
    calls: list[dict[str, np.ndarray]] = field(default_factory=list)
    """Completed calls (group and op as ``labels``' codes), their arrival on the rank's
    clock (the step start is taken when their window is written)."""
    starts: dict[int, int] = field(default_factory=dict)
    """Step -> its start, for the steps not yet written."""
    last_step: int = -1

    def read(self, rank: int) -> int:
        """Rows read from what the rank appended."""
        batches = self.tail.read_new()
        if not batches:
            return 0
        t = upgraded(pa.Table.from_batches(batches))
        kind = t.column("kind").to_numpy()
        col = {n: t.column(n).to_numpy() for n in ("step", "start_ns", "dur_ns", "nbytes",
                                                     "count")}  # fmt: skip
        is_step = kind == int(Kind.STEP)
        steps = pa.table({"rank": pa.array(np.full(int(is_step.sum()), rank, np.int32)),
                          "step": col["step"][is_step], "start_ns": col["start_ns"][is_step],
                          "dur_ns": col["dur_ns"][is_step], "samples": col["count"][is_step]},
                         schema=STEPS_SCHEMA)  # fmt: skip
        self.steps.append(steps)
        for s, start in zip(col["step"][is_step].tolist(), col["start_ns"][is_step].tolist(),
                            strict=True):  # fmt: skip
            self.starts[s] = start
        if is_step.any():
            self.last_step = max(self.last_step, int(col["step"][is_step].max()))
        self._calls(t, kind == int(Kind.COLLECTIVE), col)
        self._folded(t, summarised_rows(t, kind), col)
        return t.num_rows

    def _folded(self, t: pa.Table, rows: np.ndarray, col: dict[str, np.ndarray]) -> None:
        if not rows.any():
            return
        calls = folded_calls(col, rows)
        row = calls.pop("row")
        calls["group"] = self.labels.codes(t.column("group"), rows)[row]
        calls["op"] = self.labels.codes(t.column("name"), rows)[row]
        calls["folded"] = np.ones(len(row), np.int64)
        self.calls.append(calls)

    def _calls(self, t: pa.Table, is_call: np.ndarray, col: dict[str, np.ndarray]) -> None:
        if not is_call.any():
            return
        group = self.labels.codes(t.column("group"), is_call)
        name = self.labels.codes(t.column("name"), is_call)
        start, dur = col["start_ns"][is_call], col["dur_ns"][is_call]
        done = dur >= 0
        arrive = self._arrivals(group, start, np.where(done, start + dur, start))
        self.calls.append({"step": col["step"][is_call][done], "group": group[done],
                           "op": name[done], "nbytes": col["nbytes"][is_call][done],
                           "dur_ns": dur[done], "arrive_ns": arrive[done],
                           "transfer_ns": start[done] + dur[done] - arrive[done],
                           "folded": np.zeros(int(done.sum()), np.int64)})  # fmt: skip

    def _arrivals(self, group: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """Each call's arrival: its issue, or its group's previous call's completion (that
        call read now or in an earlier batch); the groups' last completions kept."""
        order = np.argsort(group, kind="stable")
        g, s, e = group[order], start[order], end[order]
        first = np.r_[True, g[1:] != g[:-1]]
        prev = np.r_[NO_END, e[:-1]]
        prev[first] = [self.last_end.get(c, NO_END) for c in g[first].tolist()]
        arrive = np.empty_like(start)
        arrive[order] = np.maximum(s, prev)
        last = np.r_[g[1:] != g[:-1], True]
        self.last_end.update(zip(g[last].tolist(), e[last].tolist(), strict=True))
        return arrive

    def take(self, first: int, last: int) -> tuple[pa.Table, dict[str, np.ndarray]]:
        """The rows of steps [first, last), removed from what is kept (calls of a step
        without its step row are dropped, as build_node_files drops them)."""
        steps = pa.concat_tables(self.steps) if self.steps else STEPS_SCHEMA.empty_table()
        step_col = steps.column("step").to_numpy()
        inside = (step_col >= first) & (step_col < last)
        self.steps = [steps.filter(pa.array(step_col >= last))]
        calls = {n: np.concatenate([c[n] for c in self.calls]) for n in CALL_FIELDS} if \
            self.calls else {n: np.zeros(0, np.int64) for n in CALL_FIELDS}  # fmt: skip
        in_calls = (calls["step"] >= first) & (calls["step"] < last)
        self.calls = [{n: v[calls["step"] >= last] for n, v in calls.items()}]
        picked = {n: v[in_calls] for n, v in calls.items()}
        keys = np.array(sorted(self.starts), np.int64)
        values = np.array([self.starts[k] for k in keys.tolist()], np.int64)
        at = np.minimum(np.searchsorted(keys, picked["step"]), max(len(keys) - 1, 0))
        known = (keys[at] == picked["step"]) if len(keys) else np.zeros(len(at), bool)
        picked = {n: v[known] for n, v in picked.items()}
        full = picked["folded"] == 0
        picked["arrive_ns"] = picked["arrive_ns"] - values[at[known]] * full
        once = full | ~np.isin(picked["step"], picked["step"][full])  # a window's summaries
        picked = {n: v[once] for n, v in picked.items()}
        for s in [s for s in self.starts if first <= s < last]:
            del self.starts[s]
        return steps.filter(pa.array(inside)), picked


def window_calls(parts: dict[int, dict[str, np.ndarray]], labels: Labels) -> Calls:
    """The node's calls of one window, its ranks' together, coded by ``labels``."""
    ranks = [np.full(len(c["step"]), r, np.int32) for r, c in parts.items()]
    cat = {n: np.concatenate([c[n] for c in parts.values()]) for n in CALL_FIELDS}
    return Calls(np.concatenate(ranks), cat["step"], cat["group"], cat["op"], cat["nbytes"],
                 cat["dur_ns"], cat["arrive_ns"], cat["transfer_ns"], labels.names,
                 labels.names)  # fmt: skip


@dataclass
class NodeFollower:
    """One node's ranks followed and its node files written window by window."""

    run_dir: Path
    node: int
    window_steps: int
    world_size: int
    expected: int
    """The node's number of ranks: no window is written before all of them are known."""
    host: str = field(default_factory=socket.gethostname)
    ranks: dict[int, RankFollow] = field(default_factory=dict)
    written: list[int] = field(default_factory=list)
    next_first: int = 0
    labels: Labels = field(default_factory=Labels)
    cpu_s: float = 0.0
    """CPU time of the thread(s) that polled and finished (``time.thread_time``)."""

    def add_ranks(self, ranks: list[int]) -> None:
        for rank in ranks:
            if rank not in self.ranks:
                self.ranks[rank] = RankFollow(StreamTail(events_path(self.run_dir, rank)),
                                              self.labels)  # fmt: skip

    def poll(self) -> list[int]:
        """Read what the ranks appended; write every window all of them passed. The
        windows written (their first steps)."""
        began = time.thread_time()
        try:
            return self._poll()
        finally:
            self.cpu_s += time.thread_time() - began

    def _poll(self) -> list[int]:
        for rank in sorted(self.ranks):
            self.ranks[rank].read(rank)
        if len(self.ranks) < self.expected:
            return []
        passed = min(f.last_step for f in self.ranks.values())
        done = []
        while passed >= self.next_first + self.window_steps:
            done.append(self._write_window())
        if done:
            self.write_part(ended=False)
        return done

    def finish(self) -> list[int]:
        """The ranks ended (or crashed): the last windows, what was recorded."""
        began = time.thread_time()
        for rank in sorted(self.ranks):
            self.ranks[rank].read(rank)
        last = max((f.last_step for f in self.ranks.values()), default=-1)
        done = []
        while self.next_first <= last:
            done.append(self._write_window())
        self.cpu_s += time.thread_time() - began
        if self.written or read_parts(self.run_dir):  # a run of no step has no node files
            self.write_part(ended=True)
        return done

    def _write_window(self) -> int:
        first = self.next_first
        last = first + self.window_steps
        taken = {r: self.ranks[r].take(first, last) for r in sorted(self.ranks)}
        steps = pa.concat_tables([s for s, _ in taken.values()])
        order = np.lexsort((steps.column("rank").to_numpy(), steps.column("step").to_numpy()))
        steps = steps.take(pa.array(order))
        colls = collective_stats(window_calls({r: c for r, (_, c) in taken.items()},
                                              self.labels)) if \
            taken else COLLS_SCHEMA.empty_table()  # fmt: skip
        for table, data in (("steps", steps), ("colls", colls)):
            write_node_table(node_file_path(self.run_dir, first, self.node, table), table, data)
        self.written.append(first)
        self.next_first = last
        return first

    def entry(self) -> NodeEntry:
        return NodeEntry(node=self.node, host=self.host, ranks=sorted(self.ranks))

    def write_part(self, ended: bool) -> None:
        part = NodePart(entry=self.entry(), window_steps=self.window_steps,
                        world_size=self.world_size, windows=list(self.written),
                        ended=ended, cpu_s=round(self.cpu_s, 6))  # fmt: skip
        path = part_path(self.run_dir, self.node)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{socket.gethostname()}.{os.getpid()}.tmp")
        tmp.write_bytes(msgspec.json.encode(part))
        os.replace(tmp, path)
        merge_manifest(self.run_dir)


def read_parts(run_dir: Path) -> list[NodePart]:
    parts = []
    for path in sorted((Path(run_dir) / NODE_EVENTS_DIR / PARTS_DIR).glob("node-*.json")):
        with contextlib.suppress(OSError, msgspec.DecodeError, msgspec.ValidationError):
            parts.append(msgspec.json.decode(path.read_bytes(), type=NodePart))
    return parts


def merge_manifest(run_dir: Path) -> NodeManifest | None:
    """nodes.json from every node's part: the windows every node wrote or ended before (an
    ended node's missing windows written empty first). None while no node wrote a part."""
    parts = read_parts(run_dir)
    if not parts:
        return None
    every = sorted({w for p in parts for w in p.windows})
    windows = [w for w in every if all(w in p.windows or p.ended for p in parts)]
    for part in parts:
        for first in set(windows) - set(part.windows):
            for table, schema in (("steps", STEPS_SCHEMA), ("colls", COLLS_SCHEMA)):
                path = node_file_path(run_dir, first, part.entry.node, table)
                if not path.is_file():
                    write_node_table(path, table, schema.empty_table())
    manifest = NodeManifest(window_steps=parts[0].window_steps, windows=windows,
                            nodes=[p.entry for p in parts],
                            world_size=parts[0].world_size)  # fmt: skip
    write_manifest(run_dir, manifest)
    return manifest
