"""The suite's files in order of cost, so that xdist starts the dearest first: with
``--dist loadfile`` a worker runs a whole file, and a 100-s file handed out last keeps one
worker busy while the others idle (CI's tail). The costs are seconds per file of a whole
run's JUnit report (setup, call and teardown), refreshed with

    .venv/bin/pytest -n 3 --dist loadfile -m "not heavy" --junitxml=/tmp/junit.xml
    .venv/bin/python tests/helpers/file_costs.py /tmp/junit.xml

A file not listed (a new one) counts as ``NEW_LIVE_S`` when it starts processes, else
``NEW_S``: the order is a guess, never a result, so a stale entry costs minutes, not a test.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COSTS = ROOT / "tests" / "data" / "file_costs.json"
NEW_LIVE_S = 20.0
NEW_S = 0.5


def load() -> dict[str, float]:
    return json.loads(COSTS.read_text()) if COSTS.exists() else {}


def cost(costs: dict[str, float], relpath: str, live: bool) -> float:
    return costs.get(relpath, NEW_LIVE_S if live else NEW_S)


def from_junit(path: Path) -> dict[str, float]:
    """Seconds per test file (``tests/e2e/test_x.py``) of a JUnit report."""
    per: Counter[str] = Counter()
    for case in ET.parse(path).iter("testcase"):
        per[_file_of(case.get("classname", ""))] += float(case.get("time") or 0.0)
    return {name: round(s, 1) for name, s in sorted(per.items(), key=lambda kv: -kv[1])}


def _file_of(classname: str) -> str:
    """``tests.e2e.test_x`` or ``tests.e2e.test_x.TestCase`` -> ``tests/e2e/test_x.py``."""
    parts = classname.split(".")
    for n in range(len(parts), 0, -1):
        name = "/".join(parts[:n]) + ".py"
        if (ROOT / name).exists():
            return name
    return "/".join(parts) + ".py"


if __name__ == "__main__":
    COSTS.write_text(json.dumps(from_junit(Path(sys.argv[1])), indent=1) + "\n")
    print(f"wrote {COSTS}")
