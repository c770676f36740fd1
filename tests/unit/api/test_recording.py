"""Recording, analyze_traces and compare on recorded runs and traces: what they print and write,
and a one-line error for each bad input."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from recorded_runs import RUNS, load_scenario, recorded_report
from rich.console import Console

import scalescope
from scalescope.report.formatting import REPORT_WIDTH
from scalescope.report.media.timeline import pid_of

TRACES = Path(__file__).resolve().parents[2] / "data" / "traces"


@pytest.mark.parametrize("name", ["balanced", "failed_rank", "straggler_data_2"])
def test_print_report_prints_what_report_printed_when_recorded(name: str) -> None:
    scenario = load_scenario(name)
    assert scenario.report_args == []
    rec = scalescope.load(scenario.run_dir)
    out = StringIO()
    rec.print_report(Console(file=out, width=REPORT_WIDTH, highlight=False, markup=False))
    assert out.getvalue() == recorded_report(scenario).text


def test_findings_and_json_are_the_recorded_diagnosis(tmp_path: Path) -> None:
    scenario = load_scenario("straggler_data_2")
    rec = scalescope.load(scenario.run_dir)
    expected = recorded_report(scenario).diagnosis
    assert [f.code for f in rec.findings] == [f["code"] for f in expected["findings"]]
    assert all(isinstance(f, scalescope.Finding) for f in rec.findings)
    doc = json.loads(rec.write_json(tmp_path / "r.json").read_text())
    assert doc["diagnosis"] == expected
    assert doc["run_id"] == rec.analysis.run_id and "ingest" not in doc


def test_thresholds_as_report_takes_them() -> None:
    run_dir = load_scenario("input_bound").run_dir
    default = scalescope.load(run_dir)
    assert "INPUT_BOUND" in [f.code for f in default.findings]
    lenient = scalescope.load(run_dir, thresholds=["data_share_pct=99"])
    assert lenient.diagnosis.thresholds.data_share_pct == 99
    assert "INPUT_BOUND" not in [f.code for f in lenient.findings]
    assert scalescope.load(run_dir, {"data_share_pct": 99}).thresholds == lenient.thresholds


def test_dashboard_and_timeline_are_written(tmp_path: Path) -> None:
    rec = scalescope.load(load_scenario("balanced").run_dir)
    page = rec.write_dashboard(tmp_path / "d.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and rec.analysis.run_id in page
    trace = json.loads(rec.write_timeline(tmp_path / "t.json", steps=2, ranks="1").read_text())
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    assert {e["pid"] for e in events if e.get("ph") == "X"} == {pid_of(1)}


def test_analyze_traces_keeps_what_ingest_found(tmp_path: Path) -> None:
    rec = scalescope.analyze_traces(TRACES / "kineto-ddp")
    assert rec.ingest is not None and rec.ingest.format == "kineto"
    assert rec.ranks().num_rows == 2 and rec.collectives().num_rows > 0
    doc = json.loads(rec.write_json(tmp_path / "a.json").read_text())
    assert doc["ingest"]["format"] == "kineto" and len(doc["ingest"]["files"]) == 2
    out = StringIO()
    rec.print_report(Console(file=out, width=REPORT_WIDTH, highlight=False, markup=False))
    assert "torch.profiler" in out.getvalue()


def test_compare_takes_paths_or_recordings(tmp_path: Path) -> None:
    a = scalescope.load(RUNS / "balanced" / "run")
    comparison = scalescope.compare(a, RUNS / "straggler_data_2" / "run")
    assert comparison.a is a and comparison.result.b.run_id == comparison.b.analysis.run_id
    doc = json.loads(comparison.write_json(tmp_path / "c.json").read_text())
    assert doc["schema"] == "scalescope.compare/2"
    out = StringIO()
    comparison.print(Console(file=out, width=REPORT_WIDTH, highlight=False, markup=False))
    assert "scalescope compare" in out.getvalue()


def one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


def test_a_missing_directory_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(scalescope.RunDirError) as exc:
        scalescope.load(tmp_path / "nowhere")
    assert "not a scalescope run directory" in one_line(exc)


def test_a_damaged_run_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text("{not json")
    with pytest.raises(scalescope.RunDirError) as exc:
        scalescope.load(tmp_path)
    assert "not a valid run file" in one_line(exc)


def test_a_trace_directory_with_nothing_in_it_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(scalescope.IngestError) as exc:
        scalescope.analyze_traces(tmp_path)
    assert "no trace files found" in one_line(exc)


def test_bad_thresholds_and_table_names_are_one_line() -> None:
    run_dir = load_scenario("balanced").run_dir
    with pytest.raises(ValueError) as exc:
        scalescope.load(run_dir, thresholds=["no_such=1"])
    assert "expected NAME=VALUE" in one_line(exc)
    with pytest.raises(TypeError):
        scalescope.load(run_dir, thresholds="data_share_pct=5")
    with pytest.raises(ValueError) as exc:
        scalescope.load(run_dir).frame("stepz")
    assert "choose one of steps, phases" in one_line(exc)


def test_what_if_is_the_engines_on_the_same_run():
    from scalescope.analyze.model.whatif import what_if

    rec = scalescope.load(RUNS / "straggler_data_2" / "run")
    mine = rec.what_if(["rank:1", "comm:hidden"])
    engine = what_if(rec.run, rec.run.meta.warmup_steps, ["rank:1", "comm:hidden"])
    assert mine == engine
    assert [f.cause for f in mine.fixes] == ["rank:1", "comm:hidden"]
    with pytest.raises(ValueError, match="unknown cause"):
        rec.what_if(["disk:1"])
