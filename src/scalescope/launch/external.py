"""One rank of a world an external launcher started (srun, mpirun, mpiexec, torchrun).

The launcher already started one process per rank; scalescope joins that world instead of
starting a second launcher: it sets the variables torch's ``env://`` rendezvous reads, binds
the rank to its share of the node (unless the launcher already bound it), and runs the probe
bootstrap in a child process, so OpenMP and an allocator preload see their variables from
the start. Rank 0 writes run.json; every rank writes its own rank file.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from scalescope.events.files import RUN_FILE
from scalescope.events.run import RunMeta, read_rank_meta, write_json_atomic
from scalescope.launch.plan import MappingOptions, RankPlan, make_plan
from scalescope.launch.rendezvous import meet
from scalescope.launch.runner import RunSpec, check_new_run_dir, rank_argv, start_meta
from scalescope.launch.topology import Topology, parse_cpulist, read_topology
from scalescope.launch.world import World


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
    return {**os.environ, **world.torch_env(), **plan.env}


def run_child(argv: list[str], env: dict[str, str]) -> int:
    """Run the bootstrap; forward SIGTERM/SIGINT so the rank flushes and marks itself."""
    child = subprocess.Popen([sys.executable, "-u", *argv], env=env)

    def forward(signum: int, _frame: object) -> None:
        child.send_signal(signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, forward)
    code = child.wait()
    return 128 - code if code < 0 else code


def execute_rank(spec: RunSpec, world: World) -> tuple[Path, int]:
    with meet(world) as met:
        return _execute_met(spec, met)


def _execute_met(spec: RunSpec, world: World) -> tuple[Path, int]:
    run_dir = run_dir_for(spec, world)
    plan = rank_plan(spec.mapping, world)
    run_dir.mkdir(parents=True, exist_ok=True)
    meta = None
    if world.rank == 0:
        check_new_run_dir(run_dir)
        meta = world_meta(spec, run_dir, plan, world)
        write_json_atomic(run_dir / RUN_FILE, meta)
    code = run_child(rank_argv(spec, run_dir), child_env(world, plan))
    if meta is not None:
        finish_world_meta(meta, run_dir, code)
    return run_dir, code


def world_meta(spec: RunSpec, run_dir: Path, plan: RankPlan, world: World) -> RunMeta:
    meta = start_meta(spec, run_dir, plan)
    meta.world_size = world.world_size
    meta.nproc_per_node = world.local_world_size
    meta.nnodes = max(world.num_nodes, 1)
    meta.launcher = world.source
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
