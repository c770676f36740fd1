"""An onset is a level shift that holds (analyze/model/fixes.py ``onset``), and a mid-run cause
is costed on the steps since it (whatif.py): hand-built steps of two ranks, 30 steps of
100 ms of own work each and one all-reduce, with a little seeded jitter; rank 1 slowed from
step 12 on, or every 10th step, or in its first steps, or not at all."""

from __future__ import annotations

import numpy as np
import pytest

from scalescope.analyze.model.fixes import fix_ranks, onset
from scalescope.analyze.model.step_grid import StepGrid
from scalescope.analyze.model.whatif import what_if_of

MS = 1e6
STEPS = 30
OWN_MS = 100.0
TRANSFER_MS = 2.0
SLOW = np.array([1])


def grid(extra_ms: np.ndarray, seed: int = 0) -> StepGrid:
    """Two ranks: own work ``OWN_MS`` plus ``extra_ms`` (steps, ranks) and up to 0.5 ms of
    jitter before one blocking all-reduce; the measured step is the slower rank's."""
    rng = np.random.default_rng(seed)
    own = (OWN_MS + extra_ms + rng.uniform(0.0, 0.5, extra_ms.shape)) * MS
    steps, ranks = own.shape
    step = own.max(axis=1, keepdims=True) + TRANSFER_MS * MS
    return StepGrid(
        steps=np.arange(steps), ranks=np.arange(ranks), group=np.zeros((ranks, 1), dtype=int),
        work_ns=own[:, :, None], blocking=np.ones((steps, ranks, 1), dtype=bool),
        transfer_ns=np.full((steps, ranks, 1), TRANSFER_MS * MS),
        prejoin_ns=np.zeros((steps, ranks)), post_ns=np.zeros((steps, ranks)),
        joins=np.zeros((steps, ranks), dtype=bool), gap_ns=np.zeros((steps, ranks)),
        step_ns=np.broadcast_to(step, (steps, ranks)).copy(), samples=np.ones((steps, ranks)),
    )  # fmt: skip


def extra(rank1: dict[int, float], both: dict[int, float] | None = None) -> np.ndarray:
    """(steps, 2) extra ms: ``rank1`` at the steps named on rank 1, ``both`` on both ranks."""
    out = np.zeros((STEPS, 2))
    for step, ms in rank1.items():
        out[step, 1] += ms
    for step, ms in (both or {}).items():
        out[step] += ms
    return out


def rank1_fix(g: StepGrid, warmup_steps: int = 1):
    return what_if_of(g, [], {}, warmup_steps, causes=["rank:1"]).fixes[0]


ONSET = extra({s: 50.0 for s in range(12, STEPS)})
PERIODIC = extra({s: 150.0 for s in range(9, STEPS, 10)})
PERIODIC_AND_SHIFT = PERIODIC + extra({s: 6.0 for s in range(15, STEPS)})
"""The stall every 10th step, and from step 15 6 ms more a step: split at step 15, the steps
before look clean by their median, yet they stall too."""
WARM_UP_ALONE = extra({s: 80.0 for s in range(3)})
WARM_UP_ALL = extra({s: 20.0 for s in range(3, STEPS)}, both={s: 80.0 for s in range(3)})
"""Rank 1 does 20 ms more than rank 0 at every step, but in the first 3 steps both ranks are
80 ms slower and rank 1 no slower than rank 0: its excess seems to begin at step 3."""
WARM_UP_ALL[:3, 1] -= 20.0


def test_a_slowdown_that_holds_from_step_12_is_an_onset_at_step_12():
    g = grid(ONSET)
    assert onset(g, SLOW) == 12
    assert fix_ranks(g, SLOW)[1] == "began at step 12: as in steps 3-11"


@pytest.mark.parametrize("name", ["periodic", "warm-up alone", "warm-up of every rank", "no fault"])
def test_periodic_work_a_warm_up_and_no_fault_are_no_onset(name):
    planted = {
        "periodic": PERIODIC, "warm-up alone": WARM_UP_ALONE,
        "warm-up of every rank": WARM_UP_ALL, "no fault": np.zeros((STEPS, 2)),
    }[name]  # fmt: skip
    for seed in range(5):
        g = grid(planted, seed)
        assert onset(g, SLOW) is None, seed
        assert fix_ranks(g, SLOW)[1] == "at the pace of the other ranks"


def test_a_periodic_stall_is_costed_at_its_share_of_every_step():
    """150 ms every 10th step of 29 measured steps: 3 stalls, ~15.5 ms a step, not 0; with
    6 ms more from step 15, ~3 ms a step more."""
    for planted, gain in ((PERIODIC, 3 * 150.0 / 29), (PERIODIC_AND_SHIFT, (450 + 90) / 29)):
        fix = rank1_fix(grid(planted))
        assert fix.note == "at the pace of the other ranks"
        assert fix.since_step is None
        assert fix.gain_ms == pytest.approx(gain, abs=1.0)


def test_a_warm_up_costs_nothing_past_the_warm_up():
    """Rank 1 slow only in steps 0-2: measured from step 3, fixing it gains ~nothing; and the
    rank always 20 ms slower than the other, behind a warm-up of both, costs its 20 ms."""
    assert rank1_fix(grid(WARM_UP_ALONE), warmup_steps=3).gain_ms == pytest.approx(0.0, abs=0.5)
    assert rank1_fix(grid(WARM_UP_ALL), warmup_steps=3).gain_ms == pytest.approx(20.0, abs=1.0)


def test_a_mid_run_cause_is_costed_per_step_since_its_onset():
    """50 ms a step from step 12 of 30: the fix gains 50 ms a step since step 12, not the
    ~31 ms that averaging it with the 11 measured steps before would give."""
    fix = rank1_fix(grid(ONSET))
    assert fix.since_step == 12
    assert fix.gain_ms == pytest.approx(50.0, abs=1.0)
    assert fix.gain_pct == pytest.approx(100 * 50.0 / (OWN_MS + 50.0 + TRANSFER_MS), abs=1.0)


def test_a_mid_run_gains_interval_holds_its_gain_and_is_narrow():
    """The gain's 95 % bootstrap interval (bootstrap.py; the steps since the onset and the
    steps before it resampled apart) holds the gain and is a few ms wide, not the steps'
    spread; an always-slow rank's (the same steps, paired) too."""
    for fix in (rank1_fix(grid(ONSET)), rank1_fix(grid(WARM_UP_ALL), warmup_steps=3)):
        assert fix.gain_low_ms is not None and fix.gain_high_ms is not None
        assert fix.gain_low_ms <= fix.gain_ms <= fix.gain_high_ms
        assert fix.gain_high_ms - fix.gain_low_ms < 0.2 * fix.gain_ms
