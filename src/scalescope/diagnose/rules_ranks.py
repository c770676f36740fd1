"""Across ranks: one rank late (a straggler), or busy time spread unevenly.

The cross-rank analysis names the straggler with its own rule (analyze/cross_rank.py); these
rules put a cost on it (what the others wait per step) and look for a likely cause in what
the ranks recorded about themselves: preempted by another process (involuntary context
switches), fewer cores, a slower phase, slower cores (more CPU time for the same work).
"""

from __future__ import annotations

import statistics

from scalescope.analyze.cross_rank import CrossRankAnalysis, Straggler, straggler_min_share_pct
from scalescope.analyze.steps.extra_work import BURST_SHARE_PCT, LatenessPattern
from scalescope.analyze.steps.gaps import describe
from scalescope.analyze.steps.step_slots import OTHER
from scalescope.diagnose.findings import Evidence, Finding, bottleneck, remedy, summary
from scalescope.diagnose.rank_cpu import (
    cpu_cause,
    cpu_evidence,
    cpu_use,
    cpus_text,
    phase_cpu_cause,
    phase_cpu_evidence,
    where_it_runs,
)
from scalescope.diagnose.rules_extra_work import explains_straggler, when
from scalescope.diagnose.rules_input import DiagnosisInput, hosts, mean_step, rank_times, share_pct


def _needs(ctx: DiagnosisInput, name: str) -> tuple[str, ...]:
    if ctx.analysis.world_size < 2:
        return (f"{name}: one rank",)
    if ctx.analysis.cross_rank is None:
        return (f"{name}: no cross-rank analysis (fewer than two ranks recorded events)",)
    return ()


def straggler_does_own_work(ctx: DiagnosisInput) -> bool:
    """The straggler's CPU facts show neither preemption nor more CPU time than the others':
    ranks sharing cores do not explain its lateness (it sleeps, blocks or does more)."""
    cross = ctx.analysis.cross_rank
    s = cross.straggler if cross is not None else None
    return s is not None and cpu_use(ctx, s.rank) is not None and cpu_cause(ctx, s.rank) is None


def _burst_causes(ctx: DiagnosisInput, s: Straggler, pattern: LatenessPattern) -> list[str]:
    """A rank late at a few steps only does extra work there: never "slower cores"."""
    out = [remedy("burst_work", rank=s.rank, when=when(pattern.late_steps, pattern.period))]
    if ctx.ranks.get(s.rank) is not None:
        out.append(remedy("inspect_host", rank=s.rank, where=where_it_runs(ctx, s.rank)))
    return out


def _causes(ctx: DiagnosisInput, s: Straggler) -> list[str]:
    """Remedies for the likely causes, most specific first. Preemption comes first unless
    the extra time lies outside the recorded phases: preemption slows a rank's work, while
    time between the phases is host work, and a rank that sleeps or blocks there is itself
    preempted more when it wakes among spinning peers (1.9x the others' switches once).
    Shared or slower cores are said only of a rank slower at every step: a rank late at a
    few steps does more work there (``_burst_causes``)."""
    pattern = ctx.analysis.cross_rank.straggler_pattern if ctx.analysis.cross_rank else None
    if pattern is not None and pattern.periodic:
        return _burst_causes(ctx, s, pattern)
    out = []
    mine = ctx.ranks.get(s.rank)
    cpu_kind, cpu_remedy = cpu_cause(ctx, s.rank) or ("", "")
    if cpu_kind == "preempted" and s.phase != OTHER:
        out.append(cpu_remedy)
    others = [len(m.cpus) for r, m in ctx.ranks.items() if r != s.rank and m.cpus]
    if mine and mine.cpus and others and len(mine.cpus) < statistics.median(others):
        out.append(
            remedy("fewer_cores", rank=s.rank, n=len(mine.cpus), m=int(statistics.median(others)))
        )
    if s.phase == "data" and s.phase_excess_ms:
        out.append(remedy("slow_data", rank=s.rank, ms=s.phase_excess_ms))
    elif s.phase == OTHER:
        out.append(remedy("host_work", rank=s.rank, between=_between(s)))
        if cpu_kind == "preempted":
            out.append(cpu_remedy)
    elif (
        s.phase
        and s.phase_excess_ms
        and cpu_kind != "preempted"
        and (told := phase_cpu_cause(ctx, s))
    ):
        cpu_kind = told[0]  # its CPU time in the phase tells more work from slower cores
        out.append(told[1])
    elif s.phase and s.phase_excess_ms:
        unknown = cpu_use(ctx, s.rank) is None  # no CPU facts (older or ingested runs)
        cores = cpu_kind in ("preempted", "slower_cpu") or unknown
        out.append(
            remedy(
                "slow_phase" if cores else "more_work", rank=s.rank, ms=s.phase_excess_ms,
                phase=_in_phase(s.phase),
            )
        )  # fmt: skip
    if cpu_kind == "slower_cpu":
        out.append(cpu_remedy)
    if mine is not None and cpu_kind not in ("preempted", "queued", "asleep"):
        out.append(remedy("inspect_host", rank=s.rank, where=where_it_runs(ctx, s.rank)))
    return out


