"""Rendering of a RunComparison: terminal tables with B/A ratios and the compare JSON."""

from __future__ import annotations

import dataclasses
import io
import json

from report_runs import ALLREDUCE_MS, BUCKET, PHASE_MS, build
from rich.console import Console

from scalescope.analyze.runs.compare import compare_runs
from scalescope.report.views.compare import COMPARE_SCHEMA, comparison_json, render_comparison


def _render(comparison) -> str:
    console = Console(file=io.StringIO(), width=160, color_system=None)
    render_comparison(comparison, console)
    return console.file.getvalue()


def _cells(text: str, *needles: str) -> list[str]:
    for line in text.splitlines():
        if all(n in line for n in needles):
            return line.replace("│", " ").split()
    raise AssertionError(f"no line with {needles!r} in:\n{text}")


def _pair(tmp_path):
    """A: 4 ranks; B: 2 ranks of the same steps (half the samples per second)."""
    return compare_runs(build(tmp_path / "a"), build(tmp_path / "b", world_size=2))


def test_terminal_tables_with_ratios(tmp_path):
    text = _render(_pair(tmp_path))
    assert "A = run-42, B = run-42 (ratios B/A)" in text
    assert _cells(text, "ranks ", "4")[1:] == ["4", "2"]
    throughput = _cells(text, "throughput (samples/s)")
    assert throughput[-1] == "0.50x"
    assert _cells(text, "mean step (ms)")[-3:] == ["100.00", "100.00", "1.00x"]
    forward = _cells(text, "│ forward ")
    ms = f"{PHASE_MS['forward']:.2f}"
    assert forward == ["forward", ms, ms, "1.00x"]
    size = _cells(text, "all_reduce", f"{BUCKET:,}")
    avg_us = f"{ALLREDUCE_MS * 1000:,.1f}"
    assert size[:5] == ["all_reduce", f"{BUCKET:,}", "10", "10", "1.00x"]
    assert size[5:8] == [avg_us, avg_us, "1.00x"]
    assert size[-1] == f"{(2 * 1 / 2) / (2 * 3 / 4):.2f}x"  # busbw factor 2(n-1)/n: 2 vs 4 ranks
    assert "straggler" in text and "A: none; B: none" in text
    assert _cells(text, "wait in collectives (ms/step)")[-3:] == ["0.00", "0.00", "n/a"]


def test_only_in_one_run_and_no_cross_rank(tmp_path):
    a = build(tmp_path / "a")
    b = build(tmp_path / "b", probe=False).replaced(run_id="run-off")
    text = _render(compare_runs(a, b))
    assert f"only in A: all_reduce {BUCKET:,} B" in " ".join(text.split())
    assert "No cross-rank comparison" in text
    assert _cells(text, "throughput (samples/s)")[-2:] == ["n/a", "n/a"]


def test_json_schema_and_numbers(tmp_path):
    comparison = _pair(tmp_path)
    doc = json.loads(comparison_json(comparison))
    assert list(doc)[0] == "schema" and doc["schema"] == COMPARE_SCHEMA == "scalescope.compare/2"
    assert [f.name for f in dataclasses.fields(comparison)] == list(doc)[1:]
    assert doc["samples_per_s"]["ratio"] == comparison.samples_per_s.ratio
    assert doc["a"]["world_size"] == 4 and doc["b"]["world_size"] == 2
    [size] = doc["sizes"]
    assert (size["op"], size["nbytes"], size["time_avg_us"]["ratio"]) == ("all_reduce", BUCKET, 1.0)
    assert doc["cross_rank"]["straggler_a"] is None
    assert doc["sizes_only_a"] == [] and doc["sizes_only_b"] == []
