"""Software and hardware facts recorded in every run.json (``scalescope env`` extends these)."""

from __future__ import annotations

import os
import platform
import socket
from pathlib import Path
from typing import Any

import psutil
import torch
import torch.distributed as dist

THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OMP_PROC_BIND",
    "OMP_PLACES",
    "KMP_AFFINITY",
    "GOMP_CPU_AFFINITY",
    "LD_PRELOAD",
)


def software_facts() -> dict[str, Any]:
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
        "backends": {
            "gloo": dist.is_gloo_available(),
            "nccl": dist.is_nccl_available(),
            "mpi": dist.is_mpi_available(),
        },
    }


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "Model Name")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def hardware_facts() -> dict[str, Any]:
    facts: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "machine": platform.machine(),
        "cpu_model": cpu_model(),
        "logical_cores": psutil.cpu_count(logical=True),
        "physical_cores": psutil.cpu_count(logical=False),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_bytes": psutil.virtual_memory().total,
    }
    if torch.cuda.is_available():
        facts["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return facts


def thread_facts() -> dict[str, Any]:
    return {name: os.environ[name] for name in THREAD_VARIABLES if name in os.environ}
