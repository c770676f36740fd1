"""``Recording`` is the one builder of a run's analysis: each part computed once, on first use,
from the parts it needs; reading the steps runs neither the what-if nor the findings."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from recorded_runs import RUNS

from scalescope import load
from scalescope.analyze.summary import REPORTED, RunAnalysis
from scalescope.diagnose.recording import Recording

SRC = Path(__file__).parents[3] / "src" / "scalescope"


def test_reading_the_steps_builds_neither_the_what_if_nor_the_findings() -> None:
    rec = load(RUNS / "straggler_forward_2" / "run")
    assert rec.steps().num_rows > 0
    built = rec.analysis.builds
    assert "whatif" not in built and "cross_rank" not in built and "links" not in built
    assert "diagnosis" not in rec.__dict__, "the findings are not made to read a table"


@pytest.mark.parametrize("name", ["p2p_pipeline", "slowdown_link", "fsdp_tp"])
def test_each_part_is_built_at_most_once(name: str) -> None:
    rec = Recording.load(RUNS / name / "run")
    rec.analysis.reported()
    first = rec.verdict
    rec.analysis.reported()
    assert rec.verdict is first
    counts = rec.analysis.builds
    assert set(REPORTED) <= set(counts) and max(counts.values()) == 1, counts
    assert counts["clocks"] == 1, "clocks are aligned once for every part"


def test_the_what_if_replays_the_alerts_the_loader_read() -> None:
    rec = Recording.load(RUNS / "slowdown_link" / "run")
    assert rec.alerts, "alerts.jsonl is read by the loader"
    assert rec.analysis.slowdowns and rec.analysis.builds["slowdowns"] == 1


def _constructions(name: str) -> list[str]:
    """Every module of the source that calls ``name(...)``."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == name:
                found.append(str(path.relative_to(SRC)))
    return found


def test_no_caller_builds_the_analysis_outside_recording() -> None:
    assert _constructions("RunAnalysis") == ["diagnose/recording.py"]
    assert not hasattr(__import__("scalescope.analyze", fromlist=["x"]), "analyze_run")
    assert isinstance(Recording.load(RUNS / "balanced" / "run").analysis, RunAnalysis)
