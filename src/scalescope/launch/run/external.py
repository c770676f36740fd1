"""One rank of a world an external launcher started (srun, mpirun, mpiexec, torchrun).

The launcher already started one process per rank; scalescope joins that world instead of
starting a second launcher: it sets the variables torch's ``env://`` rendezvous reads, binds
the rank to its share of the node (unless the launcher already bound it), and runs the probe
bootstrap in a child process, so OpenMP and an allocator preload see their variables from
the start. Rank 0 writes run.json; every rank writes its own rank file.

Beside its rank, the task of each node's local rank 0 relays the node's ranks' live states to
the job's store (launch/run/node_relay.py: one poller per node; the other tasks stand by), and
task 0's watches the whole world there for hangs (launch/channel/store.py, launch/watch/hang.py).
Task 0's hosts that store (rendezvous.meet) and, once its rank ended, keeps it until every
relay said how its rank ended (channel.closing.close_store): no relay's request meets a closed
store, which would print torch's C++ trace in the job's output.
A SIGTERM or SIGINT (mpirun, srun, a scheduler) is passed to the rank; a rank still alive
``STOP_GRACE_S`` later (blocked in C++, where its Python handler never runs) is asked to
flush its events, then killed and recorded as interrupted.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from scalescope.events.files import RUN_FILE, rank_meta_path
from scalescope.events.live_state import read_live_state, request_flush
from scalescope.events.node_live import merge_manifest
from scalescope.events.run import RunMeta, read_rank_meta, write_json_atomic
from scalescope.launch.channel.closing import ENDS_WAIT_S, close_store
from scalescope.launch.channel.relay import Relay
from scalescope.launch.channel.seals import load_key, new_job_id
from scalescope.launch.channel.store import STORE_OPTION, Channel
from scalescope.launch.machine.topology import Topology, parse_cpulist, read_topology
from scalescope.launch.placement.plan import MappingOptions, RankPlan, make_plan
from scalescope.launch.process.stopping import kill_family
from scalescope.launch.run.node_files import NodeFilesThread, start_node_files, window_steps
from scalescope.launch.run.node_relay import NODE_ENV, NodeRelay, node_token
from scalescope.launch.run.runner import RunSpec, check_new_run_dir, rank_argv, start_meta
from scalescope.launch.watch.hang import HangWatch, metrics_endpoint
from scalescope.launch.watch.sources import FileSource, StoreSource
from scalescope.launch.world.rendezvous import meet
from scalescope.launch.world.variables import World


def run_dir_for(spec: RunSpec, world: World) -> Path:
    if spec.run_dir is not None:
        return Path(spec.run_dir)
    if not world.job_id:
        raise ValueError(
            f"the {world.source} launcher gives no job id to name a shared run directory: "
            "pass --run-dir DIR (a directory every rank can reach)"
        )
    stem = spec.workload if spec.workload != "script" else Path(spec.target).stem
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in world.job_id)
    return Path("scalescope_runs") / f"{stem}-{world.source}-{safe}"


def launcher_bound(topology: Topology) -> bool:
    """True when the launcher already restricted this process to part of the node.

    A task's affinity narrower than the node's online cpus means srun's --cpu-bind or
    mpirun's --bind-to chose its cpus; that choice is kept rather than replaced.
    """
    online = Path("/sys/devices/system/cpu/online")
    total = os.cpu_count() or len(topology.cpu_ids)
    if online.exists():
        total = len(parse_cpulist(online.read_text()))
    return len(topology.cpu_ids) < total


def rank_plan(mapping: MappingOptions, world: World) -> RankPlan:
    """The node's plan for ``local_world_size`` ranks, or this rank's own cpus if bound."""
    topology = read_topology()
    if mapping.bind and launcher_bound(topology):
        return make_plan(replace(mapping, map_by="node"), 1, topology=topology)
    return make_plan(mapping, world.local_world_size, topology=topology)


def child_env(world: World, plan: RankPlan) -> dict[str, str]:
    """The rank's variables, and the token that tells its node's relay it is one of its own."""
    return {**os.environ, **world.torch_env(), **plan.env, NODE_ENV: node_token(world)}


STOP_GRACE_S = 5.0
"""After a stop signal, how long the rank gets to end by its own handler."""
FLUSH_WAIT_S = 2.0
WATCH_END_S = 5.0
"""How long task 0 waits for its hang watch's last read of the store before closing it."""


