"""Start N local ranks through torch's elastic launcher, each running the probe bootstrap.

torch is imported only to launch: the options and their checks are torch-free, so a command
refused for a bad option answers in half a second instead of the ~2 s torch takes to import.
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import psutil

from scalescope.launch.options.groups import Rendezvous

if TYPE_CHECKING:
    from torch.distributed.elastic.multiprocessing.api import DefaultLogsSpecs
    from torch.distributed.launcher.api import LaunchConfig


@dataclass(frozen=True, kw_only=True)
class OutputOptions:
    """Where the ranks' stdout and stderr go; torch's ``DefaultLogsSpecs`` does the work."""

    label: bool = False
    """Prefix each line with ``[rank N]`` (whole lines: torch tails the ranks' log files)."""
    ranks: tuple[int, ...] | None = None
    """Global ranks whose output reaches the terminal (None: all); every rank's is kept."""
    quiet: bool = False
    """No rank writes to the terminal (``--live`` draws there); all is kept."""
    log_dir: str | None = None
    """Where the ranks' output files go (set by the runner: RUN_DIR/logs)."""

    @property
    def to_files(self) -> bool:
        return self.label or self.ranks is not None or self.quiet


@dataclass(frozen=True, kw_only=True)
class LaunchOptions(Rendezvous):
    """How to start the ranks on this node: the rendezvous options and what the launcher adds."""

    nproc_per_node: int = 1
    """Ranks on this node (torchrun's --nproc-per-node)."""
    monitor_interval_s: float = 0.1
    output: OutputOptions = field(default_factory=OutputOptions)

    def __post_init__(self) -> None:
        if self.nproc_per_node < 1:
            raise ValueError(f"--nproc-per-node must be at least 1, got {self.nproc_per_node}")
        super().__post_init__()

    @property
    def world_size(self) -> int:
        return self.nnodes * self.nproc_per_node


def logs_specs(output: OutputOptions, node_rank: int, nproc: int) -> DefaultLogsSpecs | None:
    """Every rank's output into files under ``log_dir``, the chosen ones also to the terminal
    (torch's tee with ``local_ranks_filter``); None keeps the ranks on the terminal directly."""
    from torch.distributed.elastic.multiprocessing.api import DefaultLogsSpecs, Std

    if not output.to_files or output.log_dir is None:
        return None
    first = node_rank * nproc
    local = None if output.ranks is None else {r - first for r in output.ranks}
    if output.quiet or (local is not None and not local & set(range(nproc))):
        return DefaultLogsSpecs(log_dir=output.log_dir, redirects=Std.ALL)
    return DefaultLogsSpecs(
        log_dir=output.log_dir, redirects=Std.ALL, tee=Std.ALL, local_ranks_filter=local
    )


@dataclass(frozen=True)
class LaunchResult:
    status: str
    """completed, failed or interrupted."""
    exit_codes: dict[int, int]
    """Non-zero exit codes by global rank, as the launcher saw them (negative: killed by signal)."""
    signal: int | None = None


def rendezvous(options: LaunchOptions) -> dict[str, object]:
    """torchrun's choices: one node on a free port (c10d), or static at a fixed port."""
    if options.rdzv_endpoint:
        endpoint = options.rdzv_endpoint
        if ":" not in endpoint:
            endpoint = f"{endpoint}:29400"
        rdzv: dict[str, object] = {"rdzv_backend": options.rdzv_backend, "rdzv_endpoint": endpoint}
    elif options.master_port is None:
        rdzv = {"rdzv_backend": "c10d", "rdzv_endpoint": f"{options.address}:0"}
    else:
        endpoint = f"{options.address}:{options.master_port}"
        rdzv = {"rdzv_backend": "static", "rdzv_endpoint": endpoint}
    if rdzv["rdzv_backend"] == "static":
        rdzv["rdzv_configs"] = {"rank": options.node_rank}
    elif options.rdzv_endpoint and options.node_rank == 0 and is_local_address(endpoint):
        rdzv["rdzv_configs"] = {"is_host": True}
    return rdzv


def is_local_address(endpoint: str) -> bool:
    """True when HOST of HOST:PORT is an address of one of this machine's interfaces.

    torch's c10d rendezvous hosts its store only where the endpoint matches the hostname;
    an endpoint given as an interface's IP (a second network, a namespace) must say so.
    """
    host = endpoint.rsplit(":", 1)[0].strip("[]")
    try:
        wanted = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    local = {a.address for addrs in psutil.net_if_addrs().values() for a in addrs}
    return bool(wanted & local)


SHUTDOWN_S = 5
"""Seconds torch's agent gives the ranks between SIGTERM and SIGKILL (its default: 30); a
rank blocked in C++ has its watch thread flush and end it after 3 s (probe/live.py)."""


def launch_config(options: LaunchOptions) -> LaunchConfig:
    from torch.distributed.launcher.api import LaunchConfig

    values = dict(
        min_nodes=options.nnodes,
        max_nodes=options.nnodes,
        nproc_per_node=options.nproc_per_node,
        run_id=options.rdzv_id or ("none" if options.nnodes > 1 else uuid.uuid4().hex[:12]),
        max_restarts=0,
        monitor_interval=options.monitor_interval_s,
        local_addr=options.local_addr or options.address,
        shutdown_timeout=SHUTDOWN_S,
        **rendezvous(options),
    )
    specs = logs_specs(options.output, options.node_rank, options.nproc_per_node)
    if specs is not None:
        values["logs_specs"] = specs
    if options.output.label:
        values["log_line_prefix_template"] = "[rank ${rank}] "
    known = {f.name for f in dataclasses.fields(LaunchConfig)}
    return LaunchConfig(**{k: v for k, v in values.items() if k in known})


@contextlib.contextmanager
def rendezvous_kept() -> Iterator[list[Any]]:
    """The rendezvous handlers torch's launcher makes, kept until the block ends.

    On the node whose launcher hosts the rendezvous store (node 0), the store lives in its
    handler, which ``launch`` drops as it returns: the relays' and the watch's next request
    (this node's, or another node's still ending) then met a closed store, and torch printed
    its C++ trace (``sendBytes failed ... Broken pipe``) in the job's output. Kept, the store
    lives until the launcher closed its channel politely (launch/channel/closing.py).
    """
    import torch.distributed.elastic.rendezvous.registry as registry

    made = registry.get_rendezvous_handler
    kept: list[Any] = []

    def keeping(params: Any) -> Any:
        kept.append(made(params))
        return kept[-1]

    registry.get_rendezvous_handler = keeping
    try:
        yield kept
    finally:
        registry.get_rendezvous_handler = made
        kept.clear()


def launch(options: LaunchOptions, rank_argv: list[str]) -> LaunchResult:
    """Run ``python -u RANK_ARGV`` in every rank; return how the ranks ended."""
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import elastic_launch

    config = launch_config(options)
    try:
        elastic_launch(config, sys.executable)("-u", *rank_argv)
    except ChildFailedError as exc:
        codes = {rank: failure.exitcode for rank, failure in exc.failures.items()}
        return LaunchResult("failed", codes)
    except SignalException as exc:
        return LaunchResult("interrupted", {}, int(exc.sigval))
    return LaunchResult("completed", {})
