"""Start N local ranks through torch's elastic launcher, each running the probe bootstrap."""

from __future__ import annotations

import dataclasses
import os
import sys
import uuid
from dataclasses import dataclass

from torch.distributed.elastic.multiprocessing.api import SignalException
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.launcher.api import LaunchConfig, elastic_launch


@dataclass(frozen=True, kw_only=True)
class LaunchOptions:
    """How to start the ranks on this node."""

    nproc_per_node: int = 1
    """Ranks on this node (torchrun's --nproc-per-node)."""
    master_addr: str = "127.0.0.1"
    master_port: int | None = None
    """Port of the rendezvous; None picks a free one."""
    run_id: str = ""
    monitor_interval_s: float = 0.1

    def __post_init__(self) -> None:
        if self.nproc_per_node < 1:
            raise ValueError(f"--nproc-per-node must be at least 1, got {self.nproc_per_node}")
        if self.master_port is not None and not 0 < self.master_port < 65536:
            raise ValueError(f"--master-port must be in 1..65535, got {self.master_port}")


@dataclass(frozen=True)
class LaunchResult:
    status: str
    """completed, failed or interrupted."""
    exit_codes: dict[int, int]
    """Non-zero exit codes by global rank, as the launcher saw them (negative: killed by signal)."""
    signal: int | None = None


def default_threads(nproc_per_node: int) -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, (cores or 1) // nproc_per_node)


def launch_config(options: LaunchOptions) -> LaunchConfig:
    if options.master_port is None:
        rdzv = {"rdzv_backend": "c10d", "rdzv_endpoint": f"{options.master_addr}:0"}
    else:
        rdzv = {
            "rdzv_backend": "static",
            "rdzv_endpoint": f"{options.master_addr}:{options.master_port}",
            "rdzv_configs": {"rank": 0},
        }
    values = dict(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=options.nproc_per_node,
        run_id=options.run_id or uuid.uuid4().hex[:12],
        max_restarts=0,
        monitor_interval=options.monitor_interval_s,
        local_addr=options.master_addr,
        **rdzv,
    )
    known = {f.name for f in dataclasses.fields(LaunchConfig)}
    return LaunchConfig(**{k: v for k, v in values.items() if k in known})


def launch(options: LaunchOptions, rank_argv: list[str]) -> LaunchResult:
    """Run ``python -u RANK_ARGV`` in every rank; return how the ranks ended."""
    config = launch_config(options)
    try:
        elastic_launch(config, sys.executable)("-u", *rank_argv)
    except ChildFailedError as exc:
        codes = {rank: failure.exitcode for rank, failure in exc.failures.items()}
        return LaunchResult("failed", codes)
    except SignalException as exc:
        return LaunchResult("interrupted", {}, int(exc.sigval))
    return LaunchResult("completed", {})
