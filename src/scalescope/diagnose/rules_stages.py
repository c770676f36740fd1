"""Pipeline stages: the bubble, and stages of unequal cost (analyze/layouts/pipeline.py).

Ranks of different stages do different work: the rules that compare ranks as replicas
(``REPLICA_CODES``) are dropped for them (``different_stages``)."""

from __future__ import annotations

from scalescope.analyze.layouts.pipeline import PipelineAnalysis, theory_bubble_pct
from scalescope.analyze.layouts.schedule_replay import zero_bubble
from scalescope.analyze.layouts.stage_figures import StageFigures
from scalescope.diagnose.findings import Evidence, Finding, bottleneck, remedy, summary
from scalescope.diagnose.noise import noise_ms
from scalescope.diagnose.rules_input import DiagnosisInput

BUBBLE_PCT = 15.0
"""A stage idle this share of its step (%) in the bubble is a finding."""
IMBALANCE_GAIN_PCT = 10.0
"""A block move that shortens the step by this share (%) or more is a finding."""
CODES = ("PIPELINE_BUBBLE", "STAGE_IMBALANCE")
"""Findings that account for ranks of unequal busy time (a stage's lateness is its work)."""
BOUND_RATIO = 1.25
"""A stage computing this many times the idlest stage's time per microbatch bounds the
pipeline: the idlest stage's bubble is its wait for that stage, and that stage the cause."""
BUBBLE_BASIS = "estimate: the step less the theory's bubble at twice the microbatches"
REPLICA_CODES = frozenset({"STRAGGLER", "NODE_STRAGGLER", "LOAD_IMBALANCE", "INDEPENDENT_REPLICAS"})
"""Findings that compare ranks as replicas doing the same work."""


def different_stages(ctx: DiagnosisInput) -> bool:
    """The ranks hold different pipeline stages."""
    pipe = ctx.analysis.pipeline
    return pipe is not None and len({f.stage for f in pipe.ranks}) > 1


def idlest(pipe: PipelineAnalysis) -> StageFigures:
    """The rank idle the largest share of its step: the bubble finding's subject."""
    return max(pipe.ranks, key=lambda f: f.bubble_pct)


def bounding(pipe: PipelineAnalysis, idle: StageFigures) -> StageFigures | None:
    """The bound stage's busiest rank where that stage, not the schedule, makes ``idle``
    wait: another stage, computing ``BOUND_RATIO`` times as much per microbatch."""
    bound = max(
        (f for f in pipe.ranks if f.stage == pipe.bound_stage),
        key=lambda f: f.compute_ms_per_microbatch,
    )
    if bound.stage == idle.stage:
        return None
    heavier = bound.compute_ms_per_microbatch >= BOUND_RATIO * idle.compute_ms_per_microbatch
    return bound if heavier else None


def _bubble_remedies(pipe: PipelineAnalysis) -> tuple[str, ...]:
    """More microbatches, more stages per rank, a zero-bubble schedule; DeepSpeed's pipeline
    engine (probe/deepspeed_pipe.py) runs one schedule: its microbatches only; a zero-bubble
    schedule's bubble is the stages' waits for each other."""
    p, m, v = pipe.pipeline_ranks, pipe.microbatches, pipe.chunks_per_rank
    if zero_bubble(pipe.schedule):
        return (remedy("zero_bubble_left"),)
    if pipe.schedule.startswith("DeepSpeed"):
        return (remedy("more_microbatches_ds", m=2 * m, now=m, pct=theory_bubble_pct(p, 2 * m, v)),)
    return (
        remedy("more_microbatches", m=2 * m, now=m, pct=theory_bubble_pct(p, 2 * m, v)),
        remedy("interleaved", v=2 * v, pct=theory_bubble_pct(p, m, 2 * v)),
        remedy("zero_bubble"),
    )  # fmt: skip


