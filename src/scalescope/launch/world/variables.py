"""A World read from one launcher's variables: which variable feeds each field (``Vars``, a
table per launcher), each read with a one-line error naming the variable, node rank and count
derived when the launcher does not give them, and the whole checked (launch/world/detect.py
says which launchers and in what order).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


class WorldError(ValueError):
    """The launcher's variables are inconsistent or incomplete (a one-line message)."""


@dataclass(frozen=True)
class World:
    """Where this process sits in a multi-process job started by an external launcher."""

    source: str
    """torchrun, env, slurm, openmpi, mvapich, hydra or pmix."""
    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    node_rank: int
    """Index of this node; -1 when the launcher does not say and it cannot be derived."""
    num_nodes: int
    """-1 when unknown, like ``node_rank``."""
    master_addr: str | None
    master_port: int | None
    job_id: str | None
    """Same on every rank of one launch, so ranks can name a shared run directory."""
    agent_store: bool = False
    """Rank 0's scalescope hosts the rendezvous store, so every rank's ``env://`` is a client
    (``TORCHELASTIC_USE_AGENT_STORE``, as under torchrun's agent)."""

    def torch_env(self) -> dict[str, str]:
        """The variables torchrun sets and ``init_process_group(init_method="env://")`` reads."""
        if self.master_addr is None or self.master_port is None:
            raise WorldError(
                f"{label(self.source)} world has no master address yet: call rendezvous.meet first"
            )
        env = {
            "RANK": str(self.rank),
            "LOCAL_RANK": str(self.local_rank),
            "WORLD_SIZE": str(self.world_size),
            "LOCAL_WORLD_SIZE": str(self.local_world_size),
            "MASTER_ADDR": self.master_addr,
            "MASTER_PORT": str(self.master_port),
        }
        if self.node_rank >= 0:
            env["GROUP_RANK"] = str(self.node_rank)
        if self.agent_store:
            # torch < 2.4 also reads the restart count to prefix the agent's store.
            env.update(TORCHELASTIC_USE_AGENT_STORE="True", TORCHELASTIC_RESTART_COUNT="0")
        return env


@dataclass(frozen=True)
class Vars:
    """Which variable feeds each field of a World, for reading and for error messages."""

    source: str
    rank: str
    size: str
    local_rank: str
    local_size: str
    node_rank: str | None = None
    num_nodes: str | None = None
    job_ids: tuple[str, ...] = ()
    hint: str = "the launcher's variables are incomplete"


TORCHRUN_VARS = Vars(
    "torchrun",
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    ("TORCHELASTIC_RUN_ID",),
)
MPI_VARS = (
    Vars(
        "openmpi",
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "OMPI_COMM_WORLD_LOCAL_SIZE",
        # One launch's id before the batch job's (PJM_JOBID: Fujitsu pjsub), since one job may
        # run mpiexec several times.
        job_ids=(
            "PMIX_NAMESPACE",
            "OMPI_MCA_ess_base_jobid",
            "OMPI_MCA_orte_ess_jobid",
            "PJM_JOBID",
        ),
    ),
    Vars(
        "mvapich",
        "MV2_COMM_WORLD_RANK",
        "MV2_COMM_WORLD_SIZE",
        "MV2_COMM_WORLD_LOCAL_RANK",
        "MV2_COMM_WORLD_LOCAL_SIZE",
        "MV2_NODE_ID",
        "MV2_NUM_NODES_IN_JOB",
        ("MPIRUN_ID",),
    ),
    Vars(
        "hydra",
        "PMI_RANK",
        "PMI_SIZE",
        "MPI_LOCALRANKID",
        "MPI_LOCALNRANKS",
        job_ids=("PMI_KVSNAME",),
    ),
    Vars(
        "pmix",
        "PMIX_RANK",
        "PMIX_SIZE",
        "PMIX_LOCAL_RANK",
        "PMIX_LOCAL_SIZE",
        "PMIX_NODEID",
        job_ids=("PMIX_NAMESPACE",),
        hint="PMIx passes sizes only through its API; start the ranks with Open MPI's mpirun "
        "(sets OMPI_COMM_WORLD_*) or srun",
    ),
)
_LABELS = {
    "torchrun": "torchrun",
    "env": "env://",
    "slurm": "Slurm",
    "openmpi": "Open MPI",
    "mvapich": "MVAPICH2",
    "hydra": "MPICH/Intel MPI (hydra)",
    "pmix": "PMIx",
}


