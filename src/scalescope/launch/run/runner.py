"""A profiled run from start to end: run directory, run.json, launch, final status."""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import sys
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from scalescope.events.files import LOGS_DIR, RUN_FILE, meta_file_name, rank_meta_path
from scalescope.events.flight_ring import DEFAULT_ROWS
from scalescope.events.node_live import merge_manifest
from scalescope.events.run import (
    RunMeta,
    read_rank_meta,
    status_of_ranks,
    write_json_atomic,
)
from scalescope.launch.channel.closing import close_store
from scalescope.launch.channel.reach import split_address
from scalescope.launch.channel.relay import Relay, node_ranks
from scalescope.launch.channel.seals import load_key, new_job_id
from scalescope.launch.channel.store import STORE_OPTION, Channel
from scalescope.launch.machine.facts import hardware_facts, software_facts, thread_facts
from scalescope.launch.placement.plan import MappingOptions, RankPlan, make_plan
from scalescope.launch.process.local import (
    LaunchOptions,
    LaunchResult,
    launch,
    rendezvous_kept,
)
from scalescope.launch.run.node_files import NodeFilesThread, window_steps
from scalescope.launch.watch.hang import (
    LAUNCHER_GRACE_S,
    NODE_DEFER_S,
    HangOptions,
    HangWatch,
    metrics_endpoint,
)
from scalescope.launch.watch.sources import FileSource, StoreSource
from scalescope.probe import native
from scalescope.probe.binding import PLACEMENTS_ENV
from scalescope.probe.windows import DEFAULT_LEVEL

HANG_KILLED = "stopped by scalescope after a hang (--hang-action kill)"
WATCH_END_S = 5.0
"""How long node 0's launcher waits for its hang watch's last read of the store before
closing it."""


@dataclass(frozen=True, kw_only=True)
class RunSpec:
    """What to run and how to record it."""

    target: str
    """A script path, or a module name when ``is_module``."""
    is_module: bool = False
    args: list[str] = field(default_factory=list)
    launch: LaunchOptions = field(default_factory=LaunchOptions)
    mapping: MappingOptions = field(default_factory=MappingOptions)
    report_bindings: bool = False
    run_dir: Path | None = None
    probe: bool = True
    ring_rows: int = DEFAULT_ROWS
    """Rows of each rank's flight recorder (0: none)."""
    record: str = DEFAULT_LEVEL
    """full or summary (probe/windows.py): what each rank writes."""
    warmup_steps: int = 1
    workload: str = "script"
    options: dict[str, Any] = field(default_factory=dict)
    command: list[str] = field(default_factory=list)
    launcher: str = ""
    """Who started this launcher, when not the user (e.g. slurm+elastic: one task per node)."""
    hang: HangOptions = field(default_factory=HangOptions)
    node_files: bool = True
    """Each node's relay writes its node files as the ranks pass each window (node_files.py)."""

    def __post_init__(self) -> None:
        if self.is_module:
            if importlib.util.find_spec(self.target) is None:
                raise ValueError(f"no module named {self.target!r}")
        elif not Path(self.target).is_file():
            raise ValueError(f"script not found: {self.target}")
        if self.warmup_steps < 0:
            raise ValueError(f"--warmup-steps must be >= 0, got {self.warmup_steps}")


@dataclass(frozen=True)
class RunOutcome:
    run_dir: Path
    meta: RunMeta
    exit_code: int


def check_new_run_dir(run_dir: Path, meta_file: str = RUN_FILE) -> None:
    """Refuse to overwrite a recorded run (this node's meta file in a shared directory)."""
    if (Path(run_dir) / meta_file).exists():
        raise ValueError(f"run directory {run_dir} already holds a run; choose another --run-dir")


def default_run_dir(spec: RunSpec) -> Path:
    stem = spec.workload if spec.workload != "script" else Path(spec.target).stem
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path("scalescope_runs") / f"{stem}-{stamp}-{uuid.uuid4().hex[:4]}"


def rank_argv(spec: RunSpec, run_dir: Path) -> list[str]:
    argv = ["-m", "scalescope.probe.bootstrap", "--run-dir", str(run_dir.resolve())]
    if not spec.probe:
        argv.append("--no-probe")
    if spec.report_bindings:
        argv.append("--report-bindings")
    if spec.probe and spec.ring_rows != DEFAULT_ROWS:
        argv += ["--ring-rows", str(spec.ring_rows)]
    if spec.probe:
        argv += ["--record", spec.record, "--warmup-steps", str(spec.warmup_steps)]
    if spec.is_module:
        argv.append("-m")
    return [*argv, "--", spec.target, *spec.args]


