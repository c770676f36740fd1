"""Puts ``tests/helpers`` on sys.path, so unit and e2e tests import its modules by name."""

from __future__ import annotations

import sys
from pathlib import Path

HELPERS = str(Path(__file__).parent / "helpers")
if HELPERS not in sys.path:
    sys.path.insert(0, HELPERS)
