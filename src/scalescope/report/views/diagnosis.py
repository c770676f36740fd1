"""The "Findings" section: what limits the run, what it costs, the evidence, what to change.

``findings_section`` makes a ``Diagnosis`` (scalescope.diagnose) a document section, which
``render_diagnosis`` prints and the dashboard draws; for programs
``diagnosis_builtins`` gives the same content as JSON-able builtins (msgspec), the
``findings`` section of the report JSON (docs/report-schema.md).
"""

from __future__ import annotations

from typing import Any

import msgspec
from rich.console import Console

from scalescope.diagnose.findings import Diagnosis, Evidence, Finding
from scalescope.report.document import Block, Bullets, Item, Items, Line, Section
from scalescope.report.media.terminal import render_block

TITLE = "Findings"


def _number(value: float | str) -> str:
    if isinstance(value, str):
        return value
    if float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:,.3g}" if abs(value) < 1 else f"{value:,.1f}"


def _with_unit(value: float | str, unit: str) -> str:
    if not unit:
        return _number(value)
    sep = "" if unit.startswith("%") else " "
    return f"{_number(value)}{sep}{unit}"


def evidence_line(e: Evidence) -> str:
    """``data wait 34.2% of step time (threshold 10%)``."""
    text = f"{e.name} {_with_unit(e.value, e.unit)}"
    if e.threshold is None:
        return text
    unit = "%" if e.unit.startswith("%") else e.unit
    return f"{text} (threshold {_with_unit(e.threshold, unit)})"


def cost_line(f: Finding) -> str:
    """Share of step time and estimated saving, or why there is none."""
    parts = []
    if f.share_pct is not None:
        parts.append(f"{f.share_pct:.1f}% of step time")
    if f.saved_ms_per_step is not None:
        since = f" since step {f.since_step}" if f.since_step is not None else ""
        parts.append(f"saves ~{f.saved_ms_per_step:,.1f} ms/step{since}")
    text = "; ".join(parts) if parts else "not measured in time"
    return f"{text} ({f.basis})" if f.basis else text


def _item(f: Finding) -> Item:
    lists = []
    if f.evidence:
        lists.append(Bullets("evidence", tuple(evidence_line(e) for e in f.evidence)))
    if f.remedies:
        lists.append(Bullets("change", f.remedies))
    warning = f.level == "warning"
    return Item(
        text=f.summary,
        label=f"{f.bottleneck}, dim {f.dim}" if f.dim else f.bottleneck,
        style="red" if warning else "",
        aside="" if warning else f"({f.level})",
        lines=(f"cost: {cost_line(f)}",),
        lists=tuple(lists),
        html_class=f"finding {f.level}",
    )


def findings_section(diagnosis: Diagnosis) -> Section:
    """Numbered findings best first, then what was not judged, then the verdict."""
    blocks: list[Block] = []
    if diagnosis.findings:
        blocks.append(Items(tuple(_item(f) for f in diagnosis.findings)))
    if diagnosis.not_judged:
        blocks.append(Bullets("not judged", diagnosis.not_judged))
    blocks.append(Line(diagnosis.verdict.line, label="verdict:"))
    return Section(TITLE, tuple(blocks), html_id="findings")


def render_diagnosis(diagnosis: Diagnosis, console: Console) -> None:
    """Print the Findings section (``findings_section``)."""
    render_block(findings_section(diagnosis), console)


def diagnosis_builtins(diagnosis: Diagnosis) -> dict[str, Any]:
    """The diagnosis as JSON-able builtins (``findings``, ``not_judged``, ``verdict``,
    ``thresholds``); the verdict with its line."""
    verdict = diagnosis.verdict
    return msgspec.to_builtins(diagnosis) | {
        "verdict": {"line": verdict.line, **msgspec.to_builtins(verdict)}
    }
