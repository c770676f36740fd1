"""Place the ranks of one node on its cpus, and bind them there.

`plan_placements` is pure (topology in, placements out) so it can be tested on any machine
described as data; `apply_binding` is the only part that touches the running process.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from scalescope.launch.machine.topology import Topology, format_cpulist, parse_cpulist
from scalescope.launch.options.groups import MappingError

MAP_BY = ("node", "socket", "numa", "core")
ALLOCATORS = {
    "tcmalloc": ("libtcmalloc.so*", "libtcmalloc_minimal.so*"),
    "jemalloc": ("libjemalloc.so*",),
}

Cores = tuple[tuple[int, ...], ...]
"""Physical cores, each as the cpu ids of its hardware threads."""


@dataclass(frozen=True)
class Placement:
    """Where one local rank runs."""

    local_rank: int
    cpus: tuple[int, ...]
    """Bound cpus: the first hardware thread of each core, then the siblings, so OMP_PLACES
    fills physical cores before hyper-threads."""
    numa_node: int | None
    """The NUMA node holding all of `cpus`, None if they span several."""
    socket: int | None
    threads: int
    """Intra-op threads (OMP_NUM_THREADS, torch.set_num_threads)."""


@dataclass(frozen=True)
class _Domain:
    label: str
    """How messages name it: "NUMA node 1", "socket 0", "the node"."""
    cores: Cores


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def plan_placements(
    topology: Topology,
    nproc: int,
    map_by: str = "numa",
    threads_per_rank: int | None = None,
    numa_nodes: list[int] | None = None,
    cpu_lists: list[str] | None = None,
    oversubscribe: bool = False,
) -> list[Placement]:
    """Give each of `nproc` local ranks its cpus and thread count.

    Ranks fill the domains (node, sockets, NUMA nodes) in blocks: consecutive local ranks share
    a domain, and each gets an equal, disjoint share of its physical cores (hyper-thread
    siblings go with their core). `core` gives each rank `threads_per_rank` consecutive cores.
    `cpu_lists` (one per rank) replace the mapping. Raises MappingError for a plan that
    would oversubscribe cores unless `oversubscribe`, in which case ranks share cores.
    """
    _check_arguments(nproc, map_by, threads_per_rank)
    if not topology.cpus:
        raise MappingError("no cpus available to this process; check its cpu affinity")
    if cpu_lists is not None:
        if numa_nodes:
            raise MappingError("give either cpu lists or NUMA nodes, not both")
        return _explicit(topology, nproc, cpu_lists, threads_per_rank, oversubscribe)
    if numa_nodes:
        topology = _select_numa(topology, numa_nodes)
    if map_by == "core":
        return _map_cores(topology, nproc, threads_per_rank or 1, oversubscribe)
    _check_total(nproc, threads_per_rank or 1, topology.num_cores, oversubscribe)
    domains = _domains(topology, map_by)
    counts = _block_counts(nproc, len(domains))
    placements: list[Placement] = []
    for domain, count in zip(domains, counts, strict=True):
        shares = _shares(domain, count, oversubscribe)
        for cores in shares:
            rank = len(placements)
            threads = _threads(rank, cores, threads_per_rank, domain.label, oversubscribe)
            placements.append(_placement(topology, rank, cores, threads))
    return placements


def _check_arguments(nproc: int, map_by: str, threads_per_rank: int | None) -> None:
    if nproc < 1:
        raise MappingError(f"need at least 1 rank per node, got {nproc}")
    if map_by not in MAP_BY:
        raise MappingError(f"unknown --map-by {map_by!r}; choose one of {', '.join(MAP_BY)}")
    if threads_per_rank is not None and threads_per_rank < 1:
        raise MappingError(f"--threads-per-rank must be at least 1, got {threads_per_rank}")


def _check_total(nproc: int, threads: int, cores: int, oversubscribe: bool) -> None:
    if not oversubscribe and nproc * threads > cores:
        raise MappingError(
            f"{_plural(nproc, 'rank')} × {_plural(threads, 'thread')} = {nproc * threads} > "
            f"{_plural(cores, 'core')}; use fewer ranks or --threads-per-rank, or --oversubscribe"
        )


def _select_numa(topology: Topology, nodes: list[int]) -> Topology:
    """The topology restricted to `nodes`, refusing nodes that have no usable cpus."""
    existing = topology.numa_nodes
    for node in nodes:
        if node in existing:
            continue
        listed = ", ".join(map(str, existing))
        if node in topology.numa_memory_bytes:
            raise MappingError(
                f"NUMA node {node} has no cpus this process may use (memory-only, or outside "
                f"its cpu affinity); NUMA nodes with cpus: {listed}"
            )
        raise MappingError(f"NUMA node {node} does not exist; NUMA nodes here: {listed}")
    return topology.restricted(topology.numa_cpus(*nodes))


def _domains(topology: Topology, map_by: str) -> list[_Domain]:
    if map_by == "node":
        return [_Domain("the node", topology.physical_cores())]
    if map_by == "socket":
        return [
            _Domain(f"socket {s}", topology.physical_cores(topology.socket_cpus(s)))
            for s in topology.sockets
        ]
    return [
        _Domain(f"NUMA node {n}", topology.physical_cores(topology.numa_cpus(n)))
        for n in topology.numa_nodes
    ]


def _block_counts(nproc: int, num_domains: int) -> list[int]:
    """Ranks per domain: as even as possible, the first domains taking the remainder."""
    base, extra = divmod(nproc, num_domains)
    return [base + (d < extra) for d in range(num_domains)]


def _shares(domain: _Domain, count: int, oversubscribe: bool) -> list[Cores]:
    """Split a domain's cores among `count` ranks: equal, disjoint, in order.

    Equal rather than "spread the remainder": in synchronous data parallel the slowest rank
    sets the pace, so an extra core for some ranks only idles. With more ranks than cores
    (oversubscribe only) each rank gets one core, round robin.
    """
    cores = domain.cores
    if count == 0:
        return []
    if count <= len(cores):
        size = len(cores) // count
        return [cores[i * size : (i + 1) * size] for i in range(count)]
    if not oversubscribe:
        raise MappingError(
            f"{_plural(count, 'rank')} on {domain.label}, which has only "
            f"{_plural(len(cores), 'core')}; use fewer ranks, another --map-by, or --oversubscribe"
        )
    return [(cores[i % len(cores)],) for i in range(count)]


def _threads(
    rank: int, cores: Cores, threads_per_rank: int | None, where: str, oversubscribe: bool
) -> int:
    if threads_per_rank is None:
        return max(1, len(cores))
    if threads_per_rank > len(cores) and not oversubscribe:
        raise MappingError(
            f"rank {rank} gets {_plural(len(cores), 'core')} on {where} but "
            f"{_plural(threads_per_rank, 'thread')}; use --threads-per-rank {len(cores)} or "
            "less, fewer ranks, a larger --map-by domain, or --oversubscribe"
        )
    return threads_per_rank


def _ordered_cpus(cores: Cores) -> tuple[int, ...]:
    """First thread of every core, then the second threads, ...; no duplicates."""
    depth = max((len(core) for core in cores), default=0)
    ordered = [core[t] for t in range(depth) for core in cores if t < len(core)]
    return tuple(dict.fromkeys(ordered))


def _placement(topology: Topology, rank: int, cores: Cores, threads: int) -> Placement:
    cpus = _ordered_cpus(cores)
    return Placement(rank, cpus, topology.numa_of(cpus), topology.socket_of(cpus), threads)


def _map_cores(
    topology: Topology, nproc: int, per_rank: int, oversubscribe: bool
) -> list[Placement]:
    """Each rank gets `per_rank` consecutive physical cores; wraps round only if allowed."""
    cores = topology.physical_cores()
    _check_total(nproc, per_rank, len(cores), oversubscribe)
    return [
        _placement(
            topology,
            rank,
            tuple(cores[(rank * per_rank + i) % len(cores)] for i in range(per_rank)),
            per_rank,
        )
        for rank in range(nproc)
    ]


def _explicit(
    topology: Topology,
    nproc: int,
    cpu_lists: list[str],
    threads_per_rank: int | None,
    oversubscribe: bool,
) -> list[Placement]:
    if len(cpu_lists) != nproc:
        raise MappingError(
            f"got {_plural(len(cpu_lists), 'cpu list')} for {_plural(nproc, 'rank')}; "
            "give exactly one per rank"
        )
    parsed = [_parse_rank_cpus(topology, rank, text) for rank, text in enumerate(cpu_lists)]
    if not oversubscribe:
        _check_disjoint(parsed)
    placements = []
    for rank, cpus in enumerate(parsed):
        cores = topology.physical_cores(cpus)
        label = f"cpus {format_cpulist(cpus)}"
        threads = _threads(rank, cores, threads_per_rank, label, oversubscribe)
        placements.append(_placement(topology, rank, cores, threads))
    return placements


def _parse_rank_cpus(topology: Topology, rank: int, text: str) -> tuple[int, ...]:
    try:
        cpus = parse_cpulist(text)
    except ValueError as error:
        raise MappingError(f"cpu list of rank {rank}: {error}") from None
    if not cpus:
        raise MappingError(f"cpu list of rank {rank} is empty; give cpus such as '0-3'")
    missing = sorted(set(cpus) - set(topology.cpu_ids))
    if missing:
        raise MappingError(
            f"cpus {format_cpulist(missing)} in the cpu list of rank {rank} ({text!r}) are not "
            f"available here; this process may use cpus {format_cpulist(topology.cpu_ids)}"
        )
    return cpus


def _check_disjoint(cpu_sets: list[tuple[int, ...]]) -> None:
    owners: dict[int, list[int]] = {}
    for rank, cpus in enumerate(cpu_sets):
        for cpu in cpus:
            owners.setdefault(cpu, []).append(rank)
    shared = sorted(cpu for cpu, ranks in owners.items() if len(ranks) > 1)
    if shared:
        ranks = sorted({r for cpu in shared for r in owners[cpu]})
        raise MappingError(
            f"cpu lists overlap on cpus {format_cpulist(shared)} (ranks "
            f"{', '.join(map(str, ranks))}); give each rank its own cpus, or --oversubscribe"
        )


def omp_env(placement: Placement, intel_openmp: bool) -> dict[str, str]:
    """OpenMP variables pinning a rank's threads to its cpus, one place per cpu."""
    env = {
        "OMP_NUM_THREADS": str(placement.threads),
        "OMP_PROC_BIND": "close",
        "OMP_PLACES": ",".join(f"{{{cpu}}}" for cpu in placement.cpus),
    }
    if intel_openmp:
        # Intel's runtime: compact pinning, and idle threads stop spinning after 1 ms so
        # they do not steal the cores from gloo's communication threads.
        env["KMP_AFFINITY"] = "granularity=fine,compact,1,0"
        env["KMP_BLOCKTIME"] = "1"
    return env


