"""Rendering of a suite result: one table (units, per-rank split, errors); its JSON is the
record's (tests/unit/events/test_suite_file.py)."""

from __future__ import annotations

import io

from rich.console import Console

from scalescope.analyze.runs.suite import with_efficiency
from scalescope.events.suite import RankSplit, SuiteEntry, SuiteResult
from scalescope.report.formatting import SUITE_WIDTH
from scalescope.report.media.terminal import render_document
from scalescope.report.renderers import render

ERROR = "ValueError: bad [shape] x[0]"


def _entry(workload: str, ranks: int, throughput: float | None, **kw) -> SuiteEntry:
    splits = tuple(RankSplit(r, 3, 2.0, 0.5, 0.1) for r in range(ranks))
    values = dict(
        family="analytics", size=4000, run_dir=f"s/{workload}-n{ranks}", status="completed",
        error=None, wall_s=9.5, time_s=2.0, throughput=throughput, unit="rows",
        per_rank=splits,
    )  # fmt: skip
    return SuiteEntry(workload=workload, ranks=ranks, **(values | kw))


def _result() -> SuiteResult:
    entries = [
        _entry("pca", 1, 1000.0),
        _entry("pca", 2, 1500.0),
        _entry("svm", 2, None, status="failed", error=ERROR, time_s=None, unit=None),
    ]
    return SuiteResult("s", True, ("scalescope", "suite"), with_efficiency(entries), False)


def _render(result: SuiteResult) -> str:
    console = Console(file=io.StringIO(), width=SUITE_WIDTH, color_system=None)
    render_document(render(result, "terminal"), console)
    return console.file.getvalue()


def _rows(text: str) -> list[list[str]]:
    """Table lines as stripped cells (blank cells kept)."""
    rows = [line.split("│")[1:-1] for line in text.splitlines() if line.startswith("│")]
    return [[c.strip() for c in row] for row in rows]


def test_table_has_units_efficiency_one_line_per_rank_and_the_error():
    text = _render(_result())
    rows = _rows(text)
    assert rows[0] == ["pca", "1", "4,000", "2.000", "9.5", "1,000.0 rows/s", "n/a",
                       "0", "2.00", "25", "5", "ok"]  # fmt: skip
    assert rows[1][1:] == ["2", "4,000", "2.000", "9.5", "1,500.0 rows/s", "75",
                           "0", "2.00", "25", "5", "ok"]  # fmt: skip
    assert rows[2] == ["", "", "", "", "", "", "", "1", "2.00", "25", "5", ""]
    assert rows[3][0] == "svm" and rows[3][-1].startswith("failed: ValueError:")
    assert f"svm on 2 ranks failed: {ERROR} (s/svm-n2)" in text
    assert "Suite (quick sizes)" in text
