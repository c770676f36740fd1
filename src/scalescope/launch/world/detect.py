"""Find the world an external launcher started this process in.

``srun scalescope run train.py`` or ``mpirun -n 8 scalescope run train.py`` starts scalescope
once per rank; each copy reads its rank, sizes and rendezvous address from the variables the
launcher exported and joins torch.distributed directly (env:// through :meth:`World.torch_env`),
with no second launcher inside.

Launchers and the variables read (first match wins, see :func:`detect_world`):

* torchrun / torch elastic agent: ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
  ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``, ``GROUP_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``,
  ``TORCHELASTIC_RUN_ID`` (``torch/distributed/elastic/agent/server/local_elastic_agent.py``).
* Slurm ``srun`` step: ``SLURM_PROCID``, ``SLURM_LOCALID``, ``SLURM_NODEID``, ``SLURM_STEP_ID``,
  ``SLURM_STEP_NUM_TASKS`` (else ``SLURM_NTASKS``), ``SLURM_STEP_TASKS_PER_NODE``,
  ``SLURM_STEP_NUM_NODES``, ``SLURM_STEP_NODELIST`` (else ``SLURM_JOB_NODELIST``),
  ``SLURM_JOB_ID`` (Slurm ``src/common/env.c``, ``srun`` man page).
* Open MPI 3/4 (ORTE), 5 (PRRTE/PMIx ``pmdl/ompi``) and Fujitsu MPI: ``OMPI_COMM_WORLD_RANK``,
  ``_SIZE``, ``_LOCAL_RANK``, ``_LOCAL_SIZE``; job id ``PMIX_NAMESPACE``,
  ``OMPI_MCA_ess_base_jobid``, ``OMPI_MCA_orte_ess_jobid`` or ``PJM_JOBID``.
  ``OMPI_COMM_WORLD_NODE_RANK`` is *not* a node index (Open MPI documents it as the rank on
  this node across all jobs), so it is ignored.
* MVAPICH2 ``mpirun_rsh``: ``MV2_COMM_WORLD_RANK``, ``_SIZE``, ``_LOCAL_RANK``, ``_LOCAL_SIZE``,
  ``MV2_NODE_ID``, ``MV2_NUM_NODES_IN_JOB``, job id ``MPIRUN_ID`` (set by ``mpispawn``).
* MPICH / Intel MPI hydra: ``PMI_RANK``, ``PMI_SIZE``, ``MPI_LOCALRANKID``, ``MPI_LOCALNRANKS``.
* PMIx servers (PRRTE without the Open MPI personality, ``prun``): ``PMIX_RANK`` and
  ``PMIX_NAMESPACE`` only; the PMIx standard passes the sizes through its API, not the
  environment, so a world needs ``PMIX_SIZE`` from a launcher that sets one.

Only torchrun gives a rendezvous address and port; for the others
:mod:`scalescope.launch.world.rendezvous` finds them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace


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
class _Vars:
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


_TORCHRUN = _Vars(
    "torchrun",
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    ("TORCHELASTIC_RUN_ID",),
)
_MPI = (
    _Vars(
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
    _Vars(
        "mvapich",
        "MV2_COMM_WORLD_RANK",
        "MV2_COMM_WORLD_SIZE",
        "MV2_COMM_WORLD_LOCAL_RANK",
        "MV2_COMM_WORLD_LOCAL_SIZE",
        "MV2_NODE_ID",
        "MV2_NUM_NODES_IN_JOB",
        ("MPIRUN_ID",),
    ),
    _Vars(
        "hydra",
        "PMI_RANK",
        "PMI_SIZE",
        "MPI_LOCALRANKID",
        "MPI_LOCALNRANKS",
        job_ids=("PMI_KVSNAME",),
    ),
    _Vars(
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


def detect_world(
    env: Mapping[str, str] = os.environ,
    master_addr: str | None = None,
    master_port: int | None = None,
) -> World | None:
    """The world an external launcher started this process in, or None without a launcher.

    Checked in order: torchrun (or plain env:// variables), a Slurm step, Open MPI, MVAPICH2,
    hydra, PMIx. ``master_addr`` / ``master_port`` (``--master-addr`` / ``--master-port``)
    override what the environment says. A world may come back without a master address or
    port: :func:`scalescope.launch.world.rendezvous.meet` finds them before :meth:`World.torch_env`.
    """
    world = _from_torchrun(env) or _from_slurm(env) or _from_mpi(env)
    if world is None:
        return None
    if master_port is not None:
        _check_port(master_port, "--master-port")
    addr = master_addr or world.master_addr
    port = master_port if master_port is not None else world.master_port
    return replace(world, master_addr=addr, master_port=port)


# --- reading variables ----------------------------------------------------------------------


def _is_number(text: str) -> bool:
    return text.isascii() and text.isdigit()


def _int(env: Mapping[str, str], name: str) -> int:
    value = env[name].strip()
    if not _is_number(value):
        raise WorldError(f"{name}={env[name]!r} is not a non-negative integer")
    return int(value)


def _need(
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


def _first(env: Mapping[str, str], names: tuple[str, ...]) -> str | None:
    for name in names:
        value = env.get(name, "").strip()
        if value and value.lower() != "none":
            return value
    return None


def _check_port(port: int, name: str) -> int:
    if not 0 < port < 65536:
        raise WorldError(f"{name}={port} is not a port in 1..65535")
    return port


def _env_port(env: Mapping[str, str]) -> int | None:
    if not env.get("MASTER_PORT", "").strip():
        return None
    return _check_port(_int(env, "MASTER_PORT"), "MASTER_PORT")


def _read(env: Mapping[str, str], names: _Vars, source: str | None = None) -> World:
    """Build a World from one launcher's variables; node rank/count derived when absent."""
    source = source or names.source
    required = (names.rank, names.size, names.local_rank, names.local_size)
    _need(env, source, names.rank, required, names.hint)
    rank, size = _int(env, names.rank), _int(env, names.size)
    local_rank, local_size = _int(env, names.local_rank), _int(env, names.local_size)
    given_node = names.node_rank is not None and names.node_rank in env
    given_count = names.num_nodes is not None and names.num_nodes in env
    node_rank, num_nodes = _derive_nodes(rank, local_rank, size, local_size)
    if given_node:
        node_rank = _int(env, str(names.node_rank))
    if given_count:
        num_nodes = _int(env, str(names.num_nodes))
    world = World(
        source=source,
        rank=rank,
        local_rank=local_rank,
        world_size=size,
        local_world_size=local_size,
        node_rank=node_rank,
        num_nodes=num_nodes,
        master_addr=env.get("MASTER_ADDR", "").strip() or None,
        master_port=_env_port(env),
        job_id=_first(env, names.job_ids),
    )
    _validate(world, names)
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


def _validate(world: World, names: _Vars) -> None:
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


# --- launchers ------------------------------------------------------------------------------


def _from_torchrun(env: Mapping[str, str]) -> World | None:
    """torchrun's workers, or a hand-made env:// world (RANK ... plus MASTER_ADDR/PORT)."""
    plain = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
    elastic = "TORCHELASTIC_RUN_ID" in env
    if not elastic and not all(name in env for name in plain):
        return None
    source = "torchrun" if elastic else "env"
    trigger = "TORCHELASTIC_RUN_ID" if elastic else "RANK"
    _need(env, source, trigger, ("RANK", "MASTER_ADDR", "MASTER_PORT"))
    return _read(env, _TORCHRUN, source)


def _from_mpi(env: Mapping[str, str]) -> World | None:
    for names in _MPI:
        if names.rank in env:
            return _read(env, names)
    return None


def _from_slurm(env: Mapping[str, str]) -> World | None:
    """A task of an ``srun`` step that srun started itself.

    Needs ``SLURM_STEP_ID``: the batch script and salloc's interactive step also carry
    ``SLURM_PROCID=0`` and the job's ``SLURM_NTASKS``, but Slurm leaves the step id out there
    (those steps have reserved ids), and taking them for rank 0 would wait for ranks that never
    come. Skipped when MPI variables disagree with Slurm's: mpirun and mpiexec.hydra start their
    daemons with srun, so their ranks inherit a daemon's ``SLURM_PROCID``.
    """
    step = _first(env, ("SLURM_STEP_ID", "SLURM_STEPID"))
    if "SLURM_PROCID" not in env or step is None:
        return None
    size_var = "SLURM_STEP_NUM_TASKS" if "SLURM_STEP_NUM_TASKS" in env else "SLURM_NTASKS"
    _need(env, "slurm", "SLURM_PROCID", (size_var, "SLURM_LOCALID", "SLURM_NODEID"))
    rank, size = _int(env, "SLURM_PROCID"), _int(env, size_var)
    if not _slurm_started_us(env, rank, size):
        return None
    node = _int(env, "SLURM_NODEID")
    local_var, local_size, num_nodes = _slurm_node_sizes(env, node, size)
    names = _Vars("slurm", "SLURM_PROCID", size_var, "SLURM_LOCALID", local_var, "SLURM_NODEID")
    job = _first(env, ("SLURM_JOB_ID", "SLURM_JOBID"))
    world = World(
        source="slurm",
        rank=rank,
        local_rank=_int(env, "SLURM_LOCALID"),
        world_size=size,
        local_world_size=local_size,
        node_rank=node,
        num_nodes=num_nodes,
        master_addr=env.get("MASTER_ADDR", "").strip() or None,
        master_port=_env_port(env),
        job_id=f"{job}.{step}" if job else None,
    )
    _validate(world, names)
    return world


def _slurm_started_us(env: Mapping[str, str], rank: int, size: int) -> bool:
    for names in _MPI:
        value = env.get(names.rank, "").strip()
        if _is_number(value) and int(value) != rank:
            return False
        value = env.get(names.size, "").strip()
        if _is_number(value) and int(value) != size:
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
    nodes = _int(env, nodes_var) if env.get(nodes_var, "").strip() else 1
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
