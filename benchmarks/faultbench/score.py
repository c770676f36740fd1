"""A case's score: what the verdict named against the truth, the what-if's predicted gain
against the gain measured by re-runs without the fault, whether the gain's 95 % bootstrap
interval holds the measured gain, and, on a mid-run case, how soon the live alert named the
culprit. Pure: the runner hands it the planted run's verdict, the what-if's gain of the
truth's culprit (with its interval), the pairs' measurements and the alert's delay."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from alerts import ALERT_WITHIN_S
from cases import CLASSES, Case

from scalescope.analyze.verdict import Cause, Verdict

GAIN_TOLERANCE = 0.20
"""A predicted gain within 20 % of the measured one, or within 5 % of the step, holds."""
STEP_TOLERANCE = 0.05
MAX_PAIRS = 7
"""The most pairs a case's truth gets (``run.py`` adds pairs while it is too noisy)."""
MEDIAN_SE = 1.2533
"""The standard error of a median of n normal draws is ~1.2533 sd / sqrt(n)."""


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
    """On a no-fault case: the job's own communication (or input loading) cost, claimed by
    the verdict and holding against the gain measured without it (``Case.alone``,
    ``Case.alone_input``)."""
    alone_ms: float | None = None
    """On a no-fault case with ``Case.alone``: the job's step less the same job's without
    communication, by its own clock (median over the pairs)."""
    input_ms: float | None = None
    """On a no-fault case with ``Case.alone_input``: the job's step less the same job's
    without its input loading (median over the pairs)."""
    skipped: str = ""
    """Why the case could not run (its training loop is not installed): neither passed nor
    failed, and left out of the totals."""
    traceml: ToolCell | None = None
    """TraceML's cell on the same case (``run.py --traceml``); None when not asked."""
    gain_low_ms: float | None = None
    gain_high_ms: float | None = None
    """The predicted gain's 95 % bootstrap interval over the steps (``Fix.gain_low_ms``; a
    stage's: the verdict's range of its cost)."""
    interval_ok: bool | None = None
    """Whether the interval holds the measured gain; None without either."""
    interval_width_ms: float | None = None
    interval_width_pct: float | None = None
    """The interval's width, ms and % of the planted run's step by the script's clock."""
    alert_s: float | None = None
    """A mid-run case: seconds from the onset step's start on the culprit rank to the first
    live alert naming it; None when none did (or not a mid-run case)."""
    alert_ok: bool | None = None
    """A mid-run case: an alert named the culprit within ``ALERT_WITHIN_S``; else None."""
    seed: int | None = None
    """The seed its case was drawn from (``run.py``; None: the run's one seed)."""
    noisy: bool = False
    """The truth is too noisy to judge a gain by: its median's standard error over the pairs
    exceeds the tolerance after ``MAX_PAIRS`` pairs (or the pairs run). Its gain is never
    judged as holding: it counts against the gains within tolerance."""


@dataclass(frozen=True)
class Predicted:
    """The what-if's gain of fixing the truth's cause on a planted run, and its interval."""

    ms: float
    low_ms: float | None = None
    high_ms: float | None = None


def skip(case: Case, why: str) -> CaseScore:
    """The score of a case that could not run."""
    t = case.truth
    return CaseScore(case.name, t.culprit or "none", t.cause, t.size, "n/a", None, None, False,
                     None, None, None, None, skipped=why)  # fmt: skip


JOB_COMMUNICATION = "comm:hidden"
"""The culprit of a communication cause that names no rank, link or dimension: the job's
own communication, as the what-if names its fix (no transfer time)."""


def culprit_of(cause: Cause) -> str | None:
    """``kind:name`` of the cause's culprit; a communication cause without one blames the
    job's communication (``JOB_COMMUNICATION``)."""
    if cause.culprit is not None:
        return f"{cause.culprit.kind}:{cause.culprit.name}"
    return JOB_COMMUNICATION if CLASSES.get(cause.code) == "communication" else None


def named(verdict: Verdict) -> str:
    top = verdict.top
    if top is None:
        return "no bottleneck" if verdict.state == "no bottleneck" else verdict.state
    who = culprit_of(top) or "(no culprit)"
    return f"{who} ({CLASSES.get(top.code, top.code)})"


