"""The run's one verdict (analyze/verdict.py) from its ranked findings and its what-if: the
top cause, its culprit, its cost with the range it is known to, a second cause when the two
cannot be told apart, and what the verdict is for a run that failed, hung or was recorded
without the probe."""

from __future__ import annotations

from scalescope.analyze.layouts.pipeline import PipelineAnalysis
from scalescope.analyze.model.whatif import Fix, WhatIf
from scalescope.analyze.summary import RunAnalysis
from scalescope.analyze.verdict import Cause, Cost, Culprit, Verdict
from scalescope.diagnose.findings import Finding
from scalescope.diagnose.noise import noise_ms
from scalescope.diagnose.replayed import replayed_cause
from scalescope.diagnose.rules_stages import bounding, idlest

ESTIMATE_FACTOR = 2.0
"""A cost that was not replayed (a rule's estimate, or a measured part such as run-queue
wait standing for what a fix buys) is known to a factor of 2 either way."""
PIPELINE_CODES = ("PIPELINE_BUBBLE", "STAGE_IMBALANCE")
"""Causes whose culprit is the stage that bounds the pipeline, whichever stage idles."""


def verdict_of(findings: tuple[Finding, ...], analysis: RunAnalysis, source: str) -> Verdict:
    """The verdict of a run whose findings are ``findings``, in the engine's order (a hang
    or unsynchronised replicas first, then warnings by saving)."""
    if not analysis.probe:
        return Verdict("probe off", note="recorded without the probe: no events to judge")
    causes = tuple(_cause(f, analysis) for f in findings if f.level == "warning")
    noise = noise_ms(analysis.whatif)
    hang = next((c for c in causes if c.code == "HANG"), None)
    if hang is not None:
        return Verdict("hung", (hang,), source=source, noise_ms=noise)
    failed = analysis.first_failure
    if failed is not None:
        note = f"rank {failed.rank} {failed.status} first" + (
            f" (exit code {failed.exit_code})" if failed.exit_code is not None else ""
        )
        return Verdict("failed", _beside(causes), note=note, source=source, noise_ms=noise)
    above = tuple(c for c in causes if not _within_noise(c))
    if above:
        return Verdict("bottleneck", _beside(above), source=source, noise_ms=noise)
    info = [f for f in findings if f.level != "warning"]
    note = info[0].summary if info else ""
    if causes and causes[0].cost is not None:
        spread = causes[0].cost.high_ms - causes[0].cost.ms_per_step
        note = f"{causes[0].short} is within the steps' own spread (±{spread:.1f} ms)"
    if analysis.steps is None and not findings:
        return Verdict("no steps", note="no measured step", source=source, noise_ms=noise)
    return Verdict("no bottleneck", note=note, source=source, noise_ms=noise)


def _beside(causes: tuple[Cause, ...]) -> tuple[Cause, ...]:
    """The top cause, and the second when their costs' ranges overlap, ordered by their
    lower bounds."""
    if len(causes) < 2:
        return causes[:1]
    first, second = causes[0], causes[1]
    if first.cost is None or second.cost is None:
        return (first,)
    if second.cost.high_ms < first.cost.low_ms or first.cost.high_ms < second.cost.low_ms:
        return (first,)
    return tuple(sorted((first, second), key=lambda c: -c.cost.low_ms))  # type: ignore[union-attr]


def _within_noise(cause: Cause) -> bool:
    """A replayed gain no larger than its own uncertainty (its range reaches 0) names no
    cause."""
    cost = cause.cost
    return cost is not None and cost.replayed and cost.low_ms <= 0


def _cause(f: Finding, analysis: RunAnalysis) -> Cause:
    return Cause(f.code, f.bottleneck, f.summary, culprit(f, analysis), _cost(f, analysis))


def _cost(f: Finding, analysis: RunAnalysis) -> Cost | None:
    ms = f.saved_ms_per_step
    if ms is None:
        return None
    if f.basis.startswith("replayed"):
        low, high = replayed_range(ms, analysis.whatif, replayed_cause(f, analysis))
        return Cost(ms, low, high, True, f.share_pct, f.since_step)
    return Cost(ms, ms / ESTIMATE_FACTOR, ms * ESTIMATE_FACTOR, False, f.share_pct)


def replayed_range(ms: float, whatif: WhatIf | None, cause: str | None) -> tuple[float, float]:
    """The range a replayed cost ``ms`` is known to: its fix's 95 % bootstrap interval of the
    gain over the steps (bootstrap.py), not below 0 and holding ``ms``; where the what-if has
    no interval for it, ``noise_ms`` of the fix's steps either side."""
    fix = _fix(whatif, cause)
    if fix is None or fix.gain_low_ms is None or fix.gain_high_ms is None:
        spread = noise_ms(whatif, cause) or 0.0
        return max(ms - spread, 0.0), ms + spread
    return max(min(fix.gain_low_ms, ms), 0.0), max(fix.gain_high_ms, ms)


def _fix(whatif: WhatIf | None, cause: str | None) -> Fix | None:
    if whatif is None or cause is None:
        return None
    return next((f for f in whatif.fixes if f.cause == cause), None)


def culprit(f: Finding, analysis: RunAnalysis) -> Culprit | None:
    """Where the cause is: the bound stage of a pipeline's causes, the node or link its
    replayed fix names (``replayed_cause``), its rank, else its mesh dimension."""
    pipe = analysis.pipeline
    if f.code in PIPELINE_CODES and pipe is not None:
        return _pipeline_culprit(f, pipe)
    kind, _, name = (replayed_cause(f, analysis) or "").partition(":")
    if kind == "node":
        return Culprit("node", name, tuple(s.rank for s in analysis.ranks if s.hostname == name))
    if kind == "link":
        return Culprit("link", name)
    if f.rank is not None:
        return Culprit("rank", str(f.rank), (f.rank,))
    return Culprit("dim", f.dim) if f.dim else None


def _pipeline_culprit(f: Finding, pipe: PipelineAnalysis) -> Culprit:
    """The bound stage; for a bubble no stage bounds (the finding names the idlest stage,
    ``rules_stages.bounding``), the schedule: its microbatches are the cause, and no stage's
    is (the one computing most would be named by noise)."""
    if f.code == "PIPELINE_BUBBLE" and bounding(pipe, idlest(pipe)) is None:
        return Culprit("schedule", pipe.schedule, tuple(s.rank for s in pipe.ranks))
    held = tuple(s.rank for s in pipe.ranks if s.stage == pipe.bound_stage)
    return Culprit("stage", str(pipe.bound_stage), held)
