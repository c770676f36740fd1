"""The run report on the terminal: its document (report/views/run.py) through rich."""

from __future__ import annotations

from rich.console import Console

from scalescope.analyze import RunAnalysis
from scalescope.report.media.terminal import render_document
from scalescope.report.views.run import run_document


def render_terminal(analysis: RunAnalysis, console: Console) -> None:
    """Print the report: header, failures and problems first, then the measurements."""
    render_document(run_document(analysis), console)
