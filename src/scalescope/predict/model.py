"""The step-time model: one rank's step at p ranks from a measured reference run.

    step = data(b) + compute(b) + other + exposed(allreduce of the buckets, p) + waiting(p)

- compute(b) = the reference's compute per sample × b × T(target) / T(reference), T a
  rank's time per sample against its threads and cores (``cores.py``: serial + parallel /
  threads where a study's sizes measured it, else inversely proportional to the cores a
  rank gets): ranks that share cores (more runnable threads than cores on a node, the
  job's and, as measured at the reference, other processes') slow down by their fair
  share; the reference's own sharing is divided out. On other hardware:
  ``roofline.target_compute``;
- data scales with the batch, ``other`` (the loop outside the hooked phases) is per step;
- exposed: DDP issues bucket k when backward has produced its gradients (buckets are taken
  to become ready in proportion to their bytes through backward); buckets go one after
  another over the link, each an allreduce of its bytes (``allreduce.py``); what is still
  in flight when backward ends is exposed. On the run's own hardware, the exposed time this
  schedule misses at the reference itself (measured − scheduled at its own size) is added,
  grown as its transfers grow (ring size, core sharing): on a 2-core VM the schedule gave
  14-25 ms of the 23-30 ms measured at 2 ranks, and 32-66 ms of the 53-64 ms at 3;
- waiting: the reference's comm_wait above the least one is the lateness of the slowest of
  its ranks; with rank step times spread normally (σ) the slowest of p ranks is late by
  σ·e(p), e(p) the expected maximum of p standard normals, so waiting(p) scales by e(p)/e(p0)
  and, σ being a spread of the ranks' own work, by the compute time.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

import numpy as np

from scalescope.predict.allreduce import HopCost, allreduce_s
from scalescope.predict.cores import CoreScaling
from scalescope.predict.inputs import Placement, RunInputs

TERMS = ("compute", "data", "exposed", "waiting", "other")


@lru_cache(maxsize=256)
def expected_max_normal(p: int) -> float:
    """E[max of p standard normals]: the integral of x · p φ(x) Φ(x)^(p−1); 0 for one rank."""
    if p <= 1:
        return 0.0
    x = np.linspace(-9.0, 9.0, 4001)
    normal = NormalDist()
    pdf = np.array([normal.pdf(v) for v in x])
    cdf = np.array([normal.cdf(v) for v in x])
    y = x * p * pdf * cdf ** (p - 1)
    return float(np.sum((y[1:] + y[:-1]) / 2 * np.diff(x)))


@dataclass(frozen=True, kw_only=True)
class Target:
    """One projected size."""

    nodes: int
    ranks_per_node: int
    per_rank_batch: float
    placement: Placement

    @property
    def ranks(self) -> int:
        return self.nodes * self.ranks_per_node


@dataclass(frozen=True, kw_only=True)
class StepTerms:
    compute_ms: float
    data_ms: float
    exposed_ms: float
    waiting_ms: float
    other_ms: float

    @property
    def step_ms(self) -> float:
        return self.compute_ms + self.data_ms + self.exposed_ms + self.waiting_ms + self.other_ms

    def as_dict(self) -> dict[str, float]:
        return {f"{t}_ms": getattr(self, f"{t}_ms") for t in TERMS}

    @property
    def dominant(self) -> str:
        return max(TERMS, key=lambda t: getattr(self, f"{t}_ms"))


def sharing_slowdown(ref: Placement, target: Placement) -> float:
    """How much slower a rank computes on ``target``'s cores than on ``ref``'s."""
    return ref.cores_per_rank / target.cores_per_rank


def transfer_slowdown(ref: Placement, target: Placement) -> float:
    """How much slower a rank's transfers run on ``target``'s node than on ``ref``'s:
    gloo's progress is a thread of the rank, slowed only where threads time-slice cores
    (the share of a core a thread gets), not by the rank's intra-op threads."""
    return ref.core_share / target.core_share


def exposed_ms(
    buckets: tuple[int, ...], backward_ms: float, ranks: int, hop: HopCost, algorithm: str
) -> float:
    """Gradient allreduce time left after backward ends (module docstring)."""
    total = float(sum(buckets))
    if ranks <= 1 or total <= 0:
        return 0.0
    ready = free = 0.0
    for nbytes in buckets:
        ready += backward_ms * nbytes / total
        free = max(free, ready) + 1e3 * allreduce_s(nbytes, ranks, hop, algorithm)
    return max(free - backward_ms, 0.0)


def missed_exposed_ms(
    ref: RunInputs, ranks: int, ref_hop: HopCost, hop: HopCost, algorithm: str
) -> float:
    """The reference's exposed transfer that the schedule misses at its own size (negative
    where it is too high), grown as the whole gradient's allreduce grows from the
    reference's ranks and hop to ``ranks`` and ``hop``."""
    total = float(sum(ref.buckets))
    if ref.world_size <= 1 or ranks <= 1 or total <= 0:
        return 0.0
    scheduled = exposed_ms(ref.buckets, ref.backward_ms, ref.world_size, ref_hop, algorithm)
    before = allreduce_s(total, ref.world_size, ref_hop, algorithm)
    after = allreduce_s(total, ranks, hop, algorithm)
    return (ref.exposed_ms - scheduled) * (after / before if before > 0 else 1.0)


def waiting_ms(ref: RunInputs, ranks: int, compute_ms: float) -> float:
    """The reference's waiting, scaled by e(p) / e(p0) and by the compute time (σ is a
    spread of the ranks' own work, so it shrinks with it on faster hardware)."""
    reference = expected_max_normal(ref.world_size)
    if reference <= 0 or ref.compute_ms <= 0:
        return 0.0
    return ref.waiting_ms * expected_max_normal(ranks) / reference * compute_ms / ref.compute_ms


def step_terms(
    ref: RunInputs,
    target: Target,
    hop: HopCost,
    algorithm: str = "ring",
    compute_per_sample_ms: float | None = None,
    ref_hop: HopCost | None = None,
    scaling: CoreScaling | None = None,
) -> StepTerms:
    """The step of one rank at ``target``; ``compute_per_sample_ms`` replaces the
    reference's compute (other hardware), else it is scaled by ``scaling`` (default:
    inversely proportional to the cores a rank gets) and the exposure the schedule misses
    at the reference is carried over (``ref_hop``: the reference's own hop where ``hop``
    was scaled for the target)."""
    scale = target.per_rank_batch / ref.per_rank_batch
    missed = 0.0
    if compute_per_sample_ms is None:
        slowdown = (
            scaling.slowdown(ref.placement, target.placement)
            if scaling is not None
            else sharing_slowdown(ref.placement, target.placement)
        )
        compute = ref.compute_ms * scale * slowdown
        backward = ref.backward_ms * scale * slowdown
        missed = missed_exposed_ms(ref, target.ranks, ref_hop or hop, hop, algorithm)
    else:
        compute = compute_per_sample_ms * target.per_rank_batch
        backward = compute * ref.backward_ms / ref.compute_ms if ref.compute_ms else 0.0
    scheduled = exposed_ms(ref.buckets, backward, target.ranks, hop, algorithm)
    return StepTerms(
        compute_ms=compute,
        data_ms=ref.data_ms * scale,
        exposed_ms=max(scheduled + missed, 0.0),
        waiting_ms=waiting_ms(ref, target.ranks, compute),
        other_ms=ref.other_ms,
    )