class PipelineBubbleRule:
    """A stage idles ``BUBBLE_PCT`` or more of its step. Where another stage bounds the
    pipeline (``bounding``), the finding names that stage and its rank (the idlest stage only
    waits for it), and its saving is the schedule replayed with that stage at its peers' pace;
    else the schedule replayed with twice the microbatches (``_bubble_saving``). None under a
    zero-bubble schedule: the replay does not split its backward."""

    name = "pipeline bubble"

    def not_judged(self, ctx: DiagnosisInput) -> tuple[str, ...]:
        return ()

    def evaluate(self, ctx: DiagnosisInput) -> Finding | None:
        pipe = ctx.analysis.pipeline
        if pipe is None or not pipe.ranks:
            return None
        f = idlest(pipe)
        if f.bubble_pct < BUBBLE_PCT:
            return None
        no_theory = zero_bubble(pipe.schedule)
        bound = bounding(pipe, f)
        saved, basis = _bubble_saving(pipe, bound)
        loses = _more_microbatches_lose(pipe, bound, _noise_ms(ctx))
        remedies = _bubble_remedies(pipe) if loses is None else loses
        return Finding(
            code="PIPELINE_BUBBLE",
            bottleneck=bottleneck("PIPELINE_BUBBLE"),
            summary=_bubble_summary(pipe, f, bound),
            share_pct=round(f.bubble_pct, 1),
            saved_ms_per_step=None if no_theory else round(saved, 2),
            evidence=_bubble_evidence(pipe, f, bound),
            remedies=_bound_remedies(f, bound) + remedies,
            rank=f.rank if bound is None else bound.rank,
            level="warning" if loses is None else "info",
            basis="" if no_theory else basis,
        )


def _more_microbatches_lose(
    pipe: PipelineAnalysis, bound: StageFigures | None, noise_ms: float
) -> tuple[str, ...] | None:
    """Where no stage bounds the pipeline and the schedule replayed over twice the
    microbatches is no shorter by more than the steps' noise (each microbatch's fixed costs,
    analyze/layouts/stage_fixes.py, take back what the smaller bubble gives), the remedies
    that say so, and the finding is information: its change is no gain. None otherwise."""
    fix = pipe.doubled
    if bound is not None or fix is None or fix.gain_ms > noise_ms or zero_bubble(pipe.schedule):
        return None
    m = pipe.microbatches
    return (
        remedy("microbatch_costs", m=2 * m, now=m, after=fix.fixed_step_ms,
               before=fix.replayed_step_ms, schedule=pipe.schedule, noise=noise_ms),
        remedy("zero_bubble"),
    )  # fmt: skip


def _noise_ms(ctx: DiagnosisInput) -> float:
    """The steps' noise the verdict holds a replayed gain to (diagnose/verdict.py), 0 where
    no step was replayed."""
    return noise_ms(ctx.analysis.whatif) or 0.0


def _bubble_saving(pipe: PipelineAnalysis, bound: StageFigures | None) -> tuple[float, str]:
    """The replayed gain of the bound stage at its peers' pace, or (none bounding) of twice
    the microbatches (analyze/layouts/stage_fixes.py); the theory's estimate where the
    schedule could not be replayed."""
    fix = pipe.paced if bound is not None else pipe.doubled
    if fix is not None:
        what = (f"{bound.label} at its peers' pace per microbatch" if bound is not None
                else f"{2 * pipe.microbatches} microbatches")  # fmt: skip
        return max(fix.gain_ms, 0.0), (
            f"replayed: the {pipe.schedule} schedule with {what} against its replay now "
            f"({fix.replay_error_pct:+.0f}% off the measured step)"
        )
    better = theory_bubble_pct(pipe.pipeline_ranks, 2 * pipe.microbatches, pipe.chunks_per_rank)
    return max(pipe.step_ms * (pipe.theory_bubble_pct - better) / 100, 0.0), BUBBLE_BASIS


def _bubble_summary(pipe: PipelineAnalysis, idle: StageFigures, bound: StageFigures | None) -> str:
    """The idlest stage, or the stage that bounds the pipeline: the cause of the others'
    bubble, never the stage that waits for it."""
    shape = {"schedule": pipe.schedule, "stages": pipe.shape, "m": pipe.microbatches,
             "theory": pipe.theory_bubble_pct, "share": idle.bubble_pct}  # fmt: skip
    if bound is not None:
        return summary("PIPELINE_BUBBLE_BOUND", bound=bound.label, **shape)
    return summary("PIPELINE_BUBBLE", stage=idle.label, **shape)


