"""CPU placement: threads x ranks against cores, binding, idle cores, NUMA domains.

Read from what each rank recorded about itself (rank files: ``num_threads``, ``cpus``,
``bound``, ``thread_env``) against the hardware facts. Placement costs no phase of its
own: it slows compute. Its saving is estimated from the FLOP/s shortfall when the model's
FLOPs are known, else from the counts alone (said so in ``basis``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from scalescope.diagnose.findings import Evidence, Finding, bottleneck, remedy, summary
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
        h = max(over, key=lambda h: h.threads / h.cores)
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
        )
        n = max(1, h.cores // h.ranks)
        remedies = (remedy("threads", n=n, ranks=h.ranks, cores=h.cores),)
        if not h.bound:
            remedies += (remedy("bind"),)
        return _finding(
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
