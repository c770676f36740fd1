"""Each finding's mesh dimension (diagnose/dimensions.py), from the collectives per op and
dimension: the one whose calls took the most time, tensor parallelism left out of the
communication findings where other dimensions issued collectives, none for the world's
group or for findings that are not about collectives."""

from __future__ import annotations

import pytest

from scalescope.analyze.comm.collectives import OpTotals
from scalescope.diagnose.dimensions import finding_dim


def ops(*rows: tuple[str, str, float, int]) -> tuple[OpTotals, ...]:
    """(op, dim, ms per rank, ranks) each."""
    return tuple(
        OpTotals(op, "user", ranks, 10 * ranks, 10.0, ms, 1e6, 0, dim=dim)
        for op, dim, ms, ranks in rows
    )


MESH = ops(
    ("all_reduce", "tp", 40.0, 8),
    ("all_gather", "dp", 12.0, 8),
    ("reduce_scatter", "dp", 6.0, 8),
    ("all_reduce", "dp_replicate", 10.0, 8),
    ("send", "pp", 3.0, 4),
    ("recv", "pp", 5.0, 4),
)


@pytest.mark.parametrize(
    ("code", "dim"),
    [
        ("TP_COMM", "tp"),
        ("TP_ACROSS_NODES", "tp"),
        ("COMM_BANDWIDTH", "dp"),  # 18 ms on dp against 10 on dp_replicate; tp left out
        ("ZERO3_PARAM_GATHER", "dp"),
        ("ZERO_EXCHANGE", "dp_replicate"),  # 10 ms of all-reduce against 6 of reduce-scatter
        ("PIPELINE_BUBBLE", "pp"),
        ("STAGE_IMBALANCE", "pp"),
        ("STRAGGLER", ""),
        ("INPUT_BOUND", ""),
    ],
)
def test_a_finding_names_the_dimension_of_its_calls(code, dim):
    assert finding_dim(code, MESH) == dim


def test_time_is_weighed_by_the_ranks_that_issued_it():
    rows = ops(("send", "pp", 5.0, 2), ("send", "stride 4", 3.0, 8))
    assert finding_dim("PIPELINE_BUBBLE", rows) == "stride 4"


def test_communication_on_tensor_parallel_groups_alone_is_theirs():
    assert finding_dim("COMM_LATENCY", ops(("all_reduce", "tp", 4.0, 4))) == "tp"


def test_calls_on_the_worlds_group_concern_the_whole_job():
    rows = ops(("send", "world", 9.0, 4), ("send", "pp", 1.0, 4))
    assert finding_dim("PIPELINE_BUBBLE", rows) == ""
    assert finding_dim("PIPELINE_BUBBLE", ops(("all_reduce", "pp", 1.0, 4))) == ""