def _bubble_evidence(
    pipe: PipelineAnalysis, idle: StageFigures, bound: StageFigures | None
) -> tuple[Evidence, ...]:
    out = (
        Evidence("bubble of the idlest stage", round(idle.bubble_pct, 1), "% of step time",
                 BUBBLE_PCT, ">="),
        Evidence("bubble per step", round(idle.bubble_ms, 1), "ms"),
        Evidence("of it, blocked waiting for the peer", round(idle.wait_ms, 1), "ms"),
        Evidence("schedule's theory (p-1)/(v*m+p-1)", round(pipe.theory_bubble_pct, 1),
                 "% of step time"),
    )  # fmt: skip
    if bound is None:
        return out
    return out + (
        Evidence(f"{bound.label} (bound) compute per microbatch",
                 round(bound.compute_ms_per_microbatch, 2), "ms"),
        Evidence(f"{idle.label} (idlest) compute per microbatch",
                 round(idle.compute_ms_per_microbatch, 2), "ms"),
    )  # fmt: skip


def _bound_remedies(idle: StageFigures, bound: StageFigures | None) -> tuple[str, ...]:
    if bound is None:
        return ()
    return (remedy("lighten_bound", bound=bound.label, ms=bound.compute_ms_per_microbatch,
                   light=idle.label, light_ms=idle.compute_ms_per_microbatch),)  # fmt: skip


class StageImbalanceRule:
    """The bound stage computes more per microbatch than another, and moving border blocks
    shortens the replayed step by ``IMBALANCE_GAIN_PCT`` or more of the measured step (the
    saving: the schedule's replay before the move less the replay after,
    analyze/layouts/block_move.py)."""

    name = "pipeline stage imbalance"

    def not_judged(self, ctx: DiagnosisInput) -> tuple[str, ...]:
        pipe = ctx.analysis.pipeline
        if pipe is not None and not any(f.blocks for f in pipe.ranks):
            return (f"{self.name}: no per-block times (a pipeline not built with "
                    "torch.distributed.pipelining)",)  # fmt: skip
        return ()

    def evaluate(self, ctx: DiagnosisInput) -> Finding | None:
        pipe = ctx.analysis.pipeline
        move = pipe.move if pipe is not None else None
        if pipe is None or move is None:
            return None
        saved = move.gain_ms
        share = 100 * saved / pipe.step_ms if pipe.step_ms else 0.0
        if share < IMBALANCE_GAIN_PCT:
            return None
        heavy = max(pipe.ranks, key=lambda f: f.compute_ms_per_microbatch)
        light = min(pipe.ranks, key=lambda f: f.compute_ms_per_microbatch)
        return Finding(
            code="STAGE_IMBALANCE",
            bottleneck=bottleneck("STAGE_IMBALANCE"),
            summary=summary(
                "STAGE_IMBALANCE",
                stage=heavy.stage,
                ms=heavy.compute_ms_per_microbatch,
                light=light.stage,
                light_ms=light.compute_ms_per_microbatch,
            ),  # fmt: skip
            share_pct=round(share, 1),
            saved_ms_per_step=round(saved, 2),
            evidence=tuple(
                Evidence(
                    f"stage {f.stage} compute per microbatch",
                    round(f.compute_ms_per_microbatch, 2),
                    "ms",
                )
                for f in pipe.ranks
            )
            + (
                Evidence("replayed step after the move", round(move.predicted_step_ms, 1), "ms"),
                Evidence("replayed step now", round(move.replayed_step_ms, 1), "ms"),
                Evidence("measured step", round(pipe.step_ms, 1), "ms"),
                Evidence(
                    "replay now against the measured step", round(move.replay_error_pct, 1), "%"
                ),
            ),  # fmt: skip
            remedies=(
                remedy(
                    "move_blocks",
                    n=move.blocks,
                    names=", ".join(move.names),
                    source=move.source,
                    target=move.target,
                    slowest=move.slowest_ms_per_microbatch,
                    step=move.predicted_step_ms,
                    before=move.replayed_step_ms,
                    now=pipe.step_ms,
                ),
            ),  # fmt: skip
            rank=heavy.rank,
            basis=f"estimate: the {pipe.schedule} schedule replayed with each stage's measured "
            f"times, before and after the move (the replay now {move.replay_error_pct:+.0f}% "
            "off the measured step)",
        )


STAGE_RULES = (PipelineBubbleRule(), StageImbalanceRule())