def _in_phase(phase: str) -> str:
    """``in backward``, or ``outside the recorded phases`` for ``other``."""
    return "outside the recorded phases" if phase == OTHER else f"in {phase}"


def _between(s: Straggler) -> str:
    """`` (between the optimizer step and the next batch)``-like suffix, or ``""``."""
    return f" ({describe(s.between)})" if s.between else ""


def _summary(s: Straggler, share: float, pattern: LatenessPattern | None = None) -> str:
    if pattern is not None and pattern.periodic:
        return summary(
            "STRAGGLER_BURSTS", rank=s.rank, when=when(pattern.late_steps, pattern.period),
            ms=pattern.ms_per_occurrence, median=pattern.median_excess_ms, share=share,
        )  # fmt: skip
    if s.phase == OTHER and s.phase_excess_ms is not None:
        between = f", {describe(s.between)}" if s.between else ""
        return summary(
            "STRAGGLER_OUTSIDE", rank=s.rank, ms=s.phase_excess_ms, between=between, share=share
        )
    where = "" if s.phase is None else " loading data" if s.phase == "data" else f" in {s.phase}"
    return summary("STRAGGLER", rank=s.rank, where=where, share=share)


def _evidence(
    ctx: DiagnosisInput,
    cr: CrossRankAnalysis,
    s: Straggler,
    share: float,
    late: float,
    cost_ms: float,
    wait_ms: float,
) -> tuple[Evidence, ...]:
    n = len(cr.ranks)
    t = ctx.thresholds.straggler_cost_pct

    def crossed(value: float) -> tuple[float | None, str]:
        return (t, ">=") if value >= t else (None, "")

    out = [
        Evidence(
            "its lateness (the others' wait for it)",
            round(late, 1),
            "% of step time",
            *crossed(late),
        ),
        Evidence(
            "its busy time above the others'", round(share, 1), "% of step time", *crossed(share)
        ),
        Evidence("its busy time above the others' per step", round(cost_ms, 1), "ms"),
        Evidence("others' wait in collectives per step", round(wait_ms, 1), "ms"),
        Evidence(
            "its share of all ranks' lateness",
            round(getattr(s, "lateness_share_pct", 0.0), 1),
            "%",
            round(getattr(s, "share_needed_pct", straggler_min_share_pct(n)), 1),
            ">=",
        ),
        Evidence("instances it arrived at last", round(s.last_share_pct, 1), "%"),
        Evidence("mean lateness when last", round(s.lateness_avg_ms, 2), "ms"),
    ]
    if s.phase and s.phase_excess_ms is not None:
        name = f"its extra time {_in_phase(s.phase)} per step"
        out.append(Evidence(name, round(s.phase_excess_ms, 1), "ms"))
        if s.between:
            out.append(Evidence("where it lies", describe(s.between)))
    mine = ctx.ranks.get(s.rank)
    if mine is not None:
        host = hosts(ctx).get(mine.hostname or "this host", [])
        out.append(Evidence(f"ranks on its host {mine.hostname or ''}".rstrip(), len(host)))
        if mine.cpus:
            out.append(Evidence("its cpus", cpus_text(mine.cpus)))
    out.extend(cpu_evidence(ctx, s.rank))
    out.extend(phase_cpu_evidence(ctx, s))
    pattern = cr.straggler_pattern
    if pattern is not None:
        out.append(Evidence("its median excess per step", round(pattern.median_excess_ms, 2), "ms"))
        if pattern.periodic:
            out.append(Evidence("steps it is late at", when(pattern.late_steps, pattern.period)))
            share_late = round(pattern.late_share_pct, 1)
            out.append(Evidence("its excess in them", share_late, "%", BURST_SHARE_PCT, ">="))
    return tuple(out)


