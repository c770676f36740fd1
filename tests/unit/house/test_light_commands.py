"""Commands that read records (analyze, report, top, compare) start in well under a second:
none of them imports torch. A data view once pulled torch and torchvision into every
``analyze`` through a progress bar: 4 s of CPU before the first line. A launch refused for a
bad option says so before torch is imported too (it was 2.6 s, now 0.7 s)."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import sys
from scalescope.cli import main
try:
    main()
except SystemExit:
    pass
print("TORCH" if "torch" in sys.modules else "NO TORCH", file=sys.stderr)
"""


@pytest.mark.parametrize(
    "args",
    [
        ["analyze", "no_such_trace.json"],
        ["report", "no_such_run"],
        ["top", "--once", "no_such_run"],
        ["compare", "no_such_a", "no_such_b"],
    ],
)
def test_reading_commands_do_not_import_torch(tmp_path, args):
    lines = _stderr_lines(tmp_path, args)
    assert lines[-1] == "NO TORCH", lines
    assert any("no_such" in line for line in lines[:-1]), "the command's own error came first"


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["run", "--map-by", "rack", "train.py"], "unknown --map-by 'rack'"),
        (["run", "-n", "64", "train.py"], "64 ranks × 1 thread = 64 >"),
        (["run", "-n", "2", "no_such.py"], "script not found: no_such.py"),
        (["run", "--nnodes", "2", "train.py"], "several nodes need --rdzv-endpoint"),
    ],
)
def test_a_refused_launch_does_not_import_torch(tmp_path, args, error):
    (tmp_path / "train.py").write_text("print('never run')\n")
    lines = _stderr_lines(tmp_path, args)
    assert lines[-1] == "NO TORCH", lines
    assert any(error in line for line in lines[:-1]), lines


def _stderr_lines(cwd, args: list[str]) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], cwd=cwd, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    return done.stderr.strip().splitlines()
