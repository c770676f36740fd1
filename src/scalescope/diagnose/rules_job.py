"""Findings about the job as a whole that come before any bottleneck: it hung, or its ranks
never exchange gradients (each trains its own replica)."""

from __future__ import annotations

from scalescope.analyze.cross_rank import BEYOND_SHARE_PCT
from scalescope.analyze.watch.hang import hang_threshold_s
from scalescope.diagnose.findings import (
    Evidence,
    Finding,
    bottleneck,
    listed,
    remedy,
    summary,
    who,
)
from scalescope.diagnose.hang_words import verdict_line
from scalescope.diagnose.rules_input import DiagnosisInput
from scalescope.events.tags import GRADIENT_EXCHANGE, tag_kind
from scalescope.events.units import fmt_bytes_brief

SYNC_SHARE = 0.5
"""Collectives moving at least this share of the stepped parameters' bytes per step count as
a gradient exchange (a hand-written all_reduce of the gradients, FSDP's reduce_scatter)."""
SETUP_TAGS = ("parameters", "buffers")
"""DDP's broadcasts: they synchronise weights at start and buffers, not gradients."""
HANG_REMEDY = {
    "missing": "hang_host",
    "unfinished": "hang_host",
    "host_work": "hang_host",
    "mismatch": "hang_order",
    "behind": "hang_order",
    "ended": "hang_ended",
    "all_waiting": "hang_network",
}


class HangRule:
    name = "hang"

    def not_judged(self, ctx: DiagnosisInput) -> tuple[str, ...]:
        return ()

    def evaluate(self, ctx: DiagnosisInput) -> Finding | None:
        hang = ctx.analysis.hang
        if hang is None:
            return None
        ranks = {r.rank: r for r in hang.ranks}
        first = hang.verdicts[0] if hang.verdicts else None
        words = verdict_line(first, ranks) if first else "no rank progressed"
        waits = [r.collective_for_s or 0.0 for r in hang.ranks if r.in_collective]
        evidence = [
            Evidence("no step or collective finished for", round(hang.idle_s, 1), "s",
                     hang.hang_after_s, ">="),
            Evidence("longest wait in an unfinished collective", round(max(waits, default=0), 1),
                     "s"),
            Evidence("seen", "live, by the launcher" if hang.source == "live" else
                     "in the events, after the run ended"),
        ]  # fmt: skip
        remedies = []
        if first is not None:
            stuck = next(iter(first.ranks), 0)
            remedies.append(remedy(HANG_REMEDY[first.kind], rank=stuck, run=ctx.meta.run_id))
        remedies.append(remedy("hang_timeout"))
        return Finding(
            code="HANG", bottleneck=bottleneck("HANG"), summary=summary("HANG", verdict=words),
            share_pct=None, saved_ms_per_step=None, evidence=tuple(evidence),
            remedies=tuple(remedies),
        )  # fmt: skip


class TimelineRule:
    """Ranks that wait in collectives longer than their steps last (analyze/cross_rank.py,
    ``waits_beyond_step``): the timelines do not fit together, so no share of waiting can be
    trusted. Said first, with the evidence, instead of a share over 100 %."""

    name = "timeline consistency"

    def not_judged(self, ctx: DiagnosisInput) -> tuple[str, ...]:
        return ()

    def evaluate(self, ctx: DiagnosisInput) -> Finding | None:
        cr = ctx.analysis.cross_rank
        if cr is None or not cr.inconsistent:
            return None
        worst = cr.inconsistent[0]
        ranks = [w.rank for w in cr.inconsistent]
        evidence = (
            Evidence("ranks waiting longer than their steps", len(ranks), "", 0, ">"),
            Evidence("which", listed(ranks, 8)),
            Evidence(f"rank {worst.rank}'s collectives waiting over 1.5 steps",
                     round(worst.share_pct, 1), "%", BEYOND_SHARE_PCT, ">"),
            Evidence(f"rank {worst.rank}'s wait in collectives per step",
                     round(worst.wait_ms_per_step, 1), "ms"),
            Evidence(f"rank {worst.rank}'s mean step", round(worst.step_ms, 1), "ms"),
        )  # fmt: skip
        return Finding(
            code="TIMELINE_INCONSISTENT", bottleneck=bottleneck("TIMELINE_INCONSISTENT"),
            summary=summary(
                "TIMELINE_INCONSISTENT", rank=worst.rank, wait=worst.wait_ms_per_step,
                step=worst.step_ms, n=len(ranks),
            ),
            share_pct=None, saved_ms_per_step=None, evidence=evidence,
            remedies=(remedy("timeline_check"),),
        )  # fmt: skip


PAUSE_MARGIN = 1.5
"""The --hang-after proposed for a run that pauses: this many times its longest pause."""


