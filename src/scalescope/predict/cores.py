"""A rank's compute time against its threads and cores, fitted on a scale study's sizes.

A rank of t intra-op threads that each get a whole core computes one sample in

    τ(t) = s + p / t          (Amdahl: s the serial part, p the parallel part at one thread)

s is what one thread does alone (the Python loop, the ops too small to split, the thread
team's fork and join); p is split between the threads. When the node has more runnable
threads than cores, each thread gets the fraction c / t of a core (c the cores the rank
gets, ``Placement.cores_per_rank``) and everything stretches by t / c:

    T(t, c) = (s + p / t) · t / c

With s = 0 this is p / c, today's rule: compute inversely proportional to the cores a rank
gets. s and p come from the fitted sizes themselves: each measured T · c / t (the
time-slicing divided out) against 1 / t, a straight line by least squares. That needs
two thread counts or more; with one (every size with the same threads, as on the 2-core
e2e study) the rule stays linear, and so it does when the measured compute did not fall
with more threads (p ≤ 0). A fit whose s came out negative (faster than linear: caches)
is refitted through the origin, s = 0. Only ratios T(target) / T(reference) are used, so
the reference's own compute is kept and a projection to its own size gives it back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scalescope.predict.inputs import Placement, RunInputs


@dataclass(frozen=True, kw_only=True)
class CoreScaling:
    """τ(t) = serial + parallel / t per sample (module docstring); ``serial_ms == 0`` is
    the linear rule."""

    serial_ms: float
    parallel_ms: float
    """Per sample at one thread; 1.0 with ``fitted`` False (only ratios are used)."""
    threads: tuple[int, ...]
    """Threads per rank of the sizes fitted on, one per size."""
    fitted: bool
    note: str
    """How s and p were obtained, or why the linear rule was kept."""

    @property
    def serial_fraction(self) -> float:
        """s / τ(1): the share of one thread's time that more threads do not shorten."""
        total = self.serial_ms + self.parallel_ms
        return self.serial_ms / total if total > 0 else 0.0

    def time(self, placement: Placement) -> float:
        """T(t, c) per sample, in the units of the fit."""
        t = max(placement.threads_per_rank, 1)
        per_thread = (self.serial_ms + self.parallel_ms / t) * t
        return per_thread / placement.cores_per_rank

    def slowdown(self, ref: Placement, target: Placement) -> float:
        """How much slower a rank computes on ``target``'s threads and cores than on
        ``ref``'s: T(target) / T(ref)."""
        return self.time(target) / self.time(ref)


def linear(threads: Sequence[int] = (), why: str = "") -> CoreScaling:
    """Compute inversely proportional to the cores a rank gets (s = 0)."""
    return CoreScaling(
        serial_ms=0.0, parallel_ms=1.0, threads=tuple(threads), fitted=False, note=why
    )


def fit_line(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Least squares y = a + b x over two distinct x or more; (a, b)."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    dx = xs - xs.mean()
    b = float(np.dot(dx, ys - ys.mean()) / np.dot(dx, dx))
    return float(ys.mean() - b * xs.mean()), b


def fit_core_scaling(points: Sequence[tuple[Placement, float]]) -> CoreScaling:
    """s and p from (placement, compute ms per sample) of the fitted sizes; the linear
    rule, with the reason in ``note``, where they cannot say (module docstring)."""
    usable = [(pl, ms) for pl, ms in points if ms > 0 and pl.cores_per_rank > 0]
    threads = tuple(max(pl.threads_per_rank, 1) for pl, _ in usable)
    if len(set(threads)) < 2:
        return linear(threads, "one thread count in the fitted sizes: compute taken as "
                      "inversely proportional to a rank's cores")  # fmt: skip
    x = [1.0 / t for t in threads]
    y = [ms * pl.cores_per_rank / t for (pl, ms), t in zip(usable, threads, strict=True)]
    serial, parallel = fit_line(x, y)
    if parallel <= 0:
        return linear(threads, "compute did not fall with more threads in the fitted sizes: "
                      "taken as inversely proportional to a rank's cores")  # fmt: skip
    note = f"fitted on threads {', '.join(map(str, threads))}"
    if serial < 0:
        serial, parallel = 0.0, float(np.dot(x, y) / np.dot(x, x))
        note += " (faster than linear there: s = 0)"
    return CoreScaling(
        serial_ms=serial, parallel_ms=parallel, threads=threads, fitted=True, note=note
    )


def study_core_scaling(runs: Sequence[RunInputs]) -> CoreScaling:
    """The fit over measured runs: compute per sample against their placements."""
    return fit_core_scaling(
        [(r.placement, r.compute_ms / r.per_rank_batch) for r in runs if r.per_rank_batch > 0]
    )
