"""Where the ranks of an external launch meet, found without the user's help.

torch's ``env://`` needs ``MASTER_ADDR`` and ``MASTER_PORT``; of the launchers only torchrun
exports them. :func:`meet` settles them, first rule that applies:

1. given: ``--master-addr`` / ``--master-port`` or ``MASTER_ADDR`` / ``MASTER_PORT``;
2. every rank on one node (the launcher's local size equals the world size): ``127.0.0.1``;
3. several nodes under an MPI launcher, mpi4py loads an MPI library: rank 0 offers its host's
   address and a free port to the others with ``COMM_WORLD.bcast`` (not under srun, whose
   node list always says where rank 0 is, and where MPI_Init without srun's PMI may abort);
4. several nodes: the first host of the launcher's node list (hostfile variables, Slurm's
   node lists expanded as ``scontrol show hostnames`` would, ``PBS_NODEFILE``, Open MPI's
   mpirun host), where block and cyclic placements put rank 0; rank 0 checks it is that host;
5. else a one-line error naming what to pass.

Port, when not given (rules 2 and 4): derived from the job id (:func:`job_port`) so every rank
computes it alike. Rank 0's scalescope checks it free by hosting the ``TCPStore`` on it itself,
and the ranks' ``env://`` connect as clients (``TORCHELASTIC_USE_AGENT_STORE``, as under
torchrun's agent), retrying until rank 0 is up. If the port is taken: on one node rank 0 takes
the next of :data:`PORT_TRIES` ports, then one the kernel picks, and tells the other ranks
through a file in this user's runtime directory (one node shares it); over several nodes the
others cannot learn of a change, so rank 0 stops with an error asking for ``--master-port``.

A port given or agreed (rules 1 and 3) is hosted the same way (:func:`at_port`), but under
torchrun, whose agent hosts it already. The store then lives in rank 0's scalescope process,
not in its rank: it outlives every rank, and closes only after the relays of the ranks' live
states said how their ranks ended (launch/channel/closing.py).
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import tempfile
import time
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from scalescope.launch.world.hostlist import first_host
from scalescope.launch.world.variables import World, WorldError, label

LOOPBACK = "127.0.0.1"
DEFAULT_PORT = 29500
"""torch's customary rendezvous port, for a world over several nodes with no job id."""
PORT_BASE = 10000
PORT_SPAN = 20000
"""Derived ports fall in [10000, 30000): below Linux's ephemeral range (32768-60999), so a
derived port does not collide with ports the kernel hands out to outgoing connections."""
PORT_TRIES = 8
MEET_TIMEOUT_S = 300.0
"""How long ranks on rank 0's node wait for its port; torch's default store timeout."""

_HOSTFILES = {
    "openmpi": ("OMPI_MCA_orte_default_hostfile", "PRTE_MCA_prte_default_hostfile"),
    "hydra": ("HYDRA_HOST_FILE", "I_MPI_HYDRA_HOST_FILE"),
}
_NODELISTS = ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")


def job_port(job_id: str | None) -> int:
    """A rendezvous port every rank computes alike from the job id, without talking.

    ``10000 + job_id % 20000`` for a numeric id; ``10000 + (job + step) % 20000`` for Slurm's
    ``JOB.STEP``, so concurrent steps of one job differ; else the same of the id's CRC-32;
    :data:`DEFAULT_PORT` without an id.
    """
    if not job_id:
        return DEFAULT_PORT
    numeric = re.fullmatch(r"(\d+)(?:\.(\d+))?", job_id)
    if numeric and job_id.isascii():
        number = int(numeric.group(1)) + int(numeric.group(2) or 0)
    else:
        number = zlib.crc32(job_id.encode())
    return PORT_BASE + number % PORT_SPAN


def job_ports(job_id: str | None) -> list[int]:
    """:func:`job_port` and the next ports after it (wrapping inside the derived range)."""
    first = job_port(job_id)
    if first < PORT_BASE:
        return [first + k for k in range(PORT_TRIES)]
    return [PORT_BASE + (first - PORT_BASE + k) % PORT_SPAN for k in range(PORT_TRIES)]


def one_node(world: World) -> bool:
    return world.local_world_size == world.world_size


