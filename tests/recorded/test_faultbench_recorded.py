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
