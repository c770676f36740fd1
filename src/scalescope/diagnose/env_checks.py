"""Known traps of a training environment, recognised from the fact dicts of launch.machine.facts.

``check_environment`` is a pure function over the ``software``, ``hardware`` and ``threads``
dicts (as recorded in run.json or collected by ``scalescope env``), so it runs the same on
live facts and on facts given as data. Each check abstains (returns ``None``) when a fact
it needs is missing. Every threshold lives in ``EnvThresholds``; docs/env.md lists the codes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

LEVELS = ("warning", "info")
BINDING_VARIABLES = ("OMP_PROC_BIND", "OMP_PLACES", "KMP_AFFINITY", "GOMP_CPU_AFFINITY")
X86_MACHINES = ("x86_64", "amd64", "i386", "i686")
ARM_MACHINES = ("aarch64", "arm64")
AVX512_FLAGS = ("avx512f", "avx512bw", "avx512vl", "avx512dq")
"""What torch's AVX512 kernels need (besides fma); avx512f alone is not enough."""
X86_LEVELS = {"NO AVX": 0, "DEFAULT": 0, "AVX2": 1, "AVX512": 2}
"""Order of torch's x86 CPU capabilities."""


@dataclass(frozen=True, kw_only=True)
class EnvThresholds:
    """Every threshold of the environment checks, in one place."""

    min_core_use: float = 0.5
    """``OMP_NUM_THREADS=1`` is flagged when ranks per node keep busy less than this fraction
    of the physical cores (torchrun sets 1 by default)."""
    max_threads_per_core: float = 1.0
    """Oversubscription: ``OMP_NUM_THREADS`` x ranks per node above this many threads per
    physical core."""
    min_ranks_omp_unset: int = 2
    """``OMP_NUM_THREADS`` unset is flagged from this many ranks per node."""
    allocator_min_cores: int = 16
    """glibc's malloc is flagged on CPUs with at least this many physical cores."""
    max_openmp_runtimes: int = 1
    """More OpenMP runtime libraries loaded than this is flagged."""
    min_numa_nodes_for_binding: int = 2
    """Unbound threads are flagged from this many NUMA nodes."""
    fast_blas: tuple[str, ...] = (
        "mkl",
        "open",
        "openblas",
        "armpl",
        "ssl2",
        "nvpl",
        "blis",
        "accelerate",
        "veclib",
    )
    """``BLAS_INFO`` values of optimised BLAS libraries (``open`` is OpenBLAS, ``ssl2`` is
    Fujitsu's SSL II on A64FX); anything else (``generic``, ``eigen``, ...) is flagged."""

    def __post_init__(self) -> None:
        if not 0 < self.min_core_use <= 1:
            raise ValueError(f"min_core_use must be in (0, 1], got {self.min_core_use}")
        if self.max_threads_per_core <= 0:
            raise ValueError(f"max_threads_per_core must be > 0, got {self.max_threads_per_core}")
        for name in ("min_ranks_omp_unset", "allocator_min_cores", "max_openmp_runtimes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.min_numa_nodes_for_binding < 2:
            raise ValueError("min_numa_nodes_for_binding must be >= 2")


THRESHOLDS = EnvThresholds()


@dataclass(frozen=True)
class EnvWarning:
    """One trap found: what it is, the measured values behind it, and what to change."""

    code: str
    message: str
    evidence: str
    remedy: str
    level: str = "warning"

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}, got {self.level!r}")


@dataclass(frozen=True)
class EnvFacts:
    """The inputs every check reads."""

    software: dict[str, Any]
    hardware: dict[str, Any]
    threads: dict[str, Any]
    nproc_per_node: int | None = None
    backend: str | None = None
    limits: EnvThresholds = field(default_factory=EnvThresholds)

    @property
    def build(self) -> dict[str, Any]:
        return self.software.get("build") or {}

    @property
    def runtime(self) -> dict[str, Any]:
        return self.software.get("runtime") or {}

    @property
    def machine(self) -> str:
        return str(self.hardware.get("machine") or "").lower()

    @property
    def cores(self) -> int | None:
        """Physical cores this process may use: min(physical cores, CPUs in its affinity)."""
        counts = (self.hardware.get("physical_cores"), self.hardware.get("usable_cores"))
        known = [n for n in counts if isinstance(n, int) and n > 0]
        return min(known) if known else None

    @property
    def omp_threads(self) -> int | None:
        """``OMP_NUM_THREADS`` as a number (first level of a nested list), else ``None``."""
        raw = str(self.threads.get("OMP_NUM_THREADS", "")).split(",")[0].strip()
        return int(raw) if raw.isdigit() and int(raw) > 0 else None


