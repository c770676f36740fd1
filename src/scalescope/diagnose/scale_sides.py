"""One run as ``compare`` reads it when either run is analysed from its node files (issue 50):
its step times, their spread over the steps, its verdict, and its ``ScaleAnalysis`` where it
has one. A run analysed from its rank files gives what both kinds have (step times and the
verdict); its late nodes, ranks and links are the node files' alone."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from scalescope.analyze.scale.summary import ScaleAnalysis, spread
from scalescope.analyze.verdict import Verdict
from scalescope.diagnose.recording import Recording
from scalescope.diagnose.scale_recording import ScaleRecording

NODE_FILES, RANK_FILES = "node files", "rank files"


@dataclass(frozen=True)
class StepSeries:
    """The job's step at each (sampled) step: the mean over its ranks, in ms."""

    mean_ms: float
    sd_ms: float
    steps: int

    @classmethod
    def of(cls, per_step_ms: np.ndarray) -> StepSeries:
        seen = per_step_ms[np.isfinite(per_step_ms)]
        sd = float(seen.std(ddof=1)) if len(seen) > 1 else float("nan")
        mean = float(seen.mean()) if len(seen) else float("nan")
        return cls(mean, sd, len(seen))


@dataclass(frozen=True)
class RunSide:
    """One run's figures in the comparison (JSON ``a`` and ``b``)."""

    run: str
    analysed_from: str
    world_size: int
    nodes: int
    measured_steps: tuple[int, int]
    """Per rank: the fewest and the most measured steps."""
    step_ms: float
    """The median over ranks of their mean measured step."""
    rank_step_ms: dict[str, float] | None
    """min, p10, p50, p90, max over ranks of their mean step."""
    node_busy_ms: dict[str, float] | None
    """The same over nodes of their mean busy time per step (node files only)."""
    steps: StepSeries
    """Over the sampled steps (node files) or every measured step (rank files)."""
    verdict: str


@dataclass(frozen=True)
class ReadRun:
    side: RunSide
    verdict: Verdict
    scale: ScaleAnalysis | None
    """None: analysed from its rank files."""


def node_file_side(rec: ScaleRecording) -> ReadRun:
    a = rec.analysis
    with warnings.catch_warnings():  # a sampled step no node measured: nan
        warnings.simplefilter("ignore", RuntimeWarning)
        per_step = np.nanmean(a.node_step_ms.astype(np.float64), axis=0)
    side = RunSide(str(a.path), NODE_FILES, a.world_size, len(a.hosts), a.rank_steps_range,
                   a.step_ms, a.rank_step_spread, a.node_busy_spread, StepSeries.of(per_step),
                   rec.verdict.line)  # fmt: skip
    return ReadRun(side, rec.verdict, a)


def rank_file_side(rec: Recording) -> ReadRun:
    an = rec.analysis
    slots = an.slots
    rank_ms = slots.per_rank_mean(slots.dur_ns.astype(np.float64)) / 1e6
    counts = slots.steps_per_rank()
    rank_ms = np.where(counts > 0, rank_ms, np.nan)
    seen = rank_ms[np.isfinite(rank_ms)]
    step_ms = float(np.median(seen)) if len(seen) else float("nan")
    step = slots.step
    per_step = _per_step_mean(step, slots.dur_ns.astype(np.float64) / 1e6)
    steps = (int(counts.min()), int(counts.max())) if len(counts) else (0, 0)
    side = RunSide(str(rec.path), RANK_FILES, an.world_size, len(an.hostnames), steps, step_ms,
                   spread(rank_ms), None, StepSeries.of(per_step), rec.verdict.line)  # fmt: skip
    return ReadRun(side, rec.verdict, None)


def _per_step_mean(step: np.ndarray, ms: np.ndarray) -> np.ndarray:
    """The mean of ``ms`` over the ranks of each step."""
    if not len(step):
        return np.zeros(0)
    keys, index = np.unique(step, return_inverse=True)
    return np.bincount(index, weights=ms, minlength=len(keys)) / np.bincount(index)