def score(case: Case, verdict: Verdict, predicted: Predicted | float | None,
          pairs: list[Measured], alert_s: float | None = None,
          thirds: Mapping[str, list[Measured]] | None = None) -> CaseScore:  # fmt: skip
    """The case's score (``predicted``: a bare gain where no interval is known; ``alert_s``:
    the live alert's delay on a mid-run case; ``thirds``: on a no-fault case, each pair's
    run against the same job without one of its own costs, by that cost's class,
    ``Case.thirds``)."""
    if not isinstance(predicted, Predicted):
        predicted = None if predicted is None else Predicted(predicted)
    thirds = {kind: list(arm) for kind, arm in (thirds or {}).items() if arm}
    plain = _plain(case, verdict, predicted.ms if predicted else None, pairs, thirds)
    if plain.culprit_ok is None:
        return plain
    step = statistics.median(p.planted_ms for p in pairs) if pairs else None
    return replace(plain, **_interval(predicted, plain.measured_ms, step),
                   **_alert(case, alert_s))  # fmt: skip


def _interval(predicted: Predicted | None, measured: float | None,
              step: float | None) -> dict[str, Any]:  # fmt: skip
    """The interval's fields of a case's score."""
    if predicted is None or predicted.low_ms is None or predicted.high_ms is None:
        return {}
    low, high = predicted.low_ms, predicted.high_ms
    return {
        "gain_low_ms": low, "gain_high_ms": high,
        "interval_ok": None if measured is None else low <= measured <= high,
        "interval_width_ms": high - low,
        "interval_width_pct": 100.0 * (high - low) / step if step else None,
    }  # fmt: skip


def _alert(case: Case, alert_s: float | None) -> dict[str, Any]:
    """A mid-run case's alert fields: passed when an alert named the culprit in time. A
    generated run (``Case.synthetic``) had no launcher watching it: no alert is judged."""
    if case.since <= 0 or case.synthetic is not None:
        return {}
    return {"alert_s": alert_s, "alert_ok": alert_s is not None and alert_s <= ALERT_WITHIN_S}


def _plain(case: Case, verdict: Verdict, predicted_ms: float | None,
           pairs: list[Measured], thirds: dict[str, list[Measured]]) -> CaseScore:  # fmt: skip
    truth = case.truth
    top = verdict.top
    culprit = culprit_of(top) if top else None
    cause = CLASSES.get(top.code, top.code) if top else None
    gains = [p.gain_ms for p in pairs]
    measured = statistics.median(gains) if gains else None
    if truth.culprit is None:
        return _no_fault(case, verdict, predicted_ms, gains, thirds)
    culprit_ok, cause_ok = culprit == truth.culprit, cause == truth.cause
    quiet = truth.size == "marginal" and top is None
    step = statistics.median(p.planted_ms for p in pairs) if pairs else None
    noisy = too_noisy(pairs)
    gain_ok = None if noisy else _gain_ok(predicted_ms, measured, step)
    return CaseScore(
        case.name, truth.culprit, truth.cause, truth.size, named(verdict), culprit_ok, cause_ok,
        quiet or (culprit_ok and cause_ok), predicted_ms, measured, _spread(gains), gain_ok,
        noisy=noisy,
    )  # fmt: skip


def _no_fault(case: Case, verdict: Verdict, predicted_ms: float | None, gains: list[float],
              thirds: dict[str, list[Measured]]) -> CaseScore:  # fmt: skip
    """Every cost the verdict claims is a false alarm, but the job's own communication or
    input loading (a cause of that class naming no rank) where the gain measured without it
    (``thirds``: the arms by class) holds its cost (``_holds``)."""
    gain = {k: statistics.median(p.gain_ms for p in v) for k, v in thirds.items()}
    step = {k: statistics.median(p.planted_ms for p in v) for k, v in thirds.items()}
    confirmed, costed = [], []
    for c in verdict.causes:
        kind = _own_class(c)
        ms = c.cost.ms_per_step if c.cost else None
        if kind in thirds and too_noisy(thirds[kind]):
            costed.append(f"{c.short} ({TOO_NOISY_TO_CONFIRM})")
        elif kind in gain and _holds(ms, gain[kind], step[kind]):
            confirmed.append(c.short)
        else:
            costed.append(c.short)
    measured = statistics.median(gains) if gains else None
    return CaseScore(case.name, "none", "none", "none", named(verdict), None, None,
                     not costed, predicted_ms, measured, _spread(gains), None, tuple(costed),
                     confirmed=tuple(confirmed), alone_ms=gain.get("communication"),
                     input_ms=gain.get("input"))  # fmt: skip


TOO_NOISY_TO_CONFIRM = "its re-runs without it too noisy to confirm"
"""A no-fault run's claim whose arm without that cost stays too noisy (``too_noisy``) after
``MAX_PAIRS`` pairs: never confirmed by default, it counts as a false alarm."""


def _own_class(cause: Cause) -> str | None:
    """The class of a cost the verdict claims for the job itself (a cause naming no rank)."""
    return CLASSES.get(cause.code) if cause.culprit is None else None


