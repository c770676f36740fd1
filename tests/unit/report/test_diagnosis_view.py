"""The Findings section, rendered to a fixed-width console."""

from __future__ import annotations

import io
import json
from dataclasses import fields, replace

import msgspec
from rich.console import Console

from scalescope.analyze.verdict import Verdict
from scalescope.diagnose.findings import Diagnosis, Evidence, Finding
from scalescope.diagnose.thresholds import DEFAULT_THRESHOLDS
from scalescope.report.views.diagnosis import (
    cost_line,
    diagnosis_builtins,
    evidence_line,
    render_diagnosis,
)

INPUT = Finding(
    code="INPUT_BOUND",
    bottleneck="input pipeline",
    summary="ranks wait 34% of each step for the DataLoader",
    share_pct=34.2,
    saved_ms_per_step=120.5,
    evidence=(
        Evidence("data wait", 34.2, "% of step time", 10.0, ">="),
        Evidence("data wait per step", 120.5, "ms"),
        Evidence("mean file size", 705.6, "kB", 1048.576, "<"),
        Evidence("OMP_NUM_THREADS", "1"),
    ),
    remedies=("load batches while the step runs: `scalescope bench --workers 2` [sic]",),
    basis="the data wait per step",
)
COMPUTE = Finding(
    code="COMPUTE",
    bottleneck="compute",
    summary="compute takes 60% of the step",
    share_pct=60.0,
    saved_ms_per_step=None,
    evidence=(),
    remedies=(),
    level="info",
)


def _render(diagnosis: Diagnosis) -> str:
    console = Console(file=io.StringIO(), width=200, color_system=None)
    render_diagnosis(diagnosis, console)
    return console.file.getvalue()


def test_evidence_lines_state_value_and_threshold():
    assert evidence_line(INPUT.evidence[0]) == "data wait 34.2% of step time (threshold 10%)"
    assert evidence_line(INPUT.evidence[1]) == "data wait per step 120.5 ms"
    assert evidence_line(INPUT.evidence[2]) == "mean file size 705.6 kB (threshold 1,048.6 kB)"
    assert evidence_line(INPUT.evidence[3]) == "OMP_NUM_THREADS 1"


def test_cost_line_with_share_saving_and_basis():
    assert cost_line(INPUT) == "34.2% of step time; saves ~120.5 ms/step (the data wait per step)"
    assert cost_line(COMPUTE) == "60.0% of step time"
    since = "34.2% of step time; saves ~120.5 ms/step since step 12 (the data wait per step)"
    assert cost_line(replace(INPUT, since_step=12)) == since


def test_findings_are_numbered_best_first_with_evidence_remedies_and_verdict():
    d = Diagnosis(
        (INPUT, COMPUTE),
        ("straggler: one rank",),
        Verdict("no bottleneck", note="input pipeline: ranks wait"),
    )
    text = _render(d)
    assert "Findings" in text.splitlines()[1]
    assert "1. input pipeline: ranks wait 34% of each step for the DataLoader" in text
    assert "     - data wait 34.2% of step time (threshold 10%)" in text
    assert "`scalescope bench --workers 2` [sic]" in text, "remedies are not rich markup"
    assert "2. compute (info): compute takes 60% of the step" in text
    assert text.index("1. input") < text.index("2. compute") < text.index("not judged:")
    assert "  - straggler: one rank" in text
    assert text.rstrip().endswith("verdict: no clear bottleneck: input pipeline: ranks wait")


def test_no_finding_prints_the_verdict_only():
    text = _render(Diagnosis((), (), Verdict("no bottleneck", note="no clear bottleneck")))
    assert "1." not in text and "not judged" not in text
    assert "verdict: no clear bottleneck" in text


def test_json_builtins_keep_every_field():
    d = Diagnosis((INPUT,), (), Verdict("no bottleneck", note="v"))
    doc = json.loads(msgspec.json.encode(diagnosis_builtins(d)))
    assert list(doc) == ["findings", "not_judged", "verdict", "thresholds"]
    assert doc["thresholds"] == {
        f.name: getattr(DEFAULT_THRESHOLDS, f.name) for f in fields(DEFAULT_THRESHOLDS)
    }
    finding = doc["findings"][0]
    assert list(finding) == [
        "code", "bottleneck", "summary", "share_pct", "saved_ms_per_step", "evidence",
        "remedies", "rank", "level", "basis", "dim", "since_step",
    ]  # fmt: skip
    assert finding["evidence"][0] == {
        "name": "data wait", "value": 34.2, "unit": "% of step time", "threshold": 10.0,
        "comparison": ">=",
    }  # fmt: skip


def test_the_page_draws_the_findings_section_the_terminal_prints():
    """One section for the terminal and the dashboard: the page says what the terminal says,
    escaped."""
    from scalescope.report.document import Items, Line
    from scalescope.report.media.html import block_html
    from scalescope.report.views.diagnosis import findings_section

    hostile = Finding(**{f.name: getattr(INPUT, f.name) for f in fields(Finding)} | {
        "summary": "rank <script>alert(1)</script> waits", "level": "warning"})  # fmt: skip
    d = Diagnosis(
        (hostile, COMPUTE),
        ("straggler: one rank",),
        Verdict("no bottleneck", note="input pipeline: ranks wait"),
    )
    section = findings_section(d)
    page = block_html(section)
    assert page.startswith('<section id="findings"><h2>Findings</h2><ol>')
    assert "<script>" not in page and "rank &lt;script&gt;alert(1)&lt;/script&gt; waits" in page
    assert '<li class="finding warning"><b>input pipeline: rank &lt;script&gt;' in page
    assert f"<br>cost: {cost_line(INPUT)}" in page
    assert "<li>data wait 34.2% of step time (threshold 10%)</li>" in page
    assert "<p>change:</p><ul><li>load batches while the step runs" in page
    assert "<b>compute <small>(info)</small>: compute takes 60% of the step</b>" in page
    assert "<p>not judged:</p><ul><li>straggler: one rank</li></ul>" in page
    assert page.endswith(
        "<p><strong>verdict:</strong> no clear bottleneck: input pipeline: ranks wait</p></section>"
    )
    items, verdict = section.blocks[0], section.blocks[-1]
    assert isinstance(items, Items) and isinstance(verdict, Line)
    first, second = items.items
    assert (first.label, first.aside, second.aside) == ("input pipeline", "", "(info)")
    assert first.lines == (f"cost: {cost_line(INPUT)}",)
    assert [b.caption for b in first.lists] == ["evidence", "change"]
    assert (verdict.label, verdict.text) == ("verdict:", d.verdict.line)