def _setting(facts: EnvFacts, key: str) -> str:
    """``, USE_MPI=OFF`` from the build facts, or nothing when the build did not say."""
    value = facts.build.get(key)
    if value is None:
        return ""
    shown = ("ON" if value else "OFF") if isinstance(value, bool) else value
    return f", {key.upper()}={shown}"


Check = Callable[[EnvFacts], "EnvWarning | None"]


def check_onednn(facts: EnvFacts) -> EnvWarning | None:
    if facts.machine not in X86_MACHINES or facts.software.get("mkldnn") is not False:
        return None
    return EnvWarning(
        "NO_ONEDNN",
        "torch was built without oneDNN (MKL-DNN) on an x86 CPU",
        f"torch.backends.mkldnn.is_available()=False{_setting(facts, 'use_mkldnn')}, "
        f"machine={facts.machine}",
        "install an official PyTorch wheel or build with USE_MKLDNN=1: oneDNN has the fast "
        "CPU convolution, matmul and pooling kernels",
    )


def _x86_cpu_level(flags: set[str]) -> tuple[int, str]:
    if all(flag in flags for flag in AVX512_FLAGS) and "fma" in flags:
        return 2, "AVX512"
    if "avx2" in flags and "fma" in flags:
        return 1, "AVX2"
    return 0, "DEFAULT"


def _isa_remedy(facts: EnvFacts, build_hint: str) -> str:
    forced = facts.threads.get("ATEN_CPU_CAPABILITY")
    if forced:
        return f"unset ATEN_CPU_CAPABILITY (set to {forced!r}), which caps torch's kernels"
    return build_hint


def check_isa(facts: EnvFacts) -> EnvWarning | None:
    used = str(facts.software.get("cpu_capability") or "").upper()
    flags = set(facts.hardware.get("isa_flags") or ())
    if not used or not flags:
        return None
    if facts.machine in X86_MACHINES and used in X86_LEVELS:
        level, best = _x86_cpu_level(flags)
        if X86_LEVELS[used] >= level:
            return None
        have = ", ".join(f for f in (*AVX512_FLAGS, "avx2", "fma") if f in flags)
        evidence = f"CPU flags {have}; torch CPU capability {used}, CPU supports {best}"
        hint = f"use a torch build with {best} kernels (the official x86 wheels have them)"
    elif facts.machine in ARM_MACHINES and "sve" in flags and not used.startswith("SVE"):
        bits = facts.hardware.get("sve_vector_bits")
        width = f" ({bits}-bit vectors)" if bits else ""
        best = "SVE"
        evidence = f"CPU flag sve{width}; torch CPU capability {used}"
        hint = "use a torch build with SVE kernels for this vector length (or a vendor build)"
    else:
        return None
    return EnvWarning(
        "ISA_UNDERUSED",
        f"torch runs {used} kernels on a CPU that supports {best}",
        evidence,
        _isa_remedy(facts, hint),
    )


def check_blas(facts: EnvFacts) -> EnvWarning | None:
    blas = facts.build.get("blas")
    if not blas or str(blas).lower() in facts.limits.fast_blas:
        return None
    return EnvWarning(
        "SLOW_BLAS",
        f"torch uses an unoptimised BLAS ({blas})",
        f"BLAS_INFO={blas}; optimised: {', '.join(facts.limits.fast_blas)}",
        "use a torch build linked to MKL (x86) or OpenBLAS / Arm PL / Fujitsu SSL II (Arm)",
    )


