"""The pytest modules of ``make bench`` (benchmarks/run_all.py runs them alone on the machine;
CI does not):

- ``accuracy/``: accuracy against a truth on live runs. Each test makes a bottleneck or a
  search on this machine and compares what scalescope says with a truth timed beside it, which
  a shared 2-core VM can miss without anything being broken (docs/testing.md). The exact
  checks of the same scenarios, on runs recorded once, are tests/recorded/.
- ``live/``: live plumbing too heavy for CI's time budget (the 32-rank run). Structure only,
  like tests/e2e; CI keeps a smaller run of the same plumbing (docs/testing.md says which).

The modules use the end-to-end helpers of tests/e2e (``conftest``, ``real_runs``,
``tune_runs``, the e2e test modules' check functions) and tests/helpers: this conftest puts
them on the path and is ``conftest`` for them here (one conftest for both folders: tests
import it by name).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent
TESTS = BENCHMARKS.parent / "tests"
for folder in (TESTS / "helpers", TESTS / "e2e", BENCHMARKS):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
os.environ.setdefault("SCALESCOPE_TESTS_ALONE", "1")


def _e2e_conftest():
    spec = importlib.util.spec_from_file_location("e2e_conftest", TESTS / "e2e" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_e2e = _e2e_conftest()
SCRIPTS, DDP_TRAIN = _e2e.SCRIPTS, _e2e.DDP_TRAIN
cli_env, scalescope, scalescope_in_process = (
    _e2e.cli_env,
    _e2e.scalescope,
    _e2e.scalescope_in_process,
)
start_scalescope, run_cli, run_then_report = (
    _e2e.start_scalescope,
    _e2e.run_cli,
    _e2e.run_then_report,
)
netns_unavailable, veth_hosts = _e2e.netns_unavailable, _e2e.veth_hosts


def figure(
    what: str, reported: float, truth: float, tolerance: float, unit: str = "points"
) -> None:
    """One row of docs/benchmarks.md (through ``make bench``): how far a reported figure was
    from its truth, against the tolerance the test holds it to."""
    from results import record

    off = reported - truth
    detail = f"reported {reported:.1f}, truth {truth:.1f}"
    record(f"{what}: reported - truth", off, unit, f"|x| <= {tolerance:g}", abs(off) <= tolerance,
           detail)  # fmt: skip
