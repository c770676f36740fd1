"""Measured steps as sorted (rank, step) keys, and where rows of any kind fall among them:
one gather in a dense (rank, step) table, or a binary search when that table would be too
large."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalescope.events import EventTable, Kind

STEP_BITS = 32


def step_key(rank: np.ndarray, step: np.ndarray) -> np.ndarray:
    return (rank.astype(np.int64) << STEP_BITS) + step.astype(np.int64)


DENSE_MAX = 16_000_000
"""Cells of the dense (rank, step) table at most (64 MB of int32)."""


def key_step(keys: np.ndarray) -> np.ndarray:
    """The step number of each ``step_key``."""
    return keys & ((1 << STEP_BITS) - 1)


Dense = tuple[np.ndarray, int, int] | None
"""A (rank, step) -> slot table with its first rank and step (None: too large to make)."""


def dense_table(keys: np.ndarray) -> Dense:
    if len(keys) == 0:
        return None
    rank, step = keys >> STEP_BITS, key_step(keys)
    rank0, step0 = int(rank.min()), int(step.min())
    shape = (int(rank.max()) - rank0 + 1, int(step.max()) - step0 + 1)
    if shape[0] * shape[1] > DENSE_MAX:
        return None
    table = np.full(shape, -1, dtype=np.int32)
    table[rank - rank0, step - step0] = np.arange(len(keys), dtype=np.int32)
    return table, rank0, step0


def slot_lookup(keys: np.ndarray, rank: np.ndarray, step: np.ndarray) -> np.ndarray:
    """The index in ``keys`` (sorted, unique ``step_key``s) of each (rank, step); -1 where
    absent."""
    return find(keys, dense_table(keys), rank, step)


def find(keys: np.ndarray, dense: Dense, rank: np.ndarray, step: np.ndarray) -> np.ndarray:
    """A gather in the dense table when there is one, else a binary search of ``keys``."""
    if dense is None:
        return _slot_of(keys, rank, step)
    table, rank0, step0 = dense
    flat = rank.astype(np.int64)  # built in place: millions of rows, few temporaries
    flat -= rank0
    s = step.astype(np.int64)
    s -= step0
    ok = flat.view(np.uint64) < table.shape[0]  # a negative offset is a huge unsigned one
    ok &= s.view(np.uint64) < table.shape[1]
    flat *= table.shape[1]
    flat += s
    if ok.all():  # the usual case: one gather, no masked copies
        return table.ravel()[flat].astype(np.int64)
    out = np.full(len(rank), -1, dtype=np.int64)
    out[ok] = table.ravel()[flat[ok]]
    return out


def _slot_of(keys: np.ndarray, rank: np.ndarray, step: np.ndarray) -> np.ndarray:
    if len(keys) == 0:
        return np.full(len(rank), -1, dtype=np.int64)
    wanted = step_key(rank, step)
    idx = np.minimum(np.searchsorted(keys, wanted), len(keys) - 1)
    return np.where(keys[idx] == wanted, idx, -1)


@dataclass(frozen=True)
class MeasuredSteps:
    """The STEP rows that statistics are taken over."""

    rows: EventTable
    warmup_fallback: bool


def measured_steps(events: EventTable, warmup_steps: int) -> MeasuredSteps:
    """STEP rows with step >= warmup_steps, or all STEP rows when that leaves none."""
    steps = events.of_kind(Kind.STEP)
    mask = steps.step >= warmup_steps
    if mask.any() or len(steps) == 0:
        return MeasuredSteps(steps.select(mask), warmup_fallback=False)
    return MeasuredSteps(steps, warmup_fallback=True)
