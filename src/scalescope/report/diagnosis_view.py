"""The "Findings" section: what limits the run, what it costs, the evidence, what to change.

``render_diagnosis`` prints a ``Diagnosis`` (scalescope.diagnose) for people; for programs
``diagnosis_builtins`` gives the same content as JSON-able builtins (msgspec), the
``findings`` section of the report JSON (docs/report-schema.md).
"""

from __future__ import annotations

from typing import Any

import msgspec
from rich.console import Console
from rich.text import Text

from scalescope.diagnose.findings import Diagnosis, Evidence, Finding

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
        parts.append(f"saves ~{f.saved_ms_per_step:,.1f} ms/step")
    text = "; ".join(parts) if parts else "not measured in time"
    return f"{text} ({f.basis})" if f.basis else text


def _finding(console: Console, number: int, f: Finding) -> None:
    head = Text(f"{number}. ", style="bold")
    head.append(f"{f.bottleneck}", style="bold red" if f.level == "warning" else "bold")
    if f.level == "info":
        head.append(" (info)", style="dim")
    head.append(f": {f.summary}")
    console.print(head)
    console.print(Text(f"   cost: {cost_line(f)}"))
    if f.evidence:
        console.print(Text("   evidence:", style="bold"))
        for e in f.evidence:
            console.print(Text(f"     - {evidence_line(e)}"))
    if f.remedies:
        console.print(Text("   change:", style="bold"))
        for remedy in f.remedies:
            console.print(Text(f"     - {remedy}"))


def render_diagnosis(diagnosis: Diagnosis, console: Console) -> None:
    """Print the Findings section: numbered findings best first, then what was not
    judged, then the verdict."""
    console.print()
    console.rule(Text(TITLE))
    for number, finding in enumerate(diagnosis.findings, start=1):
        _finding(console, number, finding)
    if diagnosis.not_judged:
        console.print(Text("not judged:", style="bold"))
        for reason in diagnosis.not_judged:
            console.print(Text(f"  - {reason}"))
    verdict = Text("verdict: ", style="bold")
    verdict.append(diagnosis.verdict)
    console.print(verdict)


def diagnosis_builtins(diagnosis: Diagnosis) -> dict[str, Any]:
    """The diagnosis as JSON-able builtins (``findings``, ``not_judged``, ``verdict``,
    ``thresholds``)."""
    return msgspec.to_builtins(diagnosis)
