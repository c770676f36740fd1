"""JSON report: valid JSON, schema version first, the same numbers as the analysis."""

from __future__ import annotations

import dataclasses
import json

import msgspec
import pytest
from report_runs import BUCKET, build

from scalescope.analyze.summary import REPORTED
from scalescope.events import RankMeta
from scalescope.report import REPORT_SCHEMA
from scalescope.report.media.report_json import report_json


def test_round_trip_has_schema_and_every_field(tmp_path):
    analysis = build(tmp_path)
    doc = json.loads(msgspec.json.encode(report_json(analysis, None)))
    assert doc["schema"] == REPORT_SCHEMA == "scalescope.report/2"
    assert list(doc)[0] == "schema"
    assert list(doc)[1:] == [*REPORTED, "diagnosis"]
    plain = {name: _plain(getattr(analysis, name)) for name in REPORTED}
    assert doc == {"schema": REPORT_SCHEMA, **plain, "diagnosis": None}


def _plain(obj):
    """The analysis as JSON would hold it, built without msgspec."""
    if dataclasses.is_dataclass(obj):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, tuple | list):
        return [_plain(v) for v in obj]
    return obj


def test_numbers_match_the_analysis(tmp_path):
    analysis = build(tmp_path, world_size=2)
    doc = json.loads(msgspec.json.encode(report_json(analysis, None)))
    steps = doc["steps"]
    assert steps["samples_per_s"] == pytest.approx(analysis.steps.samples_per_s)
    rank0 = steps["ranks"][0]
    assert [p["phase"] for p in rank0["phases"]][-2:] == ["other", "step"]
    assert rank0["phases"][-1]["mean_ms"] == pytest.approx(100.0)
    [size] = doc["collectives"]["sizes"]
    assert (size["op"], size["nbytes"]) == ("all_reduce", BUCKET)
    assert size["algbw_gbps"] == pytest.approx(BUCKET / 2e-3 / 1e9)
    assert size["busbw_gbps"] == pytest.approx(BUCKET / 2e-3 / 1e9 * 2 * (2 - 1) / 2)


def test_missing_data_is_null_not_zero(tmp_path):
    doc = json.loads(msgspec.json.encode(report_json(build(tmp_path, probe=False), None)))
    assert doc["probe"] is False
    assert doc["steps"] is None and doc["collectives"] is None


def test_failed_run_carries_errors_and_problems(tmp_path):
    failed = RankMeta(rank=1, status="failed", exit_code=1, error="RuntimeError: boom")
    analysis = build(tmp_path, world_size=2, written=(0,), status="failed", rank_status={1: failed})
    doc = json.loads(msgspec.json.encode(report_json(analysis, None)))
    assert doc["status"] == "failed"
    assert doc["ranks"][1] == {
        "rank": 1,
        "hostname": "",
        "status": "failed",
        "exit_code": 1,
        "error": "RuntimeError: boom",
        "steps": 0,
        "end_time": None,
    }
    assert doc["problems"] == ["rank 1: event file rank-00001.arrows is missing"]