@contextlib.contextmanager
def meet(
    world: World, env: Mapping[str, str] = os.environ, timeout_s: float = MEET_TIMEOUT_S
) -> Iterator[World]:
    """The world with a master address and port every rank agrees on.

    Rank 0 serves the rendezvous store for as long as the block runs when it hosts it. A world
    on one node without a job id (hydra's) gets one: the launcher's process every rank
    descends from (``ppid-PID``), which also names its run directory.
    """
    if world.job_id is None and one_node(world):
        world = replace(world, job_id=f"ppid-{os.getppid()}")
    if world.master_addr is None and not one_node(world) and world.source != "slurm":
        world = agree_by_mpi(world) or world
    if world.master_addr is None:
        addr, origin = master_host(world, env)
        if world.rank == 0 and origin:
            check_this_host(addr, origin)
        world = replace(world, master_addr=addr)
    if world.master_port is not None:
        with at_port(world, env) as met:
            yield met
        return
    meeting = replace(world, agent_store=True)
    key = world.job_id
    if world.rank != 0:
        port = wait_for_port(key, timeout_s) if one_node(world) else job_port(key)
        yield replace(meeting, master_port=port)
        return
    store = host_store(str(world.master_addr), key, one_node(world))
    try:
        yield replace(meeting, master_port=store.port)
    finally:
        _port_file(key).unlink(missing_ok=True)


@contextlib.contextmanager
def at_port(world: World, env: Mapping[str, str]) -> Iterator[World]:
    """A port given or agreed: rank 0's scalescope hosts the store there too, so the store
    outlives the ranks and closes only once every relay said how its rank ended
    (channel.closing.close_store); not where torch's agent hosts it already (torchrun)."""
    if world.source == "torchrun" or env.get("TORCHELASTIC_USE_AGENT_STORE") == str(True):
        yield world
        return
    meeting = replace(world, agent_store=True)
    if world.rank != 0:
        yield meeting
        return
    store = host_store_at(str(world.master_addr), int(world.master_port or 0))
    try:
        yield meeting
    finally:
        del store


def master_host(world: World, env: Mapping[str, str]) -> tuple[str, str]:
    """(address, the variable it came from; empty when given or loopback)."""
    if world.master_addr is not None:
        return world.master_addr, ""
    if one_node(world):
        return LOOPBACK, ""
    listed = launcher_host(world.source, env)
    if listed is not None:
        return listed
    mpi = "" if world.source == "slurm" else " and mpi4py could not load an MPI library"
    raise WorldError(
        f"{label(world.source)} gives no master address for {world.world_size} ranks on "
        f"{max(world.num_nodes, 2)} nodes{mpi}: pass --master-addr HOST (rank 0's host) or set "
        "a hostfile the launcher reads"
    )


def launcher_host(source: str, env: Mapping[str, str]) -> tuple[str, str] | None:
    """The first host of the launcher's node list and the variable that gave it, or None."""
    for var in _HOSTFILES.get(source, ()):
        if env.get(var, "").strip():
            return _hostfile_head(env[var].strip(), var), var
    for var in _NODELISTS:
        text = env.get(var, "").strip()
        if text:
            try:
                host = first_host(text, env.get("PATH"))
            except ValueError as exc:
                raise WorldError(f"{var}: {exc}") from None
            if host is None:
                raise WorldError(f"{var}={text!r} names no host")
            return host, var
    if env.get("PBS_NODEFILE", "").strip():
        return _hostfile_head(env["PBS_NODEFILE"].strip(), "PBS_NODEFILE"), "PBS_NODEFILE"
    match = re.search(r"tcp://([^:;/\[\]]+):", env.get("OMPI_MCA_orte_hnp_uri", ""))
    if source == "openmpi" and match:
        return match.group(1), "OMPI_MCA_orte_hnp_uri (mpirun's host)"
    return None