def check_omp_one_thread(facts: EnvFacts) -> EnvWarning | None:
    n, cores = facts.nproc_per_node, facts.cores
    if facts.omp_threads != 1 or not n or not cores:
        return None
    use = n / cores
    if use >= facts.limits.min_core_use:
        return None
    return EnvWarning(
        "OMP_ONE_THREAD",
        "OMP_NUM_THREADS=1 leaves most cores idle",
        f"OMP_NUM_THREADS=1 x {n} ranks per node = {n} threads on {cores} physical cores "
        f"({use:.0%} of cores; flagged below {facts.limits.min_core_use:.0%})",
        f"set OMP_NUM_THREADS={max(1, cores // n)} (physical cores / ranks per node); "
        "torchrun sets 1 when you do not",
    )


def check_oversubscription(facts: EnvFacts) -> EnvWarning | None:
    n, cores, omp = facts.nproc_per_node, facts.cores, facts.omp_threads
    if not n or not cores or not omp:
        return None
    total, limit = omp * n, cores * facts.limits.max_threads_per_core
    if total <= limit:
        return None
    return EnvWarning(
        "OVERSUBSCRIBED",
        "more compute threads than physical cores",
        f"OMP_NUM_THREADS={omp} x {n} ranks per node = {total} threads > {limit:g} "
        f"({cores} physical cores x {facts.limits.max_threads_per_core:g} thread per core)",
        f"set OMP_NUM_THREADS={max(1, cores // n)} (physical cores / ranks per node)",
    )


def check_omp_unset(facts: EnvFacts) -> EnvWarning | None:
    n, cores = facts.nproc_per_node, facts.cores
    if "OMP_NUM_THREADS" in facts.threads or not n or n < facts.limits.min_ranks_omp_unset:
        return None
    fight = f": up to {n * cores} threads on {cores} physical cores" if cores else ""
    return EnvWarning(
        "OMP_UNSET",
        "OMP_NUM_THREADS is unset with several ranks per node",
        f"OMP_NUM_THREADS unset, {n} ranks per node (flagged from "
        f"{facts.limits.min_ranks_omp_unset}); each rank may start a thread per core{fight}",
        f"set OMP_NUM_THREADS={max(1, cores // n)} (physical cores / ranks per node)"
        if cores
        else "set OMP_NUM_THREADS to physical cores / ranks per node",
    )


def check_hyperthreading(facts: EnvFacts) -> EnvWarning | None:
    hw = facts.hardware
    if hw.get("hyperthreading") is not True:
        return None
    physical = hw.get("physical_cores")
    return EnvWarning(
        "HYPERTHREADING",
        "hyper-threading (SMT) is on: count threads in physical cores",
        f"{hw.get('threads_per_core')} hardware threads per core: {hw.get('logical_cores')} "
        f"logical CPUs on {physical} physical cores",
        f"OMP_NUM_THREADS = {physical} physical cores / ranks per node, with "
        "OMP_PLACES=cores OMP_PROC_BIND=close so no two threads share a core",
    )


def check_openmp_runtimes(facts: EnvFacts) -> EnvWarning | None:
    libraries = facts.runtime.get("openmp_libraries")
    if not libraries or len(libraries) <= facts.limits.max_openmp_runtimes:
        return None
    names = sorted({lib["runtime"] for lib in libraries})
    what = " and ".join(names) if len(names) > 1 else f"{len(libraries)} copies of {names[0]}"
    return EnvWarning(
        "OPENMP_RUNTIMES",
        f"{len(libraries)} OpenMP runtimes loaded ({what}): their thread pools compete",
        "; ".join(f"{lib['runtime']} at {lib['path']}" for lib in libraries)
        + f" (flagged above {facts.limits.max_openmp_runtimes})",
        "load a single OpenMP runtime: use packages built against the same one, or preload "
        "one (e.g. LD_PRELOAD=libiomp5.so) so the others resolve to it",
    )


def check_allocator(facts: EnvFacts) -> EnvWarning | None:
    allocator = facts.runtime.get("allocator") or {}
    cores = facts.hardware.get("physical_cores")
    if allocator.get("name") != "glibc" or not cores:
        return None
    if cores < facts.limits.allocator_min_cores:
        return None
    return EnvWarning(
        "DEFAULT_ALLOCATOR",
        "glibc's malloc on a many-core CPU",
        f"allocator glibc on {cores} physical cores (flagged from "
        f"{facts.limits.allocator_min_cores})",
        "run with --allocator tcmalloc (or jemalloc), i.e. LD_PRELOAD=libtcmalloc.so",
    )