def _library_dirs() -> list[Path]:
    machine = platform.machine()
    candidates = [os.environ.get("CONDA_PREFIX", ""), sys.prefix]
    dirs = [Path(p) / "lib" for p in candidates if p]
    dirs += [Path(p) for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p]
    dirs += [Path(p) for p in ("/usr/local/lib", f"/usr/lib/{machine}-linux-gnu", "/usr/lib64")]
    dirs += [Path(p) for p in ("/usr/lib", f"/lib/{machine}-linux-gnu", "/lib64", "/lib")]
    return [d for d in dict.fromkeys(dirs) if d.is_dir()]


def _ldconfig_libraries() -> list[Path]:
    """Libraries of this machine's word size that the dynamic loader cache knows."""
    for command in ("ldconfig", "/sbin/ldconfig"):
        try:
            done = subprocess.run(
                [command, "-p"], capture_output=True, text=True, timeout=10, check=True
            )
            break
        except (OSError, subprocess.SubprocessError):
            continue
    else:
        return []
    arch = {"x86_64": "x86-64", "aarch64": "AArch64"}.get(platform.machine())
    found = []
    for line in done.stdout.splitlines():
        name, arrow, path = line.partition("=>")
        if arrow and (arch is None or arch in name):
            found.append(Path(path.strip()))
    return found


