"""Renderers of analysis results: terminal text and JSON."""

from scalescope.report.json_report import REPORT_SCHEMA, to_json
from scalescope.report.terminal import render_terminal

__all__ = ["REPORT_SCHEMA", "render_terminal", "to_json"]
