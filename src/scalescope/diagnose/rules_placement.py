"""CPU placement: threads x ranks against cores, binding, idle cores, NUMA domains.

Read from what each rank recorded about itself (rank files: ``num_threads``, ``cpus``,
``bound``, ``thread_env``) against the hardware facts. Placement costs no phase of its
own: it slows compute, and on an oversubscribed host it shows as waiting in collectives
for peers the OS descheduled. Where the ranks recorded their run-queue wait
(``runqueue_wait_s``), an oversubscribed host's cost is that wait per step; else it is
estimated from the FLOP/s shortfall when the model's FLOPs are known, else from the counts
alone (said so in ``basis``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from scalescope.diagnose.findings import Evidence, Finding, bottleneck, remedy, summary
from scalescope.diagnose.rank_cpu import rank_wait_ms
from scalescope.diagnose.rules_comm import exposed
from scalescope.diagnose.rules_flops import Efficiency, efficiency, step_excess_ms
from scalescope.diagnose.rules_input import (
    DiagnosisInput,
    host_cores,
    hosts,
    mean_compute,
    mean_phase,
    mean_step,
    rank_threads,
    rank_times,
    share_pct,
)
from scalescope.events.run import RankMeta

NO_RANK_FILES = "the rank files (threads, cpus, binding of each rank) were not recorded"
TIME_SLICED_PCT = 50.0
"""Exposed communication is time-slicing, not the network's, when the run-queue wait of the
oversubscribed host's ranks accounts for at least this share of it."""
WAIT_BASIS = (
    "measured: run-queue wait per step of the host's ranks (/proc schedstat: time runnable "
    "without a cpu); the others wait in collectives for a descheduled rank at most as long"
)


@dataclass(frozen=True)
class HostLoad:
    host: str
    ranks: int
    threads: int
    cores: int
    bound: bool
    """Every rank of the host was bound by scalescope."""
    shared_cpus: bool
    """Some cpu is in the affinity of two ranks (or a rank's cpus are unknown)."""
    omp_one: bool
    """Every rank runs with OMP_NUM_THREADS=1."""


def _shares_cpus(ranks: list[RankMeta]) -> bool:
    """Some cpu is in the affinity of two ranks, or a rank's cpus are unknown."""
    seen: set[int] = set()
    for r in ranks:
        if not r.cpus or seen & set(r.cpus):
            return True
        seen |= set(r.cpus)
    return False


def host_loads(ctx: DiagnosisInput) -> list[HostLoad]:
    """Threads against cores per host, for hosts whose threads and cores are all known."""
    out = []
    for host, ranks in hosts(ctx).items():
        threads = [rank_threads(r) for r in ranks]
        cores = host_cores(ranks, ctx.meta.hardware)
        if cores is None or any(t is None for t in threads):
            continue
        load = HostLoad(
            host=host,
            ranks=len(ranks),
            threads=sum(t or 0 for t in threads),
            cores=cores,
            bound=all(r.bound for r in ranks),
            shared_cpus=_shares_cpus(ranks),
            omp_one=all(r.thread_env.get("OMP_NUM_THREADS") == "1" for r in ranks),
        )
        out.append(load)
    return out


@dataclass(frozen=True)
class TimeSlicing:
    """What sharing cores costs the ranks of an oversubscribed host, by their run-queue wait."""

    load: HostLoad
    wait_ms: float
    """Run-queue wait per step, mean over the host's ranks (each at most its step)."""
    share_pct: float
    switches: float | None
    """Involuntary context switches per rank, mean over the host's ranks (whole run)."""
    comm_ms: float | None
    """Exposed communication per step; None when not recorded."""

    @property
    def comm_explained_pct(self) -> float | None:
        """Share of the exposed communication the run-queue wait accounts for: a rank waits
        in a collective for a descheduled peer at most as long as its peers wait for a cpu."""
        if not self.comm_ms:
            return None
        return 100.0 * min(self.wait_ms, self.comm_ms) / self.comm_ms

    @property
    def explains_comm(self) -> bool:
        pct = self.comm_explained_pct
        return pct is not None and pct >= TIME_SLICED_PCT


