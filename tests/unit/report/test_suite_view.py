"""Rendering of a suite result: one table (units, per-rank split, errors) and its JSON."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from scalescope.analyze.rank_split import RankSplit
from scalescope.analyze.suite import SuiteEntry, SuiteResult, with_efficiency
from scalescope.report.views.suite import (
    SUITE_SCHEMA,
    SUITE_WIDTH,
    load_suite,
    render_suite,
    suite_json,
    write_suite_json,
)

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
    render_suite(result, console)
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


def test_json_has_schema_units_and_shares():
    doc = json.loads(suite_json(_result()))
    assert doc["schema"] == SUITE_SCHEMA and doc["quick"] is True
    pca2 = doc["entries"][1]
    assert pca2["throughput_unit"] == "rows/s" and pca2["efficiency"] == 0.75
    assert pca2["per_rank"][1] == {
        "rank": 1, "steps": 3, "window_s": 2.0, "collective_s": 0.5, "data_s": 0.1,
        "collective_pct": 25.0, "data_pct": 5.0,
    }  # fmt: skip
    failed = doc["entries"][2]
    assert failed["error"] == ERROR and failed["throughput"] is None
    assert failed["efficiency"] is None


def test_a_written_suite_loads_back_equal(tmp_path):
    result = _result()
    write_suite_json(result, tmp_path / "suite.json", tmp_path / "copy.json")
    assert load_suite(tmp_path) == result
    assert load_suite(tmp_path / "copy.json") == result


def test_loading_a_directory_without_a_suite_names_it(tmp_path):
    with pytest.raises(ValueError, match="no suite.json"):
        load_suite(tmp_path)
