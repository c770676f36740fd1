"""Communication: exposed gradient communication, split into latency and bandwidth.

Exposed communication is the ``comm_wait`` phase of the rank that has the least of it, in
each step: a rank that arrives early at a collective also waits there for the late ones,
which is the straggler's cost (``rules_ranks``), not the network's. The rank that waits
least shows what moving the bytes costs. On a 2-core VM whose cores changed speed from step
to step, the least per step was 31-39 ms in 11 of 12 balanced resnet18 runs, where the
least of the ranks' means ranged from 32 to 148 ms.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scalescope.analyze.comm.collectives import CollectiveAnalysis
from scalescope.analyze.summary import RunAnalysis
from scalescope.diagnose.findings import Evidence, Finding, bottleneck, remedy, summary
from scalescope.diagnose.rules_input import DiagnosisInput, mean_step, rank_times, share_pct

PAYLOAD_OPS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "reduce")
"""Ops that carry gradients; broadcasts (DDP's parameters and buffers) are left out."""
NOT_TRAFFIC_TAGS = ("parameters",)
"""Tags of collectives that happen once at start, not every step."""


@dataclass(frozen=True)
class Exposed:
    source: str
    """Whose comm_wait this is: the least per step over the ranks, or one rank's mean."""
    ms: float
    share_pct: float


@dataclass(frozen=True)
class Traffic:
    """The payload collectives: how their time splits by message size, per step."""

    small_time_pct: float | None
    calls_per_step: float | None
    nbytes_per_step: float | None
    busbw_gbps: float | None
    """busbw of the large message size that took the most time."""


def exposed(analysis: RunAnalysis) -> Exposed | None:
    """Exposed communication per step; None when no rank recorded comm_wait.

    With a cross-rank analysis: per step, the least comm_wait over the ranks (the last to
    arrive waits only for the bytes), so a lateness that moves from rank to rank from step
    to step is not counted as communication. Else the comm_wait of the rank with the least.
    """
    times = rank_times(analysis)
    candidates = [t for t in times if "comm_wait" in t.phases]
    if not candidates:
        return None
    overlap = analysis.cross_rank.overlap if analysis.cross_rank else None
    step = mean_step(times)
    if overlap is not None and overlap.exposed_transfer_ms_per_step is not None and step:
        ms = overlap.exposed_transfer_ms_per_step
        return Exposed("the least over the ranks in each step", ms, share_pct(ms, step))
    low = min(candidates, key=lambda t: (t.phases["comm_wait"], t.rank))
    ms = low.phases["comm_wait"]
    return Exposed(f"rank {low.rank}, the least waiting", ms, share_pct(ms, low.step_ms))


def traffic(coll: CollectiveAnalysis | None, small_bytes: int) -> Traffic:
    if coll is None:
        return Traffic(None, None, None, None)
    sizes = [s for s in coll.sizes if s.op in PAYLOAD_OPS]
    total = sum(s.total_ms_per_rank for s in sizes)
    small = sum(s.total_ms_per_rank for s in sizes if s.nbytes < small_bytes)
    large = [s for s in sizes if s.nbytes >= small_bytes and s.busbw_gbps is not None]
    top = max(large, key=lambda s: s.total_ms_per_rank, default=None)
    per_step = [p for p in coll.per_step if p.tag not in NOT_TRAFFIC_TAGS]
    return Traffic(
        small_time_pct=100.0 * small / total if total > 0 else None,
        calls_per_step=sum(p.calls_per_step for p in per_step) if per_step else None,
        nbytes_per_step=sum(p.nbytes_per_step for p in per_step) if per_step else None,
        busbw_gbps=top.busbw_gbps if top else None,
    )


def _needs(ctx: DiagnosisInput, name: str) -> tuple[str, ...]:
    if ctx.analysis.world_size < 2:
        return (f"{name}: one rank, no communication",)
    if exposed(ctx.analysis) is None:
        return (f"{name}: exposed communication (the comm_wait phase) was not recorded",)
    if ctx.analysis.collectives is None:
        return (f"{name}: no collective was recorded, so message sizes are unknown",)
    return ()


def _base_evidence(ctx: DiagnosisInput, exp: Exposed, tr: Traffic) -> list[Evidence]:
    t = ctx.thresholds
    out = [
        Evidence(
            "exposed communication",
            round(exp.share_pct, 1),
            "% of step time",
            t.exposed_comm_share_pct,
            ">=",
        ),
        Evidence(f"comm_wait per step ({exp.source})", round(exp.ms, 1), "ms"),
    ]
    if tr.small_time_pct is not None:
        out.append(
            Evidence(
                f"collective time in messages < {t.small_message_bytes:,} B",
                round(tr.small_time_pct, 1),
                "%",
                t.small_message_time_pct,
                ">=",
            )
        )
    overlap = ctx.analysis.cross_rank.overlap if ctx.analysis.cross_rank else None
    if overlap is not None:
        out.append(
            Evidence(
                "gradient communication hidden under backward", round(overlap.hidden_pct, 1), "%"
            )
        )
    return out


def _comm(ctx: DiagnosisInput) -> tuple[Exposed, Traffic] | None:
    if ctx.analysis.world_size < 2:
        return None
    exp = exposed(ctx.analysis)
    if exp is None or exp.share_pct < ctx.thresholds.exposed_comm_share_pct:
        return None
    return exp, traffic(ctx.analysis.collectives, ctx.thresholds.small_message_bytes)


def _finding(
    code: str, exp: Exposed, evidence: list[Evidence], remedies: list[str], **values: Any
) -> Finding:
    return Finding(
        code=code,
        bottleneck=bottleneck(code),
        summary=summary(code, share=exp.share_pct, **values),
        share_pct=exp.share_pct,
        saved_ms_per_step=exp.ms,
        evidence=tuple(evidence),
        remedies=tuple(remedies),
        basis=f"exposed communication per step: comm_wait of {exp.source}",
    )


class CommLatencyRule:
    """Exposed communication mostly in messages below ``small_message_bytes``."""

    name = "communication latency"

    def not_judged(self, ctx: DiagnosisInput) -> tuple[str, ...]:
        return _needs(ctx, self.name)

    def evaluate(self, ctx: DiagnosisInput) -> Finding | None:
        found = _comm(ctx)
        t = ctx.thresholds
        if found is None or found[1].small_time_pct is None:
            return None
        exp, tr = found
        if tr.small_time_pct < t.small_message_time_pct:
            return None
        evidence = _base_evidence(ctx, exp, tr)
        remedies = [remedy("fewer_syncs"), remedy("accumulate")]
        calls = tr.calls_per_step or 0.0
        if tr.calls_per_step is not None:
            evidence.append(
                Evidence("collectives per step", round(calls, 1), "", t.many_calls_per_step, ">=")
            )
        if calls >= 2:
            cap = float(ctx.meta.options.get("bucket_cap_mb") or 25.0)
            where = 0 if calls >= t.many_calls_per_step else 1
            remedies.insert(where, remedy("bucket", mb=max(4 * cap, 100.0)))
        return _finding("COMM_LATENCY", exp, evidence, remedies, calls=calls)


class CommBandwidthRule:
    """Exposed communication mostly in large messages: bytes, not calls, cost the time."""

    name = "communication bandwidth"

    def not_judged(self, ctx: DiagnosisInput) -> tuple[str, ...]:
        missing = _needs(ctx, self.name)
        if missing or ctx.meta.hardware.get("link_gbps"):
            return missing
        return (
            f"{self.name}: busbw not compared with the link (its bandwidth is not "
            "recorded in the hardware facts, link_gbps)",
        )

    def evaluate(self, ctx: DiagnosisInput) -> Finding | None:
        found = _comm(ctx)
        if found is None:
            return None
        exp, tr = found
        if (
            tr.small_time_pct is not None
            and tr.small_time_pct >= ctx.thresholds.small_message_time_pct
        ):
            return None
        evidence = _base_evidence(ctx, exp, tr)
        remedies = [remedy("compress"), remedy("accumulate")]
        if tr.busbw_gbps is not None:
            evidence.append(
                Evidence("busbw of the largest messages", round(tr.busbw_gbps, 3), "GB/s")
            )
            link_evidence, link_remedies = _link_check(ctx, tr.busbw_gbps)
            evidence.extend(link_evidence)
            remedies.extend(link_remedies)
        if ctx.meta.nnodes > 1:
            remedies.append(remedy("hierarchical"))
        mbytes = (tr.nbytes_per_step or 0.0) / 1e6
        return _finding("COMM_BANDWIDTH", exp, evidence, remedies, mbytes=mbytes)


def _link_check(ctx: DiagnosisInput, busbw: float) -> tuple[list[Evidence], list[str]]:
    """busbw against the link's bandwidth, when the hardware facts know it."""
    link = ctx.meta.hardware.get("link_gbps")
    if not isinstance(link, int | float) or link <= 0:
        return [], []
    limit = ctx.thresholds.busbw_link_fraction
    fraction = busbw / link
    evidence = [
        Evidence(
            "busbw of the link's bandwidth",
            round(100 * fraction, 1),
            "%",
            100 * limit,
            "<" if fraction < limit else ">=",
        )
    ]
    if fraction >= limit:
        return evidence, []
    return evidence, [remedy("link_slow", busbw=busbw, pct=100.0 * fraction, link=link)]
