"""Software and hardware facts recorded in every run.json and shown by ``scalescope env``.

Three JSON-able dicts (keys documented in docs/env.md):

- ``software_facts()``: python, torch and its build (BLAS, oneDNN, OpenMP, CPU capability),
  CUDA/cuDNN/NCCL, distributed backends, and the native runtimes loaded in this process;
- ``hardware_facts()``: CPU model, ISA flags, sockets, cores, hyper-threading, NUMA nodes with
  their CPUs and memory, GPUs;
- ``thread_facts()``: the environment variables that steer threads, binding, allocator and
  ISA dispatch, exactly as set (unset ones are absent).

Facts are read from the process that calls them (the launcher for run.json), never invented:
what cannot be read is ``None`` or an empty list. torch is imported by the facts that read
it, so a command that only checks its options never pays for it.
"""

from __future__ import annotations

import os
import platform
import re
import socket
import subprocess
from pathlib import Path
from typing import Any

import psutil

from scalescope.launch.machine.build_info import build_facts, cuda_facts, runtime_facts
from scalescope.launch.machine.topology import parse_cpulist

THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "OMP_PROC_BIND",
    "OMP_PLACES",
    "OMP_WAIT_POLICY",
    "KMP_AFFINITY",
    "KMP_BLOCKTIME",
    "GOMP_CPU_AFFINITY",
    "LD_PRELOAD",
    "MALLOC_CONF",
    "ATEN_CPU_CAPABILITY",
    "ONEDNN_MAX_CPU_ISA",
    "DNNL_MAX_CPU_ISA",
)
"""Environment variables recorded by ``thread_facts`` when set."""

ISA_FLAGS = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "avx512f",
    "avx512dq",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "avx_vnni",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    "asimd",
    "asimdhp",
    "asimddp",
    "fphp",
    "sve",
    "sve2",
    "svebf16",
    "bf16",
    "i8mm",
    "sme",
)
"""CPU flags (x86 ``flags``, Arm ``Features`` in /proc/cpuinfo) that decide which kernels run."""

CPUINFO = Path("/proc/cpuinfo")
SYS_CPU = Path("/sys/devices/system/cpu")
SYS_NODE = Path("/sys/devices/system/node")
SVE_VECTOR_LENGTH = Path("/proc/sys/abi/sve_default_vector_length")
NVIDIA_DRIVER = Path("/proc/driver/nvidia/version")


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def distributed_backends() -> dict[str, bool]:
    """Which torch.distributed backends this build can create."""
    import torch.distributed as dist

    names = ("gloo", "nccl", "mpi", "ucc", "xccl")
    if not dist.is_available():
        return dict.fromkeys(names, False)
    found = {}
    for name in names:
        probe = getattr(dist, f"is_{name}_available", None)
        found[name] = bool(probe()) if probe is not None else False
    return found


def software_facts() -> dict[str, Any]:
    import torch

    cpu_capability = ""
    if hasattr(torch.backends, "cpu"):
        cpu_capability = torch.backends.cpu.get_cpu_capability()
    return {
        "python": platform.python_version(),
        "torch": str(torch.__version__),
        "torch_git": getattr(torch.version, "git_version", ""),
        "cuda": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
        "mkldnn": torch.backends.mkldnn.is_available(),
        "mkl": torch.backends.mkl.is_available(),
        "openmp": torch.backends.openmp.is_available(),
        "cpu_capability": cpu_capability,
        "backends": distributed_backends(),
        **cuda_facts(),
        "build": build_facts(),
        "runtime": runtime_facts(),
    }


def cpuinfo_field(text: str, *names: str) -> str | None:
    """Value of the first ``name : value`` line of /proc/cpuinfo text whose name matches."""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in names:
            return value.strip()
    return None


def cpu_model() -> str:
    text = _read(CPUINFO) or ""
    model = cpuinfo_field(text, "model name", "Model Name", "cpu model")
    return model or platform.processor() or platform.machine()


def isa_flags(cpuinfo_text: str) -> list[str]:
    """The ``ISA_FLAGS`` present in the first ``flags``/``Features`` line, in that order."""
    present = set((cpuinfo_field(cpuinfo_text, "flags", "Features") or "").split())
    return [flag for flag in ISA_FLAGS if flag in present]


def count_sockets() -> int | None:
    """Distinct ``physical_package_id`` over the online CPUs, or ``physical id`` lines."""
    packages = set()
    for cpu in parse_cpulist(_read(SYS_CPU / "online") or ""):
        package = _read(SYS_CPU / f"cpu{cpu}" / "topology" / "physical_package_id")
        if package is not None:
            packages.add(package.strip())
    if not packages:
        text = _read(CPUINFO) or ""
        packages = {m.group(1) for m in re.finditer(r"^physical id\s*:\s*(\d+)", text, re.M)}
    return len(packages) or None


