"""DeepSpeed ZeRO: parameter all-gathers (stage 3) or gradient and parameter exchanges
(stages 1 and 2) that take a large share of the step, with the configuration keys to change.

The probe tags ZeRO's collectives by the DeepSpeed method that issued them and writes the
stage in each rank's meta (probe/deepspeed.py). On CPU (gloo) they are synchronous: the rank
waits for each one, so issue-to-completion is exposed time. On a GPU they run on their own
streams (``overlap_comm``) and what compute hides is not measured, so they are not judged.
What hiding them buys on CPU is the replay's (diagnose/engine.py ``SCOPED_CAUSES``).
"""

from __future__ import annotations

from scalescope.analyze.comm.collectives import TagPerStep
from scalescope.diagnose.findings import Evidence, Finding, bottleneck, remedy, summary
from scalescope.diagnose.rules_fsdp import on_gpu
from scalescope.diagnose.rules_input import DiagnosisInput, mean_step, rank_times, share_pct
from scalescope.events.tags import ZERO_GATHER, ZERO_REDUCE
from scalescope.events.units import fmt_bytes_brief


def zero_stage(ctx: DiagnosisInput) -> int | None:
    """The highest ZeRO stage a rank's DeepSpeed engine ran (None: no DeepSpeed engine)."""
    stages = [m.zero_stage for m in ctx.ranks.values() if m.zero_stage is not None]
    return max(stages) if stages else None


def tagged(ctx: DiagnosisInput, tag: str) -> TagPerStep | None:
    coll = ctx.analysis.collectives
    return next((t for t in (coll.per_step if coll else ()) if t.tag == tag), None)


def spans_hosts(ctx: DiagnosisInput) -> bool:
    return len({m.hostname for m in ctx.ranks.values()}) > 1 or ctx.meta.nnodes > 1


def _exposed(ctx: DiagnosisInput, tags: tuple[str, ...]) -> tuple[float, float, float] | None:
    """(ms per step, % of the step, bytes per step) of these tags' collectives when above the
    threshold on a CPU run; None otherwise."""
    found = [t for t in (tagged(ctx, tag) for tag in tags) if t is not None]
    step = mean_step(rank_times(ctx.analysis))
    if not found or not step or on_gpu(ctx):
        return None
    ms = sum(t.ms_per_step for t in found)
    share = share_pct(ms, step)
    if share < ctx.thresholds.exposed_comm_share_pct:
        return None
    return ms, share, sum(t.nbytes_per_step for t in found)


def _not_judged(ctx: DiagnosisInput, name: str) -> tuple[str, ...]:
    if zero_stage(ctx) is not None and on_gpu(ctx):
        return (
            f"{name}: on a GPU they run on their own stream; what compute hides is not measured",
        )
    return ()


def _evidence(ctx: DiagnosisInput, ms: float, share: float, nbytes: float, calls: float):
    return (
        Evidence(
            "their time", round(share, 1), "% of step time",
            ctx.thresholds.exposed_comm_share_pct, ">=",
        ),
        Evidence("their time per step", round(ms, 2), "ms"),
        Evidence("bytes per step", fmt_bytes_brief(round(nbytes))),
        Evidence("calls per step", round(calls, 2)),
        Evidence("ZeRO stage", zero_stage(ctx) or 0),
    )  # fmt: skip


class Zero3GatherRule:
    """ZeRO 3's parameter all-gathers take ``exposed_comm_share_pct`` of the step, on CPU."""

    name = "ZeRO 3 parameter all-gathers"

    def not_judged(self, ctx: DiagnosisInput) -> tuple[str, ...]:
        return _not_judged(ctx, self.name)

    def evaluate(self, ctx: DiagnosisInput) -> Finding | None:
        if zero_stage(ctx) != 3:
            return None
        exposed = _exposed(ctx, (ZERO_GATHER,))
        if exposed is None:
            return None
        ms, share, nbytes = exposed
        gathers = tagged(ctx, ZERO_GATHER)
        remedies = [remedy(k) for k in ("zero3_prefetch", "zero_overlap", "zero3_persist")]
        remedies.append(remedy("zero3_to_stage2"))
        if spans_hosts(ctx):
            remedies.append(remedy("zero_hpz_mics"))
        return Finding(
            code="ZERO3_PARAM_GATHER",
            bottleneck=bottleneck("ZERO3_PARAM_GATHER"),
            summary=summary(
                "ZERO3_PARAM_GATHER", share=share, ms=ms, size=fmt_bytes_brief(round(nbytes))
            ),
            share_pct=share,
            saved_ms_per_step=None,
            evidence=_evidence(ctx, ms, share, nbytes, gathers.calls_per_step if gathers else 0),
            remedies=tuple(remedies),
            basis="ZeRO 3 parameter all-gathers per step, issue to completion, synchronous on CPU",
        )


class Zero12CommRule:
    """ZeRO 1/2's gradient reductions and parameter all-gathers take
    ``exposed_comm_share_pct`` of the step, on CPU."""

    name = "ZeRO 1/2 gradient and parameter exchange"

    def not_judged(self, ctx: DiagnosisInput) -> tuple[str, ...]:
        return _not_judged(ctx, self.name)

    def evaluate(self, ctx: DiagnosisInput) -> Finding | None:
        stage = zero_stage(ctx)
        if stage not in (1, 2):
            return None
        exposed = _exposed(ctx, (ZERO_REDUCE, ZERO_GATHER))
        if exposed is None:
            return None
        ms, share, nbytes = exposed
        calls = sum(
            t.calls_per_step for t in (tagged(ctx, ZERO_REDUCE), tagged(ctx, ZERO_GATHER)) if t
        )
        return Finding(
            code="ZERO_EXCHANGE",
            bottleneck=bottleneck("ZERO_EXCHANGE"),
            summary=summary(
                "ZERO_EXCHANGE",
                stage=stage,
                share=share,
                ms=ms,
                size=fmt_bytes_brief(round(nbytes)),
            ),
            share_pct=share,
            saved_ms_per_step=None,
            evidence=_evidence(ctx, ms, share, nbytes, calls),
            remedies=(remedy("zero_overlap"), remedy("zero_buckets")),
            basis="ZeRO gradient reductions and parameter all-gathers per step, issue to "
            "completion",
        )


ZERO_RULES = (Zero3GatherRule(), Zero12CommRule())