def unsettled_claims(verdict: Verdict, thirds: Mapping[str, list[Measured]]) -> list[str]:
    """The classes of the job's own costs the verdict claims whose arm without that cost is
    too noisy to confirm or refute it by: the runner adds pairs for them."""
    claimed = {_own_class(c) for c in verdict.causes}
    return [kind for kind, arm in thirds.items() if kind in claimed and too_noisy(arm)]


RECORDED_AS = {"communication": "alone", "input": "alone_input"}
"""A recorded case's truth.json keeps each third arm's pairs under this key."""


def recorded_thirds(thirds: Mapping[str, list[Measured]]) -> dict[str, list[dict]]:
    return {RECORDED_AS[kind]: [asdict(m) for m in arm] for kind, arm in thirds.items()}


def thirds_recorded(doc: Mapping[str, Any]) -> dict[str, list[Measured]]:
    """A recorded truth.json's third arms, by class (``recorded_thirds``' inverse)."""
    return {kind: [Measured(**m) for m in doc.get(key, [])] for kind, key in RECORDED_AS.items()}


def _gain_ok(predicted: float | None, measured: float | None, step: float | None) -> bool | None:
    if predicted is None or measured is None or step is None:
        return None
    return abs(predicted - measured) <= _tolerance(measured, step)


def _tolerance(measured: float, step: float) -> float:
    return max(GAIN_TOLERANCE * abs(measured), STEP_TOLERANCE * step)


def _holds(claimed: float | None, measured: float | None, step: float | None) -> bool:
    """A no-fault run's communication cost is there when the job without its communication
    gains at least the claimed cost, within the tolerance: a cost under the measured one is
    real, only lower (its error is the gain column's question, not a false alarm)."""
    if claimed is None or measured is None or step is None:
        return False
    return claimed <= measured + _tolerance(measured, step)


def too_noisy(pairs: list[Measured]) -> bool:
    """Whether the pairs' median gain is too uncertain to judge a prediction by: its standard
    error (``MEDIAN_SE`` sd / sqrt(n)) exceeds the tolerance around it. One pair has no
    spread to tell, and is judged as it is."""
    if len(pairs) < 2:
        return False
    gains = [p.gain_ms for p in pairs]
    step = statistics.median(p.planted_ms for p in pairs)
    error = MEDIAN_SE * statistics.stdev(gains) / len(gains) ** 0.5
    return error > _tolerance(statistics.median(gains), step)


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
    interval_holds_pct: float | None = None
    """Fault cases whose gain's 95 % interval holds the measured gain (target: >= 90 %)."""
    interval_median_width_ms: float | None = None
    interval_median_width_pct: float | None = None
    """The intervals' median width, ms and % of the step."""
    alerts_ok_pct: float | None = None
    """Mid-run cases whose live alert named the culprit within ``ALERT_WITHIN_S``."""
    noisy_truths: int = 0
    """Fault cases whose truth stayed too noisy to judge the gain by (counted as missing it)."""


def totals(scores: list[CaseScore]) -> Totals:
    scores = [s for s in scores if not s.skipped]
    clear = [s for s in scores if s.size == "clear"]
    faulty = [s for s in scores if s.culprit_ok is not None]
    errors = [abs(s.predicted_ms - s.measured_ms) / abs(s.measured_ms) * 100 for s in faulty
              if s.predicted_ms is not None and s.measured_ms]  # fmt: skip
    judged = [bool(s.gain_ok) for s in faulty if s.gain_ok is not None or s.noisy]
    held = [s.interval_ok for s in faulty if s.interval_ok is not None]
    widths = [s.interval_width_ms for s in faulty if s.interval_width_ms is not None]
    width_pcts = [s.interval_width_pct for s in faulty if s.interval_width_pct is not None]
    alerted = [s.alert_ok for s in faulty if s.alert_ok is not None]
    return Totals(
        cases=len(scores),
        clear_culprit_pct=_pct([bool(s.culprit_ok) for s in clear]),
        cause_pct=_pct([s.passed for s in faulty]),
        no_fault_false_alarms=sum(len(s.costed_on_no_fault) for s in scores),
        gain_median_error_pct=statistics.median(errors) if errors else None,
        gain_within_pct=_pct(judged),
        interval_holds_pct=_pct(held),
        interval_median_width_ms=statistics.median(widths) if widths else None,
        interval_median_width_pct=statistics.median(width_pcts) if width_pcts else None,
        alerts_ok_pct=_pct(alerted),
        noisy_truths=sum(s.noisy for s in faulty),
    )


def _pct(flags: list[bool]) -> float | None:
    return 100.0 * sum(flags) / len(flags) if flags else None
