"""`make bench`'s pieces: the figures a script records (benchmarks/results.py), the table
run_all.py writes from them, and a script that fails or runs out of time."""

from __future__ import annotations

import math
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from results import ENV, Result, read_results, record, skipped  # noqa: E402
from run_all import (  # noqa: E402
    ACCURACY,
    BENCHES,
    QUICK,
    Bench,
    Machine,
    Outcome,
    Report,
    chosen,
    failure,
    parse_junit,
    render,
    run_bench,
)

MACHINE = Machine(cpu="Test CPU 9000", cores=2, memory_gib=23.5, torch="2.14.1", python="3.11.7")
STARTED = datetime(2026, 1, 2, 3, 4, tzinfo=timezone.utc)


def table_rows(markdown: str, heading: str) -> list[list[str]]:
    """The cells of the table under ``heading``, header and rule left out."""
    section = markdown.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("| ")][1:]
    return [[c.strip() for c in row.strip("|").split(" | ")] for row in rows]


def test_record_without_the_variable_writes_nothing(monkeypatch, tmp_path):
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    result = record("load time", 0.2, "s", "< 5 s", True)
    assert result == Result("load time", 0.2, "s", "< 5 s", True)
    assert list(tmp_path.iterdir()) == []


def test_record_appends_one_json_line_per_figure(monkeypatch, tmp_path):
    path = tmp_path / "figures.jsonl"
    monkeypatch.setenv(ENV, str(path))
    record("ratio with/without", 0.995, "ratio", ">= 0.99", True, "3 pairs")
    skipped("HTA ratio", "ratio", "<= 0.1", "hta is not importable")
    assert len(path.read_text().splitlines()) == 2
    first, second = read_results(path, source="probe_overhead")
    assert first == Result("ratio with/without", 0.995, "ratio", ">= 0.99", True, "3 pairs",
                           "probe_overhead")  # fmt: skip
    assert math.isnan(second.value) and second.met is None
    assert second.detail == "skipped: hta is not importable"
    assert read_results(tmp_path / "absent.jsonl") == []


def test_a_numpy_comparison_is_recorded_as_met(monkeypatch, tmp_path):
    import numpy as np

    out = tmp_path / "results.jsonl"
    monkeypatch.setenv(ENV, str(out))
    record("rate", np.float64(0.5), "alerts", "<= 1", np.float64(0.5) <= 1)
    record("bound", np.float64(3.0), "alerts", "<= 1", np.float64(3.0) <= 1)
    assert [(r.figure, r.met) for r in read_results(out, "x")] == [("rate", True), ("bound", False)]


def test_table_has_a_row_per_figure_with_its_verdict_and_the_header():
    results = [
        Result("images/s with / without", 0.995, "ratio", ">= 0.99", True, source="probe"),
        Result("top attached / not", 0.94, "ratio", ">= 0.99", False, "spread 10 %", "top"),
        Result("live state per step", 20.2, "µs", "", None, source="live"),
        Result("a | b", math.nan, "%", "within ±20 %", None, "skipped: needs root", "netns"),
        failure("tune_gain", "timed out after 1200 s"),
    ]
    report = Report(MACHINE, STARTED, 125.0, [Outcome("x", "benchmarks/x.py", 1.0, results)])
    text = render(report)
    assert "- Date: 2026-01-02 (started 03:04 UTC, 2.1 min in all" in text
    assert "- Machine: Test CPU 9000, 2 cores, 23.5 GiB memory; torch 2.14.1, Python 3.11.7" in text
    assert "benchmarks/accuracy/" in text.split("## Figures")[0]
    rows = table_rows(text, "Figures")
    assert [r[0] for r in rows] == ["probe", "top", "live", "netns", "tune_gain"]
    assert [r[4] for r in rows] == [
        "met", "missed", "no target", "skipped", "failed: timed out after 1200 s",
    ]  # fmt: skip
    assert rows[0][1:4] == ["images/s with / without (ratio)", "0.995", ">= 0.99"]
    assert rows[3][1] == "a \\| b (%)" and rows[3][2] == "—" and rows[3][5] == "needs root"
    assert "1 met, 1 missed, 1 no target, 1 skipped, 1 failed" in text
    assert "Left out of this run" not in text


def test_benchmarks_left_out_by_only_are_named():
    report = Report(MACHINE, STARTED, 1.0, [], left_out=["top_overhead", "tune_gain"])
    assert "- Left out of this run (`--only`): top_overhead, tune_gain" in render(report)


def _script(tmp_path: Path, body: str) -> Bench:
    script = tmp_path / "fake_bench.py"
    script.write_text(body)
    return Bench("fake", str(script), timeout_s=20)


