"""The what-if at scale: the sampled steps replayed with nodes as units, a node put at the
median node's pace (issue 50, item 3).

In a step whose collectives span the nodes, the step ends at its last collective, once its
last rank has issued it. A node's pace there is when its ranks issue the calls of that
collective (the node-wide key whose latest arrival is the latest), from their start of step.
The node files do not keep the issue, but every rank of a collective leaves it together, so
a call's time in it (issue to completion) is the common completion less its issue: the
node's mean issue is the completion less its mean time in the call, and between nodes the
completion cancels. The issue, not the arrival: a node's arrival there is late too when its
ranks queued behind a late node's previous bucket, and that queue is the late node's doing.

The late node put at the median node's pace issues there when the median node does; the
step ends then at the next latest node's issue (or the median's): the step's gain is the
latest issue less that, for the node that was latest, nothing for the others. Averaged over
the sampled steps, with a 95 % interval from their spread (the model's own error is stated
against the full replay in docs/many-ranks.md).
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
    return _at_last_key(s, [k.arrive_max.astype(np.float64) for k in s.keys.values()])


def last_issues(s: NodeScan) -> np.ndarray:
    """(nodes, sampled steps): each node's mean issue at each step's last collective, less
    the collective's completion (ms; only differences between nodes mean anything)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return _at_last_key(s, [-k.call_sum / k.calls for k in s.keys.values()])


def _at_last_key(s: NodeScan, per_key: list[np.ndarray]) -> np.ndarray:
    if not per_key:
        return np.full_like(s.node_step_ns, np.nan)
    last = np.stack([k.latest for k in s.keys.values()]).argmax(axis=0)
    values = np.stack(per_key)  # (keys, nodes, steps)
    return np.take_along_axis(values, last[None, None, :], axis=0)[0] / 1e6


def node_gains(s: NodeScan) -> list[NodeGain]:
    """Every node's gain when put at the median node's pace (zero for most)."""
    a = last_issues(s)
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
