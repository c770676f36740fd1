"""Puts ``tests/helpers`` on sys.path, so unit and e2e tests import its modules by name, and
points the live channel's key at a temporary file."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

HELPERS = str(Path(__file__).parent / "helpers")
if HELPERS not in sys.path:
    sys.path.insert(0, HELPERS)

import file_costs  # noqa: E402

KEY_DIR = tempfile.mkdtemp(prefix="scalescope-key-")
os.environ["SCALESCOPE_KEY_FILE"] = str(Path(KEY_DIR) / "key")
"""The live channel's key (launch/channel/seals.py) for every process the tests start, created
on first use: never the user's own ~/.scalescope/key."""
atexit.register(shutil.rmtree, KEY_DIR, ignore_errors=True)

LIVE_UNIT_MODULES = frozenset(
    {
        "test_bench_knobs_applied.py",
        "test_sequence_models.py",
        "test_light_commands.py",
        "test_mapping.py",
        "test_rendezvous.py",
        "test_rendezvous_ranks.py",
        "test_topology.py",
        "test_live_view.py",
        "test_live_channel.py",
        "test_channel_job.py",
    }
)
"""Unit modules that start processes (ranks, a launcher, the CLI) besides tests/e2e."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``live``: the tests that start real processes, the only ones that can flake
    (benchmarks/flake_rate.py runs them as a stage; docs/testing.md). The files in order of
    cost, dearest first (file_costs.py: make test hands whole files to its workers in this
    order, ``--no-loadscope-reorder``)."""
    live = {item.path for item in items if _is_live(item.path)}
    for item in items:
        if item.path in live:
            item.add_marker(pytest.mark.live)
    costs, root = file_costs.load(), config.rootpath
    items.sort(
        key=lambda item: (
            -file_costs.cost(costs, item.path.relative_to(root).as_posix(), item.path in live)
        )
    )


def _is_live(path: Path) -> bool:
    return "e2e" in path.parts or path.name in LIVE_UNIT_MODULES
