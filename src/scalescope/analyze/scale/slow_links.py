"""Slow links from the node files: subgroups (pipeline pairs, groups smaller than a node's
ranks) whose transfer per byte is several times that of the other groups of the same op, size
class and number of nodes, as analyze/ranks/links.py judges them from the rank files.

An instance's transfer is the least time from arrival to completion over its ranks (the last
to arrive waits for nobody): over the nodes that hold the group, the least of their
``transfer_min_ns`` in the step. A group's figure is its median over the sampled steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalescope.analyze.ranks.links import FLOOR_NS, SLOW_RATIO
from scalescope.analyze.scale.scan import NodeScan

MIN_PEERS = 3
"""Other groups a group's class needs for a median to compare with."""
EXACT = 64


@dataclass(frozen=True)
class ScaleLink:
    hosts: tuple[str, ...]
    """The hosts its group spans."""
    group: str
    op: str
    size_class: int
    transfer_ms: float
    """Its median transfer per call."""
    peer_ms: float
    """The median over its class's other groups."""
    peers: int
    nbytes: float
    """Bytes per call."""

    @property
    def ratio(self) -> float:
        return self.transfer_ms / self.peer_ms if self.peer_ms > 0 else float("inf")


def _per_group(c: dict[str, np.ndarray]) -> tuple[np.ndarray, ...]:
    """Each group's (group, op, class) code, median transfer, bytes per call and nodes."""
    key = (c["group"] * 64 + c["op"]) * 256 + c["size_class"].astype(np.int64) + 1
    inst = key * (int(c["step"].max()) + 1) + c["step"]
    order = np.lexsort((c["transfer_ns"], inst))
    inst, tr = inst[order], c["transfer_ns"][order]
    first = np.flatnonzero(np.r_[True, inst[1:] != inst[:-1]])
    per_inst = tr[first]  # ascending within an instance: its least
    inst_key = key[order][first]
    order2 = np.lexsort((per_inst, inst_key))
    k2, v2 = inst_key[order2], per_inst[order2].astype(np.float64)
    starts = np.flatnonzero(np.r_[True, k2[1:] != k2[:-1]])
    n = np.diff(np.r_[starts, len(k2)])
    median = (v2[starts + (n - 1) // 2] + v2[starts + n // 2]) / 2
    keys = k2[starts]
    by_key = np.argsort(key, kind="stable")
    nbytes = c["bytes_per_call"][by_key][np.searchsorted(key[by_key], keys)]
    return keys, median, nbytes, _spans(key, c["node"], keys)


def _spans(key: np.ndarray, node: np.ndarray, keys: np.ndarray) -> list[tuple[int, ...]]:
    """Per group of ``keys``, the nodes that hold it."""
    width = int(node.max()) + 1
    pairs = np.unique(key * width + node)
    owner, held = pairs // width, pairs % width
    split = np.searchsorted(owner, keys)
    ends = np.r_[split[1:], len(pairs)]
    return [tuple(held[a:b].tolist()) for a, b in zip(split, ends, strict=True)]


def slow_links(s: NodeScan) -> list[ScaleLink]:
    """The slow subgroups, the slowest against its peers first."""
    c = s.link_columns()
    if not len(c.get("group", ())):
        return []
    keys, median, nbytes, spans = _per_group(c)
    op, cls = (keys // 256) % 64, keys % 256 - 1
    shape = np.array([len(x) for x in spans])
    labels = {v: k for k, v in s.groups.items()}
    ops = {v: k for k, v in s.ops.items()}
    per_byte = median / np.maximum(nbytes, 1)
    peer_per_byte, peers = _peer_medians(per_byte, np.stack([op, cls, shape]))
    slow = (peers >= MIN_PEERS) & (shape >= 2)
    peer = peer_per_byte * nbytes
    slow &= (median >= SLOW_RATIO * peer) & (median - peer >= FLOOR_NS)
    out = [ScaleLink(tuple(s.manifest.nodes[n].host for n in spans[i]),
                     labels[int(keys[i] // 256 // 64)], ops[int(op[i])], int(cls[i]),
                     float(median[i] / 1e6), float(peer[i] / 1e6), int(peers[i]),
                     float(nbytes[i]))
           for i in np.flatnonzero(slow)]  # fmt: skip
    return sorted(out, key=lambda x: -x.ratio)


def _peer_medians(values: np.ndarray, classes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per item, the median of the other items of its class and how many there are: left
    out exactly up to ``EXACT`` items a class, beyond it the class's own median (one item
    cannot move the median of hundreds)."""
    _, cls = np.unique(classes, axis=1, return_inverse=True)
    cls = cls.ravel()
    medians, counts = np.zeros(len(values)), np.zeros(len(values), np.int64)
    for c in np.unique(cls):
        members = np.flatnonzero(cls == c)
        counts[members] = len(members) - 1
        if len(members) > EXACT:
            medians[members] = np.median(values[members])
            continue
        for m in members:
            others = values[members[members != m]]
            medians[m] = np.median(others) if len(others) else np.nan
    return medians, counts
