"""A suite's record (suite.json): its schema, the derived shares beside the fields, written to
every path asked and read back equal; a file that is no suite is one line naming it."""

from __future__ import annotations

import json

import pytest

from scalescope.events.suite import (
    SUITE_SCHEMA,
    RankSplit,
    SuiteEntry,
    SuiteResult,
    load_suite,
    save_suite,
    suite_json,
)

ERROR = "ValueError: bad [shape] x[0]"


def _entry(ranks: int, throughput: float | None, **kw) -> SuiteEntry:
    values = dict(
        workload="pca", family="analytics", ranks=ranks, size=4000, run_dir=f"s/pca-n{ranks}",
        status="completed", error=None, wall_s=9.5, time_s=2.0, throughput=throughput,
        unit="rows", per_rank=tuple(RankSplit(r, 3, 2.0, 0.5, 0.1) for r in range(ranks)),
    )  # fmt: skip
    return SuiteEntry(**(values | kw))


def _result() -> SuiteResult:
    entries = (
        _entry(2, 1500.0, efficiency=0.75),
        _entry(2, None, status="failed", error=ERROR, time_s=None, unit=None),
    )
    return SuiteResult("s", True, ("scalescope", "suite"), entries, False)


def test_json_has_schema_units_and_shares():
    doc = json.loads(suite_json(_result()))
    assert list(doc)[0] == "schema" and doc["schema"] == SUITE_SCHEMA == "scalescope.suite/1"
    ok, failed = doc["entries"]
    assert ok["throughput_unit"] == "rows/s" and ok["efficiency"] == 0.75
    assert ok["per_rank"][1] == {
        "rank": 1, "steps": 3, "window_s": 2.0, "collective_s": 0.5, "data_s": 0.1,
        "collective_pct": 25.0, "data_pct": 5.0,
    }  # fmt: skip
    assert failed["error"] == ERROR and failed["throughput"] is None
    assert failed["throughput_unit"] is None and failed["efficiency"] is None


def test_a_saved_suite_loads_back_equal_from_each_copy(tmp_path):
    result = _result()
    written = save_suite(result, tmp_path / "suite.json", None, tmp_path / "copy.json")
    assert written == [tmp_path / "suite.json", tmp_path / "copy.json"]
    assert load_suite(tmp_path) == result
    assert load_suite(tmp_path / "copy.json") == result


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (None, r"no suite\.json \(not a scalescope suite\)$"),
        (b"{", r"suite\.json: not a suite result \("),
        (b'{"schema": "scalescope.scale/1"}', r"no schema 'scalescope\.suite/1'"),
        (b'{"schema": "scalescope.suite/1", "quick": 3}', r"malformed suite result"),
    ],
)
def test_what_is_no_suite_is_one_line_naming_the_file(tmp_path, body, message):
    if body is not None:
        (tmp_path / "suite.json").write_bytes(body)
    with pytest.raises(ValueError, match=message) as caught:
        load_suite(tmp_path)
    assert "\n" not in str(caught.value)
