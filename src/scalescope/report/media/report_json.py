"""Machine-readable report: the RunAnalysis as JSON (schema in docs/report-schema.md), with
the diagnosis and, for another tool's trace, what its ingestion found: one builtins document
built once, encoded once."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from scalescope.analyze import RunAnalysis

if TYPE_CHECKING:
    from scalescope.diagnose.findings import Diagnosis
    from scalescope.ingest import IngestResult

REPORT_SCHEMA = "scalescope.report/2"


def ingest_builtins(result: IngestResult) -> dict[str, Any]:
    """What ``analyze`` adds as ``ingest``: the trace's format, files, problems, Horovod tables
    and GPU activity."""
    return {
        "format": result.format,
        "files": [str(f) for f in result.files],
        "problems": list(result.problems),
        "horovod_phases": msgspec.to_builtins(result.horovod_phases),
        "horovod_waits": msgspec.to_builtins(result.horovod_waits),
        "gpu": msgspec.to_builtins(result.gpu),
    }


def report_json(
    analysis: RunAnalysis, diagnosis: Diagnosis | None, ingest: IngestResult | None = None
) -> dict[str, Any]:
    """The report JSON (docs/report-schema.md) as builtins: the analysis, the findings as
    ``diagnosis``, and ``ingest`` when the run came from another tool's trace."""
    from scalescope.report.views.diagnosis import diagnosis_builtins

    doc = {"schema": REPORT_SCHEMA, **msgspec.to_builtins(analysis.reported())}
    doc["diagnosis"] = diagnosis_builtins(diagnosis) if diagnosis is not None else None
    if ingest is not None:
        doc["ingest"] = ingest_builtins(ingest)
    return doc
