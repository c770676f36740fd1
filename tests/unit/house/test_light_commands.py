"""Commands that read records (analyze, report, top, compare) start in well under a second:
none of them imports torch. A data view once pulled torch and torchvision into every
``analyze`` through a progress bar: 4 s of CPU before the first line. A launch refused for a
bad option says so before torch is imported too (run: 2.6 s, now 0.7 s; bench: 5 s)."""

from __future__ import annotations

import os
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
        (["bench", "resnet18", "--data", "no_such_dir"], "--data no_such_dir: does not exist"),
        (["bench", "resnet18", "--data", "train.py"], "is not a directory"),
    ],
)
def test_a_refused_launch_does_not_import_torch(tmp_path, args, error):
    (tmp_path / "train.py").write_text("print('never run')\n")
    lines = _stderr_lines(tmp_path, args)
    assert lines[-1] == "NO TORCH", lines
    assert any(error in line for line in lines[:-1]), lines


def test_model_names_are_listed_once_then_read_from_the_cache(tmp_path):
    """Listing torchvision's models imports it: the first unknown model pays for that, the
    next one (and every bench launcher after) reads the names kept on disk."""
    env = os.environ | {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    first = _stderr_lines(tmp_path, ["bench", "resnet1"], env)
    again = _stderr_lines(tmp_path, ["bench", "resnet1"], env)
    assert (first[-1], again[-1]) == ("TORCH", "NO TORCH")
    assert first[:-1] == again[:-1], "the same error from the kept names"
    assert "unknown model 'resnet1'; valid models:" in again[0] and "resnet50" in again[0]


def _stderr_lines(cwd, args: list[str], env: dict[str, str] | None = None) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], cwd=cwd, capture_output=True, text=True,
        timeout=120, env=env,
    )  # fmt: skip
    return done.stderr.strip().splitlines()