class PauseRule:
    """Steps of 10 typical steps or more that completed (analyze/steps/pauses.py): one rank stopped
    the others, then they went on. Said so, with the --hang-after that tolerates it."""

    name = "pause"

    def not_judged(self, ctx: DiagnosisInput) -> tuple[str, ...]:
        return ()

    def evaluate(self, ctx: DiagnosisInput) -> Finding | None:
        pauses = ctx.analysis.pauses
        if pauses is None or ctx.analysis.hang is not None:
            return None
        ranks = pauses.ranks
        every = f" every {pauses.every_steps} steps" if pauses.every_steps else ""
        default = hang_threshold_s(pauses.median_step_s)
        count = len(pauses.pauses)
        evidence = (
            Evidence("pauses", count),
            Evidence("at steps", listed([p.step for p in pauses.pauses], 8)),
            Evidence("longest pause", round(pauses.longest_s, 1), "s"),
            Evidence("median step", round(pauses.median_step_s * 1e3, 1), "ms"),
            Evidence("share of the run's step time", round(pauses.share_pct, 1), "%"),
        )  # fmt: skip
        return Finding(
            code="PAUSE", bottleneck=bottleneck("PAUSE"),
            summary=summary(
                "PAUSE", who=who(ranks), count=f"{count} time" + "s" * (count > 1), every=every,
                longest=pauses.longest_s,
            ),
            share_pct=round(pauses.share_pct, 1), saved_ms_per_step=None, evidence=evidence,
            remedies=(pause_hang_after(pauses.longest_s, default), remedy("pause_async")),
            rank=ranks[0] if len(ranks) == 1 else None, level="info",
        )  # fmt: skip


def pause_hang_after(longest_s: float, default_s: float) -> str:
    needed = PAUSE_MARGIN * longest_s
    if needed > default_s:
        return remedy("pause_hang_after", seconds=needed, default=default_s)
    return remedy("pause_within_default", default=default_s, longest=longest_s)


SHARD_DIMS = ("tp", "cp", "ep", "pp")
"""Mesh dimensions whose ranks hold different parts of one model (tensor, context, expert,
pipeline parallel): they exchange activations, not gradients, and are no replicas."""


def holds_model_shards(ranks: dict) -> bool:
    """Whether the ranks share a group a DeviceMesh named as a model-parallel dimension, or
    hold pipeline stages: with tensor parallelism alone (a dp x tp mesh of dp 1) no gradient
    is ever exchanged, and rightly."""
    for meta in ranks.values():
        if getattr(meta, "pipeline", None) is not None:
            return True
        groups = (getattr(meta, "groups", None) or {}).values()
        if any(g.dim in SHARD_DIMS and len(g.ranks) > 1 for g in groups):
            return True
    return False


class ReplicasRule:
    """World size > 1, optimizer steps recorded, no gradient exchange of any kind (DDP's
    buckets, FSDP's reduce-scatters) and fewer bytes moved than the parameters stepped;
    never where the ranks hold shards of one model (``holds_model_shards``)."""

    name = "independent replicas"

    def not_judged(self, ctx: DiagnosisInput) -> tuple[str, ...]:
        return ()

    def evaluate(self, ctx: DiagnosisInput) -> Finding | None:
        a = ctx.analysis
        steps = [m.steps for m in ctx.ranks.values() if m.steps]
        if a.world_size < 2 or not steps or not a.probe or holds_model_shards(ctx.ranks):
            return None
        coll = a.collectives
        if coll is not None and any(tag_kind(o.tag) in GRADIENT_EXCHANGE for o in coll.ops):
            return None  # DDP's buckets, FSDP's reduce-scatters
        per_step = [p for p in (coll.per_step if coll else ()) if p.tag not in SETUP_TAGS]
        moved = sum(p.nbytes_per_step for p in per_step)
        params = [m.optimizer_param_bytes for m in ctx.ranks.values() if m.optimizer_param_bytes]
        if not params or moved >= SYNC_SHARE * min(params):
            return None  # no optimizer seen by the probe (an ingested trace): abstain
        param_text = fmt_bytes_brief(min(params))
        evidence = (
            Evidence("ranks", a.world_size),
            Evidence("optimizer steps per rank", min(steps)),
            Evidence("gradient collectives (DDP buckets, FSDP reduce-scatters)", 0),
            Evidence("collective bytes per step", round(moved), "B"),
            Evidence("parameters the optimizer steps", min(params), "B"),
        )  # fmt: skip
        return Finding(
            code="INDEPENDENT_REPLICAS",
            bottleneck=bottleneck("INDEPENDENT_REPLICAS"),
            summary=summary(
                "INDEPENDENT_REPLICAS",
                ranks=a.world_size,
                steps=min(steps),
                nbytes=fmt_bytes_brief(round(moved)),
                params=param_text,
            ),  # fmt: skip
            share_pct=None,
            saved_ms_per_step=None,
            evidence=evidence,
            remedies=(remedy("wrap_ddp"),),
        )