def others_wait(cr: CrossRankAnalysis, rank: int) -> float | None:
    """Mean over the other ranks of their wait in collectives per step (ms)."""
    waits = [w.wait_ms_per_step for w in cr.ranks if w.rank != rank]
    return sum(waits) / len(waits) if waits else None


def straggler_cost(cr: CrossRankAnalysis, rank: int) -> float | None:
    """What the straggler costs per step (ms): its busy time above the others' mean,
    capped by the others' wait in collectives (they cannot lose more than they wait).

    The wait alone overstates it: waits at asynchronous gradient buckets overlap the
    waiting rank's own backward. Against balanced reference runs of resnet18 on a 2-core VM
    with rank 1's core shared by a busy loop, the busy-time excess was within 1 point of
    the step time lost (42-48%), the others' net wait 17 points above it."""
    mine = next((w for w in cr.ranks if w.rank == rank), None)
    others = [w.busy_ms_per_step for w in cr.ranks if w.rank != rank]
    wait = others_wait(cr, rank)
    if mine is None or not others or wait is None:
        return None
    return max(0.0, min(mine.busy_ms_per_step - sum(others) / len(others), wait))


def _on_host(ctx: DiagnosisInput, rank: int) -> str:
    """`` (on HOST)`` when the run spans nodes."""
    groups = hosts(ctx)
    meta = ctx.ranks.get(rank)
    if len(groups) < 2 or meta is None or not meta.hostname:
        return ""
    return f" (on {meta.hostname})"


NODE_LATE_SHARE = 75.0
"""A node whose ranks cause this share of all lateness ..."""


def node_busy(ctx: DiagnosisInput, cr: CrossRankAnalysis) -> dict[str, float]:
    """Mean busy time per step of each node's ranks (ms)."""
    busy = {w.rank: w.busy_ms_per_step for w in cr.ranks}
    out = {}
    for host, metas in hosts(ctx).items():
        values = [busy[m.rank] for m in metas if m.rank in busy]
        if values:
            out[host] = sum(values) / len(values)
    return out


def node_of_late_ranks(ctx: DiagnosisInput, cr: CrossRankAnalysis) -> str | None:
    """The node whose ranks (two or more, all of them) cause NODE_LATE_SHARE % of the
    lateness and are each busier than every rank of the other nodes; None otherwise."""
    groups = hosts(ctx)
    if len(groups) < 2:
        return None
    late = {w.rank: w.lateness_share_pct for w in cr.ranks}
    busy = {w.rank: w.busy_ms_per_step for w in cr.ranks}
    for host, metas in groups.items():
        mine = [m.rank for m in metas if m.rank in busy]
        others = [r for r in busy if r not in mine]
        if len(mine) < 2 or not others:
            continue
        if sum(late.get(r, 0.0) for r in mine) < NODE_LATE_SHARE:
            continue
        if min(busy[r] for r in mine) > max(busy[r] for r in others):
            return host
    return None


class NodeStragglerRule:
    """Every rank of one node late: the node (its cores, its memory, its network, another
    job on it), not a rank. Its ranks' mean busy time above the other nodes' ranks' mean,
    as a share of the step, is the cost."""

    name = "node straggler"

    def not_judged(self, ctx: DiagnosisInput) -> tuple[str, ...]:
        return ()

    def evaluate(self, ctx: DiagnosisInput) -> Finding | None:
        cr = ctx.analysis.cross_rank
        step_ms = mean_step(rank_times(ctx.analysis))
        if cr is None or not step_ms:
            return None
        host = node_of_late_ranks(ctx, cr)
        if host is None:
            return None
        busy = node_busy(ctx, cr)
        rest = [v for h, v in busy.items() if h != host]
        excess = busy[host] - sum(rest) / len(rest)
        share = share_pct(excess, step_ms)
        if share < ctx.thresholds.straggler_cost_pct:
            return None
        ranks = [m.rank for m in hosts(ctx)[host]]
        evidence = (
            Evidence("its ranks", ", ".join(map(str, ranks))),
            Evidence("their share of all lateness", round(sum(
                w.lateness_share_pct for w in cr.ranks if w.rank in ranks), 1), "%",
                NODE_LATE_SHARE, ">="),
            Evidence("their busy time per step", round(busy[host], 1), "ms"),
            Evidence("the other nodes' ranks'", round(sum(rest) / len(rest), 1), "ms"),
        )  # fmt: skip
        return Finding(
            code="NODE_STRAGGLER", bottleneck=bottleneck("NODE_STRAGGLER"),
            summary=summary("NODE_STRAGGLER", host=host, n=len(ranks), share=share),
            share_pct=share, saved_ms_per_step=excess, evidence=evidence,
            remedies=(remedy("node_straggler", host=host),),
            basis="its ranks' mean busy time per step above the other nodes' ranks' mean",
        )  # fmt: skip


