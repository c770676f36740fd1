"""Columns of the event table and the on-disk Arrow schema (see docs/schema.md)."""

from __future__ import annotations

from enum import IntEnum

import numpy as np
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
    WAIT = 4
    """The host blocked in ``Work.wait`` of a send or receive: op, group, peer; ``seq`` is
    the op's index among this rank's ops of that name with that peer on that group."""
    SUMMARY = 5
    """A step's calls of one (group, op, size class, peer) folded into one row (``--record
    summary``, probe/summary.py): ``nbytes`` their bytes, ``count`` the calls, ``dur_ns`` their
    time in the call, ``start_ns`` their arrivals' offsets from the step's start, summed;
    ``seq`` the size class (floor(log2(bytes per call)), -1 for no bytes); docs/schema.md."""
    CPU = 6
    """CPU time over the PHASE row that starts at the same ``start_ns`` on the same rank:
    ``dur_ns`` the phase's time on the host clock (a device-timed phase's row holds the
    device's), ``count`` the process's CPU ns (all its threads), ``seq`` the training thread's
    (-1 where unreadable); ``name`` the phase's name as recorded (probe/cpu_clock.py)."""


WAIT_PREFIX = "wait:"
"""A SUMMARY row's name for the host's waits on a send or recv (WAIT rows): ``wait:<op>``."""


PHASES = ("data", "to_device", "forward", "backward", "comm_wait", "optimizer")
"""Phase names in the order a step runs them."""
TO_DEVICE = "to_device"
"""The batch's copies to the device (probe/batch_copies.py)."""
OPTIONAL_PHASES = (TO_DEVICE,)
"""Phases only some loops have (batches copied to a GPU): never reported missing."""

EVAL = "eval"
"""A forward pass outside training (grad disabled or the module in eval mode), with the
batches fetched for it: evaluation, not counted as training forward or samples."""
CHECKPOINT = "checkpoint"
"""A ``torch.save`` call; ``nbytes`` holds what it wrote."""
EXTRA_PHASES = (EVAL, CHECKPOINT)
"""Work beside training that a step may hold; outside PHASES, so its time counts as the
step's host work (``other``) and is told apart by name (analyze/steps/extra_work.py)."""

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
    "peer": "int32",
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
    "peer",
)
"""Order of the fields of a row tuple as the probe appends it (rank is per file). A row
without the last field (``peer``) is written with -1 there."""

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
        ("peer", pa.int32()),
    ],
    metadata={"scalescope.schema": "events/3"},
)

NO_PEER = -1
"""The ``peer`` of a row that has none (all but send, recv and their waits)."""

V1_SCHEMA = pa.schema(list(ARROW_SCHEMA)[:-1], metadata={"scalescope.schema": "events/1"})
"""``events/1``: the same columns without ``peer`` (files written before it existed).
``events/2`` has the columns of ``events/3``, without SUMMARY rows: both load as they are."""


def upgraded(table: pa.Table) -> pa.Table:
    """An ``events/1`` table with ``peer`` -1 on every row; a later one as it is."""
    if "peer" in table.column_names:
        return table
    peer = pa.array(np.full(table.num_rows, NO_PEER, dtype=np.int32))
    return table.append_column(ARROW_SCHEMA.field("peer"), peer).replace_schema_metadata(
        ARROW_SCHEMA.metadata
    )


def known_schema(schema: pa.Schema) -> bool:
    bare = schema.remove_metadata()
    return bare == ARROW_SCHEMA.remove_metadata() or bare == V1_SCHEMA.remove_metadata()
