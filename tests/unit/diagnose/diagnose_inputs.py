"""Test helper (not a test module): diagnosis inputs built by hand with known numbers.

Analyses are the real frozen result types of scalescope.analyze, filled directly: every
number a rule reads is set here, so each test states the truth it checks against.
"""

from __future__ import annotations

from typing import Any

from scalescope.analyze.comm.collectives import CollectiveAnalysis, SizeStats, TagPerStep
from scalescope.analyze.cross_rank import CrossRankAnalysis, RankWaits, Straggler
from scalescope.analyze.steps.steps import MemoryPeak, PhaseStats, RankSteps, StepAnalysis
from scalescope.analyze.summary import RunAnalysis
from scalescope.bench.flops import ModelFlops
from scalescope.diagnose import DEFAULT_THRESHOLDS, DiagnosisInput, Thresholds
from scalescope.events import RankMeta, RunMeta

GIB = 2**30
HARDWARE: dict[str, Any] = {
    "hostname": "node-a",
    "machine": "x86_64",
    "cpu_model": "Intel(R) Xeon(R) Gold 6330 CPU @ 2.00GHz",
    "isa_flags": ["avx", "avx2", "fma", "avx512f", "avx512dq", "avx512bw", "avx512vl"],
    "cpu_mhz": 2000.0,
    "sockets": 1,
    "logical_cores": 8,
    "physical_cores": 8,
    "threads_per_core": 1,
    "hyperthreading": False,
    "usable_cores": 8,
    "memory_bytes": 64 * GIB,
    "numa_nodes": [{"node": 0, "cpus": "0-7", "num_cpus": 8, "memory_bytes": 64 * GIB}],
    "gpus": [],
}
"""8 cores x 64 FLOP/cycle (AVX-512) x 2.0 GHz: an estimated peak of 1,024 GFLOP/s."""
PEAK_FLOPS = 8 * 64 * 2.0e9
SOFTWARE: dict[str, Any] = {
    "torch": "2.14.1",
    "mkldnn": True,
    "mkl": True,
    "openmp": True,
    "cpu_capability": "AVX512",
    "backends": {"gloo": True, "nccl": False, "mpi": False},
    "build": {"blas": "mkl", "use_mkldnn": True},
    "runtime": {
        "openmp_libraries": [{"runtime": "libgomp", "path": "/lib/libgomp.so.1"}],
        "allocator": {"name": "glibc", "path": None},
    },
}


def phase(name: str, mean_ms: float, step_ms: float) -> PhaseStats:
    return PhaseStats(name, mean_ms, mean_ms, mean_ms, mean_ms * 10, 100 * mean_ms / step_ms)


def rank_steps(
    rank: int,
    step_ms: float = 100.0,
    samples_per_step: int = 8,
    memory: tuple[MemoryPeak, ...] = (),
    **phase_ms: float,
) -> RankSteps:
    """A rank with 10 measured steps of ``step_ms`` and the given phase means (ms)."""
    phases = tuple(phase(n, ms, step_ms) for n, ms in phase_ms.items())
    other = step_ms - sum(phase_ms.values())
    phases += (phase("other", max(other, 0.0), step_ms), phase("step", step_ms, step_ms))
    missing = tuple(
        p for p in ("data", "forward", "backward", "comm_wait", "optimizer") if p not in phase_ms
    )
    samples = 10 * samples_per_step
    span = step_ms * 10 / 1e3
    return RankSteps(
        rank, 10, 1, 10, samples, span, samples / span, step_ms, phases, missing, memory
    )