@dataclass
class Task:
    """This task's rank process and what watches it."""

    run_dir: Path
    rank: int
    child: subprocess.Popen | None = None
    node: NodeRelay | None = None
    """This task's part in relaying its node: the relay (local rank 0) or a standby."""
    stopped_by: int | None = None
    key: bytes = b""
    """The user's key, sealing what travels through the job's store (launch/channel/seals.py)."""
    hardware: dict = field(default_factory=dict)
    """Task 0's node's facts (its GPUs label the metrics' ranks)."""


def run_child(argv: list[str], env: dict[str, str], task: Task, world: World, spec: RunSpec) -> int:
    """Run the bootstrap with its relay (and, on task 0, the world's hang watch); pass
    SIGTERM/SIGINT on, and end a rank that does not end by itself."""
    child = task.child = subprocess.Popen([sys.executable, "-u", *argv], env=env, process_group=0)

    def forward(signum: int, _frame: object) -> None:
        if task.stopped_by is None:
            task.stopped_by = signum
            threading.Thread(target=end_stopped_rank, args=(task,), daemon=True).start()
        with contextlib.suppress(OSError):
            child.send_signal(signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, forward)
    watch = start_watch(task, world, spec) if spec.probe else None
    code = child.wait()
    end_watching(task, world, watch)
    return 128 - code if code < 0 else code


def end_watching(task: Task, world: World, watch: HangWatch | None) -> None:
    """The rank ended: the watch's last figures, the node relay's last words once its node's
    ranks ended and, on the task that hosts the store (task 0 under rendezvous.meet), the
    other relays' last words before the store closes with this process
    (channel.closing.close_store)."""
    if watch is not None:
        watch.done.set()
        if watch.metrics is not None:
            watch.metrics_final()
            watch.metrics.close()
    began = time.monotonic()
    relay = task.node.end() if task.node is not None else None
    if relay is None:
        return
    channel = relay.channel
    if world.rank == 0 and world.agent_store and channel is not None and channel.connected:
        if watch is not None:
            watch.join(timeout=WATCH_END_S)
        left = ENDS_WAIT_S - (time.monotonic() - began)  # the wait for the node's ranks counts
        close_store(channel, world.world_size, wait_s=max(left, 0.5))
        merge_manifest(task.run_dir)  # every node's last part came before the close


def start_watch(task: Task, world: World, spec: RunSpec) -> HangWatch | None:
    """This task's part in relaying its node; on task 0 also the hang watch over the store,
    and the job's id its relay publishes there (launch/channel/store.py)."""
    addr, port = world.master_addr, world.master_port
    if addr is None or port is None or task.child is None:
        return None
    job = new_job_id() if world.rank == 0 else b""

    def make(ranks: Callable[[], dict[int, int]]) -> Relay:
        return Relay(addr, port, task.run_dir, ranks, world.world_size, key=task.key, job=job)

    own = {task.rank: task.child.pid}
    files = node_files_maker(task.run_dir, world) if spec.node_files else None
    task.node = NodeRelay(task.run_dir, node_token(world), world.local_world_size, make, own, files)
    task.node.start(world.local_rank)
    if world.rank != 0:
        return None
    channel = Channel(addr=world.master_addr, port=world.master_port, key=task.key, job=job)
    files = FileSource(task.run_dir, world.world_size)
    source = StoreSource(channel, world.world_size, files)
    try:
        endpoint = metrics_endpoint(
            spec.hang, task.run_dir.name, source.host, task.run_dir, world.world_size,
            task.hardware,
        )  # fmt: skip
    except ValueError as exc:  # the rank runs already: the run goes on without metrics
        print(f"scalescope: {exc}", file=sys.stderr)
        endpoint = None
    watch = HangWatch(task.run_dir, world.world_size, spec.hang, source, metrics=endpoint)
    watch.start()
    return watch