def start_meta(spec: RunSpec, run_dir: Path, plan: RankPlan) -> RunMeta:
    n = spec.launch.nproc_per_node
    return RunMeta(
        run_id=run_dir.name,
        command=spec.command,
        script=spec.target,
        script_args=list(spec.args),
        workload=spec.workload,
        options=spec.options,
        world_size=spec.launch.world_size,
        nproc_per_node=n,
        nnodes=spec.launch.nnodes,
        launcher=spec.launcher or ("local" if spec.launch.nnodes == 1 else "elastic"),
        placements=plan.as_json(),
        warmup_steps=spec.warmup_steps,
        probe=spec.probe,
        record=spec.record if spec.probe else None,
        software=software_facts(),
        hardware=hardware_facts(),
        threads=thread_facts() | {k: v for k, v in plan.env.items() if k != PLACEMENTS_ENV},
        start_time=time.time(),
    )


def finish_meta(
    meta: RunMeta, run_dir: Path, result: LaunchResult, hang_killed: bool = False
) -> None:
    """Merge what each rank wrote with what the launcher saw.

    The launcher's exit code wins where the rank recorded no end of its own (still running,
    or completed but then exited non-zero). A rank that recorded its own failure or
    interruption keeps its code and error: the launcher then saw the SIGTERM it sent while
    closing the job, which is a consequence, not the cause (rank 1 raises, rank 0 fails on
    the closed connection first, and the launcher stops rank 1 while it still writes).
    """
    meta.end_time = time.time()
    meta.status = result.status
    hosts = []
    for rank in range(meta.world_size):
        rank_meta = read_rank_meta(run_dir, rank)
        code = result.exit_codes.get(rank)
        if rank_meta is None:
            continue
        if code is not None and rank_meta.status in ("running", "completed"):
            rank_meta.exit_code = code
            rank_meta.status = "killed" if code < 0 else "failed"
            rank_meta.error = rank_meta.error or f"exit code {code}"
        elif result.status == "interrupted" and rank_meta.status == "running":
            rank_meta.status = "interrupted"
        elif (
            result.status == "interrupted"
            and rank_meta.status == "failed"
            and "DataLoader worker" in (rank_meta.error or "")
        ):
            rank_meta.status = "interrupted"  # the user's signal reached a worker first
            rank_meta.error = f"stopped by signal {result.signal}; {rank_meta.error}"
        if hang_killed and rank_meta.status != "completed":
            rank_meta.error = f"{HANG_KILLED}; {rank_meta.error or 'no error recorded'}"
            write_json_atomic(rank_meta_path(run_dir, rank), rank_meta)
        meta.ranks[str(rank)] = rank_meta
        hosts.append(rank_meta.hostname)
    meta.hostnames = sorted(set(hosts))
    if meta.status == "completed":
        meta.status = status_of_ranks(meta.ranks.values())


def execute(spec: RunSpec) -> RunOutcome:
    key = load_key() if spec.probe and uses_store(spec.launch) else b""
    plan = make_plan(spec.mapping, spec.launch.nproc_per_node)
    run_dir = Path(spec.run_dir or default_run_dir(spec))
    meta_file = meta_file_name(spec.launch.node_rank)
    steps = window_steps()
    check_new_run_dir(run_dir, meta_file)
    options = with_log_dir(spec.launch, run_dir)
    meta = start_meta(spec, run_dir, plan)
    endpoint = None
    if spec.probe and spec.launch.node_rank == 0:
        endpoint = metrics_endpoint(
            spec.hang, meta.run_id, None, run_dir, spec.launch.world_size, meta.hardware
        )
    if spec.launch.nnodes > 1 and spec.launch.rdzv_endpoint:
        host, port = split_address(spec.launch.rdzv_endpoint)
        meta.options = {**meta.options, STORE_OPTION: f"{host}:{port}"}
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(run_dir / meta_file, meta)
    except OSError as exc:
        raise ValueError(f"cannot write the run directory {run_dir}: {exc.strerror}") from None
    os.environ.update(plan.env)
    if spec.probe:
        build_native_hooks()
    relay = node_relay(spec.launch, run_dir, key) if key else None
    files = node_files(spec.launch, run_dir, steps) if spec.probe and spec.node_files else None
    defer = NODE_DEFER_S if relay is not None and spec.launch.node_rank != 0 else 0.0
    source = store_source(spec.launch, relay)
    watch = HangWatch(run_dir, spec.launch.world_size, spec.hang, source, defer, endpoint)
    watch.on_stuck = lambda: end_stuck_launch(meta, run_dir, meta_file)
    if spec.probe:
        watch.start()
    with rendezvous_kept():
        try:
            result = launch(options, rank_argv(spec, run_dir))
        finally:
            if files is not None:
                files.finish()
            end_watching(watch, relay, spec.launch)
            if files is not None and spec.launch.node_rank == 0 and spec.launch.nnodes > 1:
                merge_manifest(
                    run_dir
                )  # the other nodes' last parts arrived before the store closed
    if watch.killed and result.status == "completed":  # the ranks' SIGTERM exits can read as done
        result = LaunchResult("failed", result.exit_codes)
    finish_meta(meta, run_dir, result, hang_killed=watch.killed)
    try:
        write_json_atomic(run_dir / meta_file, meta)
    except OSError as exc:
        raise RunEndNotWritten(
            f"the run ended ({meta.status}) but {run_dir / meta_file} could not be updated: "
            f"{exc.strerror}; what the ranks recorded is kept (scalescope report {run_dir})"
        ) from None
    return RunOutcome(run_dir, meta, exit_code_of(result))


