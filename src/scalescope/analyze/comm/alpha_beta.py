"""The α-β (Hockney) model of one collective: time = α + β · bytes, fitted to measurements.

`comm` fits it per op and backend and stores the fits in its JSON (``fits``), or leaves the
raw measurements in its run directory; `project` loads either to price the gradient traffic
at other sizes and rank counts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

"""What rank 0 of `scalescope comm` leaves in its run directory: the raw measurements."""


@dataclass(frozen=True, kw_only=True)
class AlphaBetaFit:
    """time_s(nbytes) = alpha_s + beta_s_per_byte * nbytes, for one op on one backend and world."""

    op: str
    backend: str
    world_size: int
    alpha_s: float
    """Latency: the time of an empty message, seconds."""
    beta_s_per_byte: float
    """Inverse bandwidth of the message as the op sees it, seconds per byte."""
    rel_err: float
    """Root mean square of (fit - measured) / measured over the points fitted."""
    num_points: int
    min_bytes: int
    max_bytes: int

    def time_s(self, nbytes: float) -> float:
        return self.alpha_s + self.beta_s_per_byte * nbytes

    def as_dict(self) -> dict[str, float | int | str]:
        return asdict(self)


def weighted_line(x: np.ndarray, t: np.ndarray) -> tuple[float, float]:
    """(α, β) of t = α + β·x by least squares weighted by 1/t (small values count as much as
    large ones), both kept non-negative (a negative latency or slope is noise, not physics).
    ``t`` positive, ``x`` of two sizes or more."""
    weights = 1.0 / t
    design = np.stack([np.ones_like(x), x], axis=1) * weights[:, None]
    (alpha, beta), *_ = np.linalg.lstsq(design, t * weights, rcond=None)
    if alpha < 0:
        alpha, beta = 0.0, float(np.sum(x * t * weights**2) / np.sum((x * weights) ** 2))
    if beta < 0:
        alpha, beta = float(np.sum(t * weights**2) / np.sum(weights**2)), 0.0
    return float(alpha), float(beta)


def fit_alpha_beta(
    op: str, backend: str, world_size: int, nbytes: list[int], times_s: list[float]
) -> AlphaBetaFit:
    """Least squares weighted by 1/time, so small messages (latency) count as much as large ones.

    α and β are kept non-negative: a negative latency or bandwidth term is noise, not physics.
    """
    if len(nbytes) != len(times_s) or len(nbytes) < 2:
        raise ValueError(f"an α-β fit needs two or more (bytes, time) points, got {len(nbytes)}")
    x = np.asarray(nbytes, dtype=np.float64)
    t = np.asarray(times_s, dtype=np.float64)
    if np.any(t <= 0) or np.any(x < 0):
        raise ValueError("an α-β fit needs positive times and non-negative sizes")
    alpha, beta = weighted_line(x, t)
    predicted = alpha + beta * x
    rel_err = float(np.sqrt(np.mean(((predicted - t) / t) ** 2)))
    return AlphaBetaFit(
        op=op,
        backend=backend,
        world_size=world_size,
        alpha_s=float(alpha),
        beta_s_per_byte=float(beta),
        rel_err=rel_err,
        num_points=len(x),
        min_bytes=int(x.min()),
        max_bytes=int(x.max()),
    )


def bandwidth_fit(
    op: str, backend: str, world_size: int, nbytes: int, time_s: float
) -> AlphaBetaFit:
    """α-β from one message size, where latency cannot be told from bandwidth: all of the
    time is taken as bandwidth (α = 0). Exact at that size and for larger messages on the
    same link; optimistic for much smaller ones, whose latency it misses. A model whose
    gradients fit in one DDP bucket (under 25 MB) gives only this."""
    if nbytes <= 0 or time_s <= 0:
        raise ValueError(f"a bandwidth fit needs a positive size and time, got {nbytes}, {time_s}")
    return AlphaBetaFit(
        op=op,
        backend=backend,
        world_size=world_size,
        alpha_s=0.0,
        beta_s_per_byte=time_s / nbytes,
        rel_err=0.0,
        num_points=1,
        min_bytes=nbytes,
        max_bytes=nbytes,
    )
