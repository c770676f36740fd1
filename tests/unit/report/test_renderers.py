"""The renderer registry: every entry names a function that exists, a subject and an output
flag choose one, and what cannot be written says so in one line."""

from __future__ import annotations

import json

import pytest
from analysed import analysed  # noqa: E402
from test_timeline import build_run

from scalescope.report.document import Document
from scalescope.report.renderers import RENDERERS, Named, _resolve, render, renderer, write
from scalescope.report.subjects import RunReport


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