def _available(facts: EnvFacts) -> list[str]:
    return [name for name, ok in (facts.software.get("backends") or {}).items() if ok]


def check_nccl(facts: EnvFacts) -> EnvWarning | None:
    gpus = facts.hardware.get("gpus") or []
    backends = facts.software.get("backends") or {}
    if not gpus or "nccl" not in backends or backends["nccl"]:
        return None
    return EnvWarning(
        "NO_NCCL",
        "CUDA GPUs present but NCCL is unavailable: collectives fall back to gloo",
        f"{len(gpus)} GPU(s) ({gpus[0].get('name')}); torch.distributed backends "
        f"available: {', '.join(_available(facts)) or 'none'}",
        "install a CUDA build of torch with NCCL (the official CUDA wheels have it)",
    )


def check_gloo_on_gpu(facts: EnvFacts) -> EnvWarning | None:
    gpus = facts.hardware.get("gpus") or []
    if facts.backend != "gloo" or not gpus:
        return None
    if not (facts.software.get("backends") or {}).get("nccl"):
        return None
    return EnvWarning(
        "GLOO_ON_GPU",
        "the gloo backend on CUDA GPUs: tensors go through host memory",
        f"backend gloo with {len(gpus)} GPU(s) ({gpus[0].get('name')}); NCCL available",
        "use the nccl backend for CUDA tensors",
    )


def check_numa_binding(facts: EnvFacts) -> EnvWarning | None:
    nodes = facts.hardware.get("numa_nodes") or []
    if len(nodes) < facts.limits.min_numa_nodes_for_binding:
        return None
    if any(name in facts.threads for name in BINDING_VARIABLES):
        return None
    shown = "; ".join(f"node{n['node']}: cpus {n['cpus']}" for n in nodes[:4])
    more = f"; ... ({len(nodes)} in all)" if len(nodes) > 4 else ""
    return EnvWarning(
        "NUMA_UNBOUND",
        "several NUMA nodes but threads are not bound",
        f"{len(nodes)} NUMA nodes ({shown}{more}); unset: {', '.join(BINDING_VARIABLES)}",
        "run one rank per NUMA node with threads = cores per node and bind them: "
        "OMP_PLACES=cores OMP_PROC_BIND=close (or numactl --cpunodebind=N --membind=N)",
    )


def check_mpi(facts: EnvFacts) -> EnvWarning | None:
    backends = facts.software.get("backends") or {}
    if "mpi" not in backends or backends["mpi"]:
        return None
    return EnvWarning(
        "NO_MPI",
        "torch.distributed has no MPI backend",
        f"torch.distributed.is_mpi_available()=False{_setting(facts, 'use_mpi')}",
        "none needed: gloo (CPU) and NCCL (GPU) work without it; for the MPI backend build "
        "torch from source against your MPI",
        level="info",
    )


CHECKS: tuple[Check, ...] = (
    check_onednn,
    check_isa,
    check_blas,
    check_omp_one_thread,
    check_oversubscription,
    check_omp_unset,
    check_hyperthreading,
    check_openmp_runtimes,
    check_allocator,
    check_nccl,
    check_gloo_on_gpu,
    check_numa_binding,
    check_mpi,
)


def check_environment(
    software: dict[str, Any],
    hardware: dict[str, Any],
    threads: dict[str, Any],
    nproc_per_node: int | None = None,
    *,
    backend: str | None = None,
    thresholds: EnvThresholds = THRESHOLDS,
) -> list[EnvWarning]:
    """Every trap found in the facts, warnings before infos, in ``CHECKS`` order.

    ``nproc_per_node`` (ranks per node) enables the thread-count checks and ``backend``
    (the process-group backend chosen) the GPU-backend check; without them those abstain.
    """
    facts = EnvFacts(software, hardware, threads, nproc_per_node, backend, thresholds)
    found = [w for w in (check(facts) for check in CHECKS) if w is not None]
    return sorted(found, key=lambda w: LEVELS.index(w.level))
