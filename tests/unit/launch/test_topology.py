"""Topology: cpulists, synthetic machines, a fake sysfs tree, the lscpu fallback, this machine."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from scalescope.launch.machine import topology as topology_module
from scalescope.launch.machine.topology import (
    Cpu,
    Topology,
    format_cpulist,
    parse_cpulist,
    parse_lscpu,
    read_topology,
)

# -- cpulists ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "cpus"),
    [
        ("0-3,8,10-11", (0, 1, 2, 3, 8, 10, 11)),
        ("", ()),
        ("5\n", (5,)),
        ("5,1,1-2", (1, 2, 5)),
        (" 0 - 1 , 4", (0, 1, 4)),
    ],
)
def test_parse_cpulist(text: str, cpus: tuple[int, ...]) -> None:
    assert parse_cpulist(text) == cpus


@pytest.mark.parametrize("text", ["a", "3-1", "1-", "-1", "0-3:2", "0;1"])
def test_parse_cpulist_refuses_bad_text(text: str) -> None:
    with pytest.raises(ValueError, match="bad cpu list"):
        parse_cpulist(text)


@pytest.mark.parametrize(
    ("cpus", "text"),
    [
        ([], ""),
        ([3], "3"),
        ([0, 1], "0-1"),
        ([0, 2], "0,2"),
        ([11, 10, 8, 3, 2, 1, 0], "0-3,8,10-11"),
    ],
)
def test_format_cpulist(cpus: list[int], text: str) -> None:
    assert format_cpulist(cpus) == text
    assert parse_cpulist(text) == tuple(sorted(cpus))


# -- synthetic machines -----------------------------------------------------------------------


def test_two_socket_xeon_without_hyperthreading() -> None:
    xeon = Topology.synthetic(sockets=2, cores_per_socket=24, numa_per_socket=2)
    assert xeon.cpu_ids == tuple(range(48))
    assert xeon.sockets == (0, 1)
    assert xeon.numa_nodes == (0, 1, 2, 3)
    assert xeon.numa_cpus(1) == tuple(range(12, 24))
    assert xeon.numa_cpus(2, 3) == tuple(range(24, 48))
    assert xeon.socket_cpus(1) == tuple(range(24, 48))
    assert xeon.num_cores == 48
    assert xeon.threads_per_core == 1
    assert not xeon.hyperthreading
    assert xeon.numa_of(range(12, 24)) == 1
    assert xeon.numa_of([11, 12]) is None
    assert xeon.socket_of([0, 23]) == 0
    assert xeon.socket_of([23, 24]) is None


def test_two_socket_xeon_with_hyperthreading_numbers_siblings_like_linux() -> None:
    xeon = Topology.synthetic(2, 24, 2, threads_per_core=2)
    assert len(xeon.cpus) == 96
    assert xeon.num_cores == 48
    assert xeon.threads_per_core == 2 and xeon.hyperthreading
    assert xeon.physical_cores()[0] == (0, 48)
    assert xeon.physical_cores()[47] == (47, 95)
    assert xeon.numa_cpus(0) == tuple(range(12)) + tuple(range(48, 60))
    assert xeon.cpu(60) == Cpu(id=60, core=12, socket=0, numa=1)
    # Restricting to some threads keeps only those threads of each core.
    assert xeon.physical_cores([0, 1, 48]) == ((0, 48), (1,))


def test_a64fx_like_machines() -> None:
    one_socket = Topology.synthetic(1, 48, 4, numa_memory_bytes=8 << 30)
    assert one_socket.numa_nodes == (0, 1, 2, 3)
    assert one_socket.sockets == (0,)
    assert [len(one_socket.numa_cpus(n)) for n in range(4)] == [12] * 4
    assert one_socket.numa_memory_bytes == {n: 8 << 30 for n in range(4)}
    cmgs = Topology.synthetic(4, 12, 1)
    assert cmgs.sockets == (0, 1, 2, 3)
    assert cmgs.numa_cpus(3) == cmgs.socket_cpus(3) == tuple(range(36, 48))


def test_synthetic_refuses_bad_shapes() -> None:
    with pytest.raises(ValueError, match="do not split"):
        Topology.synthetic(1, 10, 4)
    with pytest.raises(ValueError, match="at least 1"):
        Topology.synthetic(0, 4, 1)


def test_topology_sorts_cpus_and_refuses_duplicates() -> None:
    topo = Topology((Cpu(1, 1, 0, 0), Cpu(0, 0, 0, 0)))
    assert topo.cpu_ids == (0, 1)
    with pytest.raises(ValueError, match="twice"):
        Topology((Cpu(0, 0, 0, 0), Cpu(0, 1, 0, 0)))
    with pytest.raises(KeyError, match="cpu 7"):
        topo.cpu(7)


def test_restricted_keeps_memory_and_source() -> None:
    topo = Topology.synthetic(2, 4, 1, numa_memory_bytes=1024).restricted([4, 5])
    assert topo.cpu_ids == (4, 5)
    assert topo.numa_nodes == (1,)
    assert topo.numa_memory_bytes == {0: 1024, 1: 1024}
    assert topo.source == "synthetic"


# -- a fake sysfs tree ------------------------------------------------------------------------


def make_sysfs(
    root: Path,
    nodes: dict[int, str],
    cpus: dict[int, tuple[int, int]],
    memory_kb: dict[int, int] | None = None,
    online: str | None = None,
) -> Path:
    """Write /sys/devices/system/{node,cpu} under root/sys; cpus map id -> (socket, core_id)."""
    sysfs = root / "sys"
    cpu_root = sysfs / "devices/system/cpu"
    cpu_root.mkdir(parents=True)
    for node, cpulist in nodes.items():
        node_dir = sysfs / f"devices/system/node/node{node}"
        node_dir.mkdir(parents=True)
        (node_dir / "cpulist").write_text(cpulist + "\n")
        kb = (memory_kb or {}).get(node)
        if kb is not None:
            (node_dir / "meminfo").write_text(
                f"Node {node} MemTotal:       {kb} kB\nNode {node} MemFree:        1 kB\n"
            )
    for cpu, (socket, core) in cpus.items():
        topo = cpu_root / f"cpu{cpu}/topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text(f"{socket}\n")
        (topo / "core_id").write_text(f"{core}\n")
    if online is not None:
        (cpu_root / "online").write_text(online + "\n")
    return sysfs


def two_sockets_with_smt() -> dict[int, tuple[int, int]]:
    """2 sockets × 2 cores × 2 threads; core_id restarts at 0 on each socket, as sysfs does."""
    return {0: (0, 0), 1: (0, 1), 2: (1, 0), 3: (1, 1), 4: (0, 0), 5: (0, 1), 6: (1, 0), 7: (1, 1)}


def test_read_topology_from_sysfs(tmp_path: Path) -> None:
    sysfs = make_sysfs(
        tmp_path,
        nodes={0: "0-1,4-5", 1: "2-3,6-7"},
        cpus=two_sockets_with_smt(),
        memory_kb={0: 1000, 1: 2000},
        online="0-7",
    )
    topo = read_topology(sysfs)
    assert topo.source == "sysfs"
    assert topo.cpu_ids == tuple(range(8))
    assert topo.numa_cpus(1) == (2, 3, 6, 7)
    assert topo.sockets == (0, 1)
    assert topo.physical_cores() == ((0, 4), (1, 5), (2, 6), (3, 7))
    assert topo.threads_per_core == 2
    assert topo.numa_memory_bytes == {0: 1000 * 1024, 1: 2000 * 1024}


def test_read_topology_keeps_non_zero_ids_and_memory_only_nodes(tmp_path: Path) -> None:
    # Like an A64FX node whose assistant cores are hidden: cpus 12-59 on NUMA nodes 4-7, and a
    # node with memory but no cpus.
    nodes = {4 + i: f"{12 + 12 * i}-{23 + 12 * i}" for i in range(4)} | {0: ""}
    cpus = {cpu: (0, cpu) for cpu in range(12, 60)}
    sysfs = make_sysfs(tmp_path, nodes, cpus, memory_kb={0: 64, 4: 100, 5: 100, 6: 100, 7: 100})
    topo = read_topology(sysfs)
    assert topo.numa_nodes == (4, 5, 6, 7)
    assert topo.numa_cpus(5) == tuple(range(24, 36))
    assert set(topo.numa_memory_bytes) == {0, 4, 5, 6, 7}


def test_read_topology_restricts_to_allowed_and_online(tmp_path: Path) -> None:
    sysfs = make_sysfs(tmp_path, {0: "0-1,4-5", 1: "2-3,6-7"}, two_sockets_with_smt(), online="0-6")
    assert read_topology(sysfs).cpu_ids == tuple(range(7))
    topo = read_topology(sysfs, allowed={2, 6, 7})
    assert topo.cpu_ids == (2, 6)
    assert topo.physical_cores() == ((2, 6),)


def fake_run(stdout: str | None, calls: list[list[str]]):
    def run(command, **kwargs):
        calls.append(list(command))
        if stdout is None:
            raise FileNotFoundError(command[0])
        return subprocess.CompletedProcess(command, 0, stdout=stdout, stderr="")

    return run


LSCPU = """# The following is the parsable format, which can be fed to other
# programs. Each different item in every column has an unique ID
# CPU,Core,Socket,Node
0,0,0,0
1,1,0,0
2,2,1,1
3,3,1,1
"""


def test_lscpu_fallback_without_node_info(tmp_path: Path, monkeypatch) -> None:
    sysfs = make_sysfs(tmp_path, nodes={}, cpus={})
    calls: list[list[str]] = []
    monkeypatch.setattr(topology_module.subprocess, "run", fake_run(LSCPU, calls))
    topo = read_topology(sysfs)
    assert topo.source == "lscpu"
    assert calls == [["lscpu", "-p=CPU,CORE,SOCKET,NODE", "--sysroot", str(tmp_path)]]
    assert topo.numa_nodes == (0, 1)
    assert topo.socket_cpus(1) == (2, 3)
    assert read_topology(sysfs, allowed={1, 2}).cpu_ids == (1, 2)


def test_parse_lscpu_without_numa_and_bad_lines() -> None:
    cpus = parse_lscpu("# CPU,Core,Socket,Node\n0,0,0,\n1,0,0,\n")
    assert cpus == (Cpu(0, 0, 0, 0), Cpu(1, 0, 0, 0))
    with pytest.raises(ValueError, match="unexpected lscpu line"):
        parse_lscpu("0,0,0\n")


def test_last_fallback_is_one_numa_node(tmp_path: Path, monkeypatch) -> None:
    sysfs = make_sysfs(tmp_path, nodes={}, cpus=two_sockets_with_smt(), online="0-7")
    monkeypatch.setattr(topology_module.subprocess, "run", fake_run(None, []))
    topo = read_topology(sysfs)
    assert topo.source == "fallback"
    assert topo.numa_nodes == (0,)
    # Sockets and cores still come from sysfs where it has them.
    assert topo.sockets == (0, 1)
    assert topo.num_cores == 4
    # With nothing at all: the allowed cpus, one socket, one core each.
    bare = tmp_path / "bare" / "sys"
    bare.mkdir(parents=True)
    topo = read_topology(bare, allowed={0, 1, 2})
    assert topo.cpus == (Cpu(0, 0, 0, 0), Cpu(1, 1, 0, 0), Cpu(2, 2, 0, 0))


def test_unparsable_lscpu_falls_back(tmp_path: Path, monkeypatch) -> None:
    sysfs = make_sysfs(tmp_path, nodes={}, cpus={}, online="0-1")
    monkeypatch.setattr(topology_module.subprocess, "run", fake_run("garbage\n", []))
    assert read_topology(sysfs).source == "fallback"


# -- this machine -----------------------------------------------------------------------------


def test_read_topology_of_this_machine() -> None:
    allowed = os.sched_getaffinity(0)
    topo = read_topology()
    assert topo.cpu_ids == tuple(sorted(allowed))
    assert 1 <= topo.num_cores <= len(allowed)
    assert sorted(c for core in topo.physical_cores() for c in core) == sorted(allowed)
    assert sum(len(topo.numa_cpus(n)) for n in topo.numa_nodes) == len(allowed)
    node_root = Path("/sys/devices/system/node")
    if node_root.is_dir():
        assert topo.source == "sysfs"
        for node in topo.numa_nodes:
            assert (node_root / f"node{node}").is_dir()
            assert topo.numa_memory_bytes[node] > 0


@pytest.mark.skipif(shutil.which("lscpu") is None, reason="no lscpu here")
def test_this_machine_agrees_with_lscpu() -> None:
    text = subprocess.run(
        ["lscpu", "-p=CPU,CORE,SOCKET,NODE"], capture_output=True, text=True, check=True
    ).stdout
    by_lscpu = {c.id: (c.socket, c.numa) for c in parse_lscpu(text)}
    for cpu in read_topology().cpus:
        assert by_lscpu[cpu.id] == (cpu.socket, cpu.numa)
