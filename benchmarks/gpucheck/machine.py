"""What this machine can run, and the reason a check is skipped when it cannot."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any

CORES_NEEDED = 16


@dataclass(frozen=True)
class Machine:
    cuda: bool
    gpu: str | None
    gpus: int
    cores: int
    """CPUs this process may use (its affinity mask)."""
    torch: str
    nccl: bool

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def detect() -> Machine:
    import torch
    import torch.distributed as dist

    cuda = torch.cuda.is_available()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return Machine(
        cuda=cuda,
        gpu=torch.cuda.get_device_name(0) if cuda else None,
        gpus=torch.cuda.device_count() if cuda else 0,
        cores=cores or 1,
        torch=str(torch.__version__),
        nccl=bool(dist.is_available() and dist.is_nccl_available()),
    )


def no_cuda(m: Machine) -> str | None:
    """Why a GPU check cannot run here, or None."""
    if not m.cuda:
        return f"no CUDA device: torch {m.torch}, torch.cuda.is_available() is False"
    return None


def no_nccl(m: Machine) -> str | None:
    return no_cuda(m) or (None if m.nccl else f"torch {m.torch} has no NCCL backend")


def few_cores(m: Machine, needed: int = CORES_NEEDED) -> str | None:
    if m.cores < needed:
        return f"{m.cores} usable cores, needs {needed}"
    return None
