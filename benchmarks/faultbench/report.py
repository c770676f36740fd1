"""docs/accuracy.md: the fault matrix's table, per case and in total, beside the tools users
would pick instead."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cases import Case
from score import CaseScore, ToolCell, Totals

TRACEML = "not run: `run.py --traceml` runs each case's planted arm under TraceML too"
"""What TraceML's column says when the bench ran without it."""


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.1f}"


def _flag(value: bool | None) -> str:
    return "n/a" if value is None else ("yes" if value else "**no**")


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f} %"


def _tool(cell: ToolCell | None) -> str:
    if cell is None:
        return "not run"
    if cell.named == "not run":
        return f"not run: {cell.words}"
    return f"{cell.named}: {'pass' if cell.passed else '**fail**'}"


def _beside(scores: list[CaseScore]) -> list[str]:
    """TraceML's line under "Beside the tools", and its own words case by case."""
    cells = [(s.case, s.traceml) for s in scores if s.traceml is not None]
    if not cells:
        return [f"- TraceML: {TRACEML}."]
    ran = [c for _, c in cells if c.named != "not run"]
    line = (
        f"- TraceML (traceml-ai 0.5.0, its own launcher `traceml run`, each step in "
        f"`traceml.trace_step`): ran {len(ran)} of {len(cells)} cases, passed "
        f"{sum(c.passed for c in ran)}; its words map to a culprit and a class by the "
        "rule written in `benchmarks/faultbench/traceml.py` before scoring. Its words:"
    )
    return [line, *(f"  - {name}: {cell.words}" for name, cell in cells)]


def row(case: Case, s: CaseScore) -> str:
    measured = _ms(s.measured_ms) + (f" (±{s.spread_ms / 2:,.1f})" if s.spread_ms else "")
    truth = "none" if s.truth == "none" else f"{s.truth}, {s.cause}, {s.size}"
    alarms = "; ".join(s.costed_on_no_fault)
    result = f"skip: {s.skipped}" if s.skipped else ("pass" if s.passed else "**fail**")
    return (f"| {case.name} | {case.layout} | {truth} | {s.named} | {_flag(s.culprit_ok)} | "
            f"{_flag(s.cause_ok)} | {_ms(s.predicted_ms)} | {measured} | {_flag(s.gain_ok)} | "
            f"{result}{': ' + alarms if alarms else ''} | "
            f"{_tool(s.traceml)} |")  # fmt: skip


RECORDED = Path(__file__).resolve().parents[2] / "tests" / "data" / "faultbench"
"""The recorded subset CI checks (``run.py --record``; tests/recorded/)."""


def recorded_section(folder: Path) -> list[str]:
    """The recorded subset's cases, each with its verdict and score as recorded (or as
    ``run.py --rescore`` scored them again)."""
    docs = [json.loads(p.read_text()) for p in sorted(folder.glob("*/truth.json"))]
    if not docs:
        return []
    rows = []
    for d in docs:
        t, sc = d["truth"], d["score"]
        truth = "none" if t["culprit"] is None else f"{t['culprit']}, {t['cause']}, {t['size']}"
        alarms = "; ".join(sc.get("costed_on_no_fault") or ())
        result = ("pass" if sc["passed"] else "**fail**") + (f": {alarms}" if alarms else "")
        rows.append(f"| {d['case']} | {truth} | {sc['named']} | {_ms(sc['predicted_ms'])} | "
                    f"{_ms(sc['measured_ms'])} | {result} |")  # fmt: skip
    return [
        "## The recorded subset (CI)",
        "",
        f"{len(docs)} planted runs kept by `run.py --record tests/data/faultbench` with their "
        "truth and score: `tests/recorded/test_faultbench_recorded.py` checks on each commit "
        "that each verdict names what it named then, and every clear fault's planted culprit "
        "first (`run.py --rescore` after a change meant to move them).",
        "",
        "| case | truth | named | predicted (ms/step) | measured (ms/step) | result |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
    ]


def write_doc(path: Path, cases: list[Case], scores: list[CaseScore], total: Totals,
              meta: dict[str, Any]) -> None:  # fmt: skip
    by_name = {c.name: c for c in cases}
    lines = [
        "# Accuracy: the fault matrix",
        "",
        "Written by `benchmarks/faultbench/run.py` (`make faultbench`); the scores are in "
        "`docs/accuracy.json`. Each case plants a fault in a real CPU job (2 or 3 ranks on 2 "
        "cores, gloo: DDP, FSDP2, 2-stage pipelines (hand-written GPipe; GPipe, 1F1B and "
        "interleaved 1F1B through torch.distributed.pipelining), and DDP through Lightning's "
        "and the Hugging Face Trainer's own loops) and runs it again without the fault, the two "
        "arms interleaved; the planted arm is the scored run. The fault never stands in the "
        "recorded command line (`planted.py ARM.json`). The faulty rank or stage, the size and "
        "the onset are drawn from the seed; no case has a threshold of its own. A case whose "
        "training loop is not installed says `skip: <why>`: neither passed nor failed, and "
        "left out of the totals.",
        "",
        f"Run {meta['date']}: seed {meta['seed']}, {meta['pairs']} pair(s) a case, "
        f"{meta['steps']} steps, {total.cases} cases.",
        "",
        "- culprit: the verdict's top cause names the planted rank or stage (top-1);",
        "- class: its cause class (`cases.CLASSES`);",
        "- predicted: the what-if's gain of fixing the planted cause on the planted run (where "
        "the what-if takes no such cause, as a pipeline stage, the verdict's own cost of it); "
        "measured: the planted arm's mean step less the clean arm's, by the script's own "
        "clock (± half the pairs' range); it holds within 20 % or 5 % of the step;",
        "- a marginal case also passes with no bottleneck; a no-fault case passes when the "
        "verdict costs nothing;",
        "- TraceML: what TraceML names on the same planted arm, and whether it passes by the "
        "same rules.",
        "",
        "| case | layout | truth | named | culprit | class | predicted (ms/step) | "
        "measured (ms/step) | gain holds | result | TraceML |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *(row(by_name[s.case], s) for s in scores),
        "",
        "## Totals",
        "",
        f"- clear faults whose culprit is named first: {_pct(total.clear_culprit_pct)} "
        "(target: all);",
        f"- fault cases passed (culprit and class, or a quiet marginal): {_pct(total.cause_pct)} "
        "(target: >= 95 %);",
        f"- causes costed on no-fault runs: {total.no_fault_false_alarms} (target: 0);",
        f"- what-if gain: median error {_pct(total.gain_median_error_pct)} (target: <= 10 %), "
        f"within tolerance in {_pct(total.gain_within_pct)} of the cases.",
        "",
        *recorded_section(RECORDED),
        "## Beside the tools users would pick instead",
        "",
        *_beside(scores),
        "- NVIDIA's straggler detection: 0.7.0 needs Python 3.12 and glibc 2.39; 0.4.1 calls "
        "`torch.cuda.synchronize()`: no CPU-only case can run it.",
        "- HTA 0.5: its temporal, idle, straggler and overlap analyses need GPU kernels; on CPU "
        "traces they raise or return NaN.",
        "",
    ]
    path.write_text("\n".join(lines), encoding="utf-8")
