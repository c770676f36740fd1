"""Time of one allreduce of n bytes over p ranks under the α-β (Hockney) model of a hop.

A hop sends m bytes to a neighbour in ``alpha + m * beta``. Two algorithms:

- ring (gloo's and NCCL's default for large messages): a reduce-scatter then an allgather,
  each p - 1 steps of n / p bytes: ``2 (p - 1) alpha + 2 (p - 1) / p * n * beta``;
- tree (binomial reduce then broadcast, the whole message per level, no pipelining):
  ``2 ceil(log2 p) (alpha + n * beta)``; it wins for small, latency-bound messages.

A fit of `scalescope comm` (``AlphaBetaFit``) is the time of the whole op at its world size w:
``T(n) = A + B n``. Read as a ring of w ranks it gives the hop's ``alpha = A / (2 (w - 1))``
and ``beta = B w / (2 (w - 1))``; a 2-rank fit is a ring of 2, so ``alpha = A / 2``,
``beta = B``. The hop figures then price rings of any size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scalescope.analyze.comm.alpha_beta import AlphaBetaFit

ALGORITHMS = ("ring", "tree")
ALLREDUCE_OPS = ("all_reduce", "allreduce")


@dataclass(frozen=True, kw_only=True)
class HopCost:
    """α-β of one hop, and where the figures came from."""

    alpha_s: float
    beta_s_per_byte: float
    source: str
    rel_err: float = 0.0
    """Relative error of the fit behind it (0 for catalogue figures)."""


def allreduce_s(nbytes: float, ranks: int, hop: HopCost, algorithm: str = "ring") -> float:
    """Time of one allreduce of ``nbytes`` over ``ranks`` ranks; 0 for a single rank."""
    if ranks < 1 or nbytes < 0:
        raise ValueError(f"allreduce needs ranks >= 1 and bytes >= 0, got {ranks}, {nbytes}")
    if ranks == 1:
        return 0.0
    if algorithm == "ring":
        steps = 2 * (ranks - 1)
        return steps * hop.alpha_s + steps / ranks * nbytes * hop.beta_s_per_byte
    if algorithm == "tree":
        levels = math.ceil(math.log2(ranks))
        return 2 * levels * (hop.alpha_s + nbytes * hop.beta_s_per_byte)
    raise ValueError(f"unknown allreduce algorithm {algorithm!r}: use ring or tree")


def hop_from_fit(fit: AlphaBetaFit) -> HopCost:
    """The hop of a ring of ``fit.world_size`` ranks whose whole-op time is the fit."""
    w = fit.world_size
    if w < 2:
        raise ValueError(f"an α-β fit of {w} rank cannot price a ring (needs 2 or more ranks)")
    steps = 2 * (w - 1)
    return HopCost(
        alpha_s=fit.alpha_s / steps,
        beta_s_per_byte=fit.beta_s_per_byte * w / steps,
        source=f"{fit.op} fit, {fit.backend}, {w} ranks",
        rel_err=fit.rel_err,
    )


def pick_fit(fits: list[AlphaBetaFit]) -> AlphaBetaFit:
    """The allreduce fit over the most ranks (the nearest to the sizes projected)."""
    usable = [f for f in fits if f.op in ALLREDUCE_OPS and f.world_size >= 2]
    if not usable:
        raise ValueError("no allreduce fit over 2 or more ranks in the comm JSON")
    return max(usable, key=lambda f: (f.world_size, f.num_points))
