"""Late nodes and late ranks from the node files' sums (analyze/scale/scan.py).

A rank waits in a collective from its arrival to the last arrival. The node files keep each
node-wide key's arrivals as offsets from each rank's own step start (no clock is compared
across hosts), so a node's mean wait in a step is, over its keys, ``calls x latest -
arrivals' sum`` divided by its ranks, where ``latest`` is the key's latest arrival over
every node. Its **busy** time is its ranks' mean step less that wait: a late node's ranks
wait least and are busy longest (docs/many-ranks.md). Its latest rank waits
``calls per rank x (latest - the node's latest arrival)``: the node's **slowest rank's**
busy time.

A node is late when its busy time exceeds its median peer's beyond the steps' spread
(analyze/model/peers.py: a paired t-test, Holm-corrected, and 2 % of the step). One late rank
raises its node's mean by only its share of the node's ranks: a node whose mean excess is
below ``NODE_SHARE`` of its slowest rank's is a late rank (the one most often last), not a
late node.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalescope.analyze.model.peers import slower_than_peers
from scalescope.analyze.scale.node_replay import last_arrivals
from scalescope.analyze.scale.scan import NodeScan

NODE_SHARE = 0.5
"""Of the slowest rank's excess, what the node's mean must reach to blame the node: all its
ranks late gives 1, one of n ranks 1/n."""


@dataclass(frozen=True)
class LateNode:
    node: int
    """The node's index in the manifest."""
    host: str
    ranks: tuple[int, ...]
    """The node's ranks; a late rank: that rank alone."""
    excess_ms: float
    """Busy time per step above its median peer's (mean over the sampled steps)."""
    sd_ms: float
    """The step-to-step spread of that excess."""
    steps: int
    lateness_ms: float
    """Its latest arrival at each step's last collective after the median node's (mean over
    the sampled steps): what the others wait for it, the estimate of its cost."""


@dataclass(frozen=True)
class NodeFigures:
    """(nodes, sampled steps): each node's busy time and its slowest rank's, in ms."""

    busy_ms: np.ndarray
    slowest_ms: np.ndarray
    last_rank: np.ndarray
    """Per node: the rank that arrived last most often (-1: none)."""
    lateness_ms: np.ndarray
    """(nodes, sampled steps): its latest arrival at the step's last collective (the key
    whose latest arrival is the latest) after the median node's."""


def node_figures(s: NodeScan) -> NodeFigures:
    ranks = np.array([len(e.ranks) for e in s.manifest.nodes], np.float64)[:, None]
    wait = np.zeros_like(s.node_step_ns)
    least = np.zeros_like(s.node_step_ns)
    lasts = []
    for k in s.keys.values():
        latest = np.where(np.isfinite(k.latest), k.latest, 0.0)[None, :]
        wait += k.calls * latest - k.arrive_sum
        least += k.calls / ranks * (latest - np.nan_to_num(k.arrive_max.astype(np.float64)))
        lasts.append(k.last_rank)
    busy = (s.node_step_ns - wait / ranks) / 1e6
    slowest = (s.node_step_ns - least) / 1e6
    return NodeFigures(busy, slowest, _most_often(lasts, len(ranks)), _lateness(s))


def _lateness(s: NodeScan) -> np.ndarray:
    at = last_arrivals(s)
    with np.errstate(all="ignore"):
        return at - np.nanmedian(at, axis=0)[None, :]


def _most_often(lasts: list[np.ndarray], nodes: int) -> np.ndarray:
    if not lasts:
        return np.full(nodes, -1)
    stacked = np.concatenate(lasts, axis=1)
    out = np.full(nodes, -1)
    for n in range(nodes):
        seen = stacked[n][stacked[n] >= 0]
        if len(seen):
            values, counts = np.unique(seen, return_counts=True)
            out[n] = values[counts.argmax()]
    return out


def late_nodes(s: NodeScan, f: NodeFigures) -> tuple[list[LateNode], list[LateNode]]:
    """The late nodes and the late ranks, the latest first."""
    full = np.isfinite(f.busy_ms).all(axis=0)
    if full.sum() < 2 or f.busy_ms.shape[0] < 2:
        return [], []
    step_ms = float(np.median(f.busy_ms[:, full]))  # the test's unit is its input's: ms
    mean = slower_than_peers(f.busy_ms[:, full].T, step_ms)
    slowest = slower_than_peers(f.slowest_ms[:, full].T, step_ms)
    nodes, ranks = [], []
    for n in np.flatnonzero(mean.slower | slowest.slower):
        entry = s.manifest.nodes[int(n)]
        whole = mean.slower[n] and mean.excess_ns[n] >= NODE_SHARE * slowest.excess_ns[n]
        test, data = (mean, f.busy_ms) if whole else (slowest, f.slowest_ms)
        spread = _spread(data[:, full], int(n))
        held = tuple(entry.ranks) if whole else (int(f.last_rank[n]),)
        lateness = float(np.nanmean(f.lateness_ms[n, full]))
        late = LateNode(int(n), entry.host, held, float(test.excess_ns[n]), spread,
                        int(full.sum()), lateness)  # fmt: skip
        (nodes if whole else ranks).append(late)
    return (sorted(nodes, key=lambda x: -x.excess_ms), sorted(ranks, key=lambda x: -x.excess_ms))


def _spread(data: np.ndarray, n: int) -> float:
    """The step-to-step spread of node ``n``'s excess over the median node."""
    return float(np.std(data[n] - np.median(data, axis=0), ddof=1))
