"""The run report on the terminal: its document (report/views/run.py) and the findings."""

from __future__ import annotations

from rich.console import Console

from scalescope.analyze import RunAnalysis
from scalescope.report.document import Document
from scalescope.report.media.terminal import render_document
from scalescope.report.subjects import RunReport
from scalescope.report.views.diagnosis import findings_section
from scalescope.report.views.gpu import gpu_document
from scalescope.report.views.horovod import horovod_document, ingest_source_document
from scalescope.report.views.run import run_document


def render_terminal(analysis: RunAnalysis, console: Console) -> None:
    """Print the report: header, failures and problems first, then the measurements."""
    render_document(run_document(analysis), console)


def report_document(report: RunReport) -> Document:
    """The run document, then the findings section when the run was diagnosed; for another
    tool's trace, its source first and its Horovod tables and GPU activity last."""
    doc = run_document(report.analysis)
    blocks = doc.blocks
    if report.diagnosis is not None:
        blocks = (*blocks, findings_section(report.diagnosis))
    ingest = report.ingest
    if ingest is not None:
        before = ingest_source_document(ingest).blocks
        after = (*horovod_document(ingest).blocks, *gpu_document(ingest).blocks)
        blocks = (*before, *blocks, *after)
    return Document(doc.title, blocks)
