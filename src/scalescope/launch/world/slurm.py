"""A task of a Slurm step as one rank of a World: its rank, node and sizes from ``SLURM_*``
(Slurm ``src/common/env.c``, the ``srun`` man page), the tasks per node read from Slurm's
compressed counts."""

from __future__ import annotations

import re
from collections.abc import Mapping

from scalescope.launch.world.variables import (
    MPI_VARS,
    Vars,
    World,
    WorldError,
    env_port,
    first_set,
    is_number,
    need,
    read_int,
    validate,
)


def from_slurm(env: Mapping[str, str]) -> World | None:
    """A task of an ``srun`` step that srun started itself.

    Needs ``SLURM_STEP_ID``: the batch script and salloc's interactive step also carry
    ``SLURM_PROCID=0`` and the job's ``SLURM_NTASKS``, but Slurm leaves the step id out there
    (those steps have reserved ids), and taking them for rank 0 would wait for ranks that never
    come. Skipped when MPI variables disagree with Slurm's: mpirun and mpiexec.hydra start their
    daemons with srun, so their ranks inherit a daemon's ``SLURM_PROCID``.
    """
    step = first_set(env, ("SLURM_STEP_ID", "SLURM_STEPID"))
    if "SLURM_PROCID" not in env or step is None:
        return None
    size_var = "SLURM_STEP_NUM_TASKS" if "SLURM_STEP_NUM_TASKS" in env else "SLURM_NTASKS"
    need(env, "slurm", "SLURM_PROCID", (size_var, "SLURM_LOCALID", "SLURM_NODEID"))
    rank, size = read_int(env, "SLURM_PROCID"), read_int(env, size_var)
    if not _slurm_started_us(env, rank, size):
        return None
    node = read_int(env, "SLURM_NODEID")
    local_var, local_size, num_nodes = _slurm_node_sizes(env, node, size)
    names = Vars("slurm", "SLURM_PROCID", size_var, "SLURM_LOCALID", local_var, "SLURM_NODEID")
    job = first_set(env, ("SLURM_JOB_ID", "SLURM_JOBID"))
    world = World(
        source="slurm",
        rank=rank,
        local_rank=read_int(env, "SLURM_LOCALID"),
        world_size=size,
        local_world_size=local_size,
        node_rank=node,
        num_nodes=num_nodes,
        master_addr=env.get("MASTER_ADDR", "").strip() or None,
        master_port=env_port(env),
        job_id=f"{job}.{step}" if job else None,
    )
    validate(world, names)
    return world


def _slurm_started_us(env: Mapping[str, str], rank: int, size: int) -> bool:
    for names in MPI_VARS:
        value = env.get(names.rank, "").strip()
        if is_number(value) and int(value) != rank:
            return False
        value = env.get(names.size, "").strip()
        if is_number(value) and int(value) != size:
            return False
    return True


def _slurm_node_sizes(env: Mapping[str, str], node: int, size: int) -> tuple[str, int, int]:
    """(variable read, ranks on this node, nodes in the step).

    The job-wide ``SLURM_TASKS_PER_NODE`` stands in for the step's only when it fits the step.
    """
    for var in ("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"):
        if env.get(var, "").strip():
            counts = parse_tasks_per_node(env[var])
            if sum(counts) == size and node < len(counts):
                return var, counts[node], len(counts)
            if var == "SLURM_STEP_TASKS_PER_NODE":
                raise WorldError(
                    f"{var}={env[var]!r} does not fit {size} tasks with SLURM_NODEID={node}"
                )
    nodes_var = "SLURM_STEP_NUM_NODES" if "SLURM_STEP_NUM_NODES" in env else "SLURM_NNODES"
    nodes = read_int(env, nodes_var) if env.get(nodes_var, "").strip() else 1
    if nodes < 1 or size % nodes:
        raise WorldError(
            f"{size} tasks on {nodes_var}={nodes} nodes: set SLURM_STEP_TASKS_PER_NODE "
            "(srun does) to give the tasks on each node"
        )
    return nodes_var, size // nodes, nodes


def parse_tasks_per_node(text: str) -> list[int]:
    """Slurm's compressed per-node counts: ``"2(x3),1"`` -> ``[2, 2, 2, 1]``."""
    counts: list[int] = []
    for item in text.split(","):
        match = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", item)
        if match is None:
            raise WorldError(f"tasks per node {text!r} is not like '2(x3),1'")
        counts += [int(match.group(1))] * int(match.group(2) or 1)
    return counts