def end_watching(watch: HangWatch, relay: Relay | None, options: LaunchOptions) -> None:
    """The ranks ended: the watch's last figures and the relay's last words, then, on node 0,
    whose launcher hosts the rendezvous store (kept alive by ``rendezvous_kept``), the other
    nodes' relays' last words before the store closes (channel.closing.close_store)."""
    watch.done.set()
    if relay is not None:
        relay.finish()
    if watch.metrics is not None:
        watch.metrics_final()
        watch.metrics.close()
    if relay is None or options.node_rank != 0:
        return
    channel = relay.channel
    if channel is not None and channel.connected and not relay.closed:
        if watch.ident is not None:
            watch.join(timeout=WATCH_END_S)
        close_store(channel, options.world_size)


def build_native_hooks() -> None:
    """The probe's C++ side, built on the first profiled run with this torch; a machine
    that cannot build it says so once and records through the Python hooks (on a torch
    without hooks, the ``dist.*`` wrappers)."""
    native.ensure_built(say=lambda text: print(f"scalescope: {text}", file=sys.stderr))


def uses_store(options: LaunchOptions) -> bool:
    """Several nodes: the live states travel through the rendezvous store, sealed with the
    user's key (launch/channel/seals.py); on one node the files do, and no key is needed."""
    return options.nnodes > 1 and bool(options.rdzv_endpoint)


def node_relay(options: LaunchOptions, run_dir: Path, key: bytes) -> Relay:
    """This node's ranks' live states to the rendezvous store, where node 0's watch reads
    every rank's (launch/channel/store.py); node 0's relay publishes the job's id there."""
    host, port = split_address(options.rdzv_endpoint or "")
    ranks = functools.partial(node_ranks, run_dir)
    job = new_job_id() if options.node_rank == 0 else b""
    relay = Relay(host, port, run_dir, ranks, options.world_size, key=key, job=job)
    relay.start()
    return relay


def node_files(options: LaunchOptions, run_dir: Path, steps: int) -> NodeFilesThread:
    """This node's node files, written as its ranks pass each window (run/node_files.py):
    on one node every rank is this node's; on several, those whose process descends from
    this launcher."""
    if options.nnodes == 1:
        ranks = functools.partial(list, range(options.world_size))
    else:
        ranks = functools.partial(lambda d: sorted(node_ranks(d)), run_dir)
    thread = NodeFilesThread(
        run_dir, options.node_rank, ranks, options.nproc_per_node, options.world_size, steps
    )
    thread.start()
    return thread


def store_source(options: LaunchOptions, relay: Relay | None) -> StoreSource | None:
    """Node 0 watches every rank through the store; the other nodes watch what their files
    show (their own ranks at least), so each can still stop its ranks when cut off."""
    if relay is None or options.node_rank != 0:
        return None
    files = FileSource(relay.run_dir, options.world_size)
    channel = Channel(addr=relay.addr, port=relay.port, key=relay.key, job=relay.job)
    return StoreSource(channel, options.world_size, files)


def end_stuck_launch(meta: RunMeta, run_dir: Path, meta_file: str) -> None:
    """The hung ranks were killed but torch's agent does not return (it waits on a peer
    node that cannot be reached): record the end from the hang watch's thread and exit."""
    finish_meta(meta, run_dir, LaunchResult("failed", {}), hang_killed=True)
    for rank_meta in meta.ranks.values():
        if rank_meta.status == "running":  # killed before it could write its end
            rank_meta.status, rank_meta.error = "killed", HANG_KILLED
    with contextlib.suppress(OSError):
        write_json_atomic(run_dir / meta_file, meta)
    print(
        f"scalescope: the launcher did not return {LAUNCHER_GRACE_S:.0f} s after the hung ranks "
        f"were stopped (a node that cannot be reached?); ending it. run failed: {run_dir}",
        file=sys.stderr,
        flush=True,
    )
    os._exit(1)


class RunEndNotWritten(ValueError):
    """The ranks ran, but the run's final status could not be written (disk full)."""


def with_log_dir(options: LaunchOptions, run_dir: Path) -> LaunchOptions:
    """Ranks' output files, when kept, go to RUN_DIR/logs (torch's layout below it)."""
    output = options.output
    if not output.to_files:
        return options
    if output.ranks is not None and max(output.ranks) >= options.world_size:
        raise ValueError(
            f"--ranks-output {max(output.ranks)}: the run has ranks 0..{options.world_size - 1}"
        )
    return replace(options, output=replace(output, log_dir=str(run_dir.resolve() / LOGS_DIR)))


def exit_code_of(result: LaunchResult) -> int:
    if result.status == "interrupted":
        return 128 + (result.signal or 15)
    return 0 if result.status == "completed" else 1
