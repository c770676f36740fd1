"""The ranks' step times in equal bins: what a live view of many ranks shows for the ranks it
leaves out."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class StepHistogram:
    counts: tuple[int, ...]
    """Ranks per bin, from the fastest to the slowest."""
    low_ms: float
    high_ms: float
    ranks: int
    """Ranks with a step time."""


def step_histogram(step_ms: Iterable[float | None], bins: int = 12) -> StepHistogram | None:
    """None with fewer than two step times."""
    times = np.array([t for t in step_ms if t is not None])
    if len(times) < 2:
        return None
    counts, edges = np.histogram(times, bins=bins)
    low, high = float(edges[0]), float(edges[-1])
    return StepHistogram(tuple(int(c) for c in counts), low, high, len(times))
