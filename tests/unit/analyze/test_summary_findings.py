"""The findings of recorded runs folded as at ``--record summary`` (benchmarks/faultbench/
levels.py) against the same runs recorded in full (issue 50): the what-if replays only the
full-row windows (steps 4-11 here), and the summaries of the other steps feed its peer test
and weigh its steps (analyze/model/window_sample.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks" / "faultbench"))
from levels import summarised_run  # noqa: E402

from scalescope.analyze.model.bootstrap import stratified_intervals  # noqa: E402
from scalescope.analyze.model.window_sample import Strata  # noqa: E402
from scalescope.diagnose.recording import Recording  # noqa: E402

DATA = ROOT / "tests" / "data" / "faultbench"


@pytest.fixture(scope="module")
def summarised(tmp_path_factory):
    """``case`` -> its recorded run folded as at summary (warm-up 4), made once."""
    made: dict[str, Recording] = {}

    def load(case: str) -> Recording:
        if case not in made:
            dest = tmp_path_factory.mktemp(case) / "run"
            summarised_run(DATA / case / "run", dest, warmup_steps=4)
            made[case] = Recording.load(dest)
        return made[case]

    return load


@pytest.mark.parametrize(
    ("case", "code"),
    [("gpt-rank0-eval", "RANK_ONLY_EVAL"), ("gpt-rank0-checkpoint", "RANK_ONLY_CHECKPOINT")],
)
def test_rank_only_work_seen_in_summaries_is_named(summarised, case: str, code: str) -> None:
    """Rank 0's work every 5 (6) steps: 2 (1) of the windows' 8 steps hold it, 4 of the
    run's 20 (26). Carried to the run by the work's time at every step, the replayed gain
    is known above 0, with a range of its own (one checkpoint in the windows leaves the
    run's four to resample), and names it as the run recorded in full does."""
    rec = summarised(case)
    assert rec.analysis.whatif.windows == tuple(range(4, 12))
    top = rec.verdict.top
    assert top is not None and top.code == code
    assert top.culprit is not None and top.culprit.ranks == (0,)
    assert top.cost is not None and top.cost.replayed
    assert 0 < top.cost.low_ms < top.cost.ms_per_step < top.cost.high_ms
    full = Recording.load(DATA / case / "run").verdict.top
    assert top.cost.ms_per_step == pytest.approx(full.cost.ms_per_step, rel=0.25)


def test_a_rank_late_every_other_step_is_beyond_the_spread_at_summary(summarised) -> None:
    """Rank 1's slow DataLoader makes it late every other step: over the windows' 8 steps
    the peer test cannot tell it from noise; with the summarised steps' own time it can,
    and the straggler, costed over the run, is named first as in full (then the input)."""
    rec = summarised("ddp-workers-input")
    assert "rank:1" in rec.analysis.whatif.beyond_spread
    top = rec.verdict.top
    assert top is not None and top.code == "STRAGGLER" and top.culprit.ranks == (1,)
    assert top.cost.replayed and top.cost.low_ms > 30


def test_a_run_recorded_in_full_carries_no_sample() -> None:
    """Nothing changes for a run recorded in full: no sample, no windows, no strata."""
    rec = Recording.load(DATA / "gpt-rank0-eval" / "run")
    assert rec.analysis.whatif.windows == ()


def test_strata_weigh_the_windows_by_the_run() -> None:
    """2 work steps of 8 in the windows, a fifth of the run's: each weighs 0.1, each other
    step 0.8 / 6; the stratified gain's interval holds it and stays above 0, where the
    windows' one-by-one resampling can draw no work step."""
    work = np.array([False, True, False, False, False, True, False, False])
    strata = Strata(work, 0.2)
    weights = strata.weights()
    assert weights.sum() == pytest.approx(1.0)
    assert weights[work] == pytest.approx([0.1, 0.1])
    measured = np.where(work, 120.0, 20.0) + np.linspace(-1, 1, 8)
    fixed = np.full(8, 20.0)
    gain = float(weights @ (measured - fixed))
    low, high, rerun_low, rerun_high = stratified_intervals(measured, fixed, work, 0.2, gain)
    assert 0 < low <= gain <= high
    assert rerun_low < low and rerun_high > high
