"""Puts ``tests/helpers`` on sys.path, so unit and e2e tests import its modules by name."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HELPERS = str(Path(__file__).parent / "helpers")
if HELPERS not in sys.path:
    sys.path.insert(0, HELPERS)


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
    }
)
"""Unit modules that start processes (ranks, a launcher, the CLI) besides tests/e2e."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """``live``: the tests that start real processes, the only ones that can flake
    (benchmarks/flake_rate.py runs them as a stage; docs/testing.md)."""
    for item in items:
        if "e2e" in item.path.parts or item.path.name in LIVE_UNIT_MODULES:
            item.add_marker(pytest.mark.live)
