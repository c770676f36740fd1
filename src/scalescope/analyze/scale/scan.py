"""One pass over a run's node files (events/node_file.py), one node's window at a time: what
the analysis at scale needs of them, in arrays of a bounded size (issue 50, item 3).

- every rank's measured steps and step time (a sum per rank: all steps);
- per node and sampled step (at most ``NODE_STEPS`` steps, evenly spaced): its ranks' mean
  step time and, per (group, op, size class) that all of the node's ranks call (a *node-wide*
  key), its calls and arrivals (sum, latest) and its latest rank; and each key's latest
  arrival over all nodes, which the node's waits are measured from;
- per sampled step (at most ``LINK_STEPS``), each call of a key only some of a node's ranks
  call (a pair's send or recv, a subgroup): its group, op, size, node and least transfer.

No rank's rows are read: a node file holds a window of one node, and each is dropped once
reduced.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from scalescope.events.files import node_file_path
from scalescope.events.node_file import NodeManifest, iter_node_tables, read_node_table

NODE_STEPS = 250
"""Sampled steps of the node matrices: a peer test over 250 steps tells a node 2 % slower
from noise as surely as over 1,000, at a quarter of the memory (65,536 ranks: ~0.4 GiB)."""
LINK_STEPS = 100
"""Sampled steps of the subgroups' transfers (a median over 100 steps per group)."""
P2P = {"send": "send/recv", "recv": "send/recv"}
"""A pair's send and recv are one instance: compared as one op, as analyze/ranks/links does."""


