"""A planted run's predicted gain for the truth's cause: the what-if's fix with its re-run
interval, or, where the what-if takes no such cause, the verdict's own cost of it (a stage's)
or the schedule's doubled replay; the pairs' median prediction."""

from __future__ import annotations

from score import Predicted

from scalescope.analyze.model.bootstrap import MODEL_ERROR
from scalescope.analyze.verdict import Verdict
from scalescope.diagnose.noise import noise_ms
from scalescope.diagnose.recording import Recording


def predicted_ms(rec: Recording, cause: str | None) -> Predicted | None:
    """The what-if's gain of fixing the truth's cause on the planted run, with its 95 %
    bootstrap interval; where the what-if takes no such cause (``stage:N``) or replays no
    step (a 3d layout's run), the verdict's own cost of the cause naming it, with its range."""
    if cause is None:
        return None
    found = rec.analysis.whatif
    fix = next((f for f in found.fixes if f.cause == cause), None) if found else None
    if fix is None:
        try:
            asked = rec.what_if([cause])
        except ValueError:
            return verdict_cost(rec.verdict, cause) or schedule_cost(rec, cause)
        if asked is None:
            return verdict_cost(rec.verdict, cause) or schedule_cost(rec, cause)
        fix = asked.fixes[0] if asked.fixes else None
    if fix is None:
        return None
    if fix.rerun_low_ms is not None and fix.rerun_high_ms is not None:
        return Predicted(fix.gain_ms, fix.rerun_low_ms, fix.rerun_high_ms)
    return Predicted(fix.gain_ms, fix.gain_low_ms, fix.gain_high_ms)


def verdict_cost(verdict: Verdict, culprit: str) -> Predicted | None:
    named = (c for c in verdict.causes
             if c.culprit and f"{c.culprit.kind}:{c.culprit.name}" == culprit)  # fmt: skip
    cause = next(named, None)
    if cause is None or cause.cost is None:
        return None
    cost = cause.cost
    if not cost.replayed:  # an estimate's range is its factor of 2 already
        return Predicted(cost.ms_per_step, cost.low_ms, cost.high_ms)
    margin = MODEL_ERROR * abs(cost.ms_per_step)  # the replay's own error, as a fix's re-run's
    return Predicted(cost.ms_per_step, cost.low_ms - margin, cost.high_ms + margin)


def schedule_cost(rec: Recording, cause: str) -> Predicted | None:
    """A schedule's microbatches the verdict does not name (the bubble's doubled replay gains
    nothing): that replay's gain all the same, with the steps' noise and the replay's own
    error either side, so that a fix the run's own times say would lose is scored too."""
    pipe = rec.analysis.pipeline
    if not cause.startswith("schedule:") or pipe is None or pipe.doubled is None:
        return None
    gain = pipe.doubled.gain_ms
    margin = (noise_ms(rec.analysis.whatif) or 0.0) + MODEL_ERROR * abs(gain)
    return Predicted(gain, gain - margin, gain + margin)


def median_prediction(predictions: list[Predicted | None]) -> Predicted | None:
    """The pairs' median prediction (the lower of the middle two), its interval with it."""
    known = sorted((p for p in predictions if p is not None), key=lambda p: p.ms)
    return known[(len(known) - 1) // 2] if known else None
