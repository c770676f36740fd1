"""Decide how to start: our own local launch, one rank of an external launcher's world, or
torchrun-under-srun style (one task per node, N local ranks each)."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from scalescope.launch.placement.plan import RankPlan, make_plan
from scalescope.launch.run.external import execute_rank, rank_plan
from scalescope.launch.run.runner import RunSpec, execute
from scalescope.launch.world.detect import detect_world
from scalescope.launch.world.rendezvous import job_port, master_host
from scalescope.launch.world.variables import World


@dataclass(frozen=True)
class Outcome:
    run_dir: Path
    status: str
    exit_code: int
    report_here: bool
    """False on ranks other than 0 of an external launch: one report per job, not per rank."""


@dataclass(frozen=True)
class PlanView:
    """What --dry-run shows: this node's ranks and what each gets."""

    hostname: str
    first_rank: int
    world_size: int
    source: str
    plan: RankPlan


def find_world(
    spec: RunSpec, nproc_given: bool, master_addr: str | None, environ: Mapping[str, str]
) -> World | None:
    """The external world, unless ``-n`` asks for our own launch on every node."""
    port = spec.launch.master_port
    world = detect_world(environ, master_addr=master_addr, master_port=port)
    if world is None or not nproc_given:
        return world
    if world.local_world_size != 1:
        raise ValueError(
            f"started by {world.source} with {world.local_world_size} tasks on this node and "
            "-n: drop -n (each task is then one rank) or start one task per node"
        )
    return world


def per_node_launch(
    spec: RunSpec, world: World, environ: Mapping[str, str] = os.environ
) -> RunSpec:
    """One task per node started by srun/mpirun: each starts -n local ranks, static rendezvous
    on the first host of the launcher's node list and the job's port unless given."""
    addr = world.master_addr or master_host(world, environ)[0]
    endpoint = f"{addr}:{world.master_port or job_port(world.job_id)}"
    launch = replace(
        spec.launch,
        nnodes=world.world_size,
        node_rank=world.rank,
        rdzv_backend="static",
        rdzv_endpoint=endpoint,
        rdzv_id=world.job_id or "none",
    )
    return replace(spec, launch=launch, launcher=f"{world.source}+elastic")


def start(
    spec: RunSpec,
    nproc_given: bool,
    master_addr: str | None = None,
    environ: Mapping[str, str] = os.environ,
) -> Outcome:
    world = find_world(spec, nproc_given, master_addr, environ)
    if world is not None and not nproc_given:
        run_dir, code = execute_rank(spec, world)
        status = "completed" if code == 0 else ("interrupted" if code > 128 else "failed")
        return Outcome(run_dir, status, code, report_here=world.rank == 0)
    if world is not None:
        spec = per_node_launch(spec, world, environ)
    result = execute(spec)
    return Outcome(result.run_dir, result.meta.status, result.exit_code, report_here=True)


def dry_run(
    spec: RunSpec,
    nproc_given: bool,
    master_addr: str | None = None,
    environ: Mapping[str, str] = os.environ,
) -> PlanView:
    world = find_world(spec, nproc_given, master_addr, environ)
    host = socket.gethostname()
    if world is not None and not nproc_given:
        return PlanView(
            host, world.rank, world.world_size, world.source, rank_plan(spec.mapping, world)
        )
    if world is not None:
        spec = per_node_launch(spec, world, environ)
    n = spec.launch.nproc_per_node
    plan = make_plan(spec.mapping, n, environ)
    return PlanView(host, spec.launch.node_rank * n, spec.launch.world_size, "local", plan)
