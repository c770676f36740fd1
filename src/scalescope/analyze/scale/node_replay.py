"""The what-if at scale: the sampled steps replayed with nodes as units, each node as its
slowest rank (the node files' latest arrival of its ranks), a node fixed at the median node's
pace (issue 50, item 3).

In a step whose collectives span the nodes, the step ends at its last collective: at the
latest node's arrival there, plus the transfer, plus the work after it. A node put at the
median node's pace arrives there when the median node does; the step then ends at the next
latest node's arrival (or the median's): the gain of the step is the latest arrival less that,
for the node that was latest, and nothing for the others. Averaged over the sampled steps,
with a 95 % interval from their spread. What it leaves out: a node's lateness at an earlier
collective that delays the others' next one (a bucket queued behind a late one) is not
replayed apart; docs/many-ranks.md states the error against the full replay of the rank files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from scalescope.analyze.scale.scan import NodeScan


@dataclass(frozen=True)
class NodeGain:
    """What putting one node at the median node's pace buys per step."""

    node: int
    gain_ms: float
    low_ms: float
    high_ms: float
    steps: int
    """Sampled steps replayed."""


def last_arrivals(s: NodeScan) -> np.ndarray:
    """(nodes, sampled steps): each node's latest arrival (ms from its ranks' step start) at
    each step's last collective: the node-wide key whose latest arrival is the latest."""
    if not s.keys:
        return np.full_like(s.node_step_ns, np.nan)
    keys = list(s.keys.values())
    last = np.stack([k.latest for k in keys]).argmax(axis=0)
    arrive = np.stack([k.arrive_max for k in keys])  # (keys, nodes, steps)
    return np.take_along_axis(arrive, last[None, None, :], axis=0)[0].astype(np.float64) / 1e6


def node_gains(s: NodeScan) -> list[NodeGain]:
    """Every node's gain when put at the median node's pace (zero for most)."""
    a = last_arrivals(s)
    full = np.isfinite(a).all(axis=0)
    a = a[:, full]
    n_nodes, n_steps = a.shape
    if n_nodes < 2 or n_steps < 2:
        return []
    order = np.sort(a, axis=0)
    top, second = order[-1], order[-2]
    median = np.median(a, axis=0)
    latest = a.argmax(axis=0)
    per_step = np.zeros_like(a)
    per_step[latest, np.arange(n_steps)] = top - np.maximum(second, median)
    mean = per_step.mean(axis=1)
    half = 1.96 * per_step.std(axis=1, ddof=1) / math.sqrt(n_steps)
    return [NodeGain(n, float(mean[n]), float(max(mean[n] - half[n], 0.0)),
                     float(mean[n] + half[n]), n_steps) for n in range(n_nodes)]  # fmt: skip
