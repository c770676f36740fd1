"""A case's score: what the verdict named against the truth, and the what-if's predicted gain
against the gain measured by re-runs without the fault. Pure: the runner hands it the
planted run's verdict, the what-if's gain of the truth's culprit and the pairs' measurements."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from cases import CLASSES, Case

from scalescope.analyze.verdict import Verdict

GAIN_TOLERANCE = 0.20
"""A predicted gain within 20 % of the measured one, or within 5 % of the step, holds."""
STEP_TOLERANCE = 0.05


@dataclass(frozen=True)
class Measured:
    """One interleaved pair: the planted and the clean run's step by the script's clock."""

    planted_ms: float
    clean_ms: float

    @property
    def gain_ms(self) -> float:
        return self.planted_ms - self.clean_ms


@dataclass(frozen=True)
class ToolCell:
    """Another tool's cell for a case (``run.py --traceml``): what it names, by the same rules."""

    named: str
    """``rank:1 (straggler)``, ``(no culprit) (compute)``, or ``not run``."""
    words: str
    """The tool's own words (its verdict line), or why it could not run the case."""
    culprit_ok: bool | None
    cause_ok: bool | None
    passed: bool


@dataclass(frozen=True)
class CaseScore:
    case: str
    truth: str
    cause: str
    size: str
    named: str
    """What the verdict names: ``rank:1 (straggler)``, or ``no bottleneck``."""
    culprit_ok: bool | None
    """Top-1 culprit; None on a no-fault case."""
    cause_ok: bool | None
    passed: bool
    predicted_ms: float | None
    measured_ms: float | None
    spread_ms: float | None
    """The pairs' measured gains' range (max - min): the truth's own noise."""
    gain_ok: bool | None
    costed_on_no_fault: tuple[str, ...] = ()
    """On a no-fault case: every cause the verdict costs that no re-run confirms (each is a
    false alarm)."""
    confirmed: tuple[str, ...] = ()
    """On a no-fault case: the job's own communication cost, claimed by the verdict and
    holding against the gain measured without it (``Case.alone``)."""
    alone_ms: float | None = None
    """On a no-fault case with ``Case.alone``: the job's step less the same job's without
    communication, by its own clock (median over the pairs)."""
    skipped: str = ""
    """Why the case could not run (its training loop is not installed): neither passed nor
    failed, and left out of the totals."""
    traceml: ToolCell | None = None
    """TraceML's cell on the same case (``run.py --traceml``); None when not asked."""


def skip(case: Case, why: str) -> CaseScore:
    """The score of a case that could not run."""
    t = case.truth
    return CaseScore(case.name, t.culprit or "none", t.cause, t.size, "n/a", None, None, False,
                     None, None, None, None, skipped=why)  # fmt: skip


def named(verdict: Verdict) -> str:
    top = verdict.top
    if top is None:
        return "no bottleneck" if verdict.state == "no bottleneck" else verdict.state
    who = f"{top.culprit.kind}:{top.culprit.name}" if top.culprit else "(no culprit)"
    return f"{who} ({CLASSES.get(top.code, top.code)})"


def score(case: Case, verdict: Verdict, predicted_ms: float | None,
          pairs: list[Measured], alone: list[Measured] = ()) -> CaseScore:  # fmt: skip
    """``alone``: on a no-fault case, each pair's run against the same job without its
    communication (``Case.alone``)."""
    truth = case.truth
    top = verdict.top
    culprit = f"{top.culprit.kind}:{top.culprit.name}" if top and top.culprit else None
    cause = CLASSES.get(top.code, top.code) if top else None
    gains = [p.gain_ms for p in pairs]
    measured = statistics.median(gains) if gains else None
    if truth.culprit is None:
        return _no_fault(case, verdict, predicted_ms, gains, list(alone))
    culprit_ok, cause_ok = culprit == truth.culprit, cause == truth.cause
    quiet = truth.size == "marginal" and top is None
    step = statistics.median(p.planted_ms for p in pairs) if pairs else None
    gain_ok = _gain_ok(predicted_ms, measured, step)
    return CaseScore(
        case.name, truth.culprit, truth.cause, truth.size, named(verdict), culprit_ok, cause_ok,
        quiet or (culprit_ok and cause_ok), predicted_ms, measured, _spread(gains), gain_ok,
    )  # fmt: skip


def _no_fault(case: Case, verdict: Verdict, predicted_ms: float | None, gains: list[float],
              alone: list[Measured]) -> CaseScore:  # fmt: skip
    """Every cost the verdict claims is a false alarm, but the job's communication where
    its cost holds against the gain measured without it."""
    comm = statistics.median(p.gain_ms for p in alone) if alone else None
    step = statistics.median(p.planted_ms for p in alone) if alone else None
    confirmed, costed = [], []
    for c in verdict.causes:
        own = c.culprit is None and CLASSES.get(c.code) == "communication"
        ms = c.cost.ms_per_step if c.cost else None
        (confirmed if own and _gain_ok(ms, comm, step) else costed).append(c.short)
    measured = statistics.median(gains) if gains else None
    return CaseScore(case.name, "none", "none", "none", named(verdict), None, None,
                     not costed, predicted_ms, measured, _spread(gains), None, tuple(costed),
                     confirmed=tuple(confirmed), alone_ms=comm)  # fmt: skip


def _gain_ok(predicted: float | None, measured: float | None, step: float | None) -> bool | None:
    if predicted is None or measured is None or step is None:
        return None
    error = abs(predicted - measured)
    return error <= GAIN_TOLERANCE * abs(measured) or error <= STEP_TOLERANCE * step


def _spread(values: list[float]) -> float | None:
    return max(values) - min(values) if len(values) > 1 else None


@dataclass(frozen=True)
class Totals:
    cases: int
    clear_culprit_pct: float | None
    """Clear fault cases whose verdict names the planted culprit first."""
    cause_pct: float | None
    no_fault_false_alarms: int
    gain_median_error_pct: float | None
    gain_within_pct: float | None


def totals(scores: list[CaseScore]) -> Totals:
    scores = [s for s in scores if not s.skipped]
    clear = [s for s in scores if s.size == "clear"]
    faulty = [s for s in scores if s.culprit_ok is not None]
    errors = [abs(s.predicted_ms - s.measured_ms) / abs(s.measured_ms) * 100 for s in faulty
              if s.predicted_ms is not None and s.measured_ms]  # fmt: skip
    judged = [s.gain_ok for s in faulty if s.gain_ok is not None]
    return Totals(
        cases=len(scores),
        clear_culprit_pct=_pct([bool(s.culprit_ok) for s in clear]),
        cause_pct=_pct([s.passed for s in faulty]),
        no_fault_false_alarms=sum(len(s.costed_on_no_fault) for s in scores),
        gain_median_error_pct=statistics.median(errors) if errors else None,
        gain_within_pct=_pct(judged),
    )


def _pct(flags: list[bool]) -> float | None:
    return 100.0 * sum(flags) / len(flags) if flags else None
