"""Machine-readable report: the RunAnalysis as JSON (schema in docs/report-schema.md)."""

from __future__ import annotations

import msgspec

from scalescope.analyze import RunAnalysis

REPORT_SCHEMA = "scalescope.report/1"


def to_json(analysis: RunAnalysis) -> bytes:
    """Encode the analysis with its schema version first; None fields become ``null``."""
    body = msgspec.to_builtins(analysis)
    document = {"schema": REPORT_SCHEMA, **body}
    return msgspec.json.format(msgspec.json.encode(document), indent=2) + b"\n"
