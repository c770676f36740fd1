"""docs/api.md's worked example (docs/examples/notebook_tour.py) runs on recorded runs."""

from __future__ import annotations

import runpy
from pathlib import Path

from recorded_runs import RUNS

import scalescope

TOUR = Path(__file__).resolve().parents[3] / "docs" / "examples" / "notebook_tour.py"


def test_the_worked_example_runs_on_a_recorded_run(tmp_path: Path, capsys) -> None:
    tour = runpy.run_path(str(TOUR))["tour"]
    result = tour(RUNS / "straggler_data_2" / "run", RUNS / "balanced" / "run", tmp_path)
    rec = result["recording"]
    assert isinstance(rec, scalescope.Recording)
    assert [p.name for p in result["written"]] == [
        "report.json", "dashboard.html", "timeline.json", "compare.json"
    ]  # fmt: skip
    assert all(p.stat().st_size > 0 for p in result["written"])
    assert set(result["phase_ms"]) == {"dur", "data", "to_device", "forward", "backward",
                                       "comm_wait", "optimizer", "other"}  # fmt: skip
    printed = capsys.readouterr().out
    assert rec.findings[0].summary in printed
    assert "scalescope report" in printed and "scalescope compare" in printed
