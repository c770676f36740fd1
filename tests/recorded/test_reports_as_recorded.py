"""The report of every recorded run (tests/data/runs/) is the one recorded with it: the same
text, findings in the same order, shares and savings to 0.1 point, the same verdict.

A deliberate change to the analysis, the diagnosis or the report's words makes these fail
with the difference; ``tests/data/record.py --reports-only`` then writes the new reports and
prints the same difference, to read before committing it. What the findings must say
whatever the words are (the bottleneck, its rank, its share against the truth measured
beside the run) is test_against_truth.py's.
"""

from __future__ import annotations

import difflib
import subprocess
import sys
from typing import Any

import pytest
from recorded_runs import RUNS, load_scenario, recorded_report, report_of, scenario_names

NAMES = scenario_names()
REPLAY = "tests/data/record.py --reports-only"
RECORDER = RUNS.parent / "record.py"


def rounded(value: Any) -> Any:
    """Floats to 0.1 (shares in points, savings in ms): what the report shows and the test
    holds exactly, whatever the last bits of a sum on another cpu."""
    if isinstance(value, float):
        return round(value, 1)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v) for v in value]
    return value


def test_every_scenario_the_issue_names_is_recorded() -> None:
    needed = {"balanced", "input_bound", "oversubscribed", "straggler_shared_core",
              "compute_resnet50", "comm_bound", "straggler_outside_3", "hang_host",
              "hang_mismatch", "replicas", "failed_rank", "killed_rank", "profiled"}  # fmt: skip
    needed |= {f"straggler_{w}_2" for w in ("data", "forward", "backward", "optimizer")}
    assert needed <= set(NAMES)


def recorder(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(RECORDER), *args], capture_output=True, text=True)


def test_the_recorder_records_every_scenario_here_and_nothing_else() -> None:
    done = recorder("--list")
    assert done.returncode == 0, done.stderr
    scenarios = [n for n in done.stdout.split() if not n.endswith("_traces")]
    assert sorted(scenarios) == NAMES


def test_the_recorder_refuses_an_unknown_scenario_before_recording() -> None:
    done = recorder("nosuch", "balanced")
    assert done.returncode == 2
    assert "unknown scenario(s): nosuch" in done.stderr.splitlines()[-1]


@pytest.fixture(scope="module", params=NAMES)
def both(request) -> tuple:
    s = load_scenario(request.param)
    return s, report_of(s), recorded_report(s)


def test_report_text_is_as_recorded(both) -> None:
    s, now, then = both
    if now.text != then.text:
        diff = difflib.unified_diff(then.text.splitlines(), now.text.splitlines(), lineterm="")
        pytest.fail(f"{s.name}: the report changed (if meant: {REPLAY}):\n" + "\n".join(diff))
    assert now.exit_code == then.exit_code


def test_findings_order_shares_and_verdict_are_as_recorded(both) -> None:
    _s, now, then = both
    got, want = rounded(now.diagnosis), rounded(then.diagnosis)
    assert got["verdict"] == want["verdict"]
    assert [f["code"] for f in got["findings"]] == [f["code"] for f in want["findings"]]
    for a, b in zip(got["findings"], want["findings"], strict=True):
        key = (a["code"], a.get("rank"))
        assert (a["share_pct"], a["saved_ms_per_step"]) == (
            b["share_pct"],
            b["saved_ms_per_step"],
        ), key
    assert got == want
