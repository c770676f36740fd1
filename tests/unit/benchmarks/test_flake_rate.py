"""benchmarks/flake_rate.py's row of one stage run, from the JUnit file pytest writes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from flake_rate import StageRun, record_cases  # noqa: E402
from run_all import parse_junit  # noqa: E402

CASES = """
import pytest

def test_ok():
    pass

def test_broken():
    assert 1 == 2, "one is not two"

@pytest.mark.skip(reason="needs an idle machine, load 3.2")
def test_skipped():
    pass
"""


def test_a_stage_run_counts_and_names_what_failed_and_skipped(tmp_path: Path) -> None:
    (tmp_path / "test_cases.py").write_text(CASES)
    xml = tmp_path / "junit.xml"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path),
           f"--junitxml={xml}", "--rootdir", str(tmp_path)]  # fmt: skip
    subprocess.run(cmd, cwd=tmp_path, capture_output=True, check=False)
    run = StageRun("2026-11-25 21:51", 1.4, 0, 456.0)
    record_cases(parse_junit(xml, tmp_path), run)
    assert run.passed == 1
    assert len(run.failed) == 1 and run.failed[0].startswith("test_cases.py::test_broken (")
    assert "one is not two" in run.failed[0]
    assert run.skipped == ["test_cases.py::test_skipped (needs an idle machine, load 3.2)"]
    row = run.row().split(" | ")
    assert row[3:7] == ["1", "1", "1", "456 s"]
