"""Renderers of analysis results: terminal text and JSON."""

from scalescope.report.media.report_json import REPORT_SCHEMA
from scalescope.report.views.run_terminal import render_terminal

__all__ = ["REPORT_SCHEMA", "render_terminal"]
