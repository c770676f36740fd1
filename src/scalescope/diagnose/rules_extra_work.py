"""Work beside training that only some ranks do: evaluation and checkpoints on rank 0.

The others wait for it in their next collective, so it costs every rank; the remedy is to
share it or to take it off the critical path, never faster cores (analyze/steps/extra_work.py).
"""

from __future__ import annotations

from scalescope.analyze.steps.extra_work import ExtraWork
from scalescope.diagnose.findings import (
    Evidence,
    Finding,
    bottleneck,
    listed,
    remedy,
    summary,
    who,
)
from scalescope.diagnose.rules_input import DiagnosisInput, mean_step, rank_times, share_pct
from scalescope.events.schema import CHECKPOINT
from scalescope.events.units import fmt_bytes_brief

CODES = {"eval": "RANK_ONLY_EVAL", CHECKPOINT: "RANK_ONLY_CHECKPOINT"}
REMEDIES = {"eval": ("eval_sharded", "eval_less_often"), CHECKPOINT: ("async_save",)}


def when(steps: tuple[int, ...], period: int | None) -> str:
    """``at steps 5, 10, 15 (every 5 steps)``."""
    shown = listed(steps, 6)
    every = f" (every {period} steps)" if period else ""
    return f"at step{'s' * (len(steps) > 1)} {shown}{every}"


def rank_only_work(ctx: DiagnosisInput, kind: str) -> ExtraWork | None:
    """The extra work of ``kind`` that some ranks did while the others waited."""
    cr = ctx.analysis.cross_rank
    found = next((w for w in cr.extra_work if w.kind == kind), None) if cr else None
    if found is None or not found.others or found.others_wait_ms_per_step is None:
        return None
    return found


def _evidence(work: ExtraWork, share: float, threshold: float) -> tuple[Evidence, ...]:
    out = [
        Evidence("done by", who(work.ranks)),
        Evidence("occurrences", len(work.steps)),
        Evidence("when", when(work.steps, work.period)),
        Evidence("its time per occurrence", round(work.ms_per_occurrence, 1), "ms"),
        Evidence("the others' extra wait per occurrence",
                 round(work.others_wait_ms_per_occurrence or 0.0, 1), "ms"),
        Evidence("the others' extra wait per step", round(work.others_wait_ms_per_step or 0.0, 2),
                 "ms"),
        Evidence("share of step time", round(share, 1), "%", threshold, ">="),
    ]  # fmt: skip
    if work.kind == CHECKPOINT:
        out.append(Evidence("bytes written per occurrence", round(work.nbytes_per_occurrence), "B"))
    return tuple(out)


class RankOnlyWorkRule:
    """Evaluation or checkpoints done by some ranks at some steps: a warning when the others'
    waiting for it reaches ``straggler_cost_pct`` of the step, information below."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.name = f"rank-only {kind}"

    def not_judged(self, ctx: DiagnosisInput) -> tuple[str, ...]:
        return ()

    def evaluate(self, ctx: DiagnosisInput) -> Finding | None:
        work = rank_only_work(ctx, self.kind)
        step_ms = mean_step(rank_times(ctx.analysis))
        if work is None or not step_ms:
            return None
        per_step = work.others_wait_ms_per_step or 0.0
        share = share_pct(per_step, step_ms)
        threshold = ctx.thresholds.straggler_cost_pct
        code = CODES[self.kind]
        size = ""
        if self.kind == CHECKPOINT:
            size = f", {fmt_bytes_brief(round(work.nbytes_per_occurrence))}"
        return Finding(
            code=code, bottleneck=bottleneck(code),
            summary=summary(
                code, who=who(work.ranks), when=when(work.steps, work.period),
                ms=work.ms_per_occurrence, size=size,
                wait=work.others_wait_ms_per_occurrence or 0.0, per_step=per_step,
            ),
            share_pct=share, saved_ms_per_step=per_step,
            evidence=_evidence(work, share, threshold),
            remedies=tuple(remedy(r, who=who(work.ranks)) for r in REMEDIES[self.kind]),
            rank=work.ranks[0] if len(work.ranks) == 1 else None,
            level="warning" if share >= threshold else "info",
            basis="the other ranks' waiting at those steps above their median step's",
        )  # fmt: skip


RANK_ONLY_RULES = (RankOnlyWorkRule("eval"), RankOnlyWorkRule(CHECKPOINT))


def explains_straggler(ctx: DiagnosisInput, rank: int, cost_ms: float) -> bool:
    """The straggler's cost is mostly rank-only work it does: that finding names it."""
    works = (rank_only_work(ctx, kind) for kind in CODES)
    return any(
        w is not None and rank in w.ranks and (w.others_wait_ms_per_step or 0.0) >= 0.5 * cost_ms
        for w in works
    )
