"""The CPU topology of a machine as the OS reports it: cpus, physical cores, sockets, NUMA nodes.

Read from sysfs first (`/sys/devices/system/{node,cpu}`), then `lscpu -p`, and only as a
last resort assumed to be one socket with one NUMA node; `Topology.source` says which.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from scalescope.probe.binding import format_cpulist

REAL_SYSFS = Path("/sys")
_NODE_DIR = re.compile(r"node(\d+)$")
_MEMTOTAL = re.compile(r"^Node\s+\d+\s+MemTotal:\s+(\d+)\s*kB", re.MULTILINE)


def parse_cpulist(text: str) -> tuple[int, ...]:
    """Parse a Linux cpulist such as "0-3,8,10-11" into sorted, unique cpu ids."""
    cpus: set[int] = set()
    for part in text.replace(" ", "").strip().split(","):
        if not part:
            continue
        first, sep, last = part.partition("-")
        if not (first.isdigit() and (not sep or last.isdigit())):
            raise ValueError(f"bad cpu list {text!r}: {part!r} is not N or N-M (e.g. '0-3,8')")
        lo, hi = int(first), int(last) if sep else int(first)
        if hi < lo:
            raise ValueError(f"bad cpu list {text!r}: range {part!r} runs backwards")
        cpus.update(range(lo, hi + 1))
    return tuple(sorted(cpus))


@dataclass(frozen=True, order=True)
class Cpu:
    """One logical cpu (hardware thread)."""

    id: int
    core: int
    """Core id as the OS gives it; with sysfs only unique within a socket, so a physical
    core is identified by (socket, core)."""
    socket: int
    numa: int


@dataclass(frozen=True)
class Topology:
    """The cpus a process may use, grouped into cores, sockets and NUMA nodes."""

    cpus: tuple[Cpu, ...]
    numa_memory_bytes: dict[int, int] = field(default_factory=dict, hash=False)
    """MemTotal of every NUMA node the OS lists (memory-only nodes too); empty if unknown."""
    source: str = "given"
    """Where the facts came from: sysfs, lscpu, fallback (assumed), synthetic or given."""

    def __post_init__(self) -> None:
        ordered = tuple(sorted(self.cpus))
        if len({c.id for c in ordered}) != len(ordered):
            raise ValueError("a topology lists the same cpu id twice")
        object.__setattr__(self, "cpus", ordered)

    @property
    def cpu_ids(self) -> tuple[int, ...]:
        return tuple(c.id for c in self.cpus)

    @property
    def numa_nodes(self) -> tuple[int, ...]:
        """NUMA nodes that have cpus in this topology."""
        return tuple(sorted({c.numa for c in self.cpus}))

    @property
    def sockets(self) -> tuple[int, ...]:
        return tuple(sorted({c.socket for c in self.cpus}))

    def cpu(self, cpu_id: int) -> Cpu:
        for c in self.cpus:
            if c.id == cpu_id:
                return c
        raise KeyError(f"cpu {cpu_id} is not in this topology ({format_cpulist(self.cpu_ids)})")

    def numa_cpus(self, *nodes: int) -> tuple[int, ...]:
        """Cpu ids of the given NUMA nodes."""
        return tuple(c.id for c in self.cpus if c.numa in nodes)

    def socket_cpus(self, *sockets: int) -> tuple[int, ...]:
        return tuple(c.id for c in self.cpus if c.socket in sockets)

    def physical_cores(self, cpu_ids: Iterable[int] | None = None) -> tuple[tuple[int, ...], ...]:
        """Physical cores, each as its sorted cpu ids, ordered by their lowest cpu id.

        With `cpu_ids`, only those cpus are considered (a core keeps just its listed threads).
        """
        wanted = None if cpu_ids is None else set(cpu_ids)
        cores: dict[tuple[int, int], list[int]] = {}
        for c in self.cpus:
            if wanted is None or c.id in wanted:
                cores.setdefault((c.socket, c.core), []).append(c.id)
        return tuple(sorted(tuple(ids) for ids in cores.values()))

    @property
    def num_cores(self) -> int:
        return len(self.physical_cores())

    @property
    def threads_per_core(self) -> int:
        return max((len(core) for core in self.physical_cores()), default=1)

    @property
    def hyperthreading(self) -> bool:
        return self.threads_per_core > 1

    def numa_of(self, cpu_ids: Iterable[int]) -> int | None:
        """The NUMA node holding all of `cpu_ids`, None if they span several."""
        nodes = {self.cpu(i).numa for i in cpu_ids}
        return nodes.pop() if len(nodes) == 1 else None

    def socket_of(self, cpu_ids: Iterable[int]) -> int | None:
        sockets = {self.cpu(i).socket for i in cpu_ids}
        return sockets.pop() if len(sockets) == 1 else None

    def restricted(self, cpu_ids: Iterable[int]) -> Topology:
        """The same machine seen through a cpu mask (e.g. the process affinity)."""
        keep = set(cpu_ids)
        cpus = tuple(c for c in self.cpus if c.id in keep)
        return Topology(cpus, dict(self.numa_memory_bytes), self.source)

    @classmethod
    def synthetic(
        cls,
        sockets: int,
        cores_per_socket: int,
        numa_per_socket: int,
        threads_per_core: int = 1,
        numa_memory_bytes: int = 0,
    ) -> Topology:
        """A made-up machine for tests, numbered like Linux: cpus 0..C-1 are the first
        thread of every core, C..2C-1 their first siblings, and so on."""
        if min(sockets, cores_per_socket, numa_per_socket, threads_per_core) < 1:
            raise ValueError("sockets, cores, NUMA nodes and threads must all be at least 1")
        if cores_per_socket % numa_per_socket:
            raise ValueError(f"{cores_per_socket} cores do not split into {numa_per_socket} NUMA")
        total = sockets * cores_per_socket
        per_numa = cores_per_socket // numa_per_socket
        cpus = [
            Cpu(thread * total + core, core, core // cores_per_socket, core // per_numa)
            for thread in range(threads_per_core)
            for core in range(total)
        ]
        memory = {n: numa_memory_bytes for n in range(sockets * numa_per_socket)}
        return cls(tuple(cpus), memory if numa_memory_bytes else {}, "synthetic")


def read_topology(sysfs: Path = REAL_SYSFS, allowed: set[int] | None = None) -> Topology:
    """The topology of the cpus this process may use.

    `allowed` defaults to `os.sched_getaffinity(0)` when reading the real `/sys`; for another
    tree (a test fixture, a copied sysfs) it defaults to every cpu listed there.
    """
    if allowed is None and sysfs == REAL_SYSFS and hasattr(os, "sched_getaffinity"):
        allowed = set(os.sched_getaffinity(0))
    topology = _from_sysfs(sysfs) or _from_lscpu(sysfs) or _fallback(sysfs, allowed)
    if allowed is not None:
        topology = topology.restricted(allowed)
        if not topology.cpus:
            # The OS tables do not list the cpus we may use: assume rather than return nothing.
            topology = _fallback(sysfs, allowed)
    return topology


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _read_int(path: Path) -> int | None:
    text = _read_text(path)
    try:
        return None if text is None else int(text.strip())
    except ValueError:
        return None


def _node_dirs(sysfs: Path) -> list[tuple[int, Path]]:
    root = sysfs / "devices/system/node"
    if not root.is_dir():
        return []
    found = ((_NODE_DIR.match(p.name), p) for p in root.iterdir())
    return sorted((int(m.group(1)), p) for m, p in found if m)


def _read_numa_memory(sysfs: Path) -> dict[int, int]:
    memory: dict[int, int] = {}
    for node, path in _node_dirs(sysfs):
        match = _MEMTOTAL.search(_read_text(path / "meminfo") or "")
        if match:
            memory[node] = int(match.group(1)) * 1024
    return memory


def _online_cpus(sysfs: Path) -> set[int] | None:
    text = _read_text(sysfs / "devices/system/cpu/online")
    try:
        return None if text is None else set(parse_cpulist(text))
    except ValueError:
        return None


def _core_and_socket(sysfs: Path, cpu: int) -> tuple[int, int]:
    """Core id and socket of a cpu from sysfs; (cpu, 0) when the files are missing."""
    topo = sysfs / f"devices/system/cpu/cpu{cpu}/topology"
    socket = _read_int(topo / "physical_package_id")
    core = _read_int(topo / "core_id")
    # Some ARM firmware reports package -1: treat it as the one socket.
    return (cpu if core is None else core), (socket if socket is not None and socket >= 0 else 0)


def _from_sysfs(sysfs: Path) -> Topology | None:
    numa_of: dict[int, int] = {}
    for node, path in _node_dirs(sysfs):
        try:
            numa_of.update(dict.fromkeys(parse_cpulist(_read_text(path / "cpulist") or ""), node))
        except ValueError:
            return None
    online = _online_cpus(sysfs)
    if online is not None:
        numa_of = {cpu: node for cpu, node in numa_of.items() if cpu in online}
    if not numa_of:
        return None
    cpus = tuple(Cpu(cpu, *_core_and_socket(sysfs, cpu), node) for cpu, node in numa_of.items())
    return Topology(cpus, _read_numa_memory(sysfs), "sysfs")


def _run_lscpu(sysfs: Path) -> str | None:
    command = ["lscpu", "-p=CPU,CORE,SOCKET,NODE"]
    if sysfs != REAL_SYSFS and sysfs.name == "sys":
        command += ["--sysroot", str(sysfs.parent)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout


def parse_lscpu(text: str) -> tuple[Cpu, ...]:
    """Parse `lscpu -p=CPU,CORE,SOCKET,NODE`; empty fields (no NUMA support) become 0."""
    cpus = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 4 or not fields[0].isdigit():
            raise ValueError(f"unexpected lscpu line {line!r}")
        cpu = int(fields[0])
        core, socket, node = (int(f) if f.isdigit() else None for f in fields[1:])
        cpus.append(Cpu(cpu, cpu if core is None else core, socket or 0, node or 0))
    return tuple(cpus)


def _from_lscpu(sysfs: Path) -> Topology | None:
    text = _run_lscpu(sysfs)
    try:
        cpus = parse_lscpu(text) if text else ()
    except ValueError:
        return None
    return Topology(cpus, _read_numa_memory(sysfs), "lscpu") if cpus else None


def _fallback(sysfs: Path, allowed: set[int] | None) -> Topology:
    """One NUMA node; sockets and cores from sysfs where it has them."""
    ids = allowed or _online_cpus(sysfs) or set(range(os.cpu_count() or 1))
    cpus = tuple(Cpu(cpu, *_core_and_socket(sysfs, cpu), 0) for cpu in sorted(ids))
    return Topology(cpus, {}, "fallback")