def test_a_script_that_fails_gets_a_failed_row_with_its_last_line(tmp_path):
    body = "print('working')\nraise RuntimeError('no rendezvous')\n"
    outcome = run_bench(_script(tmp_path, body), tmp_path)
    assert outcome.error == "exit 1: RuntimeError: no rendezvous"
    assert [r.detail for r in outcome.results] == [f"failed: {outcome.error}"]
    rows = table_rows(render(Report(MACHINE, STARTED, 1.0, [outcome])), "Figures")
    assert rows == [["fake", "the run", "—", "—", "failed: exit 1: RuntimeError: no rendezvous",
                     ""]]  # fmt: skip


def test_figures_recorded_before_a_failure_are_kept(tmp_path):
    body = (
        "from results import record\n"
        "record('html size', 5.2, 'MB', '< 5 MB', False)\n"
        "raise SystemExit('HTML is 5.2 MB, over the 5 MB limit')\n"
    )
    outcome = run_bench(_script(tmp_path, body), tmp_path)
    assert [(r.figure, r.met, r.source) for r in outcome.results] == [
        ("html size", False, "fake"), ("the run", None, "fake"),
    ]  # fmt: skip
    assert outcome.error == "exit 1: HTML is 5.2 MB, over the 5 MB limit"


def test_a_script_that_runs_out_of_time_is_stopped(tmp_path):
    """Its last line is named when it printed one before the limit (a busy machine may start
    the interpreter later than that: the limit is what the test holds)."""
    bench = Bench("slow", str(tmp_path / "slow.py"), timeout_s=2)
    bench.path.write_text("import time\nprint('started', flush=True)\ntime.sleep(60)\n")
    outcome = run_bench(bench, tmp_path)
    assert outcome.error.startswith("timed out after 2 s")
    assert outcome.seconds < 50


def test_a_script_that_records_nothing_is_a_failure(tmp_path):
    outcome = run_bench(_script(tmp_path, "print('done')\n"), tmp_path)
    assert outcome.error == "recorded no figure (last line: done)"


JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="3">
<testcase classname="benchmarks.accuracy.test_comm" name="test_latency" time="12.5"/>
<testcase classname="benchmarks.accuracy.test_comm.TestBusbw" name="test_big[64M]" time="3">
<failure message="AssertionError: 1.41 over 1.35&#10;assert 1.41 &lt;= 1.35">tb</failure>
</testcase>
<testcase classname="benchmarks.accuracy.test_comm" name="test_gpu" time="0">
<skipped type="pytest.skip" message="no CUDA device">skip</skipped></testcase>
</testsuite></testsuites>
"""


def test_accuracy_rows_from_junit(tmp_path):
    (tmp_path / "benchmarks" / "accuracy").mkdir(parents=True)
    (tmp_path / "benchmarks" / "accuracy" / "test_comm.py").write_text("")
    xml = tmp_path / "junit.xml"
    xml.write_text(JUNIT)
    rows = parse_junit(xml, root=tmp_path)
    module = "benchmarks/accuracy/test_comm.py"
    assert [(r.nodeid, r.status, r.reason) for r in rows] == [
        (f"{module}::test_latency", "passed", ""),
        (f"{module}::TestBusbw::test_big[64M]", "failed", "AssertionError: 1.41 over 1.35"),
        (f"{module}::test_gpu", "skipped", "no CUDA device"),
    ]
    report = Report(MACHINE, STARTED, 1.0, [], tests=rows)
    report.accuracy = Outcome(ACCURACY, "pytest benchmarks/accuracy", 15.5, summary="3 tests")
    assert table_rows(render(report), "Accuracy against a truth")[2] == [
        f"`{module}::test_gpu`", "skipped: no CUDA device", "0 s",
    ]  # fmt: skip


def test_only_picks_names_and_rejects_unknown_ones():
    benches, accuracy = chosen(None)
    assert accuracy and all(b.default for b in benches) and "gpu_check" not in str(benches)
    benches, accuracy = chosen("html_size,accuracy")
    assert [b.name for b in benches] == ["html_size"] and accuracy
    with pytest.raises(SystemExit, match="unknown benchmark"):
        chosen("html_size,nope")


def test_quick_tier_is_its_list_with_its_arguments_and_no_tests():
    benches, accuracy = chosen(None, quick=True)
    assert [b.name for b in benches] == list(QUICK) and not accuracy
    usual = {b.name: b for b in BENCHES}
    for b in benches:
        given = QUICK[b.name]
        assert b.args == (usual[b.name].args if given is None else tuple(given.split()))
        assert b.timeout_s >= 3 * 60 * b.minutes
    assert sum(b.minutes for b in benches) <= 25
    with pytest.raises(SystemExit, match="give one"):
        chosen("html_size", quick=True)


def test_quick_tier_says_so_and_why_no_tests_ran():
    note = "the quick tier leaves the accuracy and heavy tests out"
    report = Report(MACHINE, STARTED, 60.0, [], quick=True, accuracy_note=note)
    text = render(report)
    assert "The quick tier (`make bench BENCH_ARGS=--quick`)" in text
    assert "Not run: the quick tier leaves the accuracy and heavy tests out." in text
    assert "Left out of this run" not in text
