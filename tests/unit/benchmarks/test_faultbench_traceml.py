"""TraceML beside scalescope in the fault matrix (benchmarks/faultbench/traceml.py): the rule
that maps TraceML's words to a culprit and a cause class, on summaries TraceML 0.5.0 printed
for real 2-rank ddp_train runs (tests/data/traceml), and its cell in the table."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks" / "faultbench"))
from cases import Case, Truth  # noqa: E402
from report import write_doc  # noqa: E402
from score import Measured, score, totals  # noqa: E402
from traceml import judge, read, run_case  # noqa: E402

from scalescope.analyze.verdict import Verdict  # noqa: E402

CAPTURED = ROOT / "tests" / "data" / "traceml"


def case(culprit: str | None, size: str = "clear") -> Case:
    truth = Truth(culprit, "straggler" if culprit else "none", size if culprit else "none")
    return Case("c", "ddp", ROOT / "tests" / "e2e" / "scripts" / "ddp_train.py", (), (), truth)


@pytest.mark.parametrize(
    "fixture, culprit, cause, verdict",
    [
        # rank 0 sleeps 36.9 ms in forward: the late rank, named on the Next line
        ("compute_straggler", "rank:0", "straggler", "COMPUTE STRAGGLER  (CRITICAL)"),
        # rank 1 sleeps 40 ms in backward: DDP's all-reduce evens backward out, no rank named
        ("compute_bound", None, "compute", "COMPUTE-BOUND"),
        # rank 1 sleeps 4.1 ms in its DataLoader's collate: a warning with no rank
        ("residual_heavy", None, "residual", "RESIDUAL-HEAVY  (WARNING)"),
        # rank 0 alone evaluates every 5 steps (gpt_train): its eval forwards read as compute
        ("rank0_eval", "rank:0", "straggler", "COMPUTE STRAGGLER  (CRITICAL)"),
        # a plain loop without trace_step: TraceML saw no step
        ("no_steps", None, "no verdict", "INSUFFICIENT STEP-TIME DATA"),
    ],
)
def test_traceml_words_map_to_a_culprit_and_a_class(
    fixture: str, culprit: str | None, cause: str, verdict: str
) -> None:
    named = read((CAPTURED / f"{fixture}.txt").read_text())
    assert (named.culprit, named.cause) == (culprit, cause)
    assert named.words.startswith(f"{verdict}: ") and "|" not in named.words


def test_a_straggler_is_the_rank_the_next_line_points_at_not_the_first_rank_named() -> None:
    box = (
        "|  Verdict: STRAGGLER  (WARNING)   |\n"
        "|  Why: r1 spent 44.6 ms in Backward, compared with 3.1 ms on r0; cause not measured. |\n"
        "|  Next: Inspect synchronization, collectives, and unattributed work around r0. |\n"
    )
    assert read(box).short == "rank:0 (straggler)"
    assert read("|  Verdict: RESIDUAL-HEAVY  (CRITICAL) |").short == "(no culprit) (residual)"
    assert read("|  Verdict: SOMETHING NEW |").cause == "something new"
    assert read("no summary at all").short == "(no culprit) (no verdict)"


def test_its_cell_is_judged_by_scalescopes_rules() -> None:
    straggler = read((CAPTURED / "compute_straggler.txt").read_text())
    compute = read((CAPTURED / "compute_bound.txt").read_text())
    assert judge(case("rank:0"), straggler).passed
    wrong = judge(case("rank:1"), straggler)
    assert not wrong.passed and wrong.culprit_ok is False and wrong.cause_ok is True
    assert not judge(case("rank:1"), compute).passed
    assert judge(case("rank:1", "marginal"), compute).passed
    assert judge(case(None), compute).passed and not judge(case(None), straggler).passed
    assert not judge(case(None), read("no summary")).passed


def test_a_case_it_cannot_run_says_why_in_one_line_and_the_table_has_its_column(
    tmp_path: Path,
) -> None:
    cell = run_case(case("rank:1"), tmp_path, "cannot install traceml-ai==0.5.0: no index")
    assert cell.named == "not run" and not cell.passed and "\n" not in cell.words
    ran = run_case(case("rank:1"), tmp_path, tmp_path / "no-such-traceml")
    assert ran.named == "not run" and "no-such-traceml" in ran.words
    c = case("rank:0")
    s = score(c, Verdict("no bottleneck"), None, [Measured(70.0, 40.0)])
    s = replace(s, traceml=judge(c, read((CAPTURED / "compute_straggler.txt").read_text())))
    doc = tmp_path / "accuracy.md"
    write_doc(doc, [c], [s], totals([s]), {"date": "d", "seed": 1, "pairs": 1, "steps": 20})
    text = doc.read_text()
    assert "| result | TraceML |" in text and "| **fail** | rank:0 (straggler): pass |" in text
    assert "ran 1 of 1 cases, passed 1" in text
    assert "  - c: COMPUTE STRAGGLER  (CRITICAL): R0/N0 spent 39.7 ms in Forward" in text