def _host_slicing(ctx: DiagnosisInput, load: HostLoad) -> TimeSlicing | None:
    steps = {t.rank: t.step_ms for t in rank_times(ctx.analysis)}
    ranks = [r for r in hosts(ctx).get(load.host, []) if r.rank in steps]
    waits = [rank_wait_ms(r, steps[r.rank]) for r in ranks]
    if not waits or any(w is None for w in waits):
        return None
    wait = sum(w or 0.0 for w in waits) / len(waits)
    step = sum(steps[r.rank] for r in ranks) / len(ranks)
    switches = [r.involuntary_switches for r in ranks]
    known = [n for n in switches if n is not None]
    comm = exposed(ctx.analysis) if ctx.analysis.world_size >= 2 else None
    return TimeSlicing(
        load=load,
        wait_ms=wait,
        share_pct=share_pct(wait, step),
        switches=sum(known) / len(known) if known else None,
        comm_ms=comm.ms if comm else None,
    )


def time_slicing(ctx: DiagnosisInput) -> TimeSlicing | None:
    """The oversubscribed host whose ranks waited most for a cpu; None when no host is
    oversubscribed or its ranks' run-queue wait was not recorded (older runs, not Linux)."""
    limit = ctx.thresholds.max_threads_per_core
    over = [h for h in host_loads(ctx) if h.threads > h.cores * limit]
    found = [ts for ts in map(lambda h: _host_slicing(ctx, h), over) if ts is not None]
    return max(found, key=lambda ts: ts.wait_ms, default=None)


def _slicing_evidence(ts: TimeSlicing) -> tuple[Evidence, ...]:
    n = ts.load.ranks
    out = [
        Evidence(
            f"run-queue wait per step (runnable, waiting for a cpu; mean of the {n} ranks)",
            round(ts.wait_ms, 1),
            "ms",
        ),
        Evidence("run-queue wait", round(ts.share_pct, 1), "% of step time"),
    ]
    if ts.switches is not None:
        out.append(Evidence("involuntary context switches per rank", round(ts.switches)))
    pct = ts.comm_explained_pct
    if pct is not None:
        out.append(
            Evidence(
                "exposed communication the run-queue wait accounts for",
                round(pct, 1),
                "%",
                TIME_SLICED_PCT,
                ">=" if ts.explains_comm else "<",
            )
        )
    return tuple(out)


def _kept_ms(ctx: DiagnosisInput) -> float:
    """Data wait and exposed communication per step, which placement does not cause."""
    times = rank_times(ctx.analysis)
    comm = exposed(ctx.analysis)
    return (mean_phase(times, "data") or 0.0) + (comm.ms if comm else 0.0)


def _saving(ctx: DiagnosisInput, fallback_fraction: float, how: str) -> tuple[float, str]:
    """Time per step to gain: the step above one that computes at the expected FLOP/s if
    the model's FLOPs are known, else compute x ``fallback_fraction``."""
    eff = efficiency(ctx)
    if isinstance(eff, Efficiency):
        target = 100 * ctx.thresholds.flops_expected_fraction
        return step_excess_ms(ctx, eff, _kept_ms(ctx)), (
            f"estimate: step time above a step that computes at {target:.0f}% of the "
            f"estimated peak FLOP/s (now {100 * eff.fraction:.0f}%) with the same data wait "
            "and exposed communication"
        )
    compute = mean_compute(rank_times(ctx.analysis)) or 0.0
    return compute * max(fallback_fraction, 0.0), f"rough estimate: {how}"


def _finding(
    ctx: DiagnosisInput,
    code: str,
    saved: float | None,
    basis: str,
    evidence: tuple[Evidence, ...],
    remedies: tuple[str, ...],
    **values: object,
) -> Finding:
    step = mean_step(rank_times(ctx.analysis))
    share = share_pct(saved, step) if saved is not None and step else None
    return Finding(
        code=code,
        bottleneck=bottleneck(code),
        summary=summary(code, **values),
        share_pct=share,
        saved_ms_per_step=saved,
        evidence=evidence,
        remedies=remedies,
        basis=basis,
    )


class _PlacementRule:
    name = "CPU placement"

    def not_judged(self, ctx: DiagnosisInput) -> tuple[str, ...]:
        if not ctx.ranks:
            return (f"{self.name}: {NO_RANK_FILES}",)
        if not host_loads(ctx):
            return (f"{self.name}: threads or cores of the ranks are unknown",)
        return ()


