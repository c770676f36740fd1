"""Sharded data parallelism (FSDP2): all-gathers compute does not hide, units too small.

The probe tags each unit's all-gather and reduce-scatter (events/tags.py). On CPU (gloo)
FSDP issues them synchronously: the rank waits for each one, so their time is exposed. On a
GPU they run on their own streams and the probe's issue-to-completion times do not say what
compute hid, so the exposed-gather rule does not judge GPU runs.
"""

from __future__ import annotations

from scalescope.analyze.comm.collectives import UnitTraffic, fsdp_units
from scalescope.diagnose.findings import Evidence, Finding, bottleneck, remedy, summary
from scalescope.diagnose.rules_input import DiagnosisInput, mean_step, rank_times, share_pct
from scalescope.events.units import fmt_bytes_brief

MIN_SMALL_UNITS = 4
"""Units below the small-message size it takes to call the wrapping too fine: fewer small
units are a model's embedding or head, not a wrapping choice."""


def units(ctx: DiagnosisInput) -> tuple[UnitTraffic, ...]:
    coll = ctx.analysis.collectives
    return fsdp_units(coll.per_step) if coll is not None else ()


def on_gpu(ctx: DiagnosisInput) -> bool:
    steps = ctx.analysis.steps
    return any(
        peak.name == "cuda_max_allocated"
        for rs in (steps.ranks if steps else ())
        for peak in rs.memory
    )


def _step_ms(ctx: DiagnosisInput) -> float | None:
    return mean_step(rank_times(ctx.analysis))


class FsdpGatherRule:
    """FSDP's all-gathers take ``exposed_comm_share_pct`` of the step or more, on CPU."""

    name = "FSDP all-gathers"

    def not_judged(self, ctx: DiagnosisInput) -> tuple[str, ...]:
        if units(ctx) and on_gpu(ctx):
            return (
                f"{self.name}: on a GPU they run on their own stream; what compute hides of "
                "them is not measured",
            )
        return ()

    def evaluate(self, ctx: DiagnosisInput) -> Finding | None:
        found, step = units(ctx), _step_ms(ctx)
        if not found or on_gpu(ctx) or not step:
            return None
        ms = sum(u.gather_ms_per_step for u in found)
        share = share_pct(ms, step)
        if share < ctx.thresholds.exposed_comm_share_pct:
            return None
        regathered = [u.unit for u in found if u.gathers_per_step > 1.5 and u.unit != "root"]
        last = regathered[-2:]
        remedies = [remedy("fsdp_prefetch")]
        if last:
            remedies.append(remedy("fsdp_no_reshard", units=", ".join(last), regathers=len(last)))
        return Finding(
            code="FSDP_EXPOSED_GATHER",
            bottleneck=bottleneck("FSDP_EXPOSED_GATHER"),
            summary=summary("FSDP_EXPOSED_GATHER", share=share, ms=ms),
            share_pct=share,
            saved_ms_per_step=None,
            evidence=(
                Evidence(
                    "all-gather time",
                    round(share, 1),
                    "% of step time",
                    ctx.thresholds.exposed_comm_share_pct,
                    ">=",
                ),
                Evidence("all-gather time per step", round(ms, 2), "ms"),
                Evidence("FSDP units", len(found)),
                Evidence("all-gathers per step", round(sum(u.gathers_per_step for u in found), 2)),
                Evidence("units gathered again in backward", len(regathered)),
            ),  # fmt: skip
            remedies=tuple(remedies),
            basis="FSDP all-gathers per step, issue to completion, synchronous on CPU",
        )


class FsdpSmallUnitsRule:
    """``MIN_SMALL_UNITS`` or more units whose messages are below ``small_message_bytes``,
    and their collectives take ``exposed_comm_share_pct`` of the step."""

    name = "FSDP unit size"

    def not_judged(self, ctx: DiagnosisInput) -> tuple[str, ...]:
        return ()

    def evaluate(self, ctx: DiagnosisInput) -> Finding | None:
        found, step = units(ctx), _step_ms(ctx)
        limit = ctx.thresholds.small_message_bytes
        small = [u for u in found if 0 < _unit_bytes(u) < limit]
        if len(small) < MIN_SMALL_UNITS or not step:
            return None
        ms = sum(u.gather_ms_per_step + u.reduce_ms_per_step for u in small)
        share = share_pct(ms, step)
        if share < ctx.thresholds.exposed_comm_share_pct:
            return None
        calls = sum(u.gathers_per_step + u.reductions_per_step for u in small)
        mean = sum(_unit_bytes(u) for u in small) / len(small)
        return Finding(
            code="FSDP_SMALL_UNITS",
            bottleneck=bottleneck("FSDP_SMALL_UNITS"),
            summary=summary(
                "FSDP_SMALL_UNITS",
                units=len(small),
                size=fmt_bytes_brief(round(mean)),
                calls=calls,
                share=share,
            ),  # fmt: skip
            share_pct=share,
            saved_ms_per_step=None,
            evidence=(
                Evidence(
                    "units below the small-message size", len(small), "", MIN_SMALL_UNITS, ">="
                ),
                Evidence("mean unit size", round(mean), "B", limit, "<"),
                Evidence("their collectives per step", round(calls, 2)),
                Evidence(
                    "their collective time",
                    round(share, 1),
                    "% of step time",
                    ctx.thresholds.exposed_comm_share_pct,
                    ">=",
                ),
            ),  # fmt: skip
            remedies=(
                remedy("fsdp_bigger_units", size=fmt_bytes_brief(limit)),
                remedy("fsdp_prefetch"),
            ),
            basis="FSDP units' all-gathers and reduce-scatters per step, issue to completion",
        )


def _unit_bytes(u: UnitTraffic) -> float:
    """A unit's parameter bytes: what one all-gather carries."""
    return u.gathered_bytes_per_step / u.gathers_per_step if u.gathers_per_step else 0.0


FSDP_RULES = (FsdpGatherRule(), FsdpSmallUnitsRule())
