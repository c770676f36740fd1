"""Puts ``tests/helpers`` on sys.path, so unit and e2e tests import its modules by name."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HELPERS = str(Path(__file__).parent / "helpers")
if HELPERS not in sys.path:
    sys.path.insert(0, HELPERS)


TIMED_MODULES = frozenset(
    {
        "test_comm_reference.py",
        "test_diagnosis_real.py",
        "test_ingest_vs_probe.py",
        "test_project_real.py",
        "test_straggler_phases_real.py",
        "test_straggler_real.py",
        "test_tune.py",
    }
)
"""Modules whose assertions compare times measured on this machine against a truth timed
beside them, or that wait for idle cpus (``real_runs.quietly``): ``make test`` runs them
alone, after the rest has run two at a time."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in TIMED_MODULES:
            item.add_marker(pytest.mark.timed)
