"""Mapping ranks to cpus on topologies given as data, the refusals, and binding for real."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from scalescope.launch.machine.topology import Cpu, Topology, format_cpulist, read_topology
from scalescope.launch.options.groups import MappingError
from scalescope.launch.placement import mapping as mapping_module
from scalescope.launch.placement.mapping import (
    Placement,
    apply_binding,
    find_allocator,
    omp_env,
    plan_placements,
    plan_to_json,
)

XEON = Topology.synthetic(sockets=2, cores_per_socket=24, numa_per_socket=2)
XEON_HT = Topology.synthetic(2, 24, 2, threads_per_core=2)
A64FX = Topology.synthetic(1, 48, 4)
A64FX_CMGS = Topology.synthetic(4, 12, 1)
SMALL = Topology.synthetic(1, 2, 1)


def cpulists(placements: list[Placement]) -> list[str]:
    return [format_cpulist(p.cpus) for p in placements]


def refused(message: str, topology: Topology, nproc: int, **kwargs) -> None:
    with pytest.raises(MappingError, match=f"^{re.escape(message)}$"):
        plan_placements(topology, nproc, **kwargs)


# -- map-by numa / socket / node / core ----------------------------------------------------


def test_numa_one_rank_per_domain() -> None:
    plan = plan_placements(XEON, 4, "numa")
    assert cpulists(plan) == ["0-11", "12-23", "24-35", "36-47"]
    assert [p.local_rank for p in plan] == [0, 1, 2, 3]
    assert [p.numa_node for p in plan] == [0, 1, 2, 3]
    assert [p.socket for p in plan] == [0, 0, 1, 1]
    assert [p.threads for p in plan] == [12] * 4


def test_numa_two_ranks_per_domain_like_ppr_2() -> None:
    plan = plan_placements(XEON, 8, "numa")
    assert cpulists(plan) == [f"{6 * i}-{6 * i + 5}" for i in range(8)]
    assert [p.numa_node for p in plan] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert {p.threads for p in plan} == {6}


def test_numa_with_hyperthreading_keeps_siblings_with_their_core() -> None:
    plan = plan_placements(XEON_HT, 4, "numa")
    assert cpulists(plan) == ["0-11,48-59", "12-23,60-71", "24-35,72-83", "36-47,84-95"]
    assert plan[0].cpus == tuple(range(12)) + tuple(range(48, 60))
    assert [p.threads for p in plan] == [12] * 4
    assert cpulists(plan_placements(XEON_HT, 8, "numa"))[:2] == ["0-5,48-53", "6-11,54-59"]


def test_numa_blocks_when_ranks_do_not_divide_domains() -> None:
    plan = plan_placements(XEON, 6, "numa")
    assert cpulists(plan) == ["0-5", "6-11", "12-17", "18-23", "24-35", "36-47"]
    assert [p.threads for p in plan] == [6, 6, 6, 6, 12, 12]
    one = plan_placements(XEON, 1, "numa")
    assert cpulists(one) == ["0-11"] and one[0].threads == 12


def test_socket() -> None:
    plan = plan_placements(XEON, 2, "socket")
    assert cpulists(plan) == ["0-23", "24-47"]
    assert [p.numa_node for p in plan] == [None, None]
    assert [p.socket for p in plan] == [0, 1]
    assert [p.threads for p in plan] == [24, 24]
    four = plan_placements(XEON, 4, "socket")
    assert cpulists(four) == ["0-11", "12-23", "24-35", "36-47"]
    assert [p.numa_node for p in four] == [0, 1, 2, 3]


def test_node_equal_shares_leave_the_remainder_idle() -> None:
    whole = plan_placements(XEON, 1, "node")
    assert cpulists(whole) == ["0-47"]
    assert (whole[0].numa_node, whole[0].socket, whole[0].threads) == (None, None, 48)
    assert cpulists(plan_placements(XEON, 3, "node")) == ["0-15", "16-31", "32-47"]
    five = plan_placements(XEON, 5, "node")
    assert cpulists(five) == ["0-8", "9-17", "18-26", "27-35", "36-44"]
    assert {p.threads for p in five} == {9}


def test_core() -> None:
    plan = plan_placements(XEON, 4, "core")
    assert cpulists(plan) == ["0", "1", "2", "3"]
    assert {p.threads for p in plan} == {1}
    six = plan_placements(XEON, 8, "core", threads_per_rank=6)
    assert cpulists(six) == [f"{6 * i}-{6 * i + 5}" for i in range(8)]
    assert [p.threads for p in six] == [6] * 8
    assert cpulists(plan_placements(XEON_HT, 2, "core", threads_per_rank=2)) == [
        "0-1,48-49",
        "2-3,50-51",
    ]
    # A rank straddling two NUMA nodes says so.
    straddle = plan_placements(XEON, 3, "core", threads_per_rank=10)
    assert [p.numa_node for p in straddle] == [0, None, None]


def test_threads_per_rank_below_the_share_keeps_the_binding() -> None:
    plan = plan_placements(XEON, 4, "numa", threads_per_rank=4)
    assert cpulists(plan) == ["0-11", "12-23", "24-35", "36-47"]
    assert {p.threads for p in plan} == {4}


def test_a64fx_one_rank_per_cmg_with_12_threads() -> None:
    for topology, map_by in [(A64FX, "numa"), (A64FX_CMGS, "numa"), (A64FX_CMGS, "socket")]:
        plan = plan_placements(topology, 4, map_by)
        assert cpulists(plan) == ["0-11", "12-23", "24-35", "36-47"]
        assert [p.numa_node for p in plan] == [0, 1, 2, 3]
        assert [p.threads for p in plan] == [12] * 4
    assert cpulists(plan_placements(A64FX, 8))[:2] == ["0-5", "6-11"]
    assert len(plan_placements(A64FX, 48, "core")) == 48


def test_small_machine() -> None:
    assert cpulists(plan_placements(SMALL, 2)) == ["0", "1"]
    one = plan_placements(SMALL, 1)
    assert cpulists(one) == ["0-1"] and one[0].threads == 2


def test_numa_nodes_restrict_the_domains() -> None:
    assert cpulists(plan_placements(XEON, 2, numa_nodes=[3, 1])) == ["12-23", "36-47"]
    assert cpulists(plan_placements(XEON, 2, "socket", numa_nodes=[0])) == ["0-5", "6-11"]


def test_explicit_cpu_lists() -> None:
    plan = plan_placements(XEON, 2, cpu_lists=["0-11", "12-23"])
    assert cpulists(plan) == ["0-11", "12-23"]
    assert [(p.numa_node, p.threads) for p in plan] == [(0, 12), (1, 12)]
    ht = plan_placements(XEON_HT, 1, cpu_lists=["48-49,0-1"])
    assert ht[0].cpus == (0, 1, 48, 49) and ht[0].threads == 2
    assert plan_placements(XEON, 1, cpu_lists=["0-7"], threads_per_rank=3)[0].threads == 3


@pytest.mark.parametrize("topology", [XEON, XEON_HT, A64FX, A64FX_CMGS, SMALL])
@pytest.mark.parametrize("map_by", ["node", "socket", "numa", "core"])
@pytest.mark.parametrize("nproc", [1, 2, 3, 4, 8, 48])
def test_every_accepted_plan_is_disjoint_and_not_oversubscribed(
    topology: Topology, map_by: str, nproc: int
) -> None:
    try:
        plan = plan_placements(topology, nproc, map_by)
    except MappingError:
        return
    cpus = [c for p in plan for c in p.cpus]
    assert len(cpus) == len(set(cpus))
    assert set(cpus) <= set(topology.cpu_ids)
    assert all(1 <= p.threads <= len(topology.physical_cores(p.cpus)) for p in plan)
    assert [p.local_rank for p in plan] == list(range(nproc))


# -- refusals -----------------------------------------------------------------------------


def test_more_threads_than_cores_is_refused() -> None:
    refused(
        "4 ranks × 2 threads = 8 > 2 cores; use fewer ranks or --threads-per-rank, "
        "or --oversubscribe",
        SMALL,
        4,
        threads_per_rank=2,
    )
    refused(
        "3 ranks × 1 thread = 3 > 2 cores; use fewer ranks or --threads-per-rank, "
        "or --oversubscribe",
        SMALL,
        3,
    )
    refused(
        "9 ranks × 6 threads = 54 > 48 cores; use fewer ranks or --threads-per-rank, "
        "or --oversubscribe",
        XEON,
        9,
        map_by="core",
        threads_per_rank=6,
    )


def test_more_threads_than_the_share_is_refused() -> None:
    refused(
        "rank 0 gets 12 cores on NUMA node 0 but 13 threads; use --threads-per-rank 12 or "
        "less, fewer ranks, a larger --map-by domain, or --oversubscribe",
        A64FX,
        1,
        threads_per_rank=13,
    )
    refused(
        "rank 0 gets 2 cores on cpus 0-1 but 4 threads; use --threads-per-rank 2 or less, "
        "fewer ranks, a larger --map-by domain, or --oversubscribe",
        XEON,
        2,
        cpu_lists=["0-1", "2-3"],
        threads_per_rank=4,
    )


def test_more_ranks_than_a_domain_has_cores_is_refused() -> None:
    lopsided = XEON.restricted([0, *range(12, 48)])  # NUMA node 0 keeps one core
    refused(
        "2 ranks on NUMA node 0, which has only 1 core; use fewer ranks, another --map-by, "
        "or --oversubscribe",
        lopsided,
        8,
    )


def test_unknown_numa_node_is_refused() -> None:
    refused("NUMA node 5 does not exist; NUMA nodes here: 0, 1, 2, 3", XEON, 1, numa_nodes=[5])
    memory_only = Topology((Cpu(12, 0, 0, 4), Cpu(13, 1, 0, 4)), {0: 1 << 30, 4: 1 << 30})
    refused(
        "NUMA node 0 has no cpus this process may use (memory-only, or outside its cpu "
        "affinity); NUMA nodes with cpus: 4",
        memory_only,
        1,
        numa_nodes=[0],
    )


def test_bad_cpu_lists_are_refused() -> None:
    refused(
        "cpus 48-49 in the cpu list of rank 1 ('46-49') are not available here; this process "
        "may use cpus 0-47",
        XEON,
        2,
        cpu_lists=["0-3", "46-49"],
    )
    refused(
        "cpu lists overlap on cpus 8-11 (ranks 0, 1); give each rank its own cpus, or "
        "--oversubscribe",
        XEON,
        3,
        cpu_lists=["0-11", "8-19", "20-23"],
    )
    refused("got 1 cpu list for 2 ranks; give exactly one per rank", XEON, 2, cpu_lists=["0-3"])
    refused("cpu list of rank 0 is empty; give cpus such as '0-3'", XEON, 1, cpu_lists=[""])
    refused(
        "cpu list of rank 0: bad cpu list '0-x': '0-x' is not N or N-M (e.g. '0-3,8')",
        XEON,
        1,
        cpu_lists=["0-x"],
    )
    refused(
        "give either cpu lists or NUMA nodes, not both", XEON, 1, cpu_lists=["0"], numa_nodes=[0]
    )


def test_bad_arguments_are_refused() -> None:
    refused("need at least 1 rank per node, got 0", XEON, 0)
    refused(
        "unknown --map-by 'l3cache'; choose one of node, socket, numa, core",
        XEON,
        1,
        map_by="l3cache",
    )
    refused("--threads-per-rank must be at least 1, got 0", XEON, 1, threads_per_rank=0)
    refused("no cpus available to this process; check its cpu affinity", Topology(()), 1)


# -- oversubscribe ------------------------------------------------------------------------


def test_oversubscribe_shares_cores_round_robin() -> None:
    plan = plan_placements(SMALL, 4, oversubscribe=True)
    assert cpulists(plan) == ["0", "1", "0", "1"]
    assert {p.threads for p in plan} == {1}
    assert {
        p.threads for p in plan_placements(SMALL, 4, threads_per_rank=2, oversubscribe=True)
    } == {2}
    core = plan_placements(SMALL, 3, "core", oversubscribe=True)
    assert cpulists(core) == ["0", "1", "0"]
    wide = plan_placements(SMALL, 1, threads_per_rank=4, oversubscribe=True)
    assert cpulists(wide) == ["0-1"] and wide[0].threads == 4
    shared = plan_placements(SMALL, 2, cpu_lists=["0-1", "1"], oversubscribe=True)
    assert cpulists(shared) == ["0-1", "1"]


# -- environment, allocator, json ---------------------------------------------------------


def test_omp_env() -> None:
    placement = Placement(0, (0, 1, 48, 49), 0, 0, 2)
    assert omp_env(placement, intel_openmp=False) == {
        "OMP_NUM_THREADS": "2",
        "OMP_PROC_BIND": "close",
        "OMP_PLACES": "{0},{1},{48},{49}",
    }
    intel = omp_env(placement, intel_openmp=True)
    assert intel["KMP_AFFINITY"] == "granularity=fine,compact,1,0"
    assert intel["KMP_BLOCKTIME"] == "1"
    assert intel["OMP_PLACES"] == "{0},{1},{48},{49}"


def fake_ldconfig(monkeypatch, stdout: str | None) -> None:
    def run(command, **kwargs):
        if stdout is None:
            raise FileNotFoundError(command[0])
        return subprocess.CompletedProcess(command, 0, stdout=stdout, stderr="")

    monkeypatch.setattr(mapping_module.subprocess, "run", run)
    monkeypatch.setattr(mapping_module.platform, "machine", lambda: "x86_64")


def test_find_allocator_in_dirs(tmp_path: Path, monkeypatch) -> None:
    fake_ldconfig(monkeypatch, None)
    assert find_allocator("default") is None
    assert find_allocator("jemalloc", [tmp_path]) is None
    (tmp_path / "libjemalloc.so.2").write_bytes(b"")
    (tmp_path / "libjemalloc.so.2.debug").write_bytes(b"")
    assert find_allocator("jemalloc", [tmp_path]) == tmp_path / "libjemalloc.so.2"
    (tmp_path / "libtcmalloc_minimal.so.4").write_bytes(b"")
    assert find_allocator("tcmalloc", [tmp_path]) == tmp_path / "libtcmalloc_minimal.so.4"
    (tmp_path / "libtcmalloc.so.4").write_bytes(b"")
    assert find_allocator("tcmalloc", [tmp_path]) == tmp_path / "libtcmalloc.so.4"
    with pytest.raises(MappingError, match="unknown allocator 'mimalloc'; choose tcmalloc"):
        find_allocator("mimalloc")


def test_find_allocator_through_ldconfig(tmp_path: Path, monkeypatch) -> None:
    lib32, lib64 = tmp_path / "32", tmp_path / "64"
    for d in (lib32, lib64):
        d.mkdir()
        (d / "libtcmalloc.so.4").write_bytes(b"")
    fake_ldconfig(
        monkeypatch,
        "2 libs found in cache `/etc/ld.so.cache'\n"
        f"\tlibtcmalloc.so.4 (libc6) => {lib32}/libtcmalloc.so.4\n"
        f"\tlibtcmalloc.so.4 (libc6,x86-64) => {lib64}/libtcmalloc.so.4\n",
    )
    assert find_allocator("tcmalloc", []) == lib64 / "libtcmalloc.so.4"
    assert find_allocator("jemalloc", []) is None


def test_plan_to_json() -> None:
    rows = plan_to_json(plan_placements(XEON_HT, 2, "socket"))
    assert rows[1] == {
        "local_rank": 1,
        "cpus": [*range(24, 48), *range(72, 96)],
        "cpulist": "24-47,72-95",
        "numa_node": None,
        "socket": 1,
        "threads": 24,
    }
    assert json.loads(json.dumps(rows)) == rows


# -- this machine -------------------------------------------------------------------------


def test_plan_and_bind_on_this_machine() -> None:
    topology = read_topology()
    allowed = os.sched_getaffinity(0)
    cores = topology.num_cores
    plan = plan_placements(topology, cores, "core")
    assert sorted(c for p in plan for c in p.cpus) == sorted(allowed)
    with pytest.raises(MappingError, match="use fewer ranks"):
        plan_placements(topology, cores + 1, "core")
    assert len(plan_placements(topology, cores + 1, "core", oversubscribe=True)) == cores + 1
    try:
        for placement in plan:
            apply_binding(placement)
            assert os.sched_getaffinity(0) == set(placement.cpus)
    finally:
        os.sched_setaffinity(0, allowed)
    assert os.sched_getaffinity(0) == allowed


def test_binding_to_an_unavailable_cpu_fails_loudly() -> None:
    outside = max(os.sched_getaffinity(0)) + 1000
    with pytest.raises(OSError):
        apply_binding(Placement(0, (outside,), None, None, 1))