class OversubscribedRule(_PlacementRule):
    """More compute threads on a host than physical cores x ``max_threads_per_core``."""

    def evaluate(self, ctx: DiagnosisInput) -> Finding | None:
        limit = ctx.thresholds.max_threads_per_core
        over = [h for h in host_loads(ctx) if h.threads > h.cores * limit]
        if not over:
            return None
        ts = time_slicing(ctx)
        h = ts.load if ts else max(over, key=lambda h: h.threads / h.cores)
        if ts is not None:
            saved, basis = ts.wait_ms, WAIT_BASIS
        else:
            saved, basis = _saving(
                ctx,
                1.0 - h.cores * limit / h.threads,
                "compute time x (1 - cores / threads); spinning OpenMP runtimes often lose more",
            )
        evidence = (
            Evidence(
                "compute threads per physical core", round(h.threads / h.cores, 2), "", limit, ">"
            ),
            Evidence(f"threads of the {h.ranks} ranks on {h.host}", h.threads),
            Evidence("physical cores they run on", h.cores),
        ) + (_slicing_evidence(ts) if ts else ())
        n = max(1, h.cores // h.ranks)
        remedies = (remedy("threads", n=n, ranks=h.ranks, cores=h.cores),)
        if not h.bound:
            remedies += (remedy("bind"),)
        found = _finding(
            ctx,
            "OVERSUBSCRIBED",
            saved,
            basis,
            evidence,
            remedies,
            threads=h.threads,
            cores=h.cores,
            host=h.host,
        )
        if ts is None:
            return found
        words = summary(
            "OVERSUBSCRIBED_WAIT", threads=h.threads, cores=h.cores, host=h.host, share=ts.share_pct
        )
        return replace(found, summary=words)


class UnboundRule(_PlacementRule):
    """Several ranks on a host, none bound, sharing cpus: the OS places them."""

    def evaluate(self, ctx: DiagnosisInput) -> Finding | None:
        loose = [h for h in host_loads(ctx) if h.ranks > 1 and not h.bound and h.shared_cpus]
        if not loose:
            return None
        h = loose[0]
        evidence = (Evidence(f"unbound ranks on {h.host} sharing cpus", h.ranks, "", 2, ">="),)
        return _finding(
            ctx,
            "UNBOUND",
            None,
            "",
            evidence,
            (remedy("bind"), remedy("numa")),
            ranks=h.ranks,
            host=h.host,
        )


class IdleCoresRule(_PlacementRule):
    """A host's ranks run fewer threads than ``min_core_use`` of its cores."""

    def evaluate(self, ctx: DiagnosisInput) -> Finding | None:
        use = ctx.thresholds.min_core_use
        idle = [h for h in host_loads(ctx) if h.threads < h.cores * use]
        if not idle:
            return None
        h = min(idle, key=lambda h: h.threads / h.cores)
        saved, basis = _saving(
            ctx,
            1.0 - h.threads / h.cores,
            "compute time x (1 - threads / cores), as if compute scaled perfectly with cores",
        )
        evidence = [
            Evidence(
                "cores with a compute thread",
                round(100 * h.threads / h.cores, 1),
                "%",
                100 * use,
                "<",
            ),
            Evidence(f"threads of the {h.ranks} ranks on {h.host}", h.threads),
            Evidence("physical cores they may use", h.cores),
        ]
        if h.omp_one:
            evidence.append(Evidence("OMP_NUM_THREADS", "1"))
        remedies = (remedy("use_cores", n=max(1, h.cores // h.ranks)),)
        return _finding(
            ctx,
            "IDLE_CORES",
            saved,
            basis,
            tuple(evidence),
            remedies,
            threads=h.threads,
            cores=h.cores,
            host=h.host,
        )


def parse_cpulist(text: str) -> set[int]:
    """``0-3,8,10-11`` -> {0, 1, 2, 3, 8, 10, 11}."""
    cpus: set[int] = set()
    for part in text.replace(" ", "").split(","):
        if "-" in part:
            lo, hi = part.split("-", 1)
            cpus.update(range(int(lo), int(hi) + 1))
        elif part:
            cpus.add(int(part))
    return cpus


class NumaSpanRule(_PlacementRule):
    """A rank whose cpus lie in more than one NUMA node."""

    def evaluate(self, ctx: DiagnosisInput) -> Finding | None:
        nodes = {
            n["node"]: parse_cpulist(str(n.get("cpus") or ""))
            for n in ctx.meta.hardware.get("numa_nodes") or ()
        }
        if len(nodes) < 2:
            return None
        for rank in sorted(ctx.ranks):
            cpus = set(ctx.ranks[rank].cpus)
            spanned = sorted(n for n, node_cpus in nodes.items() if cpus & node_cpus)
            if len(spanned) > 1:
                evidence = (
                    Evidence(f"NUMA nodes of rank {rank}'s cpus", len(spanned), "", 1, ">"),
                )
                found = _finding(
                    ctx,
                    "NUMA_SPAN",
                    None,
                    "",
                    evidence,
                    (remedy("numa"),),
                    rank=rank,
                    nodes=",".join(map(str, spanned)),
                )
                return replace(found, rank=rank)
        return None
