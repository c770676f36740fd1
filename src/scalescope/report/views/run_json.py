"""The run report's JSON file (docs/report-schema.md) of a RunReport."""

from __future__ import annotations

import msgspec

from scalescope.report.media.report_json import report_json
from scalescope.report.subjects import RunReport


def report_bytes(report: RunReport) -> bytes:
    doc = report_json(report.analysis, report.diagnosis, report.ingest)
    return msgspec.json.format(msgspec.json.encode(doc), indent=2)
