"""Machine-readable report: the RunAnalysis as JSON (schema in docs/report-schema.md)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from scalescope.analyze import RunAnalysis

if TYPE_CHECKING:
    from scalescope.diagnose.findings import Diagnosis

REPORT_SCHEMA = "scalescope.report/1"


def to_json(analysis: RunAnalysis) -> bytes:
    """Encode the analysis with its schema version first; None fields become ``null``."""
    body = msgspec.to_builtins(analysis)
    document = {"schema": REPORT_SCHEMA, **body}
    return msgspec.json.format(msgspec.json.encode(document), indent=2) + b"\n"


def report_json(analysis: RunAnalysis, diagnosis: Diagnosis | None) -> dict:
    """The report JSON (docs/report-schema.md) with the findings as ``diagnosis``."""
    from scalescope.report.views.diagnosis import diagnosis_builtins

    doc = msgspec.json.decode(to_json(analysis))
    doc["diagnosis"] = diagnosis_builtins(diagnosis) if diagnosis is not None else None
    return doc


def dump_json(path: Path, doc: dict) -> None:
    path.write_bytes(msgspec.json.format(msgspec.json.encode(doc), indent=2))