def node_memory_bytes(meminfo_text: str) -> int | None:
    """``Node 0 MemTotal:  12543776 kB`` -> bytes."""
    match = re.search(r"MemTotal:\s+(\d+)\s*kB", meminfo_text)
    return int(match.group(1)) * 1024 if match else None


def numa_nodes(root: Path = SYS_NODE) -> list[dict[str, Any]]:
    """Each NUMA node with its CPU list and memory; empty when the kernel shows none."""
    nodes = []
    paths = sorted(root.glob("node[0-9]*"), key=lambda p: int(p.name[4:]))
    for path in paths:
        cpulist = (_read(path / "cpulist") or "").strip()
        nodes.append(
            {
                "node": int(path.name[4:]),
                "cpus": cpulist,
                "num_cpus": len(parse_cpulist(cpulist)),
                "memory_bytes": node_memory_bytes(_read(path / "meminfo") or ""),
            }
        )
    return nodes


def nvidia_driver_version(text: str) -> str | None:
    """``NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug ...`` -> 535.104.05."""
    match = re.search(r"NVRM version:.*?\s(\d+\.\d+(?:\.\d+)?)\s", text)
    return match.group(1) if match else None


def _driver_version() -> str | None:
    """The NVIDIA driver: /proc/driver/nvidia/version, else ``nvidia-smi``'s answer."""
    version = nvidia_driver_version(_read(NVIDIA_DRIVER) or "")
    if version is not None:
        return version
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return out.splitlines()[0].strip() if out.strip() else None


def gpu_facts() -> list[dict[str, Any]]:
    """Each visible CUDA device: name, memory, compute capability, SMs and the driver."""
    import torch

    if not torch.cuda.is_available():
        return []
    driver = _driver_version()
    gpus = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        gpus.append(
            {
                "index": index,
                "name": props.name,
                "memory_bytes": int(props.total_memory),
                "compute_capability": f"{props.major}.{props.minor}",
                "sm_count": int(getattr(props, "multi_processor_count", 0)) or None,
                "driver": driver,
            }
        )
    return gpus


def _sve_vector_bits() -> int | None:
    text = _read(SVE_VECTOR_LENGTH)
    return int(text.strip()) * 8 if text and text.strip().isdigit() else None


def cpu_mhz(cpu_root: Path = SYS_CPU, cpuinfo_text: str | None = None) -> float | None:
    """The CPU's clock in MHz: cpufreq's ``cpuinfo_max_freq`` (kHz), else /proc/cpuinfo's
    ``cpu MHz`` (the current clock; virtual machines without cpufreq show the nominal one)."""
    khz = _read(cpu_root / "cpu0" / "cpufreq" / "cpuinfo_max_freq")
    if khz and khz.strip().isdigit():
        return int(khz.strip()) / 1000.0
    text = cpuinfo_text if cpuinfo_text is not None else _read(CPUINFO) or ""
    value = cpuinfo_field(text, "cpu MHz")
    try:
        return float(value) if value else None
    except ValueError:
        return None


def hardware_facts() -> dict[str, Any]:
    logical = psutil.cpu_count(logical=True)
    physical = psutil.cpu_count(logical=False)
    threads_per_core = logical // physical if logical and physical else None
    return {
        "hostname": socket.gethostname(),
        "machine": platform.machine(),
        "cpu_model": cpu_model(),
        "isa_flags": isa_flags(_read(CPUINFO) or ""),
        "cpu_mhz": cpu_mhz(),
        "sve_vector_bits": _sve_vector_bits(),
        "sockets": count_sockets(),
        "logical_cores": logical,
        "physical_cores": physical,
        "threads_per_core": threads_per_core,
        "hyperthreading": None if threads_per_core is None else threads_per_core > 1,
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_bytes": psutil.virtual_memory().total,
        "numa_nodes": numa_nodes(),
        "gpus": gpu_facts(),
    }


def thread_facts() -> dict[str, Any]:
    return {name: os.environ[name] for name in THREAD_VARIABLES if name in os.environ}


def collect_environment() -> dict[str, dict[str, Any]]:
    """The three fact dicts, as ``scalescope env`` shows them and run.json records them."""
    return {
        "software": software_facts(),
        "hardware": hardware_facts(),
        "threads": thread_facts(),
    }
