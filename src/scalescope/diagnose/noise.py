"""The steps' noise a replayed gain must exceed to be more than their step-to-step spread:
the verdict's (verdict.py) and the pipeline bubble's (rules_stages.py) one measure."""

from __future__ import annotations

import math

from scalescope.analyze.model.whatif import WhatIf

IDR_PER_SIGMA = 2.563
"""The 10th-90th percentile range of a normal spread, in standard deviations."""
SPREAD_SIGMAS = 2.0
"""The verdict's noise: this many standard errors of the replayed mean either side (a
replayed gain's range is its fix's bootstrap interval where the what-if has one)."""


def noise_ms(whatif: WhatIf | None, cause: str | None = None) -> float | None:
    """``SPREAD_SIGMAS`` standard errors of the mean step (ms) the replay of ``cause``'s fix
    leaves (default: the steps as measured): what a replayed gain must exceed to be more
    than the step-to-step spread. The fix's own steps, because a cause's spread (work every
    k steps) is the cause, not noise."""
    if whatif is None or whatif.steps < 2:
        return None
    fix = next((f for f in whatif.fixes if f.cause == cause), None)
    steps = fix.prediction if fix is not None else whatif.replayed
    sigma = max(steps.high_ms - steps.low_ms, 0.0) / IDR_PER_SIGMA
    return SPREAD_SIGMAS * sigma / math.sqrt(whatif.steps)
