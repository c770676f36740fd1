"""Environment traps given as data: each raises exactly its warning, with the measured value."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from scalescope.diagnose.env_checks import (
    EnvThresholds,
    EnvWarning,
    check_environment,
)
from scalescope.launch.machine.facts import collect_environment

Facts = dict[str, dict[str, Any]]

GOOD: Facts = {
    "software": {
        "torch": "2.14.1",
        "mkldnn": True,
        "cpu_capability": "AVX512",
        "backends": {"gloo": True, "nccl": True, "mpi": True},
        "build": {"blas": "mkl", "use_mkldnn": True, "use_mpi": True},
        "runtime": {
            "openmp_libraries": [{"runtime": "libgomp", "path": "/torch/lib/libgomp.so.1"}],
            "allocator": {"name": "tcmalloc", "path": "/usr/lib/libtcmalloc.so.4"},
        },
    },
    "hardware": {
        "machine": "x86_64",
        "isa_flags": ["avx", "avx2", "fma", "avx512f", "avx512dq", "avx512bw", "avx512vl"],
        "logical_cores": 32,
        "physical_cores": 32,
        "usable_cores": 32,
        "threads_per_core": 1,
        "hyperthreading": False,
        "numa_nodes": [
            {"node": 0, "cpus": "0-15", "num_cpus": 16, "memory_bytes": 64 << 30},
            {"node": 1, "cpus": "16-31", "num_cpus": 16, "memory_bytes": 64 << 30},
        ],
        "gpus": [],
    },
    "threads": {"OMP_NUM_THREADS": "16", "OMP_PROC_BIND": "close", "OMP_PLACES": "cores"},
}
"""Two 16-core NUMA nodes, two ranks of 16 bound threads, MKL, oneDNN, AVX512, tcmalloc."""

A100 = {"index": 0, "name": "NVIDIA A100-SXM4-40GB", "memory_bytes": 40 << 30}


def _check(facts: Facts, nproc: int | None = 2, **kwargs: Any) -> list[EnvWarning]:
    return check_environment(
        facts["software"], facts["hardware"], facts["threads"], nproc, **kwargs
    )


def _with(change: Callable[[Facts], None], base: Facts = GOOD) -> Facts:
    facts = copy.deepcopy(base)
    change(facts)
    return facts


def _a64fx(f: Facts) -> None:
    f["hardware"].update(machine="aarch64", isa_flags=["asimd", "fphp", "sve"], sve_vector_bits=512)
    f["software"].update(cpu_capability="DEFAULT")
    f["software"]["build"]["blas"] = "ssl2"


def _set(section: str, **values: Any) -> Callable[[Facts], None]:
    return lambda f: f[section].update(values)


def _drop(section: str, *names: str) -> Callable[[Facts], None]:
    return lambda f: [f[section].pop(name) for name in names]


def _gpus(nccl: bool) -> Callable[[Facts], None]:
    def change(f: Facts) -> None:
        f["hardware"]["gpus"] = [A100]
        f["software"]["backends"]["nccl"] = nccl

    return change


def _second_openmp(f: Facts) -> None:
    libraries = f["software"]["runtime"]["openmp_libraries"]
    libraries.append({"runtime": "libiomp5", "path": "/opt/intel/lib/libiomp5.so"})


TRAPS = [
    ("no-onednn", _set("software", mkldnn=False), {}, "NO_ONEDNN", ["is_available()=False"]),
    ("avx2-on-avx512", _set("software", cpu_capability="AVX2"), {}, "ISA_UNDERUSED",
     ["capability AVX2", "avx512f", "supports AVX512"]),
    ("no-sve", _a64fx, {}, "ISA_UNDERUSED", ["sve (512-bit vectors)", "capability DEFAULT"]),
    ("generic-blas", lambda f: f["software"]["build"].update(blas="generic"), {}, "SLOW_BLAS",
     ["BLAS_INFO=generic"]),
    ("omp-one", _set("threads", OMP_NUM_THREADS="1"), {}, "OMP_ONE_THREAD",
     ["OMP_NUM_THREADS=1", "2 threads on 32 physical cores", "6%", "50%"]),
    ("oversubscribed", _set("threads", OMP_NUM_THREADS="32"), {}, "OVERSUBSCRIBED",
     ["OMP_NUM_THREADS=32", "64 threads > 32"]),
    ("omp-unset", _drop("threads", "OMP_NUM_THREADS"), {}, "OMP_UNSET",
     ["2 ranks per node", "64 threads on 32 physical cores"]),
    ("smt", _set("hardware", logical_cores=64, usable_cores=64, threads_per_core=2,
                 hyperthreading=True), {}, "HYPERTHREADING", ["64 logical CPUs on 32 physical"]),
    ("two-openmp", _second_openmp, {}, "OPENMP_RUNTIMES",
     ["libgomp at /torch/lib/libgomp.so.1", "libiomp5 at /opt/intel/lib/libiomp5.so"]),
    ("glibc-malloc",
     lambda f: f["software"]["runtime"].update(allocator={"name": "glibc", "path": None}), {},
     "DEFAULT_ALLOCATOR", ["glibc on 32 physical cores", "from 16"]),
    ("no-nccl", _gpus(nccl=False), {}, "NO_NCCL", ["1 GPU(s)", "A100", "available: gloo, mpi"]),
    ("gloo-on-gpu", _gpus(nccl=True), {"backend": "gloo"}, "GLOO_ON_GPU", ["backend gloo", "A100"]),
    ("numa-unbound", _drop("threads", "OMP_PROC_BIND", "OMP_PLACES"), {}, "NUMA_UNBOUND",
     ["2 NUMA nodes", "node1: cpus 16-31", "OMP_PROC_BIND"]),
]  # fmt: skip


def test_a_well_configured_environment_gives_nothing():
    assert _check(GOOD) == []
    assert _check(GOOD, nproc=None, backend="nccl") == []


@pytest.mark.parametrize(
    ("change", "kwargs", "code", "evidence"),
    [trap[1:] for trap in TRAPS],
    ids=[trap[0] for trap in TRAPS],
)
def test_each_trap_raises_exactly_its_warning(change, kwargs, code, evidence):
    found = _check(_with(change), **kwargs)
    assert [w.code for w in found] == [code]
    assert found[0].level == "warning"
    for needle in evidence:
        assert needle in found[0].evidence, found[0].evidence
    assert found[0].message and found[0].remedy


def test_mpi_missing_is_info_only_and_listed_after_warnings():
    facts = _with(_set("threads", OMP_NUM_THREADS="1"))
    facts["software"]["backends"]["mpi"] = False
    facts["software"]["build"]["use_mpi"] = False
    found = _check(facts)
    assert [(w.code, w.level) for w in found] == [("OMP_ONE_THREAD", "warning"), ("NO_MPI", "info")]
    assert "is_mpi_available()=False, USE_MPI=OFF" in found[1].evidence


def test_thread_checks_abstain_without_ranks_per_node():
    for value in ("1", "64"):
        assert _check(_with(_set("threads", OMP_NUM_THREADS=value)), nproc=None) == []
    assert _check(_with(_drop("threads", "OMP_NUM_THREADS")), nproc=None) == []


def test_one_rank_per_core_with_one_thread_is_fine():
    assert _check(_with(_set("threads", OMP_NUM_THREADS="1")), nproc=32) == []


def test_forced_capability_names_the_variable_in_the_remedy():
    facts = _with(_set("software", cpu_capability="AVX2"))
    facts["threads"]["ATEN_CPU_CAPABILITY"] = "avx2"
    (warning,) = _check(facts)
    assert "unset ATEN_CPU_CAPABILITY" in warning.remedy


def test_avx512f_without_bw_vl_is_not_avx512_for_torch():
    facts = _with(_set("software", cpu_capability="AVX2"))
    facts["hardware"]["isa_flags"] = ["avx", "avx2", "fma", "avx512f", "avx512cd"]
    assert _check(facts) == []


def test_sve256_on_an_sve_cpu_is_fine():
    facts = _with(_a64fx)
    facts["software"]["cpu_capability"] = "SVE256"
    assert _check(facts) == []


def test_small_cpu_with_glibc_malloc_is_fine_and_threshold_moves():
    def small_glibc(f: Facts) -> None:
        f["software"]["runtime"]["allocator"] = {"name": "glibc", "path": None}
        f["hardware"].update(physical_cores=8, logical_cores=8, usable_cores=8)
        f["threads"]["OMP_NUM_THREADS"] = "4"

    facts = _with(small_glibc)
    assert _check(facts) == []
    found = _check(facts, thresholds=EnvThresholds(allocator_min_cores=8))
    assert [w.code for w in found] == ["DEFAULT_ALLOCATOR"]
    assert "from 8" in found[0].evidence


def test_missing_facts_abstain():
    assert check_environment({}, {}, {"OMP_NUM_THREADS": "4"}, 4) == []
    # an empty threads dict is a fact (nothing set), not a missing one
    assert [w.code for w in check_environment({}, {}, {}, 4)] == ["OMP_UNSET"]


def test_bad_level_and_thresholds_are_rejected():
    with pytest.raises(ValueError, match="level"):
        EnvWarning("X", "m", "e", "r", level="error")
    with pytest.raises(ValueError, match="min_core_use"):
        EnvThresholds(min_core_use=0)
    with pytest.raises(ValueError, match="allocator_min_cores"):
        EnvThresholds(allocator_min_cores=0)


def test_live_facts_are_checked_without_error():
    environment = collect_environment()
    found = check_environment(**environment, nproc_per_node=1)
    assert all(isinstance(w, EnvWarning) and w.evidence for w in found)
