"""The ranks grouped by host: each node's mean step, busy and waiting time over its ranks, its
busiest rank, and how far its busy time is from the median node's."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

import numpy as np

from scalescope.analyze.cross_rank import CrossRankAnalysis
from scalescope.analyze.steps.steps import StepAnalysis

UNKNOWN_HOST = "n/a"
"""The node of the ranks that recorded no host name."""


@dataclass(frozen=True)
class NodeSummary:
    host: str
    ranks: tuple[int, ...]
    mean_step_ms: float | None
    busy_ms: float | None
    """Mean over its ranks of busy time per step (the step less its waiting)."""
    busy_max_ms: float | None
    busiest_rank: int | None
    wait_ms: float | None
    busy_vs_median_pct: float | None = None
    """How much busier than the median node, in percent (negative: less busy)."""


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _node(host: str, ranks: list[int], steps: dict, cross: dict) -> NodeSummary:
    mine = [cross[r] for r in ranks if r in cross]
    busiest = max(mine, key=lambda w: w.busy_ms_per_step, default=None)
    return NodeSummary(
        host=host,
        ranks=tuple(ranks),
        mean_step_ms=_mean([s for r in ranks if (s := steps.get(r)) is not None]),
        busy_ms=_mean([w.busy_ms_per_step for w in mine]),
        busy_max_ms=busiest.busy_ms_per_step if busiest else None,
        busiest_rank=busiest.rank if busiest else None,
        wait_ms=_mean([w.wait_ms_per_step for w in mine]),
    )


def _against_median(nodes: list[NodeSummary]) -> list[NodeSummary]:
    known = [n.busy_ms for n in nodes if n.busy_ms is not None]
    median = float(np.median(known)) if known else None
    if not median:
        return nodes
    return [
        n if n.busy_ms is None else replace(n, busy_vs_median_pct=100.0 * (n.busy_ms / median - 1))
        for n in nodes
    ]


def node_summaries(
    hosts: Iterable[tuple[int, str | None]],
    steps: StepAnalysis | None,
    cross: CrossRankAnalysis | None,
) -> tuple[NodeSummary, ...]:
    """Ranks grouped by host name (``hosts``: each rank with its host, in rank order), the
    busiest node first."""
    by_host: dict[str, list[int]] = {}
    for rank, host in hosts:
        by_host.setdefault(host or UNKNOWN_HOST, []).append(rank)
    step_ms = {r.rank: r.mean_step_ms for r in steps.ranks} if steps else {}
    waits = {r.rank: r for r in cross.ranks} if cross else {}
    nodes = [_node(host, ranks, step_ms, waits) for host, ranks in by_host.items()]
    nodes.sort(key=lambda n: (-(n.busy_ms if n.busy_ms is not None else -1.0), n.host))
    return tuple(_against_median(nodes))
