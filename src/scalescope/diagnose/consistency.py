"""The diagnosis agrees with the analysis it reads.

The verdict can never be ``no clear bottleneck`` while an analysis section reports a cost
above a finding's threshold. ``analysis_costs`` lists those figures as the sections print
them (the data wait of the step breakdown, the exposed communication and the straggler's
lateness and load imbalance of the cross-rank section), each with its threshold and the
findings that account for it. The rules are meant to cover every one of them
(tests/unit/diagnose/test_consistency.py walks them all); ``unexplained`` is the net: a
figure above its threshold that no finding accounts for becomes an ``UNEXPLAINED``
warning, so a blind spot of the rules shows as one instead of as a healthy run.
"""

from __future__ import annotations

from dataclasses import dataclass

from scalescope.diagnose.findings import Evidence, Finding, bottleneck, remedy, summary
from scalescope.diagnose.rules_comm import exposed
from scalescope.diagnose.rules_extra_work import CODES as RANK_ONLY
from scalescope.diagnose.rules_input import (
    DiagnosisInput,
    mean_phase,
    mean_step,
    rank_times,
    share_pct,
)
from scalescope.diagnose.rules_ranks import straggler_cost
from scalescope.diagnose.rules_stages import CODES as STAGE_CODES

RANK_ONLY_CODES = tuple(RANK_ONLY.values())


@dataclass(frozen=True)
class AnalysisCost:
    """One figure of the analysis that a finding's threshold applies to."""

    name: str
    section: str
    """The report section that prints it."""
    value: float
    unit: str
    """``% of step time``, or ``%`` for the load imbalance (of the mean busy time)."""
    threshold: str
    """The ``Thresholds`` field it is compared with."""
    codes: tuple[str, ...]
    """Findings that account for it; the first names its bottleneck."""

    def crosses(self, ctx: DiagnosisInput) -> bool:
        return self.value >= getattr(ctx.thresholds, self.threshold)


def _cross_rank_costs(ctx: DiagnosisInput, step_ms: float | None) -> list[AnalysisCost]:
    cr = ctx.analysis.cross_rank
    if cr is None or ctx.analysis.world_size < 2:
        return []
    out = []
    if cr.straggler is not None and step_ms:
        cost = share_pct(straggler_cost(cr, cr.straggler.rank) or 0.0, step_ms)
        out.append(
            AnalysisCost(f"what rank {cr.straggler.rank} costs the others", "across ranks", cost,
                         "% of step time", "straggler_cost_pct",
                         ("STRAGGLER", *RANK_ONLY_CODES, *STAGE_CODES))
        )  # fmt: skip
    if cr.load_imbalance_pct is not None:
        out.append(
            AnalysisCost("load imbalance", "across ranks", cr.load_imbalance_pct, "%",
                         "imbalance_pct", ("LOAD_IMBALANCE", "STRAGGLER", *RANK_ONLY_CODES,
                          *STAGE_CODES))
        )  # fmt: skip
    return out


def analysis_costs(ctx: DiagnosisInput) -> tuple[AnalysisCost, ...]:
    """Every figure of the analysis with a finding's threshold, as measured in this run."""
    times = rank_times(ctx.analysis)
    step_ms = mean_step(times)
    out = []
    data_ms = mean_phase(times, "data")
    if data_ms is not None and step_ms:
        out.append(
            AnalysisCost("data wait", "step phases", share_pct(data_ms, step_ms),
                         "% of step time", "data_share_pct", ("INPUT_BOUND",))
        )  # fmt: skip
    exp = exposed(ctx.analysis) if ctx.analysis.world_size >= 2 else None
    if exp is not None:
        out.append(
            AnalysisCost("exposed communication", "across ranks", exp.share_pct,
                         "% of step time", "exposed_comm_share_pct",
                         ("COMM_LATENCY", "COMM_BANDWIDTH"))
        )  # fmt: skip
    return (*out, *_cross_rank_costs(ctx, step_ms))


def _finding(ctx: DiagnosisInput, cost: AnalysisCost) -> Finding:
    limit = getattr(ctx.thresholds, cost.threshold)
    step_share = cost.unit == "% of step time"
    return Finding(
        code="UNEXPLAINED",
        bottleneck=bottleneck(cost.codes[0]),
        summary=summary("UNEXPLAINED", name=cost.name, value=cost.value, unit=cost.unit,
                        section=cost.section),
        share_pct=cost.value if step_share else None,
        saved_ms_per_step=None,
        evidence=(Evidence(cost.name, round(cost.value, 1), cost.unit, limit, ">="),),
        remedies=(remedy("unexplained", section=cost.section),),
        basis=f"the analysis figure; no rule of {', '.join(cost.codes)} accounted for it",
    )  # fmt: skip


def unexplained(ctx: DiagnosisInput, findings: list[Finding]) -> list[Finding]:
    """An ``UNEXPLAINED`` warning for each figure above its threshold that none of the
    ``findings`` accounts for."""
    codes = {f.code for f in findings}
    return [
        _finding(ctx, cost)
        for cost in analysis_costs(ctx)
        if cost.crosses(ctx) and not codes.intersection(cost.codes)
    ]
