"""The fault matrix's recorded subset (tests/data/faultbench: planted runs kept by
``benchmarks/faultbench/run.py --record``, each with its truth and its score when recorded):
the verdict on each names what it named then, and every clear fault's planted culprit first.
A change to the analysis that moves a verdict fails here with the case's name; record again
(docs/accuracy.md) when it is meant."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks" / "faultbench"))
from cases import Case, Truth  # noqa: E402
from score import named, score, thirds_recorded  # noqa: E402

from scalescope.diagnose.recording import Recording  # noqa: E402

RECORDED = sorted(p.parent for p in (ROOT / "tests" / "data" / "faultbench").glob("*/truth.json"))


def test_at_least_twelve_cases_are_recorded() -> None:
    assert len(RECORDED) >= 12
    sizes = {json.loads((f / "truth.json").read_text())["truth"]["size"] for f in RECORDED}
    assert {"clear", "marginal", "none"} <= sizes


@pytest.mark.parametrize("folder", RECORDED, ids=lambda p: p.name)
def test_the_verdict_scores_as_recorded(folder: Path) -> None:
    doc = json.loads((folder / "truth.json").read_text())
    truth = Truth(**doc["truth"])
    verdict = Recording.load(folder / "run").verdict
    case = Case(doc["case"], "recorded", folder, (), (), truth)
    now = score(case, verdict, None, [], None, thirds_recorded(doc))  # a no-fault case's arms
    assert named(verdict) == doc["score"]["named"]
    assert (now.culprit_ok, now.cause_ok, now.passed) == (
        doc["score"]["culprit_ok"], doc["score"]["cause_ok"], doc["score"]["passed"],
    )  # fmt: skip
    if truth.size == "clear":
        assert now.culprit_ok, f"{folder.name}: the planted {truth.culprit} is not named first"


def test_a_straggler_asleep_in_backward_is_costed_by_its_excess() -> None:
    """Held-out seed 4911's fsdp-backward-clear (its third pair's planted run, ``--record
    summary``): rank 0 sleeps 38 ms a step at the start of backward. Its peer waits for it at
    the root unshard, whose calls (in forward and again in backward) the summaries place at
    their mean arrival, in a 4 ms forward; the wait forward could not hold was lost, the
    rank's excess over its peer read 1-14 ms against the windows' 39 ms replayed gain, and
    carried by it (9 ms per ms) the fix bought 63.7 ms of a 59.6 ms step. The wait now comes
    off the peer's whole own time (StepSlots.whole_own_ns): the excess reads 34-40 ms, and the
    gain carried by it holds the gain its 3 pairs measured."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from predicted import predicted_ms

    folder = ROOT / "tests" / "data" / "faultbench" / "fsdp-backward-clear"
    doc = json.loads((folder / "truth.json").read_text())
    rec = Recording.load(folder / "run")
    fix = predicted_ms(rec, doc["truth"]["culprit"])
    measured = doc["score"]["measured_ms"]
    assert fix is not None and fix.ms == pytest.approx(39.45, abs=0.01)
    assert abs(fix.ms - measured) <= 0.2 * measured
    assert fix.low_ms <= measured <= fix.high_ms
    assert fix.ms < min(r.mean_step_ms for r in rec.analysis.steps.ranks)