def sampled(first: int, last: int, most: int) -> np.ndarray:
    """At most ``most`` steps of ``first``..``last - 1``, evenly spaced, the first included."""
    stride = max(1, -(-(last - first) // most))
    return np.arange(first, last, stride)


@dataclass
class KeyArrays:
    """One node-wide key's figures, (nodes, sampled steps)."""

    calls: np.ndarray
    call_sum: np.ndarray
    """Time in the calls (issue to completion), summed over the node's ranks."""
    arrive_sum: np.ndarray
    arrive_max: np.ndarray
    last_rank: np.ndarray
    latest: np.ndarray
    """(sampled steps,): the key's latest arrival over every node (-inf: none)."""

    @classmethod
    def empty(cls, nodes: int, steps: int) -> KeyArrays:
        shape = (nodes, steps)
        return cls(np.zeros(shape, np.int32), np.zeros(shape, np.float64),
                   np.zeros(shape, np.float64), np.full(shape, np.nan, np.float32),
                   np.full(shape, -1, np.int32), np.full(steps, -np.inf))  # fmt: skip


@dataclass
class NodeScan:
    """What ``scan`` keeps of every node file."""

    manifest: NodeManifest
    warmup: int
    steps: np.ndarray
    """The sampled steps of the node matrices."""
    rank_steps: np.ndarray
    """Per rank of the world: measured steps."""
    rank_step_ns: np.ndarray
    """Per rank: the sum of its measured steps' times."""
    node_step_ns: np.ndarray
    """(nodes, sampled steps): the mean over the node's ranks of the step's time (nan: none)."""
    keys: dict[tuple[str, str, int], KeyArrays] = field(default_factory=dict)
    links: dict[str, list[np.ndarray]] = field(default_factory=dict)
    """Per column (group, op, size_class, node, step, transfer_ns, bytes_per_call): the
    subgroups' calls of the link steps, in pieces."""
    groups: dict[str, int] = field(default_factory=dict)
    """Subgroup label -> its code in ``links['group']``."""
    ops: dict[str, int] = field(default_factory=dict)

    def link_columns(self) -> dict[str, np.ndarray]:
        return {k: np.concatenate(v) if v else np.zeros(0) for k, v in self.links.items()}


def scan(run_dir: Path, manifest: NodeManifest, warmup: int) -> NodeScan:
    """Every node file of the run, once; NodeFileError (one line) on a missing or cut one."""
    total = _steps_in(run_dir, manifest)
    steps = sampled(warmup, max(total, warmup + 1), NODE_STEPS)
    n_nodes = len(manifest.nodes)
    s = NodeScan(manifest, warmup, steps, np.zeros(manifest.world_size, np.int64),
                 np.zeros(manifest.world_size), np.full((n_nodes, len(steps)), np.nan))  # fmt: skip
    link_steps = sampled(warmup, max(total, warmup + 1), LINK_STEPS)
    place = {e.node: i for i, e in enumerate(manifest.nodes)}
    sizes = {e.node: len(e.ranks) for e in manifest.nodes}
    for _, node, table in iter_node_tables(run_dir, manifest, "steps"):
        _add_steps(s, place[node], table)
    for _, node, table in iter_node_tables(run_dir, manifest, "colls"):
        _add_colls(s, place[node], sizes[node], table, link_steps)
    return s


def _steps_in(run_dir: Path, manifest: NodeManifest) -> int:
    """The run's steps: one past the last step of the last window's first node file."""
    if not manifest.windows or not manifest.nodes:
        return 0
    path = node_file_path(run_dir, manifest.windows[-1], manifest.nodes[0].node, "steps")
    steps = read_node_table(path, "steps").column("step")
    return int(pc.max(steps).as_py()) + 1 if len(steps) else manifest.windows[-1]


def _slots(steps: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which of ``steps`` are sampled, and their places among ``wanted``."""
    at = np.clip(np.searchsorted(wanted, steps), 0, max(len(wanted) - 1, 0))
    hit = (wanted[at] == steps) if len(wanted) else np.zeros(len(steps), bool)
    return hit, at[hit]


def _add_steps(s: NodeScan, node: int, t: pa.Table) -> None:
    rank, step = t.column("rank").to_numpy(), t.column("step").to_numpy()
    dur = t.column("dur_ns").to_numpy().astype(np.float64)
    measured = step >= s.warmup
    s.rank_steps += np.bincount(rank[measured], minlength=len(s.rank_steps))
    s.rank_step_ns += np.bincount(rank[measured], dur[measured], minlength=len(s.rank_steps))
    hit, at = _slots(step, s.steps)
    if hit.any():
        sums = np.bincount(at, dur[hit], minlength=len(s.steps))
        counts = np.bincount(at, minlength=len(s.steps))
        seen = counts > 0
        s.node_step_ns[node, seen] = sums[seen] / counts[seen]


def _codes(t: pa.Table, name: str) -> tuple[np.ndarray, list[str]]:
    coded = pc.dictionary_encode(t.column(name)).combine_chunks()
    return coded.indices.to_numpy(zero_copy_only=False), coded.dictionary.to_pylist()


def _add_colls(s: NodeScan, node: int, size: int, t: pa.Table, link_steps: np.ndarray) -> None:
    if t.num_rows == 0:
        return
    gcode, glabels = _codes(t, "group")
    ocode, olabels = _codes(t, "op")
    cls = t.column("size_class").to_numpy()
    step = t.column("step").to_numpy()
    wide = t.column("ranks").to_numpy() == size
    names = ("calls", "call_sum_ns", "arrive_sum_ns", "arrive_max_ns", "last_rank",
             "transfer_min_ns", "bytes")  # fmt: skip
    col = {n: t.column(n).to_numpy() for n in names}
    hit, at = _slots(step, s.steps)
    rows = np.flatnonzero(wide & hit)
    places = at[np.flatnonzero(wide[hit])]
    combo = (gcode[rows].astype(np.int64) * len(olabels) + ocode[rows]) * 256 + cls[rows] + 1
    for code in np.unique(combo).tolist():
        mine = combo == code
        r, slot = rows[mine], places[mine]
        key = (glabels[code // 256 // len(olabels)], olabels[code // 256 % len(olabels)],
               code % 256 - 1)  # fmt: skip
        k = s.keys.get(key)
        if k is None:
            k = s.keys[key] = KeyArrays.empty(len(s.manifest.nodes), len(s.steps))
        k.calls[node, slot] = col["calls"][r]
        k.call_sum[node, slot] = col["call_sum_ns"][r]
        k.arrive_sum[node, slot] = col["arrive_sum_ns"][r]
        k.arrive_max[node, slot] = col["arrive_max_ns"][r]
        k.last_rank[node, slot] = col["last_rank"][r]
        np.maximum.at(k.latest, slot, col["arrive_max_ns"][r].astype(np.float64))
    part = ~wide & np.isin(step, link_steps)
    if part.any():
        _add_links(s, node, part, gcode, glabels, ocode, olabels, cls, step, col)


def _add_links(s: NodeScan, node: int, part: np.ndarray, gcode, glabels, ocode, olabels,
               cls, step, col) -> None:  # fmt: skip
    gmap = np.array([s.groups.setdefault(g, len(s.groups)) for g in glabels], np.int64)
    omap = np.array([s.ops.setdefault(P2P.get(o, o), len(s.ops)) for o in olabels], np.int64)
    n = int(part.sum())
    piece = {"group": gmap[gcode[part]], "op": omap[ocode[part]], "size_class": cls[part],
             "node": np.full(n, node), "step": step[part],
             "transfer_ns": col["transfer_min_ns"][part],
             "bytes_per_call": col["bytes"][part] / np.maximum(col["calls"][part], 1)}  # fmt: skip
    for name, values in piece.items():
        s.links.setdefault(name, []).append(values)
