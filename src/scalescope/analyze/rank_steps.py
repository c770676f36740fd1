"""Step time and waiting per rank and measured step, binned for the ranks x steps heatmaps.

Up to ``MAX_ROWS`` ranks each rank is a row and up to ``MAX_COLUMNS`` steps each step a
column; beyond, consecutive ranks (steps) are put in equal bins and a cell is the mean over the
rank-steps of its bin, so the grid stays small at any size. Waiting is each matched collective
row's wait for the last rank to arrive (``analyze/ranks/matching.py``), on the cross-rank clocks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from scalescope.analyze.ranks.matching import match_collectives
from scalescope.analyze.summary import RunAnalysis
from scalescope.events import Kind, Run

MAX_ROWS = 1024
"""Ranks a heatmap shows one row each; beyond, rows of equal bins of consecutive ranks."""
MAX_COLUMNS = 200
"""Steps a heatmap shows one column each; beyond, columns of equal bins of steps."""


@dataclass(frozen=True)
class Bins:
    """Rows of ``rank_bin`` consecutive ranks (in rank order), columns of ``step_bin`` steps
    from ``first_step``."""

    ranks: np.ndarray
    rank_bin: int
    first_step: int
    num_steps: int
    step_bin: int

    @property
    def shape(self) -> tuple[int, int]:
        return math.ceil(len(self.ranks) / self.rank_bin), math.ceil(self.num_steps / self.step_bin)

    def cells(self, rank: np.ndarray, step: np.ndarray) -> np.ndarray:
        """Flat cell index of each (rank, step); -1 outside the heatmap."""
        pos = np.searchsorted(self.ranks, rank)
        pos_ok = np.minimum(pos, len(self.ranks) - 1)
        inside = (self.ranks[pos_ok] == rank) & (step >= self.first_step)
        inside &= step < self.first_step + self.num_steps
        rows, cols = self.shape
        cell = (pos_ok // self.rank_bin) * cols + (step - self.first_step) // self.step_bin
        return np.where(inside, cell, -1)

    def row_labels(self) -> list[str]:
        ranks = self.ranks.tolist()
        if self.rank_bin == 1:
            return [f"rank {r}" for r in ranks]
        groups = [ranks[i : i + self.rank_bin] for i in range(0, len(ranks), self.rank_bin)]
        return [f"ranks {g[0]}-{g[-1]}" for g in groups]

    def column_starts(self) -> list[int]:
        return list(range(self.first_step, self.first_step + self.num_steps, self.step_bin))


@dataclass(frozen=True)
class RankStepGrid:
    """Mean ms per rank-step of each cell (NaN: no step there)."""

    bins: Bins
    step_ms: np.ndarray
    wait_ms: np.ndarray | None
    """None without a cross-rank analysis."""


def _measured_steps(run: Run, warmup: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rank, step, dur_ns) of completed STEP rows after warm-up (all of them if none is)."""
    ev = run.events
    done = (ev.kind == int(Kind.STEP)) & (ev.dur_ns >= 0)
    after = done & (ev.step >= warmup)
    keep = after if after.any() else done
    return ev.rank[keep].astype(np.int64), ev.step[keep].astype(np.int64), ev.dur_ns[keep]


def _cell_means(
    bins: Bins, cells: np.ndarray, weights: np.ndarray, counts: np.ndarray
) -> np.ndarray:
    rows, cols = bins.shape
    inside = cells >= 0
    sums = np.bincount(cells[inside], weights=weights[inside], minlength=rows * cols)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    return means.reshape(rows, cols).astype(np.float32)


def _wait_ns(analysis: RunAnalysis, run: Run) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(rank, step, wait_ns) of every matched collective row, on the cross-rank clocks."""
    cross = analysis.cross_rank
    if cross is None:
        return None
    matched = match_collectives(run.events, cross.clocks, int(cross.tie_tolerance_us * 1e3))
    if matched is None:
        return None
    return matched.rank.astype(np.int64), matched.step.astype(np.int64), matched.wait_ns


def rank_step_grid(analysis: RunAnalysis, run: Run) -> RankStepGrid | None:
    """Step time and waiting per rank and measured step, binned; None without steps."""
    rank, step, dur = _measured_steps(run, analysis.warmup_steps)
    if len(rank) == 0:
        return None
    ranks = np.unique(rank)
    first, last = int(step.min()), int(step.max())
    num_steps = last - first + 1
    bins = Bins(
        ranks=ranks,
        rank_bin=math.ceil(len(ranks) / MAX_ROWS),
        first_step=first,
        num_steps=num_steps,
        step_bin=math.ceil(num_steps / MAX_COLUMNS),
    )
    rows, cols = bins.shape
    cells = bins.cells(rank, step)
    counts = np.bincount(cells[cells >= 0], minlength=rows * cols)
    step_ms = _cell_means(bins, cells, dur / 1e6, counts)
    waits = _wait_ns(analysis, run)
    wait_ms = None
    if waits is not None:
        w_rank, w_step, w_ns = waits
        wait_ms = _cell_means(bins, bins.cells(w_rank, w_step), w_ns / 1e6, counts)
    return RankStepGrid(bins, step_ms, wait_ms)