def label(source: str) -> str:
    return _LABELS.get(source, source)


def is_number(text: str) -> bool:
    return text.isascii() and text.isdigit()


def read_int(env: Mapping[str, str], name: str) -> int:
    value = env[name].strip()
    if not is_number(value):
        raise WorldError(f"{name}={env[name]!r} is not a non-negative integer")
    return int(value)


def need(
    env: Mapping[str, str],
    source: str,
    present: str,
    required: tuple[str, ...],
    hint: str = "the launcher's variables are incomplete",
) -> None:
    """Fail in one line naming what is missing when ``present`` shows the launcher is there."""
    missing = [name for name in required if not env.get(name, "").strip()]
    if missing:
        raise WorldError(f"{label(source)} sets {present} but not {', '.join(missing)}: {hint}")


def first_set(env: Mapping[str, str], names: tuple[str, ...]) -> str | None:
    for name in names:
        value = env.get(name, "").strip()
        if value and value.lower() != "none":
            return value
    return None


def check_port(port: int, name: str) -> int:
    if not 0 < port < 65536:
        raise WorldError(f"{name}={port} is not a port in 1..65535")
    return port


def env_port(env: Mapping[str, str]) -> int | None:
    if not env.get("MASTER_PORT", "").strip():
        return None
    return check_port(read_int(env, "MASTER_PORT"), "MASTER_PORT")


def read_world(env: Mapping[str, str], names: Vars, source: str | None = None) -> World:
    """Build a World from one launcher's variables; node rank/count derived when absent."""
    source = source or names.source
    required = (names.rank, names.size, names.local_rank, names.local_size)
    need(env, source, names.rank, required, names.hint)
    rank, size = read_int(env, names.rank), read_int(env, names.size)
    local_rank, local_size = read_int(env, names.local_rank), read_int(env, names.local_size)
    given_node = names.node_rank is not None and names.node_rank in env
    given_count = names.num_nodes is not None and names.num_nodes in env
    node_rank, num_nodes = _derive_nodes(rank, local_rank, size, local_size)
    if given_node:
        node_rank = read_int(env, str(names.node_rank))
    if given_count:
        num_nodes = read_int(env, str(names.num_nodes))
    world = World(
        source=source,
        rank=rank,
        local_rank=local_rank,
        world_size=size,
        local_world_size=local_size,
        node_rank=node_rank,
        num_nodes=num_nodes,
        master_addr=env.get("MASTER_ADDR", "").strip() or None,
        master_port=env_port(env),
        job_id=first_set(env, names.job_ids),
    )
    validate(world, names)
    return world


def _derive_nodes(rank: int, local_rank: int, size: int, local_size: int) -> tuple[int, int]:
    """Node index and count when the launcher does not give them.

    Assumes every node runs ``local_size`` ranks; ranks placed in blocks (node = rank //
    local_size, the usual default) or round-robin (``--map-by node``) are told apart by the
    local rank. Returns -1 for what cannot be known.
    """
    if local_size < 1 or size % local_size:
        return -1, -1
    nodes = size // local_size
    if rank % local_size == local_rank:
        return rank // local_size, nodes
    if rank // nodes == local_rank:
        return rank % nodes, nodes
    return -1, nodes


def validate(world: World, names: Vars) -> None:
    if world.world_size < 1:
        raise WorldError(f"{names.size}={world.world_size}: a world needs at least one rank")
    if world.rank >= world.world_size:
        raise WorldError(f"{names.rank}={world.rank} is not below {names.size}={world.world_size}")
    if not 0 < world.local_world_size <= world.world_size:
        raise WorldError(
            f"{names.local_size}={world.local_world_size} is not in 1..{names.size}"
            f"={world.world_size}"
        )
    if world.local_rank >= world.local_world_size:
        raise WorldError(
            f"{names.local_rank}={world.local_rank} is not below "
            f"{names.local_size}={world.local_world_size}"
        )
    if world.num_nodes >= 0 and world.node_rank >= world.num_nodes:
        raise WorldError(
            f"{names.node_rank or 'node rank'}={world.node_rank} is not below "
            f"{names.num_nodes or 'node count'}={world.num_nodes}"
        )
