"""A rank's CPU use against the other ranks': what says a straggler was preempted by another
process on its cpus (more involuntary context switches) or runs on slower cores (more CPU
time for the same work), and where it runs. Read from each rank's end-of-run facts; a rank
file without them (older or ingested runs) says nothing."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from scalescope.analyze.cross_rank import Straggler
from scalescope.analyze.steps.phase_cpu import PhaseCpu
from scalescope.diagnose.findings import Evidence, remedy
from scalescope.diagnose.rules_input import DiagnosisInput, mean_step, rank_times
from scalescope.events.run import RankMeta


def cpus_text(cpus: list[int]) -> str:
    """The first eight cpus: ``0,1,2,3,4,5,6,7...``."""
    return ",".join(map(str, cpus[:8])) + ("..." if len(cpus) > 8 else "")


@dataclass(frozen=True)
class CpuUse:
    """The straggler's CPU use at the end of the run against the other ranks'."""

    switches: int
    others_switches: float
    """Median over the other ranks of their involuntary context switches."""
    cpu_excess_pct: float
    """Its CPU time above the others' mean, % of that mean."""


def cpu_use(ctx: DiagnosisInput, rank: int) -> CpuUse | None:
    """None when a rank file lacks the CPU time or context switches (older or ingested)."""
    mine = ctx.ranks.get(rank)
    others = [m for r, m in ctx.ranks.items() if r != rank]
    if mine is None or not others:
        return None
    if any(m.cpu_s is None or m.involuntary_switches is None for m in (mine, *others)):
        return None
    others_cpu = statistics.fmean(m.cpu_s or 0.0 for m in others)
    if others_cpu <= 0:
        return None
    return CpuUse(
        switches=mine.involuntary_switches or 0,
        others_switches=statistics.median(m.involuntary_switches or 0 for m in others),
        cpu_excess_pct=100.0 * ((mine.cpu_s or 0.0) - others_cpu) / others_cpu,
    )


def cpu_cause(ctx: DiagnosisInput, rank: int) -> tuple[str, str] | None:
    """(kind, remedy) when the rank's CPU use points at a cause: ``preempted`` by another
    process on its cpus, or ``slower_cpu`` (more CPU time for the same work)."""
    use = cpu_use(ctx, rank)
    if use is None:
        return None
    t = ctx.thresholds
    if use.switches >= t.preempted_ratio * max(use.others_switches, 1.0):
        n, m, where = use.switches, int(use.others_switches), where_it_runs(ctx, rank)
        return "preempted", remedy("preempted", rank=rank, n=n, m=m, where=where)
    if use.cpu_excess_pct >= t.slower_cpu_pct:
        return "slower_cpu", remedy("slower_cpu", rank=rank, pct=use.cpu_excess_pct)
    return None


def cpu_evidence(ctx: DiagnosisInput, rank: int) -> list[Evidence]:
    use = cpu_use(ctx, rank)
    if use is None:
        return []
    t = ctx.thresholds
    return [
        Evidence("its involuntary context switches", use.switches, "",
                 round(t.preempted_ratio * max(use.others_switches, 1.0)), ">="),
        Evidence("the others' (median)", round(use.others_switches)),
        Evidence("its CPU time above the others'", round(use.cpu_excess_pct, 1), "%",
                 t.slower_cpu_pct, ">="),
    ]  # fmt: skip


WAITED_SHARE = 0.5
"""A rank's extra time in a phase is a wait when at least this share of it was not its training
thread's CPU time (measured: a 30 ms sleep in forward on 2 ranks, 0.4 ms of its 30.8 ms extra
was CPU time; a 30 ms busy loop, 30.2 of 30.8)."""


def rank_wait_ms(meta: RankMeta, step_ms: float) -> float | None:
    """Run-queue wait per step of one rank: the share of its life it waited for a cpu times
    its step, at most the step (the waits of its threads add up)."""
    if meta.runqueue_wait_s is None or meta.end_time is None or meta.start_time <= 0:
        return None
    life = meta.end_time - meta.start_time
    return step_ms * min(meta.runqueue_wait_s / life, 1.0) if life > 0 else None


def queued_ms(ctx: DiagnosisInput, rank: int) -> tuple[float, float] | None:
    """(its run-queue wait per step, the other ranks' median), ms; None where a rank file
    lacks it (not Linux, an older or ingested run)."""
    step_ms = mean_step(rank_times(ctx.analysis))
    if not step_ms or rank not in ctx.ranks:
        return None
    waits = {r: rank_wait_ms(m, step_ms) for r, m in ctx.ranks.items()}
    others = [w for r, w in waits.items() if r != rank]
    if waits[rank] is None or not others or None in others:
        return None
    return waits[rank] or 0.0, statistics.median(w or 0.0 for w in others)


def late_phase_cpu(s: Straggler) -> PhaseCpu | None:
    """The straggler's CPU figures in its late phase, where it spends longer there than the
    others and the probe recorded them."""
    return s.cpu if s.cpu is not None and s.cpu.wall_excess_ms > 0 else None


def phase_cpu_cause(ctx: DiagnosisInput, s: Straggler) -> tuple[str, str] | None:
    """(kind, remedy) from the straggler's CPU time in its late phase: ``computes`` (its extra
    time mostly CPU time), else a wait: ``queued`` (runnable: its threads' run-queue wait
    above the others' by at least half of it), ``asleep`` (it is not), or ``waits`` (no
    run-queue figures); None without CPU rows for that phase."""
    cpu = late_phase_cpu(s)
    if cpu is None:
        return None
    said = {"rank": s.rank, "ms": cpu.wall_excess_ms, "phase": f"in {cpu.phase}",
            "cpu": cpu.computed_ms, "wait": cpu.waited_ms}  # fmt: skip
    if cpu.waited_ms < WAITED_SHARE * cpu.wall_excess_ms:
        return "computes", remedy("computes_in_phase", **said)
    queue = queued_ms(ctx, s.rank)
    if queue is None:
        return "waits", remedy("waits_in_phase", **said)
    mine, others = queue
    if mine - others >= WAITED_SHARE * cpu.waited_ms:
        where = where_it_runs(ctx, s.rank)
        return "queued", remedy("queued_in_phase", **said, queued=mine, others=others, where=where)
    return "asleep", remedy("asleep_in_phase", **said)


def phase_cpu_evidence(ctx: DiagnosisInput, s: Straggler) -> list[Evidence]:
    cpu = late_phase_cpu(s)
    if cpu is None:
        return []
    clock = "its training thread's" if cpu.thread_excess_ms is not None else "its"
    out = [
        Evidence(f"{clock} CPU time in {cpu.phase} above the others' per step",
                 round(cpu.computed_ms, 1), "ms"),
        Evidence(f"its time in {cpu.phase} off a CPU above the others' per step",
                 round(cpu.waited_ms, 1), "ms",
                 round(WAITED_SHARE * cpu.wall_excess_ms, 1), ">="),
    ]  # fmt: skip
    queue = queued_ms(ctx, s.rank)
    if queue is not None:
        out += [Evidence("its threads' run-queue wait per step", round(queue[0], 1), "ms"),
                Evidence("the others' (median)", round(queue[1], 1), "ms")]  # fmt: skip
    return out


def where_it_runs(ctx: DiagnosisInput, rank: int) -> str:
    """``cpus 0,1 on HOST``, the host alone when its cpus are unknown, or ``its host``."""
    mine = ctx.ranks.get(rank)
    if mine is None:
        return "its host"
    host = mine.hostname or "its host"
    return f"cpus {cpus_text(mine.cpus)} on {host}" if mine.cpus else host
