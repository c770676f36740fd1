"""No what-if promises more than the step it is costed on: over every recorded run (the
scenarios and the fault matrix's subset), each fix's gain is at most the mean step as measured
by the STEP rows of the steps it is costed on (those since its onset for a cause that began
mid-run), on the fastest rank. Held-out seed 4911's FSDP2 straggler promised 63.7 ms of a
59.6 ms step before a rank's gain over a summarised run was checked against its excess
(run_gain.PER_MS_MOST)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from recorded_runs import RUNS

from scalescope.api.recording import load

SUBSET = RUNS.parent / "faultbench"
RECORDED = sorted(RUNS.glob("*/run")) + sorted(SUBSET.glob("*/run"))


def step_bound_ms(rec, since: int | None) -> float:
    """The mean step of the fastest rank over the measured steps (since ``since``)."""
    steps = rec.steps().to_pydict()
    by_rank: dict[int, list[float]] = {}
    for rank, step, dur, measured in zip(steps["rank"], steps["step"], steps["dur_ns"],
                                         steps["measured"], strict=True):  # fmt: skip
        if measured and (since is None or step >= since):
            by_rank.setdefault(rank, []).append(dur / 1e6)
    return min(float(np.mean(v)) for v in by_rank.values())


@pytest.mark.parametrize("run_dir", RECORDED, ids=lambda p: p.parent.name)
def test_no_fix_gains_more_than_its_step(run_dir: Path) -> None:
    rec = load(run_dir)
    found = rec.what_if()
    if found is None:
        pytest.skip("no what-if: the run has no steps to replay")
    for fix in found.fixes:
        bound = step_bound_ms(rec, fix.since_step)
        assert fix.gain_ms <= bound, f"{fix.cause}: {fix.gain_ms:.1f} ms of a {bound:.1f} ms step"


def test_every_recorded_run_is_checked() -> None:
    assert len(RECORDED) >= 50
