"""What the dashboard of a run analysed from its node files draws of its node matrices,
bounded whatever the run's ranks (report/views/scale_page.py): the busiest ``SLOWEST`` nodes,
the late ones and the least busy ``FASTEST`` by sampled step, and the nodes' and ranks'
distributions in ``BINS`` bars."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalescope.analyze.scale.summary import ScaleAnalysis

SLOWEST, FASTEST = 32, 8
BINS = 60


@dataclass(frozen=True)
class Bars:
    """A histogram: each bin's centre and count, the bins' width (the values' unit)."""

    centres: tuple[float, ...]
    counts: tuple[int, ...]
    width: float

    @property
    def top(self) -> int:
        return max(self.counts, default=0)


def bars(values: np.ndarray, bins: int = BINS) -> Bars | None:
    """``values``' finite ones in ``bins`` bars; None: none."""
    seen = values[np.isfinite(values)]
    if not len(seen):
        return None
    counts, edges = np.histogram(seen, bins=bins)
    centres = (edges[:-1] + edges[1:]) / 2
    return Bars(tuple(centres.tolist()), tuple(counts.tolist()), float(edges[1] - edges[0]))


@dataclass(frozen=True)
class NodeGrid:
    nodes: tuple[int, ...]
    """The nodes shown (indexes in the manifest), busiest first."""
    slowest: int
    fastest: int
    """How many busiest and least busy nodes were asked for."""
    steps: tuple[int, ...]
    """The sampled steps (the columns)."""
    busy_ms: np.ndarray
    """(shown nodes, sampled steps), float32: the node's busy time."""
    step_ms: np.ndarray
    """(shown nodes, sampled steps), float32: its ranks' mean step."""
    measured: bool
    """Whether any cell holds a step (False: the heatmaps are a note)."""
    late_busy_ms: tuple[tuple[str, float], ...]
    """Each late node's and late rank's host and its node's mean busy time."""
    node_busy: Bars | None
    rank_step: Bars | None


def shown_nodes(a: ScaleAnalysis, slowest: int = SLOWEST, fastest: int = FASTEST) -> list[int]:
    """The busiest ``slowest`` nodes, the late ones, then the least busy ``fastest``, busiest
    first."""
    busy = np.where(np.isfinite(a.node_busy_ms), a.node_busy_ms, -np.inf)
    order = np.argsort(-busy, kind="stable").tolist()
    late = {n.node for n in a.late_nodes + a.late_ranks}
    picked = set(order[:slowest]) | set(order[len(order) - fastest :]) | late
    return [n for n in order if n in picked]


def node_grid(a: ScaleAnalysis, slowest: int = SLOWEST, fastest: int = FASTEST) -> NodeGrid:
    nodes = shown_nodes(a, slowest, fastest)
    busy = a.node_busy_steps_ms[nodes].astype(np.float32)
    late = tuple((x.host, float(a.node_busy_ms[x.node])) for x in a.late_nodes + a.late_ranks)
    return NodeGrid(tuple(nodes), slowest, fastest, tuple(a.steps.tolist()), busy,
                    a.node_step_ms[nodes].astype(np.float32), bool(np.isfinite(busy).any()),
                    late, bars(a.node_busy_ms), bars(a.rank_step_ms))  # fmt: skip
