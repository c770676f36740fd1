"""Options of `scalescope comm`: sizes like nccl-tests -b/-e/-f, op names, and bad input
through the real command (in-process: every error is raised before a rank starts)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from scalescope.bench.comm_options import CommOptions, parse_bytes, parse_op, parse_sizes
from scalescope.cli import app


def test_sizes_step_by_the_factor_like_nccl_tests():
    sizes = parse_sizes("8:256M", 2)
    assert sizes[0] == 8 and sizes[-1] == 256 * 2**20 and len(sizes) == 26
    assert all(b == 2 * a for a, b in zip(sizes, sizes[1:], strict=False))
    assert parse_sizes("8:1M", 64) == (8, 512, 32768)
    assert parse_sizes("1M,8,8", 2) == (8, 2**20)
    assert parse_bytes("64K") == 65536 and parse_bytes("1GiB") == 2**30


def test_op_spellings_map_to_the_probes_names():
    spellings = ("allreduce", "all_reduce", "AllGather", "alltoall", "reduce-scatter")
    assert [parse_op(o) for o in spellings] == [
        "all_reduce", "all_reduce", "all_gather", "all_to_all", "reduce_scatter",
    ]  # fmt: skip
    opts = CommOptions.parse("allreduce,all_reduce,sendrecv", "8", 2, "float32", "gloo", 1, 0)
    assert opts.ops == ("all_reduce", "sendrecv")


def test_backend_split_names_why_one_cannot_run():
    opts = CommOptions.parse("allreduce", "8", 2, "float32", "gloo,mpi", 1, 0)
    runnable, unavailable = opts.split_backends()
    assert runnable == ("gloo",) and "MPI" in unavailable["mpi"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ops", "allreduce,bogus[x]"], "unknown op 'bogus[x]'"),
        (["--ops", ","], "--ops is empty"),
        (["--sizes", "8:4"], "need 1 <= MIN <= MAX"),
        (["--sizes", "8M:1K"], "need 1 <= MIN <= MAX"),
        (["--sizes", "eight"], "not a size: 'eight'"),
        (["--sizes", "1:1G", "--factor", "1"], "--factor must be 2 or more"),
        (["--dtype", "float128"], "unknown --dtype 'float128'"),
        (["--backend", "mpi"], "no backend can run here"),
        (["--backend", "ucc"], "unknown --backend 'ucc'"),
    ],
)
def test_bad_input_is_one_clear_error(args, message, tmp_path):
    result = CliRunner().invoke(app, ["comm", "-n", "2", *args, "--run-dir", str(tmp_path / "r")])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert message in text
    assert not (tmp_path / "r").exists()
