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

MPI launchers give no rendezvous address: :func:`agree_master` settles one through mpi4py, or
``--master-addr`` / ``MASTER_ADDR`` supply it.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, cast

DEFAULT_PORT = 29500
"""torch's customary rendezvous port, used when nothing better is known."""
PORT_BASE = 10000
PORT_SPAN = 20000
"""Derived ports fall in [10000, 30000): below Linux's ephemeral range (32768-60999), so a
derived port does not collide with ports the kernel hands out to outgoing connections."""


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

    def torch_env(self) -> dict[str, str]:
        """The variables torchrun sets and ``init_process_group(init_method="env://")`` reads."""
        if self.master_addr is None or self.master_port is None:
            raise WorldError(
                f"{_label(self.source)} world has no master address yet: call agree_master first"
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


def _label(source: str) -> str:
    return _LABELS.get(source, source)


def detect_world(
    env: Mapping[str, str] = os.environ,
    master_addr: str | None = None,
    master_port: int | None = None,
) -> World | None:
    """The world an external launcher started this process in, or None without a launcher.

    Checked in order: torchrun (or plain env:// variables), a Slurm step, Open MPI, MVAPICH2,
    hydra, PMIx. ``master_addr`` / ``master_port`` (``--master-addr`` / ``--master-port``)
    override what the environment says. An MPI world may come back without a master address;
    pass it to :func:`agree_master` before :meth:`World.torch_env`.
    """
    world = _from_torchrun(env) or _from_slurm(env) or _from_mpi(env)
    if world is None:
        return None
    if master_port is not None:
        _check_port(master_port, "--master-port")
    addr = master_addr or world.master_addr
    port = master_port if master_port is not None else world.master_port
    if addr is not None and port is None:
        port = job_port(world.job_id) if world.job_id else DEFAULT_PORT
    return replace(world, master_addr=addr, master_port=port)


def job_port(job_id: str) -> int:
    """A rendezvous port every rank computes alike from the job id, without talking.

    ``10000 + job_id % 20000`` for a numeric id (Slurm's), else the same of the id's CRC-32.
    Two worlds sharing a job id and a master host (concurrent steps of one Slurm job) collide:
    give them ``--master-port`` or ``MASTER_PORT``.
    """
    number = int(job_id) if _is_number(job_id) else zlib.crc32(job_id.encode())
    return PORT_BASE + number % PORT_SPAN


def agree_master(world: World) -> World:
    """Give an MPI world a master address and port all ranks agree on.

    Rank 0 offers its host's address and a free port through mpi4py's ``COMM_WORLD.bcast``;
    without mpi4py the address must come from ``--master-addr`` or ``MASTER_ADDR``.
    """
    if world.master_addr is not None and world.master_port is not None:
        return world
    comm = _mpi_comm_world()
    if comm is None:
        raise WorldError(
            f"{_label(world.source)} gives no master address: pass --master-addr HOST "
            "(rank 0's host) and --master-port PORT, or install mpi4py "
            "(pip install 'scalescope[mpi]')"
        )
    if (comm.Get_rank(), comm.Get_size()) != (world.rank, world.world_size):
        raise WorldError(
            f"mpi4py's COMM_WORLD (rank {comm.Get_rank()} of {comm.Get_size()}) does not match "
            f"{_label(world.source)}'s (rank {world.rank} of {world.world_size})"
        )
    offer = None
    if world.rank == 0:
        offer = (world.master_addr or _host_address(world), world.master_port or _free_port())
    addr, port = comm.bcast(offer, root=0)
    return replace(world, master_addr=addr, master_port=int(port))


def _mpi_comm_world() -> Any | None:
    try:
        from mpi4py import MPI
    except ImportError:
        return None
    return MPI.COMM_WORLD


def _host_address(world: World) -> str:
    """This host's address as other nodes reach it.

    Debian-style /etc/hosts maps the hostname to 127.0.1.1, useless to other nodes: prefer a
    non-loopback address, then loopback for a one-node world, then the bare hostname.
    """
    host = socket.gethostname()
    try:
        infos = socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)
    except OSError:
        infos = []
    for info in infos:
        addr = str(info[4][0])
        if not addr.startswith("127."):
            return addr
    if world.local_world_size == world.world_size:
        return "127.0.0.1"
    return host


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])


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
        raise WorldError(f"{_label(source)} sets {present} but not {', '.join(missing)}: {hint}")


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
        master_addr=env.get("MASTER_ADDR", "").strip() or _slurm_master(env),
        master_port=_env_port(env) or (job_port(job) if job else None),
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


