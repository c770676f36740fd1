"""Scaling efficiency from throughputs measured at several rank counts."""

from __future__ import annotations


def scaling_efficiency(
    ranks: int, throughput: float, base_ranks: int, base_throughput: float
) -> float | None:
    """Throughput gained over the base run divided by the ranks added: 1.0 is linear scaling.

    One formula for both kinds of scaling: a fixed per-rank batch (weak scaling, the training
    workloads) and a fixed data set (strong scaling, the analytics) both ideally give
    ``throughput = base_throughput x ranks / base_ranks``. None without a usable base.
    """
    if base_throughput <= 0 or base_ranks <= 0 or ranks <= 0:
        return None
    return (throughput / base_throughput) / (ranks / base_ranks)
