"""`scalescope analyze` on real traces from other tools, and on bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
needs_traces = pytest.mark.skipif(
    not TRACES.is_dir(), reason=f"{TRACES} is absent (a clone outside the workspace)"
)


@needs_traces
def test_horovod_timeline_report(run_cli, tmp_path):
    trace = str(TRACES / "horovod_timeline_cpu_8workers.json")
    proc = run_cli("analyze", trace, "--json", "h.json", "--threshold", "imbalance_pct=5")
    assert proc.returncode == 0, proc.stderr
    assert "NEGOTIATE_ALLREDUCE" in proc.stdout and "MPI_ALLREDUCE" in proc.stdout
    doc = json.loads((tmp_path / "h.json").read_text())
    assert doc["ingest"]["format"] == "horovod"
    assert doc["diagnosis"]["thresholds"]["imbalance_pct"] == 5.0
    phases = {p["phase"]: p for p in doc["ingest"]["horovod_phases"]}
    raw = json.loads((TRACES / "horovod_timeline_cpu_8workers.json").read_text())
    begins = sum(1 for e in raw if e.get("ph") == "B" and e.get("name") == "MPI_ALLREDUCE")
    assert phases["MPI_ALLREDUCE"]["occurrences"] == begins


@needs_traces
def test_kineto_trace_report_with_html(run_cli, tmp_path):
    proc = run_cli("analyze", str(TRACES / "hta_nccl_data_rank0.json.gz"), "--html", "k.html")
    assert proc.returncode == 0, proc.stderr
    assert "kineto" in proc.stdout.lower() and "all_reduce" in proc.stdout
    assert (tmp_path / "k.html").read_text().startswith("<!DOCTYPE html>")


def test_not_a_trace_is_refused_in_one_line(cli_in_process, tmp_path):
    (tmp_path / "notes.json").write_text('{"hello": "world"}')
    proc = cli_in_process("analyze", "notes.json")
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "error:" in proc.stderr


def test_missing_path_is_refused(cli_in_process):
    proc = cli_in_process("analyze", "no_such_trace.json")
    assert proc.returncode == 2
    assert "no_such_trace.json" in proc.stderr