def _slurm_master(env: Mapping[str, str]) -> str | None:
    """First host of the step's node list: where srun's block and cyclic layouts put rank 0."""
    for var in ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"):
        text = env.get(var, "").strip()
        if text:
            try:
                host = _first_host(text, env.get("PATH"))
            except ValueError as exc:
                raise WorldError(f"{var}: {exc}") from None
            if host is None:
                raise WorldError(f"{var}={text!r} names no host")
            return host
    return None


def _first_host(nodelist: str, path: str | None) -> str | None:
    """Expanded with ``scontrol show hostnames`` when on ``path``, else with our own parser."""
    if not any(char in nodelist for char in "[, "):
        return nodelist
    scontrol = shutil.which("scontrol", path=path) if path else None
    if scontrol is not None:
        try:
            done = subprocess.run(
                [scontrol, "show", "hostnames", nodelist],
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            done = None
        if done is not None and done.returncode == 0 and done.stdout.split():
            return done.stdout.split()[0]
    return next(iter_hostlist(nodelist), None)


# --- Slurm hostlists ------------------------------------------------------------------------

_Range = tuple[int, int, int]
"""(low, high, width): ``07-10`` is (7, 10, 2)."""
_Part = str | tuple[_Range, ...]


def expand_hostlist(text: str) -> list[str]:
    """Expand a Slurm hostlist: ``"node[01-03,07]"`` -> node01, node02, node03, node07.

    Zero padding follows the width of each range's low end. Several bracket groups in one name
    expand as a cartesian product in Slurm's order (``rack[1-2]-n[1-2]`` -> rack1-n1, rack1-n2,
    rack2-n1, rack2-n2). Text after the last bracket (``c[1-2]-ib``) is accepted, as
    python-hostlist does, though Slurm itself refuses it. Raises ValueError on malformed text:
    unbalanced or nested brackets, empty or reversed ranges, non-digits in a range.
    """
    return list(iter_hostlist(text))


def iter_hostlist(text: str) -> Iterator[str]:
    """Like :func:`expand_hostlist`, lazily: the whole text is checked before the first name."""
    patterns = [_parse_name(item) for item in _split_hostlist(text)]

    def names() -> Iterator[str]:
        for parts in patterns:
            yield from _expand(parts)

    return names()


def _split_hostlist(text: str) -> list[str]:
    """Split at commas and blanks outside brackets; empty items are skipped, as Slurm does."""
    items, current, depth = [], "", 0
    for char in text:
        if char == "[":
            if depth:
                raise ValueError(f"hostlist {text!r}: nested '['")
            depth = 1
        elif char == "]":
            if not depth:
                raise ValueError(f"hostlist {text!r}: ']' without '['")
            depth = 0
        elif depth == 0 and (char == "," or char.isspace()):
            items.append(current)
            current = ""
            continue
        current += char
    if depth:
        raise ValueError(f"hostlist {text!r}: '[' without ']'")
    return [item for item in [*items, current] if item]


def _parse_name(item: str) -> list[_Part]:
    """``rack[1-2]-n[01,03]`` -> ["rack", ((1, 2, 1),), "-n", ((1, 1, 2), (3, 3, 2))]."""
    parts: list[_Part] = []
    pos = 0
    for match in re.finditer(r"\[([^\]]*)\]", item):
        if match.start() > pos:
            parts.append(item[pos : match.start()])
        parts.append(tuple(_parse_range(spec, item) for spec in match.group(1).split(",")))
        pos = match.end()
    if pos < len(item):
        parts.append(item[pos:])
    return parts


def _parse_range(spec: str, item: str) -> _Range:
    match = re.fullmatch(r"(\d+)(?:-(\d+))?", spec.strip())
    if match is None:
        raise ValueError(f"hostlist {item!r}: {spec!r} is not a number or a range like 01-04")
    low, high = match.group(1), match.group(2) or match.group(1)
    if int(high) < int(low):
        raise ValueError(f"hostlist {item!r}: range {spec!r} runs backwards")
    return int(low), int(high), len(low)


def _expand(parts: list[_Part]) -> Iterator[str]:
    """All names of one pattern, nested the way Slurm's ``_push_range_list`` recurses: the
    last bracket group innermost, the others from the second-last outwards (for two groups:
    the first outermost)."""
    groups = [i for i, part in enumerate(parts) if not isinstance(part, str)]
    return _fill(parts, groups[-2::-1] + groups[-1:])


def _fill(parts: list[_Part], order: list[int]) -> Iterator[str]:
    if not order:
        yield "".join(part for part in parts if isinstance(part, str))
        return
    slot = order[0]
    for value in _range_values(cast(tuple[_Range, ...], parts[slot])):
        yield from _fill([*parts[:slot], value, *parts[slot + 1 :]], order[1:])


def _range_values(ranges: tuple[_Range, ...]) -> Iterator[str]:
    for low, high, width in ranges:
        for number in range(low, high + 1):
            yield str(number).zfill(width)
