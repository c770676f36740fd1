"""Columns of the event table and the on-disk Arrow schema (see docs/schema.md)."""

from __future__ import annotations

from enum import IntEnum

import pyarrow as pa


class Kind(IntEnum):
    """What a row of the event table describes."""

    PHASE = 0
    """A part of a training step: data, to_device, forward, backward, comm_wait, optimizer."""
    COLLECTIVE = 1
    """One collective call: op name, bytes, dtype, group, per-group sequence number, tag."""
    STEP = 2
    """A whole step; ``count`` holds the samples this rank processed in it."""
    MEMORY = 3
    """A memory peak over a step; ``nbytes`` holds the peak."""


PHASES = ("data", "to_device", "forward", "backward", "comm_wait", "optimizer")
"""Phase names in the order a step runs them."""
OPTIONAL_PHASES = ("to_device",)
"""Phases only some loops have (batches copied to a GPU): never reported missing."""

EVAL = "eval"
"""A forward pass outside training (grad disabled or the module in eval mode), with the
batches fetched for it: evaluation, not counted as training forward or samples."""
CHECKPOINT = "checkpoint"
"""A ``torch.save`` call; ``nbytes`` holds what it wrote."""
EXTRA_PHASES = (EVAL, CHECKPOINT)
"""Work beside training that a step may hold; outside PHASES, so its time counts as the
step's host work (``other``) and is told apart by name (analyze/extra_work.py)."""

STRING_COLUMNS = ("name", "dtype", "group", "tag")
"""Columns that hold strings on disk and symbol ids in memory."""

INT_COLUMNS = {
    "rank": "int32",
    "step": "int32",
    "kind": "int8",
    "start_ns": "int64",
    "dur_ns": "int64",
    "nbytes": "int64",
    "count": "int64",
    "seq": "int64",
}

ROW_FIELDS = (
    "step",
    "kind",
    "name",
    "start_ns",
    "dur_ns",
    "nbytes",
    "count",
    "dtype",
    "group",
    "seq",
    "tag",
)
"""Order of the fields of a row tuple as the probe appends it (rank is per file)."""

ARROW_SCHEMA = pa.schema(
    [
        ("rank", pa.int32()),
        ("step", pa.int32()),
        ("kind", pa.int8()),
        ("name", pa.string()),
        ("start_ns", pa.int64()),
        ("dur_ns", pa.int64()),
        ("nbytes", pa.int64()),
        ("count", pa.int64()),
        ("dtype", pa.string()),
        ("group", pa.string()),
        ("seq", pa.int64()),
        ("tag", pa.string()),
    ],
    metadata={"scalescope.schema": "events/1"},
)
