"""The renderer registry: every entry names a function that exists, a subject and an output
flag choose one, and what cannot be written says so in one line."""

from __future__ import annotations

import json

import pytest
from analysed import analysed  # noqa: E402
from test_timeline import build_run

from scalescope.report.document import Document
from scalescope.report.renderers import (
    PROGRESS,
    RENDERERS,
    Named,
    _resolve,
    document,
    progress,
    render,
    renderer,
    write,
)
from scalescope.report.subjects import CommRun, RunReport


@pytest.mark.parametrize("key", sorted(RENDERERS), ids=lambda k: "-".join(k))
def test_every_entry_names_a_function(key):
    found = RENDERERS[key]
    assert isinstance(found, Named) and found.medium == key[1]
    assert callable(_resolve(found.target))
    assert not found.through or callable(_resolve(found.through))


def test_the_output_flags_choose_the_run_report_renderers(tmp_path):
    run = build_run(tmp_path / "run")
    report = RunReport(analysis=analysed(run), run=run)
    assert isinstance(render(report, "terminal"), Document)
    doc = json.loads(write(report, "json", tmp_path / "r.json").read_text())
    assert doc["schema"] == "scalescope.report/2" and doc["run_id"] == report.analysis.run_id
    trace = json.loads(write(report, "timeline", tmp_path / "t.json").read_bytes())
    assert trace["metadata"]["run_id"] == report.analysis.run_id


def test_an_unknown_output_or_a_terminal_file_is_one_line(tmp_path):
    run = build_run(tmp_path / "run")
    report = RunReport(analysis=analysed(run), run=run)
    with pytest.raises(ValueError, match=r"^no 'csv' renderer for a RunReport \(it has: html, "):
        renderer(report, "csv")
    with pytest.raises(ValueError, match="drawn on a terminal"):
        write(report, "terminal", tmp_path / "x.txt")


@pytest.mark.parametrize("kind", sorted(PROGRESS))
def test_every_progress_names_a_display(kind):
    assert callable(progress(kind))


def test_progress_is_looked_up_by_kind():
    eta = progress("eta")(2, "scale", started=0.0)
    assert eta.line("ranks=1", now=0.0).startswith("scale [1/2] ")
    with pytest.raises(ValueError, match=r"^no 'speed' progress \(known: bytes, eta, runs"):
        progress("speed")


def test_a_document_is_the_terminal_renderer_of_a_subject(tmp_path):
    run = build_run(tmp_path / "run")
    report = RunReport(analysis=analysed(run), run=run)
    assert document(report).title == render(report, "terminal").title
    with pytest.raises(ValueError, match="no 'terminal' renderer for a CommRun"):
        document(CommRun(bench=None, run_dir=tmp_path))  # type: ignore[arg-type]


def test_comm_csv_is_written_through_the_registry(tmp_path):
    from test_document import comm_bench

    bench = comm_bench()
    rows = write(bench, "csv", tmp_path / "comm.csv").read_text().splitlines()
    assert rows[0].startswith("backend,op,") and len(rows) == 1 + len(bench.rows)
