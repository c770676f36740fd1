"""Commands that read records (analyze, report, top, compare) start in well under a second:
none of them imports torch. A data view once pulled torch and torchvision into every
``analyze`` through a progress bar: 4 s of CPU before the first line."""

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
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], cwd=tmp_path, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    lines = done.stderr.strip().splitlines()
    assert lines[-1] == "NO TORCH", done.stderr
    assert any("no_such" in line for line in lines[:-1]), "the command's own error came first"