def _hostfile_head(path: str, var: str) -> str:
    """First host of an Open MPI (``node01 slots=4``), hydra (``node01:4``) or PBS hostfile."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as exc:
        raise WorldError(f"{var}={path!r}: cannot read it ({exc.strerror})") from None
    for line in lines:
        words = line.split("#", 1)[0].split()
        if words:
            return words[0].split(":", 1)[0]
    raise WorldError(f"{var}={path!r} names no host")


def check_this_host(host: str, origin: str) -> None:
    """Rank 0 refuses a guessed master host that is not its own (no rank would find it)."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        infos = []
    for family, _, _, _, sockaddr in infos:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((sockaddr[0], 0))
            except OSError:
                continue
            return
    raise WorldError(
        f"rank 0 runs on {socket.gethostname()}, not on {host}, the first host of {origin}: "
        "pass --master-addr HOST (rank 0's host)"
    )


def host_store(addr: str, key: str | None, fallback: bool) -> Any:
    """Rank 0's TCPStore on the derived port, else (``fallback``) the next ones, announced."""
    from torch.distributed import DistNetworkError, TCPStore

    ports = job_ports(key) + [0] if fallback else [job_port(key)]
    for port in ports:
        try:
            store = TCPStore(
                addr, port, is_master=True, wait_for_workers=False, timeout=timedelta(minutes=30)
            )
        except DistNetworkError:
            continue
        if fallback:
            _announce(key, store.port)
        return store
    raise WorldError(
        f"port {ports[0]} (derived from the job id {key}) is in use on {socket.gethostname()}: "
        "pass --master-port PORT (a free port on rank 0's host)"
    )


def host_store_at(addr: str, port: int) -> Any:
    """Rank 0's TCPStore on a port given (or agreed over MPI); a one-line error if taken."""
    from torch.distributed import DistNetworkError, TCPStore

    try:
        return TCPStore(
            addr, port, is_master=True, wait_for_workers=False, timeout=timedelta(minutes=30)
        )
    except DistNetworkError:
        raise WorldError(
            f"port {port} is in use on {socket.gethostname()}: pass --master-port PORT "
            "(a free port on rank 0's host)"
        ) from None


def _port_file(key: str | None) -> Path:
    folder = Path(tempfile.gettempdir()) / f"scalescope-{os.getuid()}"
    return folder / f"rendezvous-{zlib.crc32(str(key).encode()):08x}"


def _announce(key: str | None, port: int) -> None:
    path = _port_file(key)
    path.parent.mkdir(mode=0o700, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}")
    partial.write_text(f"{key}\n{port}\n{os.getpid()}\n")
    partial.replace(path)


def wait_for_port(key: str | None, timeout_s: float = MEET_TIMEOUT_S) -> int:
    """The port rank 0 on this node announced for this job (a stale file is ignored)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        port = _read_announcement(key)
        if port is not None:
            return port
        time.sleep(0.05)
    raise WorldError(
        f"rank 0 announced no rendezvous port for job {key} within {timeout_s:.0f} s in "
        f"{_port_file(key)}: did rank 0 start on this node?"
    )


def _read_announcement(key: str | None) -> int | None:
    try:
        name, port, pid = _port_file(key).read_text().split()
    except (OSError, ValueError):
        return None
    if name != str(key) or not _alive(int(pid)):
        return None
    return int(port)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def agree_by_mpi(world: World) -> World | None:
    """Rank 0's address and a free port, broadcast with mpi4py; None without a usable MPI.

    mpi4py loaded with another MPI than the launcher's (MPICH's mpiexec, Open MPI's library)
    sees a world of its own, of one rank: it is then of no use.
    """
    comm = _mpi_comm_world()
    if comm is None:
        return None
    if (comm.Get_rank(), comm.Get_size()) != (world.rank, world.world_size):
        return None
    offer = None
    if world.rank == 0:
        offer = (world.master_addr or _host_address(), world.master_port or _free_port())
    addr, port = comm.bcast(offer, root=0)
    return replace(world, master_addr=addr, master_port=int(port))


def _mpi_comm_world() -> Any | None:
    """mpi4py's COMM_WORLD; None when mpi4py is missing or finds no MPI library to load."""
    try:
        from mpi4py import MPI
    except (ImportError, RuntimeError):
        return None
    return MPI.COMM_WORLD


def _host_address() -> str:
    """This host's address as other nodes reach it.

    Debian-style /etc/hosts maps the hostname to 127.0.1.1, useless to other nodes: prefer a
    non-loopback address, else the bare hostname.
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
    return host


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])
