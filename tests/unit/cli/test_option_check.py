"""Reading a command's own arguments in front of the script."""

from __future__ import annotations

import pytest

from scalescope.cli.option_check import Scan, closest, scan

ARITY = {"-n": True, "--nproc-per-node": True, "-m": False, "--module": False,
         "--run-dir": True, "--no-probe": False}  # fmt: skip


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["-n", "2", "train.py", "--bogus", "--", "-x"], Scan(None, 3)),
        (["-n2", "--run-dir=d", "train.py"], Scan(None, 3)),
        (["--no-probe", "--", "train.py", "--run-dir", "x"], Scan(None, 3)),
        (["-m", "pkg.train", "-n", "4"], Scan(None, 2)),
        (["-n", "2", "--run-dri", "d", "train.py"], Scan("--run-dri", 2)),
        (["-x", "train.py"], Scan("-x", 0)),
        (["--run-dir", "--odd-name", "train.py"], Scan(None, 3)),  # a value, not an option
        ([], Scan(None, 0)),
    ],
)
def test_scan_stops_at_the_script(args: list[str], expected: Scan) -> None:
    assert scan(args, ARITY, passthrough=True) == expected


def test_without_passthrough_every_option_is_read() -> None:
    assert scan(["resnet18", "--no-probe", "--bogus"], ARITY, passthrough=False).unknown == (
        "--bogus"
    )


def test_closest() -> None:
    known = list(ARITY)
    assert closest("--run-dri", known) == "--run-dir"
    assert closest("--nproc", known) == "--nproc-per-node"  # a unique prefix
    assert closest("--ranks", known) is None