def _shortest(paths: Iterable[Path]) -> Path | None:
    """The plainest name among matches (libjemalloc.so.2 before libjemalloc.so.2.debug)."""
    files = [p for p in paths if p.is_file()]
    return min(files, key=lambda p: (len(p.name), p.name)) if files else None


def find_allocator(name: str, search_dirs: Iterable[Path] | None = None) -> Path | None:
    """The shared library of `name` (tcmalloc, jemalloc) to LD_PRELOAD, or None if absent.

    "default" (glibc malloc) is always None. Looks in `search_dirs` (default: the active
    environment's lib, LD_LIBRARY_PATH and the system lib dirs), then in `ldconfig -p`.
    """
    if name == "default":
        return None
    if name not in ALLOCATORS:
        raise MappingError(f"unknown allocator {name!r}; choose tcmalloc, jemalloc or default")
    dirs = _library_dirs() if search_dirs is None else list(search_dirs)
    for pattern in ALLOCATORS[name]:
        for directory in dirs:
            found = _shortest(directory.glob(pattern))
            if found:
                return found
    cached = _ldconfig_libraries()
    for pattern in ALLOCATORS[name]:
        found = _shortest(p for p in cached if p.match(pattern))
        if found:
            return found
    return None


def apply_binding(placement: Placement) -> None:
    """Bind the calling process to its cpus.

    Call it in the rank before torch is imported: threads started later (the OpenMP pool,
    gloo's) inherit the mask, threads started earlier keep theirs. Raises OSError if a cpu
    is outside what the process may use. A no-op where the OS has no affinity call.
    """
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, placement.cpus)


def plan_to_json(placements: Iterable[Placement]) -> list[dict[str, object]]:
    """Plain dicts for run.json and --dry-run, with the cpus also as a cpulist string."""
    return [
        {**asdict(p), "cpus": list(p.cpus), "cpulist": format_cpulist(p.cpus)} for p in placements
    ]
