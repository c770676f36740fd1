"""From the user's mapping options to what every local rank gets: cpus, threads, variables."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from scalescope.launch.machine.topology import Topology, read_topology
from scalescope.launch.options.groups import MappingError, MappingOptions
from scalescope.launch.placement.mapping import (
    Placement,
    find_allocator,
    omp_env,
    plan_placements,
    plan_to_json,
)
from scalescope.probe.binding import PLACEMENTS_ENV


@dataclass(frozen=True)
class RankPlan:
    """What the launcher puts in the ranks' environment, and the plan for run.json."""

    placements: list[Placement] | None
    env: dict[str, str] = field(default_factory=dict)
    """Variables for every rank: the placements (JSON), LD_PRELOAD, OMP_NUM_THREADS."""
    topology_source: str = ""
    pin_threads: bool = True
    """Pin OpenMP threads to the rank's cpus (core binding); else only their number is set."""

    def as_json(self) -> list[dict[str, Any]]:
        if self.placements is None:
            return []
        rows = plan_to_json(self.placements)
        for row, placement in zip(rows, self.placements, strict=True):
            if self.pin_threads:
                row["env"] = omp_env(placement, intel_openmp_loaded())
            else:
                row["env"] = {"OMP_NUM_THREADS": str(placement.threads)}
        return rows


def widen_to_domain(placement: Placement, topology: Topology, map_by: str) -> Placement:
    """The rank may use every cpu of the domain its share lies in (not only the share)."""
    if map_by == "numa" and placement.numa_node is not None:
        cpus = topology.numa_cpus(placement.numa_node)
    elif map_by == "socket" and placement.socket is not None:
        cpus = topology.socket_cpus(placement.socket)
    else:
        cpus = topology.cpu_ids
    return replace(placement, cpus=tuple(cpus))


def intel_openmp_loaded(maps: Path = Path("/proc/self/maps")) -> bool:
    """True when Intel's OpenMP runtime (libiomp5) is loaded, as in MKL builds of torch."""
    try:
        return "libiomp5" in maps.read_text()
    except OSError:
        return False


def user_threads(environ: Mapping[str, str]) -> int | None:
    value = environ.get("OMP_NUM_THREADS", "")
    if not value:
        return None
    try:
        threads = int(value)
    except ValueError as exc:
        raise MappingError(f"OMP_NUM_THREADS={value!r} is not a whole number") from exc
    if threads < 1:
        raise MappingError(f"OMP_NUM_THREADS={value!r} must be at least 1")
    return threads


def default_threads(topology: Topology, nproc: int) -> int:
    return max(1, topology.num_cores // nproc)


def make_plan(
    options: MappingOptions,
    nproc: int,
    environ: Mapping[str, str] = os.environ,
    topology: Topology | None = None,
) -> RankPlan:
    """Placements for ``nproc`` local ranks; an explicit OMP_NUM_THREADS is honoured."""
    topology = topology or read_topology()
    threads = options.threads_per_rank or user_threads(environ)
    env = allocator_env(options.allocator, environ)
    if not options.bind:
        env.setdefault("OMP_NUM_THREADS", str(threads or default_threads(topology, nproc)))
        return RankPlan(None, env, topology.source)
    placements = plan_placements(
        topology,
        nproc,
        map_by=options.map_by,
        threads_per_rank=threads,
        numa_nodes=list(options.numa_node_ids) if options.numa_nodes else None,
        cpu_lists=list(options.cpu_list) if options.cpu_list else None,
        oversubscribe=options.oversubscribe,
    )
    by_domain = options.bind_to == "domain" and options.map_by != "core" and not options.cpu_list
    if by_domain:
        placements = [widen_to_domain(p, topology, options.map_by) for p in placements]
    plan = RankPlan(placements, env, topology.source, pin_threads=not by_domain)
    env[PLACEMENTS_ENV] = json.dumps(plan.as_json())
    return plan


def allocator_env(name: str, environ: Mapping[str, str]) -> dict[str, str]:
    """LD_PRELOAD with the allocator prepended; an allocator that is not installed is an error."""
    if name == "default":
        return {}
    path = find_allocator(name)
    if path is None:
        raise MappingError(
            f"--allocator {name}: no lib{name} found; install it (Debian: apt-get install "
            f"{'libgoogle-perftools4' if name == 'tcmalloc' else 'libjemalloc2'}) or use default"
        )
    preload = environ.get("LD_PRELOAD", "")
    return {"LD_PRELOAD": f"{path}:{preload}" if preload else str(path)}
