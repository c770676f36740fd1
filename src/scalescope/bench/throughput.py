"""Throughput statistics and output lines in the style of tf_cnn_benchmarks.

tf_cnn_benchmarks (`get_perf_timing`) reports the mean as images per step over the mean step
time, the jitter as 1.4826 times the median absolute deviation of per-step images/sec (a
robust estimate of their standard deviation), and its uncertainty from the population
standard deviation of per-step images/sec over sqrt(n) (one standard error, ``CI_Z``), so
the numbers compare directly with tf_cnn_benchmarks logs.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

CI_Z = 1.0
MAD_TO_STD = 1.4826
DASHES = "-" * 64
HEADER = "Step\tImg/sec\ttotal_loss"


@dataclass(frozen=True)
class Throughput:
    """Images/sec over `steps` steps of `images_per_step` images (all ranks together)."""

    steps: int
    images_per_step: int
    seconds: float
    mean: float
    ci: float
    jitter: float

    @property
    def images(self) -> int:
        return self.steps * self.images_per_step


def throughput(step_times_s: Sequence[float], images_per_step: int) -> Throughput:
    """Throughput of steps that took `step_times_s` seconds and each processed `images_per_step`.

    `mean` equals total images over total time, since every step has the same image count.
    """
    if not step_times_s:
        raise ValueError("no step times to compute throughput from")
    if images_per_step < 1:
        raise ValueError(f"images_per_step must be positive, got {images_per_step}")
    if any(not (t > 0 and math.isfinite(t)) for t in step_times_s):
        raise ValueError("step times must be positive and finite")
    seconds = math.fsum(step_times_s)
    n = len(step_times_s)
    speeds = [images_per_step / t for t in step_times_s]
    median = statistics.median(speeds)
    return Throughput(
        steps=n,
        images_per_step=images_per_step,
        seconds=seconds,
        mean=images_per_step * n / seconds,
        ci=CI_Z * statistics.pstdev(speeds) / math.sqrt(n),
        jitter=MAD_TO_STD * statistics.median(abs(s - median) for s in speeds),
    )


def format_step_line(step: int, stats: Throughput, loss: float) -> str:
    """`10\\timages/sec: 215.3 +/- 0.5 (jitter = 1.2)\\t6.908`."""
    return (
        f"{step}\timages/sec: {stats.mean:.1f} +/- {stats.ci:.1f} "
        f"(jitter = {stats.jitter:.1f})\t{loss:.3f}"
    )


def format_total(images_per_sec: float) -> str:
    """The closing block: `total images/sec: 215.09` between two dashed lines."""
    return f"{DASHES}\ntotal images/sec: {images_per_sec:.2f}\n{DASHES}"
