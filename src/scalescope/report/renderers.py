"""One registry of renderers, chosen by the output flags: pyinstrument's ``Session`` ->
``Renderer``. A subject (a result, or a report/subjects.py bundle of results) and an output
name ("terminal", "json", "html", "timeline") give one renderer; the terminal's is a Document
that the caller prints, the others are the bytes or text of the file asked for.

Renderers are named by ``module:function`` and imported when first asked for, so choosing one
imports neither plotly nor the other views. The progress a command draws while it works (a bar,
an ETA line) is looked up here too (``progress``): commands/ and live/ reach no view but through
this module.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from scalescope.report.document import Document

Output = str | bytes | Document
OUTPUTS = ("terminal", "json", "html", "timeline", "csv", "text")
_VIEWS = "scalescope.report.views."


class Renderer(Protocol):
    medium: str
    """terminal (a Document to print), json, html, timeline or csv."""

    def render(self, subject: Any) -> Output: ...


@dataclass(frozen=True)
class Named:
    """A renderer given as ``module:function``; ``through``: a medium's ``module:function``
    that draws the Document the function builds (``document_html``)."""

    medium: str
    target: str
    through: str = ""

    def render(self, subject: Any) -> Output:
        out = _resolve(self.target)(subject)
        return _resolve(self.through)(out) if self.through else out


def _resolve(target: str) -> Callable[[Any], Any]:
    module, name = target.split(":")
    return getattr(importlib.import_module(module), name)


def _entries(subject: str, **targets: str | tuple[str, str]) -> dict[tuple[str, str], Named]:
    out = {}
    for medium, target in targets.items():
        builder, through = (target, "") if isinstance(target, str) else target
        out[(subject, medium)] = Named(medium, _VIEWS + builder, through)
    return out


PAGE = "scalescope.report.media.html:document_html"
RENDERERS: dict[tuple[str, str], Renderer] = {
    **_entries(
        "RunReport",
        terminal="run_terminal:report_document",
        json="run_json:report_bytes",
        html="dashboard:render_html",
        timeline="rank_select:timeline_bytes",
    ),
    **_entries(
        "RunComparison", terminal="compare:comparison_document", json="compare:comparison_json"
    ),
    **_entries("ComparedRuns", html="dashboard:render_compare_html"),
    **_entries(
        "ScaleComparison",
        text="scale_compare:scale_compare_text",
        json="scale_compare:scale_compare_json",
        html=("scale_compare:scale_compare_document", PAGE),
    ),
    **_entries("CommBenchmark", terminal="comm:comm_document", html=("comm:comm_document", PAGE)),
    **_entries("CommBenchmark", csv="comm:comm_csv"),
    **_entries("CommRun", json="comm:comm_run_json"),
    **_entries("NcclTestsRows", terminal="comm:nccl_document"),
    **_entries(
        "TuneResult",
        terminal="tune:tune_document",
        json="tune:tune_json",
        html=("tune:tune_document", PAGE),
    ),
    **_entries(
        "ScalingTable", terminal="scaling:scaling_document", html=("scaling:scaling_document", PAGE)
    ),
    **_entries(
        "Projection",
        terminal="project:projection_document",
        json="project:projection_json",
        html=("project:projection_document", PAGE),
    ),
    **_entries(
        "Validation", terminal="project:validation_document", json="project:validation_json"
    ),
    **_entries("EnvReport", terminal="env:env_document", json="env:env_json"),
    **_entries("WhatIf", terminal="whatif:whatif_document", json="whatif:whatif_json"),
    **_entries("WhatIfTimeline", timeline="whatif:whatif_timeline"),
    **_entries("SuiteResult", terminal="suite:suite_document"),
    ("SuiteResult", "json"): Named("json", "scalescope.events.suite:suite_json"),
    **_entries("PackedShards", terminal="data:pack_document"),
    **_entries("StagedShards", terminal="data:stage_document"),
    **_entries("LoaderSpeeds", terminal="data:speed_document"),
    **_entries("LiveFrame", terminal="live:frame_document"),
    **_entries("StoreFrame", terminal="live_store:frame_document"),
    **_entries("PlanView", terminal="plan:plan_document"),
    **_entries("HangReport", text="hang:render_hang"),
    **_entries(
        "ScaleReport",
        text="scale:scale_text",
        json="scale:scale_json_bytes",
        html=("scale_page:scale_document", PAGE),
    ),
}

PROGRESS: dict[str, str] = {
    "bytes": "data:byte_progress",
    "runs": "data:run_progress",
    "trials": "tune:TuneProgress",
    "eta": "eta:Eta",
}
"""What a command draws while it works, by kind: ``bytes`` (console, description) and
``runs`` (console, description, total) are bars that yield their ``advance``; ``trials``
(console, trial_seconds) is tune's progress; ``eta`` (total, label) gives each run's line."""


def renderer(subject: Any, output: str) -> Renderer:
    """The renderer of ``output`` for ``subject``; a ValueError names what is known."""
    kind = type(subject).__name__
    found = RENDERERS.get((kind, output))
    if found is None:
        known = sorted(m for k, m in RENDERERS if k == kind)
        raise ValueError(f"no {output!r} renderer for a {kind} (it has: {', '.join(known)})")
    return found


def render(subject: Any, output: str) -> Output:
    return renderer(subject, output).render(subject)


def document(subject: Any) -> Document:
    """The terminal's Document of ``subject``."""
    out = render(subject, "terminal")
    if not isinstance(out, Document):
        raise TypeError(f"the terminal renderer of a {type(subject).__name__} gave no Document")
    return out


def progress(kind: str) -> Callable[..., Any]:
    """The progress display ``kind`` of ``PROGRESS``; a ValueError names those known."""
    target = PROGRESS.get(kind)
    if target is None:
        raise ValueError(f"no {kind!r} progress (known: {', '.join(sorted(PROGRESS))})")
    return _resolve(_VIEWS + target)


def write(subject: Any, output: str, path: Path) -> Path:
    """Render ``output`` of ``subject`` into ``path`` (text as UTF-8)."""
    out = render(subject, output)
    if isinstance(out, Document):
        raise ValueError(f"{output!r} is drawn on a terminal, not written to {path}")
    if isinstance(out, str):
        path.write_text(out, encoding="utf-8")
    else:
        path.write_bytes(out)
    return path