class StragglerRule:
    """A rank named straggler by the analysis whose busy time above the others' (capped by
    their wait) reaches ``straggler_cost_pct`` of the step, whatever phase its extra time
    falls in (``other`` included: busy time counts it). Its lateness is evidence, not the
    trigger: it adds up waits that overlap the waiting ranks' own backward, and on balanced
    resnet18 runs it crossed 10 % of the step while the busy excess was 7 %."""

    name = "straggler"

    def not_judged(self, ctx: DiagnosisInput) -> tuple[str, ...]:
        return _needs(ctx, self.name)

    def evaluate(self, ctx: DiagnosisInput) -> Finding | None:
        cr = ctx.analysis.cross_rank
        step_ms = mean_step(rank_times(ctx.analysis))
        if cr is None or cr.straggler is None or not step_ms:
            return None
        s = cr.straggler
        cost_ms, wait_ms = straggler_cost(cr, s.rank), others_wait(cr, s.rank)
        if cost_ms is None or wait_ms is None:
            return None
        share = share_pct(cost_ms, step_ms)
        late = share_pct(s.lateness_ms_per_step, step_ms)
        if share < ctx.thresholds.straggler_cost_pct:
            return None
        if node_of_late_ranks(ctx, cr) is not None:
            return None  # the whole node is late: NodeStragglerRule names it
        if explains_straggler(ctx, s.rank, cost_ms):
            return None  # its evaluation or checkpoints: RankOnlyWorkRule names them
        pattern = cr.straggler_pattern
        once = pattern is not None and pattern.periodic and len(pattern.late_steps) < 2
        return Finding(
            code="STRAGGLER",
            bottleneck=bottleneck("STRAGGLER"),
            summary=_summary(s, share, cr.straggler_pattern) + _on_host(ctx, s.rank),
            share_pct=share,
            saved_ms_per_step=cost_ms,
            evidence=_evidence(ctx, cr, s, share, late, cost_ms, wait_ms),
            remedies=tuple(_causes(ctx, s)),
            rank=s.rank,
            basis="its busy time per step above the other ranks' mean, at most their wait",
            level="info" if once else "warning",  # one late step is a one-off, not a rank
        )


class ImbalanceRule:
    """Busy time uneven across ranks (``imbalance_pct``) that no straggler finding accounts
    for: none named, or one named below ``straggler_cost_pct``."""

    name = "load imbalance"

    def not_judged(self, ctx: DiagnosisInput) -> tuple[str, ...]:
        return _needs(ctx, self.name)

    def evaluate(self, ctx: DiagnosisInput) -> Finding | None:
        cr = ctx.analysis.cross_rank
        step_ms = mean_step(rank_times(ctx.analysis))
        if cr is None or cr.load_imbalance_pct is None or not step_ms:
            return None
        if cr.straggler is not None and StragglerRule().evaluate(ctx) is not None:
            return None
        cost_ms = straggler_cost(cr, cr.straggler.rank) if cr.straggler else None
        if cost_ms is not None and explains_straggler(ctx, cr.straggler.rank, cost_ms):
            return None  # the busiest rank's evaluation or checkpoints: RankOnlyWorkRule
        if cr.load_imbalance_pct < ctx.thresholds.imbalance_pct:
            return None
        busy = [w.busy_ms_per_step for w in cr.ranks]
        excess = max(busy) - sum(busy) / len(busy)
        share = share_pct(excess, step_ms)
        evidence = (
            Evidence(
                "load imbalance",
                round(cr.load_imbalance_pct, 1),
                "%",
                ctx.thresholds.imbalance_pct,
                ">=",
            ),
            Evidence("slowest rank's busy time above the mean", round(excess, 1), "ms/step"),
        )
        return Finding(
            code="LOAD_IMBALANCE",
            bottleneck=bottleneck("LOAD_IMBALANCE"),
            summary=summary("LOAD_IMBALANCE", imbalance=cr.load_imbalance_pct),
            share_pct=share,
            saved_ms_per_step=excess,
            evidence=evidence,
            remedies=(remedy("balance"),),
            basis="the slowest rank's busy time above the mean, per step",
        )