def node_files_maker(
    run_dir: Path, world: World
) -> Callable[[Callable[[], list[int]]], NodeFilesThread]:
    """What starts this node's files in the task that relays it: the node's index is the
    launcher's, or the node's first rank over the ranks per node."""
    node = world.node_rank
    if node < 0:
        node = (world.rank - world.local_rank) // max(world.local_world_size, 1)

    def make(ranks: Callable[[], list[int]]) -> NodeFilesThread:
        return start_node_files(run_dir, node, ranks, world.local_world_size, world.world_size)

    return make


def end_stopped_rank(task: Task) -> None:
    """A rank still alive STOP_GRACE_S after its stop signal is blocked in C++: its watch
    thread writes its events, then it is killed and recorded as interrupted."""
    child = task.child
    if child is None or _ended_within(child, STOP_GRACE_S):
        return
    state = read_live_state(task.run_dir, task.rank)
    if state is not None and request_flush(task.run_dir, task.rank):
        deadline = time.monotonic() + FLUSH_WAIT_S
        while time.monotonic() < deadline:
            now = read_live_state(task.run_dir, task.rank)
            if now is None or now.flushes_answered > state.flush_requests:
                break
            time.sleep(0.05)
    kill_family(child.pid)
    meta = read_rank_meta(task.run_dir, task.rank)
    if meta is not None and meta.status == "running":  # its watch thread did not record it
        signum = task.stopped_by or signal.SIGTERM
        meta.status, meta.exit_code, meta.end_time = "interrupted", 128 + signum, time.time()
        meta.error = (
            f"stopped by {signal.Signals(signum).name}: blocked in C++ (a collective?), "
            f"killed {STOP_GRACE_S:.0f} s later"
        )
        with contextlib.suppress(OSError):
            write_json_atomic(rank_meta_path(task.run_dir, task.rank), meta)


def _ended_within(child: subprocess.Popen, seconds: float) -> bool:
    try:
        child.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return False
    return True


def execute_rank(spec: RunSpec, world: World) -> tuple[Path, int]:
    key = load_key() if spec.probe else b""  # a bad key file: said before any rank starts
    window_steps()  # a bad window too
    with meet(world) as met:
        return _execute_met(spec, met, key)


def _execute_met(spec: RunSpec, world: World, key: bytes) -> tuple[Path, int]:
    run_dir = run_dir_for(spec, world)
    plan = rank_plan(spec.mapping, world)
    run_dir.mkdir(parents=True, exist_ok=True)
    meta = None
    if world.rank == 0:
        check_new_run_dir(run_dir)
        meta = world_meta(spec, run_dir, plan, world)
        write_json_atomic(run_dir / RUN_FILE, meta)
    task = Task(run_dir, world.rank, key=key, hardware=meta.hardware if meta is not None else {})
    code = run_child(rank_argv(spec, run_dir), child_env(world, plan), task, world, spec)
    if meta is not None:
        finish_world_meta(meta, run_dir, code)
    return run_dir, code


def world_meta(spec: RunSpec, run_dir: Path, plan: RankPlan, world: World) -> RunMeta:
    meta = start_meta(spec, run_dir, plan)
    meta.world_size = world.world_size
    meta.nproc_per_node = world.local_world_size
    meta.nnodes = max(world.num_nodes, 1)
    meta.launcher = world.source
    if world.master_addr is not None and world.master_port is not None:
        meta.options = {**meta.options, STORE_OPTION: f"{world.master_addr}:{world.master_port}"}
    return meta


def finish_world_meta(meta: RunMeta, run_dir: Path, code: int) -> None:
    """Rank 0's view at its end; other ranks' own files stay the final word on them."""
    meta.end_time = time.time()
    meta.status = "completed" if code == 0 else ("interrupted" if code > 128 else "failed")
    for rank in range(meta.world_size):
        rank_meta = read_rank_meta(run_dir, rank)
        if rank_meta is not None:
            meta.ranks[str(rank)] = rank_meta
    meta.hostnames = sorted({m.hostname for m in meta.ranks.values() if m.hostname})
    write_json_atomic(run_dir / RUN_FILE, meta)