def analysis(
    ranks: list[RankSteps] | None,
    *,
    world_size: int | None = None,
    collectives: CollectiveAnalysis | None = None,
    cross_rank: CrossRankAnalysis | None = None,
) -> RunAnalysis:
    steps = None
    if ranks:
        total = sum(r.samples for r in ranks)
        span = max(r.span_s or 0.0 for r in ranks)
        mean = sum(r.mean_step_ms or 0.0 for r in ranks) / len(ranks)
        steps = StepAnalysis(1, False, tuple(ranks), total, span, total / span, mean)
    n = world_size if world_size is not None else max(len(ranks or ()), 1)
    return RunAnalysis.given(
        run_id="t", workload="script", command=("train.py",), world_size=n,
        nproc_per_node=n, hostnames=("node-a",), status="completed", start_time=0.0,
        end_time=10.0, duration_s=10.0, probe=True, warmup_steps=1, ranks=(), problems=(),
        steps=steps, collectives=collectives, cross_rank=cross_rank,
    )  # fmt: skip


def collectives(sizes: list[tuple[int, float, float]], calls_per_step: float) -> CollectiveAnalysis:
    """all_reduce gradient traffic: (nbytes, total ms per rank, busbw GB/s) per size."""
    rows = tuple(
        SizeStats("all_reduce", nbytes, 2, 20, 10.0, ms * 100, ms * 100, ms * 100, ms, bw, bw)
        for nbytes, ms, bw in sizes
    )
    per_step = (
        TagPerStep("gradients", 2, sum(s[0] for s in sizes) * calls_per_step / len(sizes),
                   calls_per_step),
    )  # fmt: skip
    return CollectiveAnalysis(2, 2, 40, 0, (), rows, per_step, ())


def cross_rank(
    busy_ms: list[float],
    wait_ms: list[float],
    straggler: int | None = None,
    imbalance_pct: float | None = None,
    phase_name: str = "backward",
    between: tuple[str, str] | None = None,
) -> CrossRankAnalysis:
    """Ranks with these busy times and waits; the straggler's lateness per step is rank 0's
    wait, its phase excess its busy time above the least."""
    ranks = tuple(
        RankWaits(r, 0, 0.0, 0.0, wait_ms[r], busy_ms[r], 20) for r in range(len(busy_ms))
    )
    named = None
    if straggler is not None:
        excess = busy_ms[straggler] - min(busy_ms)
        named = Straggler(
            straggler, 90.0, 12.0, phase_name, excess, 95.0, wait_ms[0], between=between
        )
    if imbalance_pct is None:
        mean = sum(busy_ms) / len(busy_ms)
        imbalance_pct = 100 * (max(busy_ms) - mean) / mean
    return CrossRankAnalysis((), (), ranks, 20, 0, imbalance_pct, named, None, None)


def rank_meta(
    rank: int,
    cpus: list[int],
    threads: int,
    *,
    bound: bool = True,
    host: str = "node-a",
    omp: str | None = None,
) -> RankMeta:
    env = {"OMP_NUM_THREADS": omp if omp is not None else str(threads)}
    return RankMeta(
        rank=rank, local_rank=rank, world_size=2, hostname=host, num_threads=threads,
        cpus=cpus, bound=bound, thread_env=env,
    )  # fmt: skip


def run_meta(
    hardware: dict[str, Any] | None = None, software: dict[str, Any] | None = None, **kw: Any
) -> RunMeta:
    return RunMeta(
        run_id="t",
        command=["train.py"],
        script="train.py",
        hardware=dict(HARDWARE if hardware is None else hardware),
        software=dict(SOFTWARE if software is None else software),
        **kw,
    )


def make_input(
    a: RunAnalysis,
    *,
    meta: RunMeta | None = None,
    ranks: dict[int, RankMeta] | None = None,
    forward_gflops: float | None = None,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
) -> DiagnosisInput:
    flops = ModelFlops("resnet18", 64, forward_gflops * 1e9) if forward_gflops else None
    return DiagnosisInput(
        analysis=a,
        meta=meta or run_meta(),
        ranks=ranks if ranks is not None else {},
        bench=None,
        model_flops=flops,
        thresholds=thresholds,
    )


def good_ranks(n: int = 2, cores: int = 8) -> dict[int, RankMeta]:
    """n ranks bound to disjoint, equal shares of the cores, one thread per core."""
    share = cores // n
    return {r: rank_meta(r, list(range(r * share, (r + 1) * share)), share) for r in range(n)}
